"""Transcripts with a transformers Whisper checkpoint (e.g. openai/whisper-large-v3), batched across clips.

The same steps and the same Transcript as the faster-whisper backend (`experts.paper.asr`), for GPU nodes
where CTranslate2 cannot run (it needs CUDA 12's cuBLAS) or where fp16 / bf16 torch is wanted: one encoder
call per batch of clips; language and no-speech probability per clip from one decoder step on <|sot|>
(as faster-whisper: the language among the language tokens, no-speech over the whole vocabulary); one
`generate` call for the batch with each clip's own language (SDPA attention: nothing asks it for attention
weights); then one teacher-forced pass for faster-whisper's avg_logprob and one for the word times and
probabilities, as openai-whisper's `find_alignment` (`experts.paper.whisper_timing`: the alignment heads'
attention, DTW). Words are split as openai-whisper splits them (on spaces, or on Unicode points for
languages written without spaces), with its punctuation merging and its pause and segment-boundary fixes.
With `align_model` set, whisperX re-aligns the words with a wav2vec2 CTC model, as in the other backend.
"""

from __future__ import annotations

import string
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from earmark.experts.asr import skipped_transcript
from earmark.experts.audio import samples_16k
from earmark.experts.base import SAMPLE_RATE, ClipAudio, Context, Expert, load_once
from earmark.experts.models import require_package, require_weights
from earmark.experts.paper.asr import APPEND_PUNCT, PREPEND_PUNCT, clip_words, whisperx_words
from earmark.schemas.records import SpeechActivity, Transcript

Precision = Literal["fp32", "bf16", "fp16"]
_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
TIME_PRECISION = 0.02  # seconds per timestamp token
# openai-whisper's languages written without spaces between words: split words on Unicode points.
UNSPACED = {"zh", "ja", "th", "lo", "my", "yue"}
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


@dataclass(frozen=True)
class HFWhisper:
    model: Any
    processor: Any
    device: str
    dtype: Any
    sot: int
    eot: int
    no_speech: int
    timestamp_begin: int
    languages: dict[int, str]  # language token id → code ("en"); empty for an English-only checkpoint
    lock: threading.Lock


def _load(path: Path, device: str, precision: Precision) -> HFWhisper:
    import torch
    from transformers import WhisperForConditionalGeneration, WhisperProcessor

    dtype = getattr(torch, _DTYPES[precision])
    model = WhisperForConditionalGeneration.from_pretrained(str(path), local_files_only=True, dtype=dtype)
    model = model.to(torch.device(device)).eval()
    processor = WhisperProcessor.from_pretrained(str(path), local_files_only=True)
    gen = model.generation_config
    tok = processor.tokenizer
    lang_to_id = getattr(gen, "lang_to_id", None) or {}
    no_speech = next(
        (i for t in ("<|nospeech|>", "<|nocaptions|>") if (i := tok.convert_tokens_to_ids(t)) != tok.unk_token_id), None
    )
    if no_speech is None or getattr(gen, "no_timestamps_token_id", None) is None:
        raise ValueError(f"{path}: not a Whisper checkpoint (no <|nospeech|> token or no_timestamps_token_id)")
    if not getattr(gen, "alignment_heads", None):
        raise ValueError(
            f"{path}: its generation_config.json has no alignment_heads, which word timestamps need; "
            "use the checkpoint's own generation_config.json (openai/whisper-* ship them)"
        )
    return HFWhisper(
        model=model,
        processor=processor,
        device=device,
        dtype=dtype,
        sot=int(gen.decoder_start_token_id),
        eot=int(gen.eos_token_id),
        no_speech=int(no_speech),
        timestamp_begin=int(gen.no_timestamps_token_id) + 1,
        languages={int(i): t[2:-2] for t, i in lang_to_id.items()},
        lock=threading.Lock(),
    )


def load_whisper(path: Path, device: str, precision: Precision) -> HFWhisper:
    """The checkpoint in `path`, loaded once per worker process, device and precision."""
    return load_once(f"hf-whisper:{path}:{device}:{precision}", lambda: _load(path, device, precision))


