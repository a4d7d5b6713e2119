"""Scoring a model's answers on a version's entailment hypotheses and IFEval-Audio instruction triples.

Entailment (Audio Entailment, Deshmukh et al.): the model hears the clip (the premise) and is asked
whether a hypothesis is true. Its free-form answer becomes a label by an LLM classifier when one is
configured (the paper's method: 96–99% agreement with humans) and by string rules otherwise or where the
LLM gives no usable label (`metrics.entailment.parse_label`; the paper measured 70.3% for string parsing).
Every sample records which path decided, and the report counts them.

IFEval-Audio: the rule check (`metrics.ifeval.audiobench_verdict`, AudioBench codes 1–13) gives IFR for every
answer; the paper's binary LLM judge gives SCR where a judge is configured; OSR needs both. Items written by
others are scored as AudioBench scores them: one without a format rule follows it, one whose rule_content
AudioBench does not accept does not; each such item is a warning (in the result's scores and notes; the
evaluate flow logs them).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from earmark.core import progress
from earmark.llm import LLMClient
from earmark.llm.client import LLMEndpointError
from earmark.metrics.entailment import LABELS, entailment_scores, parse_label
from earmark.metrics.ifeval import audiobench_verdict, ifeval_scores, parse_judge_rating, row_dimension
from earmark.prompts import Prompt, load_prompt
from earmark.schemas.outcomes import Score
from earmark.stages.publish.formats import kept_entailment, kept_items
from earmark.stages.synthesize.replies import reply_schema
from earmark.storage import Catalog

ITEM_SUBTASKS = ("entailment", "ifeval")
JUDGE_REQUESTS = ("evaluate", "judge requests")  # earmark.core.progress (stage, unit)


class ClassifyReply(BaseModel):
    label: Literal["entailment", "neutral", "contradiction", "unclear"]


class JudgeReply(BaseModel):
    correctness_rating: Literal[0, 1]
    explanation: str


@dataclass(frozen=True)
class EntailmentItem:
    item_id: str
    clip_id: str
    hypothesis: str
    label: str


@dataclass(frozen=True)
class InstructionItem:
    item_id: str
    clip_id: str
    instruction: str
    answer: str
    dimension: str
    rule: int
    rule_content: str


@dataclass
class ItemResult:
    """Per-sample rows, the task's metrics and how the samples were decided."""

    rows: list[Score]
    scores: dict
    decided_by: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def entailment_items(cat: Catalog, version: str) -> list[EntailmentItem]:
    rows = cat.query(
        f"SELECT item_id, clip_id, hypothesis, label FROM {version}.entailment "
        f"WHERE item_id IN {kept_entailment(version)} ORDER BY item_id"
    )
    return [EntailmentItem(*r) for r in rows]


def instruction_items(cat: Catalog, version: str) -> list[InstructionItem]:
    rows = cat.query(
        f"SELECT item_id, clip_id, instruction, answer, dimension, rule, rule_content "
        f"FROM {version}.instructions WHERE item_id IN {kept_items(version)} ORDER BY item_id"
    )
    return [InstructionItem(*r) for r in rows]


def model_requests(
    items: Sequence[EntailmentItem | InstructionItem], prompt_dir: Path | None = None
) -> dict[str, list[tuple[str, str, str]]]:
    """clip_id → [(subtask, item_id, prompt)] for earmark.llm.audio.run_model."""
    question = load_prompt("mecat_eval", prompt_dir).data["entailment"]["question"]
    out: dict[str, list[tuple[str, str, str]]] = {}
    for it in items:
        if isinstance(it, EntailmentItem):
            req = ("entailment", it.item_id, question.format(hypothesis=it.hypothesis))
        else:
            req = ("ifeval", it.item_id, it.instruction)
        out.setdefault(it.clip_id, []).append(req)
    return out


