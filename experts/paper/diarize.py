"""Who spoke when: a pyannote.audio speaker-diarization pipeline from the models directory.

The pipeline directory is what `huggingface-cli download pyannote/speaker-diarization-3.1` (or
`-community-1`) writes, with the segmentation and embedding models it names downloaded beside it and its
config.yaml pointing at those local paths (pyannote's "offline use" recipe). pyannote runs one clip at a
time (it batches its own segmentation and embedding windows inside a clip). Clips where the vad table
found (almost) no speech are skipped, as in the offline default. Speakers are renamed S1, S2, … in order
of first appearance, like the offline default's labels.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from earmark.experts.audio import samples_16k
from earmark.experts.base import SAMPLE_RATE, ClipAudio, Context, Expert, load_once
from earmark.experts.models import require_package, require_weights
from earmark.schemas.records import Diarization, SpeakerTurn, SpeechActivity

NO_SPEECH_REASON = "no speech detected by VAD"
PIPELINE_HINT = (
    "on a machine with internet run `huggingface-cli download {id} --local-dir {path}` (accept the model's "
    "terms on huggingface.co first), download the segmentation and embedding models its config.yaml names "
    "into the models directory too, point config.yaml at those local paths, and copy them here"
)


def annotation_tracks(annotation: Any) -> Iterable[tuple[float, float, str]]:
    """(start_s, end_s, label) of a pyannote Annotation (3.x) or of pyannote 4's DiarizeOutput."""
    annotation = getattr(annotation, "speaker_diarization", annotation)
    for segment, _track, label in annotation.itertracks(yield_label=True):
        yield float(segment.start), float(segment.end), str(label)


def turns_to_record(
    lineage: dict[str, str], tracks: Iterable[tuple[float, float, str]], duration_s: float, min_turn_s: float = 0.05
) -> Diarization:
    """The Diarization record for pyannote's tracks: clamped to the clip, sorted, speakers S1.. by first turn."""
    clamped = ((max(0.0, s), min(duration_s, e), lab) for s, e, lab in tracks)
    kept = sorted(t for t in clamped if t[1] - t[0] >= min_turn_s)
    names: dict[str, str] = {}
    turns = []
    for start, end, label in kept:
        names.setdefault(label, f"S{len(names) + 1}")
        turns.append(SpeakerTurn(speaker=names[label], start_s=round(start, 3), end_s=round(end, 3)))
    reason = None if turns else "the diarization pipeline found no speaker turn"
    return Diarization(**lineage, n_speakers=len(names), turns=turns, skipped_reason=reason)


def _load_pipeline(path: str, device: str) -> Any:
    import torch
    from pyannote.audio import Pipeline

    config = f"{path}/config.yaml"
    pipeline = Pipeline.from_pretrained(config)
    if pipeline is None:  # pyannote returns None instead of raising when it cannot load
        raise RuntimeError(f"pyannote could not load the diarization pipeline from {config}")
    return pipeline.to(torch.device(device))


class PyannoteDiarizationExpert(Expert):
    name, version, record, needs = "diarization", "1", Diarization, ("vad",)

    def __init__(
        self,
        model_id: str,
        models_dir: Any = None,
        *,
        device: str = "cpu",
        min_speech_s: float = 0.3,
        max_speakers: int | None = None,
    ) -> None:
        require_package(
            "diarization", "pyannote.audio", "install it with `pip install pyannote.audio`", module="pyannote"
        )
        self.path = require_weights("diarization", model_id, models_dir, files=("config.yaml",), hint=PIPELINE_HINT)
        self.backend = f"pyannote.audio:{model_id}"
        self.device, self.min_speech_s, self.max_speakers = device, min_speech_s, max_speakers

    def key_config(self) -> dict[str, Any]:
        return {"min_speech_s": self.min_speech_s, "max_speakers": self.max_speakers}

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[Diarization]:
        (vad,) = self.needed(context, clips, "vad")
        return [self._one(c, vad[c.clip_id]) for c in clips]  # type: ignore[arg-type]

    def _one(self, clip: ClipAudio, activity: SpeechActivity) -> Diarization:
        if activity.speech_s < self.min_speech_s:
            return Diarization(**self.lineage(clip.clip_id), n_speakers=0, turns=[], skipped_reason=NO_SPEECH_REASON)
        import torch

        pipeline = load_once(f"pyannote:{self.path}:{self.device}", lambda: _load_pipeline(str(self.path), self.device))
        audio = samples_16k(clip)
        kwargs = {"max_speakers": self.max_speakers} if self.max_speakers else {}
        out = pipeline({"waveform": torch.from_numpy(audio)[None], "sample_rate": SAMPLE_RATE}, **kwargs)
        return turns_to_record(self.lineage(clip.clip_id), annotation_tracks(out), audio.size / SAMPLE_RATE)
