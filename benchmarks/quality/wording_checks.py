"""False positives of the wording checks (`cut_word`, `visual_claim`, `unsaid_person`: stages/filter/wording.py)
on items that should pass them. No LLM, no audio.

Two sets:
- the kept items of earlier builds' hand-check sheets (benchmarks/results/handcheck_*_sheet.md: 50 kept items
  each, LLM- and rule-written, with each clip's true words as its transcript), every item's fields checked;
- every rule-written item (captions of every kind, QA pairs, instruction triples, entailment sets) for the 48
  clips of benchmarks/quality/qc_planted.py (the six MECAT content mixes, hand-written transcripts), whose
  words are the phrase files' templates filled from the facts.

Prints, per set and check, the items checked and rejected, then every rejection with its reason (to read by
hand: a rejected item that says nothing wrong is a false positive).

    python benchmarks/quality/wording_checks.py
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

from qc_planted import TRANSCRIPTS, evidence  # noqa: E402

from earmark.core.config import SynthesizeSection  # noqa: E402
from earmark.schemas.records import CAPTION_KINDS, DOMAIN_CODES  # noqa: E402
from earmark.stages.filter.wording import WORDING_CHECKS  # noqa: E402
from earmark.stages.synthesize import ITEM_TYPES  # noqa: E402
from earmark.stages.synthesize.common import Synth  # noqa: E402
from earmark.stages.synthesize.item_types.captions import write as captions  # noqa: E402
from earmark.stages.synthesize.item_types.captions.rules import combined_captions, rule_captions  # noqa: E402
from earmark.stages.synthesize.item_types.entailment.rules import rule_entailment  # noqa: E402
from earmark.stages.synthesize.item_types.instructions.rules import rule_instructions  # noqa: E402
from earmark.stages.synthesize.item_types.qa.rules import rule_qa  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "results"
_HEADER = re.compile(r"^## \d+\. (\S+) \((\w+)/")


class _NoModel:
    model = "none"

    def complete_json(self, *args, **kwargs):
        raise AssertionError("a rule-written item asked the model")


def sheet_items(path: Path) -> list[tuple[str, tuple[str, ...], object, str]]:
    """(id, text fields, item, transcript) of each entry of a hand-check sheet."""
    out, entry = [], None
    for line in path.read_text().splitlines():
        if m := _HEADER.match(line):
            entry = {"id": f"{path.stem}:{m.group(1)}", "table": m.group(2), "text": [], "said": [], "truth": False}
            out.append(entry)
        elif entry is not None and line.strip().startswith("truth:"):
            entry["truth"] = True
        elif entry is not None and line.strip() and not entry["truth"]:
            entry["text"].append(line.strip())
        elif entry is not None and line.strip().startswith("voice "):
            entry["said"].append(line.split("): ", 1)[-1])
    items = []
    for e in out:
        text = " ".join(e["text"])
        question, _, answer = text.partition(" → ")
        fields = {"question": question, "answer": answer} if answer else {"text": text}
        items.append((e["id"], tuple(fields), SimpleNamespace(**fields), " ".join(e["said"])))
    return items


def rule_items() -> list[tuple[str, tuple[str, ...], object, str]]:
    """Every rule-written item of qc_planted's 48 clips, with its clip's transcript."""
    cfg = SynthesizeSection(
        content_captions="rule", entailment_sets="rule", qa_pairs="rule", instruction_triples="rule"
    )
    s = Synth(_NoModel(), cfg)
    items = []
    for d in DOMAIN_CODES:
        for i in range(6):
            said = TRANSCRIPTS[(i * 7 + len(d)) % len(TRANSCRIPTS)] if d[0] == "S" else None
            ev = evidence(hashlib.sha1(f"{d}_{i}".encode()).hexdigest()[:20], d, i, said)  # a hex id, as ingest's
            caps = []
            for kind in CAPTION_KINDS:
                if captions.is_absent(ev, kind, s):
                    caps += captions.absent_rows(ev, kind, s)
                elif captions.only_silence(ev, kind, s):
                    caps += captions.silence_rows(ev, kind, s)
                else:
                    caps += (
                        rule_captions(ev, kind, s) if kind in captions.RULE_KINDS else combined_captions(ev, kind, s)
                    )
            long = next((c for c in caps if c.kind == "long"), None)
            hyps = rule_entailment(ev, long, s)[0] if long is not None else []
            written = {
                "captions": caps,
                "qa": rule_qa(ev, s).rows,
                "instructions": rule_instructions(ev, s).rows,
                "entailment": hyps,
            }
            for table, rows in written.items():
                items += [(r.item_id, ITEM_TYPES[table].texts, r, said or "") for r in rows]
    return items


def report(name: str, items: list) -> None:
    print(f"\n## {name}: {len(items)} items\n")
    print("| check | rejected |")
    print("|---|---|")
    rejected = []
    for check, fn in WORDING_CHECKS.items():
        bad = [(i, texts, item, said, fn(texts, item, said)[1]) for i, texts, item, said in items]
        bad = [b for b in bad if b[4] is not None]
        rejected += [(check, *b) for b in bad]
        print(f"| `{check}` | {len(bad)} |")
    for check, item_id, texts, item, said, reason in rejected:
        text = " | ".join(getattr(item, t) for t in texts)
        print(f"- {check} {item_id}: {reason}\n  item: {text}\n  transcript: {said or '(none)'}")


def main() -> None:
    sheets = sorted(RESULTS.glob("handcheck_*_sheet.md"))
    report(f"kept items of {len(sheets)} hand-check sheets", [x for p in sheets for x in sheet_items(p)])
    report("rule-written items of qc_planted's 48 clips", rule_items())


if __name__ == "__main__":
    main()
