"""Helpers shared by the tests under tests/dsl: onnx's schema tables, arrays of every element type and their
comparison, and hypothesis strategies. Expected values are built independently of dsl.

tests/ has no __init__.py files, so pytest imports test files in "prepend" mode; tests/dsl/conftest.py puts this
folder on sys.path, so that test files in its subfolders can ``from dsl_test_helpers import ...`` too.
"""
from __future__ import annotations

from math import prod

import ml_dtypes
import numpy as np
import onnx.defs
from hypothesis import strategies as st

import dsl
from dsl import dtypes
from dsl.convert import convert
from dsl.kir import interp
from dsl.ops import registry
from dsl.passes.fuse import KernelStep

FLOAT4_VALUES = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.5, -1, -1.5, -2, -3, -4, -6]


# ---- schemas: onnx's and dsl's registry --------------------------------------------------------------
def onnx_versions(op: str) -> list[int]:
    """The opset versions at which onnx defines a new schema of ``op`` (up to dsl's latest opset)."""
    found = []
    for version in range(1, registry.LATEST_OPSET + 1):
        try:
            if onnx.defs.get_schema(op, version).since_version == version:
                found.append(version)
        except onnx.defs.SchemaError:
            pass
    return found


def onnx_allowed(op: str, version: int) -> dict[str, set]:
    """onnx's type constraints of ``op`` at ``version``: type parameter -> element type names."""
    spec = onnx.defs.get_schema(op, version)
    return {c.type_param_str: {t[len("tensor("):-1] for t in c.allowed_type_strs} for c in spec.type_constraints}


def allowed_types(op: str, version: int, param: str = "T") -> list:
    """The dsl dtypes onnx allows for type parameter ``param`` of ``op`` at ``version``, by onnx name."""
    return sorted((dtypes.dtype(n) for n in onnx_allowed(op, version)[param]), key=lambda t: t.onnx_name)


def registry_versions(op: str) -> list[int]:
    """The versions of ``op``'s schemas in dsl's registry."""
    return [schema.version for schema in registry.get(op).schemas]


def schemas_with_onnx(op: str) -> list[tuple]:
    """(dsl schema, onnx schema) of ``op`` at each version, once the registry's versions are checked to be onnx's."""
    opdef = registry.get(op)
    assert [s.version for s in opdef.schemas] == onnx_versions(op)
    return [(schema, onnx.defs.get_schema(op, schema.version)) for schema in opdef.schemas]


def assert_schema_in_force_matches_onnx(op: str, opset: int) -> None:
    """dsl's schema of ``op`` at ``opset`` is onnx's (or, where onnx has none, an UnsupportedError)."""
    import pytest
    try:
        expected = onnx.defs.get_schema(op, opset).since_version
    except onnx.defs.SchemaError:
        with pytest.raises(dsl.UnsupportedError, match=rf"^{op}: not defined at opset {opset};"):
            registry.get(op).schema(opset)
        return
    assert registry.get(op).schema(opset).version == expected, (op, opset)


def onnx_default(attr):
    """An ONNX attribute's default as dsl states it (ints and strings; None otherwise)."""
    default = attr.default_value
    if default.type == onnx.AttributeProto.INT:
        return default.i
    if default.type == onnx.AttributeProto.STRING:
        return default.s.decode()
    return None


def assert_schemas_match_onnx(op: str) -> None:
    """Every version's inputs (names, optional, types), attributes and defaults are onnx's."""
    for schema, spec in schemas_with_onnx(op):
        allowed = onnx_allowed(op, schema.version)
        for formal, mine in zip(spec.inputs, schema.inputs):  # (a fixed 'tensor(int64)' has no type parameter)
            want = allowed.get(formal.type_str, {formal.type_str[len("tensor("):-1]})
            assert {t.onnx_name for t in (mine.types or schema.types)} == want, (op, schema.version, formal.name)
        assert [(i.name, i.optional) for i in schema.inputs] == \
            [(i.name, i.option == onnx.defs.OpSchema.FormalParameterOption.Optional) for i in spec.inputs]
        assert {a.name for a in schema.attrs} == set(spec.attributes), (op, schema.version)
        for attr in schema.attrs:
            assert attr.default == onnx_default(spec.attributes[attr.name]), (op, schema.version, attr.name)


def assert_input_types_match_onnx(op: str, schema, spec) -> None:
    """The dsl schema's inputs have onnx's names and, each, the element types onnx allows."""
    allowed = onnx_allowed(op, schema.version)
    assert [i.name for i in schema.inputs] == [i.name for i in spec.inputs]
    for formal, mine in zip(spec.inputs, schema.inputs):
        types = mine.types if mine.types is not None else schema.types
        assert {t.onnx_name for t in types} == allowed[formal.type_str], (op, schema.version, formal.name)


