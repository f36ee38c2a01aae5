"""Tree reductions for ``dsl.dask.apply(..., reductions="tree")``: ReduceSum / ReduceMean /
ReduceMax over chunked axes as dask reductions, no axis rechunked to one chunk.

Partial results combine exactly where the op allows (max; integer sums wrap in the op's type
as the reference does; integer means keep exact totals) and in float64 for float sums and
means, rounded once at the end: only the order of the float64 additions differs from the
single-machine JIT (each chunk's total is its own float64 sum).
"""
from __future__ import annotations

from functools import partial
from math import prod

import dask.array as da
import numpy as np

from ..ops.math import domain_array, finish


def tree_reduce(source, kind: str, plan, dt):
    """``kind`` ('sum', 'mean' or 'max') of the dask array ``source`` over ``plan.axes`` (a
    ReducePlan), as the op's element type ``dt``."""
    step = partial(_partial, kind=kind, dt=dt)
    final = partial(_final, kind=kind, dt=dt, count=prod(plan.in_shape[k] for k in plan.axes))
    return da.reduction(source, chunk=step, combine=step, aggregate=final, axis=plan.axes,
                        keepdims=plan.keepdims, dtype=dt.np_dtype, concatenate=True,
                        meta=np.empty((0,) * len(plan.out_shape), dt.np_dtype))


def _partial(block, axis, keepdims, kind, dt):
    """A block's (or concatenated partials') partial result, in the exact accumulation type."""
    if kind == "max":
        if dt.kind == "bool":  # ReduceMax-20: False < True
            return np.logical_or.reduce(block, axis=axis, keepdims=keepdims, initial=False)
        wide = domain_array(np.asarray(block))
        lowest = -np.inf if wide.dtype.kind == "f" else np.iinfo(wide.dtype).min
        return np.maximum.reduce(wide, axis=axis, keepdims=keepdims, initial=lowest)
    if dt.kind == "float":
        return np.sum(domain_array(np.asarray(block)), axis=axis, keepdims=keepdims, dtype=np.float64)
    if kind == "sum":
        return np.sum(block, axis=axis, keepdims=keepdims, dtype=block.dtype)
    exact = object if dt.np_dtype.itemsize == 8 else np.int64 if dt.kind == "int" else np.uint64
    return np.sum(np.asarray(block).astype(exact), axis=axis, keepdims=keepdims)


def _final(partials, axis, keepdims, kind, dt, count):
    """The op's result from the partials: rounded once to ``dt`` as the reference rounds."""
    total = np.asarray(_partial(partials, axis, keepdims, kind, dt))
    if kind == "max":
        return finish(total, dt)
    if dt.kind == "float":
        domain = domain_array(np.empty(0, dt.np_dtype)).dtype
        with np.errstate(all="ignore"):
            return finish((total / count if kind == "mean" else total).astype(domain), dt)
    if kind == "sum":
        return total.astype(dt.np_dtype)
    if count == 0:
        return np.zeros(total.shape, dt.np_dtype)
    means = [abs(v) // count * (1 if v >= 0 else -1) for v in total.reshape(-1).tolist()]  # toward zero
    return np.array(means, dtype=dt.np_dtype).reshape(total.shape)
