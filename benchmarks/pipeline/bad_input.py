"""The bad-input corpus through ingest: what each kind of input becomes, and the reason a user is shown.

Writes support.bad_input's corpus to a temp dir, ingests its `inputs/` folder with
`max_file_s = 5` and `allowed_roots = [inputs/]` (the stage function, as one ingest shard does), and prints a
markdown table: input kind → outcome (clip / quarantined) → reason (and what to do). Exits 1 if any case's
outcome is not the expected one.

    python benchmarks/pipeline/bad_input.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))  # support: not installed
from earmark.core.config import IngestSection
from earmark.stages import ingest
from support.bad_input import MAX_FILE_S, write_bad_input_corpus  # noqa: E402


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cases, skipped = write_bad_input_corpus(root)
        cfg = IngestSection(max_file_s=MAX_FILE_S, allowed_roots=[root / "inputs"])
        t = time.perf_counter()
        files = ingest.discover([root / "inputs"], cfg.allowed_roots).sources
        out = ingest.run(files, cfg)
        seconds = time.perf_counter() - t
        clips = {c.source_path.removeprefix("inputs/") for c in out["clips"]}
        rows = {q.source_path.removeprefix("inputs/"): q for q in out["quarantine"]}
        wrong = 0
        print("| input | kind | outcome | reason shown (what to do) |")
        print("|---|---|---|---|")
        for case in cases:
            if case.name in clips:
                outcome, shown = "clip", "-"
            elif case.name in rows:
                q = rows[case.name]
                outcome, shown = "quarantined", f"{q.reason} ({q.fix})".replace(tmp, "<tmp>")
            else:
                outcome, shown = "MISSING", "-"
            ok = outcome == {"clip": "clip", "quarantine": "quarantined"}[case.expect]
            wrong += not ok
            name = case.name.replace("|", "\\|")
            print(f"| `{name}` | {case.kind} | {outcome}{'' if ok else ' (UNEXPECTED)'} | {shown.replace('|', '/')} |")
        for name, why in skipped.items():
            print(f"| `{name}` | left out | - | {why} |")
        print(
            f"\n{len(files)} inputs, {len(clips)} files became clips, {len(rows)} quarantine rows, "
            f"{wrong} unexpected outcomes, ingest took {seconds:.2f} s"
        )
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
