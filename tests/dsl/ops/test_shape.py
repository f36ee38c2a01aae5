"""Tests for dsl/ops/shape.py: each shape op at every version and element type vs independent oracles."""
from __future__ import annotations

import itertools
import random
import re
from math import prod

import numpy as np
import onnx.defs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsl
from dsl import dtypes
from dsl.ir import Graph, Node, TensorType, Value
from dsl.ops import registry

from dsl_test_helpers import (as_tensor, assert_same, assert_schema_in_force_matches_onnx, factorizations, make_array,
                              registry_versions, snapshot)

LATEST = registry.LATEST_OPSET
SHAPE_OPS = ["Unsqueeze", "Squeeze", "Reshape", "Flatten", "Transpose", "Expand", "Shape"]


def agrees_with_oracle(oracle, expected) -> None:
    """A hand-picked case (shape, or the precise error regex) vs the oracle (shape or regex)."""
    if isinstance(expected, str):
        assert isinstance(oracle, str), oracle
    else:
        assert oracle == expected


def op_function(op: str):
    return getattr(dsl, op.lower())


def onnx_types(op: str, version: int) -> set[str]:
    """The element types onnx's own schema lists for the op's first input (or its output)."""
    schema = onnx.defs.get_schema(op, version)
    formal = (schema.inputs or schema.outputs)[0].type_str
    constraint = next(c for c in schema.type_constraints if c.type_param_str == formal)
    return {t[len("tensor("):-1] for t in constraint.allowed_type_strs if t.startswith("tensor(")}


# ---- schema tables ------------------------------------------------------------------------
@pytest.mark.parametrize("op", SHAPE_OPS)
def test_schema_in_force_at_every_opset_matches_onnx(op):
    for opset in range(1, LATEST + 1):
        assert_schema_in_force_matches_onnx(op, opset)


_V1_TYPES = set("bool complex64 complex128 float16 float double int8 int16 int32 int64 uint8 uint16 uint32 "
                "uint64 string".split())
_FLOAT8 = {"float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz"}
UNSQUEEZE_TYPES = {  # the TYPES.md table
    1: _V1_TYPES, 11: _V1_TYPES, 13: _V1_TYPES | {"bfloat16"},
    21: _V1_TYPES | {"bfloat16", "int4", "uint4"} | _FLOAT8,
    23: _V1_TYPES | {"bfloat16", "int4", "uint4", "float4e2m1"} | _FLOAT8,
    24: _V1_TYPES | {"bfloat16", "int4", "uint4", "float4e2m1", "float8e8m0"} | _FLOAT8,
    25: _V1_TYPES | {"bfloat16", "int4", "uint4", "float4e2m1", "float8e8m0", "int2", "uint2"} | _FLOAT8,
}


def test_unsqueeze_type_table_is_types_md():
    assert registry_versions("Unsqueeze") == sorted(UNSQUEEZE_TYPES)
    for version, names in UNSQUEEZE_TYPES.items():
        assert onnx_types("Unsqueeze", version) == names  # the table itself agrees with onnx
        assert {t.onnx_name for t in registry.get("Unsqueeze").schema(version).types} == names


@pytest.mark.parametrize("dt", dtypes.ALL, ids=lambda dt: dt.onnx_name)
@pytest.mark.parametrize("opset", range(1, LATEST + 1))
def test_unsqueeze_type_boundaries_at_every_opset(opset, dt):
    # e.g. float8 at opsets 13-20, bfloat16 at 11-12, float4e2m1 before 23, float8e8m0 before 24,
    # int2 before 25 are errors
    version = max(v for v in UNSQUEEZE_TYPES if v <= opset)
    data = make_array(dt, (3,))
    if dt.onnx_name in UNSQUEEZE_TYPES[version]:
        assert_same(dsl.unsqueeze(data, [1], opset=opset), data.reshape(3, 1))
        return
    with pytest.raises(dsl.DTypeError, match=rf"^Unsqueeze: input 'data' has type {dt.onnx_name}\[3\], "
                                             rf"not allowed at version {version}"):
        dsl.unsqueeze(data, [1], opset=opset)