def split_tokens_on_unicode(tokenizer: Any, tokens: list[int]) -> tuple[list[str], list[list[int]]]:
    """openai-whisper's: group tokens until their decoded text is whole Unicode characters."""
    words: list[str] = []
    groups: list[list[int]] = []
    current: list[int] = []
    for t in tokens:
        current.append(t)
        text = tokenizer.decode(current, decode_with_timestamps=False)
        if "\ufffd" not in text:
            words.append(text)
            groups.append(current)
            current = []
    return words, groups


def split_words(tokenizer: Any, tokens: list[int], language: str) -> tuple[list[str], list[list[int]]]:
    """Words and their token ids (text tokens only), as openai-whisper's `split_to_word_tokens`."""
    subwords, groups = split_tokens_on_unicode(tokenizer, tokens)
    if language in UNSPACED:
        return subwords, groups
    words: list[str] = []
    out: list[list[int]] = []
    for sub, ids in zip(subwords, groups):
        if not words or sub.startswith(" ") or sub.strip() in string.punctuation:
            words.append(sub)
            out.append(list(ids))
        else:
            words[-1] += sub
            out[-1].extend(ids)
    return words, out


def merge_punctuations(words: list[dict]) -> list[dict]:
    """openai-whisper's `merge_punctuations`: opening marks join the next word, closing marks the previous."""
    words = [dict(w) for w in words]
    i = len(words) - 2
    j = len(words) - 1
    while i >= 0:
        prev, nxt = words[i], words[j]
        if prev["word"].startswith(" ") and prev["word"].strip() in PREPEND_PUNCT:
            nxt["word"] = prev["word"] + nxt["word"]
            nxt["tokens"] = prev["tokens"] + nxt["tokens"]
            nxt["start"], nxt["probs"] = prev["start"], prev["probs"] + nxt["probs"]
            prev["word"], prev["tokens"], prev["probs"] = "", [], []
        else:
            j = i
        i -= 1
    i, j = 0, 1
    while j < len(words):
        prev, nxt = words[i], words[j]
        if not prev["word"].endswith(" ") and nxt["word"] in APPEND_PUNCT:
            prev["word"] = prev["word"] + nxt["word"]
            prev["tokens"] = prev["tokens"] + nxt["tokens"]
            prev["end"], prev["probs"] = nxt["end"], prev["probs"] + nxt["probs"]
            nxt["word"], nxt["tokens"], nxt["probs"] = "", [], []
        else:
            i = j
        j += 1
    return [w for w in words if w["word"]]


SENTENCE_END = ".。!！?？"


def _aligned_words(
    w: HFWhisper, text: list[int], starts: np.ndarray, probs: np.ndarray, language: str
) -> tuple[list[dict[str, Any]], float]:
    """Timed words of one clip's text tokens, and the median word duration. `starts` holds the start time
    of each text token and of <|endoftext|>: a word spans from its first token's start to the next word's,
    with the mean of its tokens' probabilities. Then openai-whisper's clean-up: a word longer than twice the
    median duration (at most 0.7 s) is cut at a sentence end, and punctuation joins its neighbours."""
    words, groups = split_words(w.processor.tokenizer, text, language)
    bounds = np.pad(np.cumsum([len(g) for g in groups]), (1, 0)).astype(int)
    out = [
        dict(word=word, tokens=ids, start=float(starts[b0]), end=float(starts[b1]), probs=list(probs[b0:b1]))
        for word, ids, b0, b1 in zip(words, groups, bounds[:-1], bounds[1:])
    ]
    durations = np.array([x["end"] - x["start"] for x in out])
    durations = durations[durations.nonzero()]
    median = min(0.7, float(np.median(durations))) if durations.size else 0.0
    longest = 2 * median
    if durations.size:
        for i in range(1, len(out)):
            if out[i]["end"] - out[i]["start"] > longest:
                if out[i]["word"] in SENTENCE_END:
                    out[i]["end"] = out[i]["start"] + longest
                elif out[i - 1]["word"] in SENTENCE_END:
                    out[i]["start"] = out[i]["end"] - longest
    return merge_punctuations(out), median


