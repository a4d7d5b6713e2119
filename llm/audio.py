"""Run a model under test on a dataset's clips through an OpenAI-compatible audio chat endpoint.

For every clip and subtask one request is sent: the subtask's prompt plus the clip as base64 16-bit
WAV (`input_audio`, as OpenAI's gpt-4o-audio, vLLM's Qwen2-Audio/Qwen2.5-Omni and llama.cpp's
multimodal server accept it). Transport, retries with backoff on 429/5xx/timeouts and the concurrency
limit are `earmark.llm.client.LLMClient`'s; answers are cached on disk by (model, prompt, audio sha,
params), so a re-run only asks for what is missing. A request that fails for good (a 400 on one clip,
an unreadable clip) becomes an error *value*: prediction "" plus an entry in `errors`, and the other
clips go on. Predictions are written as `<subtask>.jsonl` in mecat-evaluate's `{key: text}` format,
which `earmark.stages.evaluate.load_predictions` reads back.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import soundfile as sf

from earmark.core import progress
from earmark.llm.cache import ResponseCache, cache_key, write_atomic
from earmark.llm.client import LLMClient, LLMEndpointError

REQUESTS = ("evaluate", "model requests")  # earmark.core.progress (stage, unit)


class ModelPredictions(dict):
    """{subtask: {clip_id: text}} plus `errors` {subtask: {clip_id: reason}} and client `stats`.

    A failed request has prediction "" and an entry in `errors`; it is never cached, so a re-run
    retries exactly the failures.
    """

    def __init__(self, subtasks: Iterable[str]) -> None:
        super().__init__({s: {} for s in subtasks})
        self.errors: dict[str, dict[str, str]] = {s: {} for s in self}
        self.stats: dict = {}
        self.cache_hits = 0

    def n_errors(self) -> int:
        return sum(len(e) for e in self.errors.values())


def flac_to_wav(audio: bytes) -> bytes:
    """Any soundfile-readable clip (FLAC from ingest) → 16-bit PCM WAV bytes, rate and channels kept."""
    data, rate = sf.read(io.BytesIO(audio), dtype="float32", always_2d=True)
    out = io.BytesIO()
    sf.write(out, data, rate, format="WAV", subtype="PCM_16")
    return out.getvalue()


def audio_message(prompt: str, wav_b64: str) -> list[dict]:
    return [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": prompt},
                {"type": "input_audio", "input_audio": {"data": wav_b64, "format": "wav"}},
            ],
        }
    ]


def _message_text(reply: dict) -> tuple[str, str | None]:
    """The first choice's text, and an error when there is none."""
    choices = reply.get("choices") if isinstance(reply, dict) else None
    if not choices or not isinstance(choices[0], dict):
        return "", f"reply has no choices: {json.dumps(reply)[:200]}"
    message = choices[0].get("message") or {}
    content = message.get("content")
    if isinstance(content, list):  # some servers answer with content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    text = (content or "").strip()
    if not text:
        return "", f"model returned no text (finish_reason={choices[0].get('finish_reason')!r})"
    return text, None


Request = tuple[str, str, str]  # (subtask, prediction key, prompt)


