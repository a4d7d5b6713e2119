"""Music experts of the paper profile: demucs source separation (vocals back through VAD) and an HF music tagger.

- separation: a demucs model (default htdemucs) from `<models_dir>/demucs/` — the directory holding its
  `<name>.yaml` and checkpoint files, as `demucs.pretrained.get_model(name, repo=...)` reads them offline.
  Clips with music run as one batch (zero-padded to the longest); the vocals stem goes back through
  Silero VAD, so `vocals_speech_s` says how much sung or spoken voice the music holds.
- music: the offline librosa analysis (tempo, beats, key, loudness; experts/music.py) plus `tags` from an
  AutoModelForAudioClassification music tagger (genre / mood / instrument), batched across the clips with
  music. Without a tagger configured, the embedded profile's music-tag heads' tags (experts/learned/musictags) stay.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from earmark.experts.audio import amplitude_db, samples_16k
from earmark.experts.base import SAMPLE_RATE, ClipAudio, Context, Expert, gpu_section, load_once
from earmark.experts.models import require_package, require_weights
from earmark.experts.music import no_music_reason
from earmark.experts.paper.hf import Precision, classify, default_activation, load_classifier, precision_config
from earmark.schemas.records import LabelProb, MusicAnalysis, Separation, StemLevel

DEMUCS_HINT = (
    'on a machine with internet run `python -c "from demucs.pretrained import get_model; '
    "get_model('{name}')\"` and copy {name}.yaml and the checkpoint files (*.th) it downloaded "
    "(~/.cache/torch/hub/checkpoints) into {path}"
)


def _load_demucs(repo: str, name: str, device: str) -> Any:
    """demucs (4.0.1, 4.1.0) pickles the model class and a Fraction (its segment) into each checkpoint; torch >= 2.6
    loads only weights by default and refused them. These classes, and nothing else, are allowed while it loads."""
    from fractions import Fraction
    from pathlib import Path

    import torch
    from demucs.demucs import Demucs
    from demucs.hdemucs import HDemucs
    from demucs.htdemucs import HTDemucs
    from demucs.pretrained import get_model

    with torch.serialization.safe_globals([Demucs, HDemucs, HTDemucs, Fraction]):
        return get_model(name, repo=Path(repo)).to(device).eval()


def stem_levels(stems: dict[str, np.ndarray]) -> list[StemLevel]:
    """Level and share of energy of each stem (arrays at one sample rate, same length)."""
    energy = {k: float(np.sum(v.astype(np.float64) ** 2)) for k, v in stems.items()}
    total = sum(energy.values()) or 1.0
    n = max(max((v.size for v in stems.values()), default=1), 1)
    return [
        StemLevel(stem=k, rms_dbfs=round(float(amplitude_db(np.sqrt(e / n))), 2), energy_share=round(e / total, 4))
        for k, e in energy.items()
    ]


class DemucsSeparationExpert(Expert):
    name, version, record, needs = "separation", "1", Separation, ("domain",)

    def __init__(
        self, model_name: str = "htdemucs", models_dir: Any = None, *, device: str = "cpu", batch_size: int = 8
    ) -> None:
        require_package("separation", "demucs", "install it with `pip install demucs`")
        self.repo = require_weights(
            "separation",
            "demucs",
            models_dir,
            files=(f"{model_name}.yaml",),
            hint=DEMUCS_HINT.replace("{name}", model_name),
        )
        self.model_name, self.device, self.batch_size = model_name, device, batch_size
        self.backend = f"demucs:{model_name}"

    def key_config(self) -> dict[str, Any]:
        return {"vad": "silero", "shifts": 0}

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[Separation]:
        domains = context["domain"]
        todo = [i for i, c in enumerate(clips) if no_music_reason(domains[c.clip_id]) is None]  # type: ignore[arg-type]
        stems: dict[int, dict[str, np.ndarray]] = {}
        for s in range(0, len(todo), self.batch_size):
            batch = todo[s : s + self.batch_size]
            stems.update(zip(batch, self.separate([samples_16k(clips[i]) for i in batch])))
        vocal_s = self._vocal_speech([stems[i]["vocals"] for i in todo if "vocals" in stems[i]])
        vocal_iter = iter(vocal_s)
        out = []
        for i, clip in enumerate(clips):
            if i not in stems:
                out.append(
                    Separation(
                        **self.lineage(clip.clip_id),
                        method=self.backend,
                        stems=[],
                        vocals_speech_s=None,
                        skipped_reason=no_music_reason(domains[clip.clip_id]),
                    )
                )  # type: ignore[arg-type]
                continue
            vocals = next(vocal_iter) if "vocals" in stems[i] else None
            out.append(
                Separation(
                    **self.lineage(clip.clip_id),
                    method=self.backend,
                    stems=stem_levels(stems[i]),
                    vocals_speech_s=vocals,
                    skipped_reason=None,
                )
            )
        return out

    def separate(self, audios: list[np.ndarray]) -> list[dict[str, np.ndarray]]:
        """Stems of each 16 kHz clip, as 16 kHz mono arrays of the clip's length."""
        import soxr
        import torch
        from demucs.apply import apply_model

        model = load_once(
            f"demucs:{self.repo}:{self.model_name}:{self.device}",
            lambda: _load_demucs(str(self.repo), self.model_name, self.device),
        )
        rate = model.samplerate
        up = [soxr.resample(a, SAMPLE_RATE, rate).astype(np.float32) for a in audios]
        length = max(u.size for u in up)
        batch = np.zeros((len(up), model.audio_channels, length), np.float32)
        for row, u in zip(batch, up):
            row[:, : u.size] = u
        with torch.inference_mode():
            out = (
                apply_model(
                    model, torch.from_numpy(batch), device=self.device, split=True, overlap=0.25, progress=False
                )
                .cpu()
                .numpy()
            )  # (batch, sources, channels, samples)
        result = []
        for k, a in enumerate(audios):
            result.append(
                {
                    name: soxr.resample(out[k, j].mean(axis=0)[: up[k].size], rate, SAMPLE_RATE)[: a.size].astype(
                        np.float32
                    )
                    for j, name in enumerate(model.sources)
                }
            )
        return result

    def _vocal_speech(self, vocals: list[np.ndarray]) -> list[float]:
        """Seconds of Silero VAD speech in each vocals stem (the vad expert's own settings)."""
        from earmark.experts.vad import SileroVADExpert

        vad = SileroVADExpert()
        clips = [ClipAudio(clip_id=f"vocals-{i}", samples=v) for i, v in enumerate(vocals)]
        return [round(r.speech_s, 3) for r in vad.analyze(clips, {})]


