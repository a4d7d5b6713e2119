"""Small records the storage tests write: a caption numbered `i` (its clip `c{i}`, text "caption number {i}")."""

from __future__ import annotations

from earmark.schemas.records import Caption


def caption(i: int, domain: str = "S00") -> Caption:
    return Caption(
        clip_id=f"c{i}",
        domain=domain,
        prompt_name="p",
        prompt_sha="s",
        model="m",
        confidence=0.9,
        item_id=f"c{i}:short:0",
        kind="short",
        ref_index=0,
        text=f"caption number {i}",
    )
