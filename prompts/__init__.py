"""Every word earmark sends to a language model, as versioned files, and the shas that key their outputs.

Two kinds of file live here:
- a *prompt* (`caption_long.toml`, `qa.toml`, …): `version`, sampling parameters (`max_tokens`,
  `temperature`), a `system` text and a Jinja `user` template, plus optional data tables the code picks
  from (a QA category's focus, an instruction rule's sentence);
- a *phrase file* (`evidence.toml`, `repair.toml`, `absent.toml`): words and templates that code assembles
  (the evidence notes, the repair request, the rule-written absence captions).

`request_sha` hashes the bytes of every file a stage renders from, plus the JSON schemas of its replies; it
enters the stage's shard key, so editing any of these files re-runs exactly the shards rendered from it.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

PROMPT_DIR = Path(__file__).parent
_env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False)

Phrases = Mapping[str, Any]  # a phrase file's tables, read-only
_declared: ContextVar[frozenset[str] | None] = ContextVar("earmark_declared_prompts", default=None)
_stage_dir: ContextVar[Path | None] = ContextVar("earmark_stage_prompt_dir", default=None)


class UndeclaredPrompt(RuntimeError):
    """A stage read a prompt file its description does not list: an edit of it would not re-run the stage."""


@contextmanager
def only(names: Iterable[str], prompt_dir: Path | None = None) -> Iterator[None]:
    """Within this block (and in contexts copied from it), reading a file not in `names` raises
    UndeclaredPrompt, and a read that names no directory reads `prompt_dir` (the stage's; None: this package's),
    so code deep in a stage (the claim audit's event words) reads the files the stage declared and keyed on.
    earmark.stages.base.run_job wraps every stage function in it."""
    token, dir_token = _declared.set(frozenset(names)), _stage_dir.set(prompt_dir)
    try:
        yield
    finally:
        _declared.reset(token)
        _stage_dir.reset(dir_token)


@dataclass(frozen=True)
class Prompt:
    name: str
    version: int
    sha: str
    max_tokens: int
    temperature: float
    system: str
    user_template: str = field(repr=False)
    data: Mapping[str, Any] = field(default_factory=dict, repr=False)  # the file's other tables

    def render(self, **variables: Any) -> list[dict[str, str]]:
        user = _env.from_string(self.user_template).render(**variables)
        return [{"role": "system", "content": self.system.strip()}, {"role": "user", "content": user.strip()}]

    def render_user(self, **variables: Any) -> str:
        """Only the user text (prompts that go to a model as one user message, e.g. judges)."""
        return _env.from_string(self.user_template).render(**variables).strip()


def _path(name: str, prompt_dir: Path | None) -> Path:
    declared = _declared.get()
    if declared is not None and name not in declared:
        raise UndeclaredPrompt(
            f"prompt file {name!r} was read by a stage that declares only "
            f"{sorted(declared) or 'none'}; add it to the stage's prompt files"
        )
    if prompt_dir is None:
        prompt_dir = _stage_dir.get()
    prompt_dir = Path(prompt_dir) if prompt_dir is not None else PROMPT_DIR
    path = prompt_dir / f"{name}.toml"
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in prompt_dir.glob("*.toml")))
        raise FileNotFoundError(f"prompt file {name!r} not found in {prompt_dir} (known: {known})")
    return path


def load_prompt(name: str, prompt_dir: Path | None = None) -> Prompt:
    """The prompt `name` from `prompt_dir` (default: this package). Read on every call, so an edited file
    is seen by a running process; parsing is cached by content."""
    return _parse(name, _path(name, prompt_dir).read_bytes())


def load_phrases(name: str, prompt_dir: Path | None = None) -> Phrases:
    """A phrase file's tables (read on every call, parsed once per content)."""
    return _parse_phrases(_path(name, prompt_dir).read_bytes())


def file_sha(name: str, prompt_dir: Path | None = None) -> str:
    return hashlib.sha256(_path(name, prompt_dir).read_bytes()).hexdigest()[:16]


def schema_sha(schemas: Iterable[Mapping[str, Any]]) -> str:
    blob = json.dumps(list(schemas), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def request_sha(names: Iterable[str], prompt_dir: Path | None = None, schemas: Iterable[Mapping[str, Any]] = ()) -> str:
    """One sha over every file a stage renders requests (or rule-written text) from and its reply schemas."""
    parts = [f"{n}:{file_sha(n, prompt_dir)}" for n in sorted(set(names))] + [f"schemas:{schema_sha(schemas)}"]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def prompt_files(prompt_dir: Path | None = None) -> list[str]:
    """Every prompt and phrase file name in `prompt_dir`."""
    return sorted(p.stem for p in (Path(prompt_dir) if prompt_dir else PROMPT_DIR).glob("*.toml"))


@cache
def _parse(name: str, raw: bytes) -> Prompt:
    spec = tomllib.loads(raw.decode())
    data = {k: v for k, v in spec.items() if k not in ("version", "max_tokens", "temperature", "system", "user")}
    return Prompt(
        name=name,
        version=int(spec["version"]),
        sha=hashlib.sha256(raw).hexdigest()[:16],
        max_tokens=int(spec["max_tokens"]),
        temperature=float(spec["temperature"]),
        system=spec.get("system", ""),
        user_template=spec["user"],
        data=data,
    )


@cache
def _parse_phrases(raw: bytes) -> Phrases:
    return tomllib.loads(raw.decode())
