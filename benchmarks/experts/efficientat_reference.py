"""Check earmark's port of EfficientAT mn04 (experts/efficientat/model.py) against the original code, and write the
reference logits the tests compare with (tests/support/efficientat_mn04_reference.npz).

    git clone https://github.com/fschmid56/EfficientAT /tmp/EfficientAT          # the original code (MIT)
    pip download torchvision==0.23.0 torchaudio==2.8.0 --no-deps -d /tmp/wheels   # only to read two modules
    cd /tmp/wheels && for w in *.whl; do unzip -oq "$w" 'torchvision/ops/misc.py' 'torchaudio/compliance/kaldi.py'; done
    .venv/bin/python benchmarks/experts/efficientat_reference.py --repo /tmp/EfficientAT --libs /tmp/wheels [--write]

The original `models/mn` and `models/preprocess.py` run unchanged with torchvision's own `ops/misc.py` and
torchaudio's own `compliance/kaldi.py` (loaded as single files; only their packages' glue is stubbed: the API-usage
logger, `_make_ntuple`, and the masking transforms, which eval mode never calls). Prints the largest difference of
the Kaldi mel banks, the front end and the 527 logits on four inputs (2026-11-28: 0.0 for all, one thread).
"""

from __future__ import annotations

import argparse
import collections.abc
import contextlib
import importlib.util
import io
import itertools
import os
import sys
import types
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve()
OUT = HERE.parents[2] / "tests" / "support" / "efficientat_mn04_reference.npz"


def _load(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _stub_packages(libs: Path) -> types.ModuleType:
    """torchvision.ops.misc and torchaudio.compliance.kaldi from their own sources; returns kaldi."""
    tv, ops, utils = (types.ModuleType(n) for n in ("torchvision", "torchvision.ops", "torchvision.utils"))
    tv.__path__, ops.__path__ = [], []
    utils._log_api_usage_once = lambda obj: None
    utils._make_ntuple = lambda x, n: (
        tuple(x) if isinstance(x, collections.abc.Iterable) else tuple(itertools.repeat(x, n))
    )
    sys.modules.update({"torchvision": tv, "torchvision.ops": ops, "torchvision.utils": utils})
    _load("torchvision.ops.misc", libs / "torchvision/ops/misc.py")

    class _Mask(torch.nn.Module):
        def __init__(self, *a: object, **k: object) -> None:
            super().__init__()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise RuntimeError("masking must not run in eval mode")

    ta, comp, tr = (types.ModuleType(n) for n in ("torchaudio", "torchaudio.compliance", "torchaudio.transforms"))
    ta.__path__, comp.__path__ = [], []
    tr.FrequencyMasking = tr.TimeMasking = _Mask
    ta.compliance, ta.transforms = comp, tr
    sys.modules.update({"torchaudio": ta, "torchaudio.compliance": comp, "torchaudio.transforms": tr})
    kaldi = _load("torchaudio.compliance.kaldi", libs / "torchaudio/compliance/kaldi.py")
    comp.kaldi = kaldi
    return kaldi


def probe_input() -> np.ndarray:
    t = np.arange(48000) / 32000.0
    tone = 0.3 * np.sin(2 * np.pi * 220 * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))
    return (tone + 0.05 * np.random.default_rng(7).standard_normal(t.size)).astype(np.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, required=True, help="a clone of fschmid56/EfficientAT")
    ap.add_argument("--libs", type=Path, required=True, help="where torchvision/ and torchaudio/ were unzipped")
    ap.add_argument("--write", action="store_true", help=f"write {OUT.name}")
    a = ap.parse_args()
    torch.set_num_threads(1)
    kaldi = _stub_packages(a.libs)
    sys.path.insert(0, str(a.repo))
    cwd = os.getcwd()
    os.chdir(a.repo)  # helpers/utils.py reads metadata/ at import
    from helpers.utils import NAME_TO_WIDTH
    from models.mn.model import get_model
    from models.preprocess import AugmentMelSTFT

    os.chdir(cwd)
    from earmark.experts.efficientat import WEIGHTS
    from earmark.experts.efficientat.model import Mn04, get_mel_banks

    with contextlib.redirect_stdout(io.StringIO()):
        ref = get_model(width_mult=NAME_TO_WIDTH("mn04_as"), strides=[2, 2, 2, 2], head_type="mlp")
        front = AugmentMelSTFT(n_mels=128, sr=32000, win_length=800, hopsize=320).eval()
    ref.load_state_dict(torch.load(WEIGHTS, map_location="cpu", weights_only=True), strict=True)
    ref.eval()
    port = Mn04()
    banks, _ = kaldi.get_mel_banks(128, 1024, 32000, 0.0, 15000, vtln_low=100.0, vtln_high=-500.0, vtln_warp_factor=1.0)
    print("mel banks: max |diff|", float((banks - get_mel_banks(128, 1024, 32000, 0.0, 15000)).abs().max()))
    rng = np.random.default_rng(0)
    for x in [
        *((rng.standard_normal(n) * 0.1).astype(np.float32) for n in (320000, 160000, 96017, 5000)),
        probe_input(),
    ]:
        with torch.no_grad():
            spec = front(torch.from_numpy(x[None]))
            logits = ref(spec.unsqueeze(0))[0].numpy().reshape(-1)
            ours = port.front(torch.from_numpy(x[None]))
        print(
            f"{x.size} samples: front end max |diff| {float((spec - ours).abs().max()):.3g}, "
            f"logits max |diff| {float(np.abs(logits - port.logits(x)).max()):.3g}"
        )
    if a.write:
        with torch.no_grad():
            logits = ref(front(torch.from_numpy(probe_input()[None])).unsqueeze(0))[0].numpy().reshape(-1)
        np.savez_compressed(OUT, logits=logits.astype(np.float32))
        print("wrote", OUT)


if __name__ == "__main__":
    main()
