"""Speech quality: Microsoft DNSMOS (P.835 SIG/BAK/OVRL + P.808 MOS) via the `speechmos` wheel's ONNX models.

speechmos exposes DNSMOS as `speechmos.dnsmos.run(audio, sr)` backed by a module-global `DNSMOS` object;
we build our own `DNSMOS` instance once per process instead (same models, same scoring) so the expert does
not depend on that global. DNSMOS scores 9.01 s windows and tiles a shorter clip by repetition (as
Microsoft's reference script does). We tile to exactly one window ourselves: speechmos' doubling would
otherwise score up to 7 near-identical windows of a short clip, and loop forever on an empty one (scored
here as one window of digital silence). Clips are scored one at a time: feeding the ONNX models
a batch was measured slower on CPU.

Only speech is scored: the VAD speech segments of the clip, joined (`experts.audio.speech_only`). A clip
with less than `min_speech_s` of speech gets no score (None, with the reason) — DNSMOS on music or on a
door slam says "poor speech quality", which is not a fact about the recording.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import version as _pkg_version
from pathlib import Path
from typing import Any

import numpy as np

from earmark.experts.audio import samples_16k, speech_only
from earmark.experts.base import SAMPLE_RATE, ClipAudio, Context, Expert, load_once
from earmark.schemas.records import SpeechActivity, SpeechQuality


def _load_dnsmos() -> Any:
    import speechmos
    from speechmos.dnsmos import DNSMOS

    models = Path(speechmos.__file__).parent / "dnsmos_models"
    return DNSMOS(str(models / "sig_bak_ovr.onnx"), str(models / "model_v8.onnx"))


NO_SPEECH = "less than {s:g} s of VAD speech: speech quality is not defined"


class DNSMOSExpert(Expert):
    name, version, record, needs = "dnsmos", "2", SpeechQuality, ("vad",)
    backend = "speechmos:dnsmos"

    def __init__(self, min_speech_s: float = 1.0) -> None:
        self.min_speech_s = min_speech_s

    def key_config(self) -> dict[str, Any]:
        # Personalized DNSMOS (penalizes interfering talkers) is a different model; we use the standard one.
        return {
            "personalized": False,
            "speechmos": _pkg_version("speechmos"),
            "min_speech_s": self.min_speech_s,
            "speech_only": True,
        }

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[SpeechQuality]:
        (vad,) = self.needed(context, clips, "vad")
        dnsmos = load_once("speechmos:dnsmos", _load_dnsmos)
        return [self._score(dnsmos, clip, vad[clip.clip_id]) for clip in clips]  # type: ignore[arg-type]

    def _score(self, dnsmos: Any, clip: ClipAudio, activity: SpeechActivity) -> SpeechQuality:
        from speechmos.dnsmos import INPUT_LENGTH  # DNSMOS' fixed window, in seconds

        audio = speech_only(samples_16k(clip), activity.segments)
        speech_s = round(audio.size / SAMPLE_RATE, 3)
        if speech_s < self.min_speech_s:
            return SpeechQuality(
                **self.lineage(clip.clip_id),
                ovrl_mos=None,
                sig_mos=None,
                bak_mos=None,
                p808_mos=None,
                speech_s=speech_s,
                skipped_reason=NO_SPEECH.format(s=self.min_speech_s),
            )
        window = int(INPUT_LENGTH * SAMPLE_RATE)
        if audio.size == 0:
            audio = np.zeros(window, dtype=np.float32)
        elif audio.size < window:
            audio = np.resize(audio, window)  # cyclic repetition: speechmos' first window, exactly
        scores = dnsmos(audio, SAMPLE_RATE, False)
        return SpeechQuality(
            **self.lineage(clip.clip_id),
            **{k: round(float(scores[k]), 4) for k in ("ovrl_mos", "sig_mos", "bak_mos", "p808_mos")},
            speech_s=speech_s,
            skipped_reason=None,
        )
