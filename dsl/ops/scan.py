"""Scans, selections and matrix masks: CumSum, CumProd, TopK, Trilu, EyeLike, Hardmax, BitCast.

Trilu, EyeLike and Hardmax fuse into kernels by their bodies (index comparisons against constant
aranges; Hardmax's against an ArgMax); the others run numpy references (explain() lists them
as numpy steps). Choices where the spec is silent, in one place:
- CumSum / CumProd accumulate in T, one element after the other (numpy's cumsum / cumprod in
  the input type): integers wrap, every float partial is rounded to T (float16 and bfloat16
  included, as ONNX's own reference does). exclusive starts from 0 (CumProd: 1).
- TopK orders NaN above every number (numpy's sort, torch.topk): first with largest=1, last
  with largest=0; -0 and +0 are equal (the lower index first). sorted=0 ("undefined order")
  returns the sorted order. K must be >= 1 ("a single positive value"; onnx's shape
  inference and onnxruntime also accept 0: the spec wins).
- Hardmax's "first maximum" is numpy's argmax: the first NaN counts as the maximum.
- Trilu zeroes strings to "" (the string type's zero); k is clamped to [-N, M] (beyond, the
  result no longer changes), so any int64 k works.
- BitCast reinterprets the little-endian bytes of each element; a byte other than 0 / 1
  cast to bool is an InputError (ONNX bools are 0 or 1; numpy would keep a bool that is
  neither True nor False).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from math import prod

import numpy as np

from .. import dtypes
from ..dtypes import all_types
from ..errors import DslError, DTypeError, InputError
from ..ir import TensorType, type_of_array
from ..kir import types as kir_types
from . import chunks
from .lowering import Row
from .math import BF16, F, SIGNED, UNSIGNED, domain_array
from .reduce import _softmax_rule
from .registry import REQUIRED, Attr, Call, Input, OpDef, Schema, register
from .shape import normalize_axes

_TIND = dtypes.types("int32", "int64")
_INT64_T = dtypes.types("int64")
_INT64 = dtypes.dtype("int64")


def _present(call: Call, index: int) -> bool:
    return index < len(call.types) and call.types[index] is not None


def _scalar_input(call: Call, index: int, what: str, value=None) -> int | None:
    """A 0-D integer input as an int (None when its value is unknown); ShapeError for any other rank."""
    shape = call.types[index].shape if value is None else np.shape(value)
    if shape is not None and len(shape) != 0:
        call.fail(f"{what} must be a 0-D tensor (a scalar), got shape {list(shape)}")
    value = call.values[index] if value is None else value
    return None if value is None else int(np.asarray(value).reshape(()))


def _relate(whole, join_whole: bool):
    """A chunk rule: every output keeps input 0's dims; the axes ``whole(call, rank)`` are read
    whole (and, with ``join_whole``, map one to one as well: same-shape outputs)."""
    def relate(dims, node, call, opdef) -> None:
        data = node.inputs[0]
        rank = len(data.type.shape)
        read_whole = whole(call, rank)
        for out in node.outputs:
            for axis in range(rank):
                if axis in read_whole:
                    dims.mark_whole(data, axis, node)
                    dims.mark_whole(out, axis, node)
                    if not join_whole:
                        continue
                if data.type.shape[axis] != 1:
                    dims.join(data, axis, out, axis)
    return relate


# ---- CumSum / CumProd ---------------------------------------------------------------------------
# axis: "A 0-D tensor. Must be in the range [-rank(x), rank(x)-1]" (int32 or int64); the output
# has x's type and shape. exclusive: "the j-th output element would be the sum of the first (j-1)
# elements"; reverse: the same in the opposite direction of the axis.
@dataclass(frozen=True)
class ScanPlan:
    """A cumulative op's normalized axis and its direction flags."""

    axis: int
    exclusive: bool
    reverse: bool


def _scan_plan(call: Call, rank: int, value=None) -> ScanPlan | None:
    axis = _scalar_input(call, 1, "axis", value)
    if rank == 0:
        call.fail("x is a scalar (rank 0); expected rank >= 1 (an axis to scan)")
    if axis is None:
        return None
    axis = normalize_axes(call, [axis], rank, negative=True, rank_name="x rank")[0]
    return ScanPlan(axis, bool(call.attrs["exclusive"]), bool(call.attrs["reverse"]))


