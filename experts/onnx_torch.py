"""Run the ONNX graphs that ship in the `speechmos` wheel (DNSMOS, PLCMOS) with torch ops, on any device.

A GPU worker whose onnxruntime has no CUDA provider can still score speech quality in batches on the GPU:
`OnnxModule(path)` reads the graph with the `onnx` package and executes its nodes in order with torch ops.
Only the ops those graphs use are implemented, each after the ONNX operator spec of its opset (attributes,
defaults, broadcasting); any other op fails at build time with `NotImplementedError`. On the CPU in float32
the outputs match ONNX Runtime's to ~1e-5 (`tests/test_onnx_torch.py` holds the figures).

Where values live: float initializers and Constant outputs are registered buffers, so `.to(device)` and
`.half()` move them; at call time they follow the device and float dtype of the first floating input, so an
op computes in its input's dtype. Integer initializers are shapes, axes and slice bounds: they stay CPU
tensors (not buffers), and `Shape` answers on the CPU, so shape arithmetic never waits on a GPU.

DNSMOS sig_bak_ovr floors its power spectrum at 1e-12 before the log, which float16 rounds to 0: silence or
quiet audio then scores NaN in float16. Run it in bfloat16 or float32.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

Tensor = torch.Tensor


class _Target(NamedTuple):
    """Where a call computes: the device and float dtype of its first floating input (dtype None: no such input)."""

    device: torch.device
    dtype: torch.dtype | None


Op = Callable[[list[Tensor | None], dict[str, Any], _Target], list[Tensor]]


@dataclass(frozen=True)
class _Node:
    op: str
    inputs: tuple[str, ...]  # "" marks an omitted optional input
    outputs: tuple[str, ...]
    attrs: dict[str, Any]
    free: tuple[str, ...]  # values no later node or graph output reads: dropped after this node


def _ints(t: Tensor) -> list[int]:
    """A shape/axes/indices tensor as Python ints (these are CPU tensors, so no device sync)."""
    return [int(v) for v in t.reshape(-1).tolist()]


def _together(xs: Sequence[Tensor]) -> list[Tensor]:
    """Operands on one device: a CPU operand (a shape or integer constant) joins an accelerator one."""
    device = next((x.device for x in xs if x.device.type != "cpu"), None)
    return list(xs) if device is None else [x.to(device) for x in xs]


def _opt(xs: list[Tensor | None], i: int) -> Tensor | None:
    """Optional input i (absent when the node lists fewer inputs or names it "")."""
    return xs[i] if len(xs) > i else None


def _binary(fn: Callable[[Tensor, Tensor], Tensor]) -> Op:
    return lambda xs, a, w: [fn(*_together([xs[0], xs[1]]))]


def _unary(fn: Callable[[Tensor], Tensor]) -> Op:
    return lambda xs, a, w: [fn(xs[0])]


def _div(x: Tensor, y: Tensor) -> Tensor:
    """ONNX Div: true division for floats, truncation toward zero for integers (as C++ and ONNX Runtime do)."""
    return x / y if x.is_floating_point() else torch.div(x, y, rounding_mode="trunc")


def _pow(xs: list[Tensor | None], a: dict[str, Any], w: _Target) -> list[Tensor]:
    """ONNX Pow (opset 12): the exponent may have another type; the result has the base's type."""
    x, y = _together([xs[0], xs[1]])
    return [torch.pow(x, y).to(x.dtype)]


def _max(xs: list[Tensor | None], a: dict[str, Any], w: _Target) -> list[Tensor]:
    return [functools.reduce(torch.maximum, _together([x for x in xs if x is not None]))]


def _transpose(xs: list[Tensor | None], a: dict[str, Any], w: _Target) -> list[Tensor]:
    x = xs[0]
    return [x.permute(a.get("perm", list(range(x.dim() - 1, -1, -1))))]


def _reshape(xs: list[Tensor | None], a: dict[str, Any], w: _Target) -> list[Tensor]:
    """ONNX Reshape: 0 copies the input's dimension (unless allowzero), -1 is inferred."""
    x, dims = xs[0], _ints(xs[1])
    if not a.get("allowzero", 0):
        dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    return [x.reshape(dims)]


def _concat(xs: list[Tensor | None], a: dict[str, Any], w: _Target) -> list[Tensor]:
    return [torch.cat(_together([x for x in xs if x is not None]), dim=a["axis"])]