# ---- every op x every version x every element type ----------------------------------------
EXAMPLES = {  # op -> (input shape, arguments, numpy oracle); axes deliberately unsorted
    "Unsqueeze": ((2, 3), {"axes": [3, 0]}, lambda a: a.reshape(1, 2, 3, 1)),
    "Squeeze": ((1, 3, 1), {"axes": [2, 0]}, lambda a: a.reshape(3)),
    "Reshape": ((2, 3, 4), {"shape": [0, -1]}, lambda a: a.reshape(2, 12)),
    "Flatten": ((2, 3, 4), {"axis": 2}, lambda a: a.reshape(6, 4)),
    "Transpose": ((2, 3, 4), {"perm": [2, 0, 1]}, lambda a: a.transpose(2, 0, 1)),
    "Expand": ((3, 1), {"shape": [2, 1, 4]}, lambda a: np.broadcast_to(a, (2, 3, 4))),
    "Shape": ((2, 3, 4), {}, lambda a: np.array([2, 3, 4], np.int64)),
}
TYPE_CASES = [(op, version, dt) for op in SHAPE_OPS for version in registry_versions(op) for dt in dtypes.ALL]
TYPE_PARAMS = [pytest.param(op, version, dt, packed, id=f"{op}-{version}-{dt.onnx_name}-"
                            f"{'tensor' if packed else 'numpy'}")
               for op, version, dt in TYPE_CASES for packed in (False, True)]


@pytest.mark.parametrize("op, version, dt, packed", TYPE_PARAMS)
def test_every_version_and_element_type(op, version, dt, packed):
    shape, arguments, oracle = EXAMPLES[op]
    data = make_array(dt, shape, seed=version)
    before = snapshot(data)
    given = as_tensor(data) if packed else data
    if dt.onnx_name not in onnx_types(op, version):
        with pytest.raises(dsl.DTypeError, match=rf"^{op}: input '(data|input)' has type "
                                                 rf"{dt.onnx_name}\[.*not allowed at version {version}"):
            op_function(op)(given, **arguments, opset=version)
        return
    out = op_function(op)(given, **arguments, opset=version)
    if packed:
        assert isinstance(out, dsl.Tensor)
        if op != "Shape":
            assert out.buffer is given.buffer  # a view of the same (packed) bytes
        out = out.numpy()
    elif op != "Shape":
        assert np.shares_memory(out, data) and out is not data
    assert_same(out, oracle(data))
    assert snapshot(data) == before


# ---- Unsqueeze ----------------------------------------------------------------------------
def unsqueeze_oracle(in_shape, axes, opset):
    """TYPES.md: the output shape, or a regex the error message must match."""
    out_rank = len(in_shape) + len(axes)
    low = 0 if opset < 11 else -out_rank
    for axis in axes:
        if not low <= axis < out_rank:
            return rf"^Unsqueeze: axis {axis} (out of range|is negative)"
    normalized = [axis + out_rank if axis < 0 else axis for axis in axes]
    if len(set(normalized)) != len(normalized):
        return rf"^Unsqueeze: axes {re.escape(str(list(axes)))} repeat axis"
    dims = iter(in_shape)
    return tuple(1 if k in normalized else next(dims) for k in range(out_rank))


def check_unsqueeze(data, axes, opset, expected):
    """Run dsl.unsqueeze and check it against an oracle result (shape or error regex)."""
    before = snapshot(data)
    call = lambda: dsl.unsqueeze(data, axes, opset=opset)  # noqa: E731
    if isinstance(expected, str):
        with pytest.raises(dsl.ShapeError, match=expected):
            call()
    else:
        out = call()
        positions = sorted(int(a) + len(expected) if a < 0 else int(a) for a in axes)
        assert_same(out, data.reshape(expected))
        assert_same(out, np.expand_dims(data, tuple(positions)))
        assert out is not data and (out.size == 0 or np.shares_memory(out, data))
    assert snapshot(data) == before