def _scan_rule(call: Call) -> list:
    x = call.types[0]
    if x.shape is None:
        _scalar_input(call, 1, "axis")
        return [TensorType(x.dtype, None)]
    call.plan = _scan_plan(call, len(x.shape))
    return [TensorType(x.dtype, tuple(x.shape))]


def _scan_reference(accumulate, identity):
    def reference(call: Call, xs: list) -> list:
        x = xs[0]
        plan = call.plan or _scan_plan(call, x.ndim, xs[1])
        axis = plan.axis
        data = np.flip(x, axis) if plan.reverse else x
        with np.errstate(all="ignore"):
            out = accumulate(data, axis=axis, dtype=x.dtype)
        if plan.exclusive:
            head = np.full(out.shape[:axis] + (min(1, out.shape[axis]),) + out.shape[axis + 1:], identity, x.dtype)
            out = np.concatenate([head, np.take(out, np.arange(out.shape[axis] - 1), axis=axis)], axis=axis)
        return [np.ascontiguousarray(np.flip(out, axis) if plan.reverse else out)]
    return reference


_CUM_TYPES = {11: ("float", "double", "int32", "int64", "uint32", "uint64")}
_CUM_TYPES[14] = _CUM_TYPES[11] + ("float16", "bfloat16")


def _cum_schema(version: int) -> Schema:
    return Schema(version, (Input("x"), Input("axis", _TIND, needs_value=True)),
                  (Attr("exclusive", "int", 0), Attr("reverse", "int", 0)), dtypes.types(*_CUM_TYPES[version]))


_SCAN_CHUNK = chunks.ChunkRule("scan", _relate(lambda call, rank: {call.plan.axis}, join_whole=True))

def _scanned_axis(call: Call) -> tuple | None:
    """The any-axis scan schedule's axes (dsl/kir/scan_schedule.py): the planned axis."""
    return None if call.plan is None else (call.plan.axis,)


register(OpDef(
    "CumSum", tuple(_cum_schema(v) for v in (11, 14)), _scan_rule, reference=_scan_reference(np.cumsum, 0),
    chunk=_SCAN_CHUNK, kernel=Row("cumsum", fusable=lambda call: False, axes=_scanned_axis),
    doc="Running sums along `axis` (exclusive: without the element itself; reverse: from the end), in T."))

register(OpDef(
    "CumProd", (Schema(26, _cum_schema(14).inputs, _cum_schema(14).attrs, dtypes.types(*_CUM_TYPES[14])),), _scan_rule,
    reference=_scan_reference(np.cumprod, 1), chunk=_SCAN_CHUNK,
    kernel=Row("cumprod", fusable=lambda call: False, axes=_scanned_axis),
    doc="Running products along `axis` (exclusive: without the element itself; reverse: from the end), in T."))


# ---- TopK ---------------------------------------------------------------------------------------
# Values and Indices (int64) have X's shape with the axis dim replaced by k. Version 1: k is an
# attribute; 10: the input K, "A 1-D tensor containing a single positive value"; 11: `largest`
# and `sorted`; 24: bfloat16. axis defaults to -1 at every version (negative counts from the
# back). k > the axis' size is an error (no k elements to return). "Given two equivalent values,
# this operator uses the indices along the axis as a tiebreaker. That is, the element with the
# lower index will appear first."
@dataclass(frozen=True)
class TopKPlan:
    axis: int
    k: int
    largest: bool


def _topk_k(call: Call, value=None) -> int | None:
    if call.version < 10:
        return call.attrs["k"]
    shape = call.types[1].shape if value is None else np.shape(value)
    if shape is not None and (len(shape) != 1 or shape[0] not in (1, None)):
        call.fail(f"K must be a 1-D tensor holding one value, got shape {list(shape)}")
    value = call.values[1] if value is None else value
    return None if value is None else int(np.asarray(value).reshape(-1)[0])


def _topk_plan(call: Call, shape: tuple, value=None) -> tuple[int, int | None]:
    """(normalized axis, k or None when K is unknown); errors for a bad axis or k."""
    if not shape:
        call.fail("X is a scalar (rank 0); expected rank >= 1 (an axis to select along)")
    axis = normalize_axes(call, [call.attrs["axis"]], len(shape), negative=True, rank_name="X rank")[0]
    k = _topk_k(call, value)
    if k is not None and k < 1:
        call.fail(f"k = {k}; expected a positive number of elements (k >= 1)", InputError)
    if k is not None and isinstance(shape[axis], int) and k > shape[axis]:
        call.fail(f"k = {k} is larger than axis {axis}'s size {shape[axis]} (X shape {list(shape)})", InputError)
    return axis, k


