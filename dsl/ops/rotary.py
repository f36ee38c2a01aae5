"""RotaryEmbedding (RoPE, version 23) as a composite of Gather, Mul, Add and Where, so the JIT
runs it as one elementwise kernel over X whose loads go through constant index tables.

The spec's algorithm splits the rotated part of each head into halves x1, x2 (or the even / odd
elements when ``interleaved``) and writes ``real = cos * x1 - sin * x2`` and
``imag = sin * x1 + cos * x2`` back in place. The body computes the same numbers element by
element of X's last axis: ``y[j] = x[j] * cos[c(j)] + x[p(j)] * sin[c(j)] * sign(j)``, where
``p`` is the element's partner, ``c`` its cache column and ``sign`` -1 on the real positions
(multiplying by -1 and adding is exactly the spec's subtraction, so float32 results are the
spec's bit for bit); elements past ``rotary_embedding_dim`` are X (a Where). A 3-D X is never
reshaped: its tables span all heads of a row, so every load stays an affine view or a gather
(a reshape back from heads would merge a broadcast axis, which no strided view can express).
The caches are gathered at ``position_ids`` first ([batch, sequence, rotary / 2], small).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import dtypes
from ..ir import TensorType
from . import chunks
from .expansion import expanded_reference
from .registry import Attr, Call, Input, OpDef, Schema, register

_T = dtypes.types("float", "float16", "bfloat16")  # (no double)


@dataclass(frozen=True)
class RotaryPlan:
    """What the rule decided: X's shape, the 4-D shape it is viewed as (None: X is 4-D
    [batch, heads, sequence, head_size]; else the 3-D X as [batch, sequence, heads, head_size]),
    the rotated width and the interleaving."""

    shape: tuple
    heads_view: tuple | None
    rotary_dim: int
    interleaved: bool


def _dims(call: Call, shape: tuple) -> tuple:
    """(head_size, the view of a 3-D X as 4-D or None), checking num_heads."""
    num_heads = call.attrs["num_heads"] or 0
    if len(shape) == 4:
        if num_heads and num_heads != shape[1]:
            call.fail(f"num_heads {num_heads} but X (batch, num_heads, sequence, head_size) has "
                      f"shape {list(shape)}; expected num_heads {shape[1]} or 0")
        return shape[3], None
    if num_heads <= 0:
        call.fail(f"num_heads {num_heads} with a 3-D X of shape {list(shape)}; expected a positive "
                  "num_heads (a 3-D X is (batch, sequence, num_heads * head_size))")
    if shape[2] % num_heads:
        call.fail(f"X's hidden size {shape[2]} is not divisible by num_heads {num_heads}")
    head_size = shape[2] // num_heads
    return head_size, (shape[0], shape[1], num_heads, head_size)


def _rotary_dim(call: Call, head_size: int) -> int:
    rotary = call.attrs["rotary_embedding_dim"] or head_size
    if rotary % 2 or not 0 < rotary <= head_size:
        call.fail(f"rotary_embedding_dim {rotary}; expected an even value in [2, head_size {head_size}]")
    return rotary


def _check_caches(call: Call, shape: tuple, half: int) -> None:
    cos, sin = call.types[1], call.types[2]
    positions = call.input_type(3)
    batch, sequence = shape[0], (shape[2] if len(shape) == 4 else shape[1])
    for name, cache in (("cos_cache", cos), ("sin_cache", sin)):
        if cache.shape is None:
            continue
        got = tuple(cache.shape)
        if positions is not None:
            if len(got) != 2 or got[1] != half:
                call.fail(f"{name} shape {list(got)}; expected (max_position_id_plus_1, {half}) "
                          "(rotary_embedding_dim / 2) with position_ids")
        elif got != (batch, sequence, half):
            call.fail(f"{name} shape {list(got)}; expected {[batch, sequence, half]} (batch, sequence, "
                      "rotary_embedding_dim / 2) without position_ids")
    if positions is not None and positions.shape is not None and tuple(positions.shape) != (batch, sequence):
        call.fail(f"position_ids shape {list(positions.shape)}; expected {[batch, sequence]} (batch, sequence)")


def _rotary_rule(call: Call) -> list:
    x = call.types[0]
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    shape = tuple(x.shape)
    if len(shape) not in (3, 4):
        call.fail(f"X has shape {list(shape)} (rank {len(shape)}); expected rank 3 (batch, sequence, "
                  "hidden) or 4 (batch, num_heads, sequence, head_size)")
    if not x.is_static:
        return [TensorType(x.dtype, shape)]
    head_size, view = _dims(call, shape)
    rotary = _rotary_dim(call, head_size)
    _check_caches(call, shape, rotary // 2)
    call.plan = RotaryPlan(shape, view, rotary, bool(call.attrs["interleaved"]))
    return [TensorType(x.dtype, shape)]


def _tables(plan: RotaryPlan) -> tuple:
    """Per element of X's last axis: (its partner, its cache column, the sign of its sin term,
    whether it is rotated); a 3-D X's last axis holds num_heads heads of head_size."""
    heads, head_size = (plan.heads_view[2], plan.heads_view[3]) if plan.heads_view else (1, plan.shape[3])
    rotary, half = plan.rotary_dim, plan.rotary_dim // 2
    j = np.arange(head_size)
    rotated = j < rotary
    if plan.interleaved:
        partner, column, real = j ^ 1, j // 2, j % 2 == 0
    else:
        partner, column, real = (j + half) % rotary, j % half, j < half
    partner, column = np.where(rotated, partner, j), np.where(rotated, column, 0)
    offsets = (np.arange(heads) * head_size)[:, None]
    return ((partner + offsets).ravel(), np.tile(column, heads), np.tile(np.where(real, -1.0, 1.0), heads),
            np.tile(rotated, heads))


def _rotary_body(call: Call, b, xs: list) -> list:
    plan, dt = call.plan, call.types[0].dtype
    x, cos, sin = xs[0], xs[1], xs[2]
    positions = xs[3] if len(xs) > 3 else None
    partner, column, sign, rotated = _tables(plan)
    last = len(plan.shape) - 1

    def cache(table):  # [batch, sequence, half] -> one cache value per element of a row of X
        rows = table if positions is None else b.op("Gather", table, positions, axis=0)
        wide = b.op("Gather", rows, b.const(column.astype(np.int64)), axis=2)
        return wide if last == 2 else b.op("Unsqueeze", wide, b.const(np.array([1], np.int64)))

    swapped = b.op("Gather", x, b.const(partner.astype(np.int64)), axis=last)
    sin_term = b.op("Mul", b.op("Mul", swapped, cache(sin)), b.const(sign.astype(dt.np_dtype)))
    y = b.op("Add", b.op("Mul", x, cache(cos)), sin_term)
    if not rotated.all():
        y = b.op("Where", b.const(rotated), y, x)
    return [y]


register(OpDef(
    "RotaryEmbedding",
    (Schema(23, (Input("X"), Input("cos_cache"), Input("sin_cache"),
                 Input("position_ids", dtypes.types("int64"), optional=True)),
            (Attr("interleaved", "int", 0), Attr("num_heads", "int", None), Attr("rotary_embedding_dim", "int", 0)),
            _T),),
    _rotary_rule, reference=expanded_reference(_rotary_body), expand=_rotary_body, chunk=chunks.WHOLE,
    doc="Rotary positional embedding of X (3-D with num_heads, or 4-D BNSH): the first "
        "rotary_embedding_dim elements of each head rotated by the cos / sin caches (gathered at "
        "position_ids when given), halves or interleaved pairs."))
