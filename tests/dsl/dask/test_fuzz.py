"""Random programs (the generator of tests/dsl/test_jit.py: views, broadcasting binary ops,
casts through narrow floats, unary ops, ReduceSum) run blockwise on random chunkings equal the
single-machine JIT bit for bit."""
from __future__ import annotations

import warnings

import dask
import dask.array as da
import numpy as np
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import dsl
import dsl.dask
from test_jit import FUZZ_EXAMPLES, draw_program, fuzz_function, program_source


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=FUZZ_EXAMPLES == 40, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_random_programs_blockwise_equal_the_jit(data):
    x, operands, steps, layout = draw_program(data)
    chunks = tuple(data.draw(st.integers(1, max(size, 1))) for size in x.shape)
    # array operands become dask arrays chunked their own way: blockwise must align them
    operand_chunks = [tuple(data.draw(st.integers(1, max(size, 1))) for size in np.shape(a)) for a in operands]
    source = program_source(x, operands, steps, layout)
    note(source + f"\n# chunks {chunks}, operand chunks {operand_chunks}")
    program = fuzz_function(source)
    with np.errstate(all="ignore"):
        want = program(x, *operands)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", dsl.dask.RechunkWarning)
            lazy = program(da.from_array(x, chunks=chunks),
                           *[da.from_array(a, chunks=c) for a, c in zip(operands, operand_chunks)])
        got = lazy.compute(scheduler="synchronous")
    assert got.shape == want.shape == lazy.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
