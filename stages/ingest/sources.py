"""One source file cannot flood a benchmark: which of its clips are kept, and how far one text may spread.

A 20-minute file of digital silence became 120 clips, and 1,800 of 1,848 published captions were the same 15
sentences. Three bounds, each with its reason on a row:

- at ingest (`plan_source`), per source file: silent clips (RMS below `[ingest] silence_dbfs`) after the
  first are dropped; so is a clip whose audio repeats an earlier kept clip of the file (`audio_similarity`: the
  best normalised cross-correlation of their mean-removed log-mel spectrograms over every time shift with at
  least half of the shorter clip overlapping, ≥ `[ingest] near_duplicate_similarity`) — a loop's clips match at
  the loop's phase; then at most `[ingest] max_clips_per_source` clips are kept, spread evenly over the file.
  What was dropped is one quarantine row per source and cause (`source#clips`), which the build prints;
- at filter, per clip shard (`same_source_rejections`): a clip whose confident evidence says what an earlier
  clip of the same source says (`evidence_similarity`: the Jaccard overlap of the lines of their rendered
  evidence notes, measurements in words only inside their bands, ≥ `[filter] same_source_evidence_similarity`)
  would get the same items: they are rejected, naming that clip (check `same_source`) — stationary noise or
  room tone differs sample by sample, not in what the experts say about it;
- at filter, over all shards (`spread_rejections`): a text kept on clips of more than `[filter]
  max_sources_per_text` different sources is rejected on every further source (check `source_spread`);
  absence sentences ("No music is present in this audio.", written by rule on purpose, as MECAT's references
  do) are counted apart, against `max_sources_per_absence_text` (0: no limit).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from earmark.prompts import Phrases
from earmark.schemas import QCResult
from earmark.schemas.evidence import ClipEvidence
from earmark.stages.base import ItemType
from earmark.stages.facts.render import render_all
from earmark.stages.facts.text import normalise

SR = 16_000
_HOP, _NFFT, _BANDS = 320, 640, 40  # 20 ms hops, 40 ms windows, 40 mel bands (50 Hz – 7.6 kHz)
MIN_OVERLAP = 0.5  # of the shorter clip, for a time shift to count


# ------------------------------------------------------------------------------------------- audio
def rms_dbfs(samples: np.ndarray) -> float:
    rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64)))) if samples.size else 0.0
    return 20 * np.log10(rms) if rms > 0 else float("-inf")


def audio_features(samples: np.ndarray) -> np.ndarray:
    """Bands × frames log-mel power with each band's mean removed (level and channel colour drop out)."""
    import librosa

    mel = librosa.filters.mel(sr=SR, n_fft=_NFFT, n_mels=_BANDS, fmin=50, fmax=7600)
    x = np.asarray(samples, dtype=np.float32)
    if x.size < _NFFT:
        x = np.pad(x, (0, _NFFT - x.size))
    power = np.abs(librosa.stft(x, n_fft=_NFFT, hop_length=_HOP, center=False)) ** 2
    feats = np.log(mel @ power + 1e-8)
    return feats - feats.mean(axis=1, keepdims=True)


def audio_similarity(a: np.ndarray, b: np.ndarray) -> float:
    """The best normalised cross-correlation of two clips' `audio_features` over every time shift that overlaps
    at least MIN_OVERLAP of the shorter clip: 1 for the same audio at any offset, ~0.6 for two sentences of one
    voice, ~0 for two stretches of noise."""
    ta, tb = a.shape[1], b.shape[1]
    n = 1 << int(np.ceil(np.log2(ta + tb)))
    corr = np.fft.irfft((np.fft.rfft(a, n) * np.conj(np.fft.rfft(b, n))).sum(axis=0), n)
    ea = np.concatenate([[0.0], np.cumsum((a**2).sum(axis=0))])
    eb = np.concatenate([[0.0], np.cumsum((b**2).sum(axis=0))])
    least = max(1, int(min(ta, tb) * MIN_OVERLAP))
    lags = np.arange(-(tb - least), ta - least + 1)  # a[t] against b[t - lag]
    a0, a1 = np.maximum(0, lags), np.minimum(ta, tb + lags)
    b0, b1 = a0 - lags, a1 - lags
    den = np.sqrt((ea[a1] - ea[a0]) * (eb[b1] - eb[b0]))
    ok = (a1 - a0 >= least) & (den > 1e-9)
    return float(np.max(corr[lags[ok] % n] / den[ok])) if ok.any() else 0.0