def test_unsqueeze_random_differential():
    rng = random.Random(20240611)
    arrays = {}
    for case in range(4000):
        opset = rng.randint(1, LATEST)
        in_shape = tuple(rng.choice([0, 1, 2, 3]) for _ in range(rng.randint(0, 4)))
        out_rank = len(in_shape) + rng.randint(0, 4)
        axes = [rng.randint(-out_rank - 1, out_rank) for _ in range(out_rank - len(in_shape))]
        dt = rng.choice(dtypes.ALL)
        key = (dt, in_shape)
        data = arrays.setdefault(key, make_array(dt, in_shape, seed=case))
        form = rng.choice([list, tuple, lambda a: np.array(a, np.int64)])
        if dt.onnx_name not in UNSQUEEZE_TYPES[registry.get("Unsqueeze").schema(opset).version]:
            with pytest.raises(dsl.DTypeError, match=rf"^Unsqueeze: input 'data' has type {dt.onnx_name}\["):
                dsl.unsqueeze(data, form(axes), opset=opset)
            continue
        expected = unsqueeze_oracle(in_shape, axes, opset)
        check_unsqueeze(data, form(axes), opset, expected)
        if not isinstance(expected, str) and rng.random() < 0.2:
            tensor = as_tensor(data)
            out = dsl.unsqueeze(tensor, axes, opset=opset)
            assert out.shape == expected and out.buffer is tensor.buffer
            assert_same(out.numpy(), data.reshape(expected))


@pytest.mark.parametrize("opset, in_shape, axes, expected", [
    # onnx's reference evaluator applies axes one by one with np.expand_dims: wrong or failing here
    (1, (3, 4), [2, 0], (1, 3, 1, 4)),
    (11, (3, 4), [2, 0], (1, 3, 1, 4)),
    (11, (3, 4), [3, 1, 0], (1, 1, 3, 1, 4)),
    (11, (5,), [-3, 1], (1, 1, 5)),
    (11, (5,), [1, -3], (1, 1, 5)),
    (12, (2, 3), [-1, 0], (1, 2, 3, 1)),
    (13, (2, 3), [-1, 1, -5], (1, 1, 2, 3, 1)),
    # duplicates that only normalization reveals (onnx's version-11 shape inference misses them)
    (11, (5,), [0, -3], r"^Unsqueeze: axes \[0, -3\] repeat axis 0"),
    (13, (), [0, -2], r"^Unsqueeze: axes \[0, -2\] repeat axis 0"),
    (25, (), [1, -1], r"^Unsqueeze: axes \[1, -1\] repeat axis 1"),
    (13, (2,), [2, 2], r"^Unsqueeze: axes \[2, 2\] repeat axis 2"),
    # negative axes at version 1 (opsets 1-10) are errors (onnxruntime accepts them)
    (1, (2, 3), [-1], r"^Unsqueeze: axis -1 is negative; version 1"),
    (10, (2, 3), [0, -2], r"^Unsqueeze: axis -2 is negative; version 1"),
    # range is that of the OUTPUT rank
    (13, (2, 3), [3], r"^Unsqueeze: axis 3 out of range \[-3, 2\] for output rank 3"),
    (13, (2, 3), [-4], r"^Unsqueeze: axis -4 out of range \[-3, 2\] for output rank 3"),
    (1, (2, 3), [3], r"^Unsqueeze: axis 3 out of range \[0, 2\]"),
    (13, (2, 3), [4, 0], r"^Unsqueeze: axis 4 out of range \[-4, 3\]"),
    # empty axes: the identity (a new view)
    (1, (2, 3), [], (2, 3)),
    (13, (2, 3), [], (2, 3)),
    (13, (), [0], (1,)),
    (13, (0, 2), [0, 3], (1, 0, 2, 1)),
])
def test_unsqueeze_hand_picked(opset, in_shape, axes, expected):
    agrees_with_oracle(unsqueeze_oracle(in_shape, axes, opset), expected)
    check_unsqueeze(make_array(dtypes.dtype("float"), in_shape), axes, opset, expected)


@pytest.mark.parametrize("opset", [13, 21, 25, LATEST])
def test_unsqueeze_axes_tensor_must_be_1d_int64(opset):
    data = np.zeros((2, 3), np.float32)
    with pytest.raises(dsl.DTypeError, match=r"^Unsqueeze: input 'axes' has type int32\[2\]"):
        dsl.unsqueeze(data, np.array([0, 1], np.int32), opset=opset)
    with pytest.raises(dsl.ShapeError, match=r"^Unsqueeze: axes must be a 1-D int64 tensor, got shape \[1, 2\]"):
        dsl.unsqueeze(data, np.array([[0, 1]], np.int64), opset=opset)
    with pytest.raises(dsl.ShapeError, match=r"^Unsqueeze: axes must be a 1-D int64 tensor, got shape \[\]"):
        dsl.unsqueeze(data, np.array(0, np.int64), opset=opset)