def _segment_words(segments: list[dict[str, Any]], words: list[dict[str, Any]], median: float) -> list[dict]:
    """Words handed to their segments (by text-token count) with openai-whisper's segment-boundary fixes: the
    first words after a pause are kept to twice the median word duration, and a first or last word reaching
    more than 0.5 s past its segment's timestamp is cut back to it. Returns all words, in order."""
    longest = 2 * median
    last_speech = 0.0
    out: list[dict] = []
    index = 0
    for seg in segments:
        taken = 0
        mine: list[dict[str, Any]] = []
        while index < len(words) and taken < seg["n_tokens"]:
            mine.append(dict(words[index]))
            taken += len(words[index]["tokens"])
            index += 1
        if mine:
            first = mine[0]
            if first["end"] - last_speech > median * 4 and (
                first["end"] - first["start"] > longest
                or (len(mine) > 1 and mine[1]["end"] - first["start"] > longest * 2)
            ):
                if len(mine) > 1 and mine[1]["end"] - mine[1]["start"] > longest:
                    boundary = max(mine[1]["end"] / 2, mine[1]["end"] - longest)
                    first["end"] = mine[1]["start"] = boundary
                first["start"] = max(0.0, first["end"] - longest)
            if seg["start"] < first["end"] and seg["start"] - 0.5 > first["start"]:
                first["start"] = max(0.0, min(first["end"] - median, seg["start"]))
            if seg["end"] > mine[-1]["start"] and seg["end"] + 0.5 < mine[-1]["end"]:
                mine[-1]["end"] = max(mine[-1]["start"] + median, seg["end"])
            last_speech = max(seg["end"], mine[-1]["end"]) if seg["end"] + 0.5 < mine[-1]["end"] else mine[-1]["end"]
        out.extend(mine)
    return [
        {"word": x["word"], "start": x["start"], "end": x["end"], "probability": float(np.mean(x["probs"]))}
        for x in out
    ]


def _segments(w: HFWhisper, tokens: list[int], duration: float) -> list[dict[str, Any]]:
    """Segments between timestamp tokens (text, start, end, n_tokens: its text tokens), as Whisper's
    timestamp pairs delimit them."""
    tok = w.processor.tokenizer
    out: list[dict[str, Any]] = []
    start: float | None = None
    current: list[int] = []
    for t in tokens:
        if t >= w.timestamp_begin:
            time = (t - w.timestamp_begin) * TIME_PRECISION
            if current:
                out.append(
                    {
                        "text": tok.decode(current),
                        "start": start or 0.0,
                        "end": min(time, duration),
                        "n_tokens": len(current),
                    }
                )
                current, start = [], None
            else:
                start = time
        elif t < w.eot:
            current.append(t)
    if current:  # no closing timestamp (e.g. the token limit was reached)
        out.append({"text": tok.decode(current), "start": start or 0.0, "end": duration, "n_tokens": len(current)})
    return out


