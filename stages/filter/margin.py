"""MECAT's audio–text margin filter: keep a caption only if it matches its own clip better than other clips'
captions do.

    margin = 100 · (cos(a_c, t_i) − mean_j cos(a_c, t_j))

for caption i of clip c, with j over `negatives` (6 in MECAT) captions of the same kind drawn at random from
other clips of the shard, and `a`/`t` the audio and text embeddings of a joint model. MECAT uses GLAP and
keeps a sample when the margin exceeds 6 (cosine × 100). Two backends fill `a` and `t`:

- `clap` (paper, bring your weights): a transformers CLAP model (`laion/clap-htsat-unfused` by default)
  from the models directory; `a` is the clip's audio embedding at 48 kHz. GLAP itself has no transformers
  port; any ClapModel-compatible checkpoint directory can be named instead.
- `evidence-sbert` (offline default): no audio–text model ships in a wheel, so `a` is the sentence embedding
  of the clip's expert evidence rendered for the caption's kind (`earmark.stages.synthesize.evidence.render`) and `t` the
  caption's, both with the SBERT model of `metrics.similarity`. It measures agreement with what the experts
  found, not with the audio itself, and its check is named `margin:evidence-sbert` so nobody confuses the two.
- `yamnet` (offline, from the audio): both sides live in the space of YAMNet's 521 AudioSet classes. `a` is the
  clip's own class scores (YAMNet's best frame score per class, table `yamnet`); `t` is the caption's closeness to
  each class name (SBERT cosine of the caption and the 521 names, sharpened by a softmax at temperature
  `CLASS_TEMPERATURE`). A caption naming a dog matches a clip where YAMNet hears a dog, whatever the experts said.

Negatives are drawn with a generator seeded by the item id, so a shard's verdicts are reproducible.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from earmark.core.config import FilterSection
from earmark.prompts import Phrases
from earmark.schemas.evidence import ClipEvidence
from earmark.schemas.facts import CONTENT
from earmark.schemas.outcomes import QCResult
from earmark.schemas.records import Caption
from earmark.stages.facts.render import render

PAPER_THRESHOLD = 6.0  # MECAT: "exceeds … by an empirically set threshold of 6" (cosine × 100)
# offline stand-in, set on the planted set (docs/benchmarks.md, benchmarks/quality/qc_planted.py)
EVIDENCE_THRESHOLD = 5.0
YAMNET_THRESHOLD = 0.0  # measured on planted swaps in real builds (benchmarks/quality/margin_audio.py)
CLASS_TEMPERATURE = 0.05  # softmax temperature over the caption's cosines to the 521 class names
CLAP_SR = 48_000


def threshold(cfg: FilterSection) -> float:
    """The configured margin threshold, or the backend's default."""
    if cfg.margin_threshold is not None:
        return cfg.margin_threshold
    return {"clap": PAPER_THRESHOLD, "yamnet": YAMNET_THRESHOLD}.get(cfg.margin_backend, EVIDENCE_THRESHOLD)


class MarginBackend:
    """Embeds a clip anchor (audio, or evidence text for one caption kind) and caption texts in one space."""

    check: str  # the QC check name, saying which backend made the verdict

    def anchors(self, keys: Sequence[tuple[str, str]]) -> np.ndarray:  # (clip_id, kind) → L2-normalised rows
        raise NotImplementedError

    def texts(self, texts: Sequence[str]) -> np.ndarray:
        raise NotImplementedError


class EvidenceSbertBackend(MarginBackend):
    """Offline: the caption against its clip's expert-evidence text, both embedded with SBERT."""

    check = "margin:evidence-sbert"

    def __init__(
        self, evidence: Mapping[str, ClipEvidence], embed: Callable[[Sequence[str]], np.ndarray], phrases: Phrases
    ) -> None:
        self.evidence, self.embed, self.phrases = evidence, embed, phrases

    def anchors(self, keys: Sequence[tuple[str, str]]) -> np.ndarray:
        return self.embed([evidence_text(self.evidence[clip], kind, self.phrases) for clip, kind in keys])

    def texts(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts)