# ---- Squeeze ------------------------------------------------------------------------------
def squeeze_oracle(in_shape, axes, opset):
    """Spec: axes None -> every size-1 dim; listed axes (a set) must have size 1."""
    rank = len(in_shape)
    if axes is None:
        return tuple(d for d in in_shape if d != 1)
    low = 0 if opset < 11 else -rank
    for axis in axes:
        if not low <= axis < rank:
            return rf"^Squeeze: axis {axis} (out of range|is negative)"
    chosen = {axis % rank for axis in axes} if rank else set()
    for axis in sorted(chosen):
        if in_shape[axis] != 1:
            return rf"^Squeeze: cannot squeeze axis {axis} of size {in_shape[axis]} in shape"
    return tuple(d for k, d in enumerate(in_shape) if k not in chosen)


def test_squeeze_random_differential():
    rng = random.Random(77)
    for case in range(1500):
        opset = rng.randint(1, LATEST)
        in_shape = tuple(rng.choice([1, 1, 0, 2]) for _ in range(rng.randint(0, 4)))
        rank = len(in_shape)
        axes = None if rng.random() < 0.2 else \
            [rng.randint(-rank - 1, rank) for _ in range(rng.randint(0, rank + 1))]
        data = make_array(dtypes.dtype("int16"), in_shape, seed=case)
        before = snapshot(data)
        expected = squeeze_oracle(in_shape, axes, opset)
        if isinstance(expected, str):
            with pytest.raises(dsl.ShapeError, match=expected):
                dsl.squeeze(data, axes, opset=opset)
            continue
        out = dsl.squeeze(data, axes, opset=opset)
        assert_same(out, data.reshape(expected))
        assert out is not data and (out.size == 0 or np.shares_memory(out, data))
        assert snapshot(data) == before


@pytest.mark.parametrize("opset", registry_versions("Squeeze"))
def test_squeeze_explicit_empty_axes_removes_nothing(opset):
    # Spec: "If `axes` is not provided, all the single dimensions will be removed": [] IS provided
    # (onnxruntime, and onnx's reference at version 11, squeeze everything instead).
    data = make_array(dtypes.dtype("float"), (1, 3, 1))
    out = dsl.squeeze(data, [], opset=opset)
    assert out.shape == (1, 3, 1) and out is not data and np.shares_memory(out, data)
    assert dsl.squeeze(data, opset=opset).shape == (3,)


@pytest.mark.parametrize("opset, axes, expected", [
    (11, [0, 0], (3, 1)), (11, [0, -3], (3, 1)), (13, [2, -1, 2], (1, 3)), (1, [0, 0, 2], (3,)),
    (1, [-1], r"^Squeeze: axis -1 is negative; version 1"),
    (13, [1], r"^Squeeze: cannot squeeze axis 1 of size 3 in shape \[1, 3, 1\]"),
    (13, [-2], r"^Squeeze: cannot squeeze axis 1 of size 3"),
    (13, [3], r"^Squeeze: axis 3 out of range \[-3, 2\] for input rank 3"),
    (13, [-4], r"^Squeeze: axis -4 out of range \[-3, 2\]"),
])
def test_squeeze_hand_picked(opset, axes, expected):
    # Squeeze's text (unlike Unsqueeze's) never forbids repeats: the listed axes form a set.
    agrees_with_oracle(squeeze_oracle((1, 3, 1), axes, opset), expected)
    data = make_array(dtypes.dtype("float"), (1, 3, 1))
    if isinstance(expected, str):
        with pytest.raises(dsl.ShapeError, match=expected):
            dsl.squeeze(data, axes, opset=opset)
    else:
        assert_same(dsl.squeeze(data, axes, opset=opset), data.reshape(expected))


