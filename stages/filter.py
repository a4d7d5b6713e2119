"""filter stage: every check's verdict on every generated item of a clip shard → the `qc` table.

A qc shard reads the shard's item tables and rejections, its evidence, and the clips' transcripts and
asr_check verdicts (the flow passes their keys). The rule checks are earmark.stages.qc, the margin filter
earmark.stages.margin; every threshold, the margin backend and its model, the resolved sentence-embedding
model and the evidence phrases (the offline margin compares captions with rendered evidence) enter the key.
"""

from __future__ import annotations

from collections.abc import Callable

from earmark.config import Config
from earmark.prompts import load_phrases, request_sha
from earmark.schemas import ITEM_TABLES
from earmark.stages.audit import audit_items, duplicate_items
from earmark.stages.base import Inputs, StageSpec
from earmark.stages.budget import fact_budget
from earmark.stages.margin import ClapBackend, EvidenceSbertBackend, decode_clip, margin_checks, require_clap, threshold
from earmark.stages.qc import STAGE_VERSION, ClipContext, run_checks

READS = (*ITEM_TABLES, "rejections", "evidence", "clips", "asr", "asr_check")


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
    }
    return StageSpec(
        "filter",
        STAGE_VERSION,
        writes=("qc", "claims"),
        reads=READS,
        config=config,
        prompt_files=("evidence",),
        prompt_sha=request_sha(("evidence",), cfg.synthesize.prompt_dir),
    )


Embed = Callable[[list[str]], object]


def run(cfg: Config, embedder: Callable[[], Embed], inputs: Inputs) -> dict[str, list]:
    """The stage function. `embedder()` loads the sentence-embedding model (only when a check needs it)."""
    f = cfg.filter
    items = {t: inputs(t) for t in ITEM_TABLES}
    transcripts = {t.clip_id: t.text for t in inputs("asr")}
    context = {
        c.clip_id: ClipContext(transcripts.get(c.clip_id, ""), c.hallucination_score, tuple(c.flags))
        for c in inputs("asr_check")
    }
    embed = embedder() if items["entailment"] or f.margin_backend == "evidence" else None
    rows = run_checks(
        items["captions"],
        items["qa"],
        inputs("rejections"),
        f,
        entailment=items["entailment"],
        instructions=items["instructions"],
        context=context,
        embed=embed,
    )
    if f.margin_backend != "off" and items["captions"]:
        if f.margin_backend == "clap":
            audio, sr = {}, 16_000
            for clip in inputs("clips"):
                audio[clip.clip_id], sr = decode_clip(clip.audio_flac)
            backend = ClapBackend(
                require_clap(f.clap_model, cfg.analyze.models_dir), audio, sr, device=cfg.analyze.device
            )
        else:
            evidence = {e.clip_id: e for e in inputs("evidence")}
            backend = EvidenceSbertBackend(evidence, embed, load_phrases("evidence", cfg.synthesize.prompt_dir))
        rows += margin_checks(items["captions"], backend, f)
    claims: list = []
    if f.claim_audit:
        evidence = {e.clip_id: e for e in inputs("evidence")}
        audited, claims = audit_items(items, evidence, cfg.evidence.min_confidence)
        rows += audited
        rows += fact_budget(items, claims, rows, f.fact_budget)  # needs the audit's supporting facts
    return {"qc": rows, "claims": claims}


DUPLICATES = StageSpec("filter:duplicates", STAGE_VERSION, writes=("qc",), reads=(*ITEM_TABLES, "evidence"))


def run_duplicates(inputs: Inputs) -> dict[str, list]:
    """The cross-shard stage: items whose text repeats on clips with different evidence."""
    evidence = {e.clip_id: e for e in inputs("evidence")}
    return {"qc": duplicate_items({t: inputs(t) for t in ITEM_TABLES}, evidence)}
