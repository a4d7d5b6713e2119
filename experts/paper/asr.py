"""Transcripts with Whisper large-v3 (faster-whisper / CTranslate2 from the models dir), batched across clips.

faster-whisper's own batched pipeline batches the 30 s chunks of *one* recording and detects one language
for all of them; a shard holds many short clips in many languages. So this expert runs Whisper's steps
itself on a batch of clips: one encoder call, per-clip language identification on the encoder output,
one decoder call per language group (a prompt carries its language token), then faster-whisper's
word-timestamp alignment per clip (its heuristics carry state from one segment to the next, which must
not leak between clips). With `align_model` set, whisperX re-aligns the words with a wav2vec2 CTC model.
Clips where VAD found (almost) no speech are skipped, as in the offline default. Temperature fallback is
not applied (as in faster-whisper's and whisperX's batched modes): one greedy or beam decode per clip.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import ceil
from typing import Any

import numpy as np

from earmark.experts.asr import skipped_transcript
from earmark.experts.audio import samples_16k
from earmark.experts.base import SAMPLE_RATE, ClipAudio, Context, Expert, load_once
from earmark.experts.models import require_package, require_weights
from earmark.schemas.records import SpeechActivity, Transcript, Word

NO_SPEECH_REASON = "no speech detected by VAD"
PREPEND_PUNCT = "\"'“¿([{-"
APPEND_PUNCT = "\"'.。,，!！?？:：”)]}、"


def _load_whisper(path: str, device: str, compute_type: str, cpu_threads: int) -> Any:
    from faster_whisper import WhisperModel

    return WhisperModel(path, device=device, compute_type=compute_type, cpu_threads=cpu_threads, local_files_only=True)


def _take(encoder_output: Any, rows: list[int]) -> Any:
    """Rows of a CTranslate2 StorageView (batch-first) as a new StorageView on the same device."""
    import ctranslate2

    if encoder_output.device == "cpu":
        return ctranslate2.StorageView.from_array(np.ascontiguousarray(np.asarray(encoder_output)[rows]))
    import torch

    return ctranslate2.StorageView.from_array(torch.as_tensor(encoder_output, device="cuda")[rows].contiguous())


def transcribe_batch(
    model: Any,
    audios: Sequence[np.ndarray],
    beam_size: int = 1,
    language: str | None = None,
    max_new_tokens: int | None = None,
) -> list[dict]:
    """Whisper on a batch of ≤30 s clips: per clip {language, language_prob, segments: [{text, start, end,
    avg_logprob, no_speech_prob, words: [{word, start, end, probability}]}]}."""
    from faster_whisper.audio import pad_or_trim
    from faster_whisper.tokenizer import Tokenizer

    if not audios:
        return []
    features = np.stack([pad_or_trim(model.feature_extractor(a)[..., :-1]) for a in audios])
    encoded = model.encode(features)
    if language is not None or not model.model.is_multilingual:
        langs = [(language or "en", 1.0)] * len(audios)
    else:
        langs = [(top[0][0][2:-2], float(top[0][1])) for top in model.model.detect_language(encoded)]
    out: list[dict] = [{} for _ in audios]
    for lang in sorted({lang for lang, _ in langs}):
        rows = [i for i, (code, _) in enumerate(langs) if code == lang]
        group = encoded if len(rows) == len(audios) else _take(encoded, rows)
        tokenizer = Tokenizer(model.hf_tokenizer, model.model.is_multilingual, task="transcribe", language=lang)
        prompt = model.get_prompt(tokenizer, [], without_timestamps=False)
        max_length = min(model.max_length, len(prompt) + max_new_tokens) if max_new_tokens else model.max_length
        results = model.model.generate(
            group,
            [prompt] * len(rows),
            beam_size=beam_size,
            max_length=max_length,
            suppress_blank=True,
            suppress_tokens=[-1],
            return_scores=True,
            return_no_speech_prob=True,
        )
        for k, (i, result) in enumerate(zip(rows, results)):
            tokens = result.sequences_ids[0]
            avg_logprob = result.scores[0] * len(tokens) / (len(tokens) + 1)
            duration = audios[i].size / SAMPLE_RATE
            size = int(ceil(duration) * model.frames_per_second)
            subsegments, _, _ = model._split_segments_by_timestamps(
                tokenizer=tokenizer,
                tokens=tokens,
                time_offset=0.0,
                segment_size=size,
                segment_duration=duration,
                seek=0,
            )
            segments = [
                dict(tokens=s["tokens"], start=s["start"], end=s["end"], seek=0, text=tokenizer.decode(s["tokens"]))
                for s in subsegments
                if s["tokens"]
            ]
            if segments:
                one = group if len(rows) == 1 else _take(group, [k])
                model.add_word_timestamps([segments], tokenizer, one, [size], PREPEND_PUNCT, APPEND_PUNCT, 0.0)
            for s in segments:
                s.update(avg_logprob=avg_logprob, no_speech_prob=result.no_speech_prob)
                s.setdefault("words", [])
            out[i] = {"language": lang, "language_prob": langs[i][1], "segments": segments}
    return out


def _whisperx_align(align_model: Any, metadata: Any, result: dict, audio: np.ndarray, device: str) -> list[dict]:
    """Words re-timed by whisperX's CTC forced alignment (words it cannot align keep no times and are dropped)."""
    import whisperx

    segs = [{"text": s["text"], "start": s["start"], "end": s["end"]} for s in result["segments"]]
    aligned = whisperx.align(segs, align_model, metadata, audio, device, return_char_alignments=False)
    return [
        {"word": w["word"], "start": w["start"], "end": w["end"], "probability": w.get("score", 0.0)}
        for w in aligned.get("word_segments", [])
        if "start" in w and "end" in w
    ]


