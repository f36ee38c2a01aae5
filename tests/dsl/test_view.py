"""Property tests of dsl/view.py: every View transform against numpy's view of the same memory."""
from math import prod

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.lib.stride_tricks import as_strided

from dsl.tensor import _span_of
from dsl.view import BlockedView, View, contiguous_strides

from dsl_test_helpers import factorizations

ITEMSIZE = np.dtype(np.int32).itemsize
# Bounded so the file runs in seconds: the subtle algorithms (slice, reshape, compose) get 200
# examples, the one-line transforms 100.
PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SIMPLE = settings(PROPERTY, max_examples=100)


# ---- helpers: numpy arrays that are views of one base buffer of distinct values ---------------
def address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def view_of(array: np.ndarray, base: np.ndarray) -> View:
    """The View (element units, relative to ``base``) numpy uses for ``array``."""
    assert all(stride % ITEMSIZE == 0 for stride in array.strides)
    offset = (address(array) - address(base)) // ITEMSIZE
    return View(array.shape, tuple(stride // ITEMSIZE for stride in array.strides), offset)


def materialize(base: np.ndarray, view: View) -> np.ndarray:
    if view.size == 0:
        return np.empty(view.shape, base.dtype)
    low, high = view.span()
    assert 0 <= low and high <= base.size, "view reads outside its buffer"
    return as_strided(base[view.offset:], view.shape, tuple(s * ITEMSIZE for s in view.strides),
                      writeable=False)


def canonical_strides(array: np.ndarray) -> tuple[int, ...]:
    return tuple(0 if dim == 1 else stride // ITEMSIZE for dim, stride in zip(array.shape, array.strides))


def assert_view_is(view: View, array: np.ndarray, base: np.ndarray) -> None:
    """``view`` reads exactly the memory numpy's ``array`` reads (base holds distinct values)."""
    assert view.shape == array.shape
    if array.size:
        assert view.strides == canonical_strides(array)
        assert view.offset == view_of(array, base).offset
        np.testing.assert_array_equal(materialize(base, view), array)


def reshape_or_none(array: np.ndarray, shape) -> np.ndarray | None:
    """numpy's reshape when it needs no copy, else None."""
    try:
        return array.reshape(shape, copy=False)
    except ValueError:
        return None
    except TypeError:  # numpy < 2.1 has no copy=; a reshape that copies shares no memory
        out = array.reshape(shape)
        return out if np.shares_memory(out, array) else None


# ---- strategies ------------------------------------------------------------------------------
@st.composite
def transformed(draw, array: np.ndarray) -> np.ndarray:
    """``array`` after up to 4 random numpy view transforms (transpose, slice, flip, broadcast)."""
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(TRANSFORM_KINDS)
        if kind == "transpose" and array.ndim > 1:
            array = array.transpose(draw(st.permutations(range(array.ndim))))
        elif kind in ("slice", "flip") and array.ndim:
            axis = draw(st.integers(0, array.ndim - 1))
            index = [slice(None)] * array.ndim
            index[axis] = draw(SLICES) if kind == "slice" else slice(None, None, -1)
            array = array[tuple(index)]
        elif kind == "broadcast":
            array = np.broadcast_to(array, draw(broadcast_targets(array.shape)))
    return array


@st.composite
def strided_arrays(draw) -> tuple[np.ndarray, np.ndarray]:
    """(base, array): base is contiguous np.arange, array a strided view into it."""
    shape = tuple(draw(st.lists(st.integers(1, 4), max_size=4)))
    start = draw(st.integers(0, 3))
    base = np.arange(prod(shape) + start + 2, dtype=np.int32)
    array = base[start:start + prod(shape)].reshape(shape)
    return base, draw(transformed(array))


_BOUND = st.one_of(st.none(), st.integers(-5, 5))
SLICES = st.builds(slice, _BOUND, _BOUND, st.sampled_from([None, 1, 2, 3, -1, -2, -3]))
TRANSFORM_KINDS = st.sampled_from(["transpose", "slice", "flip", "broadcast"])


@st.composite
def broadcast_targets(draw, shape) -> tuple[int, ...]:
    size = st.sampled_from([0, 1, 2, 2, 3, 3])  # an empty result now and then, not half the time
    lead = draw(st.lists(size, max_size=2))
    return tuple(lead) + tuple(draw(size) if dim == 1 else dim for dim in shape)


# ---- construction ----------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(), (1,), (3,), (4, 1, 3), (1, 1), (2, 3, 4)])
def test_contiguous_strides_match_numpy(shape):
    array = np.empty(shape, np.int32)
    assert contiguous_strides(shape) == canonical_strides(array)
    view = View.contiguous(shape, offset=5)
    assert (view.shape, view.strides, view.offset) == (shape, canonical_strides(array), 5)
    assert view.is_contiguous and view.rank == len(shape) and view.size == array.size


@pytest.mark.parametrize("shape, strides", [((0,), (1,)), ((2, 0, 3), (3, 3, 1)), ((3, 0), (1, 1))])
def test_contiguous_strides_of_empty_shapes(shape, strides):
    # numpy's strides of empty arrays are arbitrary; View treats 0 dims as 1 (numpy's C-order fill).
    assert contiguous_strides(shape) == strides
    assert View.contiguous(shape).is_contiguous and View(shape, (7,) * len(shape)).is_contiguous


def test_size_one_dims_get_stride_zero():
    assert View((1, 3, 1), (7, 1, 9), 2) == View((1, 3, 1), (0, 1, 0), 2)
    assert View((1, 3, 1), (7, 1, 9)).strides == (0, 1, 0)


@SIMPLE
@given(strided_arrays())
def test_view_of_numpy_array(case):
    base, array = case
    view = view_of(array, base)
    assert_view_is(view, array, base)
    assert view.is_contiguous == array.flags.c_contiguous
    if array.size:
        index = np.indices(array.shape)
        positions = view.offset + sum((index[k] * view.strides[k] for k in range(array.ndim)), np.zeros(()))
        assert view.span() == (positions.min(), positions.max() + 1)
    else:
        assert view.span() == (view.offset, view.offset)


@SIMPLE
@given(strided_arrays())
def test_span_of_covers_exactly_the_array(case):
    _, array = case
    flat, view = _span_of(array)
    assert flat.ndim == 1 and flat.dtype == array.dtype
    assert view.shape == array.shape
    if array.size:
        assert np.shares_memory(flat, array)
        assert view.span() == (0, flat.size)
        assert view.strides == canonical_strides(array)
        np.testing.assert_array_equal(materialize(flat, view), array)


# ---- transforms ------------------------------------------------------------------------------
@SIMPLE
@given(strided_arrays(), st.data())
def test_unsqueeze(case, data):
    base, array = case
    out_rank = array.ndim + data.draw(st.integers(0, 3))
    axes = data.draw(st.lists(st.integers(0, out_rank - 1), min_size=out_rank - array.ndim,
                              max_size=out_rank - array.ndim, unique=True)) if out_rank else []
    expected = np.expand_dims(array, tuple(axes))
    assert_view_is(view_of(array, base).unsqueeze(axes), expected, base)


@SIMPLE
@given(strided_arrays(), st.data())
def test_squeeze(case, data):
    base, array = case
    ones = [k for k, dim in enumerate(array.shape) if dim == 1]
    axes = data.draw(st.lists(st.sampled_from(ones), unique=True)) if ones else []
    assert_view_is(view_of(array, base).squeeze(axes), np.squeeze(array, tuple(axes)), base)


@SIMPLE
@given(strided_arrays(), st.data())
def test_permute(case, data):
    base, array = case
    perm = data.draw(st.permutations(range(array.ndim)))
    assert_view_is(view_of(array, base).permute(perm), array.transpose(perm), base)


@SIMPLE
@given(strided_arrays(), st.data())
def test_expand(case, data):
    base, array = case
    target = data.draw(broadcast_targets(array.shape))
    assert_view_is(view_of(array, base).expand(target), np.broadcast_to(array, target), base)


@PROPERTY
@given(strided_arrays().filter(lambda case: case[1].ndim > 0), st.data())
def test_slice(case, data):
    base, array = case
    axis = data.draw(st.integers(0, array.ndim - 1))
    piece = data.draw(SLICES)
    index = [slice(None)] * array.ndim
    index[axis] = piece
    view = view_of(array, base).slice(axis, *piece.indices(array.shape[axis]))
    assert_view_is(view, array[tuple(index)], base)


@PROPERTY
@given(strided_arrays(), st.data())
def test_reshape_is_a_view_exactly_when_numpy_can(case, data):
    base, array = case
    shape = data.draw(factorizations(array.size))
    view = view_of(array, base).reshape(shape)
    expected = reshape_or_none(array, shape)
    if array.size == 0:  # no memory is read: always a view
        assert view is not None and view.shape == shape
        return
    assert (view is None) == (expected is None)
    if view is not None:
        assert_view_is(view, expected, base)


@pytest.mark.parametrize("make, shape, is_view", [
    (lambda a: a.reshape(2, 3, 4), (6, 4), True),
    (lambda a: a.reshape(2, 3, 4).transpose(1, 0, 2), (6, 4), False),
    (lambda a: a.reshape(2, 3, 4).transpose(1, 0, 2), (3, 2, 2, 2), True),
    (lambda a: a.reshape(4, 6)[:, :3], (12,), False),
    (lambda a: a.reshape(4, 6)[:, :3], (2, 2, 3), True),
    (lambda a: a.reshape(4, 6)[:, ::2], (12,), True),
    (lambda a: a[::-1].reshape(4, 6), (24,), True),
    (lambda a: np.broadcast_to(a[:3], (2, 3)), (6,), False),
    (lambda a: np.broadcast_to(a[:1], (2, 3)), (3, 2), True),
])
def test_reshape_examples(make, shape, is_view):
    base = np.arange(24, dtype=np.int32)
    array = make(base)
    view = view_of(array, base).reshape(shape)
    assert (view is not None) == is_view == (reshape_or_none(array, shape) is not None)
    if is_view:
        assert_view_is(view, array.reshape(shape), base)


# ---- compose ---------------------------------------------------------------------------------
@PROPERTY
@given(strided_arrays(), st.data())
def test_compose(case, data):
    """outer indexes inner's elements in C order; the composed View reads the same elements."""
    base, array = case
    flat_index = np.arange(array.size, dtype=np.int32)
    outer_array = data.draw(transformed(flat_index.reshape(data.draw(factorizations(array.size)))))
    outer = view_of(outer_array, flat_index)
    composed = view_of(array, base).compose(outer)
    flat_is_view = reshape_or_none(array, (array.size,)) is not None
    if flat_is_view:
        assert composed is not None
    if composed is not None:
        assert composed.shape == outer_array.shape
        expected = array.reshape(-1)[outer_array] if array.size else np.empty(outer_array.shape, np.int32)
        np.testing.assert_array_equal(materialize(base, composed), expected)


def test_compose_of_contiguous_is_offset_shift():
    inner = View.contiguous((2, 3), offset=4)
    outer = View((3, 2), (1, 3), 0)
    assert inner.compose(outer) == View((3, 2), (1, 3), 4)
    assert View((6,), (-2,), 20).compose(View((2,), (3,), 1)) == View((2,), (-6,), 18)


# ---- BlockedView: a blocked quantization parameter read at the data's shape ---------------------
def _blocked():
    """A [3, 4] parameter (row stride 5, offset 2) spread by blocks of 3 over a dim of 10."""
    return BlockedView.spread(View((3, 4), (5, 1), 2), 1, 3, 10)


def _index(view: BlockedView) -> np.ndarray:
    """Buffer element index of every element: offset + sum((idx[k] // blocks[k]) * strides[k])."""
    index = np.full(view.shape, view.offset, np.int64)
    for k, (d, s, b) in enumerate(zip(view.shape, view.strides, view.blocks)):
        index += ((np.arange(d) // b) * s).reshape((d,) + (1,) * (view.rank - k - 1))
    return index


def test_blocked_view_reads_each_value_over_its_block():
    view = _blocked()
    assert view.shape == (3, 10) and view.blocks == (1, 3) and not view.is_contiguous
    buffer = np.arange(20)
    values = buffer[2 + 5 * np.arange(3)[:, None] + np.arange(4)]  # the [3, 4] parameter
    want = np.repeat(values, 3, axis=1)[:, :10]  # each over 3 elements; the last block is short
    np.testing.assert_array_equal(buffer[_index(view)], want)
    source = view.source()
    assert source.shape == (3, 4) and source.strides == (5, 1) and source.offset == 2
    np.testing.assert_array_equal(view.spread_values(values), want)
    low, high = view.span()
    assert low == _index(view).min() and high == _index(view).max() + 1


@pytest.mark.parametrize("transform, numpy_op", [
    (lambda v: v.permute((1, 0)), lambda a: a.T),
    (lambda v: v.unsqueeze((0, 2)), lambda a: a[None, :, None]),
    (lambda v: v.expand((2, 3, 10)), lambda a: np.broadcast_to(a, (2, 3, 10))),
    (lambda v: v.unsqueeze((1,)).squeeze((1,)), lambda a: a),
])
def test_blocked_view_transforms_keep_the_blocks(transform, numpy_op):
    view = _blocked()
    moved = transform(view)
    assert isinstance(moved, BlockedView)
    np.testing.assert_array_equal(_index(moved), numpy_op(_index(view)))


def test_blocked_view_transforms_that_would_mix_blocks_give_none():
    view = _blocked()
    assert view.reshape((30,)) is None and view.slice(1, 0, 5) is None and view.compose(View((30,), (1,))) is None
