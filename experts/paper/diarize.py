"""Who spoke when: a pyannote.audio speaker-diarization pipeline from the models directory.

The pipeline directory is what `huggingface-cli download pyannote/speaker-diarization-community-1` writes:
its config.yaml names its segmentation, embedding and PLDA subfolders (`$model/...`), so it loads offline
as it is. A 3.x pipeline (`-3.1`) names hub models instead: download those beside it and point config.yaml
at the local paths (pyannote's "offline use" recipe); pyannote.audio 4 also loads a PLDA for every
SpeakerDiarization pipeline, which a 3.x config.yaml does not name, so pyannote would fetch community-1's
from the hub: such a config fails here, when the expert is built, saying what to add. pyannote's usage
telemetry (on by default in 4.x, sent to pyannote.ai) is switched off. pyannote runs one clip at a
time (it batches its own segmentation and embedding windows inside a clip). Clips where the vad table
found (almost) no speech are skipped, as in the offline default. Speakers are renamed S1, S2, … in order
of first appearance, like the offline default's labels.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from earmark.experts.audio import samples_16k
from earmark.experts.base import SAMPLE_RATE, ClipAudio, Context, Expert, load_once
from earmark.experts.models import MissingWeights, require_package, require_weights
from earmark.schemas.records import Diarization, SpeakerTurn, SpeechActivity

NO_SPEECH_REASON = "no speech detected by VAD"
DEFAULT_PIPELINE = "pyannote/speaker-diarization-community-1"
PIPELINE_HINT = (
    "on a machine with internet run `huggingface-cli download {id} --local-dir {path}` (accept the model's "
    "terms on huggingface.co first) and copy {path} here; a 3.x pipeline names hub models in its config.yaml: "
    "download those into the models directory too and point config.yaml at those local paths"
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


def missing_plda(config_yaml: Path) -> str | None:
    """Why pyannote.audio 4 would go to the hub for a PLDA this SpeakerDiarization config does not name, or None."""
    import yaml

    config = yaml.safe_load(config_yaml.read_text()) or {}
    pipeline = config.get("pipeline", {})
    if not str(pipeline.get("name", "")).endswith("SpeakerDiarization") or "plda" in pipeline.get("params", {}):
        return None
    return (
        f"{config_yaml} names no `plda` under pipeline.params (a pyannote 3.x pipeline); pyannote.audio 4 "
        f"loads one for every SpeakerDiarization pipeline and would download {DEFAULT_PIPELINE}'s. Use "
        f"{DEFAULT_PIPELINE} (diarization_model = {DEFAULT_PIPELINE!r}), or copy its plda/ folder into "
        f"{config_yaml.parent} and add `plda: $model/plda` under pipeline.params"
    )


def _load_pipeline(path: str, device: str) -> Any:
    import torch
    from pyannote.audio import Pipeline
    from pyannote.audio.telemetry import set_telemetry_metrics

    set_telemetry_metrics(False)  # nothing leaves the machine: pyannote 4 reports usage to pyannote.ai by default

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
        problem = missing_plda(self.path / "config.yaml")
        if problem:
            raise MissingWeights(f"the paper profile's diarization expert cannot load offline: {problem}")
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