def _unsqueeze(xs: list[Tensor | None], a: dict[str, Any], w: _Target) -> list[Tensor]:
    """ONNX Unsqueeze: axes index the output (rank r + len(axes)); an attribute up to opset 12, an input from 13."""
    x = xs[0]
    axes = a["axes"] if "axes" in a else _ints(xs[1])
    rank = x.dim() + len(axes)
    for axis in sorted(axis % rank for axis in axes):
        x = x.unsqueeze(axis)
    return [x]


def _squeeze(xs: list[Tensor | None], a: dict[str, Any], w: _Target) -> list[Tensor]:
    """ONNX Squeeze: the given axes (each of size 1), or every axis of size 1 when none are given."""
    x, given = xs[0], _opt(xs, 1)
    axes = a.get("axes", _ints(given) if given is not None else None)
    if axes is None:
        return [x.squeeze()]
    axes = [axis % x.dim() for axis in axes]
    if any(x.shape[axis] != 1 for axis in axes):
        raise ValueError(f"Squeeze: axes {axes} of a tensor of shape {tuple(x.shape)} are not all of size 1")
    return [x.squeeze(tuple(axes))]


def _shape(xs: list[Tensor | None], a: dict[str, Any], w: _Target) -> list[Tensor]:
    """ONNX Shape, as a CPU int64 tensor (start/end of opset 15 clamp like a Python slice)."""
    return [torch.tensor(list(xs[0].shape)[a.get("start", 0) : a.get("end")], dtype=torch.int64)]


def _gather(xs: list[Tensor | None], a: dict[str, Any], w: _Target) -> list[Tensor]:
    """ONNX Gather: output shape data[:axis] + indices + data[axis+1:]; negative indices count from the end."""
    data, idx = xs[0], xs[1].to(xs[0].device)
    axis = a.get("axis", 0) % data.dim()
    idx = torch.where(idx < 0, idx + data.shape[axis], idx)
    out = data.index_select(axis, idx.reshape(-1))
    return [out.reshape(data.shape[:axis] + idx.shape + data.shape[axis + 1 :])]


def _constant_of_shape(xs: list[Tensor | None], a: dict[str, Any], w: _Target) -> list[Tensor]:
    """ONNX ConstantOfShape (default value float32 0). A float fill is made where the call computes, in its
    dtype; an integer fill stays on the CPU like other shape-side integers."""
    value = a.get("value", np.zeros(1, dtype=np.float32))
    fill = torch.from_numpy(np.array(value).reshape(1))
    if fill.is_floating_point():
        return [torch.full(_ints(xs[0]), fill.item(), dtype=w.dtype or fill.dtype, device=w.device)]
    return [torch.full(_ints(xs[0]), fill.item(), dtype=fill.dtype)]


def _slice(xs: list[Tensor | None], a: dict[str, Any], w: _Target) -> list[Tensor]:
    """ONNX Slice (opset >= 10: starts/ends/axes/steps are inputs; < 10: attributes, step 1).

    Negative starts/ends count from the end; then starts/ends clamp to [0, dim] for a positive step and to
    [0, dim-1] / [-1, dim-1] for a negative one, so INT64 max/min mean "to the end"."""
    x = xs[0]
    if len(xs) > 1:
        starts, ends = _ints(xs[1]), _ints(xs[2])
        given_axes, given_steps = _opt(xs, 3), _opt(xs, 4)
        axes = _ints(given_axes) if given_axes is not None else list(range(len(starts)))
        steps = _ints(given_steps) if given_steps is not None else [1] * len(starts)
    else:
        starts, ends = a["starts"], a["ends"]
        axes, steps = a.get("axes", list(range(len(starts)))), [1] * len(starts)
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis %= x.dim()
        dim = x.shape[axis]
        start, end = start + dim if start < 0 else start, end + dim if end < 0 else end
        if step > 0:
            index: list[slice] = [slice(None)] * x.dim()
            index[axis] = slice(min(max(start, 0), dim), min(max(end, 0), dim), step)
            x = x[tuple(index)]
        elif step < 0:
            keep = torch.arange(min(max(start, 0), dim - 1), min(max(end, -1), dim - 1), step, device=x.device)
            x = x.index_select(axis, keep)
        else:
            raise ValueError("Slice: a step of 0")
    return [x]


