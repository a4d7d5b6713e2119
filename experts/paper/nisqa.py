"""Speech quality with NISQA v2.0 (MOS + noisiness, discontinuity, coloration, loudness), bring your weights.

The model is torchmetrics' port of NISQA (`torchmetrics.functional.audio.nisqa`, pure torch), loaded from
a local checkpoint (`nisqa.tar` of github.com/gabrielmittag/NISQA) instead of torchmetrics' download.
As NISQA's reference code does, audio is resampled to the checkpoint's `ms_sr` (48 kHz) before its mel
spectrogram; torchmetrics' helper would use the input rate as is. Only the clip's VAD speech is scored (as
for DNSMOS); a clip with less than `min_speech_s` of it gets no score, with the reason. Clips of a call are
scored as one batch: each clip's mel segments are padded to the batch's longest and the model masks by each
clip's length. torchmetrics' `forward` builds those masks on the CPU (`torch.arange` without a device), so on
CUDA it stops with a device mismatch; `forward` here is the same computation with the masks built on the
model's device (`tests/test_experts_paper.py` holds it equal to torchmetrics' on the CPU).

The mel spectrogram is NISQA's librosa one on the CPU. On a GPU it is computed on the model's device in torch
(`melspec_db`: the same STFT, the Slaney mel basis taken from librosa, per-clip dB with top_db 80): librosa's
n_fft-4096 spectrogram at 48 kHz is most of the expert's host work, which a GPU worker does while it holds
the `gpu` slot (docs/benchmarks.md, `expert_throughput.py --host-share`). The two agree within 1e-3 dB
(`tests/test_experts_paper.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from earmark.experts.audio import speech_to_score
from earmark.experts.base import SAMPLE_RATE, ClipAudio, Context, Expert, load_once
from earmark.experts.models import require_package, require_weights
from earmark.experts.quality import NO_SPEECH
from earmark.schemas.records import NISQAScores

NISQA_HINT = (
    "on a machine with internet download weights/nisqa.tar from github.com/gabrielmittag/NISQA and copy it to {path}"
)
DIMENSIONS = ("mos", "noisiness", "discontinuity", "coloration", "loudness")  # the model's output order


def _load(path: str, device: str) -> tuple[Any, dict]:
    import torch
    from torchmetrics.functional.audio.nisqa import _NISQADIM

    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    args = dict(checkpoint["args"])
    model = _NISQADIM(args)
    model.load_state_dict(checkpoint["model_state_dict"], strict=True)
    return model.to(device).eval(), args


def _mel_basis(rate: int, args: dict, device: str) -> Any:
    import librosa
    import torch

    basis = librosa.filters.mel(
        sr=rate,
        n_fft=args["ms_n_fft"],
        n_mels=args["ms_n_mels"],
        fmin=0.0,
        fmax=args["ms_fmax"],
        htk=False,
        norm="slaney",
    )
    return torch.from_numpy(basis.astype(np.float32)).to(device)


def melspec_db(y: np.ndarray, rate: int, args: dict, device: str) -> Any:
    """torchmetrics' `_get_librosa_melspec` for one clip (n_mels × frames, float32, on `device`), in torch: the
    STFT with a periodic Hann window centred in n_fft and reflect padding, magnitudes, the Slaney mel basis,
    then librosa's amplitude_to_db (squared, 10·log10 floored at amin², ref 1, top_db below the clip's max)."""
    import torch

    hop, win = int(rate * args["ms_hop_length"]), int(rate * args["ms_win_length"])
    basis = load_once(
        f"nisqa-mel:{rate}:{args['ms_n_fft']}:{args['ms_n_mels']}:{args['ms_fmax']}:{device}",
        lambda: _mel_basis(rate, args, device),
    )
    x = torch.from_numpy(np.ascontiguousarray(y, dtype=np.float32)).to(device)
    window = torch.hann_window(win, periodic=True, device=device)
    spec = torch.stft(
        x,
        args["ms_n_fft"],
        hop_length=hop,
        win_length=win,
        window=window,
        center=True,
        pad_mode="reflect",
        return_complex=True,
    ).abs()
    power = torch.square(basis @ spec)
    db = 10.0 * torch.log10(torch.clamp(power, min=1e-8))  # amin 1e-4, squared; ref 1.0 → minus 0
    return torch.maximum(db, db.max() - 80.0)


def segments(mel: Any, args: dict) -> tuple[Any, int]:
    """torchmetrics' `_segment_specs` for one clip without the padding to ms_max_segments: (windows, n_mels,
    ms_seg_length) every ms_seg_hop_length frames, and their count."""
    seg, hop = args["ms_seg_length"], args["ms_seg_hop_length"]
    if mel.shape[1] < seg:
        raise RuntimeError("Input signal is too short.")
    windows = mel.unfold(1, seg, hop).permute(1, 0, 2)  # (n, n_mels, seg)
    if windows.shape[0] > args["ms_max_segments"]:
        raise RuntimeError("Maximum number of mel spectrogram windows exceeded. Use shorter audio.")
    return windows, int(windows.shape[0])


def forward(model: Any, x: Any, n_wins: Any) -> Any:
    """torchmetrics' `_NISQADIM.forward` (NISQA, MIT licence, (c) 2021 Gabriel Mittag) with its padding masks on
    the model's device: `x` on that device, `n_wins` on the CPU (packing needs CPU lengths)."""
    import torch
    from torch.nn.functional import softmax

    x = model.cnn(x, n_wins)
    lengths = n_wins.to(x.device)
    attention = model.time_dependency.model
    out = attention.norm1(attention.linear(x).transpose(1, 0))
    for layer in attention.layers:
        mask = torch.arange(out.shape[0], device=out.device)[None, :] < lengths[:, None]
        out2 = layer.self_attn(out, out, out, key_padding_mask=~mask)[0]
        out = layer.norm1(out + layer.dropout1(out2))
        out2 = layer.linear2(layer.dropout(layer.activation(layer.linear1(out))))
        out = layer.norm2(out + layer.dropout2(out2))
    x = out.transpose(1, 0)
    heads = []
    for pool in model.pool_layers:
        head = pool.model
        att = head.linear2(head.dropout(head.activation(head.linear1(x)))).transpose(2, 1)
        mask = torch.arange(att.shape[2], device=att.device)[None, :] < lengths[:, None]
        att[~mask.unsqueeze(1)] = float("-inf")
        heads.append(head.linear3(torch.bmm(softmax(att, dim=2), x).squeeze(1)))
    return torch.cat(heads, dim=1)