def _topk_rule(call: Call) -> list:
    x = call.types[0]
    if x.shape is None:
        _topk_k(call)
        return [TensorType(x.dtype, None), TensorType(_INT64, None)]
    axis, k = _topk_plan(call, tuple(x.shape))
    if k is not None:
        call.plan = TopKPlan(axis, k, bool(call.attrs.get("largest", 1)))
    out = tuple(k if a == axis else d for a, d in enumerate(x.shape))
    return [TensorType(x.dtype, out), TensorType(_INT64, out)]


def topk_order(x: np.ndarray, axis: int, largest: bool) -> np.ndarray:
    """Indices that sort ``x`` along ``axis``, descending when ``largest``, equal values by
    increasing index, NaN as the largest value."""
    keys = domain_array(x)  # (float16 / bfloat16 widened exactly: numpy sorts them as float32)
    if not largest:
        return np.argsort(keys, axis=axis, kind="stable")
    # a stable ascending sort of the flipped axis, read backward: descending, equal values (and
    # NaNs, which numpy sorts last) by increasing original index
    flipped = np.argsort(np.flip(keys, axis), axis=axis, kind="stable")
    return keys.shape[axis] - 1 - np.flip(flipped, axis)


def _topk_reference(call: Call, xs: list) -> list:
    x = xs[0]
    plan = call.plan
    if plan is None:
        axis, k = _topk_plan(call, x.shape, xs[1] if call.version >= 10 else None)
        plan = TopKPlan(axis, k, bool(call.attrs.get("largest", 1)))
    order = topk_order(x, plan.axis, plan.largest)
    indices = np.ascontiguousarray(np.take(order, np.arange(plan.k), axis=plan.axis)).astype(np.int64)
    return [np.take_along_axis(x, indices, axis=plan.axis), indices]


_TOPK_TYPES = {1: F, 10: F, 11: F + SIGNED + UNSIGNED, 24: F + SIGNED + UNSIGNED + BF16}


def _topk_schema(version: int) -> Schema:
    axis = Attr("axis", "int", -1)
    if version < 10:
        return Schema(version, (Input("X"),), (axis, Attr("k", "int")), dtypes.types(*_TOPK_TYPES[version]))
    attrs = (axis,) + ((Attr("largest", "int", 1), Attr("sorted", "int", 1)) if version >= 11 else ())
    return Schema(version, (Input("X"), Input("K", _INT64_T, needs_value=True)), attrs,
                  dtypes.types(*_TOPK_TYPES[version]))


register(OpDef(
    "TopK", tuple(_topk_schema(v) for v in _TOPK_TYPES), _topk_rule, reference=_topk_reference,
    chunk=chunks.ChunkRule("topk", _relate(lambda call, rank: {call.plan.axis}, join_whole=False)),
    kernel=Row("topk", fusable=lambda call: False, axes=lambda call: None if call.plan is None else (call.plan.axis,)),
    doc="The k largest (or smallest) elements along `axis` and their int64 indices; ties: the lower index first."))


# ---- Trilu --------------------------------------------------------------------------------------
# Input of rank >= 2 ([*, N, M]); k: an optional 0-D int64 input, default 0. upper=1 keeps the
# elements "on and above the given diagonal (k)", i.e. j - i >= k; upper=0 those on and below
# it, j - i <= k. "All other elements in the matrix are set to zero."
# In the JIT, _trilu_body: Where(j >= i + k, x, 0) (upper; lower: <=), j and i + k constant
# aranges of shapes [1, M] and [N, 1] (_diagonal_aranges): one elementwise op fused with x's
# producers and consumers, the reference's bits but for NaN payloads of float16 and bfloat16
# (kernels hold them in float32: TYPES.md's quiet NaN, sign kept). The plan (the clamped k) is
# None, and the reference runs, while k or a matrix dim is unknown or for the types kernels do
# not compute (string, complex).
def _trilu_k(call: Call, value=None) -> int | None:
    if not _present(call, 1):
        return 0
    return _scalar_input(call, 1, "k", value)


