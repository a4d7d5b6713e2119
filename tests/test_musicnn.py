"""The numpy musicnn port (experts/learned/musicnn.py) against the original TensorFlow graph.

The reference numbers were produced once by musicnn 0.1.0's own `models.define_model` + `tf.train.Saver`
(TensorFlow 2.15.1, tf.compat.v1 graph mode, in a throwaway venv) on the log-mel of the synthetic signal below;
TensorFlow is not needed to run this test, only the `musicnn` wheel's checkpoint files."""

from __future__ import annotations

import numpy as np

# sigmoid tag outputs of the TF graph (6 decimals) and the first 8 values of its 200-d "penultimate" embedding
TF_TAGS = [
    0.002909,
    0.000051,
    0.081024,
    0.001582,
    0.000324,
    0.005255,
    0.008877,
    0.000154,
    0.007861,
    0.000086,
    0.114049,
    0.00165,
    0.000043,
    0.000033,
    0.010204,
    0.00015,
    0.003542,
    0.0,
    0.000001,
    0.000012,
    0.000021,
    0.034557,
    0.000019,
    0.00053,
    0.02033,
    0.381825,
    0.000092,
    0.000001,
    0.032197,
    0.000015,
    0.011331,
    0.000121,
    0.00701,
    0.0,
    0.000004,
    0.0,
    0.000037,
    0.021846,
    0.000042,
    0.000001,
    0.000126,
    0.000486,
    0.000155,
    0.000006,
    0.012959,
    0.005708,
    0.0,
    0.000002,
    0.000071,
    0.0,
]
TF_PENULTIMATE_8 = [-0.07995, 0.56865, -0.09226, 0.83918, -0.07870, -0.17004, -0.07807, 0.72184]


def _signal() -> np.ndarray:
    rng = np.random.default_rng(0)
    t = np.arange(48000) / 16000
    x = 0.3 * np.sin(2 * np.pi * 220 * t) + 0.2 * np.sin(2 * np.pi * 330 * t) + 0.02 * rng.standard_normal(48000)
    x[::8000] += 0.9  # clicks every 0.5 s
    return x.astype(np.float32)


def test_checkpoint_reader_finds_every_tensor_with_its_shape() -> None:
    from earmark.experts.learned.musicnn import checkpoint_prefix, read_tf_checkpoint

    w = read_tf_checkpoint(checkpoint_prefix("MTT_musicnn"))
    assert w["conv2d/kernel"].shape == (7, 38, 1, 204) and w["conv2d_5/kernel"].shape == (7, 561, 1, 64)
    assert w["dense/kernel"].shape == (1506, 200) and w["dense_1/kernel"].shape == (200, 50)
    assert sum(k.startswith("batch_normalization") and k.endswith("/gamma") for k in w) == 11


def test_numpy_forward_pass_matches_tensorflow() -> None:
    from earmark.experts.learned.musicnn import MTT_LABELS, PATCH, Musicnn, logmel_musicnn

    mel = logmel_musicnn(_signal())[:PATCH]
    tags, emb = Musicnn().patches(mel[None])
    assert tags.shape == (1, 50) and emb.shape == (1, 200) and len(MTT_LABELS) == 50
    assert np.abs(tags[0] - np.asarray(TF_TAGS)).max() < 2e-5
    assert np.abs(emb[0, :8] - np.asarray(TF_PENULTIMATE_8)).max() < 1e-4
    assert MTT_LABELS[int(np.argmax(tags[0]))] == "flute"  # two sine partials: a flute-like tone


def test_window_features_cover_every_window_of_short_and_long_clips() -> None:
    from earmark.experts.learned.musicnn import Musicnn, window_features
    from earmark.experts.learned.windows import window_bounds

    m = Musicnn()
    for n in (8000, 48000, 161000):  # 0.5 s (one short window), 3 s, 10 s + tail
        x = np.resize(_signal(), n)
        F = window_features(m, x, window_bounds(n))
        assert F.shape == (len(window_bounds(n)), 250) and np.isfinite(F).all()


# MSD_musicnn: the same TF graph and signal (musicnn's `models.define_model(x, is_training, "MSD_musicnn", 50)` +
# Saver.restore of the wheel's MSD_musicnn checkpoint, TensorFlow 2.15.1, 2026-11-26; training/MUSIC_TAGS.md)
TF_MSD_TAGS = [
    0.012246, 0.006815, 0.019308, 0.039428, 0.352505, 0.026189, 0.017141, 0.010445, 0.002327, 0.064483,
    0.022225, 0.002747, 0.071003, 0.001755, 0.001457, 0.003267, 0.007198, 0.01205, 0.103549, 0.000512,
    0.010778, 0.001781, 0.017198, 0.069763, 0.00073, 0.003065, 0.007221, 0.000353, 0.365382, 0.007411,
    0.24323, 0.002317, 0.008076, 0.002433, 0.00046, 0.001552, 0.000361, 0.004781, 0.001821, 0.00077,
    0.001077, 0.022161, 0.000399, 0.003992, 0.003235, 0.00067, 0.003183, 0.004125, 0.014993, 0.000488,
]  # fmt: skip
TF_MSD_PENULTIMATE_8 = [-0.17718, -0.12703, -0.28483, -0.27512, -0.35315, 1.18336, -0.25741, 0.73011]


def test_msd_checkpoint_matches_tensorflow() -> None:
    from earmark.experts.learned.musicnn import MSD_LABELS, PATCH, Musicnn, logmel_musicnn

    mel = logmel_musicnn(_signal())[:PATCH]
    tags, emb = Musicnn("MSD_musicnn").patches(mel[None])
    assert tags.shape == (1, 50) and len(MSD_LABELS) == 50 == len(set(MSD_LABELS))
    assert np.abs(tags[0] - np.asarray(TF_MSD_TAGS)).max() < 2e-5
    assert np.abs(emb[0, :8] - np.asarray(TF_MSD_PENULTIMATE_8)).max() < 1e-4
    assert MSD_LABELS[int(np.argmax(tags[0]))] == "ambient"  # a steady two-tone drone with clicks
