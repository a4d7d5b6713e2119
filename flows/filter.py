"""filter flow: every check's verdict on every generated item → the `qc` table, per clip shard.

A qc shard reads every item table its synthesis shards wrote (captions, qa, entailment, instructions) and,
through the catalog's lineage (item shard → evidence shard → expert shards), the clips' evidence,
transcripts and asr_check verdicts. The margin filter's backend and model, like every threshold, enter the
shard key.
"""

from __future__ import annotations

import json

from prefect import flow, task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE

from earmark.config import Config
from earmark.stages.margin import (
    ClapBackend,
    EvidenceSbertBackend,
    MarginSettings,
    decode_clip,
    margin_checks,
    require_clap,
)
from earmark.stages.qc import STAGE_VERSION, ClipContext, FilterSettings, run_checks, summary
from earmark.flows.common import StageResult, computed_or_cached, open_catalog, task_runner
from earmark.schemas import TABLES, Clip, Evidence, QCResult, Rejection, from_table, to_table
from earmark.schemas.records import Transcript, TranscriptCheck
from earmark.storage import Catalog, ShardMeta, ShardRef, shard_key

ITEM_TABLES = ("captions", "qa", "entailment", "instructions")


def _settings(cfg: Config) -> FilterSettings:
    f = cfg.filter
    return FilterSettings(min_confidence=f.min_confidence, max_short_words=f.max_short_words,
                          min_long_words=f.min_long_words, max_hallucination=f.max_hallucination,
                          duplicate_similarity=f.duplicate_similarity)


def _margin_settings(cfg: Config) -> MarginSettings:
    f = cfg.filter
    return MarginSettings(backend=f.margin_backend, kinds=tuple(f.margin_kinds), negatives=f.margin_negatives,
                          threshold=f.margin_threshold)


def _key_config(cfg: Config) -> dict:
    from earmark.metrics.similarity import resolve_sbert

    f = cfg.filter
    # The resolved name, not the setting: "auto" changes model when the paper's TinyBERT enters the cache.
    sbert = resolve_sbert(f.sbert)[1]
    return {**_settings(cfg).key_config(), "margin": _margin_settings(cfg).key_config(), "sbert": sbert,
            "clap": f.clap_model if f.margin_backend == "clap" else None}


def _inputs_by_table(cat: Catalog, keys: list[str]) -> dict[str, list[str]]:
    """The shards that the shards `keys` were computed from, by table (one lineage step)."""
    if not keys:
        return {}
    rows = cat.query("SELECT DISTINCT s.table_name, s.key FROM shards s WHERE list_contains("
                     "(SELECT flatten(list(inputs)) FROM shards WHERE list_contains(?, key)), s.key)", [keys])
    out: dict[str, list[str]] = {}
    for table, key in rows:
        out.setdefault(table, []).append(key)
    return out


def _read(cat: Catalog, table: str, keys: list[str]) -> list:
    return from_table(TABLES[table], cat.read(table, keys)) if keys else []


@task(name="qc-shard", cache_policy=NO_CACHE, retries=1)
def qc_shard(cfg: Config, item_refs: list[ShardRef], run_id: str | None) -> ShardRef:
    settings, msettings = _settings(cfg), _margin_settings(cfg)
    inputs = [r.key for r in item_refs]
    key = shard_key("qc", STAGE_VERSION, inputs, config=_key_config(cfg))
    meta = ShardMeta(stage="filter", stage_version=STAGE_VERSION, inputs=inputs, config=_key_config(cfg))
    cat = open_catalog(cfg)

    def compute():
        items = {t: _read(cat, t, [r.key for r in item_refs if t in r.tables]) for t in ITEM_TABLES}
        rejections = from_table(Rejection, cat.read("rejections", inputs))
        evidence_keys = _inputs_by_table(cat, inputs).get("evidence", [])
        upstream = _inputs_by_table(cat, evidence_keys)
        transcripts = {t.clip_id: t for t in _read(cat, "asr", upstream.get("asr", []))}
        context = {c.clip_id: ClipContext(transcripts[c.clip_id].text if c.clip_id in transcripts else "",
                                          c.hallucination_score, tuple(c.flags))
                   for c in _read(cat, "asr_check", upstream.get("asr_check", []))}
        embed = _embedder(cfg) if items["entailment"] or msettings.backend == "evidence" else None
        rows = run_checks(items["captions"], items["qa"], rejections, settings, entailment=items["entailment"],
                          instructions=items["instructions"], context=context, embed=embed)
        if msettings.backend != "off" and items["captions"]:
            rows += margin_checks(items["captions"], _margin_backend(cfg, cat, evidence_keys, upstream, embed),
                                  msettings)
        return {"qc": to_table(QCResult, rows)}

    return computed_or_cached(cat, key, ("qc",), meta, run_id, compute, "filter")


def _embedder(cfg: Config):
    from earmark.metrics.similarity import embed, load_sbert

    model = load_sbert(cfg.filter.sbert)
    return lambda texts: embed(model, texts)


def _margin_backend(cfg: Config, cat: Catalog, evidence_keys: list[str], upstream: dict[str, list[str]], embed):
    if cfg.filter.margin_backend == "clap":
        path = require_clap(cfg.filter.clap_model, cfg.analyze.models_dir)
        audio = {}
        sr = 16_000
        for clip in from_table(Clip, cat.read("clips", upstream.get("clips", []))):
            audio[clip.clip_id], sr = decode_clip(clip.audio_flac)
        return ClapBackend(path, audio, sr, device=cfg.analyze.device)
    evidence = {e.clip_id: json.loads(e.evidence_json) for e in from_table(Evidence, cat.read("evidence", evidence_keys))}
    return EvidenceSbertBackend(evidence, embed)


@flow(name="filter", log_prints=True)
def filter_flow(cfg: Config, item_refs_per_shard: list[list[ShardRef]], run_id: str | None = None) -> StageResult:
    if cfg.filter.margin_backend == "clap":  # fail before any shard runs, naming the missing weights
        require_clap(cfg.filter.clap_model, cfg.analyze.models_dir)
    futures = [qc_shard.submit(cfg, refs, run_id) for refs in item_refs_per_shard]
    result = StageResult([f.result() for f in futures])
    keys = result.keys("qc")
    if keys:
        rows = from_table(QCResult, open_catalog(cfg).read("qc", keys))
        create_table_artifact(key="qc-summary", table=summary(rows),
                              description="Items kept and rejected per check, with each check's score range")
    return result


def run_filter(cfg: Config, item_refs_per_shard, run_id: str | None = None) -> StageResult:
    return filter_flow.with_options(task_runner=task_runner(cfg))(cfg, item_refs_per_shard, run_id)
