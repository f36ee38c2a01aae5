"""Matmuls against quantized weights, computed from the weights' codes (kernels/qmatmul.py):

- ``com.microsoft::MatMulNBits``, the format quantized ONNX LLMs ship: Y = A @ dequantize(B)^T
  + bias, B's codes of 2, 4 or 8 bits packed low-first along K in blocks of ``block_size``
  (a power of two >= 16), one scale per (row of B, block) and a zero point (default 2^(bits-1)),
  uint8-packed like the codes or unpacked in A's type. ``g_idx`` (the block of each k, for
  act-order weights) is read as given. ``accuracy_level`` is accepted; the result is always
  computed in float32 (A, scales and zero points of float16 / bfloat16 widen exactly; Y is
  rounded once).
- ``DequantMatMul`` (domain dsl.internal): what dsl/passes/replace.py makes of a MatMul
  whose B is a DequantizeLinear, or a Transpose of one, so the JIT reads the codes instead of
  writing the dequantized weight out. Its reference is that DequantizeLinear, then MatMul.

Each names the kernels' view of its weight (``_nbits_weight``, ``_dq_weight``); where none
applies (g_idx, a layout the kernels do not read) the JIT runs the reference.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from kernels import qmatmul

from .. import dtypes
from ..convert import convert, to_wide
from ..dtypes import DType
from ..errors import DTypeError, InputError
from ..ir import TensorType
from ..tensor import Tensor
from . import chunks
from .lowering import QuantizedMatMul
from .registry import INTERNAL, Attr, Call, Input, OpDef, Schema, bind, get, register

_types = dtypes.types
_FLOATS = _types("float", "float16", "bfloat16")
_INT_CODES = {"int8": (8, True), "uint8": (8, False), "int4": (4, True), "uint4": (4, False),
              "int2": (2, True), "uint2": (2, False)}
_FLOAT_CODES = {"float8e4m3fn": 8, "float8e4m3fnuz": 8, "float8e5m2": 8, "float8e5m2fnuz": 8, "float4e2m1": 4}
_LANES_MIN_BLOCKS = 16  # blocks a row from which the lanes layout pays (its lanes are the blocks)


def code_kind(dt: DType) -> qmatmul.Codes | None:
    """How the kernels decode codes of element type ``dt`` (None: they do not); one object a
    type (a run-time weight asks every call)."""
    return _code_kind(dt.onnx_name)


@lru_cache(maxsize=None)
def _code_kind(name: str) -> qmatmul.Codes | None:
    dt = dtypes.dtype(name)
    if dt.onnx_name in _INT_CODES:
        bits, signed = _INT_CODES[dt.onnx_name]
        return qmatmul.Codes(bits, signed)
    if dt.onnx_name in _FLOAT_CODES:
        bits = _FLOAT_CODES[dt.onnx_name]
        values = to_wide(np.arange(1 << bits, dtype=np.uint8).view(dt.np_dtype), dt).astype(np.float32)
        return qmatmul.Codes(bits, table=values)
    return None


def _codes_of(value, dt: DType) -> np.ndarray:
    """The codes of an array or Tensor of element type ``dt``, one uint8 per element."""
    array = value.numpy() if isinstance(value, Tensor) else value
    raw = np.ascontiguousarray(array).view(np.uint8)
    return raw & np.uint8((1 << dt.bits) - 1) if dt.bits < 8 else raw


def unpack_last(raw: np.ndarray, bits: int) -> np.ndarray:
    """uint8 bytes, ``8 // bits`` codes a byte low bits first -> the codes along the last axis,
    uint8 [..., bytes * 8 // bits]."""
    per = 8 // bits
    codes = np.stack([(raw >> (p * bits)) & ((1 << bits) - 1) for p in range(per)], axis=-1)
    return codes.reshape(raw.shape[:-1] + (raw.shape[-1] * per,))


def _unpack_rows(raw: np.ndarray, bits: int, count: int) -> np.ndarray:
    """Bytes [N, row_bytes], codes low bits first -> the first ``count`` codes of each row as
    uint8 [N, count] (the inverse of _pack_rows)."""
    return unpack_last(raw, bits)[:, :count]


def _pack_rows(codes: np.ndarray, bits: int) -> np.ndarray:
    """Unpacked codes [N, K] -> [N, ceil(K * bits / 8)] bytes, low bits first (the plain layout)."""
    per = 8 // bits
    n, k = codes.shape
    padded = np.zeros((n, -(-k // per) * per), np.uint8)
    padded[:, :k] = codes
    out = np.zeros((n, padded.shape[1] // per), np.uint8)
    for p in range(per):
        out |= (padded[:, p::per] << (p * bits)).astype(np.uint8)
    return out


def build_weight(codes: np.ndarray, scale: np.ndarray, zero: np.ndarray, kind: qmatmul.Codes, block: int):
    """The kernels' Weight for unpacked codes [N, K] with float32 scale / zero [N, blocks]: the
    lanes layout from _LANES_MIN_BLOCKS blocks a row, else the plain one; None when neither
    holds the block size (blocks of a fraction of a byte)."""
    n, k = codes.shape
    blocks = scale.shape[1]
    per = 8 // kind.bits
    scale, zero = np.ascontiguousarray(scale, np.float32), np.ascontiguousarray(zero, np.float32)
    if blocks >= _LANES_MIN_BLOCKS and block % per == 0:
        return qmatmul.Weight(qmatmul.pack_lanes(codes, kind.bits, block), scale, zero, kind, k, block)
    plain = _pack_rows(codes, kind.bits)
    if blocks > 1:
        width = blocks * block // per if block % per == 0 else 0
        if not width:
            return None
        plain = np.pad(plain, ((0, 0), (0, width - plain.shape[1])))
    if not qmatmul.plain_supported(plain.shape[1], block, kind.bits, blocks):
        return None
    return qmatmul.Weight(plain, scale, zero, kind, k, block)


# ---- com.microsoft MatMulNBits --------------------------------------------------------------
@dataclass(frozen=True)
class NBitsPlan:
    k: int
    n: int
    bits: int
    block: int
    blocks: int   # blocks a row of B (n_blocks_per_col)
    blob: int     # bytes a block (blob_size)


def _nbits_rule(call: Call) -> list:
    a, b, scales = call.types[0], call.types[1], call.types[2]
    zp, g_idx, bias = (call.input_type(i) for i in (3, 4, 5))
    k, n, bits, block = (call.attrs[name] for name in ("K", "N", "bits", "block_size"))
    if bits not in (2, 4, 8):
        call.fail(f"bits {bits}; expected 2, 4 or 8", InputError)
    if block < 16 or block & (block - 1):
        call.fail(f"block_size {block}; expected a power of two >= 16", InputError)
    if k < 1 or n < 1:
        call.fail(f"K {k} and N {n} must be >= 1", InputError)
    if not 0 <= call.attrs["accuracy_level"] <= 4:
        call.fail(f"accuracy_level {call.attrs['accuracy_level']}; expected 0 to 4", InputError)
    if zp is not None and zp.dtype in _FLOATS and zp.dtype != a.dtype:  # (scales and bias: the schema's T1)
        call.fail(f"zero_points has type {zp.dtype}; expected uint8 (packed) or {a.dtype} (the type of A)",
                  DTypeError)
    blocks, blob = -(-k // block), block * bits // 8
    plan = NBitsPlan(k, n, bits, block, blocks, blob)
    if a.shape is not None:
        if len(a.shape) < 1 or a.shape[-1] not in (k, None) and not isinstance(a.shape[-1], str):
            call.fail(f"A shape {list(a.shape)}: its last dim must be K = {k}")
    b_size = n * blocks * blob // (1 if b.dtype.onnx_name == "uint8" else 4)  # (an int32 B: 4 bytes each)
    wants = (("B", b, b_size, f"{b_size} {b.dtype} elements: [N, n_blocks_per_col, blob_size] = "
              f"{[n, blocks, blob]} bytes"),
             ("scales", scales, n * blocks, f"[N * n_blocks_per_col] = [{n * blocks}]"),
             ("bias", bias, n, f"[N] = [{n}]"), ("g_idx", g_idx, k, f"[K] = [{k}]"))
    if zp is not None:
        packed = zp.dtype.onnx_name == "uint8"
        size = n * -(-blocks * bits // 8) if packed else n * blocks
        wants += (("zero_points", zp, size, f"{size} elements ({'uint8 packed' if packed else 'unpacked'})"),)
    for name, t, size, expected in wants:
        if t is None or t.shape is None or not all(isinstance(d, int) for d in t.shape):
            continue
        b_layout = name != "B" or t.dtype.onnx_name != "uint8" or list(t.shape) in ([n, blocks, blob], [n, blocks * blob])
        if int(np.prod(t.shape)) != size or not b_layout or name in ("bias", "g_idx") and len(t.shape) != 1:
            call.fail(f"{name} shape {list(t.shape)} does not match K={k}, N={n}, bits={bits}, "
                      f"block_size={block}; expected {expected}")
    call.plan = plan
    out = None if a.shape is None else tuple(a.shape[:-1]) + (n,)
    return [TensorType(a.dtype, out)]


def _nbits_codes(plan: NBitsPlan, b: np.ndarray) -> np.ndarray:
    """B's bytes as [N, n_blocks_per_col * blob_size] uint8 (an int32 B holds the same bytes)."""
    return np.ascontiguousarray(b).view(np.uint8).reshape(plan.n, plan.blocks * plan.blob)


def _nbits_params(call: Call, xs: list) -> tuple[np.ndarray, np.ndarray]:
    """(scale, zero point) as float32 [N, n_blocks_per_col]."""
    plan = call.plan
    scales = to_wide(xs[2], dtypes.of_array(xs[2])).astype(np.float32).reshape(plan.n, plan.blocks)
    zp = xs[3] if len(xs) > 3 else None
    if zp is None:
        return scales, np.full_like(scales, 1 << (plan.bits - 1))
    if zp.dtype == np.uint8:
        rows = zp.reshape(plan.n, -(-plan.blocks * plan.bits // 8))
        return scales, _unpack_rows(rows, plan.bits, plan.blocks).astype(np.float32)
    return scales, to_wide(zp, dtypes.of_array(zp)).astype(np.float32).reshape(plan.n, plan.blocks)


def _nbits_block_index(call: Call, xs: list) -> np.ndarray | None:
    """g_idx as int64 [K] (checked: each in [0, n_blocks_per_col)), or None when absent."""
    g_idx = xs[4] if len(xs) > 4 else None
    if g_idx is None:
        return None
    index = np.asarray(g_idx).astype(np.int64).reshape(-1)
    bad = np.flatnonzero((index < 0) | (index >= call.plan.blocks))
    if bad.size:
        call.fail(f"g_idx[{bad[0]}] = {index[bad[0]]} is outside [0, {call.plan.blocks}) "
                  f"(n_blocks_per_col)", InputError)
    return index


def _nbits_reference(call: Call, xs: list) -> list:
    """The contrib spec in numpy: unpack, (code - zero point) * scale per block, A @ W^T + bias,
    in float32, rounded once to A's type."""
    plan = call.plan
    codes = _unpack_rows(_nbits_codes(plan, xs[1]), plan.bits, plan.k).astype(np.float32)
    scale, zero = _nbits_params(call, xs)
    index = _nbits_block_index(call, xs)
    index = np.arange(plan.k) // plan.block if index is None else index
    a = to_wide(xs[0], dtypes.of_array(xs[0])).astype(np.float32)
    with np.errstate(all="ignore"):  # (NaN / Inf scales and activations propagate, as IEEE says)
        weights = (codes - zero[:, index]) * scale[:, index]
        y = np.matmul(a, weights.T)
        if len(xs) > 5 and xs[5] is not None:
            y = y + to_wide(xs[5], dtypes.of_array(xs[5])).astype(np.float32)
    return [convert(y.astype(np.float32), call.types[0].dtype)]


def _nbits_weight(call: Call, args: list, constant: bool):
    if len(args) > 4 and args[4] is not None:
        return None  # (g_idx: blocks in any order; the reference reads them)
    plan = call.plan
    values = [a.numpy() if isinstance(a, Tensor) else a for a in args]
    scale, zero = _nbits_params(call, values)
    kind = qmatmul.Codes(plan.bits)
    raw = _nbits_codes(plan, values[1])
    if constant and plan.blocks >= _LANES_MIN_BLOCKS:
        return qmatmul.Weight(qmatmul.pack_lanes(_unpack_rows(raw, plan.bits, plan.k), plan.bits, plan.block),
                              scale, zero, kind, plan.k, plan.block)
    return qmatmul.Weight(raw, np.ascontiguousarray(scale), np.ascontiguousarray(zero), kind, plan.k, plan.block)


def _float32_activation(call: Call, args: list) -> np.ndarray:
    a = args[0].numpy() if isinstance(args[0], Tensor) else args[0]
    return to_wide(a, dtypes.of_array(a)).astype(np.float32, copy=False)


def _nbits_bias(call: Call, args: list):
    bias = args[5] if len(args) > 5 else None
    return None if bias is None else to_wide(bias, dtypes.of_array(bias)).astype(np.float32)


register(OpDef(
    "MatMulNBits",
    (Schema(1, (Input("A"), Input("B", _types("uint8", "int32")), Input("scales"),
                Input("zero_points", _types("uint8", "float", "float16", "bfloat16"), optional=True),
                Input("g_idx", _types("int32"), optional=True), Input("bias", optional=True)),
            (Attr("K", "int"), Attr("N", "int"), Attr("bits", "int", 4), Attr("block_size", "int"),
             Attr("accuracy_level", "int", 0)), _FLOATS),),
    _nbits_rule, reference=_nbits_reference, domain="com.microsoft", chunk=chunks.ROWS_OF_FIRST,
    kernel=QuantizedMatMul(_nbits_weight, _float32_activation, _nbits_bias),
    doc="com.microsoft MatMulNBits: A @ dequantize(B)^T + bias, B blockwise 2/4/8-bit along K."))


# ---- DequantMatMul (internal): MatMul(A, [Transpose](DequantizeLinear(W))) --------------------
@dataclass(frozen=True)
class DequantPlan:
    dequantize: Call   # the DequantizeLinear's own planned call
    transposed: bool   # W is [N, K] (the MatMul read its transpose), else [K, N]
    k: int
    n: int


def _dq_rule(call: Call) -> list:
    a, w, scale = call.types[:3]
    zp = call.input_type(3)
    transposed = bool(call.attrs["transposed"])
    attrs = {"axis": call.attrs["axis"], "block_size": call.attrs["block_size"]}
    _, dq_call, (dq_out,) = bind("DequantizeLinear", call.attrs["opset"], [w, scale] + ([zp] if zp else []),
                                 call.values[1:4], attrs, call.node)
    n, k = w.shape if transposed else w.shape[::-1]
    if a.shape[-1] != k or dq_out.dtype != a.dtype:
        call.fail(f"A {a} does not multiply the dequantized weight {dq_out} (K = {k})")
    call.plan = DequantPlan(dq_call, transposed, k, n)
    return [TensorType(a.dtype, tuple(a.shape[:-1]) + (n,))]


def _dq_reference(call: Call, xs: list) -> list:
    """DequantizeLinear, then MatMul (what the node replaced)."""
    plan = call.plan
    (weights,) = get("DequantizeLinear").reference(plan.dequantize, [x for x in xs[1:4] if x is not None])
    with np.errstate(all="ignore"):
        return [np.matmul(xs[0], weights.T if plan.transposed else weights).astype(np.float32)]


def _dq_params(plan: DequantPlan, values: list) -> tuple[np.ndarray, np.ndarray, int]:
    """(scale, zero point) as float32 [N, blocks] along K, and the block size (1 for a scale
    per code: per k, or blocks along N)."""
    granularity = plan.dequantize.plan.granularity
    k_axis = 1 if plan.transposed else 0
    scale = to_wide(values[2], dtypes.of_array(values[2])).astype(np.float32)
    zp = values[3] if len(values) > 3 else None
    zero = np.zeros_like(scale) if zp is None else to_wide(zp, dtypes.of_array(zp)).astype(np.float32)
    rows = (plan.n, 1)
    if granularity.kind == "tensor":
        return np.full(rows, scale.reshape(-1)[0], np.float32), np.full(rows, zero.reshape(-1)[0], np.float32), plan.k
    if granularity.kind == "axis" and granularity.axis != k_axis:
        return scale.reshape(rows), zero.reshape(rows), plan.k
    if granularity.kind == "block" and granularity.axis != k_axis:
        # blocks along N: a scale per (block of rows, k), i.e. one per code of a row
        index = np.arange(plan.n) // granularity.block
        along = (lambda p: p[index, :]) if plan.transposed else (lambda p: p[:, index].T)
        return np.ascontiguousarray(along(scale)), np.ascontiguousarray(along(zero)), 1
    block = 1 if granularity.kind == "axis" else granularity.block
    if granularity.kind == "axis":
        scale, zero = np.broadcast_to(scale, (plan.n, plan.k)), np.broadcast_to(zero, (plan.n, plan.k))
    elif not plan.transposed:
        scale, zero = scale.T, zero.T
    return np.ascontiguousarray(scale), np.ascontiguousarray(zero), block


@dataclass(frozen=True)
class Replacement:
    """What replaces a node (OpDef.replace): a node of ``op`` (domain dsl.internal) with
    ``inputs`` and ``attrs``; ``sources``, the nodes that fed it only through the replaced one
    (dropped when nothing else reads them)."""

    op: str
    inputs: list
    attrs: dict
    sources: list


def matmul_of_dequantized(node, calls: dict, constants: dict, opset: int) -> Replacement | None:
    """MatMul(A, DequantizeLinear(W)) or MatMul(A, Transpose(DequantizeLinear(W), [1, 0])) with
    float32 A -> a DequantMatMul reading W's codes, where the kernels read its layout
    (``dequant_matmul_viable``); else None."""
    a, b = node.inputs
    source, chain, transposed = b.producer, [], False
    if source is not None and source.op_type == "Transpose" and not source.domain:
        if list(source.attrs.get("perm") or [1, 0]) != [1, 0] or len(source.inputs[0].type.shape or ()) != 2:
            return None
        chain, transposed, source = [source], True, source.inputs[0].producer
    if source is None or source.op_type != "DequantizeLinear" or source.domain or calls[id(source)].plan is None:
        return None
    if a.type.dtype.onnx_name != "float" or b.type.shape is None or len(b.type.shape) != 2:
        return None
    dq = calls[id(source)]
    constant = all(v is None or v.name in constants for v in source.inputs)
    if not dequant_matmul_viable(dq, transposed, constant):
        return None
    attrs = {"axis": dq.attrs.get("axis", 1), "block_size": dq.attrs.get("block_size", 0),
             "transposed": int(transposed), "opset": opset}
    return Replacement("DequantMatMul", [a] + list(source.inputs), attrs, chain + [source])


def dequant_matmul_viable(dq: Call, transposed: bool, constant: bool) -> bool:
    """Whether the kernels read the weight of DequantizeLinear ``dq`` (its planned call) as a
    DequantMatMul: codes they decode, a float32 output, scales per tensor, per row of the
    weight or in blocks of whole bytes along K (a scale per code: 8-bit codes only); at run
    time (not ``constant``) only W [N, K] with rows of whole bytes in blocks of a power of two
    bytes (read in place, or packed first when it arrives unpacked or strided); no empty W."""
    w = dq.types[0]
    kind = code_kind(w.dtype)
    if kind is None or dq.plan.out.onnx_name != "float" or w.shape is None or len(w.shape) != 2 or 0 in w.shape:
        return False
    granularity = dq.plan.granularity
    k_axis = 1 if transposed else 0
    k = w.shape[k_axis]
    if granularity.kind == "tensor" or granularity.kind == "axis" and granularity.axis != k_axis:
        block = k                      # one scale a row of W
    elif granularity.kind == "block" and granularity.axis == k_axis:
        block = granularity.block      # blocks along K
    else:
        block = 1                      # a scale per k, or blocks along N: a scale per code of a row
    if block < k and block * kind.bits % 8:
        return False
    if constant:
        return True
    blocks = -(-k // block)
    row_bytes = k * kind.bits // 8
    return transposed and k * kind.bits % 8 == 0 and qmatmul.plain_supported(row_bytes, block, kind.bits, blocks)


def _dq_weight(call: Call, args: list, constant: bool):
    plan = call.plan
    w = args[1]
    dt = plan.dequantize.types[0].dtype
    kind = code_kind(dt)
    values = [a.numpy() if isinstance(a, Tensor) and i > 1 else a for i, a in enumerate(args)]
    scale, zero, block = _dq_params(plan, values)
    if constant:
        codes = _codes_of(w, dt)
        return build_weight(codes if plan.transposed else np.ascontiguousarray(codes.T), scale, zero, kind, block)
    raw = _plain_codes(w, dt, plan)
    if raw is None:  # (unpacked sub-byte codes, a strided or unaligned view: packed rows first)
        raw = _plain_codes(Tensor.from_numpy(np.ascontiguousarray(w.numpy() if isinstance(w, Tensor) else w)), dt, plan)
    return qmatmul.Weight(raw, scale, zero, kind, plan.k, block)


def _plain_codes(w, dt: DType, plan: DequantPlan) -> np.ndarray | None:
    """A run-time W [N, K] as [N, row_bytes] bytes without a copy, when its storage is already
    the plain layout (a C-contiguous packed Tensor with rows on byte boundaries, or a
    C-contiguous 8-bit array); else None."""
    if isinstance(w, Tensor):
        if plan.k * dt.bits % 8 or not w.view.is_contiguous or w.view.offset * dt.bits % 8:
            return None
        start = w.view.offset * dt.bits // 8
        return w.buffer.view(np.uint8)[start:start + plan.n * plan.k * dt.bits // 8].reshape(plan.n, -1)
    if dt.bits == 8 and w.flags.c_contiguous:
        return w.view(np.uint8)
    return None


register(OpDef(
    "DequantMatMul",
    (Schema(1, (Input("A", _types("float")), Input("W", dtypes.all_types(28)),
                Input("scale", dtypes.all_types(28)),
                Input("zero_point", dtypes.all_types(28), optional=True)),
            (Attr("axis", "int", 1), Attr("block_size", "int", 0), Attr("transposed", "int", 0),
             Attr("opset", "int")), _types("float")),),
    _dq_rule, reference=_dq_reference, domain=INTERNAL,
    kernel=QuantizedMatMul(_dq_weight, _float32_activation),
    doc="MatMul(A, DequantizeLinear(W)) or MatMul(A, Transpose(DequantizeLinear(W))), from W's codes."))
