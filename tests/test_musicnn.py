"""The numpy musicnn port (experts/probe/musicnn.py) against the original TensorFlow graph.

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
    from earmark.experts.probe.musicnn import checkpoint_prefix, read_tf_checkpoint

    w = read_tf_checkpoint(checkpoint_prefix("MTT_musicnn"))
    assert w["conv2d/kernel"].shape == (7, 38, 1, 204) and w["conv2d_5/kernel"].shape == (7, 561, 1, 64)
    assert w["dense/kernel"].shape == (1506, 200) and w["dense_1/kernel"].shape == (200, 50)
    assert sum(k.startswith("batch_normalization") and k.endswith("/gamma") for k in w) == 11


def test_numpy_forward_pass_matches_tensorflow() -> None:
    from earmark.experts.probe.musicnn import MTT_LABELS, PATCH, Musicnn, logmel_musicnn

    mel = logmel_musicnn(_signal())[:PATCH]
    tags, emb = Musicnn().patches(mel[None])
    assert tags.shape == (1, 50) and emb.shape == (1, 200) and len(MTT_LABELS) == 50
    assert np.abs(tags[0] - np.asarray(TF_TAGS)).max() < 2e-5
    assert np.abs(emb[0, :8] - np.asarray(TF_PENULTIMATE_8)).max() < 1e-4
    assert MTT_LABELS[int(np.argmax(tags[0]))] == "flute"  # two sine partials: a flute-like tone


def test_window_features_cover_every_window_of_short_and_long_clips() -> None:
    from earmark.experts.probe.musicnn import Musicnn, window_features
    from earmark.experts.probe.windows import window_bounds

    m = Musicnn()
    for n in (8000, 48000, 161000):  # 0.5 s (one short window), 3 s, 10 s + tail
        x = np.resize(_signal(), n)
        F = window_features(m, x, window_bounds(n))
        assert F.shape == (len(window_bounds(n)), 250) and np.isfinite(F).all()