class YamnetSbertBackend(MarginBackend):
    """Offline, from the audio: the clip's YAMNet class scores against the caption's closeness to the class names."""

    check = "margin:yamnet-sbert"

    def __init__(self, scores: Mapping[str, Sequence[float]], embed: Callable[[Sequence[str]], np.ndarray]) -> None:
        from earmark.experts.yamnet.events import class_names

        self.scores, self.embed = scores, embed
        self.names = np.asarray(embed([n.replace(", ", " or ") for n in class_names()]), np.float32)

    def anchors(self, keys: Sequence[tuple[str, str]]) -> np.ndarray:
        if not keys:
            return np.zeros((0, len(self.names)), np.float32)
        if missing := sorted({c for c, _ in keys} - set(self.scores)):
            raise ValueError(
                f'filter.margin_backend = "yamnet" needs YAMNet\'s scores, and clip {missing[0]} has none: set '
                'analyze.yamnet = true (the default) or filter.margin_backend = "evidence"'
            )
        return _unit(np.stack([np.asarray(self.scores[c], np.float32) for c, _ in keys]))

    def texts(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, len(self.names)), np.float32)
        z = np.asarray(self.embed(texts), np.float32) @ self.names.T / CLASS_TEMPERATURE
        z = np.exp(z - z.max(axis=1, keepdims=True))
        return _unit(z / z.sum(axis=1, keepdims=True))


_NOT_THERE = re.compile(r"^- no |cannot be made out")


def evidence_text(ev: ClipEvidence, kind: str, phrases: Phrases) -> str:
    """The evidence a caption of `kind` should agree with, as plain sentences: the per-kind rendering of
    what *is* there (lines stating absence would pull captions of the absent content closer)."""
    if kind in ("short", "long"):
        present = [k for k, c in CONTENT.items() if ev.present(c)]
        parts = [render(ev, k, phrases) for k in present]
    else:
        parts = [render(ev, kind, phrases)]
    lines = list(dict.fromkeys(ln for p in parts for ln in p.splitlines() if ln.strip() and not _NOT_THERE.search(ln)))
    text = " ".join(ln.lstrip("- ").rstrip(".") + "." for ln in lines)
    return re.sub(r"</?transcript>", '"', text).replace("the words:", "someone says") or "silence."


class ClapBackend(MarginBackend):
    """Paper: a CLAP audio–text model (transformers ClapModel) from a local directory."""

    check = "margin:clap"

    def __init__(
        self,
        model_dir,
        audio: Mapping[str, np.ndarray],
        sample_rate: int = 16_000,
        device: str = "cpu",
        batch_size: int = 16,
    ) -> None:
        import torch
        from transformers import AutoTokenizer, ClapFeatureExtractor, ClapModel

        from earmark.experts.base import load_once

        self.torch = torch
        key = f"clap:{model_dir}:{device}"
        self.model = load_once(
            key, lambda: ClapModel.from_pretrained(str(model_dir), local_files_only=True).to(device).eval()
        )
        self.tokenizer = load_once(
            key + ":tok", lambda: AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
        )
        self.features = load_once(
            key + ":fe", lambda: ClapFeatureExtractor.from_pretrained(str(model_dir), local_files_only=True)
        )
        self.audio, self.sr, self.device, self.batch = audio, sample_rate, device, batch_size

    def _resampled(self, clip_id: str) -> np.ndarray:
        from scipy.signal import resample_poly

        x = self.audio[clip_id].astype(np.float32)
        g = np.gcd(CLAP_SR, self.sr)
        return resample_poly(x, CLAP_SR // g, self.sr // g).astype(np.float32)

    def anchors(self, keys: Sequence[tuple[str, str]]) -> np.ndarray:
        clips = sorted({c for c, _ in keys})
        rows: dict[str, np.ndarray] = {}
        for i in range(0, len(clips), self.batch):
            part = clips[i : i + self.batch]
            # An unfused model takes one mel crop; "fusion" would hand it four channels.
            trunc = "fusion" if getattr(self.model.config.audio_config, "enable_fusion", False) else "rand_trunc"
            feats = self.features(
                [self._resampled(c) for c in part], sampling_rate=CLAP_SR, truncation=trunc, return_tensors="pt"
            )
            with self.torch.no_grad():
                out = self.model.get_audio_features(**{k: v.to(self.device) for k, v in feats.items()})
            emb = _pooled(out).cpu().numpy()
            rows.update(zip(part, _unit(emb)))
        return np.stack([rows[c] for c, _ in keys]) if keys else np.zeros((0, 1), np.float32)

    def texts(self, texts: Sequence[str]) -> np.ndarray:
        out = []
        for i in range(0, len(texts), self.batch):
            tok = self.tokenizer(list(texts[i : i + self.batch]), padding=True, truncation=True, return_tensors="pt")
            tok = {k: v.to(self.device) for k, v in tok.items() if k in ("input_ids", "attention_mask")}
            with self.torch.no_grad():
                out.append(_unit(_pooled(self.model.get_text_features(**tok)).cpu().numpy()))
        return np.concatenate(out) if out else np.zeros((0, 1), np.float32)


def _pooled(out):
    return out if hasattr(out, "cpu") else out.pooler_output


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)).astype(np.float32)