# ---- Reshape ------------------------------------------------------------------------------
def reshape_oracle(in_shape, spec, allowzero):
    """Spec text: at most one -1 (inferred), 0 copies the input dim unless allowzero."""
    bad = rf"^Reshape: .*{re.escape(str(list(spec)))}"
    if any(d < -1 for d in spec) or spec.count(-1) > 1 or (allowzero and 0 in spec and -1 in spec):
        return bad
    if not allowzero and any(d == 0 and k >= len(in_shape) for k, d in enumerate(spec)):
        return bad
    out = [in_shape[k] if d == 0 and not allowzero else d for k, d in enumerate(spec)]
    if -1 in out:
        known = prod(d for d in out if d != -1)
        if known == 0 or prod(in_shape) % known:
            return bad
        out[out.index(-1)] = prod(in_shape) // known
    return tuple(out) if prod(out) == prod(in_shape) else bad


def random_spec(rng, in_shape):
    total = prod(in_shape)
    spec = []
    while total > 1 and len(spec) < 4:
        factor = rng.choice([f for f in range(2, total + 1) if total % f == 0])
        spec.append(factor)
        total //= factor
    spec += [1] * rng.randint(0, 1) + ([0] if 0 in in_shape or rng.random() < 0.2 else [])
    rng.shuffle(spec)
    for _ in range(rng.randint(0, 2)):
        k = rng.randrange(len(spec) + 1)
        spec[k:k + 1] = [rng.choice([-1, 0, -2, 3, in_shape[k] if k < len(in_shape) else 2])]
    return spec


def test_reshape_random_differential():
    rng = random.Random(5)
    for case in range(1500):
        opset = rng.randint(1, LATEST)
        in_shape = tuple(rng.choice([0, 1, 2, 3, 4]) for _ in range(rng.randint(0, 4)))
        spec = random_spec(rng, in_shape)
        allowzero = rng.randint(0, 1) if opset >= 14 else 0
        data = make_array(dtypes.dtype("double"), in_shape, seed=case)
        expected = reshape_oracle(in_shape, spec, allowzero)
        if isinstance(expected, str):
            with pytest.raises(dsl.ShapeError, match=expected):
                dsl.reshape(data, spec, allowzero=allowzero, opset=opset)
            continue
        out = dsl.reshape(data, spec, allowzero=allowzero, opset=opset)
        assert_same(out, data.reshape(expected))
        assert out is not data and (out.size == 0 or np.shares_memory(out, data))


@pytest.mark.parametrize("in_shape, spec, allowzero, expected", [
    ((2, 3, 4), [0, 0, -1], 0, (2, 3, 4)),
    ((2, 3, 4), [-1], 0, (24,)),
    ((1,), [], 0, ()),
    ((), [1, -1], 0, (1, 1)),
    ((0, 3), [-1, 3], 0, (0, 3)),        # -1 next to non-zero dims of an empty input is 0
    ((0, 3), [-1, 0], 0, (0, 3)),        # 0 copies 3
    ((2, 0), [0, -1], 0, (2, 0)),
    ((3, 0), [-1, 0], 0, r"^Reshape: cannot reshape \[3, 0\] \(0 elements\) to \[-1, 0\]: the -1"),
    ((0, 3), [0, 3], 1, (0, 3)),         # allowzero: a real 0
    ((0, 3), [3, 0], 1, (3, 0)),
    ((2, 3), [3, 0], 0, r"^Reshape: cannot reshape \[2, 3\] \(6 elements\) to \[3, 0\] \(9 elements\)"),
    ((0, 3), [0, -1], 1, r"^Reshape: shape \[0, -1\] has both 0 and -1 with allowzero=1"),
    ((2, 3), [0, 0, 0], 0, r"^Reshape: shape \[0, 0, 0\] copies dim 2 \(0\) but the input has rank 2"),
    ((2, 3), [-1, -1], 0, r"^Reshape: shape \[-1, -1\] has more than one -1"),
    ((2, 3), [-2, -3], 0, r"^Reshape: shape \[-2, -3\] has an entry below -1"),
    ((2, 3), [4, -1], 0, r"^Reshape: cannot reshape \[2, 3\] \(6 elements\) to \[4, -1\]"),
])
def test_reshape_hand_picked(in_shape, spec, allowzero, expected):
    agrees_with_oracle(reshape_oracle(in_shape, spec, allowzero), expected)
    data = make_array(dtypes.dtype("float"), in_shape)
    if isinstance(expected, str):
        with pytest.raises(dsl.ShapeError, match=expected):
            dsl.reshape(data, spec, allowzero=allowzero)
    else:
        assert_same(dsl.reshape(data, spec, allowzero=allowzero), data.reshape(expected))


