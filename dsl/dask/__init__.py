"""dsl.dask: run ``@dsl.jit`` programs blockwise on dask arrays (optional extra ``dsl[dask]``).

A jit function called with dask arrays (or ``dsl.dask.apply(f, *arrays)``) returns dask arrays.
The traced program is planned once on the full shapes (dsl/dask/chunking.py), then every group
of outputs becomes ONE ``dask.array.blockwise`` whose tasks run the program's fused kernels on
their chunks (dsl/dask/blocks.py). Chunk semantics follow the ops: Unsqueeze adds a size-1 axis,
Squeeze/Transpose/Expand and broadcasting map chunks, reductions, Softmax and MatMul's K read
their axes whole (rechunked to one chunk, with a RechunkWarning; results equal the
single-machine JIT), a Reshape that merges or splits chunked dims goes through ``da.reshape``.
Scheduling, spilling and distribution are dask's: use any scheduler or a distributed Client.

Example:
    >>> import dask.array as da, dsl, dsl.dask
    >>> @dsl.jit
    ... def f(mask, scores):
    ...     return dsl.softmax(scores + (1.0 - dsl.unsqueeze(dsl.cast(mask, dsl.float32), [1, 2])) * -1e4)
    >>> out = f(da.from_array(mask, chunks=(1, -1)), da.from_array(scores, chunks=(1, 4, -1, -1)))
    >>> out.compute()
"""
from __future__ import annotations

from ..errors import UnsupportedError

try:
    import dask.array as _da
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise UnsupportedError("dsl.dask needs the optional dependency dask[array]: pip install 'dsl[dask]'") from exc

import numpy as np

from .. import dtypes
from ..errors import InputError
from ..ir import TensorType
from ..jit import JitFunction
from .build import GraphBuilder, RechunkWarning
from .chunking import plan_layout
from .packed import PackedArray, from_packed

__all__ = ["apply", "from_packed", "PackedArray", "RechunkWarning", "is_dask_argument"]


def is_dask_argument(arg) -> bool:
    """True for a dask array or a PackedArray (what ``apply`` takes)."""
    return isinstance(arg, (_da.Array, PackedArray))


def _input_type(arg, index: int) -> TensorType:
    if isinstance(arg, PackedArray):
        return TensorType(arg.dtype, arg.shape)
    if any(np.isnan(d) for d in arg.shape):
        raise InputError(f"dsl.dask: argument {index} has unknown chunk sizes {arg.chunks}; call "
                         f"compute_chunk_sizes() first")
    return TensorType(dtypes.of_array(np.empty((0,), arg.dtype), f"dsl.dask: argument {index}"), arg.shape)


def apply(fn, *args):
    """Run a jit function on dask arrays; returns dask arrays (a tuple for several outputs).

    Args:
        fn: a ``dsl.jit`` function (a plain Python function is jitted).
        *args: dask arrays, ``dsl.dask.PackedArray`` (packed int4/int2/float4 bytes) or numpy
            arrays (wrapped as one chunk).

    Returns:
        A lazy dask array per output, with the chunks the plan chose; compute it with any dask
        scheduler or a distributed Client.

    Raises:
        DslError: the trace fails (naming the op) or an op has no chunk rule.

    Example:
        >>> dsl.dask.apply(f, da.ones((8, 512), chunks=(2, -1), dtype="float32")).compute()
    """
    if not isinstance(fn, JitFunction):
        fn = JitFunction(fn)
    args = [a if is_dask_argument(a) else _da.from_array(np.asarray(a), chunks=-1) for a in args]
    builder = fn._trace([_input_type(a, i) for i, a in enumerate(args)])
    graph = builder.graph
    layout = plan_layout(graph, builder.calls, builder.constants)
    outputs = GraphBuilder(fn.__name__, graph, builder.calls, builder.constants, layout, args).outputs()
    return outputs[0] if len(outputs) == 1 else tuple(outputs)
