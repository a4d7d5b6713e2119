"""earmark.experts.onnx_torch against ONNX Runtime (CPU, float32): the speechmos DNSMOS/PLCMOS graphs on batches,
single-op graphs for the attribute paths those graphs leave unexercised, and the refusal of unknown ops."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import speechmos
import torch
from onnx import TensorProto, helper, numpy_helper

from earmark.experts.onnx_torch import OnnxModule

MODELS = Path(speechmos.__file__).parent
INT64_MAX, INT64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min


def _onnxruntime(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _torch(module: OnnxModule, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    with torch.inference_mode():
        out = module(**{name: torch.from_numpy(x) for name, x in feeds.items()})
    return [y.numpy() for y in (out if isinstance(out, tuple) else (out,))]


def _max_diff(path: Path, feeds: dict[str, np.ndarray]) -> float:
    """Largest |Δ| over the outputs of one graph, run by both runtimes on the same inputs."""
    expected, got = _onnxruntime(path, feeds), _torch(OnnxModule(path), feeds)
    assert [e.shape for e in expected] == [g.shape for g in got]
    return max(float(np.abs(e - g).max()) for e, g in zip(expected, got))


def test_dnsmos_p835_matches_onnxruntime() -> None:
    """sig_bak_ovr (STFT as 1x1 convs, log power, CNN) on 4 noise windows: measured max |Δ| 7.2e-7."""
    audio = 0.1 * np.random.default_rng(0).standard_normal((4, 144160))
    assert _max_diff(MODELS / "dnsmos_models" / "sig_bak_ovr.onnx", {"input_1": audio.astype(np.float32)}) < 1e-5


def test_dnsmos_p808_matches_onnxruntime() -> None:
    """model_v8 on 4 log-mel-like [900, 120] inputs in (-1, 1): measured max |Δ| 2.4e-7."""
    mel = np.random.default_rng(1).uniform(-1, 1, (4, 900, 120)).astype(np.float32)
    assert _max_diff(MODELS / "dnsmos_models" / "model_v8.onnx", {"input_1": mel}) < 1e-5


def test_plcmos_batch_matches_onnxruntime_per_item() -> None:
    """plcmos_v2 (convs, two bidirectional GRUs, rater-embedding MLP) on a batch of 3: the batch through
    OnnxModule equals ONNX Runtime run one item at a time, as speechmos runs it (measured max |Δ| 4.8e-7).
    The graph declares a scalar output; a batch of N gives shape [N] in both runtimes."""
    rng = np.random.default_rng(2)
    feeds = {
        "degraded_audio": rng.normal(-5, 3, (3, 1, 300, 257)).astype(np.float32),
        "rater_embed": rng.standard_normal((3, 64)).astype(np.float32),
    }
    path = MODELS / "plcmos_models" / "plcmos_v2.onnx"
    per_item = np.stack([_onnxruntime(path, {k: v[i : i + 1] for k, v in feeds.items()})[0] for i in range(3)])
    (batched,) = _torch(OnnxModule(path), feeds)
    assert batched.shape == (3,)
    assert float(np.abs(batched - per_item).max()) < 1e-5


def test_computes_in_the_input_dtype() -> None:
    """bfloat16 input to a float32-built module gives bfloat16 out, near float32 (model_v8: measured |Δ| 5.4e-3)."""
    path = MODELS / "dnsmos_models" / "model_v8.onnx"
    mel = np.random.default_rng(1).uniform(-1, 1, (2, 900, 120)).astype(np.float32)
    with torch.inference_mode():
        out = OnnxModule(path)(torch.from_numpy(mel).bfloat16())
    assert out.dtype == torch.bfloat16
    assert float(np.abs(out.float().numpy() - _onnxruntime(path, {"input_1": mel})[0]).max()) < 0.05


@pytest.mark.parametrize(
    "graph, shapes",
    [
        ("dnsmos_models/sig_bak_ovr.onnx", {"input_1": (3, 144160)}),
        ("dnsmos_models/model_v8.onnx", {"input_1": (3, 900, 120)}),
        ("plcmos_models/plcmos_v2.onnx", {"degraded_audio": (3, 1, 300, 257), "rater_embed": (3, 64)}),
    ],
)
def test_runs_off_the_cpu(graph: str, shapes: dict[str, tuple[int, ...]]) -> None:
    """Each graph runs with its inputs on the meta device in float16: meta, like CUDA, refuses CPU operands and
    reading values, so this shows shape arithmetic stays on the CPU and nothing else does (no GPU needed)."""
    module = OnnxModule(MODELS / graph)
    out = module(**{name: torch.empty(shape, device="meta", dtype=torch.float16) for name, shape in shapes.items()})
    assert (out.device.type, out.dtype, out.shape[0]) == ("meta", torch.float16, 3)


def _single_op_model(
    tmp_path: Path,
    nodes: list[onnx.NodeProto],
    feeds: dict[str, np.ndarray],
    inits: dict,
    outputs: list[str],
    opset: int,
) -> Path:
    graph = helper.make_graph(
        nodes,
        "case",
        [
            helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
            for name, x in feeds.items()
        ],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in outputs],
        [numpy_helper.from_array(np.asarray(v), name) for name, v in inits.items()],
    )
    path = tmp_path / "case.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8), path)
    return path


def _gru_case(seed: int, direction: str, **attrs: object) -> tuple:
    """A GRU node with random weights, bias, per-sequence lengths and an initial state (batch 3, seq 5)."""
    rng = np.random.default_rng(seed)
    dirs, hidden, size = (2 if direction == "bidirectional" else 1), 4, 3
    inits = {
        "W": rng.standard_normal((dirs, 3 * hidden, size)).astype(np.float32),
        "R": rng.standard_normal((dirs, 3 * hidden, hidden)).astype(np.float32),
        "B": rng.standard_normal((dirs, 6 * hidden)).astype(np.float32),
        "lens": np.array([5, 2, 4], dtype=np.int32),
    }
    feeds = {
        "x": rng.standard_normal((5, 3, size)).astype(np.float32),
        "h0": rng.standard_normal((dirs, 3, hidden)).astype(np.float32),
    }
    node = helper.make_node(
        "GRU", ["x", "W", "R", "B", "lens", "h0"], ["Y", "Y_h"], hidden_size=hidden, direction=direction, **attrs
    )
    return [node], feeds, inits, ["Y", "Y_h"], 11


def _pool_case(**attrs: object) -> tuple:
    x = np.random.default_rng(3).standard_normal((2, 3, 7, 8)).astype(np.float32)
    return [helper.make_node("MaxPool", ["x"], ["y"], **attrs)], {"x": x}, {}, ["y"], 12


def _conv_case(**attrs: object) -> tuple:
    rng = np.random.default_rng(4)
    feeds = {"x": rng.standard_normal((2, 4, 9, 10)).astype(np.float32)}
    inits = {"w": rng.standard_normal((6, 2, 3, 2)).astype(np.float32), "b": rng.standard_normal(6).astype(np.float32)}
    return [helper.make_node("Conv", ["x", "w", "b"], ["y"], group=2, **attrs)], feeds, inits, ["y"], 12


def _slice_case() -> tuple:
    x = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)
    bounds = {
        "starts": np.array([INT64_MAX, -2, 1]),
        "ends": np.array([INT64_MIN, 0, INT64_MAX]),
        "axes": np.array([0, -2, 2]),
        "steps": np.array([-1, -1, 2]),
    }
    node = helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])
    return [node], {"x": x}, bounds, ["y"], 12


def _gemm_case() -> tuple:
    rng = np.random.default_rng(5)
    inits = {"B": rng.standard_normal((6, 4)).astype(np.float32), "C": rng.standard_normal((3, 1)).astype(np.float32)}
    node = helper.make_node("Gemm", ["A", "B", "C"], ["y"], transA=1, transB=1, alpha=0.5, beta=2.0)
    return [node], {"A": rng.standard_normal((4, 3)).astype(np.float32)}, inits, ["y"], 11


def _shape_case() -> tuple:
    """Reshape with 0 and -1 from a Shape/Gather/Concat computation, then ReduceMax with keepdims and Squeeze."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "last"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n"], ["n1"], axes=[-1]),
        helper.make_node("Concat", ["zero", "n1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("ReduceMax", ["r"], ["m"], axes=[-1]),
        helper.make_node("Squeeze", ["m"], ["y"]),
    ]
    inits = {"last": np.array(-1), "zero": np.array([0]), "minus1": np.array([-1])}
    x = np.random.default_rng(6).standard_normal((3, 2, 5)).astype(np.float32)
    return nodes, {"x": x}, inits, ["y"], 11


CASES = {
    "gru_forward": _gru_case(7, "forward"),
    "gru_reverse_linear_before_reset": _gru_case(8, "reverse", linear_before_reset=1),
    "gru_bidirectional_clip": _gru_case(9, "bidirectional", clip=0.5),
    "maxpool_ceil_asymmetric_pads": _pool_case(kernel_shape=[3, 2], strides=[2, 3], pads=[0, 0, 2, 1], ceil_mode=1),
    "maxpool_same_lower_strided": _pool_case(kernel_shape=[2, 3], strides=[2, 3], auto_pad="SAME_LOWER"),
    "conv_same_upper_strided": _conv_case(strides=[2, 3], auto_pad="SAME_UPPER"),
    "conv_asymmetric_pads_dilated": _conv_case(pads=[2, 0, 1, 3], dilations=[2, 1]),
    "slice_negative_steps": _slice_case(),
    "gemm_trans_alpha_beta": _gemm_case(),
    "shape_reshape_reduce_squeeze": _shape_case(),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_op_attributes_match_onnxruntime(tmp_path: Path, case: str) -> None:
    """One op graph per attribute path (GRU directions, sequence_lens, initial_h, clip; pool/conv padding modes;
    Slice clamping; Gemm flags; shape arithmetic) equals ONNX Runtime's output to float32 rounding."""
    nodes, feeds, inits, outputs, opset = CASES[case]
    assert _max_diff(_single_op_model(tmp_path, nodes, feeds, inits, outputs, opset), feeds) < 1e-5


def test_unknown_op_is_refused_by_name(tmp_path: Path) -> None:
    """A graph with an op outside the implemented set fails at build time, naming the op and the file."""
    x = np.zeros((2, 3), dtype=np.float32)
    path = _single_op_model(tmp_path, [helper.make_node("Tanh", ["x"], ["y"])], {"x": x}, {}, ["y"], 12)
    with pytest.raises(NotImplementedError, match=r"case\.onnx.*Tanh"):
        OnnxModule(path)


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("with_h", [False, True])
def test_gru_with_linear_before_reset_runs_as_one_fused_call(direction, layout, with_h) -> None:
    """PLCMOS' GRUs (linear_before_reset, no lengths, no clip) go through torch's fused GRU: the same outputs as
    the step-by-step ONNX semantics (a clip that never binds forces that path), with a handful of ops instead
    of several per time step (6,000-odd kernel launches per PLCMOS call on a GPU before)."""
    from earmark.experts.onnx_torch import _gru, _Target

    g = torch.Generator().manual_seed(0)
    dirs, hidden, seq, batch, width = (2 if direction == "bidirectional" else 1), 5, 7, 3, 4
    x = torch.randn((batch, seq, width) if layout else (seq, batch, width), generator=g)
    W, R = torch.randn(dirs, 3 * hidden, width, generator=g), torch.randn(dirs, 3 * hidden, hidden, generator=g)
    B = torch.randn(dirs, 6 * hidden, generator=g)
    h = torch.randn((batch, dirs, hidden) if layout else (dirs, batch, hidden), generator=g) if with_h else None
    attrs = {"direction": direction, "hidden_size": hidden, "linear_before_reset": 1, "layout": layout}
    target = _Target(torch.device("cpu"), torch.float32)
    fused = _gru([x, W, R, B, None, h], attrs, target)
    stepped = _gru([x, W, R, B, None, h], {**attrs, "clip": 1e30}, target)
    for a, b in zip(fused, stepped, strict=True):
        assert a.shape == b.shape and torch.allclose(a, b, atol=1e-6), (a - b).abs().max()