def _classify(llm: LLMClient, prompt: Prompt, hypothesis: str, answer: str) -> tuple[str | None, str | None]:
    """(label or None, error) from the LLM classifier."""
    messages = [{"role": "user", "content": prompt.render_user(hypothesis=hypothesis, answer=answer[:2000])}]
    try:
        res = llm.complete_json(
            messages, reply_schema(ClassifyReply), max_tokens=prompt.max_tokens, temperature=prompt.temperature
        )
    except LLMEndpointError as exc:
        return None, str(exc)
    label = res.data.get("label") if isinstance(res.data, dict) else None
    if label in LABELS:
        return label, None
    return None, None if label == "unclear" else f"classifier gave no label ({res.error or res.text[:80]!r})"


def classify_answers(
    classifier: LLMClient,
    items: Sequence[EntailmentItem],
    predictions: Mapping[str, str],
    max_workers: int = 1,
    prompt_dir: Path | None = None,
) -> tuple[dict[str, str | None], list[str]]:
    """{item_id: label or None} from the LLM classifier for every non-empty answer, and the request errors."""
    prompt = load_prompt("entailment_judge", prompt_dir)
    todo = [it for it in items if predictions.get(it.item_id, "").strip()]
    progress.report(*JUDGE_REQUESTS, planned=len(todo))

    def one(it: EntailmentItem) -> tuple[str | None, str | None]:
        try:
            return _classify(classifier, prompt, it.hypothesis, predictions[it.item_id])
        finally:
            progress.report(*JUDGE_REQUESTS, done=1)

    with ThreadPoolExecutor(max_workers=max_workers) as pool:
        got = list(pool.map(one, todo))
    return {it.item_id: label for it, (label, _) in zip(todo, got)}, [e for _, e in got if e]


def score_entailment(
    eval_id: str,
    model_name: str,
    version: str,
    items: Sequence[EntailmentItem],
    predictions: Mapping[str, str],
    llm_labels: Mapping[str, str | None] | None = None,
) -> ItemResult:
    """ACC, macro P/R/F1, per-class accuracy; `llm_labels` (from classify_answers) decide first, string rules
    where they are absent; an answer no path can read counts as wrong."""
    if not items:
        raise ValueError(f"version {version} has no kept entailment items to score")
    llm_labels = llm_labels or {}
    rows, predicted, decided, rule_vs_llm = [], [], Counter(), Counter()
    for it in items:
        answer = predictions.get(it.item_id, "")
        rule_label, llm_label = parse_label(answer), llm_labels.get(it.item_id)
        if llm_label is not None:
            label, path = llm_label, "llm"
            if rule_label is not None:
                rule_vs_llm[rule_label == llm_label] += 1
        elif rule_label is not None:
            label, path = rule_label, "rule"
        else:
            label, path = None, ("missing" if not answer.strip() else "unparsed")
        decided[path] += 1
        predicted.append(label)
        rows.append(
            Score(
                eval_id=eval_id,
                model_name=model_name,
                dataset_version=version,
                clip_id=it.clip_id,
                subtask="entailment",
                metric="correct",
                value=float(label == it.label),
                prediction=answer,
                item_id=it.item_id,
                note=f"pred={label} gold={it.label} by={path}",
            )
        )
    notes = []
    if rule_vs_llm:
        n = sum(rule_vs_llm.values())
        notes.append(f"string rules agreed with the LLM classifier on {rule_vs_llm[True]}/{n} answers both could read")
    return ItemResult(rows, entailment_scores([it.label for it in items], predicted), dict(decided), notes)


def llm_labels_from_rows(rows: Sequence[Score]) -> dict[str, str]:
    """The LLM classifier's labels as stored in score notes (for a result rebuilt from the catalog)."""
    out = {}
    for r in rows:
        parts = dict(p.split("=", 1) for p in (r.note or "").split() if "=" in p)
        if parts.get("by") == "llm" and parts.get("pred") in LABELS:
            out[r.item_id] = parts["pred"]
    return out