def _trilu_rule(call: Call) -> list:
    x = call.types[0]
    k = _trilu_k(call)
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    if len(x.shape) < 2:
        call.fail(f"input has shape {list(x.shape)}; expected rank >= 2 (matrices [*, N, M])")
    rows, cols = x.shape[-2:]
    if k is not None and isinstance(rows, int) and isinstance(cols, int) and kir_types.supported(x.dtype):
        call.plan = min(max(k, -rows), cols)  # (beyond, the kept triangle no longer changes)
    return [TensorType(x.dtype, tuple(x.shape))]


def _trilu_reference(call: Call, xs: list) -> list:
    x = xs[0]
    k = call.plan if call.plan is not None else _trilu_k(call, xs[1] if len(xs) > 1 else None)
    rows, cols = x.shape[-2], x.shape[-1]
    k = min(max(k, -rows), cols)  # (beyond, the kept triangle no longer changes)
    diagonal = np.arange(cols)[None, :] - np.arange(rows)[:, None]  # j - i
    keep = diagonal >= k if call.attrs["upper"] else diagonal <= k
    zero = np.array("", dtype=object) if x.dtype.kind == "O" else np.zeros((), x.dtype)
    return [np.where(keep, x, zero).astype(x.dtype, copy=False)]


def _diagonal_aranges(b, rows: int, cols: int, k: int) -> tuple:
    """Constants j ([1, cols]) and i + k ([rows, 1]) for ``k`` clamped to [-rows, cols]: j - i vs
    k as one comparison. int32 while every value fits (trilu(x) * 2 on float32 [4096, 4096]:
    1.7x faster than int64, as fast as a precomputed [rows, cols] bool mask)."""
    index_type = np.int32 if rows + cols < 2 ** 31 else np.int64
    return (b.const(np.arange(cols, dtype=index_type).reshape(1, cols)),
            b.const((np.arange(rows, dtype=index_type) + index_type(k)).reshape(rows, 1)))


def _trilu_body(call: Call, b, xs: list) -> list:
    x = call.types[0]
    cols, shifted_rows = _diagonal_aranges(b, *x.shape[-2:], call.plan)
    keep = b.op("GreaterOrEqual" if call.attrs["upper"] else "LessOrEqual", cols, shifted_rows)
    return [b.op("Where", keep, xs[0], b.const(np.zeros((), x.dtype.np_dtype)))]


register(OpDef(
    "Trilu", (Schema(14, (Input("input"), Input("k", _INT64_T, optional=True, needs_value=True)),
                     (Attr("upper", "int", 1),), all_types(13)),),
    _trilu_rule, reference=_trilu_reference, expand=_trilu_body,
    chunk=chunks.ChunkRule("trilu", _relate(lambda call, rank: {rank - 2, rank - 1}, join_whole=True)),
    doc="The upper (j - i >= k) or lower (j - i <= k) triangle of the last two dims; the rest zero."))


# ---- EyeLike ------------------------------------------------------------------------------------
# "Only 2D tensors are supported, i.e. input T1 must be of rank 2"; the output has its shape and
# the type `dtype` (a TensorProto code in T2), or the input's when absent; "T2[i, i+k] = 1".
# In the JIT, _eye_body: Cast(Equal(j, i + k)) to T2 (bool: the Equal itself), from the
# aranges Trilu uses (k clamped as Trilu's: beyond the matrix no diagonal is left); the input's
# values are never read. The plan (T2) is None, and the reference runs, while a dim is unknown.
def _eye_dtype(call: Call):
    code = call.attrs["dtype"]
    if code is None:
        return call.types[0].dtype
    try:
        dt = dtypes.dtype(code)
    except DslError:
        call.fail(f"attribute 'dtype' = {code} is not an ONNX element type code", DTypeError)
    call.require_type(dt, dtypes.types(*_EYE_TYPES[call.version]), "attribute 'dtype' is")
    return dt


def _eye_rule(call: Call) -> list:
    dt = _eye_dtype(call)
    shape = call.types[0].shape
    if shape is not None and len(shape) != 2:
        call.fail(f"input has shape {list(shape)}; expected rank 2 (a matrix)")
    if shape is not None and all(isinstance(d, int) for d in shape):
        call.plan = dt
    return [TensorType(dt, (None, None) if shape is None else tuple(shape))]


def _eye_reference(call: Call, xs: list) -> list:
    rows, cols = xs[0].shape
    k = min(max(call.attrs["k"], -rows), cols)
    out = np.zeros((rows, cols), (call.plan or _eye_dtype(call)).np_dtype)
    diagonal = np.arange(max(0, -k), min(rows, cols - k))
    out[diagonal, diagonal + k] = 1
    return [out]


