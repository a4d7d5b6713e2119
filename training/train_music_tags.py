"""Train, calibrate and measure the music-tag heads; write experts/learned/musictags/music_tags.{npz,json}.

    python training/train_music_tags.py              # after music_corpus.py renders [--degraded] / real, music_features.py
    python training/train_music_tags.py --tiny       # CI smoke run: a few clips, writes only under the cache

Splits are by soundfont package (training/music_corpus.py; each clean and degraded: train + train2 ...): TRAIN fits the heads (a small MLP over musicnn's
MTT + MSD window features, one sigmoid per tag, masked binary cross-entropy: a label without truth for a clip
adds nothing), CAL (another soundfont) fits each tag's isotonic calibration (window scores and clip-mean
scores) and decides which tags reach the evidence, DEV (a third soundfont) and the real recordings are only
measured. A tag reaches the evidence when its calibrated precision on CAL (two-fold cross-fitted, so the
curve is not scored on the clips it was fitted on) at calibrated probability >= the bar is >= the bar, with
recall >= MIN_RECALL and >= MIN_POS positives. The bar is `[evidence] music_tag_confidence` (0.9).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import music_midi as mm
from music_corpus import cache_dir
from music_features import clips, load_split

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "experts" / "learned" / "musictags"
BAR = 0.9
MIN_RECALL, MIN_POS = 0.1, 10
GROUPS = {
    **dict.fromkeys(mm.INSTRUMENTS, "instrument"),
    **dict.fromkeys(mm.GENRES, "genre"),
    **dict.fromkeys(mm.MOODS, "mood"),
    "solo": "instrument",
}
NO_TRUTH = {
    "vocals": "no sung vocals in any source: renders are instrumental, the game tracks' metadata never says",
    "eras (60s … 00s), oldies": "no release dates of comparable music",
    "catchy, beautiful, sexy, party, happy, sad, weird": "no ground truth a script or the metadata can give",
    "pop, indie, alternative, punk, metal, hip-hop, funk, soul, rnb, blues, country, house, dance": "no sources",
}


# --------------------------------------------------------------------------- data
def dataset(cache: Path, split: str, blocks) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict]]:
    """Window features X (n, D), window labels Y (n, L) in {1, 0, -1}, window -> clip index, clip rows."""
    from earmark.experts.learned.musicnn import Musicnn
    from earmark.experts.learned.musictags.model import block_features

    rows = {r["id"]: r for r in clips(cache, split)}
    f = load_split(cache, split)
    mtt, msd = Musicnn("MTT_musicnn"), Musicnn("MSD_musicnn")
    X = block_features(mtt, msd, f["mtt"].astype(np.float32), f["msd"].astype(np.float32), blocks)
    order = list(dict.fromkeys(str(i) for i in f["ids"]))
    clip_of = np.array([order.index(str(i)) for i in f["ids"]]) if len(order) < 50 else _index(f["ids"], order)
    clip_rows = [rows[i] for i in order]
    Y = np.array([[clip_rows[c]["labels"].get(t, -1) for t in mm.ALL_LABELS] for c in clip_of], np.int8)
    return X, Y, clip_of, clip_rows


def combined(cache: Path, splits, blocks):
    """`dataset` of several splits stacked (clip indices offset); None when a split has no features."""
    parts = [dataset(cache, s, blocks) for s in splits]
    X = np.concatenate([p[0] for p in parts])
    Y = np.concatenate([p[1] for p in parts])
    offsets = np.cumsum([0] + [len(p[3]) for p in parts[:-1]])
    c = np.concatenate([p[2] + o for p, o in zip(parts, offsets)])
    return X, Y, c, [r for p in parts for r in p[3]]


def _index(ids, order) -> np.ndarray:
    pos = {k: n for n, k in enumerate(order)}
    return np.array([pos[str(i)] for i in ids])


# --------------------------------------------------------------------------- model
def fit_mlp(X, Y, seed: int, hidden: int, epochs: int, lr: float = 1e-3, wd: float = 1e-3, dropout: float = 0.3):
    """Standardise + one hidden layer + sigmoids, masked BCE (labels -1 ignored), Adam, fixed epochs."""
    import torch

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    mu, sd = X.mean(axis=0), X.std(axis=0) + 1e-3
    Xt = torch.tensor((X - mu) / sd, dtype=torch.float32)
    Yt = torch.tensor(np.clip(Y, 0, 1), dtype=torch.float32)
    Mt = torch.tensor(Y >= 0, dtype=torch.float32)
    layers = [torch.nn.Dropout(0.1), torch.nn.Linear(X.shape[1], hidden), torch.nn.ReLU(), torch.nn.Dropout(dropout)]
    net = torch.nn.Sequential(*layers, torch.nn.Linear(hidden, Y.shape[1]))
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=wd)
    # positives are rare for most tags: weight them up to 1:1 (per tag, capped at 10)
    pos = (Yt * Mt).sum(0)
    neg = ((1 - Yt) * Mt).sum(0)
    pw = torch.clamp(neg / torch.clamp(pos, min=1), 1, 10)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        net.train()
        for idx in torch.randperm(len(Xt), generator=gen).split(256):
            logits = net(Xt[idx])
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                logits, Yt[idx], reduction="none", pos_weight=pw
            )
            loss = (loss * Mt[idx]).sum() / torch.clamp(Mt[idx].sum(), min=1)
            opt.zero_grad()
            loss.backward()
            opt.step()
    net.eval()
    lin = [m for m in net if isinstance(m, torch.nn.Linear)]
    return {
        "mu": mu.astype(np.float32),
        "sd": sd.astype(np.float32),
        **{f"W{i}": m.weight.detach().numpy().T.astype(np.float32) for i, m in enumerate(lin)},
        **{f"b{i}": m.bias.detach().numpy().astype(np.float32) for i, m in enumerate(lin)},
    }


def predict(w: dict, X: np.ndarray) -> np.ndarray:
    h = (X - w["mu"]) / w["sd"]
    i = 0
    while f"W{i}" in w:
        h = h @ w[f"W{i}"] + w[f"b{i}"]
        if f"W{i + 1}" in w:
            h = np.maximum(h, 0)
        i += 1
    return 1 / (1 + np.exp(-np.clip(h, -30, 30)))


def clip_scores(S: np.ndarray, clip_of: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros((n, S.shape[1]), np.float32)
    np.add.at(out, clip_of, S)
    return out / np.bincount(clip_of, minlength=n)[:, None]


def clip_labels(Y: np.ndarray, clip_of: np.ndarray, n: int) -> np.ndarray:
    out = np.full((n, Y.shape[1]), -1, np.int8)
    out[clip_of] = Y
    return out


# --------------------------------------------------------------------------- calibration
def isotonic(s: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Breakpoints (x, y) of P(y = 1 | score): isotonic regression whose blocks' rates are Laplace-smoothed,
    (positives + 1) / (items + 2), and made monotone again (weighted by the blocks' sizes), so a block of a
    few clips never says 1.0; anchored at scores 0 and 1."""
    from sklearn.isotonic import IsotonicRegression

    if y.size == 0 or y.min() == y.max():
        p = (float(y.sum()) + 1) / (y.size + 2)
        return np.array([0.0, 1.0]), np.array([p, p])
    order = np.argsort(s, kind="stable")
    s, y = s[order], y[order].astype(float)
    fitted = IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip").fit(s, y).predict(s)
    starts = np.flatnonzero(np.r_[True, np.diff(fitted) != 0])  # blocks: runs of one fitted value
    n = np.diff(np.r_[starts, len(s)])
    rate = (np.add.reduceat(y, starts) + 1) / (n + 2)
    rate = IsotonicRegression().fit(np.arange(len(n)), rate, sample_weight=n).predict(np.arange(len(n)))
    lo, hi = s[starts], s[np.r_[starts[1:], len(s)] - 1]  # each block's score range
    x = np.concatenate([[0.0], np.column_stack([lo, hi]).ravel(), [1.0]])
    v = np.concatenate([[rate[0]], np.repeat(rate, 2), [rate[-1]]])
    return x, v


