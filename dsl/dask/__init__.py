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
from ..errors import DTypeError, InputError, ShapeError
from ..ir import TensorType
from ..jit import ARGUMENT_HANDLERS, JitFunction
from ..program import Program
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


REDUCTIONS = ("whole", "tree")


def apply(fn, *args, reductions: str = "whole"):
    """Run a jit function or a Program on dask arrays; returns dask arrays (a tuple for several
    outputs).

    Args:
        fn: a ``dsl.jit`` function (a plain Python function is jitted) or a ``dsl.Program``
            (e.g. from ``dsl.from_onnx``) whose inputs are all data (no axes / shape inputs).
        *args: dask arrays, ``dsl.dask.PackedArray`` (packed int4/int2/float4 bytes) or numpy
            arrays (wrapped as one chunk), in input order.
        reductions: "whole" (default): ReduceSum/Mean/Max read their axes whole (rechunked to
            one chunk, fused with their producers; results equal the single-machine JIT bit for
            bit). "tree": dask tree reductions over the chunks (no axis in one chunk; float
            sums and means add chunk totals in float64, so the last bit may differ).

    Returns:
        A lazy dask array per output, with the chunks the plan chose; compute it with any dask
        scheduler or a distributed Client.

    Raises:
        DslError: the trace fails (naming the op), an input does not match a Program's declared
            type, or an op has no chunk rule.

    Example:
        >>> dsl.dask.apply(f, da.ones((8, 512), chunks=(2, -1), dtype="float32")).compute()
    """
    if reductions not in REDUCTIONS:
        raise UnsupportedError(f"dsl.dask.apply: reductions={reductions!r}; expected one of {list(REDUCTIONS)}")
    args = [a if is_dask_argument(a) else _da.from_array(np.asarray(a), chunks=-1) for a in args]
    types = [_input_type(a, i) for i, a in enumerate(args)]
    if isinstance(fn, Program):
        name, (graph, calls, constants) = fn.graph.name, _specialized(fn, types)
    else:
        fn = fn if isinstance(fn, JitFunction) else JitFunction(fn)
        builder = fn._trace(types)
        name, graph, calls, constants = fn.__name__, builder.graph, builder.calls, builder.constants
    layout = plan_layout(graph, calls, constants, tree=reductions == "tree")
    outputs = GraphBuilder(name, graph, calls, constants, layout, args).outputs()
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _specialized(program: Program, types: list) -> tuple:
    """(graph, calls, constants) of ``program`` at these input types, checked like Program.run."""
    from ..passes.specialize import specialize, value_inputs
    if len(types) != len(program.graph.inputs):
        raise InputError(f"dsl.dask: got {len(types)} inputs, expected {len(program.graph.inputs)} "
                         f"{program.input_names}")
    if value_inputs(program.graph):
        raise UnsupportedError(f"dsl.dask: inputs {sorted(value_inputs(program.graph))} are axes or shapes "
                               f"(their values shape the graph); make them initializers to run blockwise")
    symbols: dict = {}
    for value, actual in zip(program.graph.inputs, types):
        declared = value.type
        if not isinstance(declared, TensorType) or declared.dtype != actual.dtype:
            raise DTypeError(f"dsl.dask: input {value.name!r} is {actual}; expected {declared}")
        if declared.shape is not None:
            bound = [symbols.setdefault(d, size) if isinstance(d, str) else d
                     for d, size in zip(declared.shape, actual.shape)]
            if len(declared.shape) != len(actual.shape) or any(
                    isinstance(d, int) and d != size for d, size in zip(bound, actual.shape)):
                raise ShapeError(f"dsl.dask: input {value.name!r} has shape {list(actual.shape)}; expected "
                                 f"{declared}")
    return specialize(program.graph, types, {})


ARGUMENT_HANDLERS[("dask.", "dsl.dask")] = apply  # jit functions called with dask arrays run blockwise
