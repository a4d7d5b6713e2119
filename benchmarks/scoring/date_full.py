"""DATE on the full MECAT test set (9 caption + 6 QA groups): official `mecat` 1.1.0 vs `metrics.date`, per sample.

Candidates are mecat_full.py's baseline system (a clip's first *short* reference for caption fields, the
first *long* one for `short`, the first half of the answer for QA); references are the `mecat` wheel's test
set (20,052 clips, 100,260 QA pairs). The FENSE error checker is off on both sides (its checkpoint is a
download): every penalty is 1. Keys are sorted, as both implementations order samples.

    python benchmarks/scoring/date_full.py ours --device cuda --out DIR [--batch-size 256] [--half] [--limit N]
    python benchmarks/scoring/date_full.py official --device cuda --out DIR [--limit N] [--resume]
    python benchmarks/scoring/date_full.py compare DIR

`ours` times a cold pass (empty reference cache: references and candidates embedded) and a warm pass (the
same candidates, references from the cache) and counts the tie repairs; `official` times mecat's DATE on the
same inputs; both write per-sample similarity / discrimination / DATE to DIR; `compare` prints the max
per-sample |Δ| per group. Run them one after the other on one machine to compare times.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from earmark.metrics import date as ours_date  # noqa: E402
from earmark.metrics.date import GROUP_DELTA, QA_GROUPS, date_scores  # noqa: E402
from earmark.metrics.mecat_eval import CAPTION_GROUPS, load_references, wheel_reference_root  # noqa: E402
from earmark.metrics.similarity import default_sbert_path, load_sbert  # noqa: E402

COLUMNS = ("similarity", "discrimination", "date")


def groups(limit: int | None, only: list[str] | None = None) -> dict[str, tuple[list[str], list[str], list[list[str]]]]:
    """group → (sorted keys, candidates, references)."""
    root = wheel_reference_root()
    short, long_ = load_references(root, "content_short"), load_references(root, "content_long")
    out = {}
    for group in (*CAPTION_GROUPS, *QA_GROUPS):
        if only and group not in only:
            continue
        refs = load_references(root, group)
        keys = sorted(refs)[:limit] if limit else sorted(refs)
        if group in CAPTION_GROUPS:
            source = long_ if CAPTION_GROUPS[group][0] == "short" else short
            cands = [source[k][0] for k in keys]
        else:
            cands = [" ".join(refs[k][0].split()[: max(1, len(refs[k][0].split()) // 2)]) for k in keys]
        out[group] = (keys, cands, [refs[k] for k in keys])
    return out


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def rounding_gap(data, device: str, batch_size: int, half: bool, batches: int = 24) -> None:
    """How far the fast pass lands from upstream's own embeddings: max L2 distance of normalised sentence
    embeddings over `batches` random upstream batches of each group's references (the tie window must
    exceed twice this)."""
    from earmark.metrics.date_embed import encode, exact_rows

    model = load_sbert().to(device)
    rng = np.random.default_rng(0)
    worst = 0.0
    for group, (_, _, refs) in data.items():
        corpus = encode(model, [r for rs in refs for r in rs], torch.device(device), batch_size, half)
        n_batches = (len(corpus.ids) + 31) // 32
        picks = rng.choice(n_batches, size=min(batches, n_batches), replace=False)
        rows = [r for b in picks for r in range(b * 32, min(b * 32 + 32, len(corpus.ids)))]
        exact = exact_rows(model, corpus, rows, torch.device(device))
        a = torch.nn.functional.normalize(torch.stack([exact[r] for r in rows]), dim=-1)
        b = torch.nn.functional.normalize(corpus.raw[rows], dim=-1)
        gap = float((a - b).norm(dim=-1).max())
        worst = max(worst, gap)
        print(
            f"rounding gap {group:24s} {len(rows):5d} sentences: max L2 {gap:.2e}  bitwise equal {(a == b).all(dim=-1).float().mean():.3f}"
        )
    print(f"rounding gap, all groups: max L2 {worst:.2e}")


def run_ours(
    data, device: str, out: Path, batch_size: int, half: bool, window: float, phases: tuple[str, ...] = ("cold", "warm")
) -> dict:
    model = load_sbert().to(device)
    date_scores(["a warm-up"], [["one", "two"]], delta=0.2, sbert=model, device=device)
    repairs = {"n": 0}
    real = ours_date._repair_ties

    def counting(*args, **kwargs):
        index, own, counts = real(*args, **kwargs)
        repairs["n"] += len(index)
        return index, own, counts

    ours_date._repair_ties = counting
    spent = {"encode": 0.0, "repair": 0.0}

    def timed(name, fn):
        def wrapper(*args, **kwargs):
            _sync(device)
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                _sync(device)
                spent[name] += time.perf_counter() - t

        return wrapper

    ours_date.encode = timed("encode", ours_date.encode)
    ours_date._repair_ties = timed("repair", ours_date._repair_ties)
    report: dict[str, dict] = {}
    for phase in phases:
        cache: dict = {} if phase == "cold" else report["_cache"]
        for group, (keys, cands, refs) in data.items():
            repairs["n"] = 0
            spent.update(encode=0.0, repair=0.0)
            _sync(device)
            start = time.perf_counter()
            res = date_scores(
                cands,
                refs,
                delta=GROUP_DELTA[group],
                sbert=model,
                device=device,
                batch_size=batch_size,
                half=half,
                tie_window=window,
                reference_cache=cache,
            )
            _sync(device)
            dt = time.perf_counter() - start
            report.setdefault(group, {})[phase] = {"seconds": dt, "repaired_rows": repairs["n"], **dict(spent)}
            np.savez(out / f"ours_{phase}_{group}.npz", **{c: getattr(res, c) for c in COLUMNS})
            print(
                f"ours {phase:4s} {group:24s} {len(keys):6d} samples {dt:7.2f} s (encode {spent['encode']:.2f}, "
                f"repair {spent['repair']:.2f})  repaired rows {repairs['n']}"
            )
        report["_cache"] = cache
    report.pop("_cache")
    for phase in phases:
        total = sum(g[phase]["seconds"] for g in report.values())
        print(f"ours {phase}: {total:.1f} s for {sum(len(v[0]) for v in data.values())} samples")
    if device == "cuda":
        print(f"peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")
    return report


class _NoChecker(torch.nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, sentences, batch_size: int = 32):
        return torch.ones(1 if isinstance(sentences, str) else len(sentences))


def run_official(data, device: str, out: Path, resume: bool = False) -> dict:
    import mecat.DATE as upstream
    import pandas as pd

    upstream.RefinedErrorChecker = _NoChecker  # checkpoint download is unavailable offline
    model = upstream.DATE(sbert_name_or_path=str(default_sbert_path()), device=device)
    report = {}
    for group, (keys, cands, refs) in data.items():
        if resume and (out / f"official_{group}.npz").exists():
            print(f"official {group:24s} done before, kept", flush=True)
            continue
        field = CAPTION_GROUPS[group][0] if group in CAPTION_GROUPS else "long"
        frame = pd.DataFrame(columns=["sample_id", "field_type", "delta", *COLUMNS])
        _sync(device)
        start = time.perf_counter()
        _, frame = model(
            ref_data={k: {field: list(r)} for k, r in zip(keys, refs)},
            val_data={k: {field: [c]} for k, c in zip(keys, cands)},
            group_name=group,
            dataframe=frame,
            field_type=field,
        )
        _sync(device)
        dt = time.perf_counter() - start
        assert list(frame["sample_id"]) == keys
        np.savez(out / f"official_{group}.npz", **{c: frame[c].to_numpy(dtype=np.float64) for c in COLUMNS})
        report[group] = {"seconds": dt}
        print(f"official {group:24s} {len(keys):6d} samples {dt:7.2f} s", flush=True)
    print(f"official: {sum(g['seconds'] for g in report.values()):.1f} s")
    return report


def compare(out: Path) -> None:
    worst = 0.0
    for f in sorted(out.glob("official_*.npz")):
        group = f.stem.removeprefix("official_")
        theirs = np.load(f)
        for phase in ("cold", "warm"):
            mine = out / f"ours_{phase}_{group}.npz"
            if not mine.exists():
                continue
            ours = np.load(mine)
            diffs = {c: np.abs(ours[c].astype(np.float64) - theirs[c]) for c in COLUMNS}
            worst = max(worst, *(d.max() for d in diffs.values()))
            over = sum(int((d > 1e-4).sum()) for d in diffs.values())
            print(
                f"{group:24s} {phase}: n {len(theirs['date']):6d}  max |Δ| "
                + "  ".join(f"{c} {d.max():.1e}" for c, d in diffs.items())
                + f"  values > 1e-4: {over}"
            )
    print(f"max per-sample |Δ| over every group and column: {worst:.2e}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["ours", "official", "compare", "gap"])
    ap.add_argument("out", nargs="?", type=Path, default=None)
    ap.add_argument("--out", dest="out_opt", type=Path, default=None)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--limit", type=int, default=None, help="samples per group (default: all)")
    ap.add_argument("--batch-size", type=int, default=ours_date.DEFAULT_BATCH)
    ap.add_argument("--half", action="store_true", help="fp16 autocast for our fast pass")
    ap.add_argument("--tie-window", type=float, default=ours_date.TIE_WINDOW)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--groups", default=None, help="comma-separated subset of the 15 groups (default: all)")
    ap.add_argument("--resume", action="store_true", help="official: keep the groups whose values OUT already holds")
    ap.add_argument("--cold-only", action="store_true", help="ours: the cold pass only (a fresh process per run)")
    args = ap.parse_args()
    out = args.out_opt or args.out
    if out is None:
        ap.error("give the output directory")
    out.mkdir(parents=True, exist_ok=True)
    if args.what == "compare":
        compare(out)
        return
    if args.threads:
        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    data = groups(args.limit, args.groups.split(",") if args.groups else None)
    inputs_s = time.perf_counter() - start
    print(f"inputs read in {inputs_s:.1f} s; device {args.device}", flush=True)
    if args.what == "gap":
        rounding_gap(data, args.device, args.batch_size, args.half)
        return
    if args.what == "ours":
        phases = ("cold",) if args.cold_only else ("cold", "warm")
        report = run_ours(data, args.device, out, args.batch_size, args.half, args.tie_window, phases)
        cold = sum(g["cold"]["seconds"] for g in report.values())
        report["_totals"] = {"inputs_s": inputs_s, "cold_s": cold, "inputs_and_cold_s": inputs_s + cold}
        print(f"inputs read + cold pass: {inputs_s + cold:.1f} s")
    else:
        report = run_official(data, args.device, out, args.resume)
    path = out / f"{args.what}.json"
    if args.resume and path.exists():  # the seconds of the groups run before
        report = {**json.loads(path.read_text()), **report}
    path.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
