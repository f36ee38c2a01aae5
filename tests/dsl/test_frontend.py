"""numpy's conventions on traced values and dsl.Tensor (dsl/frontend.py): indexing, .T / .mT,
.astype, .reshape, the reduction methods and numpy ufuncs, each against numpy itself, traced
(@dsl.jit) and eager (on a Tensor); what stays unsupported raises a DslError naming it."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsl

X = np.arange(2 * 3 * 8, dtype=np.float32).reshape(2, 3, 8)
CASES = {
    "last axis half": lambda a: a[..., :4], "new axis and int": lambda a: a[:, None, 1],
    "negative steps": lambda a: a[::-1, :, ::3], "one int": lambda a: a[1], "all ints": lambda a: a[-1, -2, -3],
    "int list": lambda a: a[:, [2, 0]], "2-d index array": lambda a: a[..., np.array([[1, 7]])],
    "int then list": lambda a: a[0, [1, 2]], "T": lambda a: a.T, "mT": lambda a: a.mT, "sum": lambda a: a.sum(),
    "mean axis": lambda a: a.mean(axis=1), "max keepdims": lambda a: a.max((0, 2), keepdims=True),
    "min": lambda a: a.min(-1), "np.sum": lambda a: np.sum(a, axis=0), "reshape": lambda a: a.reshape(6, -1),
    "reshape zero": lambda a: a[:0].reshape(0, 24), "astype": lambda a: a.astype(np.int32),
    "ellipsis middle": lambda a: a[1:, ..., None], "empty": lambda a: a[5:], "clamped start": lambda a: a[:, -10::-1],
}


@pytest.mark.parametrize("name", list(CASES))
def test_traced_and_tensor_methods_match_numpy(name):
    fn = CASES[name]
    want = fn(X)
    got = dsl.jit(fn)(X)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    eager = fn(dsl.Tensor.from_numpy(X))
    eager = eager.numpy() if isinstance(eager, dsl.Tensor) else eager
    np.testing.assert_array_equal(eager, want)


def test_slices_and_ints_are_views_and_fuse():
    f = dsl.jit(lambda a: a[:, 1:, ::2] * 2.0 + a[0, 0, :4].sum())
    assert f.executable(X).kernel_count <= 2
    np.testing.assert_array_equal(f(X), X[:, 1:, ::2] * 2 + X[0, 0, :4].sum())
    base = dsl.Tensor.from_numpy(X)
    t = base[1, ::-2]
    assert isinstance(t, dsl.Tensor) and t.buffer is base.buffer and t.shape == (2, 8)  # a view, no copy
    np.testing.assert_array_equal(t.numpy(), X[1, ::-2])


def test_numpy_ufuncs_on_traced_values():
    y = np.random.default_rng(1).random(X.shape).astype(np.float32)
    f = dsl.jit(lambda a: np.exp(a * 0.01) + y * a - np.float32(2) * np.maximum(a, 3.0))
    np.testing.assert_allclose(f(X), np.exp(X * np.float32(0.01)) + y * X - 2 * np.maximum(X, 3), rtol=1e-6)
    g = dsl.jit(lambda a: np.sin(a) * np.floor(a) - np.rint(a))  # (ONNX Sin, Floor, Round)
    np.testing.assert_allclose(g(X), np.sin(X) * np.floor(X) - np.rint(X), rtol=1e-6, atol=1e-6)
    with pytest.raises(dsl.UnsupportedError, match=r"np\.cbrt on traced tensor %a is not supported"):
        dsl.jit(lambda a: np.cbrt(a))(X)  # (no ONNX op)
    with pytest.raises(dsl.UnsupportedError, match=r"np\.add\.reduce on traced tensor"):
        dsl.jit(lambda a: np.add.reduce(a))(X)


@pytest.mark.parametrize("fn, error, message", [
    (lambda a: a[X > 1], dsl.InputError, r"boolean mask indexing .* use dsl\.where"),
    (lambda a: a[np.array([True, False])], dsl.InputError, r"boolean mask"),
    (lambda a: a[2], dsl.InputError, r"index 2 is out of bounds for axis 0 with size 2"),
    (lambda a: a[0, 0, 0, 0], dsl.InputError, r"too many indices: 4 for a tensor of rank 3"),
    (lambda a: a[..., ...], dsl.InputError, r"a single ellipsis"),
    (lambda a: a[::0], dsl.InputError, r"slice step cannot be zero"),
    (lambda a: a[[0], [1]], dsl.UnsupportedError, r"more than one integer array index"),
    (lambda a: a[0, :, [1]], dsl.UnsupportedError, r"apart from int indices"),
    (lambda a: a[np.array([0.5])], dsl.InputError, r"array index of type float64; expected integers"),
    (lambda a: a[:, [5]], dsl.InputError, r"Gather.*indices value 5 .* out of range \[-3, 2\]"),
    (lambda a: a["x"], dsl.InputError, r"index 'x' of type str"),
    (lambda a: a.reshape(5, -1), dsl.ShapeError, r"Reshape"),
    (lambda a: a[0].mT[0].mT, dsl.InputError, r"\.mT of .*needs rank >= 2, got rank 1"),
    (lambda a: a.sum(out=np.zeros(1)), dsl.UnsupportedError, r"\.sum\(\) of .*out= is not supported"),
])
def test_bad_indexing_raises_a_dsl_error_naming_it(fn, error, message):
    with pytest.raises(error, match=message):
        dsl.jit(fn)(X)
    with pytest.raises(error, match=message.replace("%a", "tensor")):
        fn(dsl.Tensor.from_numpy(X))


def _index_strategy(shape):
    def one(dim):
        bound = st.integers(-dim - 2, dim + 2) | st.none()
        return st.one_of(st.builds(slice, bound, bound, st.sampled_from([None, 1, 2, -1, -3])),
                         st.integers(-dim, dim - 1), st.none(), st.just(Ellipsis))
    return st.tuples(*[one(d) for d in shape])


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(st.data())
def test_random_basic_indexing_matches_numpy(data):
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    key = data.draw(_index_strategy(shape))
    if sum(k is Ellipsis for k in key) > 1:
        key = tuple(k for k in key if k is not Ellipsis)
    want = x[key]
    got = dsl.jit(lambda a: a[key])(x)
    np.testing.assert_array_equal(got, want)
    assert got.shape == want.shape
    np.testing.assert_array_equal(dsl.Tensor.from_numpy(x)[key].numpy(), want)


def test_argmax_and_argmin_methods_follow_numpy():
    x = np.array([[3.0, 9.0, 9.0, -1.0], [7.0, np.nan, 2.0, 7.0]], np.float32)
    f = dsl.jit(lambda a: (a.argmax(-1), a.argmin(axis=0, keepdims=True), (a * 2.0).argmax(), np.argmin(a, axis=1)))
    for got, want in zip(f(x), (x.argmax(-1), x.argmin(0, keepdims=True), x.argmax(), np.argmin(x, axis=1))):
        assert got.dtype == np.int64 and np.array_equal(got, want), (got, want)
    t = dsl.Tensor.from_numpy(x)
    assert t.argmax(1).numpy().tolist() == x.argmax(1).tolist()
    assert t.argmax(keepdims=True).numpy().shape == x.argmax(keepdims=True).shape == (1, 1)
    with pytest.raises(dsl.InputError, match=r"\.argmax\(\) of .*axis \[0\]"):
        dsl.jit(lambda a: a.argmax([0]))(x)


def test_stack_and_numpy_axis_spellings():
    a, b = X, X * 2
    got = dsl.jit(lambda a, b: dsl.stack([a, b], -1) + 1.0)(a, b)
    np.testing.assert_array_equal(got, np.stack([a, b], -1) + 1)
    np.testing.assert_array_equal(dsl.stack([a, b, a]), np.stack([a, b, a]))
    np.testing.assert_array_equal(dsl.reduce_sum(a, axis=1, keepdims=False), a.sum(axis=1))
    np.testing.assert_array_equal(dsl.reduce_max(a, axis=(0, -1)), a.max(axis=(0, -1), keepdims=True))
    with pytest.raises(dsl.InputError, match="ReduceMean: axes=\\[0\\] and axis=1 both given"):
        dsl.reduce_mean(a, [0], axis=1)
    with pytest.raises(dsl.DslError, match="stack: inputs must be a non-empty list"):
        dsl.stack([])
