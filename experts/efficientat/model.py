# MIT License
#
# Copyright (c) 2022 Florian Schmid
#
# Permission is hereby granted, free of charge, to any person obtaining a copy
# of this software and associated documentation files (the "Software"), to deal
# in the Software without restriction, including without limitation the rights
# to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
# copies of the Software, and to permit persons to whom the Software is
# furnished to do so, subject to the following conditions:
#
# The above copyright notice and this permission notice shall be included in all
# copies or substantial portions of the Software.
#
# THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
# IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
# FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
# AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
# LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
# OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
# SOFTWARE.
#
# Adapted from EfficientAT (https://github.com/fschmid56/EfficientAT):
#   models/mn/model.py, models/mn/block_types.py, models/mn/utils.py,
#   models/preprocess.py, helpers/utils.py (NAME_TO_WIDTH), inference.py (settings).
# ConvNormActivation re-implemented after torchvision.ops.misc (BSD-3-Clause);
# get_mel_banks re-implemented after torchaudio.compliance.kaldi (BSD-2-Clause),
# identity VTLN warp (vtln_warp_factor=1.0) only.
"""EfficientAT `mn04_as` (MobileNetV3 width 0.4, AudioSet's 527 classes, mAP 0.432) in plain PyTorch, with the
authors' weights vendored beside it (PROVENANCE.md; sha256 checked at load, a differing file refused naming it).

Ported from the original code and checked against it: the mel front end and all 527 logits equal the original's
(max difference 0.0 on four inputs, docs/benchmarks.md). Eval mode only: pre-emphasis 0.97, STFT (n_fft 1024,
Hann window 800, hop 320, 32 kHz), Kaldi mel banks 0-15 kHz (128), log(x + 1e-5), (x + 4.5) / 5; the network
with its mlp head (channel squeeze-excitation, strides 2,2,2,2). Used as a second opinion where YAMNet has no
class: "Male speech, man speaking" / "Female speech, woman speaking".
"""

from __future__ import annotations

import csv
import io
import math
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from earmark.experts import weights
from earmark.experts.efficientat import LABELS_CSV, LABELS_SHA256, SOURCE, WEIGHTS, WEIGHTS_SHA256
from earmark.experts.weights import WeightsMismatch

# eval-mode front-end settings (inference.py defaults + AugmentMelSTFT defaults)
SR = 32000
N_MELS = 128
N_FFT = 1024
WIN_LENGTH = 800
HOP = 320
FMIN = 0.0
FMAX = SR // 2 - 2000 // 2  # fmax=None -> sr // 2 - fmax_aug_range // 2 = 15000
WIDTH_MULT = 0.4  # NAME_TO_WIDTH("mn04_as")


# ----------------------------------------------------------------------------- front end
def _mel_scale(freq: Tensor | float) -> Tensor | float:
    if isinstance(freq, Tensor):
        return 1127.0 * (1.0 + freq / 700.0).log()
    return 1127.0 * math.log(1.0 + freq / 700.0)


def get_mel_banks(
    num_bins: int, window_length_padded: int, sample_freq: float, low_freq: float, high_freq: float
) -> Tensor:
    """torchaudio.compliance.kaldi.get_mel_banks with vtln_warp_factor=1.0 -> [num_bins, n_fft // 2]."""
    assert num_bins > 3 and window_length_padded % 2 == 0
    num_fft_bins = window_length_padded / 2
    nyquist = 0.5 * sample_freq
    if high_freq <= 0.0:
        high_freq += nyquist
    assert 0.0 <= low_freq < nyquist and 0.0 < high_freq <= nyquist and low_freq < high_freq
    fft_bin_width = sample_freq / window_length_padded
    mel_low_freq = _mel_scale(float(low_freq))
    mel_high_freq = _mel_scale(float(high_freq))
    mel_freq_delta = (mel_high_freq - mel_low_freq) / (num_bins + 1)
    b = torch.arange(num_bins).unsqueeze(1)
    left_mel = mel_low_freq + b * mel_freq_delta
    center_mel = mel_low_freq + (b + 1.0) * mel_freq_delta
    right_mel = mel_low_freq + (b + 2.0) * mel_freq_delta
    mel = _mel_scale(fft_bin_width * torch.arange(num_fft_bins)).unsqueeze(0)
    up_slope = (mel - left_mel) / (center_mel - left_mel)
    down_slope = (right_mel - mel) / (right_mel - center_mel)
    return torch.max(torch.zeros(1), torch.min(up_slope, down_slope))