@dataclass(frozen=True)
class Dropped:
    index: int  # the clip's index in its file
    cause: str  # "silent" | "repeat" | "cap"
    like: int | None = None  # the kept clip it repeats
    similarity: float | None = None


def plan_source(
    pieces: Sequence[np.ndarray], max_clips: int, similarity: float, silence_dbfs: float
) -> tuple[list[int], list[Dropped]]:
    """Which clips of one file to keep (indices, in order) and why the others go (see the module doc)."""
    kept: list[int] = []
    dropped: list[Dropped] = []
    feats: dict[int, np.ndarray] = {}
    silent_kept: int | None = None
    for i, piece in enumerate(pieces):
        if rms_dbfs(piece) < silence_dbfs:
            if silent_kept is None:
                silent_kept = i
                kept.append(i)
            else:
                dropped.append(Dropped(i, "silent", silent_kept))
            continue
        f = feats[i] = audio_features(piece)
        best = max(((audio_similarity(f, feats[k]), k) for k in kept if k in feats), default=(0.0, None))
        if best[1] is not None and best[0] >= similarity:
            dropped.append(Dropped(i, "repeat", best[1], round(best[0], 3)))
        else:
            kept.append(i)
    if max_clips and len(kept) > max_clips:  # evenly over the file, first and last included
        chosen = {kept[int(round(j))] for j in np.linspace(0, len(kept) - 1, max_clips)}
        dropped += [Dropped(i, "cap") for i in kept if i not in chosen]
        kept = [i for i in kept if i in chosen]
    return kept, sorted(dropped, key=lambda d: d.index)


def spans(indices: Sequence[int]) -> str:
    """`[0, 1, 2, 5, 7, 8]` → "0-2,5,7-8"."""
    out: list[str] = []
    for i in sorted(indices):
        if out and int(out[-1].split("-")[-1]) == i - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{i}"
        else:
            out.append(str(i))
    return ",".join(out)


def drop_reasons(drops: Sequence[Dropped], kept: Sequence[int], n: int, cfg: Any) -> list[tuple[str, str, str]]:
    """(clips, reason, fix) per cause, for one quarantine row each."""
    by_cause: dict[str, list[Dropped]] = defaultdict(list)
    for d in drops:
        by_cause[d.cause].append(d)
    out = []
    if silent := by_cause.get("silent"):
        out.append(
            (
                spans([d.index for d in silent]),
                f"{len(silent)} of the file's {n} clips are silent (RMS below ingest.silence_dbfs = "
                f"{cfg.silence_dbfs:g} dBFS) like its kept clip #{silent[0].like}; one silent clip per file is kept",
                "nothing to do; trim the silence from the file if its clips matter",
            )
        )
    if repeats := by_cause.get("repeat"):
        pairs = ", ".join(f"#{d.index} ~ #{d.like} ({d.similarity:.2f})" for d in repeats[:4])
        out.append(
            (
                spans([d.index for d in repeats]),
                f"{len(repeats)} of the file's {n} clips repeat the audio of an earlier kept clip (similarity ≥ "
                f"ingest.near_duplicate_similarity = {cfg.near_duplicate_similarity:g}: {pairs}"
                f"{', …' if len(repeats) > 4 else ''})",
                "nothing to do: one copy is kept; raise ingest.near_duplicate_similarity to keep near-repeats",
            )
        )
    if capped := by_cause.get("cap"):
        out.append(
            (
                spans([d.index for d in capped]),
                f"{len(capped)} of the file's {n} clips dropped: at most ingest.max_clips_per_source = "
                f"{cfg.max_clips_per_source} clips per source file (kept, spread over it: #{spans(kept)})",
                "raise ingest.max_clips_per_source (0: no limit) or split the recording into files",
            )
        )
    return out


# ---------------------------------------------------------------------------------------- evidence
def evidence_signature(ev: ClipEvidence, phrases: Phrases, min_confidence: float) -> frozenset[str]:
    """The clip's confident evidence as the prompts and the rule writers read it: the lines of its rendered notes
    (measurements in words only inside their bands, so 0.3 dB apart reads the same)."""
    return frozenset(line.strip() for line in render_all(ev, phrases, min_confidence).splitlines() if line.strip())