@pytest.mark.parametrize("opset", [o for o in range(14, LATEST + 1)])
def test_reshape_allowzero_must_be_0_or_1(opset):
    with pytest.raises(dsl.InputError, match=r"^Reshape: attribute 'allowzero' = 2; expected 0 or 1"):
        dsl.reshape(np.zeros((2, 3)), [3, 2], allowzero=2, opset=opset)


@st.composite
def strided_arrays(draw):
    """A float32 array viewed through a random permutation and step slicing, and a new shape."""
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    base = np.arange(prod(shape), dtype=np.float32).reshape(shape)
    perm = draw(st.permutations(range(len(shape))))
    steps = tuple(slice(None, None, draw(st.sampled_from([1, 1, 2, -1]))) for _ in shape)
    array = base.transpose(perm)[steps]
    return array, perm, draw(st.permutations(draw(factorizations(array.size))))


@settings(max_examples=200, deadline=None)
@given(strided_arrays())
def test_reshape_is_a_view_exactly_when_numpy_needs_no_copy(case):
    array, _, new_shape = case
    expected = np.reshape(array, new_shape)
    numpy_view = np.shares_memory(expected, array)
    out = dsl.reshape(array, list(new_shape))
    assert_same(out, expected)
    assert np.shares_memory(out, array) == numpy_view
    tensor = dsl.Tensor.from_numpy(array)
    out = dsl.reshape(tensor, list(new_shape))
    assert (out.buffer is tensor.buffer) == numpy_view
    assert_same(out.numpy(), expected)


@settings(max_examples=100, deadline=None)
@given(strided_arrays())
def test_packed_reshape_after_transpose_is_a_view_exactly_when_numpy_is(case):
    array, perm, new_shape = case
    codes = make_array(dtypes.dtype("int4"), array.shape)
    base = np.ascontiguousarray(codes.transpose(np.argsort(perm)))  # codes == base.transpose(perm)
    moved = dsl.transpose(as_tensor(base), list(perm))
    out = dsl.reshape(moved, list(new_shape))
    assert (out.buffer is moved.buffer) == np.shares_memory(np.reshape(base.transpose(perm), new_shape), base)
    assert_same(out.numpy(), np.reshape(base.transpose(perm), new_shape))


# ---- Flatten ------------------------------------------------------------------------------
@pytest.mark.parametrize("opset", registry_versions("Flatten"))
def test_flatten_every_axis_and_rank(opset):
    # versions 1, 9: axis in [0, R]; 11+: [-r, r]
    for rank in range(5):
        in_shape = (2, 0, 3, 1)[:rank] if rank == 4 else (2, 3, 1, 4)[:rank]
        data = make_array(dtypes.dtype("float16"), in_shape)
        for axis in range(-rank - 2, rank + 3):
            low = 0 if opset < 11 else -rank
            if not low <= axis <= rank:
                with pytest.raises(dsl.ShapeError, match=rf"^Flatten: axis {axis} out of range \[{low}, {rank}\]"):
                    dsl.flatten(data, axis, opset=opset)
                continue
            split = axis + rank if axis < 0 else axis
            out = dsl.flatten(data, axis, opset=opset)
            assert_same(out, data.reshape(prod(in_shape[:split]), prod(in_shape[split:])))
            assert out.size == 0 or np.shares_memory(out, data)


def test_flatten_default_axis_is_1_and_rank0_needs_axis_0():
    assert dsl.flatten(np.zeros((2, 3, 4))).shape == (2, 12)
    assert dsl.flatten(np.float32(7)[()], 0).shape == (1, 1)
    with pytest.raises(dsl.ShapeError, match=r"^Flatten: axis 1 out of range \[0, 0\] for input rank 0"):
        dsl.flatten(np.array(7.0))


