"""An optional global description of each clip by an audio-language model (off by default).

Any OpenAI-compatible audio chat endpoint (vLLM serving Qwen2-Audio / Qwen2.5-Omni, gpt-4o-audio, …):
the clip goes as base64 WAV with one prompt, through earmark.llm.audio (retries with backoff, concurrency
limit). A request that still fails makes the shard fail after the other clips are done, naming the clip
and the reason, so a re-run retries it instead of storing a clip without a description.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from typing import Any

import soundfile as sf

from earmark.experts.audio import samples_16k
from earmark.experts.base import SAMPLE_RATE, ClipAudio, Context, Expert
from earmark.prompts import Prompt, load_prompt
from earmark.schemas.records import AudioDescription


class DescriptionFailed(RuntimeError):
    pass


def wav_bytes(clip: ClipAudio) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, samples_16k(clip), SAMPLE_RATE, format="WAV", subtype="PCM_16")
    return buf.getvalue()


class AudioLMDescriptionExpert(Expert):
    name, version, record = "description", "1", AudioDescription

    def __init__(
        self,
        endpoint: str,
        model: str,
        *,
        prompt: Prompt | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        max_concurrency: int = 4,
        timeout_s: float = 120.0,
    ) -> None:
        self.endpoint, self.model = endpoint, model
        self.prompt = prompt or load_prompt("description")  # prompts/description.toml
        self.api_key_env, self.max_concurrency, self.timeout_s = api_key_env, max_concurrency, timeout_s
        self.backend = f"audio-lm:{model}"

    def key_config(self) -> dict[str, Any]:
        # The endpoint URL is where the model runs, not what it is: it stays out of the key.
        return {"prompt_sha": self.prompt.sha}

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[AudioDescription]:
        from earmark.llm.audio import run_model

        preds = run_model(
            ((c.clip_id, wav_bytes(c)) for c in clips),
            {"description": self.prompt.render_user()},
            self.endpoint,
            self.model,
            api_key=os.environ.get(self.api_key_env),
            max_concurrency=self.max_concurrency,
            timeout_s=self.timeout_s,
            max_tokens=self.prompt.max_tokens,
            temperature=self.prompt.temperature,
        )
        errors = preds.errors["description"]
        if errors:
            clip_id, reason = next(iter(errors.items()))
            raise DescriptionFailed(
                f"the description endpoint {self.endpoint} failed for {len(errors)} of "
                f"{len(clips)} clip(s), e.g. {clip_id}: {reason}"
            )
        return [
            AudioDescription(**self.lineage(c.clip_id), text=preds["description"][c.clip_id], model=self.model)
            for c in clips
        ]
