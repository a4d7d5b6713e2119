"""Expert bundles and the profiles that select them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from earmark.experts.base import SAMPLE_RATE, ClipAudio, Expert, load_once

if TYPE_CHECKING:
    from earmark.core.config import AnalyzeSection


def build_experts(cfg: AnalyzeSection) -> dict[str, Expert]:
    """The experts of the configured profile, in dependency order (an expert after those it needs)."""
    if cfg.profile == "embedded":
        from earmark.experts.profile_embedded import embedded_experts

        ordered = embedded_experts(cfg)
    elif cfg.profile == "paper":
        from earmark.experts.profile_paper import paper_experts

        ordered = paper_experts(cfg)
    else:
        raise ValueError(f"expert profile {cfg.profile!r} is not available; use 'embedded' or 'paper'")
    out: dict[str, Expert] = {}
    for e in ordered:
        missing = [n for n in e.needs if n not in out]
        if missing:
            raise RuntimeError(f"expert {e.name} needs {missing}, which are not earlier in the profile")
        out[e.name] = e
    if cfg.only:  # a subset, with everything it needs (e.g. `--experts levels,acoustics`)
        unknown = sorted(set(cfg.only) - set(out))
        if unknown:
            raise ValueError(f"[analyze] only: unknown experts {unknown}; the {cfg.profile} profile has {list(out)}")
        wanted: set[str] = set()
        todo = list(cfg.only)
        while todo:
            name = todo.pop()
            if name not in wanted:
                wanted.add(name)
                todo += list(out[name].needs)
        out = {n: e for n, e in out.items() if n in wanted}
    return out


__all__ = ["SAMPLE_RATE", "ClipAudio", "Expert", "load_once", "build_experts"]