def run_model(
    clips: Iterable[tuple[str, bytes]],
    prompts: Mapping[str, str],
    endpoint: str,
    model: str,
    *,
    requests: Callable[[str], Sequence[Request]] | None = None,
    api_key: str | None = None,
    cache_dir: str | Path | None = None,
    max_concurrency: int = 4,
    timeout_s: float = 120.0,
    max_tokens: int = 256,
    temperature: float = 0.0,
    max_retries: int = 4,
    backoff_s: float = 0.5,
    planned: int | None = None,
) -> ModelPredictions:
    """Ask `model` at `endpoint` (base URL ending in /v1) for every (clip, subtask) prediction.

    `clips` yields (clip_id, audio bytes) and is consumed lazily: at most ~2×max_concurrency encoded
    clips are held at once. `prompts` maps subtask → prompt (e.g. MECAT's caption prompts, from
    prompts/mecat_eval.toml), keyed by clip id. For per-item prompts (QA questions, entailment hypotheses, IFEval instructions) pass
    `requests`: clip_id → [(subtask, key, prompt), …]; `prompts` then only names the subtasks.
    Each answered (or failed) request is reported to earmark.core.progress as `evaluate` / `model requests`;
    `planned`: how many there are in all, when the caller knows (else they count up as clips are read).
    """
    prompts = dict(prompts)
    if not prompts:
        raise ValueError("run_model: no prompts given; pass {subtask: prompt}")
    if requests is None:

        def requests(clip_id: str) -> list[Request]:
            return [(s, clip_id, p) for s, p in prompts.items()]

    params = {"max_tokens": max_tokens, "temperature": temperature}
    cache = ResponseCache(cache_dir) if cache_dir is not None else None
    out = ModelPredictions(prompts)
    client = LLMClient(
        endpoint,
        model,
        api_key=api_key,
        max_concurrency=max_concurrency,
        timeout_s=timeout_s,
        max_retries=max_retries,
        backoff_s=backoff_s,
    )
    ask = _Asker(client, model, params, cache)
    progress.report(*REQUESTS, planned=planned or 0)
    window = 2 * max_concurrency * len(prompts)
    pending: set[Future] = set()
    with client, ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="runner") as pool:
        for clip_id, audio in clips:
            todo = list(requests(clip_id))
            if not todo:
                continue
            try:
                wav = flac_to_wav(audio)
            except (RuntimeError, ValueError) as exc:  # sf.LibsndfileError is a RuntimeError
                _undecodable(out, clip_id, todo, exc)
                progress.report(*REQUESTS, planned=0 if planned is not None else len(todo), done=len(todo))
                continue
            if planned is None:
                progress.report(*REQUESTS, planned=len(todo))
            wav_b64 = base64.b64encode(wav).decode("ascii")
            audio_sha = hashlib.sha256(wav).hexdigest()
            pending |= {pool.submit(ask, s, k, p, wav_b64, audio_sha) for s, k, p in todo}
            if len(pending) >= window:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                _collect(out, done)
        _collect(out, wait(pending).done)
        out.stats = client.stats()
    return out


Answer = tuple[str, str, str, str | None, bool]  # subtask, key, text, error (None: answered), from the cache


@dataclass
class _Asker:
    """One request of the model under test (a pool thread's work), answered from the response cache when it
    can be; each answered or failed request is reported to earmark.core.progress."""

    client: LLMClient
    model: str
    params: dict[str, Any]
    cache: ResponseCache | None

    def __call__(self, subtask: str, key: str, prompt: str, wav_b64: str, audio_sha: str) -> Answer:
        try:
            return self._ask(subtask, key, prompt, wav_b64, audio_sha)
        finally:
            progress.report(*REQUESTS, done=1)

    def _ask(self, subtask: str, key: str, prompt: str, wav_b64: str, audio_sha: str) -> Answer:
        # The key names the audio by its sha, not its bytes: same answer, 30 000× smaller key payload.
        content = [{"type": "text", "text": prompt}, {"type": "input_audio_sha256", "sha256": audio_sha}]
        ckey = cache_key(
            self.model, [{"role": "user", "content": content}], self.params, None, endpoint=self.client.identity
        )
        if self.cache is not None and (hit := self.cache.get(ckey)) is not None:
            return subtask, key, hit["text"], None, True
        body = {"model": self.model, "messages": audio_message(prompt, wav_b64), **self.params}
        try:
            reply = self.client.post_json("/chat/completions", body)
        except LLMEndpointError as exc:
            return subtask, key, "", str(exc), False
        text, error = _message_text(reply)
        if error is None and self.cache is not None:
            self.cache.put(ckey, {"text": text})
        return subtask, key, text, error, False


def _undecodable(out: ModelPredictions, clip_id: str, todo: Sequence[Request], exc: Exception) -> None:
    for subtask, key, _ in todo:
        out.setdefault(subtask, {})[key] = ""
        out.errors.setdefault(subtask, {})[key] = f"clip {clip_id}: audio could not be decoded ({exc}); re-ingest it"


def _collect(out: ModelPredictions, done: Iterable[Future]) -> None:
    for fut in done:
        subtask, key, text, error, cached = fut.result()
        out.setdefault(subtask, {})[key] = text
        out.cache_hits += cached
        if error is not None:
            out.errors.setdefault(subtask, {})[key] = error


def write_predictions(preds: Mapping[str, Mapping[str, str]], out_dir: str | Path) -> dict[str, Path]:
    """Write `<out_dir>/<subtask>.jsonl`, one `{clip_id: text}` object per line (mecat-evaluate format).

    Failed requests are written as "" so the file still lists every clip; scoring counts them as misses.
    """
    out_dir = Path(out_dir)
    paths: dict[str, Path] = {}
    for subtask, rows in preds.items():
        lines = "".join(json.dumps({k: rows[k]}, ensure_ascii=False) + "\n" for k in sorted(rows))
        path = out_dir / f"{subtask}.jsonl"
        write_atomic(path, lambda fh, data=lines.encode("utf-8"): fh.write(data))
        paths[subtask] = path
    return paths
