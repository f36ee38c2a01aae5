"""Tests for dsl/ops/arrange.py: Split, Tile, DepthToSpace, SpaceToDepth and ReverseSequence at
every version and element type, against numpy oracles written here; the JIT against the eager
engine; bad inputs as DslErrors naming the op; inputs never mutated (Pad and CenterCropPad:
test_padding.py)."""
from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest

import dsl
from dsl import dtypes
from dsl.functional import depth_to_space, reverse_sequence, space_to_depth, split, tile
from dsl.ops import registry

from dsl_test_helpers import (allowed_types, assert_same,
                              assert_schema_in_force_matches_onnx, make_array, schemas_with_onnx, snapshot)

OPS = ["Split", "Tile", "DepthToSpace", "SpaceToDepth", "ReverseSequence"]


def versions(op: str) -> list[int]:
    return [s.version for s in registry.get(op).schemas]


def every_type(op: str):
    """(version, dtype, allowed) for every registered version and every dsl element type."""
    for version in versions(op):
        allowed = {t.onnx_name for t in allowed_types(op, version)}
        for dt in dtypes.ALL:
            yield version, dt, dt.onnx_name in allowed


def check_schemas_against_onnx(op: str) -> None:
    """Each registered version's inputs, their type sets and optionality, and its attributes are onnx's."""
    for schema, spec in schemas_with_onnx(op):
        constraints = {c.type_param_str: {t[len("tensor("):-1] for t in c.allowed_type_strs}
                       for c in spec.type_constraints}
        assert [i.name for i in schema.inputs] == [i.name for i in spec.inputs]
        for formal, mine in zip(spec.inputs, schema.inputs):  # (a literal tensor(int64) is its own set)
            want = constraints.get(formal.type_str, {formal.type_str[len("tensor("):-1]})
            assert {t.onnx_name for t in (mine.types or schema.types)} == want, (op, schema.version, formal.name)
            assert mine.optional == (formal.option == onnx.defs.OpSchema.FormalParameterOption.Optional)
        assert {a.name for a in schema.attrs} == set(spec.attributes), (op, schema.version)
    for opset in range(1, registry.LATEST_OPSET + 1):  # (and the one in force at every opset)
        assert_schema_in_force_matches_onnx(op, opset)


@pytest.mark.parametrize("op", OPS)
def test_versions_and_input_types_are_onnx_s(op):
    check_schemas_against_onnx(op)


def check_type(op: str, version: int, dt, allowed: bool, run, want) -> None:
    """``run()`` equals ``want()`` bit for bit when allowed, else a DTypeError naming the op."""
    if not allowed:
        with pytest.raises(dsl.DTypeError, match=rf"^{op}: input '\w+' has type {dt.onnx_name}"):
            run()
        return
    got, expected = run(), want()
    if isinstance(expected, list):
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert_same(g, e)
    else:
        assert_same(got, expected)


# ---- Split ------------------------------------------------------------------------------------------
def test_split_every_version_and_type():
    for version, dt, allowed in every_type("Split"):
        x = make_array(dt, (5, 2), seed=version)
        before = snapshot(x)
        check_type("Split", version, dt, allowed, lambda: split(x, [2, 0, 3], opset=version),
                   lambda: np.split(x, [2, 2], axis=0))
        assert snapshot(x) == before


@pytest.mark.parametrize("dim, parts, sizes", [(6, 3, [2, 2, 2]), (5, 2, [3, 2]), (7, 3, [3, 3, 1]),
                                               (4, 3, [2, 2, 0]), (0, 2, [0, 0])])
def test_split_num_outputs_has_the_smaller_last_chunk(dim, parts, sizes):
    x = np.arange(dim * 2).reshape(2, dim)
    got = split(x, axis=-1, num_outputs=parts)
    for g, want in zip(got, np.split(x, np.cumsum(sizes)[:-1], axis=1)):
        assert_same(g, want)
    assert [g.shape[1] for g in got] == sizes