class PaperMusicExpert(Expert):
    """Offline librosa analysis + an HF music tagger's labels."""

    name, version, record, needs = "music", "1", MusicAnalysis, ("domain", "separation")
    gpu_in_sections = True  # librosa's analysis runs outside the `gpu` slot, the tagger inside

    def __init__(
        self,
        tagger_model: str | None,
        models_dir: Any = None,
        *,
        device: str = "cpu",
        batch_size: int = 16,
        top_k: int = 5,
        min_prob: float = 0.1,
        multi_label: bool = True,
        precision: Precision = "fp32",
    ) -> None:
        from earmark.experts.music import LibrosaMusicExpert

        self.analysis = LibrosaMusicExpert()
        self.tagger_model, self.precision = tagger_model, precision
        self.path = require_weights("music", tagger_model, models_dir) if tagger_model else None
        self.backend = self.analysis.backend + (f"+tagger:{tagger_model}" if tagger_model else "")
        self.device, self.batch_size, self.top_k, self.min_prob, self.multi_label = (
            device,
            batch_size,
            top_k,
            min_prob,
            multi_label,
        )

    @property
    def uses_gpu(self) -> bool:
        """Only with a music tagger: librosa's analysis alone is CPU work, and holding the `gpu` slot for it
        would stall the GPU experts of other shards."""
        return super().uses_gpu and self.path is not None

    def key_config(self) -> dict[str, Any]:
        return {
            **self.analysis.key_config(),
            "top_k": self.top_k,
            "min_prob": self.min_prob,
            "multi_label": self.multi_label,
            **precision_config(self.precision),
        }

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[MusicAnalysis]:
        records = self.analysis.analyze(clips, context)
        tagged = [i for i, r in enumerate(records) if r.analyzed]
        tags = []
        if self.path and tagged:
            audios = [samples_16k(clips[i]) for i in tagged]
            with gpu_section():
                tags = self.tag(audios)
        by_clip = dict(zip(tagged, tags))
        if not self.path:  # no music tagger configured: the embedded music-tag heads' tags stay
            return [r.model_copy(update={"backend": self.backend}) for r in records]
        return [
            r.model_copy(
                update={
                    "backend": self.backend,
                    "tags": by_clip.get(i, []),
                    "tagger": self.tagger_model if i in by_clip else None,
                    "window_tags": [],
                }
            )
            for i, r in enumerate(records)
        ]

    def tag(self, audios: list[np.ndarray]) -> list[list[LabelProb]]:
        assert self.path is not None
        clf = load_classifier(self.path, self.device)
        probs = classify(clf, audios, self.batch_size, default_activation(clf, self.multi_label), self.precision)
        out = []
        for row in probs:
            order = np.argsort(-row, kind="stable")[: self.top_k]
            out.append(
                [LabelProb(label=clf.labels[i], prob=round(float(row[i]), 4)) for i in order if row[i] >= self.min_prob]
            )
        return out
