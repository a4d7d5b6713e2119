"""FENSE's error checker (Zhou et al. 2022) as mecat 1.1.0 runs it: a BERT classifier whose last logit flags
fluency errors (repetition, broken endings, …); a flagged caption's DATE/FENSE scores are multiplied by 0.1.

Its weights (`echecker_clotho_audiocaps_base.ckpt`, 1a719f09…) are a download from the FENSE GitHub
release, so the checker is optional: `load_error_checker()` returns None when the checkpoint is not on
disk and the report says the checker was off. The checkpoint names its encoder (`model_type`, e.g.
bert-base-uncased); that encoder's config and tokenizer must be local too (HF cache or a directory).

Reproduces mecat's RefinedErrorChecker exactly, including its quirk: a single sentence is tokenised
to 64 tokens, a list to 256 (padding to max_length), which can change a truncated long caption's verdict.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import torch

CHECKPOINT = "echecker_clotho_audiocaps_base.ckpt"
CHECKPOINT_URL = "https://github.com/blmoistawinde/fense/releases/download/V0.1/echecker_clotho_audiocaps_base.ckpt"
CHECKPOINT_SHA256 = "1a719f090af70614bbdb9f9437530b7e133c48cfa4a58d964de0d47fc974a2fa"


def default_checkpoint() -> Path:
    """Where FENSE/mecat keep it: $FENSE_DATA or ~/.fense_data."""
    return Path(os.path.expanduser(os.environ.get("FENSE_DATA", "~/.fense_data"))) / CHECKPOINT


class _Classifier(torch.nn.Module):
    def __init__(self, encoder: torch.nn.Module, num_classes: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.clf = torch.nn.Linear(encoder.config.hidden_size, num_classes)

    def forward(self, input_ids, attention_mask, token_type_ids):
        hidden = self.encoder(input_ids, attention_mask, token_type_ids).last_hidden_state[:, 0, :]
        return self.clf(hidden)  # dropout is the identity in eval mode


class FenseErrorChecker:
    """callable(list[str]) -> penalties (1 = no error, 1 − penalty = flagged), as mecat's RefinedErrorChecker."""

    def __init__(
        self,
        checkpoint: str | Path,
        device: str = "cpu",
        error_threshold: float = 0.9,
        penalty: float = 0.9,
        encoder_dir: str | Path | None = None,
    ) -> None:
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        checkpoint = Path(checkpoint)
        if not checkpoint.is_file():
            raise FileNotFoundError(
                f"FENSE error-checker checkpoint {checkpoint} not found; download {CHECKPOINT_URL} "
                f"(sha256 {CHECKPOINT_SHA256[:12]}…) to {default_checkpoint()} or pass its path"
            )
        states = torch.load(checkpoint, map_location="cpu", weights_only=True)
        encoder = str(encoder_dir or states["model_type"])
        try:
            config = AutoConfig.from_pretrained(encoder, local_files_only=True)
            self.tokenizer = AutoTokenizer.from_pretrained(encoder, local_files_only=True)
        except OSError as exc:
            raise FileNotFoundError(
                f"the error checker's encoder {encoder!r} (config + tokenizer) is not available "
                f"offline; put it in the Hugging Face cache (huggingface-cli download {encoder}) "
                "or pass encoder_dir"
            ) from exc
        model = _Classifier(AutoModel.from_config(config), int(states["num_classes"]))
        wanted = model.state_dict()
        for name, value in states["state_dict"].items():
            if "position_ids" not in name and name in wanted:
                wanted[name] = value
        model.load_state_dict(wanted)
        self.model = model.eval().to(device)
        self.device = device
        self.error_threshold = error_threshold
        self.penalty = penalty
        self.name = checkpoint.name

    def _batch(self, texts: list[str], max_len: int) -> dict[str, torch.Tensor]:
        texts = [re.sub(r"[^\w\s]", "", t).lower() for t in texts]
        enc = self.tokenizer(texts, truncation=True, padding="max_length", max_length=max_len)
        return {k: torch.LongTensor(enc[k]).to(self.device) for k in ("input_ids", "attention_mask", "token_type_ids")}

    def __call__(self, sentences: str | list[str], batch_size: int = 32) -> torch.Tensor:
        sentences = [sentences] if isinstance(sentences, str) else list(sentences)
        max_len = 64 if len(sentences) == 1 else 256  # mecat's two code paths
        probs = []
        with torch.no_grad():
            for i in range(0, len(sentences), batch_size):
                probs.append(torch.sigmoid(self.model(**self._batch(sentences[i : i + batch_size], max_len)))[:, -1])
        flagged = torch.cat(probs).cpu() > self.error_threshold
        return torch.where(flagged, torch.tensor(1 - self.penalty), torch.tensor(1.0))


def load_error_checker(spec: str | Path | None = "auto", device: str = "cpu") -> tuple[FenseErrorChecker | None, str]:
    """("auto" | "off" | a checkpoint path) → (checker or None, a sentence for the report saying which)."""
    if spec in (None, "off"):
        return None, "FENSE error checker: off (not requested)"
    path = default_checkpoint() if spec == "auto" else Path(spec)
    if spec == "auto" and not path.is_file():
        return None, (
            f"FENSE error checker: off (weights absent: {path}; download {CHECKPOINT_URL} there to turn "
            "it on — scores are then comparable with mecat's defaults)"
        )
    checker = FenseErrorChecker(path, device=device)
    return checker, f"FENSE error checker: on ({path})"
