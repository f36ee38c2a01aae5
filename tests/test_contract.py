"""The bad-input contract: every invalid public-API call raises a named dsl.DslError first; odd-but-valid inputs work."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import dsl
from dsl.codegen import compile as codegen_compile
from dsl.ops import registry


class Call:
    """A deferred public-API call that knows its array arguments (to snapshot them)."""

    def __init__(self, fn, *args, **kwargs):
        self.fn, self.args, self.kwargs = fn, args, kwargs

    def __call__(self):
        return self.fn(*self.args, **self.kwargs)

    def arrays(self):
        values = list(self.args) + list(self.kwargs.values())
        return [v for v in values if isinstance(v, np.ndarray)]


def _snapshot(a: np.ndarray):
    data = list(a.ravel()) if a.dtype == object else a.tobytes()
    return a.dtype, a.shape, a.strides, a.flags.writeable, data


BIG = 2 ** 40


@dsl.jit
def _jit_add(a, b):
    return a + b


@dsl.jit
def _jit_unsqueeze(a):
    return dsl.unsqueeze(a, [0])


@dsl.jit
def _jit_reshape(a):
    return dsl.reshape(a, [BIG, BIG])


@dsl.jit
def _jit_recursive(a):
    return _jit_recursive(a) + 1.0


X = np.arange(6, dtype=np.float32).reshape(2, 3)
_ESCAPED: list = []  # a traced value kept after its trace ended
dsl.jit(lambda a: (_ESCAPED.append(a), a + 1.0)[1]).lower(X)
ONES = np.ones((1, 1), np.float32)
HUGE = 2 ** 31

# (id, callable, expected DslError subclass, regex naming the op and the offending value)
BAD = [
    ("unsqueeze-v1-duplicate", Call(dsl.unsqueeze, X, [0, 0], opset=1),
     dsl.ShapeError, r"Unsqueeze: axes \[0, 0\] repeat axis 0"),
    ("unsqueeze-v1-negative", Call(dsl.unsqueeze, X, [-1], opset=1),
     dsl.ShapeError, r"Unsqueeze: axis -1 is negative; version 1 .*opset >= 11"),
    ("unsqueeze-v11-out-of-range", Call(dsl.unsqueeze, X, [5], opset=11),
     dsl.ShapeError, r"Unsqueeze: axis 5 out of range \[-3, 2\] for output rank 3"),
    ("unsqueeze-v13-out-of-range", Call(dsl.unsqueeze, X, np.array([5]), opset=13),
     dsl.ShapeError, r"Unsqueeze: axis 5 out of range \[-3, 2\]"),
    ("unsqueeze-v25-duplicate-negative", Call(dsl.unsqueeze, X, np.array([1, -3]), opset=25),
     dsl.ShapeError, r"Unsqueeze: axes \[1, -3\] repeat axis 1"),
    ("unsqueeze-axes-not-ints", Call(dsl.unsqueeze, X, [0.5]),
     dsl.InputError, r"Unsqueeze: axes \[0\.5\] must be an int"),
    ("unsqueeze-v13-axes-int32", Call(dsl.unsqueeze, X, np.array([0], np.int32), opset=13),
     dsl.DTypeError, r"Unsqueeze: input 'axes' has type int32\[1\], not allowed at version 13"),
    ("unsqueeze-v13-axes-2d", Call(dsl.unsqueeze, X, np.array([[0]]), opset=13),
     dsl.ShapeError, r"Unsqueeze: axes must be a 1-D int64 tensor, got shape \[1, 1\]"),
    ("unsqueeze-v21-axes-0d", Call(dsl.unsqueeze, X, np.array(0), opset=21),
     dsl.ShapeError, r"Unsqueeze: axes must be a 1-D int64 tensor, got shape \[\]"),
    ("squeeze-non-1-dim", Call(dsl.squeeze, X, [0]),
     dsl.ShapeError, r"Squeeze: cannot squeeze axis 0 of size 2 in shape \[2, 3\]"),
    ("squeeze-out-of-range", Call(dsl.squeeze, X, [7]),
     dsl.ShapeError, r"Squeeze: axis 7 out of range \[-2, 1\]"),
    ("squeeze-v1-negative", Call(dsl.squeeze, np.zeros((1, 2)), [-2], opset=1),
     dsl.ShapeError, r"Squeeze: axis -2 is negative; version 1"),
    ("bfloat16-at-v11", Call(dsl.unsqueeze, np.zeros(2, ml_dtypes.bfloat16), [0], opset=11),
     dsl.DTypeError, r"Unsqueeze: input 'data' has type bfloat16\[2\], not allowed at version 11"),
    ("float8-at-v13", Call(dsl.unsqueeze, np.zeros(2, ml_dtypes.float8_e4m3fn), [0], opset=13),
     dsl.DTypeError, r"Unsqueeze: input 'data' has type float8e4m3fn\[2\], not allowed at version 13"),
    ("int2-at-v24", Call(lambda: dsl.unsqueeze(dsl.Tensor.from_packed(np.zeros(1, np.uint8), "int2", (4,)), [0],
                                               opset=24)),
     dsl.DTypeError, r"Unsqueeze: input 'data' has type int2\[4\], not allowed at version 24"),
    ("dtype-unknown-name", Call(dsl.dtype, "float7"),
     dsl.DTypeError, r"dsl\.dtype: unknown element type 'float7'"),
    ("cast-unknown-name", Call(dsl.cast, X, "float7"),
     dsl.DTypeError, r"Cast: attribute 'to' = 'float7' is not an ONNX element type"),
    ("expand-not-broadcastable", Call(dsl.expand, X, [4, 4]),
     dsl.ShapeError, r"Expand: shapes \[2, 3\] and \[4, 4\] are not broadcastable: dim 2 vs 4"),
    ("add-not-broadcastable", Call(dsl.add, X, np.zeros(4, np.float32)),
     dsl.ShapeError, r"Add: shapes \[2, 3\] and \[1, 4\] are not broadcastable: dim 3 vs 4"),
    ("jit-add-not-broadcastable", Call(_jit_add, X, np.zeros(4, np.float32)),
     dsl.ShapeError, r"Add \(node '\w+'\): shapes \[2, 3\] and \[1, 4\] are not broadcastable"),
    ("add-mixed-types", Call(dsl.add, X, np.zeros(3)),
     dsl.DTypeError, r"Add: input 'B' has element type double .* has float"),
    ("reshape-size-mismatch", Call(dsl.reshape, X, [4]),
     dsl.ShapeError, r"Reshape: cannot reshape \[2, 3\] \(6 elements\) to \[4\] \(4 elements\)"),
    ("reshape-two-minus-one", Call(dsl.reshape, X, [-1, -1]),
     dsl.ShapeError, r"Reshape: shape \[-1, -1\] has more than one -1"),
    ("reshape-zero-beyond-rank", Call(dsl.reshape, X, [1, 1, 0]),
     dsl.ShapeError, r"Reshape: shape \[1, 1, 0\] copies dim 2 \(0\) but the input has rank 2"),
    ("reshape-int64-overflow", Call(dsl.reshape, X, [BIG, BIG]),
     dsl.ShapeError, rf"Reshape: cannot reshape \[2, 3\] .* to \[{BIG}, {BIG}\]"),
    ("jit-reshape-int64-overflow", Call(lambda: _jit_reshape.lower(dsl.TensorType(dsl.float32, ("N",)))),
     dsl.ShapeError, rf"Reshape \(node '\w+'\): output shape \[{BIG}, {BIG}\] has \d+ elements"),
    ("reshape-dim-beyond-int64", Call(dsl.reshape, X, [2 ** 70]),
     dsl.InputError, rf"Reshape: shape \[{2 ** 70}\] does not fit in int64"),
    ("expand-impossible", Call(dsl.expand, np.zeros((3,), np.float32), [2, 0]),
     dsl.ShapeError, r"Expand: shapes \[1, 3\] and \[2, 0\] are not broadcastable: dim 3 vs 0"),
    ("expand-negative", Call(dsl.expand, X, [-1, 3]),
     dsl.ShapeError, r"Expand: shape \[-1, 3\] has a negative entry"),
    ("expand-int64-overflow", Call(dsl.expand, ONES, [BIG, BIG]),
     dsl.ShapeError, rf"Expand: broadcast shape \[{BIG}, {BIG}\] has \d+ elements, more than int64"),
    ("tensortype-int64-overflow", Call(dsl.TensorType, dsl.float32, (BIG, BIG)),
     dsl.ShapeError, rf"TensorType: shape \[{BIG}, {BIG}\] has \d+ elements, more than int64"),
    ("jit-add-int64-overflow", Call(lambda: _jit_add.lower(dsl.TensorType(dsl.float32, ("N", BIG)),
                                                         dsl.TensorType(dsl.float32, (BIG, 1)))),
     dsl.ShapeError, rf"Add \(node '\w+'\): broadcast shape \[{BIG}, {BIG}\] has \d+ elements"),
    ("transpose-repeated", Call(dsl.transpose, X, [0, 0]),
     dsl.ShapeError, r"Transpose: perm \[0, 0\] is not a permutation of \[0, 1\]"),
    ("transpose-short", Call(dsl.transpose, X, [0]),
     dsl.ShapeError, r"Transpose: perm \[0\] is not a permutation of \[0, 1\]"),
    ("transpose-out-of-range", Call(dsl.transpose, X, [0, 2]),
     dsl.ShapeError, r"Transpose: perm \[0, 2\] is not a permutation of \[0, 1\]"),
    ("from-packed-too-short", Call(dsl.Tensor.from_packed, np.zeros(1, np.uint8), "int4", (4,)),
     dsl.InputError, r"Tensor\.from_packed: buffer of 1 bytes is too short for int4\[4\]; expected at least 2"),
    ("object-array-non-strings", Call(dsl.unsqueeze, np.array([1, None], dtype=object), [0]),
     dsl.DTypeError, r"Unsqueeze: data is an object array holding non-strings"),
    ("object-array-add", Call(dsl.add, np.array([1, 2], dtype=object), np.array([1, 2], dtype=object)),
     dsl.DTypeError, r"Add: data is an object array holding non-strings"),
    ("structured-array", Call(dsl.unsqueeze, np.zeros(2, dtype=[("a", "i4")]), [0]),
     dsl.DTypeError, r"Unsqueeze: data: numpy dtype \[\('a', '<i4'\)\] has no ONNX element type"),
    ("structured-array-add", Call(dsl.add, np.zeros(2, dtype=[("a", "i4")]), np.zeros(2, dtype=[("a", "i4")])),
     dsl.DTypeError, r"Add: data: numpy dtype \[\('a', '<i4'\)\] has no ONNX element type"),
    ("opset-0", Call(dsl.unsqueeze, X, [0], opset=0),
     dsl.UnsupportedError, r"Unsqueeze: opset 0 is not supported; expected an int in \[1, 28\]"),
    ("opset-29", Call(dsl.cast, X, dsl.float64, opset=29),
     dsl.UnsupportedError, r"Cast: opset 29 is not supported; expected an int in \[1, 28\]"),
    ("jit-list-argument", Call(_jit_unsqueeze, [1.0, 2.0]),
     dsl.InputError, r"jit: argument 0 is a list; expected a numpy array or dsl\.Tensor"),
    ("jit-lower-list-argument", Call(_jit_unsqueeze.lower, [1.0, 2.0]),
     dsl.InputError, r"jit: argument 0 is a list; expected a numpy array, dsl\.Tensor or dsl\.TensorType"),
    ("expand-bytes-overflow", Call(dsl.expand, ONES, [HUGE, HUGE]),
     dsl.ShapeError, rf"Expand: output 0 float\[{HUGE},{HUGE}\] would need {4 * HUGE * HUGE} bytes, more than an "
                     rf"array can hold"),
    ("jit-expand-bytes-overflow", Call(lambda: dsl.jit(lambda x: dsl.expand(x, [HUGE, HUGE]) + 1.0)(ONES)),
     dsl.ShapeError, rf"Expand \(node '\w+'\): output 0 float\[{HUGE},{HUGE}\] would need {4 * HUGE * HUGE} bytes"),
    ("jit-missing-argument", Call(_jit_add, X),
     dsl.InputError, r"jit: _jit_add\(a, b\): missing a required argument: 'b'"),
    ("jit-unknown-keyword", Call(_jit_add, X, X, c=X),
     dsl.InputError, r"jit: _jit_add\(a, b\): got an unexpected keyword argument 'c'"),
    ("jit-not-a-function", Call(dsl.jit, 42),
     dsl.InputError, r"dsl\.jit: 42 is a int; expected a function of tensors"),
    ("jit-masked-array", Call(_jit_unsqueeze, np.ma.masked_array(X, X > 1)),
     dsl.InputError, r"jit: argument 0 is a numpy masked array; ONNX tensors have no mask"),
    ("jit-recursion", Call(_jit_recursive, X),
     dsl.DslError, r"jit: _jit_recursive calls itself while it is being traced \(recursion\)"),
    ("cache-limit-zero", Call(dsl.set_cache_limits, signatures=0),
     dsl.InputError, r"dsl\.set_cache_limits: signatures=0; expected a positive int"),
    ("cast-saturate-not-a-bool", Call(dsl.cast, X, "float8e4m3fn", saturate="no"),
     dsl.InputError, r"Cast: saturate='no'; expected a bool \(or 0 / 1\)"),
    ("compare-not-a-jit-function", Call(dsl.compare, len, X),
     dsl.InputError, r"dsl\.compare: <built-in function len> is a builtin_function_or_method; expected a @dsl\.jit"),
    ("rank-beyond-numpy", Call(dsl.unsqueeze, np.ones(1), list(range(65))),
     dsl.ShapeError, r"Unsqueeze: output rank 66 is more than the 64 dims a numpy array can have"),
    ("tensor-from-masked-array", Call(dsl.Tensor.from_numpy, np.ma.masked_array(X, X > 1)),
     dsl.InputError, r"Tensor\.from_numpy: the array is a numpy masked array"),
    ("jit-floordiv", Call(lambda: dsl.jit(lambda a: a // 2.0)(X)),
     dsl.UnsupportedError, r"jit: // on traced tensor %a is not supported"),
    # (indexing and .T are numpy's now: dsl/frontend.py; what stays out raises as before)
    ("jit-indexing", Call(lambda: dsl.jit(lambda a: a[a > 1])(X)),
     dsl.InputError, r"indexing %a: boolean mask indexing gives a data-dependent shape; use dsl.where"),
    ("jit-index-out-of-range", Call(lambda: dsl.jit(lambda a: a[7])(X)),
     dsl.InputError, r"indexing %a: index 7 is out of bounds for axis 0 with size"),
    ("jit-len", Call(lambda: dsl.jit(lambda a: len(a))(X)),
     dsl.UnsupportedError, r"jit: len\(\) on traced tensor %a is not supported"),
    ("jit-unknown-attribute", Call(lambda: dsl.jit(lambda a: a.flat)(X)),
     dsl.UnsupportedAttributeError, r"jit: traced tensor %a has no attribute 'flat'"),
    ("jit-called-with-a-type", Call(_jit_add, dsl.TensorType(dsl.float32, (2, 3)), X),
     dsl.InputError, r"jit: argument 0 is a dsl\.TensorType; a jit function runs on arrays"),
    ("jit-escaped-tracer", Call(lambda: dsl.add(_ESCAPED[0], X)),
     dsl.DslError, r"Add: a traced value of <lambda> was used after its trace ended"),
    ("jit-object-array", Call(_jit_unsqueeze, np.array([1, None], dtype=object)),
     dsl.DTypeError, r"jit: argument 0 is an object array holding non-strings"),
]


@pytest.fixture
def no_kernels(monkeypatch):
    """Fail the test if any numpy reference, view transform or generated kernel runs."""
    def forbidden(*args, **kwargs):
        raise AssertionError("a kernel ran before the input was rejected")

    for opdef in registry._REGISTRY.values():
        for name in ("reference", "tensor_reference", "view"):
            if getattr(opdef, name, None) is not None:
                monkeypatch.setattr(opdef, name, forbidden)
    monkeypatch.setattr(codegen_compile, "_import", forbidden)


@pytest.mark.parametrize("fn, error, pattern", [row[1:] for row in BAD], ids=[row[0] for row in BAD])
def test_bad_input_raises_dsl_error(no_kernels, fn, error, pattern):
    before = [_snapshot(a) for a in fn.arrays()]
    with pytest.raises(dsl.DslError) as info:
        fn()
    assert type(info.value) is error, f"{type(info.value).__name__}: {info.value}"
    assert info.match(pattern)
    assert [_snapshot(a) for a in fn.arrays()] == before  # inputs untouched


def _misaligned(shape=(2, 3)):
    buffer = np.arange(4 * int(np.prod(shape)) + 1, dtype=np.uint8)
    a = np.ndarray(shape, np.float32, buffer=buffer, offset=1)
    a[...] = np.arange(a.size, dtype=np.float32).reshape(shape)
    assert not a.flags.aligned
    return a


def _readonly():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    a.flags.writeable = False
    return a


@dsl.jit
def _jit_program(x):
    return dsl.transpose(dsl.cast(x, dsl.float64)) * 2.0 + 1.0


GOOD_INPUTS = {
    "zero-size": lambda: np.zeros((0, 3), np.float32),
    "rank-0": lambda: np.array(1.5, np.float32),
    "read-only": _readonly,
    "big-endian": lambda: np.arange(6, dtype=">f4").reshape(2, 3),
    "non-contiguous": lambda: np.arange(24, dtype=np.float32).reshape(4, 6)[::2, ::3],
    "misaligned": _misaligned,
}
GOOD_OPS = {
    "unsqueeze": (lambda x: dsl.unsqueeze(x, [0, -1]), lambda x: np.expand_dims(x, (0, -1))),
    "transpose": (dsl.transpose, np.transpose),
    "reshape": (lambda x: dsl.reshape(x, [-1]), lambda x: np.reshape(x, -1)),
    "cast": (lambda x: dsl.cast(x, dsl.float64), lambda x: x.astype(np.float64)),
    "jit": (_jit_program, lambda x: np.transpose(x.astype(np.float64)) * 2.0 + 1.0),
}


@pytest.mark.parametrize("op", GOOD_OPS)
@pytest.mark.parametrize("kind", GOOD_INPUTS)
def test_unusual_valid_input_matches_numpy(kind, op):
    x = GOOD_INPUTS[kind]()
    before = _snapshot(x)
    ours, ref = GOOD_OPS[op]
    out = np.asarray(ours(x))
    expected = ref(x)
    assert out.shape == expected.shape
    assert out.dtype.newbyteorder("=") == expected.dtype.newbyteorder("=")
    np.testing.assert_array_equal(out, expected)
    assert _snapshot(x) == before


FLOAT_TYPES = [t for t in dsl._dtypes.ALL if t.kind == "float"]
SPECIALS = np.array([np.nan, np.inf, -np.inf, 1.5, -0.0], np.float32)


@pytest.mark.parametrize("to", FLOAT_TYPES, ids=[t.onnx_name for t in FLOAT_TYPES])
def test_cast_nan_inf_to_every_float_type(to):
    # saturate=False is the plain IEEE-style conversion: it matches ml_dtypes bit for bit
    out = dsl.cast(SPECIALS, to, saturate=False)
    assert out.dtype == to.np_dtype
    np.testing.assert_array_equal(out.astype(np.float32), SPECIALS.astype(to.np_dtype).astype(np.float32))
    # saturate=True (the default): NaN stays NaN; float8 types clamp +-Inf to their largest finite value
    out = dsl.cast(SPECIALS, to).astype(np.float32)
    if to.onnx_name != "float4e2m1":  # float4 has no NaN
        assert np.isnan(out[0])
    if to.onnx_name.startswith("float8e") and "m0" not in to.onnx_name:
        top = float(ml_dtypes.finfo(to.np_dtype).max)
        assert out[1] == top and out[2] == -top