# ---- arrays of every element type -----------------------------------------------------------------------
def make_array(dt, shape, seed=0) -> np.ndarray:
    """Values of ``dt`` (random bit patterns for byte-or-wider numbers, NaNs included)."""
    rng = np.random.default_rng(seed)
    count = prod(shape)
    if dt.kind == "string":
        flat = np.array([f"s{i}\u00e9" for i in range(count)], dtype=object)
    elif dt.kind == "bool":
        flat = rng.integers(0, 2, count).astype(np.bool_)
    elif dt.bits < 8 and dt.kind == "float":
        flat = rng.choice(FLOAT4_VALUES, count).astype(dt.np_dtype)
    elif dt.bits < 8:
        info = ml_dtypes.iinfo(dt.np_dtype)
        flat = rng.integers(int(info.min), int(info.max) + 1, count).astype(dt.np_dtype)
    else:
        flat = rng.integers(0, 256, count * dt.np_dtype.itemsize, dtype=np.uint8).view(dt.np_dtype)
    return flat.reshape(shape)


def pack_codes(array: np.ndarray, bits: int) -> np.ndarray:
    """TYPES.md raw layout, written independently of dsl: first element in the lowest bits."""
    per_byte = 8 // bits
    codes = np.ascontiguousarray(array).reshape(-1).view(np.uint8) & np.uint8((1 << bits) - 1)
    padded = np.zeros(-(-codes.size // per_byte) * per_byte, np.uint8)
    padded[:codes.size] = codes
    return sum((padded[k::per_byte] << np.uint8(k * bits)) for k in range(per_byte)).astype(np.uint8)


def as_tensor(array: np.ndarray) -> dsl.Tensor:
    """A dsl.Tensor of ``array``'s values; sub-byte types packed by ``pack_codes``."""
    dt = dtypes.of_array(array)
    if dt.packed:
        return dsl.Tensor.from_packed(pack_codes(array, dt.bits), dt, array.shape)
    return dsl.Tensor.from_numpy(array)


def snapshot(array: np.ndarray):
    """Shape and exact contents (strings as a list, anything else as its bytes)."""
    return (array.shape, array.tolist() if array.dtype.kind == "O" else array.tobytes())


def assert_same(actual, expected: np.ndarray) -> None:
    """``actual`` is a numpy array of ``expected``'s dtype and shape, bit for bit the same."""
    assert isinstance(actual, np.ndarray), type(actual)
    assert (actual.dtype, actual.shape) == (expected.dtype, expected.shape)
    assert snapshot(actual) == snapshot(expected)


# ---- hypothesis strategies -------------------------------------------------------------------------------
@st.composite
def factorizations(draw, size: int) -> tuple[int, ...]:
    """A random shape with ``size`` elements (size-1 dims sprinkled in; a 0 dim when size is 0)."""
    if size == 0:
        dims = draw(st.lists(st.integers(0, 3), min_size=1, max_size=4))
        dims[draw(st.integers(0, len(dims) - 1))] = 0
        return tuple(dims)
    dims, rest = [], size
    while rest > 1:
        factor = draw(st.sampled_from([d for d in range(2, rest + 1) if rest % d == 0]))
        dims.append(factor)
        rest //= factor
    for _ in range(draw(st.integers(0, 2))):
        dims.insert(draw(st.integers(0, len(dims))), 1)
    return tuple(dims)


def draw_reduce_inputs(data) -> tuple[np.ndarray, np.ndarray, int]:
    """(x, operand, rank) for a random reduction program: float32 x of rank 1-4 and dims 1-5,
    sometimes a transposed view; an operand broadcasting to x's shape along random dims."""
    rank = data.draw(st.integers(1, 4))
    shape = tuple(data.draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1)))
    x = rng.standard_normal(shape).astype(np.float32)
    if rank >= 2 and data.draw(st.booleans()):
        x = np.ascontiguousarray(x.T).T
    operand = rng.standard_normal(tuple(d if data.draw(st.booleans()) else 1 for d in shape)).astype(np.float32)
    return x, operand, rank


# ---- one fused kernel of many ops, and its IR on the kernel-IR interpreter -----------------------
def select_rows(sel, outs):
    """Row k of the result is outs[k] (sel of shape (len(outs), 1)): one fused kernel checks every
    op of a test (one compile per dtype)."""
    result = outs[-1]
    for index in range(len(outs) - 2, -1, -1):
        result = dsl.where(dsl.equal(sel, index), outs[index], result)
    return result


def interpreted(kernel, *args) -> np.ndarray:
    """The single fused kernel's IR evaluated by the kernel-IR interpreter (dsl/kir/interp.py) on
    ``args``, as the output type's values (group inputs here are only broadcast, numpy-style)."""
    executable = kernel.executable(*args)
    (step,) = [s for s in executable.steps if isinstance(s, KernelStep)]
    env = {**executable.constants, **dict(zip(executable.input_names, args))}
    leaves = {i: np.asarray(env[leaf.value.name]) for i, leaf in enumerate(step.group.leaves)}
    (value,) = interp.evaluate(step.group.outputs, leaves)
    sink = step.group.sinks[0].type.dtype
    with np.errstate(all="ignore"):
        return convert(np.ascontiguousarray(value), sink)