# ---- Transpose ----------------------------------------------------------------------------
@pytest.mark.parametrize("opset", registry_versions("Transpose"))
def test_transpose_every_permutation_and_bad_perm(opset):
    for rank in range(5):
        data = make_array(dtypes.dtype("complex64"), (2, 3, 1, 4)[:rank])
        perms = [None, *map(list, itertools.permutations(range(rank)))]
        perms += [[0] * rank, list(range(rank + 1)), list(range(-1, rank - 1)), [-1, 0][:rank]]
        for perm in perms:
            valid = perm is None or sorted(perm) == list(range(rank))
            if not valid:
                # Spec: "`perm` must contain each axis index in `[0, n-1]` exactly once": -1 too
                with pytest.raises(dsl.ShapeError, match=rf"^Transpose: perm {re.escape(str(perm))}"):
                    dsl.transpose(data, perm, opset=opset)
                continue
            out = dsl.transpose(data, perm, opset=opset)
            assert_same(out, np.transpose(data, perm))
            assert np.shares_memory(out, data)


# ---- Expand -------------------------------------------------------------------------------
def expand_oracle(in_shape, spec):
    """Spec: right-aligned; two dims must be equal or one of them 1."""
    if any(d < 0 for d in spec):
        return rf"^Expand: shape {re.escape(str(spec))} has a negative entry"
    rank = max(len(in_shape), len(spec))
    left = (1,) * (rank - len(in_shape)) + tuple(in_shape)
    right = (1,) * (rank - len(spec)) + tuple(spec)
    out = []
    for a, b in zip(left, right):
        if a != b and 1 not in (a, b):
            return rf"^Expand: shapes .* are not broadcastable: dim {a} vs {b}$"
        out.append(b if a == 1 else a)
    return tuple(out)


@pytest.mark.parametrize("opset", [8, 12, 13, LATEST])
def test_expand_random_differential(opset):
    rng = random.Random(opset)
    for case in range(400):
        in_shape = tuple(rng.choice([0, 1, 1, 2, 3]) for _ in range(rng.randint(0, 3)))
        spec = [rng.choice([0, 1, 2, 3, -1] if rng.random() < 0.1 else [0, 1, 1, 2, 3])
                for _ in range(rng.randint(0, 4))]
        data = make_array(dtypes.dtype("uint8"), in_shape, seed=case)
        expected = expand_oracle(in_shape, spec)
        if isinstance(expected, str):
            with pytest.raises(dsl.ShapeError, match=expected):
                dsl.expand(data, spec, opset=opset)
            continue
        out = dsl.expand(data, spec, opset=opset)
        assert_same(out, np.broadcast_to(data, expected).copy())
        assert out.size == 0 or (np.shares_memory(out, data) and not out.flags.writeable)


@pytest.mark.parametrize("in_shape, spec, expected", [
    ((1,), [0], (0,)), ((0,), [1], (0,)), ((0, 1), [3, 1, 2], (3, 0, 2)), ((2, 3), [3], (2, 3)),
    ((2, 3), [1, 1], (2, 3)), ((3, 1), [2, 1, 6], (2, 3, 6)), ((), [], ()),
    ((2,), [0], r"^Expand: shapes \[2\] and \[0\] are not broadcastable: dim 2 vs 0$"),
    ((0,), [3], r"^Expand: shapes \[0\] and \[3\] are not broadcastable: dim 0 vs 3$"),
    ((2, 3), [-1, 3], r"^Expand: shape \[-1, 3\] has a negative entry"),
])
def test_expand_hand_picked(in_shape, spec, expected):
    agrees_with_oracle(expand_oracle(in_shape, spec), expected)
    data = make_array(dtypes.dtype("bool"), in_shape)
    if isinstance(expected, str):
        with pytest.raises(dsl.ShapeError, match=expected):
            dsl.expand(data, spec)
    else:
        assert_same(dsl.expand(data, spec), np.broadcast_to(data, expected).copy())


# ---- Shape --------------------------------------------------------------------------------
BOUNDS = [None, *range(-6, 7), 2 ** 63 - 1, -2 ** 63]