class NISQAExpert(Expert):
    """NISQA scores a clip's VAD speech only, joined (as DNSMOS does): on music or a door slam its "poor
    speech quality" would not be a fact about the recording. Less than `min_speech_s` of speech: no score."""

    name, version, record, needs = "nisqa", "2", NISQAScores, ("vad",)

    def __init__(
        self,
        checkpoint: str,
        models_dir: Any = None,
        *,
        device: str = "cpu",
        batch_size: int = 16,
        min_speech_s: float = 1.0,
        features: Literal["auto", "librosa", "torch"] = "auto",
    ) -> None:
        require_package("nisqa", "torchmetrics", "install it with `pip install torchmetrics librosa`")
        self.path = require_weights("nisqa", checkpoint, models_dir, files=(), hint=NISQA_HINT)
        self.backend = f"nisqa-v2.0:torchmetrics:{checkpoint}"
        self.device, self.batch_size, self.min_speech_s = device, batch_size, min_speech_s
        self.features = ("librosa" if device == "cpu" else "torch") if features == "auto" else features

    def key_config(self) -> dict[str, Any]:
        return {"min_speech_s": self.min_speech_s, "speech_only": True}

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[NISQAScores]:
        (vad,) = self.needed(context, clips, "vad")
        speech, seconds, scored = speech_to_score(clips, vad, self.min_speech_s)
        rows: dict[int, np.ndarray] = {}
        for s in range(0, len(scored), self.batch_size):
            part = scored[s : s + self.batch_size]
            rows.update(zip(part, self.score([speech[i] for i in part])))
        none = dict.fromkeys(DIMENSIONS)
        return [
            NISQAScores(
                **self.lineage(c.clip_id),
                **({k: round(float(v), 4) for k, v in zip(DIMENSIONS, rows[i])} if i in rows else none),
                speech_s=seconds[i],
                skipped_reason=None if i in rows else NO_SPEECH.format(s=self.min_speech_s),
            )
            for i, c in enumerate(clips)
        ]

    def score(self, audios: list[np.ndarray]) -> np.ndarray:
        """(len(audios), 5) predictions in DIMENSIONS order."""
        import soxr
        import torch
        from torchmetrics.functional.audio.nisqa import _get_librosa_melspec

        model, args = load_once(f"nisqa:{self.path}:{self.device}", lambda: _load(str(self.path), self.device))
        rate = int(args.get("ms_sr") or SAMPLE_RATE)
        segs, n_wins = [], []
        for a in audios:
            # NISQA needs ms_seg_length mel frames at least: pad very short clips with silence.
            a = np.pad(a, (0, max(0, int(0.2 * SAMPLE_RATE) - a.size)))
            y = soxr.resample(a, SAMPLE_RATE, rate).astype(np.float32) if rate != SAMPLE_RATE else a
            if self.features == "torch":
                x, n = segments(melspec_db(y, rate, args, self.device), args)
            else:
                mel = torch.from_numpy(_get_librosa_melspec(y[None], rate, args))
                x, n = segments(mel[0], args)
            segs.append(x)
            n_wins.append(n)
        batch = torch.nn.utils.rnn.pad_sequence(segs, batch_first=True).to(self.device)
        with torch.inference_mode():
            out = forward(model, batch, torch.tensor(n_wins))
        return out.float().cpu().numpy()
