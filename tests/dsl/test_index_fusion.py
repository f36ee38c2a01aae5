"""Index-expression fusion (dsl/ops/scan.py _trilu_body, _eye_body): Trilu and EyeLike inside
elementwise kernels as comparisons against constant aranges, bit for bit their numpy references;
types kernels do not compute (string, complex) and unknown k keep the reference."""
import ml_dtypes
import numpy as np
import pytest

import dsl
from dsl.passes.fuse import KernelStep
from dsl_test_helpers import allowed_types, assert_same, make_array

KS = (-2 ** 63, -9, -3, -1, 0, 1, 2, 4, 7, 2 ** 63 - 1)  # beyond the matrix both ways, and int64's ends
KERNEL_TYPES = ["float", "double", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "uint16",
                "uint32", "uint64", "bool"]


def numpy_steps(f, *args) -> list:
    return [s.node.op_type for s in f.executable(*args).steps if not isinstance(s, KernelStep)]


def kernel_count(f, *args) -> int:
    return sum(isinstance(s, KernelStep) for s in f.executable(*args).steps)


# ---- Trilu --------------------------------------------------------------------------------------
def test_every_trilu_type_is_a_kernel_type_or_declined():
    """The body runs exactly where kernels compute the type: the rest of Trilu's types (T: all
    types of opset 13) are strings and complex numbers, which keep the reference."""
    names = {t.onnx_name for t in allowed_types("Trilu", 14)}
    assert names - set(KERNEL_TYPES) == {"string", "complex64", "complex128"}


@pytest.mark.parametrize("upper", [1, 0])
@pytest.mark.parametrize("name", KERNEL_TYPES)
def test_trilu_fuses_bit_exactly_at_every_k(name, upper):
    x = make_array(dsl.dtype(name), (2, 3, 5), seed=4)  # (random bit patterns; NaNs: the tests below)
    for k in KS:
        f = dsl.jit(lambda x: dsl.trilu(x, k, upper=upper))
        assert_same(f(x), dsl.trilu(x, k, upper=upper))
        assert numpy_steps(f, x) == [] and kernel_count(f, x) == 1, f.explain(x)


@pytest.mark.parametrize("shape", [(4, 4), (1, 6), (6, 1), (2, 3, 4, 5), (0, 4), (3, 0), (2, 0, 3), (0, 0),
                                   (5, 0, 2, 2)])
@pytest.mark.parametrize("upper", [1, 0])
def test_trilu_fuses_for_batches_and_empty_shapes(shape, upper):
    x = np.arange(1, np.prod(shape) + 1, dtype=np.float32).reshape(shape)
    for k in (-1, 0, 2):
        f = dsl.jit(lambda x: dsl.trilu(x, k, upper=upper))
        want = np.triu(x, k) if upper else np.tril(x, k)
        assert_same(f(x), want)
        assert_same(dsl.trilu(x, k, upper=upper), want)
        assert "numpy Trilu" not in f.explain(x)


def test_trilu_is_one_kernel_with_its_producer_and_consumer():
    x = make_array(dsl.dtype("float"), (3, 8, 8), seed=1)

    @dsl.jit
    def f(x):
        return dsl.trilu(x * 2) + 1
    plan = f.explain(x)
    assert "numpy Trilu" not in plan and plan.count("kernel [") == 1 and numpy_steps(f, x) == [], plan
    with np.errstate(all="ignore"):
        assert_same(f(x), np.triu(x * np.float32(2)) + np.float32(1))


def test_causal_mask_from_trilu_fuses_into_the_scores():
    """The attention use: scores where the lower triangle (j <= i) keeps them, -1e4 beyond it."""
    scores = np.asarray(np.random.default_rng(2).standard_normal((1, 2, 16, 16)), np.float32)
    ones = np.ones((1, 1, 16, 16), np.float32)

    @dsl.jit
    def f(ones, scores):
        return scores + (1.0 - dsl.trilu(ones, upper=0)) * -1e4
    assert_same(f(ones, scores), scores + (np.float32(1) - np.tril(ones)) * np.float32(-1e4))
    assert numpy_steps(f, ones, scores) == [] and kernel_count(f, ones, scores) == 1, f.explain(ones, scores)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_trilu_keeps_every_16_bit_float_bit_for_bit(name):
    """Every bit pattern: kept ones exact (-0.0, subnormals, infinities, signaling NaNs and
    payloads: the kernel selects raw bits, dsl/codegen/loops.py _moved), zeroed ones +0.0."""
    bits = np.arange(0, 2 ** 16, dtype=np.uint16).reshape(256, 256)
    x = bits.view({"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[name])
    f = dsl.jit(lambda x: dsl.trilu(x, -3))
    got, want = f(x), dsl.trilu(x, -3)
    assert want.view(np.uint16)[255].tolist() == [0] * 252 + bits[255, 252:].tolist()  # (j - i >= -3)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("np_type, nans", [(np.float32, [0x7F800001, 0xFFA00000, 0x7FC00001, 0xFFFFFFFF]),
                                            (np.float64, [0x7FF0000000000001, 0xFFF4000000000000,
                                                          0x7FF8000000000001, 0xFFFFFFFFFFFFFFFF])])
