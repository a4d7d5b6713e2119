"""Plots of a version for the dataset card and the browser view: small standalone SVG strings, no plotting
library (they render in a browser, on the Hub and in any Markdown viewer).

- clips per domain;
- caption length per caption kind, earmark's kept references against MECAT's test references (word-count
  shares; MECAT's histograms come from `benchmarks/quality/mecat_caption_lengths.py`, shipped as data);
- QC rejections per check;
- claim-audit verdicts per item table.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import cache
from html import escape
from pathlib import Path

from earmark.schemas.records import CAPTION_KINDS
from earmark.stages.publish.formats import kept_items
from earmark.storage import Catalog
from earmark.storage.paths import version_name

_DATA = Path(__file__).parent / "data" / "mecat_caption_lengths.json"
_BLUE, _GREY, _RED, _GREEN, _AMBER = "#3b6ea8", "#9aa5b1", "#c0392b", "#2e8b57", "#d68910"
_FONT = 'font-family="sans-serif" font-size="11"'


@cache
def mecat_lengths() -> dict[str, list[int]]:
    """{caption kind: counts of MECAT test references by word count (index = words, last bin = more)}."""
    return json.loads(_DATA.read_text())["histograms"]


def bars(title: str, values: Mapping[str, int], color: str = _BLUE, width: int = 420) -> str:
    """A horizontal bar chart, one labelled bar per key (in the mapping's order)."""
    row, left, top = 18, 150, 24
    height = top + row * max(1, len(values)) + 8
    peak = max(values.values(), default=0) or 1
    parts = [_head(width, height), _text(8, 15, title, bold=True)]
    if not values:
        parts.append(_text(left, top + 12, "none"))
    for i, (label, n) in enumerate(values.items()):
        y = top + i * row
        w = round((width - left - 50) * n / peak)
        parts.append(_text(left - 6, y + 12, _short(label, 24), anchor="end"))
        parts.append(f'<rect x="{left}" y="{y + 2}" width="{max(w, 1)}" height="{row - 5}" fill="{color}"/>')
        parts.append(_text(left + w + 4, y + 12, str(n)))
    return "".join(parts) + "</svg>"


def stacked(title: str, rows: Mapping[str, Mapping[str, int]], colors: Mapping[str, str], width: int = 420) -> str:
    """One horizontal bar per row, split into its parts (shares), with a legend."""
    row, left, top = 18, 110, 24
    height = top + row * max(1, len(rows)) + 26
    parts = [_head(width, height), _text(8, 15, title, bold=True)]
    span = width - left - 60
    for i, (label, counts) in enumerate(rows.items()):
        y, x, total = top + i * row, float(left), sum(counts.values()) or 1
        parts.append(_text(left - 6, y + 12, _short(label, 16), anchor="end"))
        for part, color in colors.items():
            w = span * counts.get(part, 0) / total
            if w > 0:
                parts.append(f'<rect x="{x:.1f}" y="{y + 2}" width="{w:.1f}" height="{row - 5}" fill="{color}"/>')
            x += w
        parts.append(_text(left + span + 4, y + 12, str(sum(counts.values()))))
    y = top + row * max(1, len(rows)) + 10
    for j, (part, color) in enumerate(colors.items()):
        x = left + j * 100
        parts.append(f'<rect x="{x}" y="{y}" width="10" height="10" fill="{color}"/>')
        parts.append(_text(x + 14, y + 9, part))
    return "".join(parts) + "</svg>"


def lengths(kind: str, ours: Sequence[int], mecat: Sequence[int], width: int = 420) -> str:
    """Word-count shares of one caption kind: earmark's references (bars) vs MECAT's (line), with the means."""
    top, left, h = 24, 30, 90
    max_words = len(mecat) - 1
    mine = [0] * (max_words + 1)
    for n in ours:
        mine[min(n, max_words)] += 1
    share = [c / (sum(mine) or 1) for c in mine]
    ref = [c / (sum(mecat) or 1) for c in mecat]
    peak = max(max(share), max(ref)) or 1
    step = (width - left - 10) / (max_words + 1)
    mean_ours = sum(ours) / len(ours) if ours else 0.0
    mean_ref = sum(i * c for i, c in enumerate(mecat)) / (sum(mecat) or 1)
    title = f"{kind}: mean {mean_ours:.1f} words (n={len(ours)}) vs MECAT {mean_ref:.1f}"
    parts = [_head(width, top + h + 34), _text(8, 15, title, bold=True)]
    base = top + h
    for i, s in enumerate(share):
        if s:
            bh = h * s / peak
            parts.append(
                f'<rect x="{left + i * step:.1f}" y="{base - bh:.1f}" width="{max(step - 1, 1):.1f}" '
                f'height="{bh:.1f}" fill="{_BLUE}"/>'
            )
    points = " ".join(f"{left + (i + 0.5) * step:.1f},{base - h * r / peak:.1f}" for i, r in enumerate(ref))
    parts.append(f'<polyline points="{points}" fill="none" stroke="{_AMBER}" stroke-width="1.5"/>')
    parts.append(f'<line x1="{left}" y1="{base}" x2="{width - 10}" y2="{base}" stroke="#444"/>')
    for w in range(0, max_words + 1, 10):
        parts.append(_text(left + (w + 0.5) * step, base + 12, f"{w}{'+' if w == max_words else ''}", anchor="middle"))
    y = base + 24
    parts.append(f'<rect x="{left}" y="{y - 8}" width="10" height="10" fill="{_BLUE}"/>')
    parts.append(_text(left + 14, y, "earmark (kept)"))
    parts.append(
        f'<line x1="{left + 120}" y1="{y - 3}" x2="{left + 135}" y2="{y - 3}" stroke="{_AMBER}" stroke-width="2"/>'
    )
    parts.append(_text(left + 139, y, "MECAT test references"))
    return "".join(parts) + "</svg>"


def version_plots(cat: Catalog, version: str) -> dict[str, str]:
    """Every plot of one version, by file stem: domains, lengths-<kind>, rejections, claims."""
    v = version_name(version)
    out = {
        "domains": bars(
            "Clips per domain", dict(cat.query(f"SELECT domain, count(*) FROM {v}.domain GROUP BY 1 ORDER BY 1"))
        )
    }
    words: dict[str, list[int]] = {k: [] for k in CAPTION_KINDS}
    for kind, n in cat.query(
        f"SELECT kind, len(string_split(trim(text), ' ')) FROM {v}.captions WHERE item_id IN {kept_items(v)}"
    ):
        words.setdefault(kind, []).append(int(n))
    ref = mecat_lengths()
    for kind in CAPTION_KINDS:
        out[f"lengths-{kind}"] = lengths(kind, words[kind], ref[kind])
    rejected = cat.query(f'SELECT "check", count(*) FROM {v}.qc WHERE NOT keep GROUP BY 1 ORDER BY 2 DESC, 1')
    out["rejections"] = bars("QC rejections by check", dict(rejected), color=_RED)
    verdicts: dict[str, dict[str, int]] = {}
    for table, verdict, n in cat.query(
        f"SELECT item_table, verdict, count(*) FROM {v}.claims GROUP BY 1, 2 ORDER BY 1"
    ):
        verdicts.setdefault(table, {})[verdict] = n
    out["claims"] = stacked(
        "Claim audit: claims by verdict", verdicts, {"supported": _GREEN, "unsupported": _GREY, "contradicted": _RED}
    )
    return out


def write_plots(cat: Catalog, version: str, out_dir: Path) -> list[Path]:
    """The version's plots as `out_dir/<name>.svg`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, svg in version_plots(cat, version).items():
        path = out_dir / f"{name}.svg"
        path.write_text(svg)
        paths.append(path)
    return paths


# ------------------------------------------------------------------------------------------- helpers
def _head(width: int, height: int) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}"><rect width="100%" height="100%" fill="white"/>'
    )


def _text(x: float, y: float, s: str, *, anchor: str = "start", bold: bool = False) -> str:
    weight = ' font-weight="bold"' if bold else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" {_FONT} text-anchor="{anchor}"{weight}>{escape(s)}</text>'


def _short(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def card_section(paths: Sequence[Path], relative_to: Path) -> str:
    """A dataset card's "## Plots" section showing the written SVG files (paths relative to the card)."""
    lines = ["", "## Plots", ""]
    lines += [f"![{p.stem}]({p.relative_to(relative_to).as_posix()})" for p in paths]
    return "\n".join(lines) + "\n"