def test_split_equal_parts_before_18_and_views():
    x = np.arange(12.0).reshape(3, 4)
    for opset in (2, 11, 13):
        got = split(x, axis=1, num_outputs=2, opset=opset)
        assert [g.tolist() for g in got] == [g.tolist() for g in np.split(x, 2, axis=1)]
        assert all(np.shares_memory(g, x) for g in got)
    with pytest.raises(dsl.DslError, match=r"^Split: .*dim 5"):
        split(np.zeros(5), num_outputs=2, opset=13)


def _split_model(opset: int, outputs: int, split_attr=None):
    node = oh.make_node("Split", ["x"], [f"y{k}" for k in range(outputs)], axis=1,
                        **({} if split_attr is None else {"split": split_attr}))
    graph = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 6])],
                          [oh.make_tensor_value_info(f"y{k}", onnx.TensorProto.FLOAT, None) for k in range(outputs)])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])


@pytest.mark.parametrize("engine", ["jit", "numpy"])
def test_split_without_lengths_uses_the_node_s_output_count(engine):
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    for opset in (2, 11, 13):
        got = dsl.from_onnx(_split_model(opset, 3)).run({"x": x}, engine=engine)
        assert [g.tolist() for g in got] == [g.tolist() for g in np.split(x, 3, axis=1)]
    with pytest.raises(dsl.DslError, match=r"^Split .*cannot split dim 6 into 4 equal parts"):
        dsl.from_onnx(_split_model(13, 4)).run({"x": x}, engine=engine)
    with pytest.raises(dsl.DslError, match=r"^Split .*gives 2 outputs but the node has 3"):
        dsl.from_onnx(_split_model(11, 3, [2, 4])).run({"x": x}, engine=engine)


@pytest.mark.parametrize("kwargs, message", [
    ({"split": [2, 2]}, r"split \[2, 2\] sums to 4; expected the axis' dim 5"),
    ({"split": [6, -1]}, r"negative length"),
    ({"num_outputs": 4}, r"cannot split dim 5 into 4 chunks"),
    ({"num_outputs": 0}, r"num_outputs 0 must be >= 1"),
    ({"split": [5], "num_outputs": 1}, r"both input 'split' and attribute num_outputs=1"),
    ({"split": [5], "axis": 1}, r"axis 1 out of range \[-1, 0\]"),
])
def test_split_errors_name_the_op_and_value(kwargs, message):
    with pytest.raises(dsl.DslError, match=rf"^Split: .*{message}"):
        split(np.zeros(5), **kwargs)


def test_split_negative_axis_needs_version_11_and_scalars_fail():
    with pytest.raises(dsl.ShapeError, match=r"^Split: axis -1 is negative; version 2"):
        split(np.zeros((2, 2)), [1, 1], axis=-1, opset=2)
    with pytest.raises(dsl.ShapeError, match=r"^Split: input is a scalar"):
        split(np.zeros(()), [1])


def test_split_in_the_jit_matches_eager():
    x = np.random.default_rng(0).standard_normal((4, 7)).astype(np.float32)
    f = dsl.jit(lambda a: [p * 2.0 for p in split(a, axis=1, num_outputs=3)])
    for g, want in zip(f(x), split(x, axis=1, num_outputs=3)):
        np.testing.assert_array_equal(g, want * 2)


# ---- Tile -------------------------------------------------------------------------------------------
def test_tile_every_version_and_type():
    for version, dt, allowed in every_type("Tile"):
        x = make_array(dt, (2, 3), seed=version)
        before = snapshot(x)
        if version == 1:  # tiles and axis: one-element inputs of the data's type
            tile_type = dt.np_dtype if allowed else np.float32
            t, a = np.array([3]).astype(tile_type), np.array([1]).astype(tile_type)
            run = lambda: dsl.eager.call("Tile", x, 1, tiles=t, axis=a)  # noqa: E731
        else:
            run = lambda: tile(x, [2, 0 if version == 13 else 3], opset=version)  # noqa: E731
        want = lambda: np.concatenate([x] * 3, axis=1) if version == 1 else \
            np.tile(x, [2, 0 if version == 13 else 3])  # noqa: E731
        check_type("Tile", version, dt, allowed, run, want)
        assert snapshot(x) == before