def mono(x: np.ndarray) -> np.ndarray:
    """A clip's samples as one channel (CLAP's input)."""
    return x if x.ndim == 1 else x.mean(axis=1)


def _rng(item_id: str) -> np.random.Generator:
    return np.random.default_rng(int.from_bytes(hashlib.sha256(item_id.encode()).digest()[:8], "little"))


def margin_checks(captions: Sequence[Caption], backend: MarginBackend, cfg: FilterSection) -> list[QCResult]:
    """One verdict per caption of `cfg.margin_kinds`; rule-written absence captions are not compared."""
    kinds = set(cfg.margin_kinds)
    pools: dict[str, list[int]] = defaultdict(list)  # kind → indices of LLM captions
    for i, c in enumerate(captions):
        if c.kind in kinds and c.model != "rule":
            pools[c.kind].append(i)
    todo = [i for idxs in pools.values() for i in idxs]
    out: list[QCResult] = []
    for c in captions:
        if c.kind in kinds and c.model == "rule":
            out.append(_verdict(c, backend, True, "rule-written absence caption, not compared"))
    if not todo:
        return out
    keys = sorted({(captions[i].clip_id, captions[i].kind) for i in todo})
    anchor = dict(zip(keys, backend.anchors(keys)))
    text = dict(zip(todo, backend.texts([captions[i].text for i in todo])))
    thr = threshold(cfg)
    for i in todo:
        c = captions[i]
        others = [j for j in pools[c.kind] if captions[j].clip_id != c.clip_id]
        if not others:
            out.append(_verdict(c, backend, True, "no other clip's caption in the shard to compare with"))
            continue
        neg = _rng(c.item_id).choice(others, size=min(cfg.margin_negatives, len(others)), replace=False)
        a = anchor[(c.clip_id, c.kind)]
        m = 100.0 * (float(a @ text[i]) - float(np.mean([a @ text[j] for j in neg])))
        keep = m >= thr
        reason = None if keep else f"margin {m:.1f} < {thr:g} over {len(neg)} other captions"
        out.append(_verdict(c, backend, keep, reason, round(m, 3)))
    return out


def _verdict(c: Caption, backend: MarginBackend, keep: bool, reason: str | None, score: float | None = None):
    return QCResult(
        item_table="captions",
        item_id=c.item_id,
        clip_id=c.clip_id,
        check=backend.check,
        keep=keep,
        reason=reason,
        score=score,
    )


def require_clap(model_id: str, models_dir=None):
    """The local directory of the CLAP weights, or MissingWeights naming the model, the path and the fix."""
    from earmark.experts.models import MissingWeights, require_weights

    try:
        return require_weights(
            'QC margin filter (filter.margin_backend = "clap")', model_id, models_dir, files=("config.json",)
        )
    except MissingWeights as exc:
        raise MissingWeights(f'{exc} For the offline margin filter set filter.margin_backend = "evidence".') from None
