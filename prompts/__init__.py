"""Versioned prompt templates. A prompt's sha (of its file bytes) enters every shard key and output row,
so editing a prompt recomputes exactly the rows it produced."""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

PROMPT_DIR = Path(__file__).parent
_env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False)


@dataclass(frozen=True)
class Prompt:
    name: str
    version: int
    sha: str
    max_tokens: int
    temperature: float
    system: str
    user_template: str = field(repr=False)

    def render(self, **variables: Any) -> list[dict[str, str]]:
        user = _env.from_string(self.user_template).render(**variables)
        return [{"role": "system", "content": self.system.strip()}, {"role": "user", "content": user.strip()}]


def load_prompt(name: str, prompt_dir: Path | None = None) -> Prompt:
    """The prompt `name` from `prompt_dir` (default: this package). Read on every call, so an edited file
    is seen by a running process; parsing is cached by content."""
    prompt_dir = Path(prompt_dir) if prompt_dir is not None else PROMPT_DIR
    path = prompt_dir / f"{name}.toml"
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in prompt_dir.glob("*.toml")))
        raise FileNotFoundError(f"prompt {name!r} not found in {prompt_dir} (known: {known})")
    return _parse(name, path.read_bytes())


@cache
def _parse(name: str, raw: bytes) -> Prompt:
    spec = tomllib.loads(raw.decode())
    return Prompt(
        name=name,
        version=int(spec["version"]),
        sha=hashlib.sha256(raw).hexdigest()[:16],
        max_tokens=int(spec["max_tokens"]),
        temperature=float(spec.get("temperature", 0.3)),
        system=spec["system"],
        user_template=spec["user"],
    )
