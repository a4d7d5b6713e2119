"""The paper profile: MECAT's expert models (bring your weights; see experts/models.py), in dependency order."""

from __future__ import annotations

from typing import TYPE_CHECKING

from experts.base import Expert

if TYPE_CHECKING:
    from earmark.config import AnalyzeSection


def paper_experts(cfg: "AnalyzeSection") -> list[Expert]:
    raise ValueError("expert profile 'paper' is not built yet; use 'embedded'")
