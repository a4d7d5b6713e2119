"""publish stages: the review overlay of a version, and a version's exports and dataset card.

Only items that every QC check kept are exported. Human review decisions reach a version through the
overlay shard (stage `review-apply`, earmark.stages.review, run by the publish flow before this stage): `human_review` QC rows and the rewritten
`<item_id>~rev` rows, so the same "kept" rule gives the reviewed set. The MECAT files follow the layout of
the official `mecat` package's references (`caption/<domain>.jsonl`, `qa/<domain>.jsonl`), so
`mecat-evaluate` can read them as a `reference_dir`. The exports of a version are one shard of stage
`publish` (table `exports`: one row per file, with its sha256), so a version's files are registered once.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from earmark.schemas import ITEM_TABLES, ExportFile
from earmark.schemas.records import CAPTION_KINDS
from earmark.stages.base import Inputs, StageSpec
from earmark.stages.publish import formats
from earmark.stages.publish.formats import kept_items
from earmark.stages.publish.plots import card_section, write_plots
from earmark.storage import Catalog
from earmark.storage.paths import inside, plain_name, version_name
from earmark.storage.shards import file_sha256

PUBLISH_VERSION = "3"  # 2: entailment and ifeval exports in their benchmarks' columns; 3: plots


def export_mecat(cat: Catalog, version: str, out_dir: Path) -> dict[str, int]:
    """Write caption/<domain>.jsonl and qa/<domain>.jsonl for `version`; returns counts."""
    kept = kept_items(version)
    caps = cat.query(
        f"SELECT clip_id, domain, kind, text FROM {version}.captions WHERE item_id IN {kept} "
        "ORDER BY clip_id, kind, ref_index"
    )
    qa = cat.query(
        f"SELECT clip_id, domain, qa_index, category, difficulty, question, answer FROM {version}.qa "
        f"WHERE item_id IN {kept} ORDER BY clip_id, qa_index"
    )
    by_clip: dict[str, dict] = {}
    for clip_id, domain, kind, text in caps:
        entry = by_clip.setdefault(clip_id, {"domain": domain})
        entry.setdefault(kind, []).append(text)
    caption_lines: dict[str, list[str]] = defaultdict(list)
    for clip_id, entry in by_clip.items():
        ordered = {k: entry[k] for k in CAPTION_KINDS if k in entry} | {"domain": entry["domain"]}
        caption_lines[entry["domain"]].append(json.dumps({clip_id: ordered}, ensure_ascii=False))
    qa_lines: dict[str, list[str]] = defaultdict(list)
    for clip_id, domain, idx, category, difficulty, question, answer in qa:
        qa_lines[domain].append(
            json.dumps(
                {
                    f"{clip_id}_{idx}": {
                        "category": category,
                        "difficulty": difficulty,
                        "question": question,
                        "answer": answer,
                        "domain": domain,
                    }
                },
                ensure_ascii=False,
            )
        )
    for sub, lines in (("caption", caption_lines), ("qa", qa_lines)):
        (out_dir / sub).mkdir(parents=True, exist_ok=True)
        for domain, rows in lines.items():
            inside(out_dir, sub, f"{plain_name(domain, 'domain code')}.jsonl").write_text("\n".join(rows) + "\n")
    return {"caption_clips": len(by_clip), "caption_refs": len(caps), "qa_pairs": len(qa)}


def export_items(cat: Catalog, version: str, out_dir: Path) -> dict[str, int]:
    """Write the kept entailment and instruction items in their benchmarks' columns (earmark.stages.publish.formats).

    - `entailment/entailment.csv`: the Audio Entailment CSV, one row per clip with its three hypotheses
      (`Audio file` names `<clip_id>.wav`; `earmark export --format entailment` writes the audio beside it);
    - `ifeval/ifeval.jsonl`: AudioBench's IFEval-Audio columns, `context` = the clip id (`earmark export
      --format audiobench` embeds the audio).
    The audio itself stays in table `clips`: a version's exports are its text, not a copy of its clips.
    """
    ent, skipped = formats.entailment_rows(cat, version)
    ins = formats.audiobench_rows(cat, version)
    if ent:
        formats.write_entailment_csv(ent, out_dir / "entailment" / "entailment.csv")
    if ins:
        (out_dir / "ifeval").mkdir(parents=True, exist_ok=True)
        (out_dir / "ifeval" / "ifeval.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ins))
    return {"entailment_clips": len(ent), "entailment_clips_incomplete": len(skipped), "instruction_triples": len(ins)}


# ---------------------------------------------------------------------------------------- the stage
def publish_spec(tables: list[str]) -> StageSpec:
    return StageSpec("publish", PUBLISH_VERSION, writes=("exports",), reads=tuple(sorted(tables)))


PUBLISH_READS = ("domain", "quarantine", "qc", "claims")  # besides the item tables: what the exports and card read


class Sources:
    """What the publish stage reads: its declared input shards, as the version's SQL views (`<version>.<table>`,
    earmark.stages.base.InputTables), and the catalog only for where files go and the runs' lineage (`cat`)."""

    def __init__(self, cat: Catalog, version: str, inputs: Inputs) -> None:
        self.cat, self.dataset, self.root = cat, cat.dataset, cat.root
        self.tables = inputs.sql(version_name(version), (*PUBLISH_READS, *ITEM_TABLES))
        self.shards = {t: keys for t, keys in inputs.keys.items() if keys}

    def query(self, sql: str, params: Any = None) -> list[tuple]:
        return self.tables.query(sql, params)

    def cursor_query(self, sql: str, params: Any = None) -> tuple[list[str], list[tuple]]:
        return self.tables.cursor_query(sql, params)

    def dataset_path(self, *parts: str) -> Path:
        return self.cat.dataset_path(*parts)

    def version_shards(self, version: str) -> dict[str, list[str]]:
        """The version's tables and shards: the declared inputs."""
        return self.shards


def publish(cat: Catalog, version: str, inputs: Inputs) -> dict[str, list[ExportFile]]:
    """The publish stage: write the version's exports and card under exports/<version>/ from its declared inputs
    (the version's shards); list them."""
    src = Sources(cat, version, inputs)
    out_dir = cat.dataset_path("exports", version_name(version))
    counts = {**export_mecat(src, version, out_dir), **export_items(src, version, out_dir)}
    plots = write_plots(src, version, out_dir / "plots")
    (out_dir / "README.md").write_text(dataset_card(src, version, counts, cat) + card_section(plots, out_dir))
    files = sorted(p for p in out_dir.rglob("*") if p.is_file())
    return {
        "exports": [
            ExportFile(
                version=version,
                path=str(p.relative_to(cat.root)),
                format=_format(p),
                rows=_rows(p),
                sha256=file_sha256(p),
            )
            for p in files
        ]
    }


def _format(path: Path) -> str:
    parts = path.parent.name
    return {
        "caption": "mecat-caption",
        "qa": "mecat-qa",
        "entailment": "audio-entailment-csv",
        "ifeval": "audiobench-ifeval",
    }.get(parts, "card" if path.name == "README.md" else path.suffix.lstrip("."))


def _rows(path: Path) -> int:
    n = path.read_text().count("\n")
    return n - 1 if path.suffix == ".csv" else n


def _claims_table(cat: Catalog, version: str) -> list[str]:
    version = version_name(version)
    audited = cat.query(
        f"SELECT item_table, count(*), count(*) FILTER (WHERE keep) FROM {version}.qc "
        "WHERE \"check\" = 'claim_audit' GROUP BY 1 ORDER BY 1"
    )
    claims = dict(
        ((t, v), n)
        for t, v, n in cat.query(f"SELECT item_table, verdict, count(*) FROM {version}.claims GROUP BY 1, 2")
    )
    if not audited:
        return ["No claim audit in this version."]
    rows = [
        "| items | audited | kept by the audit | claims supported | unsupported | contradicted |",
        "|---|---|---|---|---|---|",
    ]
    for table, n, kept in audited:
        rows.append(
            f"| {table} | {n} | {kept} | {claims.get((table, 'supported'), 0)} | "
            f"{claims.get((table, 'unsupported'), 0)} | {claims.get((table, 'contradicted'), 0)} |"
        )
    return rows


WRITERS = {
    "llm": "the model",
    "rule": "rule (configured)",
    "rule_fallback": "rule (the model's reply rejected)",
    "human": "a reviewer's rewrite",
}


def _writers_table(cat: Catalog, version: str) -> list[str]:
    """Kept items per table by who wrote them (`writer`: the model, the rules by configuration, or the rules
    standing in for a rejected reply). A version published before the column existed counts `model = 'rule'`."""
    rows = []
    present = cat.version_shards(version)
    for table in (t for t in ITEM_TABLES if t in present):
        columns, _ = cat.cursor_query(f"SELECT * FROM {version}.{table} LIMIT 0")
        writer = "writer" if "writer" in columns else "CASE WHEN model = 'rule' THEN 'rule' ELSE 'llm' END"
        # a review overlay of rows written before the column existed: the reviewer wrote it
        writer = f"CASE WHEN model LIKE 'human:%' THEN 'human' ELSE {writer} END"
        rows += [
            (table, w, m, n)
            for w, m, n in cat.query(
                f"SELECT {writer}, model, count(*) FROM {version}.{table} WHERE item_id IN {kept_items(version)} "
                "GROUP BY 1, 2 ORDER BY 1, 2"
            )
        ]
    if not rows:
        return ["No kept items."]
    return [
        "| items | writer | model | kept |",
        "|---|---|---|---|",
        *[f"| {t} | {WRITERS.get(w, w)} | {m} | {n} |" for t, w, m, n in rows],
    ]


def dataset_card(cat: Catalog | Sources, version: str, counts: dict[str, int], lineage: Catalog | None = None) -> str:
    """The version's card (README.md of its exports). `cat`: where its tables are read (the publish stage's
    declared inputs, or a published version's views); `lineage`: the catalog whose runs say who wrote the items
    (default `cat`)."""
    version = version_name(version)  # an SQL identifier below
    dom = cat.query(f"SELECT domain, count(*) FROM {version}.domain GROUP BY 1 ORDER BY 1")
    q = cat.query(f"SELECT count(*) FROM {version}.quarantine")[0][0]
    rej = cat.query(
        f'SELECT item_table, "check", count(*) FROM {version}.qc WHERE NOT keep GROUP BY 1, 2 ORDER BY 1, 2'
    )
    models = cat.query(f"SELECT DISTINCT model, prompt_name, prompt_sha FROM {version}.captions ORDER BY 2")
    review = cat.query(
        f"SELECT item_table, split_part(reason, ' ', 1), count(*) FROM {version}.qc "
        "WHERE \"check\" = 'human_review' AND item_id NOT LIKE '%~rev' GROUP BY 1, 2 ORDER BY 1, 2"
    )
    lines = [
        f"# {cat.dataset} {version}",
        "",
        "Built by earmark: expert models → LLM synthesis → QC. Every row carries its lineage.",
        "",
        "## Clips per domain",
        "",
        "| domain | clips |",
        "|---|---|",
        *[f"| {d} | {n} |" for d, n in dom],
        "",
        f"Quarantined inputs: {q}",
        "",
        "## Exported (kept by every QC check)",
        "",
        *[f"- {k}: {v}" for k, v in counts.items()],
        "",
        "## Rejections by check",
        "",
        "| table | check | rejected |",
        "|---|---|---|",
        *[f"| {t} | {c} | {n} |" for t, c, n in rej],
        "",
        "## Claim audit",
        "",
        "Every claim an item makes, judged against its clip's confident expert facts (stages/filter/claims.py).",
        "",
        *_claims_table(cat, version),
        "",
        "## Human review",
        "",
        *(
            [f"| {t} | {d} | {n} |" for t, d, n in review]
            and ["| table | decision | items |", "|---|---|---|", *[f"| {t} | {d} | {n} |" for t, d, n in review]]
            or ["No review decisions applied."]
        ),
        "",
        "## Who wrote the items",
        "",
        "Each item row's `writer` column says it: the model, the rule templates of prompts/ (the default with an",
        "embedded small model), or the rules standing in for a reply the checks rejected.",
        "",
        *_writers_table(cat, version),
        "",
        "## Generators",
        "",
        "| model | prompt | sha |",
        "|---|---|---|",
        *[f"| {m} | {p} | {s} |" for m, p, s in models],
        "",
        "## Reproducibility",
        "",
        _reproducibility(cat, version, lineage or cat),
    ]
    return "\n".join(lines) + "\n"


def _reproducibility(cat: Catalog, version: str, lineage: Catalog) -> str:
    """Whether building the same inputs with the same config again gives this version's rows: yes for rules, the
    experts and the embedded llama.cpp model (fixed seeds; measured in docs/benchmarks.md); not promised for items
    a model behind an external endpoint wrote (its replies may change with batching, sampling or the model)."""
    endpoints = sorted(
        e
        for (e,) in lineage.query(  # the runs' lineage: the catalog's bookkeeping
            "SELECT DISTINCT json_extract_string(r.config_json, '$.llm.endpoint') FROM version_shards v "
            "JOIN shards s ON s.key = v.key AND s.table_name = v.table_name JOIN runs r ON r.run_id = s.run_id "
            "WHERE v.version = ? AND list_contains(?, v.table_name)",
            [version, list(ITEM_TABLES)],
        )
        if e
    )
    llm_items = sum(
        cat.query(f"SELECT count(*) FROM {version}.{table} WHERE writer = 'llm'")[0][0] for table in ITEM_TABLES
    )
    if endpoints and llm_items:
        return (
            f"Not promised: {llm_items} items were written by a model behind {', '.join(endpoints)}, an external "
            "endpoint whose replies may differ for the same request (batching, sampling, model updates). The "
            "request cache (`<data_root>/.llm_cache`) keeps this build's replies: a rebuild that has it gives the "
            "same rows."
        )
    return (
        "The same inputs and config built into a fresh data root give identical rows in every table: the rules, "
        "the experts and the embedded llama.cpp model (fixed seeds) are deterministic on one machine "
        '(docs/benchmarks.md, "Reproducible builds").'
    )