def cross_fitted(s: np.ndarray, y: np.ndarray, seed: int) -> np.ndarray:
    """Calibrated probabilities of each item from a curve fitted on the other half (two folds)."""
    fold = np.random.default_rng(seed).permutation(len(s)) % 2
    out = np.zeros(len(s))
    for k in (0, 1):
        cx, cy = isotonic(s[fold != k], y[fold != k])
        out[fold == k] = np.interp(s[fold == k], cx, cy)
    return out


def pr(pred: np.ndarray, y: np.ndarray) -> dict:
    tp = int(((pred == 1) & (y == 1)).sum())
    fp = int(((pred == 1) & (y == 0)).sum())
    fn = int(((pred == 0) & (y == 1)).sum())
    return {
        "P": round(tp / (tp + fp), 3) if tp + fp else None,
        "R": round(tp / (tp + fn), 3) if tp + fn else None,
        "tp": tp,
        "fp": fp,
        "pos": tp + fn,
        "n": int(len(y)),
    }


def measure(P: np.ndarray, Y: np.ndarray, bar: float) -> list[dict]:
    """Per tag P/R of calibrated probabilities >= bar on the items with truth for the tag."""
    out = []
    for k in range(Y.shape[1]):
        m = Y[:, k] >= 0
        out.append(pr((P[m, k] >= bar).astype(int), Y[m, k]))
    return out


