"""filter stage: every check's verdict on every generated item of a clip shard → the `qc` table.

A qc shard reads the shard's item tables and rejections, its evidence, and the clips' transcripts and
asr_check verdicts (the flow passes their keys). The rule checks are earmark.stages.filter.qc, the margin filter
earmark.stages.filter.margin; every threshold, the margin backend and its model, the resolved sentence-embedding
model and the evidence phrases (the offline margin compares captions with rendered evidence) enter the key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from earmark.core.config import Config
from earmark.prompts import load_phrases, request_sha
from earmark.schemas import ITEM_TABLES
from earmark.stages.base import Inputs, ItemType, StageSpec
from earmark.stages.filter.audit import audit_items, duplicate_items, premise_rejections
from earmark.stages.filter.budget import fact_budget
from earmark.stages.filter.margin import (
    ClapBackend,
    EvidenceSbertBackend,
    YamnetSbertBackend,
    margin_checks,
    mono,
    require_clap,
    threshold,
)
from earmark.stages.filter.qc import STAGE_VERSION, ClipContext, run_checks
from earmark.stages.filter.sources import evidence_signature, same_source_rejections, spread_rejections
from earmark.stages.ingest import decode_clip


def reads() -> tuple[str, ...]:
    return (*ITEM_TABLES, "rejections", "evidence", "clips", "asr", "asr_check", "yamnet")


def spec(cfg: Config, sbert_name: str) -> StageSpec:
    """`sbert_name`: the resolved model name, not the setting ("auto" changes model when the paper's
    TinyBERT enters the cache)."""
    f = cfg.filter
    config = {
        "conf": f.min_confidence,
        "short": f.max_short_words,
        "long": f.min_long_words,
        "halluc": f.max_hallucination,
        "dup": f.duplicate_similarity,
        "margin": {
            "backend": f.margin_backend,
            "kinds": list(f.margin_kinds),
            "neg": f.margin_negatives,
            "thr": threshold(f),
        },
        "sbert": sbert_name,
        "clap": f.clap_model if f.margin_backend == "clap" else None,
        "claim_audit": f.claim_audit,
        "fact_budget": f.fact_budget if f.claim_audit else 0,
        "min_confidence": cfg.evidence.min_confidence,
        "same_source": f.same_source_evidence_similarity,
    }
    return StageSpec(
        "filter",
        STAGE_VERSION,
        writes=("qc", "claims"),
        reads=reads(),
        config=config,
        prompt_files=("evidence",),
        prompt_sha=request_sha(("evidence",), cfg.synthesize.prompt_dir),
        prompt_dir=cfg.synthesize.prompt_dir,
    )


Embed = Callable[[list[str]], object]


def run(cfg: Config, embedder: Callable[[], Embed], kinds: Mapping[str, ItemType], inputs: Inputs) -> dict[str, list]:
    """The stage function. `embedder()` loads the sentence-embedding model (only when a check needs it);
    `kinds`: the item types (earmark.stages.synthesize.ITEM_TYPES, passed by the flow), table → ItemType."""
    f = cfg.filter
    items = {t: inputs(t) for t in kinds}
    transcripts = {t.clip_id: t.text for t in inputs("asr")}
    context = {
        c.clip_id: ClipContext(transcripts.get(c.clip_id, ""), c.hallucination_score, tuple(c.flags))
        for c in inputs("asr_check")
    }
    for clip_id, text in transcripts.items():  # a transcript without its check still says names (filter/wording.py)
        context.setdefault(clip_id, ClipContext(text))
    embed = embedder() if items.get("entailment") or f.margin_backend in ("evidence", "yamnet") else None
    phrases = load_phrases("evidence", cfg.synthesize.prompt_dir)
    evidence = {e.clip_id: e for e in inputs("evidence")}
    signatures = {c: evidence_signature(ev, phrases, cfg.evidence.min_confidence) for c, ev in evidence.items()}
    rows = run_checks(items, inputs("rejections"), f, kinds, context=context, embed=embed)
    if f.margin_backend != "off" and items.get("captions"):
        if f.margin_backend == "clap":
            audio, sr = {}, 16_000
            for clip in inputs("clips"):
                got = decode_clip(clip)
                audio[clip.clip_id], sr = mono(got.samples), got.sample_rate
            backend = ClapBackend(
                require_clap(f.clap_model, cfg.analyze.models_dir), audio, sr, device=cfg.analyze.device
            )
        elif f.margin_backend == "yamnet":
            backend = YamnetSbertBackend(dict(inputs.values("yamnet", "clip_id", "clip_max")), embed)
        else:
            backend = EvidenceSbertBackend(evidence, embed, phrases)
        rows += margin_checks(items["captions"], backend, f)
    sources = {c: (src, i) for c, src, i in inputs.values("clips", "clip_id", "source_path", "clip_index")}
    rows += same_source_rejections(items, sources, signatures, f.same_source_evidence_similarity)
    claims: list = []
    if f.claim_audit:
        audited, claims = audit_items(items, evidence, cfg.evidence.min_confidence, kinds)
        rows += audited
        rows += fact_budget(items, claims, rows, f.fact_budget, kinds)  # needs the audit's supporting facts
    return {"qc": rows, "claims": claims}


def duplicates_spec(cfg: Config) -> StageSpec:
    """The cross-shard stage; it also reads the per-shard verdicts (`qc`), which decide what counts as kept."""
    f = cfg.filter
    return StageSpec(
        "filter:duplicates",
        STAGE_VERSION,
        writes=("qc",),
        reads=(*ITEM_TABLES, "evidence", "clips", "qc"),
        config={"spread": [f.max_sources_per_text, f.max_sources_per_absence_text]},
    )


def run_duplicates(cfg: Config, kinds: Mapping[str, ItemType], inputs: Inputs) -> dict[str, list]:
    """The cross-shard stage, after every per-shard check: items whose text repeats on clips with different
    evidence (`duplicate_across_clips`), a text kept on too many source files (`source_spread`), and entailment
    hypotheses whose premise is not a caption every check kept (`premise`)."""
    items = {t: inputs(t) for t in kinds}
    evidence = {e.clip_id: e for e in inputs("evidence")}
    rows = duplicate_items(items, evidence, kinds)
    rejected = {(r.item_table, r.item_id) for r in (*inputs("qc"), *rows) if not r.keep}
    sources = dict(inputs.values("clips", "clip_id", "source_path"))
    f = cfg.filter
    spread = spread_rejections(items, sources, rejected, f.max_sources_per_text, f.max_sources_per_absence_text, kinds)
    rejected |= {(r.item_table, r.item_id) for r in spread if not r.keep}
    premises = premise_rejections(items.get("entailment", ()), items.get("captions", ()), rejected)
    return {"qc": [*rows, *spread, *premises]}