class MelFrontEnd(nn.Module):
    """AugmentMelSTFT in eval mode: pre-emphasis, STFT power, kaldi mel banks, log, (x + 4.5) / 5."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("window", torch.hann_window(WIN_LENGTH, periodic=False), persistent=False)
        self.register_buffer("preemphasis_coefficient", torch.as_tensor([[[-0.97, 1]]]), persistent=False)
        banks = get_mel_banks(N_MELS, N_FFT, SR, FMIN, FMAX)
        self.register_buffer("mel_basis", nn.functional.pad(banks, (0, 1), mode="constant", value=0), persistent=False)

    def forward(self, x: Tensor) -> Tensor:  # [B, N] -> [B, n_mels, T]
        x = nn.functional.conv1d(x.unsqueeze(1), self.preemphasis_coefficient).squeeze(1)
        spec = torch.stft(
            x,
            N_FFT,
            hop_length=HOP,
            win_length=WIN_LENGTH,
            center=True,
            normalized=False,
            window=self.window,
            return_complex=True,
        )
        power = (torch.view_as_real(spec) ** 2).sum(dim=-1)  # == return_complex=False path
        melspec = torch.matmul(self.mel_basis, power)
        melspec = (melspec + 0.00001).log()
        return (melspec + 4.5) / 5.0


# ----------------------------------------------------------------------------- network
def make_divisible(v: float, divisor: int, min_value: int | None = None) -> int:
    if min_value is None:
        min_value = divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class ConvNormActivation(nn.Sequential):
    """Conv2d(bias=False) -> BatchNorm2d -> activation; indices 0/1/2 as in torchvision."""

    def __init__(
        self,
        in_ch: int,
        out_ch: int,
        kernel_size: int = 3,
        stride: int = 1,
        groups: int = 1,
        dilation: int = 1,
        activation_layer: Callable[..., nn.Module] | None = nn.ReLU,
    ) -> None:
        padding = (kernel_size - 1) // 2 * dilation
        layers: list[nn.Module] = [
            nn.Conv2d(in_ch, out_ch, kernel_size, stride, padding, dilation=dilation, groups=groups, bias=False),
            nn.BatchNorm2d(out_ch, eps=0.001, momentum=0.01),
        ]
        if activation_layer is not None:
            layers.append(activation_layer(inplace=True))
        super().__init__(*layers)


class SqueezeExcitation(nn.Module):
    """Channel squeeze-excitation (se_dims='c'): mean over freq/time, fc-relu-fc-sigmoid."""

    def __init__(self, input_dim: int, squeeze_dim: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(input_dim, squeeze_dim)
        self.fc2 = nn.Linear(squeeze_dim, input_dim)

    def forward(self, x: Tensor) -> Tensor:
        scale = torch.mean(x, [2, 3], keepdim=True)
        shape = scale.size()
        scale = self.fc2(torch.relu(self.fc1(scale.squeeze(2).squeeze(2))))
        return torch.sigmoid(scale).view(shape) * x


class ConcurrentSEBlock(nn.Module):
    """se_dims='c', se_agg='max', se_r=4 (get_model defaults); max over a single branch is identity."""

    def __init__(self, c_dim: int, se_r: int = 4) -> None:
        super().__init__()
        self.conc_se_layers = nn.ModuleList([SqueezeExcitation(c_dim, make_divisible(c_dim // se_r, 8))])

    def forward(self, x: Tensor) -> Tensor:
        outs = torch.stack([layer(x) for layer in self.conc_se_layers], dim=0)
        return torch.max(outs, dim=0)[0]


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, kernel: int, cexp: int, cout: int, use_se: bool, use_hs: bool, stride: int) -> None:
        super().__init__()
        self.use_res_connect = stride == 1 and cin == cout
        act: Callable[..., nn.Module] = nn.Hardswish if use_hs else nn.ReLU
        layers: list[nn.Module] = []
        if cexp != cin:
            layers.append(ConvNormActivation(cin, cexp, kernel_size=1, activation_layer=act))
        layers.append(
            ConvNormActivation(cexp, cexp, kernel_size=kernel, stride=stride, groups=cexp, activation_layer=act)
        )
        if use_se:
            layers.append(ConcurrentSEBlock(cexp))
        layers.append(ConvNormActivation(cexp, cout, kernel_size=1, activation_layer=None))
        self.block = nn.Sequential(*layers)

    def forward(self, inp: Tensor) -> Tensor:
        result = self.block(inp)
        if self.use_res_connect:
            result = result + inp
        return result


# input_channels, kernel, expanded_channels, out_channels, use_se, activation, stride (strides 2,2,2,2)
_BNECK = [
    (16, 3, 16, 16, False, "RE", 1),
    (16, 3, 64, 24, False, "RE", 2),
    (24, 3, 72, 24, False, "RE", 1),
    (24, 5, 72, 40, True, "RE", 2),
    (40, 5, 120, 40, True, "RE", 1),
    (40, 5, 120, 40, True, "RE", 1),
    (40, 3, 240, 80, False, "HS", 2),
    (80, 3, 200, 80, False, "HS", 1),
    (80, 3, 184, 80, False, "HS", 1),
    (80, 3, 184, 80, False, "HS", 1),
    (80, 3, 480, 112, True, "HS", 1),
    (112, 3, 672, 112, True, "HS", 1),
    (112, 5, 672, 160, True, "HS", 2),
    (160, 5, 960, 160, True, "HS", 1),
    (160, 5, 960, 160, True, "HS", 1),
]


class MN(nn.Module):
    """MobileNetV3 as in EfficientAT models/mn/model.py with head_type='mlp'."""

    def __init__(self, width_mult: float = WIDTH_MULT, num_classes: int = 527) -> None:
        super().__init__()
        ch = lambda c: make_divisible(c * width_mult, 8)  # noqa: E731
        layers: list[nn.Module] = [
            ConvNormActivation(1, ch(_BNECK[0][0]), kernel_size=3, stride=2, activation_layer=nn.Hardswish)
        ]
        for cin, k, cexp, cout, se, act, s in _BNECK:
            layers.append(InvertedResidual(ch(cin), k, ch(cexp), ch(cout), se, act == "HS", s))
        last_in = ch(_BNECK[-1][3])
        layers.append(ConvNormActivation(last_in, 6 * last_in, kernel_size=1, activation_layer=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(start_dim=1),
            nn.Linear(6 * last_in, ch(1280)),
            nn.Hardswish(inplace=True),
            nn.Dropout(p=0.2, inplace=True),
            nn.Linear(ch(1280), num_classes),
        )

    def forward(self, x: Tensor) -> Tensor:  # [B, 1, n_mels, T] -> [B, num_classes]
        return self.classifier(self.features(x))


# ----------------------------------------------------------------------------- public API
def checked_bytes(path: Path, expected: str) -> bytes:
    """The file's bytes if their sha256 is `expected`; else WeightsMismatch naming the file and both digests."""
    return weights.checked_bytes(path, expected, f"EfficientAT release ({SOURCE})")


