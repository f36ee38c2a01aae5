"""BlockProgram (dsl/dask/blocks.py): pickles without its compiled state, replays a graph slice
at chunk shapes, plans each chunk signature once per process, reads packed byte chunks."""
from __future__ import annotations

import pickle

import dask.array as da
import numpy as np

import dsl
import dsl.dask
from dsl.dask import blocks


def one_program(lazy):
    """The BlockProgram of a single-blockwise dask array."""
    (layer,) = [layer for name, layer in lazy.dask.layers.items() if name.startswith("dsl-")]
    programs = {id(p): p for p in _walk(layer)}
    (program,) = programs.values()
    return program


def _walk(layer):
    for task in layer.values() if hasattr(layer, "values") else []:
        yield from _programs(task)


def _programs(obj):
    if isinstance(obj, blocks.BlockProgram):
        yield obj
    for attr in ("func", "args", "kwargs"):
        inner = getattr(obj, attr, None)
        if isinstance(inner, (list, tuple)):
            for item in inner:
                yield from _programs(item)
        elif inner is not None and attr == "func":
            yield from _programs(inner)
    if isinstance(obj, tuple):
        for item in obj:
            yield from _programs(item)


@dsl.jit
def scaled(x, scale):
    return dsl.expand(dsl.unsqueeze(scale, [1]), [6, 8]) * x


def test_program_pickles_plans_once_per_signature_and_matches_the_jit():
    x = np.arange(48, dtype=np.float32).reshape(6, 8)
    scale = np.linspace(1, 2, 6).astype(np.float32)
    lazy = scaled(da.from_array(x, chunks=(4, 8)), da.from_array(scale, chunks=4))
    program = one_program(lazy)
    clone = pickle.loads(pickle.dumps(program))
    assert clone.token == program.token and clone.nodes is not program.nodes
    before = blocks.replay_count(program.token)
    full = scaled(x, scale)  # the Expand target is rewritten to each chunk's rows
    np.testing.assert_array_equal(clone(x[:4], scale[:4]), full[:4])
    np.testing.assert_array_equal(program(x[4:], scale[4:]), full[4:])
    program(x[:4] + 1, scale[:4])  # same signature as the first chunk: no new plan
    assert blocks.replay_count(program.token) - before == 2


def test_packed_leaf_reads_a_non_contiguous_byte_chunk():
    values = np.arange(-8, 8).reshape(2, 8).astype(dsl.int4.np_dtype)
    raw = dsl.Tensor.from_numpy(values).packed().reshape(2, 4)
    f = dsl.jit(lambda w: dsl.cast(w, dsl.float32))
    packed = dsl.dask.from_packed(da.from_array(raw, chunks=(2, 2)), "int4")
    program = one_program(f(packed))
    np.testing.assert_array_equal(program(raw[:, 2:]), values[:, 4:].astype(np.float32))
