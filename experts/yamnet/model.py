"""YAMNet's TF-Lite release (package data) run with `ai-edge-litert`: the file checked, then one invoke per frame.

The vendored file is the authors' own (PROVENANCE.md): its sha256, and the class map's, are checked when it is
loaded, and a file that differs is refused naming the file and the sha256 expected, before any of it is run.
One `invoke` takes exactly one 1-D frame of 15,600 samples (0.975 s of 16 kHz audio in [-1, 1]) and returns the
521 classes' scores `[1, 521]`, sigmoid outputs of the quantised model in steps of 1/256; resizing the input
pools frames into one output instead of batching them, so a clip is scored one invoke per frame (about 1 ms
each). Frames start every 0.48 s (7,680 samples, the original YAMNet's patch hop), and a clip is zero-padded
to fill its last frame as the original's `pad_waveform` does. The 1,024-d embedding exists only as the int8
tensor `tower0/network/layer28/reduce_mean` (readable once every tensor is kept), dequantised here with its
scale and zero point.
"""

from __future__ import annotations

import csv
import io
import threading
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from earmark.experts import weights
from earmark.experts.weights import WeightsMismatch

HERE = Path(__file__).resolve().parent
MODEL = HERE / "yamnet_classification_tflite_1.tflite"
CLASS_MAP = HERE / "yamnet_class_map.csv"
MODEL_SHA256 = "10c95ea3eb9a7bb4cb8bddf6feb023250381008177ac162ce169694d05c317de"
CLASS_MAP_SHA256 = "cdf24d193e196d9e95912a2667051ae203e92a2ba09449218ccb40ef787c6df2"
SOURCE = "https://tfhub.dev/google/lite-model/yamnet/classification/tflite/1"
LABEL_SET = "audioset-yamnet-tflite-1"  # score i is class i of yamnet_class_map.csv
SR = 16_000
FRAME = 15_600  # samples per invoke: 0.975 s
HOP = 7_680  # 0.48 s
EMBEDDING_TENSOR = "tower0/network/layer28/reduce_mean"
EMBEDDING_DIM = 1024


def checked_bytes(path: Path, expected: str) -> bytes:
    """The file's bytes if their sha256 is `expected`; else WeightsMismatch naming the file and both digests."""
    return weights.checked_bytes(path, expected, f"YAMNet release ({SOURCE})")


@dataclass(frozen=True)
class AudioSetClass:
    index: int
    mid: str  # the AudioSet ontology's id, e.g. "/m/09x0r"
    name: str  # display name, e.g. "Speech"


def read_class_map(data: bytes) -> list[AudioSetClass]:
    rows = csv.DictReader(io.StringIO(data.decode("utf-8")))
    return [AudioSetClass(int(r["index"]), r["mid"], r["display_name"]) for r in rows]


def frame_count(n_samples: int) -> int:
    """Frames every HOP samples until the clip is covered; at least one."""
    return 1 + max(0, -(-(n_samples - FRAME) // HOP))


def frames(x: np.ndarray) -> np.ndarray:
    """(n_frames, FRAME) float32 frames of a 16 kHz mono clip, starting every HOP samples; zeros fill the end."""
    x = np.asarray(x, np.float32).reshape(-1)
    n = frame_count(x.size)
    padded = np.zeros((n - 1) * HOP + FRAME, np.float32)
    padded[: x.size] = x
    return np.lib.stride_tricks.sliding_window_view(padded, FRAME)[::HOP].copy()


@dataclass(frozen=True)
class FrameScores:
    scores: np.ndarray  # (n_frames, 521) float32, steps of 1/256
    embeddings: np.ndarray | None  # (n_frames, 1024) float32, dequantised; None when not asked for


class Yamnet:
    """The checked model and class map of one process; a TF-Lite interpreter per thread that scores (one
    interpreter is not safe to share, and a process runs several analyze shards on threads at once)."""

    def __init__(self, model: Path = MODEL, class_map: Path = CLASS_MAP) -> None:
        self.path = Path(model)
        self.content = checked_bytes(self.path, MODEL_SHA256)
        self.classes = read_class_map(checked_bytes(Path(class_map), CLASS_MAP_SHA256))
        embedded = zipfile.ZipFile(io.BytesIO(self.content)).read("yamnet_label_list.txt").decode().splitlines()
        if embedded != [c.name for c in self.classes]:  # both files check out, so this is a programming error
            raise WeightsMismatch(f"{class_map} names other classes than the label list inside {model}")
        self._local = threading.local()

    def _runner(self, threads: int, embedding: bool) -> _Runner:
        key = (threads, embedding)
        runners = self._local.__dict__.setdefault("runners", {})
        if key not in runners:
            runners[key] = _Runner(self.content, threads, embedding)
        return runners[key]

    def score(self, x: np.ndarray, threads: int = 1, embedding: bool = False) -> FrameScores:
        """Every frame's 521 scores (and its dequantised embedding when `embedding`) for 16 kHz mono `x`."""
        return self._runner(threads, embedding).run(frames(x))


class _Runner:
    def __init__(self, content: bytes, threads: int, embedding: bool) -> None:
        from ai_edge_litert.interpreter import Interpreter

        with warnings.catch_warnings():  # keeping every tensor "is intended for debugging": it is how to read one
            warnings.simplefilter("ignore", UserWarning)
            self.it = Interpreter(
                model_content=content, num_threads=threads, experimental_preserve_all_tensors=embedding
            )
        self.it.allocate_tensors()
        self.inp = self.it.get_input_details()[0]["index"]
        self.out = self.it.get_output_details()[0]["index"]
        self.emb: dict[str, Any] | None = None
        if embedding:
            self.emb = next(d for d in self.it.get_tensor_details() if d["name"] == EMBEDDING_TENSOR)

    def run(self, batch: np.ndarray) -> FrameScores:
        scores = np.empty((len(batch), 521), np.float32)
        q = np.empty((len(batch), EMBEDDING_DIM), np.int8) if self.emb is not None else None
        for i, frame in enumerate(batch):
            self.it.set_tensor(self.inp, frame)
            self.it.invoke()
            scores[i] = self.it.get_tensor(self.out)[0]
            if q is not None:
                q[i] = self.it.get_tensor(self.emb["index"]).reshape(-1)  # type: ignore[index]
        if q is None:
            return FrameScores(scores, None)
        scale, zero = self.emb["quantization"]  # type: ignore[index]
        return FrameScores(scores, ((q.astype(np.float32) - zero) * scale).astype(np.float32))


_LOCK = threading.Lock()
_MODELS: dict[tuple[str, str], Yamnet] = {}


def yamnet(model: Path = MODEL, class_map: Path = CLASS_MAP) -> Yamnet:
    """The process's Yamnet for these files, loaded (and checked) on first use."""
    with _LOCK:
        key = (str(model), str(class_map))
        if key not in _MODELS:
            _MODELS[key] = Yamnet(Path(model), Path(class_map))
        return _MODELS[key]