def average_precision(s: np.ndarray, y: np.ndarray) -> float | None:
    from sklearn.metrics import average_precision_score

    return float(average_precision_score(y, s)) if 0 < y.sum() < len(y) else None


# --------------------------------------------------------------------------- baseline: musicnn's own tags
BASELINE = {  # our tag -> (model, musicnn label): the raw tag calibrated on CAL like the heads, for comparison
    "guitar": ("mtt", "guitar"), "strings": ("mtt", "strings"), "drums": ("mtt", "drums"), "piano": ("mtt", "piano"),
    "violin": ("mtt", "violin"), "synthesizer": ("mtt", "synth"), "harpsichord": ("mtt", "harpsichord"),
    "flute": ("mtt", "flute"), "harp": ("mtt", "harp"), "cello": ("mtt", "cello"), "choir": ("mtt", "choir"),
    "sitar": ("mtt", "sitar"), "classical": ("mtt", "classical"), "electronic": ("mtt", "electronic"),
    "rock": ("mtt", "rock"), "ambient": ("mtt", "ambient"), "slow": ("mtt", "slow"), "fast": ("mtt", "fast"),
    "solo": ("mtt", "solo"), "jazz": ("msd", "jazz"), "folk": ("msd", "folk"), "calm": ("msd", "Mellow"),
}  # fmt: skip


def baseline_scores(X: np.ndarray, blocks) -> dict[str, np.ndarray]:
    from earmark.experts.learned.musicnn import MSD_LABELS, MTT_LABELS

    off, pos = 0, {}
    for b in blocks:
        pos[b] = off
        off += {"mtt_logit": 50, "msd_logit": 50, "mtt_emb": 200, "msd_emb": 200}.get(b, 1506)
    out = {}
    for tag, (model, lab) in BASELINE.items():
        if f"{model}_logit" in pos:
            k = pos[f"{model}_logit"] + (MTT_LABELS if model == "mtt" else MSD_LABELS).index(lab)
            out[tag] = 1 / (1 + np.exp(-X[:, k]))
    return out


