"""Audio Entailment scoring (ACE/CLE): accuracy, macro P/R/F1, per-class accuracy, and a string-rule
label parser for free-form model answers.

Metrics follow the paper's 3-way classification set-up (and sklearn's definitions with
labels=[entailment, neutral, contradiction], zero_division=0): macro F1 is the mean of per-class F1s
(not the F1 of macro P and R). An unparsable prediction (None) counts as wrong: a miss (false negative)
for its true class and a false positive for no class. Per-class accuracy is per-class recall; on the
paper's balanced test sets macro recall therefore equals ACC, as in its tables.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

LABELS = ("entailment", "neutral", "contradiction")


def entailment_scores(labels: Sequence[str], predictions: Sequence[str | None]) -> dict[str, float | int]:
    """ACC, macro precision/recall/F1 and per-class accuracy (EACC/NACC/CACC) as fractions in [0, 1].

    Also returns `n` and `unparsed` (how many predictions were None). A per-class accuracy is 0.0 when
    that class has no gold items (and the class still counts in the macro averages, like sklearn).
    """
    if len(labels) != len(predictions):
        raise ValueError(f"entailment_scores: {len(labels)} labels but {len(predictions)} predictions")
    if not labels:
        raise ValueError("entailment_scores: no items to score")
    for where, values, allowed in (("labels", labels, LABELS), ("predictions", predictions, (*LABELS, None))):
        bad = {v for v in values if v not in allowed}
        if bad:
            raise ValueError(f"entailment_scores: {where} contain {sorted(map(repr, bad))}; expected {LABELS}")

    tp = {c: 0 for c in LABELS}
    gold = {c: 0 for c in LABELS}
    predicted = {c: 0 for c in LABELS}
    for y, p in zip(labels, predictions):
        gold[y] += 1
        if p is not None:
            predicted[p] += 1
            tp[y] += p == y

    def ratio(a: int, b: int) -> float:
        return a / b if b else 0.0

    precision = {c: ratio(tp[c], predicted[c]) for c in LABELS}
    recall = {c: ratio(tp[c], gold[c]) for c in LABELS}
    f1 = {c: ratio(2 * precision[c] * recall[c], precision[c] + recall[c]) for c in LABELS}
    return {
        "n": len(labels),
        "unparsed": sum(p is None for p in predictions),
        "ACC": sum(tp.values()) / len(labels),
        "P": sum(precision.values()) / len(LABELS),
        "R": sum(recall.values()) / len(LABELS),
        "F1": sum(f1.values()) / len(LABELS),
        "EACC": recall["entailment"],
        "NACC": recall["neutral"],
        "CACC": recall["contradiction"],
    }


# ------------------------------------------------------------------------------------------- parsing
# Rules are tried in this order; the first that fires decides. Hedges come first because they often
# contain negations ("cannot be determined", "not enough information"); negated entailment comes
# before plain cues because "does not entail" contains "entail".
_NEG = r"(?:not|never|cannot|can't|doesn't|don't|isn't|aren't|wasn't|no)"
_NEUTRAL = re.compile(
    r"\b(?:neutral|maybe|perhaps|possibly|undetermined|undeterminable|indeterminate|inconclusive|unclear|"
    r"uncertain|unknown|unsure|not sure|neither|"
    r"(?:cannot|can ?not|can't|unable to|impossible to|not possible to|no way to|hard to|difficult to)"
    r" (?:be )?(?:determined?|tell|told|say|said|know|known|confirm(?:ed)?|verif(?:y|ied)|infer(?:red)?|conclude[d]?)|"
    r"(?:not|insufficient|isn't|is not) (?:enough|sufficient)|insufficient|not enough|not necessarily|"
    r"(?:i )?(?:don't|do not) know)\b"
)
_NEG_ENTAIL = re.compile(
    rf"\b{_NEG}\s+(?:\w+\s+)?(?:entail(?:ed|s)?|impl(?:y|ied|ies)|"
    rf"support(?:ed|s)?|true|correct|consistent|match(?:es)?|present)\b"
)
_NEG_CONTRA = re.compile(
    rf"\b{_NEG}\s+(?:\w+\s+)?"
    r"(?:contradict(?:s|ed|ion|ory)?|false|incorrect|wrong|inconsistent)\b"
)
_LEADING = re.compile(r"^\W*(?:answer\s*:?\s*)?(yes|yeah|yep|correct|true|no|nope|false|incorrect)\b")
_ANSWER_IS = re.compile(r"\b(?:answer|label|verdict|relation(?:ship)?) (?:is|:)\s*:?\s*\W?(yes|no|true|false)\b")
_CONTRA = re.compile(r"\b(?:contradict\w*|false|incorrect|wrong|inconsistent|refute[sd]?|conflicts?|absent|untrue)\b")
_ENTAIL = re.compile(r"\b(?:entail\w*|impl(?:y|ies|ied)|true|correct|consistent|supported|supports|confirm(?:s|ed)?)\b")

_YES = {"yes", "yeah", "yep", "correct", "true"}


def parse_label(text: str | None) -> str | None:
    """Map a free-form answer to entailment/neutral/contradiction, or None when no rule fires.

    Intended for answers to "is the hypothesis true given the audio? (yes/no/maybe)"-style prompts.
    Order: (1) hedges → neutral ("maybe", "cannot be determined", "not enough information", "neutral");
    (2) negated entailment → contradiction ("does not entail", "is not true", "not present");
    (3) negated contradiction ("does not contradict", "not false") → entailment;
    (4) a leading or declared yes/no ("Yes, ...", "The answer is no") → entailment/contradiction;
    (5) contradiction cues ("contradicts", "false", "incorrect"); (6) entailment cues ("entails",
    "true", "implies", "supported"). String rules are a known-lossy stand-in for the paper's LLM
    parser (it reports 70.3% agreement with humans for string parsing vs 96–99% for LLMs).
    """
    if not text:
        return None
    t = text.lower().replace("\u2019", "'").replace("\u2018", "'")
    t = re.sub(r"[*_`#]+", " ", t)  # markdown emphasis around the verdict
    t = re.sub(r"\s+", " ", t).strip()
    if not t:
        return None
    if _NEUTRAL.search(t):
        return "neutral"
    if _NEG_ENTAIL.search(t):
        return "contradiction"
    if _NEG_CONTRA.search(t):
        return "entailment"
    m = _LEADING.match(t) or _ANSWER_IS.search(t)
    if m:
        return "entailment" if m.group(1) in _YES else "contradiction"
    if _CONTRA.search(t):
        return "contradiction"
    if _ENTAIL.search(t):
        return "entailment"
    return None