def whisperx_words(align_path: Any, device: str, result: dict, audio: np.ndarray) -> list[dict]:
    """`_whisperx_align` with the language's CTC model from `align_path`, loaded once per worker."""
    import whisperx

    lang = result["language"]
    model, meta = load_once(
        f"whisperx-align:{align_path}:{lang}:{device}",
        lambda: whisperx.load_align_model(lang, device, model_name=str(align_path)),
    )
    return _whisperx_align(model, meta, result, audio, device)


def clip_words(words: Sequence[dict], duration: float) -> list[Word]:
    """Word records; Whisper pads to 30 s, so a word can be stamped past the clip's end: clamp to the clip."""
    return [
        Word(
            word=w["word"].strip(),
            start_s=round(min(float(w["start"]), duration), 3),
            end_s=round(min(float(w["end"]), duration), 3),
            prob=round(float(w["probability"]), 4),
        )
        for w in words
    ]


class FasterWhisperPaperExpert(Expert):
    name, version, record, needs = "asr", "1", Transcript, ("vad",)

    def __init__(
        self,
        model_id: str,
        models_dir: Any = None,
        *,
        device: str = "cpu",
        compute_type: str = "default",
        beam_size: int = 1,
        batch_size: int = 16,
        min_speech_s: float = 0.3,
        language: str | None = None,
        align_model: str | None = None,
        cpu_threads: int = 0,
        max_new_tokens: int | None = None,
    ) -> None:
        require_package(
            "asr", "faster-whisper", "install it with `pip install faster-whisper`", module="faster_whisper"
        )
        self.path = require_weights(
            "asr",
            model_id,
            models_dir,
            files=("model.bin", "tokenizer.json"),
            hint="on a machine with internet run `huggingface-cli download {id} --local-dir "
            "{path}` (a CTranslate2 conversion of Whisper) and copy {path} here",
        )
        self.align_path = None
        if align_model:
            require_package("asr (whisperX alignment)", "whisperx", "install it with `pip install whisperx`")
            self.align_path = require_weights("asr (whisperX alignment)", align_model, models_dir)
        self.backend = f"faster-whisper:{model_id}" + (f"+whisperx:{align_model}" if align_model else "")
        self.device, self.compute_type, self.cpu_threads = device, compute_type, cpu_threads
        self.beam_size, self.batch_size = beam_size, batch_size
        self.min_speech_s, self.language = min_speech_s, language
        self.max_new_tokens = max_new_tokens  # None: Whisper's own limit (448 tokens with the prompt)

    def key_config(self) -> dict[str, Any]:
        return {
            "beam_size": self.beam_size,
            "min_speech_s": self.min_speech_s,
            "language": self.language,
            "compute_type": self.compute_type,
            "max_new_tokens": self.max_new_tokens,
        }

    def _model(self) -> Any:
        key = f"faster-whisper:{self.path}:{self.device}:{self.compute_type}:{self.cpu_threads}"
        return load_once(key, lambda: _load_whisper(str(self.path), self.device, self.compute_type, self.cpu_threads))

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[Transcript]:
        (vad,) = self.needed(context, clips, "vad")
        todo = [i for i, c in enumerate(clips) if vad[c.clip_id].speech_s >= self.min_speech_s]  # type: ignore[attr-defined]
        audios = {i: samples_16k(clips[i]) for i in todo}
        results: dict[int, dict] = {}
        for start in range(0, len(todo), self.batch_size):
            batch = todo[start : start + self.batch_size]
            for i, r in zip(
                batch,
                transcribe_batch(
                    self._model(), [audios[i] for i in batch], self.beam_size, self.language, self.max_new_tokens
                ),
            ):
                results[i] = r
        if self.align_path is not None:
            for i, r in results.items():
                if r["segments"]:
                    r["aligned_words"] = self._align(r, audios[i])
        return [
            self._record(c, vad[c.clip_id], results.get(i), audios.get(i))  # type: ignore[arg-type]
            for i, c in enumerate(clips)
        ]

    def _align(self, result: dict, audio: np.ndarray) -> list[dict]:
        return whisperx_words(self.align_path, self.device, result, audio)

    def _record(
        self, clip: ClipAudio, activity: SpeechActivity, result: dict | None, audio: np.ndarray | None
    ) -> Transcript:
        if result is None or audio is None:
            return skipped_transcript(self.lineage(clip.clip_id), activity.speech_s)
        duration = audio.size / SAMPLE_RATE
        segs = result["segments"]
        # Whisper pads to 30 s, so a word can be stamped past the clip's end: clamp to the clip.
        # With whisperX configured its words are the words, even none (nothing aligned): never Whisper's own
        # under a +whisperx backend.
        aligned = result["aligned_words"] if "aligned_words" in result else [w for s in segs for w in s["words"]]
        words = clip_words(aligned, duration)
        return Transcript(
            **self.lineage(clip.clip_id),
            text=" ".join(s["text"].strip() for s in segs).strip(),
            language=result["language"],
            language_prob=round(result["language_prob"], 4),
            words=words,
            avg_logprob=round(float(np.mean([s["avg_logprob"] for s in segs])), 4) if segs else 0.0,
            no_speech_prob=round(float(max(s["no_speech_prob"] for s in segs)), 4) if segs else 1.0,
            vad_speech_s=activity.speech_s,
            skipped_reason=None,
        )