def _judge(llm: LLMClient, prompt: Prompt, it: InstructionItem, answer: str) -> tuple[bool | None, str | None]:
    # The paper's judge prompt asks for "Correctness Rating: (int)" lines; constrained JSON carries the same
    # two fields (prompts/ifeval_judge.toml `format`).
    text = prompt.render_user(reference=it.answer, prediction=answer[:2000], question=it.instruction)
    text += "\n\n" + prompt.data["format"]
    try:
        res = llm.complete_json(
            [{"role": "user", "content": text}],
            reply_schema(JudgeReply),
            max_tokens=prompt.max_tokens,
            temperature=prompt.temperature,
        )
    except LLMEndpointError as exc:
        return None, str(exc)
    rating = res.data.get("correctness_rating") if isinstance(res.data, dict) else None
    if rating in (0, 1):
        return bool(rating), None
    return parse_judge_rating(res.text), None


def judge_answers(
    judge: LLMClient,
    items: Sequence[InstructionItem],
    predictions: Mapping[str, str],
    max_workers: int = 1,
    prompt_dir: Path | None = None,
) -> tuple[dict[str, bool | None], list[str]]:
    """{item_id: correct?} by the paper's binary judge (an empty answer is incorrect without asking)."""
    prompt = load_prompt("ifeval_judge", prompt_dir)
    progress.report(*JUDGE_REQUESTS, planned=sum(bool(predictions.get(it.item_id, "").strip()) for it in items))

    def one(it: InstructionItem) -> tuple[bool | None, str | None]:
        answer = predictions.get(it.item_id, "")
        if not answer.strip():
            return False, None
        try:
            return _judge(judge, prompt, it, answer)
        finally:
            progress.report(*JUDGE_REQUESTS, done=1)

    with ThreadPoolExecutor(max_workers=max_workers) as pool:
        got = list(pool.map(one, items))
    return {it.item_id: v for it, (v, _) in zip(items, got)}, [e for _, e in got if e]


def score_ifeval(
    eval_id: str,
    model_name: str,
    version: str,
    items: Sequence[InstructionItem],
    predictions: Mapping[str, str],
    verdicts: Mapping[str, bool | None] | None = None,
) -> ItemResult:
    """IFR for every answer; SCR and OSR over the answers with a judge verdict (None without a judge)."""
    if not items:
        raise ValueError(f"version {version} has no kept instruction items to score")
    records, rows, decided = [], [], Counter()
    for it in items:
        answer = predictions.get(it.item_id, "")
        verdict = None if verdicts is None else verdicts.get(it.item_id)
        rule = audiobench_verdict(answer, it.rule, it.rule_content)
        passed = rule.passed
        if rule.zeroes_row and verdict is not None:  # AudioBench's judge loop scores such a row 0
            verdict = False
        dim = row_dimension(it.dimension, it.rule)[0]
        records.append(
            {
                "item_id": it.item_id,
                "instruction": it.instruction,
                "answer": it.answer,
                "dimension": dim,
                "rule": it.rule,
                "rule_content": it.rule_content,
                "model_prediction": answer,
                "judge_correct": verdict,
            }
        )
        decided["judged" if verdict is not None else ("not judged" if verdicts is None else "no rating")] += 1
        base = dict(
            eval_id=eval_id,
            model_name=model_name,
            dataset_version=version,
            clip_id=it.clip_id,
            subtask="ifeval",
            prediction=answer,
            item_id=it.item_id,
        )
        fallback = " audiobench=fallback" if rule.warning else ""
        rows.append(Score(**base, metric="ifr", value=float(passed), note=f"dimension={dim} rule={it.rule}{fallback}"))
        if verdict is not None:
            rows.append(Score(**base, metric="scr", value=float(verdict), note=f"dimension={dim} by=judge"))
    notes = [] if verdicts is not None else ["no judge LLM configured: SCR and OSR not computed (IFR only)"]
    scores = ifeval_scores(records)
    if scores["warnings"]:
        shown = "; ".join(scores["warnings"][:3]) + (" …" if len(scores["warnings"]) > 3 else "")
        notes.append(
            f"{len(scores['warnings'])} warnings: items scored by AudioBench's own fallbacks (no format rule: "
            f"followed; a rule or rule_content it does not accept: not followed), e.g. {shown}"
        )
    return ItemResult(rows, scores, dict(decided), notes)


def verdicts_from_rows(rows: Sequence[Score]) -> dict[str, bool]:
    return {r.item_id: bool(r.value) for r in rows if r.metric == "scr"}
