"""Text normalisation shared by the ASR check, QC, the claim audit, review and the same-source checks."""

from __future__ import annotations

import re


def normalise(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9' ]+", " ", text.lower()).split())
