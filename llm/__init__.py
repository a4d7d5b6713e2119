"""LLM access for earmark: embedded GGUF models, a local llama.cpp server, and a cached JSON client."""

from earmark.llm.cache import ResponseCache, cache_key
from earmark.llm.client import (
    CircuitOpenError,
    LLMClient,
    LLMEndpointError,
    LLMResult,
    extract_json,
    shard_budget,
    shard_usage,
)
from earmark.llm.models import DEFAULT_MODEL_ID, EMBEDDED_MODELS, ModelNotAvailable, resolve_model_path
from earmark.llm.server import LLMServerError, LocalLLMServer

__all__ = [
    "CircuitOpenError",
    "DEFAULT_MODEL_ID",
    "EMBEDDED_MODELS",
    "LLMClient",
    "LLMEndpointError",
    "LLMResult",
    "LLMServerError",
    "LocalLLMServer",
    "ModelNotAvailable",
    "ResponseCache",
    "cache_key",
    "extract_json",
    "resolve_model_path",
    "shard_budget",
    "shard_usage",
]