def transcribe_batch(
    w: HFWhisper,
    audios: Sequence[np.ndarray],
    beam_size: int = 1,
    language: str | None = None,
    max_new_tokens: int | None = None,
) -> list[dict]:
    """Whisper on a batch of ≤30 s clips: per clip {language, language_prob, no_speech_prob, avg_logprob,
    segments: [{text, start, end}], words: [{word, start, end, probability}]}."""
    import torch
    from transformers.modeling_outputs import BaseModelOutput

    if not audios:
        return []
    feats = w.processor.feature_extractor(
        [np.asarray(a, dtype=np.float32) for a in audios],
        sampling_rate=SAMPLE_RATE,
        return_tensors="pt",
        return_attention_mask=True,
        device=w.device,  # the log-mel STFT on the GPU where the model is (torch's, as the CPU path)
    )
    features = feats.input_features.to(w.device, w.dtype)
    mask = feats.attention_mask.to(w.device)
    with w.lock, torch.inference_mode():
        encoded = w.model.model.encoder(features).last_hidden_state
        sot = torch.full((len(audios), 1), w.sot, dtype=torch.long, device=w.device)
        first = w.model(encoder_outputs=(encoded,), decoder_input_ids=sot).logits[:, -1].float()
        no_speech = torch.softmax(first, dim=-1)[:, w.no_speech].cpu().numpy()
        if language is not None or not w.languages:
            langs = [(language or "en", 1.0)] * len(audios)
        else:
            ids = torch.tensor(sorted(w.languages), device=w.device)
            probs = torch.softmax(first[:, ids], dim=-1)
            best = probs.argmax(dim=-1)
            langs = [(w.languages[int(ids[b])], float(probs[i, b])) for i, b in enumerate(best.tolist())]
        gen = w.model.generate(
            encoder_outputs=BaseModelOutput(last_hidden_state=encoded),
            attention_mask=mask,
            language=[code for code, _ in langs] if w.languages else None,
            task="transcribe" if w.languages else None,
            return_timestamps=True,
            num_beams=beam_size,
            max_new_tokens=max_new_tokens or w.model.config.max_target_positions // 2,  # openai-whisper's sample_len
        )
        sequences = (gen["sequences"] if isinstance(gen, dict) else gen).to(w.device)
        prompt = _prompt(w, [code for code, _ in langs])
        # faster-whisper's avg_logprob: the generated tokens' log-probabilities, summed over (tokens + 1).
        logits = w.model(encoder_outputs=(encoded,), decoder_input_ids=torch.cat([prompt, sequences], 1)[:, :-1])
        logprob = torch.log_softmax(logits.logits[:, prompt.shape[1] - 1 :].float(), dim=-1)
        logprob = logprob.gather(-1, sequences[..., None])[..., 0].cpu().numpy()
        seqs = sequences.cpu().numpy()
        kept = [_until_eot(seqs[i].tolist(), w.eot) for i in range(len(audios))]
        texts = [[t for t in tokens if t < w.eot] for tokens in kept]
        starts, probs = _word_alignment(w, encoded, prompt, texts, [a.size for a in audios])
    out: list[dict] = []
    for i, audio in enumerate(audios):
        n = len(kept[i])
        duration = audio.size / SAMPLE_RATE
        code = langs[i][0]
        segments = _segments(w, kept[i], duration)
        words, median = _aligned_words(w, texts[i], starts[i], probs[i], code)
        out.append(
            {
                "language": code,
                "language_prob": langs[i][1],
                "no_speech_prob": float(no_speech[i]),
                "avg_logprob": float(logprob[i, :n].sum() / (n + 1)),
                "segments": segments,
                "words": _segment_words(segments, words, median),
            }
        )
    return out


def _until_eot(tokens: list[int], eot: int) -> list[int]:
    return tokens[: tokens.index(eot)] if eot in tokens else tokens