def _pads(
    size: Sequence[int], kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int], a: dict
) -> list[int]:
    """ONNX pads [begin_1.., end_1..] of a Conv/MaxPool, from `pads` or from `auto_pad` (SAME_UPPER puts the odd
    pad at the end, SAME_LOWER at the beginning; output size ceil(size / stride))."""
    mode, n = a.get("auto_pad", "NOTSET"), len(size)
    if mode == "NOTSET":
        return list(a.get("pads", [0] * 2 * n))
    if mode == "VALID":
        return [0] * 2 * n
    begin, end = [], []
    for d_in, k, s, d in zip(size, kernel, strides, dilations):
        total = max(0, (-(-d_in // s) - 1) * s + (k - 1) * d + 1 - d_in)
        small, big = total // 2, total - total // 2
        begin.append(small if mode == "SAME_UPPER" else big)
        end.append(big if mode == "SAME_UPPER" else small)
    return begin + end


def _torch_pad(begin: Sequence[int], end: Sequence[int]) -> list[int]:
    """ONNX begin/end pads in F.pad's order (last dimension first)."""
    return [p for i in reversed(range(len(begin))) for p in (begin[i], end[i])]


def _conv(xs: list[Tensor | None], a: dict[str, Any], w: _Target) -> list[Tensor]:
    """ONNX Conv (1-3 spatial dims): strides, dilations, group, pads or auto_pad; asymmetric pads pad first."""
    x, weight, bias = xs[0], xs[1], _opt(xs, 2)
    n, kernel = weight.dim() - 2, list(weight.shape[2:])
    strides, dilations = a.get("strides", [1] * n), a.get("dilations", [1] * n)
    pads = _pads(x.shape[2:], kernel, strides, dilations, a)
    begin, end = pads[:n], pads[n:]
    if begin != end:
        x, begin = F.pad(x, _torch_pad(begin, end)), [0] * n
    conv = (F.conv1d, F.conv2d, F.conv3d)[n - 1]
    return [conv(x, weight, bias, strides, begin, dilations, a.get("group", 1))]


def _max_pool(xs: list[Tensor | None], a: dict[str, Any], w: _Target) -> list[Tensor]:
    """ONNX MaxPool: kernel_shape, strides, dilations, pads or auto_pad, ceil_mode.

    The output size is ONNX Runtime's: floor (or ceil) of (in + pads - effective kernel) / stride + 1, and in
    ceil mode a last window that would start in the end padding is dropped. The input is padded with -inf to
    exactly the span those windows cover, then pooled without padding."""
    x, kernel = xs[0], a["kernel_shape"]
    n = len(kernel)
    strides, dilations = a.get("strides", [1] * n), a.get("dilations", [1] * n)
    pads = _pads(x.shape[2:], kernel, strides, dilations, a)
    begin, end, sizes = pads[:n], list(pads[n:]), []
    for i, (d_in, k, s, d) in enumerate(zip(x.shape[2:], kernel, strides, dilations)):
        span = d_in + begin[i] + end[i] - ((k - 1) * d + 1)
        out = (-(-span // s) if a.get("ceil_mode", 0) else span // s) + 1
        if a.get("ceil_mode", 0) and (out - 1) * s >= d_in + begin[i]:
            out -= 1
        end[i] += max(0, (out - 1) * s + (k - 1) * d + 1 - (d_in + begin[i] + end[i]))
        sizes.append(out)
    if any(begin) or any(end):
        x = F.pad(x, _torch_pad(begin, end), value=float("-inf"))
    pool = (F.max_pool1d, F.max_pool2d, F.max_pool3d)[n - 1]
    y = pool(x, kernel, strides, 0, dilations)
    return [y[(..., *(slice(0, s) for s in sizes))]]


def _gemm(xs: list[Tensor | None], a: dict[str, Any], w: _Target) -> list[Tensor]:
    """ONNX Gemm: alpha * A' B' + beta * C, A' / B' transposed by transA / transB, C optional (opset 11)."""
    A, B, C = xs[0], xs[1], _opt(xs, 2)
    A, B = (A.t() if a.get("transA", 0) else A), (B.t() if a.get("transB", 0) else B)
    alpha, beta = a.get("alpha", 1.0), a.get("beta", 1.0)
    if C is None or beta == 0:
        y = A @ B
        return [y if alpha == 1 else alpha * y]
    return [torch.addmm(C, A, B, beta=beta, alpha=alpha)]


def _reduce_max(xs: list[Tensor | None], a: dict[str, Any], w: _Target) -> list[Tensor]:
    """ONNX ReduceMax: over `axes` (an attribute to opset 17, an input from 18), all axes when none; keepdims 1."""
    x, given = xs[0], _opt(xs, 1)
    axes = a.get("axes", _ints(given) if given is not None else [])
    if not axes:
        if a.get("noop_with_empty_axes", 0):
            return [x]
        axes = list(range(x.dim()))
    return [torch.amax(x, dim=tuple(axes), keepdim=bool(a.get("keepdims", 1)))]


def _leaky_relu(xs: list[Tensor | None], a: dict[str, Any], w: _Target) -> list[Tensor]:
    return [F.leaky_relu(xs[0], a.get("alpha", 0.01))]


def _time_reversal(seq: int, lengths: list[int] | None, device: torch.device) -> Tensor | None:
    """Per-sequence time reversal as a [seq, batch] gather index (its own inverse); None: a plain flip does."""
    if lengths is None or all(n == seq for n in lengths):
        return None
    t = torch.arange(seq, device=device)[:, None]
    n = torch.tensor(lengths, device=device)[None, :]
    return torch.where(t < n, n - 1 - t, t)


def _reverse_time(x: Tensor, index: Tensor | None) -> Tensor:
    """x [seq, batch, ...] reversed along time within each sequence's length."""
    if index is None:
        return x.flip(0)
    return x.gather(0, index.reshape(*index.shape, *[1] * (x.dim() - 2)).expand_as(x))


def _gru(xs: list[Tensor | None], a: dict[str, Any], w: _Target) -> list[Tensor]:
    """ONNX GRU: gates in the order z, r, h; W [dirs, 3H, in], R [dirs, 3H, H], B [dirs, 6H] = Wb | Rb.

    z = σ(x Wzᵀ + h Rzᵀ + Wbz + Rbz), r likewise, then
    ĥ = tanh(x Whᵀ + (r ⊙ h) Rhᵀ + Rbh + Wbh), or with linear_before_reset tanh(x Whᵀ + r ⊙ (h Rhᵀ + Rbh) + Wbh),
    h' = (1 - z) ⊙ ĥ + z ⊙ h. Directions run side by side (a batched matmul per step); the reverse one reads
    each sequence from its own last step. Past sequence_lens, Y is 0 and the state is held.
    Returns Y [seq, dirs, batch, H] and Y_h [dirs, batch, H] (batch first with layout=1, opset 14)."""
    x, W, R = xs[0], xs[1], xs[2]
    bias, lens, h = _opt(xs, 3), _opt(xs, 4), _opt(xs, 5)
    direction = a.get("direction", "forward")
    dirs, hidden = (2 if direction == "bidirectional" else 1), R.shape[-1]
    activations = [s.lower() for s in a.get("activations", ["Sigmoid", "Tanh"] * dirs)]
    if activations != ["sigmoid", "tanh"] * dirs:
        raise NotImplementedError(f"GRU activations {a['activations']}: only the default Sigmoid, Tanh are implemented")
    if a.get("linear_before_reset", 0) and lens is None and a.get("clip") is None and direction != "reverse":
        return _gru_fused(x, W, R, bias, h, dirs, hidden, bool(a.get("layout", 0)))
    clip = a.get("clip")
    clamp = (lambda v: v.clamp(-clip, clip)) if clip is not None else (lambda v: v)
    batch_first = bool(a.get("layout", 0))
    if batch_first:
        x, h = x.transpose(0, 1), (h.transpose(0, 1) if h is not None else None)
    seq, batch = x.shape[0], x.shape[1]
    if bias is None:
        bias = torch.zeros(dirs, 6 * hidden, dtype=x.dtype, device=x.device)
    w_bias, r_bias = bias[:, : 3 * hidden], bias[:, 3 * hidden :]
    lengths = _ints(lens) if lens is not None else None
    reversal = _time_reversal(seq, lengths, x.device)
    reversed_dirs = [d for d in range(dirs) if direction == "reverse" or (direction == "bidirectional" and d == 1)]

    xw = torch.matmul(x, W.transpose(1, 2)[:, None]) + w_bias[:, None, None]  # [dirs, seq, batch, 3H]
    xw = torch.stack([_reverse_time(xw[d], reversal) if d in reversed_dirs else xw[d] for d in range(dirs)])
    h = torch.zeros(dirs, batch, hidden, dtype=x.dtype, device=x.device) if h is None else h
    rt = R.transpose(1, 2)  # [dirs, H, 3H]
    valid = None
    if lengths is not None:
        valid = (torch.arange(seq)[:, None] < torch.tensor(lengths)[None, :]).to(x.device)[:, None, :, None]
    ys = []
    for t in range(seq):
        gx = xw[:, t]
        if a.get("linear_before_reset", 0):
            gh = torch.baddbmm(r_bias[:, None], h, rt)
            z, r = torch.sigmoid(clamp(gx[..., : 2 * hidden] + gh[..., : 2 * hidden])).chunk(2, dim=-1)
            cand = torch.tanh(clamp(gx[..., 2 * hidden :] + r * gh[..., 2 * hidden :]))
        else:
            gh = torch.baddbmm(r_bias[:, None, : 2 * hidden], h, rt[..., : 2 * hidden])
            z, r = torch.sigmoid(clamp(gx[..., : 2 * hidden] + gh)).chunk(2, dim=-1)
            rh = torch.baddbmm(r_bias[:, None, 2 * hidden :], r * h, rt[..., 2 * hidden :])
            cand = torch.tanh(clamp(gx[..., 2 * hidden :] + rh))
        new = (1 - z) * cand + z * h
        if valid is not None:
            new, y = torch.where(valid[t], new, h), torch.where(valid[t], new, torch.zeros_like(new))
        else:
            y = new
        h = new
        ys.append(y)
    y = torch.stack(ys, dim=1)  # [dirs, seq, batch, H]
    y = torch.stack([_reverse_time(y[d], reversal) if d in reversed_dirs else y[d] for d in range(dirs)])
    if batch_first:
        return [y.permute(2, 1, 0, 3), h.transpose(0, 1)]
    return [y.transpose(0, 1), h]


def _gru_fused(
    x: Tensor, W: Tensor, R: Tensor, bias: Tensor | None, h: Tensor | None, dirs: int, hidden: int, batch_first: bool
) -> list[Tensor]:
    """An ONNX GRU with linear_before_reset, no sequence_lens and no clip is PyTorch's own GRU: one fused call
    (cuDNN on a GPU) instead of a few ops per time step. Gates reorder from ONNX's z, r, h to torch's r, z, n."""
    order = torch.cat([torch.arange(hidden, 2 * hidden), torch.arange(hidden), torch.arange(2 * hidden, 3 * hidden)])
    order = order.to(W.device)
    if bias is None:
        bias = torch.zeros(dirs, 6 * hidden, dtype=x.dtype, device=x.device)
    params = []
    for d in range(dirs):
        wb, rb = bias[d, : 3 * hidden], bias[d, 3 * hidden :]
        params += [W[d][order], R[d][order], wb[order], rb[order]]
    if batch_first:
        x, h = x.transpose(0, 1), (h.transpose(0, 1) if h is not None else None)
    seq, batch = x.shape[0], x.shape[1]
    h0 = torch.zeros(dirs, batch, hidden, dtype=x.dtype, device=x.device) if h is None else h.contiguous()
    y, h_n = torch.gru(x.contiguous(), h0, params, True, 1, 0.0, False, dirs == 2, False)
    y = y.reshape(seq, batch, dirs, hidden).permute(0, 2, 1, 3)  # [seq, dirs, batch, H]
    if batch_first:
        return [y.permute(2, 0, 1, 3), h_n.transpose(0, 1)]
    return [y, h_n]


_OPS: dict[str, Op] = {
    "Add": _binary(torch.add),
    "Mul": _binary(torch.mul),
    "Div": _binary(_div),
    "Pow": _pow,
    "Max": _max,
    "Sqrt": _unary(torch.sqrt),
    "Log": _unary(torch.log),
    "Relu": _unary(torch.relu),
    "Sigmoid": _unary(torch.sigmoid),
    "LeakyRelu": _leaky_relu,
    "MatMul": _binary(torch.matmul),
    "Gemm": _gemm,
    "Conv": _conv,
    "MaxPool": _max_pool,
    "ReduceMax": _reduce_max,
    "GRU": _gru,
    "Transpose": _transpose,
    "Reshape": _reshape,
    "Concat": _concat,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Slice": _slice,
    "Shape": _shape,
    "Gather": _gather,
    "ConstantOfShape": _constant_of_shape,
}
SUPPORTED_OPS = frozenset(_OPS) | {"Constant"}


def _attribute(attr: onnx.AttributeProto) -> Any:
    """An attribute as a Python value: strings decoded, tensors as numpy arrays."""
    value = onnx.helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode() for v in value]
    return value


def _constant_value(node: onnx.NodeProto, path: Path) -> np.ndarray:
    """The value of a Constant node (`value`, or the opset-12 `value_float(s)` / `value_int(s)` forms)."""
    attrs = {a.name: _attribute(a) for a in node.attribute}
    if "value" in attrs:
        return np.array(attrs["value"])
    for name, dtype in (
        ("value_float", np.float32),
        ("value_floats", np.float32),
        ("value_int", np.int64),
        ("value_ints", np.int64),
    ):
        if name in attrs:
            return np.array(attrs[name], dtype=dtype)
    raise NotImplementedError(f"{path}: Constant node {node.name!r} with attributes {sorted(attrs)} is not implemented")


class OnnxModule(torch.nn.Module):
    """An ONNX graph as a torch module: `forward` runs its nodes in order with torch ops.

    Inputs go by position (the graph's input order, `input_names`) or by name; the result is the graph's
    outputs as a tuple, or the one tensor when it has one output (`output_names`).
    """

    def __init__(self, path: str | Path) -> None:
        super().__init__()
        path = Path(path)
        model = onnx.load(str(path))
        graph = model.graph
        self.opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
        unknown = sorted(
            {n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}" for n in graph.node}
            - SUPPORTED_OPS
        )
        if unknown:
            raise NotImplementedError(
                f"{path}: ONNX op(s) {', '.join(unknown)} not implemented by earmark.experts.onnx_torch "
                f"(it implements {', '.join(sorted(SUPPORTED_OPS))})"
            )
        constants = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
        constants |= {n.output[0]: _constant_value(n, path) for n in graph.node if n.op_type == "Constant"}
        self._buffer_of: dict[str, str] = {}
        self._cpu_constants: dict[str, Tensor] = {}
        for i, (name, value) in enumerate(constants.items()):
            tensor = torch.from_numpy(np.array(value))
            if tensor.is_floating_point():
                self._buffer_of[name] = f"constant_{i}"
                self.register_buffer(f"constant_{i}", tensor)
            else:
                self._cpu_constants[name] = tensor
        self.input_names = tuple(i.name for i in graph.input if i.name not in constants)
        self.output_names = tuple(o.name for o in graph.output)

        nodes = [n for n in graph.node if n.op_type != "Constant"]
        last_use = {name: i for i, n in enumerate(nodes) for name in n.input if name}
        kept = set(self.output_names)
        self._nodes = [
            _Node(
                op=n.op_type,
                inputs=tuple(n.input),
                outputs=tuple(n.output),
                attrs={a.name: _attribute(a) for a in n.attribute},
                free=tuple(
                    (
                        {name for name in n.input if name and last_use[name] == i}
                        | {name for name in n.output if name and name not in last_use}
                    )
                    - kept
                ),
            )
            for i, n in enumerate(nodes)
        ]
        for node in self._nodes:
            if node.op == "MaxPool" and len(node.outputs) > 1 and node.outputs[1]:
                raise NotImplementedError(f"{path}: MaxPool's Indices output is not implemented")

    def _feeds(self, args: tuple[Tensor, ...], kwargs: dict[str, Tensor]) -> dict[str, Tensor]:
        """The call's inputs by graph input name; a missing or unknown name is an error that lists them."""
        if len(args) > len(self.input_names):
            raise TypeError(f"{len(args)} positional inputs for a graph with inputs {list(self.input_names)}")
        feeds = dict(zip(self.input_names, args)) | kwargs
        if set(feeds) != set(self.input_names):
            raise TypeError(f"inputs {sorted(feeds)} given; the graph takes {list(self.input_names)}")
        return feeds

    def forward(self, *args: Tensor, **kwargs: Tensor) -> Tensor | tuple[Tensor, ...]:
        feeds = self._feeds(args, kwargs)
        first_float = next((x for x in feeds.values() if x.is_floating_point()), None)
        reference = first_float if first_float is not None else next(iter(feeds.values()), None)
        target = _Target(
            device=reference.device if reference is not None else torch.device("cpu"),
            dtype=first_float.dtype if first_float is not None else None,
        )
        values: dict[str, Tensor] = dict(self._cpu_constants)
        for name, buffer in self._buffer_of.items():
            values[name] = getattr(self, buffer).to(device=target.device, dtype=target.dtype)
        values |= feeds
        for node in self._nodes:
            outputs = _OPS[node.op]([values[name] if name else None for name in node.inputs], node.attrs, target)
            values |= {name: y for name, y in zip(node.outputs, outputs) if name}
            for name in node.free:
                del values[name]
        results = tuple(values[name] for name in self.output_names)
        return results[0] if len(results) == 1 else results