def evidence_similarity(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def same_source_rejections(
    items: Mapping[str, Sequence[Any]],
    sources: Mapping[str, tuple[str, int]],
    signatures: Mapping[str, frozenset[str]],
    threshold: float,
) -> list[QCResult]:
    """Check `same_source` on every item of the shard: rejected when its clip's evidence (`evidence_signature`)
    repeats (≥ threshold) an earlier clip's of the same source file. `sources`: clip id → (source path, clip
    index)."""
    like: dict[str, tuple[str, float]] = {}
    by_source: dict[str, list[str]] = defaultdict(list)
    for clip_id, (source, _) in sorted(sources.items(), key=lambda kv: kv[1]):
        if clip_id in signatures:
            by_source[source].append(clip_id)
    for clips in by_source.values():
        kept: list[str] = []
        for c in clips:
            best = max(((evidence_similarity(signatures[c], signatures[k]), k) for k in kept), default=(0.0, ""))
            if kept and best[0] >= threshold:
                like[c] = (best[1], best[0])
            else:
                kept.append(c)
    out = []
    for table, rows in items.items():
        for item in rows:
            if item.clip_id not in sources:
                continue
            if hit := like.get(item.clip_id):
                other, sim = hit
                why = (
                    f"its clip's evidence repeats clip {other} of the same source file {sources[other][0]} "
                    f"(#{sources[other][1]}; the lines of their evidence notes {sim:.0%} alike ≥ "
                    f"filter.same_source_evidence_similarity): that clip's items say the same"
                )
                out.append(_qc(table, item, "same_source", False, why, sim))
            else:
                out.append(_qc(table, item, "same_source", True, None, None))
    return out


# ------------------------------------------------------------------------------------------ spread
def is_absence(table: str, item: Any) -> bool:
    return table == "captions" and getattr(item, "model", "") == "rule" and item.prompt_name == "absent_rule"


def spread_rejections(
    items: Mapping[str, Sequence[Any]],
    sources: Mapping[str, str],
    rejected: set[tuple[str, str]],
    max_sources: int,
    max_absence_sources: int,
    kinds: Mapping[str, ItemType],
) -> list[QCResult]:
    """Check `source_spread` (`kinds`: the item types, whose main text is compared): per table, a (normalised) text that other checks kept on clips of more than
    `max_sources` different source files is kept on the first of them (in source path order) and rejected on
    the rest; absence sentences (the texts of rule-written absence captions, in any table) against
    `max_absence_sources` (0: no limit). `rejected`: (table, item id) pairs some other check rejected (they do
    not count)."""
    # an absence sentence is one, whichever table repeats it (a QA answer or an instruction's answer may be)
    absence = {normalise(c.text) for c in items.get("captions", ()) if is_absence("captions", c)}
    out = []
    for table, rows in items.items():
        field = kinds[table].main_text
        groups: dict[str, list[Any]] = defaultdict(list)
        for item in rows:
            if (table, item.item_id) not in rejected:
                groups[normalise(getattr(item, field))].append(item)
        for text, group in groups.items():
            limit = max_absence_sources if text in absence else max_sources
            order = sorted({sources.get(i.clip_id, i.clip_id) for i in group})
            allowed = set(order[:limit]) if limit else set(order)
            for item in group:
                src = sources.get(item.clip_id, item.clip_id)
                if src in allowed:
                    out.append(_qc(table, item, "source_spread", True, None, float(len(order))))
                    continue
                setting = "max_sources_per_absence_text" if text in absence else "max_sources_per_text"
                shown = ", ".join(order[:3]) + (", …" if limit > 3 else "")
                why = (
                    f"the same {field} is kept on clips of {len(order)} source files; at most filter.{setting} = "
                    f"{limit} keep it ({shown})"
                )
                out.append(_qc(table, item, "source_spread", False, why, float(len(order))))
    return _whole_sets(out)


def _whole_sets(rows: list[QCResult]) -> list[QCResult]:
    """An entailment set ships whole: when one hypothesis of a clip's set is rejected, so are the others."""
    broken = {r.clip_id: r.item_id for r in rows if r.item_table == "entailment" and not r.keep}
    return [
        r.model_copy(
            update={"keep": False, "reason": f"its set's hypothesis {broken[r.clip_id]} is rejected: a set ships whole"}
        )
        if r.item_table == "entailment" and r.keep and r.clip_id in broken
        else r
        for r in rows
    ]


def _qc(table: str, item: Any, check: str, keep: bool, reason: str | None, score: float | None) -> QCResult:
    return QCResult(
        item_table=table, item_id=item.item_id, clip_id=item.clip_id, check=check, keep=keep, reason=reason, score=score
    )