def labels(csv_path: Path = LABELS_CSV, sha256: str = LABELS_SHA256) -> list[str]:
    """The 527 AudioSet display names in logit order (the vendored class list, checked by sha256)."""
    rows = list(csv.reader(io.StringIO(checked_bytes(csv_path, sha256).decode("utf-8"))))[1:]
    out = [r[2] for r in sorted(rows, key=lambda r: int(r[0]))]
    if len(out) != 527:
        raise WeightsMismatch(f"{csv_path}: {len(out)} classes, expected 527")
    return out


class Mn04:
    """The network with the vendored weights (sha256 checked before they are read), in eval mode."""

    def __init__(self, weights: Path = WEIGHTS, sha256: str = WEIGHTS_SHA256) -> None:
        data = checked_bytes(weights, sha256)
        self.model = MN()
        self.model.load_state_dict(torch.load(io.BytesIO(data), map_location="cpu", weights_only=True), strict=True)
        self.model.eval()
        self.front = MelFrontEnd().eval()
        self.lock = threading.Lock()  # one forward at a time: the analyze threads share the model

    def logits(self, samples_32k: np.ndarray) -> np.ndarray:
        """[527] clip logits of a mono 32 kHz float waveform in [-1, 1] (at least 513 samples)."""
        x = torch.as_tensor(np.asarray(samples_32k, dtype=np.float32)).reshape(1, -1)
        with self.lock, torch.inference_mode():
            return self.model(self.front(x).unsqueeze(0))[0].numpy().astype(np.float32)