def _eye_body(call: Call, b, xs: list) -> list:
    rows, cols = call.types[0].shape
    k = min(max(call.attrs["k"], -rows), cols)
    ones = b.op("Equal", *_diagonal_aranges(b, rows, cols, k))
    return [ones if call.plan.kind == "bool" else b.op("Cast", ones, to=call.plan.onnx_code)]


_EYE_TYPES = {9: F + SIGNED + UNSIGNED + ("bool",)}
_EYE_TYPES[22] = _EYE_TYPES[9] + BF16

register(OpDef(
    "EyeLike", tuple(Schema(v, (Input("input"),), (Attr("dtype", "int", None), Attr("k", "int", 0)),
                            dtypes.types(*names)) for v, names in _EYE_TYPES.items()),
    _eye_rule, reference=_eye_reference, expand=_eye_body, chunk=chunks.WHOLE,
    doc="A matrix of the input's shape: ones on diagonal k (T2[i, i+k] = 1), zeros elsewhere; "
        "under dsl.dask one chunk (a chunk's diagonal depends on where it starts)."))


# ---- Hardmax ------------------------------------------------------------------------------------
# Versions 1 and 11 coerce the input to 2-D [a_0 * ... * a_{k-1}, a_k * ... * a_{n-1}]: the first
# maximum over every axis from `axis` on (default 1); 13: along `axis` alone (default -1). The
# axis rules are Softmax's (dsl/ops/reduce.py). Output: 1 at the first maximum, 0 elsewhere, in T.
# In the JIT, _hardmax_body: Cast(Equal(ArgMax(x, axis, keepdims=1), arange), T), the arange an
# int64 constant along the axis (1, 11: of the 2-D Reshape, reshaped back): an argmax reduction
# with x's producers fused, then one elementwise kernel, numpy's argmax bit for bit (the first
# maximum, NaN as the maximum, -0 == +0: dsl/kir/reduce_schedule.py _arg_body). Dims unknown
# before the run, an empty input or a type kernels do not compute keep the Hardmax (its reference).
def _hardmax_plan(call: Call, x: np.ndarray):
    """The rule's plan, or, for an input whose rank was unknown before the run (the 2-D Reshape
    of _hardmax_kept), the plan of ``x`` itself."""
    if call.plan is not None:
        return call.plan
    planned = replace(call, types=[type_of_array(x)], values=[x], plan=None)
    _softmax_rule(planned)
    return planned.plan


def _hardmax_reference(call: Call, xs: list) -> list:
    x = xs[0]
    plan = _hardmax_plan(call, x)
    out = np.zeros(x.shape, x.dtype)
    if x.size == 0:
        return [out]
    axis = plan.axes[0]
    rows = domain_array(x)
    rows = rows.reshape(x.shape[:axis] + (-1,)) if len(plan.axes) > 1 else rows
    first = np.expand_dims(np.argmax(rows, axis=axis), axis)
    positions = np.arange(rows.shape[axis]).reshape((-1,) + (1,) * (rows.ndim - axis - 1))
    return [(positions == first).astype(x.dtype).reshape(x.shape)]


def _one_hot_of_argmax(b, x, shape: tuple, axis: int, dt):
    """Cast(Equal(ArgMax(x, axis, keepdims=1), arange(shape[axis]) shaped to broadcast), dt)."""
    first = b.op("ArgMax", x, axis=axis, keepdims=1)
    positions = np.arange(shape[axis], dtype=np.int64).reshape((shape[axis],) + (1,) * (len(shape) - axis - 1))
    return b.op("Cast", b.op("Equal", first, b.const(positions)), to=dt.onnx_code)


