"""Hugging Face audio classifiers (AST, CED, wav2vec2 heads) loaded from a local directory, run in batches.

Shared by the AudioSet tagger, the speaker-attribute classifiers and the music tagger. Loading is
`local_files_only=True` always; remote code (CED) is trusted only when the model's own directory
carries it (`auto_map` in its config.json), so nothing is fetched.

An AST model's Kaldi filter banks are computed on the model's device when that is not the CPU (`ast_fbank`:
the extractor's own torchaudio call, padding and normalisation, on device tensors): on the CPU they are host
work that a GPU worker does while it holds the `gpu` slot (docs/benchmarks.md, `expert_throughput.py
--host-share`).
"""

from __future__ import annotations

import importlib.util
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from earmark.experts.base import SAMPLE_RATE, load_once

Activation = Literal["sigmoid", "softmax", "none"]
Precision = Literal["fp32", "bf16", "fp16"]
_DTYPES = {"bf16": "bfloat16", "fp16": "float16"}


def precision_config(precision: Precision) -> dict[str, Any]:
    """What a shard key gains from a lower precision: nothing at fp32 (the keys stay as they were)."""
    return {} if precision == "fp32" else {"precision": precision}


@dataclass(frozen=True)
class AudioClassifier:
    model: Any
    extractor: Any
    labels: tuple[str, ...]
    device: str
    masks_padding: bool  # the extractor returns an attention mask, so zero-padding does not change results
    lock: threading.Lock
    device_fbank: bool = False  # an AST extractor on a GPU: its filter banks are computed there (`ast_fbank`)


def _load(path: Path, device: str) -> AudioClassifier:
    import torch
    from transformers import AutoFeatureExtractor, AutoModelForAudioClassification

    remote = "auto_map" in json.loads((path / "config.json").read_text())
    extractor = AutoFeatureExtractor.from_pretrained(str(path), local_files_only=True, trust_remote_code=remote)
    model = AutoModelForAudioClassification.from_pretrained(str(path), local_files_only=True, trust_remote_code=remote)
    model = model.to(torch.device(device)).eval()
    labels = tuple(model.config.id2label[i] for i in range(len(model.config.id2label)))
    return AudioClassifier(
        model=model,
        extractor=extractor,
        labels=labels,
        device=device,
        masks_padding=bool(getattr(extractor, "return_attention_mask", False)),
        lock=threading.Lock(),
        device_fbank=device != "cpu" and is_ast(extractor) and importlib.util.find_spec("torchaudio") is not None,
    )


def is_ast(extractor: Any) -> bool:
    return type(extractor).__name__ == "ASTFeatureExtractor"


def ast_fbank(extractor: Any, audios: Sequence[np.ndarray], device: str) -> dict[str, Any]:
    """`ASTFeatureExtractor(audios, return_tensors="pt")` computed on `device`: torchaudio's Kaldi fbank with the
    extractor's settings per input, zero-padded or cut to its max_length frames, then its normalisation."""
    import torch
    import torchaudio.compliance.kaldi as ta_kaldi

    rows = []
    for audio in audios:
        wave = torch.from_numpy(np.asarray(audio, dtype=np.float32)).to(device).unsqueeze(0)
        fbank = ta_kaldi.fbank(
            wave, sample_frequency=extractor.sampling_rate, window_type="hanning", num_mel_bins=extractor.num_mel_bins
        )[: extractor.max_length]
        rows.append(torch.nn.functional.pad(fbank, (0, 0, 0, extractor.max_length - fbank.shape[0])))
    values = torch.stack(rows)
    if extractor.do_normalize:
        values = (values - extractor.mean) / (extractor.std * 2)
    return {"input_values": values}


def load_classifier(path: Path, device: str) -> AudioClassifier:
    """The classifier in `path`, loaded once per worker process and device."""
    return load_once(f"hf-audio-classifier:{path}:{device}", lambda: _load(path, device))


def default_activation(clf: AudioClassifier, multi_label: bool) -> Activation:
    """CED's head already ends in a sigmoid; other heads return logits."""
    if getattr(clf.model.config, "model_type", "") == "ced":
        return "none"
    return "sigmoid" if multi_label else "softmax"


def _batches(audios: Sequence[np.ndarray], batch_size: int, masks_padding: bool) -> list[list[int]]:
    """Index batches. Without an attention mask, zero padding changes a model's output (group norm over
    time), so only equal-length inputs share a batch; sorting by length keeps padding small either way."""
    order = sorted(range(len(audios)), key=lambda i: len(audios[i]))
    out: list[list[int]] = []
    for i in order:
        if out and len(out[-1]) < batch_size and (masks_padding or len(audios[out[-1][0]]) == len(audios[i])):
            out[-1].append(i)
        else:
            out.append([i])
    return out


def classify(
    clf: AudioClassifier,
    audios: Sequence[np.ndarray],
    batch_size: int,
    activation: Activation,
    precision: Precision = "fp32",
) -> np.ndarray:
    """Label probabilities, shape (len(audios), len(clf.labels)), for 16 kHz float32 inputs. `precision` bf16 /
    fp16: the forward pass under torch autocast (weights stay fp32; matmuls and convolutions in the lower
    precision), the activation in fp32. benchmarks/experts/paper_precision.py measures what it changes."""
    import contextlib

    import torch

    if precision == "fp32":
        autocast: Any = contextlib.nullcontext()
    else:
        device_type = torch.device(clf.device).type
        autocast = torch.autocast(device_type=device_type, dtype=getattr(torch, _DTYPES[precision]))
    probs = np.zeros((len(audios), len(clf.labels)), dtype=np.float32)
    for idx in _batches(audios, batch_size, clf.masks_padding):
        if clf.device_fbank:
            feats = ast_fbank(clf.extractor, [audios[i] for i in idx], clf.device)
        else:
            feats = clf.extractor(
                [audios[i] for i in idx], sampling_rate=SAMPLE_RATE, return_tensors="pt", padding=True
            )
            feats = {k: v.to(clf.device) for k, v in feats.items()}
        with clf.lock, torch.inference_mode(), autocast:
            logits = clf.model(**feats).logits.float()
        if activation == "sigmoid":
            logits = torch.sigmoid(logits)
        elif activation == "softmax":
            logits = torch.softmax(logits, dim=-1)
        probs[idx] = logits.cpu().numpy()
    return probs