def test_trilu_keeps_float32_and_float64_nan_payloads(np_type, nans):
    """float and double are computed in their own type: signaling NaNs and payloads pass as they are."""
    unsigned = np.uint32 if np_type is np.float32 else np.uint64
    x = np.tile(np.array(nans, unsigned), (4, 1)).view(np_type)
    f = dsl.jit(lambda x: dsl.trilu(x, upper=0))
    assert_same(f(x), dsl.trilu(x, upper=0))
    assert f(x).view(unsigned)[3].tolist() == nans


@pytest.mark.parametrize("name", ["string", "complex64", "complex128"])
def test_trilu_of_a_type_kernels_do_not_compute_runs_the_reference(name):
    x = make_array(dsl.dtype(name), (3, 4), seed=5)
    f = dsl.jit(lambda x: dsl.trilu(x, 1))
    got, want = f(x), dsl.trilu(x, 1)
    assert_same(got, want)
    assert numpy_steps(f, x) == ["Trilu"], f.explain(x)
    zero = "" if name == "string" else 0
    assert got[2, 0] == zero and got[0, 1] == x[0, 1]


def test_trilu_k_as_a_program_input_is_specialized_and_fused():
    """A Program specializes on the values its rules read (k): each k value a fused kernel."""
    program = dsl.jit(lambda x, k: dsl.trilu(x, k) * 2).lower(dsl.TensorType(dsl.float32, (4, 6)),
                                                               dsl.TensorType(dsl.int64, ()))
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    for k in (-5, -1, 0, 3, 6, 100):
        feeds = {"x": x, "k": np.array(k, np.int64)}
        assert_same(program.run(feeds)[0], np.triu(x, k) * np.float32(2))
        assert_same(program.run(feeds, engine="numpy")[0], np.triu(x, k) * np.float32(2))
        steps = program._executable(feeds).steps  # (no public plan API on Program)
        assert not any(getattr(s, "node", None) is not None and s.node.op_type == "Trilu" for s in steps)


def test_trilu_k_known_only_at_run_time_runs_the_reference():
    """k traced from a jit argument is not known when the kernels are planned: the reference runs."""
    f = dsl.jit(lambda x, k: dsl.trilu(x, k))
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    for k in (-1, 2):
        assert_same(f(x, np.array(k, np.int64)), np.triu(x, k))
    assert numpy_steps(f, x, np.array(0, np.int64)) == ["Trilu"]


# ---- EyeLike ------------------------------------------------------------------------------------
EYE_TYPES = [t.onnx_name for t in allowed_types("EyeLike", 22, "T2")]


def _eye(shape, k, np_type):
    return np.eye(shape[0], shape[1], k, dtype=np_type)


@pytest.mark.parametrize("name", EYE_TYPES)
def test_eye_like_fuses_bit_exactly_for_every_type_and_k(name):
    dt = dsl.dtype(name)
    x = make_array(dt, (4, 6), seed=3)
    for k in KS:
        f = dsl.jit(lambda x: dsl.eye_like(x, k=k))
        got = f(x)
        assert_same(got, dsl.eye_like(x, k=k))
        assert_same(got, _eye(x.shape, min(max(k, -10), 10), dt.np_dtype))
        assert numpy_steps(f, x) == [] and kernel_count(f, x) == 1, f.explain(x)


@pytest.mark.parametrize("out", ["float16", "bfloat16", "int8", "uint64", "bool", "double"])
@pytest.mark.parametrize("shape", [(3, 3), (2, 5), (5, 2), (1, 1), (0, 3), (3, 0), (0, 0)])
def test_eye_like_to_another_dtype_reads_only_the_shape(shape, out):
    x = np.full(shape, np.nan, np.float32)  # (values never read)
    for k in (-4, -1, 0, 1, 3):
        f = dsl.jit(lambda x: dsl.eye_like(x, dtype=out, k=k))
        assert_same(f(x), dsl.eye_like(x, dtype=out, k=k))
        assert_same(f(x), _eye(shape, k, dsl.dtype(out).np_dtype))
        assert "numpy EyeLike" not in f.explain(x)


def test_eye_like_is_one_kernel_with_its_consumer():
    x = make_array(dsl.dtype("float"), (6, 6), seed=8)

    @dsl.jit
    def f(x):
        return dsl.eye_like(x, k=1) * x + 1
    plan = f.explain(x)
    assert "numpy EyeLike" not in plan and plan.count("kernel [") == 1 and numpy_steps(f, x) == [], plan
    with np.errstate(all="ignore"):
        assert_same(f(x), np.eye(6, 6, 1, dtype=np.float32) * x + np.float32(1))


def test_eye_like_at_version_9():
    f = dsl.jit(lambda x: dsl.eye_like(x, k=-1), opset=9)
    x = np.zeros((3, 4), np.int64)
    assert_same(f(x), np.eye(3, 4, -1, dtype=np.int64))
    assert numpy_steps(f, x) == []
