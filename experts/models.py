"""The models directory of the paper profile: where "bring your weights" backends find their weights.

Layout: one directory per model id under the models directory, named like the id
(`<models_dir>/MIT/ast-finetuned-audioset-10-10-0.4593/config.json`); a model id that is an absolute path
is used as it is. The directory is `analyze.models_dir`, else `$EARMARK_MODELS_DIR`, else
`~/.cache/earmark/models`. Nothing is ever downloaded at run time: a paper backend whose weights are not
there fails when it is built, with the path it expected and the command that puts them there, instead
of quietly falling back to the offline default (a benchmark built from other experts is a different one).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path

ENV_VAR = "EARMARK_MODELS_DIR"
DEFAULT_DIR = Path("~/.cache/earmark/models")


class BackendUnavailable(ValueError):
    """A configured paper backend cannot run here: its weights or its package are missing.

    A ValueError so the CLI reports it as a configuration error (message, exit code 2), not a traceback.
    """


class MissingWeights(BackendUnavailable):
    pass


class MissingPackage(BackendUnavailable):
    pass


def models_root(configured: str | os.PathLike[str] | None = None) -> Path:
    """The models directory: the configured one, else $EARMARK_MODELS_DIR, else ~/.cache/earmark/models."""
    raw = configured if configured is not None else os.environ.get(ENV_VAR) or DEFAULT_DIR
    return Path(raw).expanduser()


def model_path(model_id: str, root: str | os.PathLike[str] | None = None) -> Path:
    """Where the weights of `model_id` live (an absolute path is taken as the location itself)."""
    if Path(model_id).is_absolute():
        return Path(model_id)
    return models_root(root) / model_id


def hf_download_hint(model_id: str, path: Path) -> str:
    return (
        f"on a machine with internet run `huggingface-cli download {model_id} --local-dir {path}` and copy {path} here"
    )


def require_weights(
    slot: str,
    model_id: str,
    root: str | os.PathLike[str] | None = None,
    *,
    files: Sequence[str] = ("config.json",),
    hint: str | None = None,
) -> Path:
    """The weights location of `model_id` for the expert `slot`, or MissingWeights saying how to get them.

    `files` are paths (relative to the model's location) that must exist; for a model stored as one
    file, pass `files=()` and the location itself must be a file. `hint` says how to get the weights;
    `{id}` and `{path}` in it are filled in (default: a `huggingface-cli download` command).
    """
    path = model_path(model_id, root)
    exists = path.is_dir() and all((path / f).exists() for f in files) if files else path.is_file()
    if not exists:
        wanted = ", ".join(str(path / f) for f in files) if files else str(path)
        raise MissingWeights(
            f"the paper profile's {slot} expert needs the weights of model {model_id!r}, expected at {wanted} "
            f"(models directory {models_root(root)}: set analyze.models_dir, --models-dir or ${ENV_VAR}); "
            f"{hint.format(id=model_id, path=path) if hint else hf_download_hint(model_id, path)}. "
            "Nothing is downloaded at run time; use --profile embedded for the offline experts."
        )
    return path


def require_package(slot: str, package: str, install: str, module: str | None = None) -> None:
    """MissingPackage unless `module` (default: `package`) can be imported."""
    if importlib.util.find_spec(module or package) is None:
        raise MissingPackage(
            f"the paper profile's {slot} expert needs the Python package {package!r}, which is not installed; "
            f"{install} (the paper worker image installs requirements/paper.txt), or turn the expert off / "
            f"use --profile embedded."
        )
