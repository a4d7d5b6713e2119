"""Small inputs tests make: a caption numbered `i` (its clip `c{i}`, text "caption number {i}"); folders of tone clips."""

from __future__ import annotations

from pathlib import Path

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


def tone_clips(folder: Path, n: int = 2) -> Path:
    """`n` 2-s 16 kHz WAVs (a tone each, 110 Hz apart, with a little seeded noise) in a new folder."""
    import numpy as np
    import soundfile as sf

    folder.mkdir()
    rng = np.random.default_rng(0)
    t = np.arange(32000) / 16000
    for i in range(n):
        x = 0.3 * np.sin(2 * np.pi * (220 + 110 * i) * t) + 0.01 * rng.standard_normal(t.size)
        sf.write(folder / f"clip{i}.wav", x.astype(np.float32), 16000)
    return folder
