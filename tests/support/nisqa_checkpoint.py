"""A randomly initialised NISQA v2.0 checkpoint (what `experts/paper/nisqa.py` loads), for tests and benchmarks."""

from __future__ import annotations

from typing import Any


def random_checkpoint(path: Any, seed: int = 0, **overrides: Any) -> None:
    """A randomly initialised NISQA checkpoint with NISQA v2.0's architecture (for tests and benchmarks)."""
    import torch
    from torchmetrics.functional.audio.nisqa import _NISQADIM

    args = dict(
        ms_sr=48000,
        ms_fmax=20000,
        ms_n_mels=48,
        ms_hop_length=0.01,
        ms_win_length=0.02,
        ms_n_fft=4096,
        ms_seg_length=15,
        ms_seg_hop_length=4,
        ms_max_segments=1300,
        cnn_c_out_1=16,
        cnn_c_out_2=32,
        cnn_c_out_3=64,
        cnn_kernel_size=[3, 3],
        cnn_pool_1=[24, 7],
        cnn_pool_2=[12, 5],
        cnn_pool_3=[6, 3],
        cnn_dropout=0.2,
        td_sa_d_model=64,
        td_sa_nhead=1,
        td_sa_h=64,
        td_sa_num_layers=2,
        td_sa_dropout=0.1,
        pool_att_h=128,
        pool_att_dropout=0.1,
        **overrides,
    )
    torch.manual_seed(seed)
    model = _NISQADIM(args)
    for head in model.pool_layers:  # the five heads start as copies of one; make them differ
        for p in head.parameters():
            torch.nn.init.normal_(p, std=0.2)
    torch.save({"args": args, "model_state_dict": model.state_dict()}, path)
