"""Integer arithmetic at its edges (minimum / -1, division by zero, wrapping) in the JIT, the
eager engine and an independent Python-int oracle, plus random integer programs."""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import dsl

INT_TYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def edge_values(np_type) -> np.ndarray:
    info = np.iinfo(np_type)
    values = {int(info.min), int(info.min) + 1, int(info.max), int(info.max) - 1, 0, 1, 2, 3, 7}
    if info.min < 0:
        values |= {-1, -2, -3, -7}
    return np.array(sorted(values), np_type)


def wrap(value: int, np_type) -> int:
    info = np.iinfo(np_type)
    span = 1 << info.bits
    value %= span
    return value - span if info.min < 0 and value > info.max else value


def c_div(a: int, b: int, np_type) -> int:
    """ONNX Div on integers: truncate toward zero (C), x / 0 = 0 (dsl's choice, as numpy), wrapped."""
    if b == 0:
        return 0
    quotient = abs(a) // abs(b)
    return wrap(quotient if (a < 0) == (b < 0) else -quotient, np_type)


@pytest.mark.parametrize("np_type", INT_TYPES, ids=lambda t: t.__name__)
def test_division_edges_agree_in_jit_eager_and_python(np_type):
    values = edge_values(np_type)
    a, b = (grid.ravel() for grid in np.meshgrid(values, values))
    want = np.array([c_div(int(x), int(y), np_type) for x, y in zip(a, b)], np_type)
    divide = dsl.jit(lambda x, y: x / y)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(divide(a, b), want)
        np.testing.assert_array_equal(dsl.div(a, b), want)
    info = np.iinfo(np_type)
    if info.min < 0:  # the case that was wrong for int64: the minimum / -1 wraps to the minimum
        edge = divide(np.array([info.min], np_type), np.array([-1], np_type))
        assert edge.tolist() == [int(info.min)]


@pytest.mark.parametrize("np_type", INT_TYPES, ids=lambda t: t.__name__)
def test_division_by_a_scalar_and_in_a_fused_chain(np_type):
    values = edge_values(np_type)
    chain = dsl.jit(lambda x, y: (x + y) / y - x * y)
    with np.errstate(all="ignore"):
        a, b = (grid.ravel() for grid in np.meshgrid(values, values))
        report = dsl.compare(chain, a, b, rtol=0, atol=0)
        assert report.ok, report
        want = [wrap(c_div(wrap(int(x) + int(y), np_type), int(y), np_type) - wrap(int(x) * int(y), np_type), np_type)
                for x, y in zip(a, b)]
        assert chain(a, b).tolist() == want


OPS = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
       "div": lambda x, y: x / y, "max": dsl.maximum, "min": dsl.minimum}
PY_OPS = {"add": lambda x, y, t: wrap(x + y, t), "sub": lambda x, y, t: wrap(x - y, t),
          "mul": lambda x, y, t: wrap(x * y, t), "div": c_div, "max": lambda x, y, t: max(x, y),
          "min": lambda x, y, t: min(x, y)}
FUZZ_EXAMPLES = int(os.environ.get("DSL_FUZZ_EXAMPLES", "30"))


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=FUZZ_EXAMPLES == 30, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_random_integer_programs_match_python_ints_and_the_eager_engine(data):
    np_type = data.draw(st.sampled_from(INT_TYPES))
    values = edge_values(np_type)
    size = data.draw(st.integers(1, 12))
    pick = st.lists(st.sampled_from(values.tolist()), min_size=size, max_size=size)
    x = np.array(data.draw(pick), np_type)
    operands = [np.array(data.draw(pick), np_type) for _ in range(data.draw(st.integers(1, 3)))]
    steps = [(data.draw(st.sampled_from(list(OPS))), data.draw(st.integers(0, len(operands) - 1)),
              data.draw(st.booleans())) for _ in range(data.draw(st.integers(1, 5)))]
    note(f"{np_type.__name__} x={x.tolist()} operands={[o.tolist() for o in operands]} steps={steps}")

    def program(x, *ops):
        y = x
        for name, index, reflected in steps:
            y = OPS[name](ops[index], y) if reflected else OPS[name](y, ops[index])
        return y

    want = []
    for k in range(size):
        y = int(x[k])
        for name, index, reflected in steps:
            other = int(operands[index][k])
            y = PY_OPS[name](other, y, np_type) if reflected else PY_OPS[name](y, other, np_type)
        want.append(y)
    jitted = dsl.jit(program)
    with np.errstate(all="ignore"):
        assert jitted(x, *operands).tolist() == want
        report = dsl.compare(jitted, x, *operands, rtol=0, atol=0)
    assert report.ok, report


INT64_EDGES = np.array([2**63 - 1, 2**62, -2**63, 5, -1, 0], np.int64)


@pytest.mark.parametrize("name, fn, py", [
    ("(x + 1) > x", lambda a: dsl.greater(dsl.add(a, 1), a), lambda v: wrap(v + 1, np.int64) > v),
    ("(x * 2) / 2", lambda a: dsl.div(dsl.mul(a, 2), 2), lambda v: c_div(wrap(v * 2, np.int64), 2, np.int64)),
    ("(x + 2**62) / 3", lambda a: dsl.div(dsl.add(a, 2**62), 3),
     lambda v: c_div(wrap(v + 2**62, np.int64), 3, np.int64)),
    ("(x - 5) / 5", lambda a: dsl.div(dsl.sub(a, 5), 5), lambda v: c_div(wrap(v - 5, np.int64), 5, np.int64)),
    ("(x * 3) / 7", lambda a: dsl.div(dsl.mul(a, 3), 7), lambda v: c_div(wrap(v * 3, np.int64), 7, np.int64)),
])
def test_int64_wrapping_with_constants_is_not_folded_as_if_it_could_not_wrap(name, fn, py):
    # LLVM treated numba's signed int64 adds / muls as never wrapping and folded (x + 1) > x to
    # true and (x * 2) / 2 to x; the JIT now wraps like the eager engine and two's complement
    want = [py(int(v)) for v in INT64_EDGES]
    with np.errstate(all="ignore"):
        assert dsl.jit(fn)(INT64_EDGES).tolist() == want, name
        assert fn(INT64_EDGES).tolist() == want, name
