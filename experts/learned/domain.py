"""MECAT domain from a learned tagger: speech, music and other-sound presence per 2 s window and per clip.

The embedded default for the `domain` slot. A small network over frozen features — the Whisper tiny.en
encoder the project already ships (CTranslate2), Silero VAD statistics, cheap DSP, and pooled front-/mid-end
features of the musicnn music tagger (MTT_musicnn, its `musicnn` wheel's checkpoint run by a numpy port) —
trained on openly licensed Debian game / education / desktop audio mixed at realistic levels
(`training/`: sources, licences, the train/dev split, the exact commands and the dev-set numbers). Its
weights are package data of `earmark.experts.learned`; nothing is downloaded. It writes the domain code, the
three clip probabilities, their calibrated values (`calibrated_<head>` features: P(present) fitted on a
dev-like holdout, `training/calibrate.py`; the evidence states presence or absence only when that is sure
enough) and the per-window probabilities (the evidence says *when* each content is heard).
A clip the levels expert finds silent is 000 whatever the tagger says.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from earmark.experts.audio import samples_16k
from earmark.experts.base import ClipAudio, Context, Expert, load_once
from earmark.schemas.records import AcousticProfile, DomainDecision, LabelProb, NamedValue, WindowTags, domain_code

HEADS = ("speech", "music", "sound")
SILENT_RATIO = 0.995  # levels.silence_ratio at or above this: digital or near silence


def _tagger() -> Any:
    from earmark.experts import learned

    return learned


class LearnedDomainExpert(Expert):
    name, version, record, needs = "domain", "1", DomainDecision, ("levels",)

    def __init__(self) -> None:
        from earmark.experts import learned

        self.backend = f"probe:{learned.weights_id()}"

    def key_config(self) -> dict[str, Any]:
        from earmark.experts import learned

        return {"weights": learned.weights_id(), "silent_ratio": SILENT_RATIO}

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[DomainDecision]:
        (levels,) = self.needed(context, clips, "levels")
        probe = load_once("domain-probe", _tagger)
        return [self._decide(probe, c, levels[c.clip_id]) for c in clips]  # type: ignore[arg-type]

    def _decide(self, probe: Any, clip: ClipAudio, lv: AcousticProfile) -> DomainDecision:
        x = samples_16k(clip)
        silent = lv.silence_ratio >= SILENT_RATIO or x.size < 1600
        if x.size < 1600:  # under 0.1 s: nothing to tag
            out = {
                "clip": dict.fromkeys(HEADS, 0.0),
                "windows": [],
                "thresholds": dict.fromkeys(HEADS, 0.5),
                "calibrated": None,
            }
        else:
            out = probe.tag_clip(x)
        thresholds = out["thresholds"]
        flags = [out["clip"][h] >= thresholds[h] and not silent for h in HEADS]
        return DomainDecision(
            **self.lineage(clip.clip_id),
            domain=domain_code(*flags),
            speech_prob=round(out["clip"]["speech"], 4),
            music_prob=round(out["clip"]["music"], 4),
            sound_prob=round(out["clip"]["sound"], 4),
            silent=silent,
            features=[NamedValue(name=f"threshold_{h}", value=round(float(thresholds[h]), 4)) for h in HEADS]
            + [NamedValue(name=f"calibrated_{h}", value=round(p, 4)) for h, p in (out["calibrated"] or {}).items()],
            windows=[
                WindowTags(
                    start_s=round(w["start_s"], 3),
                    end_s=round(w["end_s"], 3),
                    tags=[LabelProb(label=h, prob=round(float(w[h]), 4)) for h in HEADS],
                )
                for w in out["windows"]
            ],
        )