# --------------------------------------------------------------------------- main
def run(
    cache: Path, out_dir: Path, blocks, hidden: int, epochs: int, seed: int, bar: float, splits: dict | None = None
) -> dict:
    """splits: role -> split names (train / cal / dev / dev2 / real); roles without names are skipped."""
    t0 = time.time()
    splits = splits or {"train": ["train"], "cal": ["cal"], "dev": ["dev"], "real": ["real"]}
    data = {role: combined(cache, names, blocks) for role, names in splits.items() if names}
    Xtr, Ytr, ctr, rtr = data["train"]
    n_pos_train = clip_labels(Ytr, ctr, len(rtr)).__eq__(1).sum(axis=0)
    keep = [k for k, t in enumerate(mm.ALL_LABELS) if n_pos_train[k] >= MIN_POS]
    tags = [mm.ALL_LABELS[k] for k in keep]
    w = fit_mlp(Xtr, Ytr[:, keep], seed, hidden, epochs)
    print(f"trained {len(tags)} tags on {len(Xtr)} windows / {len(rtr)} clips in {time.time() - t0:.0f} s")
    Xc, Yc, cc, rc = data["cal"]
    Yc = Yc[:, keep]
    Sc = predict(w, Xc)
    SCc, YCc = clip_scores(Sc, cc, len(rc)), clip_labels(Yc, cc, len(rc))
    cal = {"window": [], "clip": []}
    cal_report, evidence = [], {}
    for k, tag in enumerate(tags):
        mw, mc = Yc[:, k] >= 0, YCc[:, k] >= 0
        cal["window"].append(isotonic(Sc[mw, k], Yc[mw, k]))
        cal["clip"].append(isotonic(SCc[mc, k], YCc[mc, k]))
        xfit = cross_fitted(SCc[mc, k], YCc[mc, k], seed)
        m = pr((xfit >= bar).astype(int), YCc[mc, k])
        m["AP"] = average_precision(SCc[mc, k], YCc[mc, k])
        cal_report.append(m)
        evidence[tag] = bool(
            m["P"] is not None and m["P"] >= bar and (m["R"] or 0) >= MIN_RECALL and m["pos"] >= MIN_POS
        )

    def calibrated(S, level):
        return np.stack([np.interp(S[:, k], *cal[level][k]) for k in range(len(tags))], axis=1)

    results = {"cal_clip": cal_report}
    for split in [s for s in ("dev", "dev2", "real") if s in data]:
        X, Y, c, rows = data[split]
        Y = Y[:, keep]
        S = predict(w, X)
        SC, YC = clip_scores(S, c, len(rows)), clip_labels(Y, c, len(rows))
        PC = calibrated(SC, "clip")
        if split == "dev2":
            results["dev2_clip"] = measure(PC, YC, bar)
        elif split == "dev":
            results["dev_clip"] = measure(PC, YC, bar)
            results["dev_window"] = measure(calibrated(S, "window"), Y, bar)
            for k, m in enumerate(results["dev_clip"]):
                mk = YC[:, k] >= 0
                m["AP"] = average_precision(SC[mk, k], YC[mk, k])
        else:
            for src in ("recording", "sampled"):
                sel = np.array([r["source"] == src for r in rows])
                results[f"{src}_clip"] = measure(PC[sel], YC[sel], bar)
    # baseline: musicnn's own tags, isotonic on CAL clips, P/R on DEV clips at the same bar
    Xd, Yd, cd, rd = data["dev"]
    base_c, base_d = baseline_scores(Xc, blocks), baseline_scores(Xd, blocks)
    YDc = clip_labels(Yd[:, keep], cd, len(rd))
    results["baseline_dev_clip"] = {}
    for tag in base_c:
        if tag in tags:
            k = tags.index(tag)
            mc, md = YCc[:, k] >= 0, YDc[:, k] >= 0
            curve = isotonic(clip_scores(base_c[tag][:, None], cc, len(rc))[mc, 0], YCc[mc, k])
            pd_ = np.interp(clip_scores(base_d[tag][:, None], cd, len(rd))[md, 0], *curve)
            results["baseline_dev_clip"][tag] = pr((pd_ >= bar).astype(int), YDc[md, k])
    save(out_dir, w, tags, blocks, cal, evidence, results, bar, {"seed": seed, "hidden": hidden, "epochs": epochs,
         "blocks": list(blocks), "splits": splits})  # fmt: skip
    print(f"done in {time.time() - t0:.0f} s")
    return results


def _pad(curves) -> tuple[np.ndarray, np.ndarray]:
    k = max(len(x) for x, _ in curves)
    X = np.stack([np.concatenate([x, np.full(k - len(x), x[-1])]) for x, _ in curves])
    Y = np.stack([np.concatenate([y, np.full(k - len(y), y[-1])]) for _, y in curves])
    return X.astype(np.float32), Y.astype(np.float32)


def save(out_dir, w, tags, blocks, cal, evidence, results, bar, trained: dict) -> None:
    from earmark.experts.learned.musictags.model import weights_id

    out_dir.mkdir(parents=True, exist_ok=True)
    cwx, cwy = _pad(cal["window"])
    ccx, ccy = _pad(cal["clip"])
    npz = out_dir / "music_tags.npz"
    np.savez_compressed(npz, tags=np.array(tags), blocks=np.array(blocks), cal_window_x=cwx, cal_window_y=cwy,
                        cal_clip_x=ccx, cal_clip_y=ccy, **w)  # fmt: skip
    weights_id.cache_clear()
    rows = []
    for k, tag in enumerate(tags):
        cal_m, dev_m = results["cal_clip"][k], results["dev_clip"][k]
        rows.append({
            "tag": tag, "group": GROUPS[tag], "threshold": bar, "in_evidence": evidence[tag],
            "cal": {key: cal_m[key] for key in ("P", "R", "pos", "n")},
            "dev": {key: dev_m[key] for key in ("P", "R", "pos", "n")},
            "dev_window": {key: results["dev_window"][k][key] for key in ("P", "R", "pos", "n")},
            **{src: {key: results[f"{src}_clip"][k][key] for key in ("P", "R", "pos", "n")}
               for src in ("dev2", "recording", "sampled") if f"{src}_clip" in results},
        })  # fmt: skip
    doc = {
        "weights": npz.name,
        "weights_sha256_12": weights_id(npz),
        "threshold_meaning": "calibrated probability (clip: mean of window scores; window: own score) >= threshold",
        "bar": bar,
        "trained": trained,
        "licence": "weights: trained here from musicnn (ISC) features on renders of Debian soundfonts; ISC",
        "tags": rows,
        "no_truth": NO_TRUTH,
    }
    (out_dir / "music_tags.json").write_text(json.dumps(doc, indent=1) + "\n")
    (out_dir / "music_tags_results.json").write_text(json.dumps({"tags": tags, **results}, indent=1) + "\n")