def _word_alignment(
    w: HFWhisper, encoded: Any, prompt: Any, texts: list[list[int]], samples: list[int]
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per clip: the start times of its text tokens and of <|endoftext|> (cross-attention DTW), and its text
    tokens' probabilities over the text vocabulary, from one teacher-forced pass of
    prompt + <|notimestamps|> + text + <|endoftext|> (openai-whisper's `find_alignment`)."""
    import torch

    from earmark.experts.paper.whisper_timing import AlignmentHeads, token_start_times

    no_ts = w.timestamp_begin - 1
    width = max(len(t) for t in texts) + 2
    rows = [[no_ts, *t, w.eot] + [w.eot] * (width - len(t) - 2) for t in texts]
    inputs = torch.cat([prompt, torch.tensor(rows, dtype=torch.long, device=w.device)], dim=1)
    heads = w.model.generation_config.alignment_heads
    with AlignmentHeads(w.model, heads) as capture:
        logits = w.model(encoder_outputs=(encoded,), decoder_input_ids=inputs, use_cache=False).logits
        qk = capture.logits()
    n_prompt = prompt.shape[1]
    starts: list[np.ndarray] = []
    probs: list[np.ndarray] = []
    for i, text in enumerate(texts):
        if not text:
            starts.append(np.zeros(1))
            probs.append(np.zeros(0))
            continue
        n_frames = max(1, samples[i] * 50 // SAMPLE_RATE)  # openai: mel frames // 2
        starts.append(token_start_times(qk[i, :, : n_prompt + len(text) + 2], n_prompt, n_frames))
        p = torch.softmax(logits[i, n_prompt : n_prompt + len(text), : w.eot].float(), dim=-1)
        probs.append(p[torch.arange(len(text)), torch.tensor(text, device=p.device)].cpu().numpy())
    return starts, probs


def _prompt(w: HFWhisper, languages: list[str]) -> Any:
    """The decoder prompt generate used: <|sot|> [<|lang|> <|transcribe|>] (timestamps on)."""
    import torch

    if not w.languages:
        rows = [[w.sot] for _ in languages]
    else:
        code_to_id = {c: i for i, c in w.languages.items()}
        transcribe = int(w.model.generation_config.task_to_id["transcribe"])
        rows = [[w.sot, code_to_id[c], transcribe] for c in languages]
    return torch.tensor(rows, dtype=torch.long, device=w.device)


class TransformersWhisperPaperExpert(Expert):
    name, version, record, needs = "asr", "1", Transcript, ("vad",)

    def __init__(
        self,
        model_id: str,
        models_dir: Any = None,
        *,
        device: str = "cpu",
        precision: Precision = "fp32",
        beam_size: int = 1,
        batch_size: int = 16,
        min_speech_s: float = 0.3,
        language: str | None = None,
        align_model: str | None = None,
        max_new_tokens: int | None = None,
    ) -> None:
        require_package("asr", "transformers", "install it with `pip install transformers`")
        self.path = require_weights("asr", model_id, models_dir)
        if (
            not any((self.path / f).exists() for f in WEIGHT_FILES)
            or not (self.path / "generation_config.json").exists()
        ):
            raise ValueError(
                f"analyze.asr_model {model_id!r} at {self.path} has no transformers weights ({', '.join(WEIGHT_FILES)}) "
                "or no generation_config.json; "
                "with analyze.asr_backend = 'transformers' it must be a transformers Whisper checkpoint such as "
                "openai/whisper-large-v3 (Systran/faster-whisper-* are CTranslate2 conversions for the "
                "'faster-whisper' backend)"
            )
        self.align_path = None
        if align_model:
            require_package("asr (whisperX alignment)", "whisperx", "install it with `pip install whisperx`")
            self.align_path = require_weights("asr (whisperX alignment)", align_model, models_dir)
        self.backend = f"transformers:{model_id}" + (f"+whisperx:{align_model}" if align_model else "")
        self.device, self.precision = device, precision
        self.beam_size, self.batch_size = beam_size, batch_size
        self.min_speech_s, self.language = min_speech_s, language
        self.max_new_tokens = max_new_tokens

    def key_config(self) -> dict[str, Any]:
        return {
            "beam_size": self.beam_size,
            "min_speech_s": self.min_speech_s,
            "language": self.language,
            "precision": self.precision,
            "max_new_tokens": self.max_new_tokens,
        }

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[Transcript]:
        (vad,) = self.needed(context, clips, "vad")
        todo = [i for i, c in enumerate(clips) if vad[c.clip_id].speech_s >= self.min_speech_s]  # type: ignore[attr-defined]
        audios = {i: samples_16k(clips[i]) for i in todo}
        # Similar lengths share a batch: a batch decodes until its longest transcript ends.
        order = sorted(todo, key=lambda i: audios[i].size)
        model = load_whisper(self.path, self.device, self.precision)
        results: dict[int, dict] = {}
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            got = transcribe_batch(
                model, [audios[i] for i in batch], self.beam_size, self.language, self.max_new_tokens
            )
            results.update(zip(batch, got))
        if self.align_path is not None:
            for i, r in results.items():
                if r["segments"]:
                    r["words"] = whisperx_words(self.align_path, self.device, r, audios[i])
        return [self._record(c, vad[c.clip_id], results.get(i), audios.get(i)) for i, c in enumerate(clips)]  # type: ignore[arg-type]

    def _record(
        self, clip: ClipAudio, activity: SpeechActivity, result: dict | None, audio: np.ndarray | None
    ) -> Transcript:
        if result is None or audio is None:
            return skipped_transcript(self.lineage(clip.clip_id), activity.speech_s)
        duration = audio.size / SAMPLE_RATE
        segs = result["segments"]
        return Transcript(
            **self.lineage(clip.clip_id),
            text=" ".join(s["text"].strip() for s in segs).strip(),
            language=result["language"],
            language_prob=round(result["language_prob"], 4),
            words=clip_words(result["words"], duration),
            avg_logprob=round(result["avg_logprob"], 4) if segs else 0.0,
            no_speech_prob=round(result["no_speech_prob"], 4) if segs else 1.0,
            vad_speech_s=activity.speech_s,
            skipped_reason=None,
        )