@pytest.mark.parametrize("repeats, message", [([2], r"repeats \[2\] has 1 entries; expected one per input dim"),
                                              ([1, -1], r"negative entry")])
def test_tile_errors(repeats, message):
    with pytest.raises(dsl.DslError, match=rf"^Tile: .*{message}"):
        tile(np.zeros((2, 3)), repeats)


def test_tile_in_the_jit_matches_eager():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(dsl.jit(lambda a: tile(a, [3, 2]) + 1.0)(x), np.tile(x, [3, 2]) + 1)


# ---- DepthToSpace / SpaceToDepth -----------------------------------------------------------------------
def d2s_oracle(x, bs, mode):
    b, c, h, w = x.shape
    if mode == "DCR":
        tmp = np.transpose(np.reshape(x, [b, bs, bs, c // bs ** 2, h, w]), [0, 3, 4, 1, 5, 2])
    else:
        tmp = np.transpose(np.reshape(x, [b, c // bs ** 2, bs, bs, h, w]), [0, 1, 4, 2, 5, 3])
    return np.reshape(tmp, [b, c // bs ** 2, h * bs, w * bs])


def s2d_oracle(x, bs, mode):
    b, c, h, w = x.shape
    tmp = np.reshape(x, [b, c, h // bs, bs, w // bs, bs])
    tmp = np.transpose(tmp, [0, 3, 5, 1, 2, 4] if mode == "DCR" else [0, 1, 3, 5, 2, 4])
    return np.reshape(tmp, [b, c * bs * bs, h // bs, w // bs])


def test_depth_to_space_every_version_and_type():
    for version, dt, allowed in every_type("DepthToSpace"):
        x = make_array(dt, (1, 8, 2, 3), seed=version)
        before = snapshot(x)
        for mode in ("DCR", "CRD") if version >= 11 else ("DCR",):
            check_type("DepthToSpace", version, dt, allowed, lambda: depth_to_space(x, 2, mode=mode, opset=version),
                       lambda: d2s_oracle(x, 2, mode))
        assert snapshot(x) == before


def test_space_to_depth_every_version_and_type():
    for version, dt, allowed in every_type("SpaceToDepth"):
        x = make_array(dt, (2, 3, 4, 6), seed=version)
        before = snapshot(x)
        for mode in ("DCR", "CRD") if version >= 28 else ("DCR",):
            check_type("SpaceToDepth", version, dt, allowed, lambda: space_to_depth(x, 2, mode=mode, opset=version),
                       lambda: s2d_oracle(x, 2, mode))
        assert snapshot(x) == before


def test_space_to_depth_inverts_depth_to_space_and_the_jit_matches():
    x = np.random.default_rng(1).standard_normal((2, 12, 3, 5)).astype(np.float32)
    for mode in ("DCR", "CRD"):
        np.testing.assert_array_equal(space_to_depth(depth_to_space(x, 2, mode=mode), 2, mode=mode), x)
        f = dsl.jit(lambda a: depth_to_space(a, 2, mode=mode) + 1.0)
        np.testing.assert_array_equal(f(x), d2s_oracle(x, 2, mode) + 1)
        g = dsl.jit(lambda a: space_to_depth(a, 3 if mode == "DCR" else 1, mode=mode))
        y = x[:, :, :3, :3].copy()
        np.testing.assert_array_equal(g(y), s2d_oracle(y, 3 if mode == "DCR" else 1, mode))


@pytest.mark.parametrize("fn, shape, kwargs, message", [
    (depth_to_space, (1, 6, 2, 2), {"blocksize": 2}, r"channels 6 .* not divisible by blocksize\*\*2 = 4"),
    (depth_to_space, (1, 4, 2), {"blocksize": 2}, r"expected rank 4"),
    (depth_to_space, (1, 4, 2, 2), {"blocksize": 0}, r"blocksize 0 must be >= 1"),
    (depth_to_space, (1, 4, 2, 2), {"blocksize": 2, "mode": "XYZ"}, r"mode 'XYZ' is not supported"),
    (space_to_depth, (1, 1, 3, 4), {"blocksize": 2}, r"height 3 .* not divisible by blocksize 2"),
    (space_to_depth, (1, 1, 2, 2), {"blocksize": 2, "mode": "CRD", "opset": 13}, r"argument mode='CRD' does not exist"),
])
def test_block_errors_name_the_op(fn, shape, kwargs, message):
    op = "DepthToSpace" if fn is depth_to_space else "SpaceToDepth"
    with pytest.raises(dsl.DslError, match=rf"^{op}: .*{message}"):
        fn(np.zeros(shape, np.float32), **kwargs)


# ---- ReverseSequence ---------------------------------------------------------------------------------
def reverse_oracle(x, lens, batch_axis, time_axis):
    out = x.copy()
    for i, n in enumerate(lens):
        for t in range(n):
            src = [slice(None)] * x.ndim
            dst = [slice(None)] * x.ndim
            src[batch_axis] = dst[batch_axis] = i
            src[time_axis], dst[time_axis] = n - 1 - t, t
            out[tuple(dst)] = x[tuple(src)]
    return out


def test_reverse_sequence_every_version_and_type():
    for version, dt, allowed in every_type("ReverseSequence"):
        x = make_array(dt, (4, 3, 2), seed=version)
        before = snapshot(x)
        lens = np.array([4, 0, 2], np.int64)
        check_type("ReverseSequence", version, dt, allowed, lambda: reverse_sequence(x, lens, opset=version),
                   lambda: reverse_oracle(x, lens, 1, 0))
        assert snapshot(x) == before


def test_reverse_sequence_batch_first_and_jit():
    x = np.arange(24, dtype=np.float32).reshape(3, 4, 2)
    lens = np.array([1, 4, 3])
    want = reverse_oracle(x, lens, 0, 1)
    assert_same(reverse_sequence(x, lens, batch_axis=0, time_axis=1), want)
    got = dsl.jit(lambda a, n: reverse_sequence(a, n, batch_axis=0, time_axis=1) * 1.0)(x, lens)
    assert_same(got, want)


@pytest.mark.parametrize("lens, kwargs, message", [
    ([5, 1, 1], {}, r"sequence_lens\[0\] = 5 is out of range \[0, 4\]"),
    ([-1, 1, 1], {}, r"sequence_lens\[0\] = -1 is out of range"),
    ([1, 1], {}, r"sequence_lens has 2 entries; expected batch_size 3"),
    ([1, 1, 1], {"batch_axis": 0, "time_axis": 0}, r"both 0"),
    ([1, 1, 1], {"time_axis": 2}, r"time_axis 2 must be 0 or 1"),
])
def test_reverse_sequence_errors(lens, kwargs, message):
    with pytest.raises(dsl.DslError, match=rf"^ReverseSequence: .*{message}"):
        reverse_sequence(np.zeros((4, 3)), np.array(lens, np.int64), **kwargs)


# ---- values known only at run time, Split-1's typed input, packed Tensors --------------------------------
def test_runtime_computed_split_is_planned_when_run():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    h = dsl.jit(lambda a, s: split(a, s * 1, axis=1))
    for got, want in zip(h(x, np.array([1, 3])), np.split(x, [1], axis=1)):
        assert_same(got, want)


def test_split_version_1_takes_lengths_of_the_data_type():
    x = np.arange(5.0)
    got = dsl.eager.call("Split", x, 1, split=np.array([2.0, 3.0]), outputs=2)
    assert [g.tolist() for g in got] == [[0.0, 1.0], [2.0, 3.0, 4.0]]
    with pytest.raises(dsl.InputError, match=r"^Split: split \[2.5, 2.5\] must hold whole numbers"):
        dsl.eager.call("Split", x, 1, split=np.array([2.5, 2.5]), outputs=2)


def test_packed_tensors_split():
    from dsl_test_helpers import as_tensor
    y = make_array(dtypes.dtype("bfloat16"), (3, 5), seed=5)
    parts = split(as_tensor(y), [1, 4], axis=1)
    assert all(isinstance(part, dsl.Tensor) for part in parts)
    for part, want in zip(parts, np.split(y, [1], axis=1)):
        assert_same(part.numpy(), want)