@pytest.mark.parametrize("opset", [15, 19, 21, 23, 24, 25, LATEST])
def test_shape_start_end_clamp_like_python_slicing(opset):
    # Spec: clamped to [0, r] after adding r to negatives; start > end gives an empty shape:
    # exactly Python's slice semantics on the list of dims.
    for rank in range(4):
        data = make_array(dtypes.dtype("string"), (2, 0, 5)[:rank])
        for start, end in itertools.product(BOUNDS, BOUNDS):
            out = dsl.shape(data, start=start or 0, end=end, opset=opset)
            assert_same(out, np.array(list(data.shape)[start:end], np.int64))


@pytest.mark.parametrize("opset", [1, 13, 14])
def test_shape_before_15_has_no_start_end(opset):
    assert_same(dsl.shape(np.zeros((2, 3)), opset=opset), np.array([2, 3], np.int64))
    with pytest.raises(dsl.InputError, match=r"^Shape: argument start=1 does not exist at opset version"):
        dsl.shape(np.zeros((2, 3)), start=1, opset=opset)
    with pytest.raises(dsl.InputError, match=r"^Shape: argument end=-1 does not exist at opset version"):
        dsl.shape(np.zeros((2, 3)), end=-1, opset=opset)


# ---- the graph path: symbolic dims, axes known only at run time ---------------------------
def one_node_program(op, opset, in_types, attrs=None, initializers=None):
    inputs = [Value(f"in{k}", t) for k, t in enumerate(in_types)]
    values = {name: Value(name) for name in (initializers or {})}
    output = Value("out")
    node = Node(op, [*inputs, *values.values()], [output], attrs or {}, name="n0")
    graph = Graph("g", inputs, [output], [node], dict(initializers or {}), opset)
    return dsl.Program(graph)


@pytest.mark.parametrize("op, opset, in_types, attrs, initializers, expected", [
    ("Unsqueeze", 13, [TensorType("float", ("N", 3))], None, {"axes": np.array([-1, 0])}, (1, "N", 3, 1)),
    ("Unsqueeze", 11, [TensorType("float", ("N", 3))], {"axes": [1]}, None, ("N", 1, 3)),
    ("Unsqueeze", 13, [TensorType("float", ("N", 3)), TensorType("int64", (2,))], None, None, None),
    ("Squeeze", 13, [TensorType("float", ("N", 1))], None, {"axes": np.array([1])}, ("N",)),
    ("Squeeze", 13, [TensorType("float", ("N", 1))], None, None, None),
    ("Reshape", 13, [TensorType("float", ("N", 3, 4))], None, {"shape": np.array([0, -1])}, ("N", None)),
    ("Flatten", 13, [TensorType("float", ("N", 3, 0))], {"axis": 1}, None, ("N", 0)),
    ("Expand", 13, [TensorType("float", ("N", 1))], None, {"shape": np.array([2, 1, 5])}, (2, "N", 5)),
    ("Transpose", 13, [TensorType("float", ("N", 3))], None, None, (3, "N")),
    ("Shape", 15, [TensorType("float", ("N", 3, 4))], {"start": 1}, None, (2,)),
])
def test_symbolic_shape_inference(op, opset, in_types, attrs, initializers, expected):
    program = one_node_program(op, opset, in_types, attrs, initializers)
    assert program.output_types[0].shape == expected


def test_graph_axes_known_only_at_run_time_are_checked_at_run_time():
    program = one_node_program("Unsqueeze", 13, [TensorType("float", (2, 3)), TensorType("int64", (None,))])
    data = make_array(dtypes.dtype("float"), (2, 3))
    out = program.run({"in0": data, "in1": np.array([3, 0], np.int64)})[0]
    assert_same(out, data.reshape(1, 2, 3, 1))
    with pytest.raises(dsl.ShapeError, match=r"^Unsqueeze \(node 'n0'\): axes \[0, -4\] repeat axis 0"):
        program.run({"in0": data, "in1": np.array([0, -4], np.int64)})


@pytest.mark.parametrize("opset", [1, 4])
def test_graph_reshape_1_requires_its_shape_attribute(opset):
    with pytest.raises(dsl.InputError, match=r"^Reshape \(node 'n0'\): missing required attribute 'shape'"):
        one_node_program("Reshape", opset, [TensorType("float", (2, 3))])
    program = one_node_program("Reshape", opset, [TensorType("float", (2, 3))], {"shape": [3, -1]})
    assert program.output_types[0].shape == (3, 2)