def _hardmax_kept(call: Call, b, x):
    """The Hardmax itself, bound at the bodies' opset (version 13: one axis); the coerced form of
    1 and 11 as a Reshape to 2-D [prod(dims before axis), prod(the rest)], Hardmax along axis 1
    and a Reshape back, the dims read by Shape at run time when unknown before. (Not Flatten:
    its reference cannot plan dims known only at run time.)"""
    axes, shape = call.plan.axes, call.types[0].shape
    if len(axes) == 1:
        return b.op("Hardmax", x, axis=axes[0])
    if all(isinstance(d, int) for d in shape):
        rows = b.const(np.array([prod(shape[:axes[0]]), prod(shape[axes[0]:])], np.int64))
        target = b.const(np.array(shape, np.int64))
    else:
        sizes = [b.op("ReduceProd", b.op("Shape", x, **bounds), keepdims=1)
                 for bounds in ({"end": axes[0]}, {"start": axes[0]})]
        rows, target = b.op("Concat", *sizes, axis=0), b.op("Shape", x)
    flat = b.op("Reshape", x, rows, allowzero=1)
    return b.op("Reshape", b.op("Hardmax", flat, axis=1), target, allowzero=1)


def _hardmax_body(call: Call, b, xs: list) -> list:
    data, axes = call.types[0], call.plan.axes
    shape = tuple(data.shape)
    if not kir_types.supported(data.dtype) or not all(isinstance(d, int) and d > 0 for d in shape):
        return [_hardmax_kept(call, b, xs[0])]
    if len(axes) == 1:
        return [_one_hot_of_argmax(b, xs[0], shape, axes[0], data.dtype)]
    rows = (prod(shape[:axes[0]]), prod(shape[axes[0]:]))
    flat = b.op("Reshape", xs[0], b.const(np.array(rows, np.int64)))
    hot = _one_hot_of_argmax(b, flat, rows, 1, data.dtype)
    return [b.op("Reshape", hot, b.const(np.array(shape, np.int64)))]


register(OpDef(
    "Hardmax",
    tuple(Schema(v, (Input("input"),), (Attr("axis", "int", 1 if v < 13 else -1),), dtypes.types(*names))
          for v, names in ((1, F), (11, F), (13, F + BF16))),
    _softmax_rule, reference=_hardmax_reference, expand=_hardmax_body,
    chunk=chunks.ChunkRule("hardmax", _relate(lambda call, rank: set(call.plan.axes), join_whole=True)),
    doc="1 at the first maximum along `axis` (versions 1, 11: over all axes from `axis` on), 0 elsewhere."))


# ---- BitCast ------------------------------------------------------------------------------------
# "The target data type must have the same bit-width as the input data type. The output tensor has
# the same shape as the input tensor. All types except string are supported. Implementations must
# treat the underlying bytes as little endian." Sub-byte types are held unpacked (one element a
# byte, its code in the low bits), so 4-bit and 2-bit types reinterpret their codes.
_BITCAST_TYPES = frozenset(t for t in dtypes.ALL if t.kind != "string")


def _bitcast_target(call: Call):
    code = call.attrs["to"]
    try:
        dt = dtypes.dtype(code)
    except DslError:
        call.fail(f"attribute 'to' = {code} is not an ONNX element type code", DTypeError)
    call.require_type(dt, _BITCAST_TYPES, "attribute 'to' is")
    return dt


def _bitcast_rule(call: Call) -> list:
    source, target = call.types[0].dtype, _bitcast_target(call)
    if source.bits != target.bits:
        call.fail(f"input type {source} has {source.bits} bits, 'to' type {target} {target.bits}; "
                  f"BitCast needs the same bit width", DTypeError)
    call.plan = target
    return [TensorType(target, call.types[0].shape)]


def _bitcast_reference(call: Call, xs: list) -> list:
    x, target = xs[0], call.plan
    if x.dtype.byteorder == ">":  # (the bytes are read little endian: the values, in native order)
        x = x.astype(x.dtype.newbyteorder("="))
    if target.packed:
        codes = x.view(np.uint8) & np.uint8((1 << target.bits) - 1)
        return [codes.view(target.np_dtype)]
    if target.kind == "bool" and x.dtype != np.bool_:
        codes = x.view(np.uint8)
        if (codes > 1).any():
            where = tuple(int(i) for i in np.argwhere(codes > 1)[0])
            call.fail(f"byte {int(codes[where])} at {list(where)} is not a bool (ONNX bools are 0 or 1)", InputError)
    return [x.view(target.np_dtype)]


register(OpDef(
    "BitCast", (Schema(26, (Input("input"),), (Attr("to", "int", REQUIRED),), _BITCAST_TYPES),),
    _bitcast_rule, reference=_bitcast_reference,
    chunk=chunks.ChunkRule("bitcast", _relate(lambda call, rank: set(), join_whole=True)),
    doc="The same bits as another element type of the same width (`to`, a TensorProto code)."))

