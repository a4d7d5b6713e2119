"""The reply models of every synthesis prompt: validation and the JSON schema sent to the LLM, from one class.

`reply_schema(Model)` is the model's JSON schema with `$ref`s inlined and titles dropped, which is what
llama.cpp's grammar and vLLM/OpenAI's `json_schema` take. Length limits are pydantic constraints, so the
grammar cuts a rambling reply and validation refuses one a server did not constrain. Per-kind limits
(captions) and per-plan shapes (instructions, the joint reply) are built with `create_model`.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, create_model, field_validator

from earmark.stages.synthesize.common import check_question, check_sentence

QA_MAX_CHARS = {"question": 120, "answer": 180}
MAX_CHARS = {"short": 90, "long": 180, "speech": 110, "music": 80, "sound": 70, "environment": 90}
# Word range of each caption kind: MECAT's mean reference lengths (short 8.8, long 17.4, speech 8.2, music 5.9,
# sound 5.0, environment 7.6 words) ± ~40 %; a reply outside is sent back for repair.
CAPTION_WORDS = {
    "short": (5, 13),
    "long": (10, 26),
    "speech": (4, 13),
    "music": (3, 10),
    "sound": (3, 9),
    "environment": (4, 12),
}
REASONING_CHARS = 320
HYPOTHESIS = Annotated[str, Field(min_length=25, max_length=180)]
Confidence = Annotated[float, Field(ge=0, le=1)]
NEGATION = re.compile(r"\b(not|no|never|without|nothing|none|nobody|neither|nor|cannot)\b|n't\b", re.I)


class Reply(BaseModel):
    model_config = ConfigDict(extra="forbid")


def reply_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema, self-contained (no `$ref`), without titles and docstrings."""
    raw = model.model_json_schema()
    defs = raw.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return inline(defs[node["$ref"].rsplit("/", 1)[-1]])
            return {k: inline(v) for k, v in node.items() if k not in ("title", "description")}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    return inline(raw)


# --------------------------------------------------------------------------------------- captions, QA
class CaptionReply(Reply):
    caption: str = Field(min_length=12, max_length=200)
    confidence: Confidence

    @field_validator("caption")
    @classmethod
    def sentence(cls, v: str, info: ValidationInfo) -> str:
        ctx = info.context or {}
        low, high = CAPTION_WORDS.get(ctx.get("kind", ""), (3, 60))
        return check_sentence(v, low, high, ctx.get("max_chars"))


@cache
def caption_reply(max_chars: int) -> type[CaptionReply]:
    """CaptionReply whose caption (and grammar) stops at `max_chars`."""
    return create_model(
        f"CaptionReply{max_chars}", __base__=CaptionReply, caption=(str, Field(min_length=12, max_length=max_chars))
    )


class QAItem(Reply):
    question: str = Field(min_length=15, max_length=QA_MAX_CHARS["question"])
    answer: str = Field(min_length=20, max_length=QA_MAX_CHARS["answer"])
    confidence: Confidence

    @field_validator("question")
    @classmethod
    def is_question(cls, v: str) -> str:
        return check_question(v, QA_MAX_CHARS["question"])

    @field_validator("answer")
    @classmethod
    def is_answer(cls, v: str) -> str:
        return check_sentence(v, 3, 40, QA_MAX_CHARS["answer"])


# ------------------------------------------------------------------------------------------ entailment
def _no_negation(v: str) -> str:
    # the paper's "easy contradiction": negating the premise instead of stating something incompatible
    if m := NEGATION.search(v):
        raise ValueError(
            f"the contradiction uses a negation word ({m.group(0)!r}); state something "
            "incompatible with the audio instead"
        )
    return v


class _HypothesisChecks(Reply):
    """Each hypothesis one whole sentence; the contradiction without a negation word."""

    _sentences = field_validator("entailment", "neutral", "contradiction", check_fields=False)(
        lambda v: check_sentence(v, 5, 30, 180)
    )
    _negation = field_validator("contradiction", check_fields=False)(_no_negation)


class Hypotheses(_HypothesisChecks):
    """The three hypotheses of one entailment set (the joint reply's `entailment` object)."""

    entailment: HYPOTHESIS
    neutral: HYPOTHESIS
    contradiction: HYPOTHESIS


class EntailmentReply(_HypothesisChecks):
    """The focused entailment prompt's reply: reasoning first, then the hypotheses."""

    reasoning: str = Field(min_length=20, max_length=REASONING_CHARS)
    entailment: HYPOTHESIS
    neutral: HYPOTHESIS
    contradiction: HYPOTHESIS
    confidence: Confidence


# ---------------------------------------------------------------------------------------- instructions
class InstructionReply(Reply):
    """An instruction item: the question and the answer's content in the shape its rule's form needs."""

    reasoning: str
    question: str
    answer: str | None = None
    items: list[str] | None = None
    main_sound: str | None = None
    recording: str | None = None
    confidence: Confidence

    @field_validator("question")
    @classmethod
    def is_question(cls, v: str) -> str:
        return check_question(v, 140)


_ListItem = Annotated[str, Field(min_length=3, max_length=60)]
_Slot = Annotated[str, Field(min_length=3, max_length=80)]


def _form_fields(form: str) -> dict[str, Any]:
    if form == "list":
        return {"items": (list[_ListItem], Field(min_length=3, max_length=3))}
    if form == "json":
        return {"main_sound": (_Slot, ...), "recording": (_Slot, ...)}
    return {"answer": (str, Field(min_length=10, max_length=260))}


@cache
def instruction_reply(form: str, with_reasoning: bool = True) -> type[Reply]:
    """The reply shape of one instruction of form `form` (list, json, or a plain answer). The joint reply
    embeds it without its own reasoning and confidence."""
    fields: dict[str, Any] = {}
    if with_reasoning:
        fields["reasoning"] = (str, Field(min_length=20, max_length=REASONING_CHARS))
    fields["question"] = (str, Field(min_length=15, max_length=140))
    fields.update(_form_fields(form))
    if with_reasoning:
        fields["confidence"] = (Confidence, ...)
    return create_model(f"Instruction_{form}_{int(with_reasoning)}", __base__=Reply, **fields)


# ---------------------------------------------------------------------------------------------- joint
class JointQA(Reply):
    question: str = Field(min_length=15, max_length=QA_MAX_CHARS["question"])
    answer: str = Field(min_length=20, max_length=QA_MAX_CHARS["answer"])


def joint_reply(kinds: tuple[str, ...], n_qa: int, forms: tuple[str, ...]) -> type[Reply]:
    """The joint strategy's one reply: reasoning, 3 captions per kind, n_qa QA pairs, the entailment set
    and one instruction per planned form."""
    caption_lists = {
        k: (list[Annotated[str, Field(min_length=12, max_length=MAX_CHARS[k])]], Field(min_length=3, max_length=3))
        for k in kinds
    }
    captions = create_model("JointCaptions", __base__=Reply, **caption_lists)
    instructions = create_model(
        "JointInstructions",
        __base__=Reply,
        **{f"i{i}": (instruction_reply(f, False), ...) for i, f in enumerate(forms)},
    )
    return create_model(
        "JointReply",
        __base__=Reply,
        reasoning=(str, Field(min_length=40, max_length=2 * REASONING_CHARS)),
        captions=(captions, ...),
        qa=(list[JointQA], Field(min_length=n_qa, max_length=n_qa)),
        entailment=(Hypotheses, ...),
        instructions=(instructions, ...),
        confidence=(Confidence, ...),
    )