def report(out_dir: Path) -> str:
    """Markdown tables of the tag file (what MUSIC_TAGS.md quotes)."""
    doc = json.loads((out_dir / "music_tags.json").read_text())
    res = json.loads((out_dir / "music_tags_results.json").read_text())
    f = lambda m: (
        "–"
        if m is None or m.get("P") is None and not m.get("pos")
        else f"{m['P'] if m['P'] is not None else '–'} / {m['R'] if m['R'] is not None else '–'} ({m['pos']}/{m['n']})"
    )  # noqa: E731
    lines = ["| tag | group | in evidence | CAL P / R (pos/n) | DEV renders P / R | DEV windows P / R | DEV degraded P / R | recordings P / R | sampled P / R | raw musicnn tag on DEV P / R |",
             "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in doc["tags"]:
        b = res["baseline_dev_clip"].get(r["tag"])
        lines.append(f"| {r['tag']} | {r['group']} | {'**yes**' if r['in_evidence'] else 'no'} | {f(r['cal'])} | {f(r['dev'])} | "
                     f"{f(r['dev_window'])} | {f(r.get('dev2'))} | {f(r.get('recording'))} | {f(r.get('sampled'))} | {f(b) if b else ''} |")  # fmt: skip
    ev = [r for r in doc["tags"] if r["in_evidence"]]
    ok = [r for r in ev if (r["dev"]["P"] or 0) >= doc["bar"]]
    lines.append("")
    lines.append(f"in evidence: {len(ev)} tags; with DEV precision >= {doc['bar']}: "
                 f"{sum(r['group'] == 'instrument' for r in ok)} instrument, {sum(r['group'] in ('genre', 'mood') for r in ok)} genre/mood "
                 f"({', '.join(r['tag'] for r in ok)})")  # fmt: skip
    return "\n".join(lines)


def tiny(cache: Path, seed: int) -> None:
    """CI smoke run: a few renders per split (into <cache>/../music_tags_tiny), features, a few epochs."""
    import music_corpus
    import music_features

    small = cache.parent / "music_tags_tiny"
    music_corpus.renders(small, {"train": 48, "cal": 24, "dev": 16}, seed, music_corpus.TINY_SOUNDFONTS)
    for split in ("train", "cal", "dev"):
        music_features.extract(small, split)
    tiny_splits = {"train": ["train"], "cal": ["cal"], "dev": ["dev"]}
    run(small, small / "out", ("mtt_logit", "mtt_emb", "msd_logit", "msd_emb"), 32, 3, seed, BAR, tiny_splits)
    print(report(small / "out"))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", default=None)
    ap.add_argument("--out", default=str(OUT_DIR))
    ap.add_argument(
        "--blocks", nargs="+", default=["mtt_logit", "mtt_emb", "msd_logit", "msd_emb", "mtt_pool", "msd_pool"]
    )
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bar", type=float, default=BAR)
    ap.add_argument("--train", nargs="+", default=["train", "train2"], help="splits that fit the heads")
    ap.add_argument("--cal", nargs="+", default=["cal", "cal2"], help="splits that fit the calibration")
    ap.add_argument("--dev", nargs="*", default=["dev"], help="splits only measured (clean renders)")
    ap.add_argument("--dev2", nargs="*", default=["dev2"], help="splits only measured (degraded renders)")
    ap.add_argument("--real", nargs="*", default=["real"], help="labelled recordings / sampled clips, only measured")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--report", action="store_true", help="print the tables of an existing tag file")
    a = ap.parse_args(argv)
    cache = cache_dir(a.cache)
    if a.tiny:
        return tiny(cache, a.seed)
    if not a.report:
        splits = {"train": a.train, "cal": a.cal, "dev": a.dev, "dev2": a.dev2, "real": a.real}
        run(cache, Path(a.out), tuple(a.blocks), a.hidden, a.epochs, a.seed, a.bar, splits)
    print(report(Path(a.out)))


if __name__ == "__main__":
    main()
