"""The table of every ONNX element type: spelling, code, bits, kind, numpy storage.

Nothing else in the project hard-codes element-type facts; it asks this module.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from .errors import DTypeError


@dataclass(frozen=True, eq=False)
class DType:
    """One ONNX tensor element type.

    Attributes:
        onnx_name: the spelling inside ``tensor(...)`` in the ONNX docs ('float', 'int4').
        onnx_code: the ``TensorProto.DataType`` value.
        bits: bits per element in ONNX storage (4 for int4, 2 for int2).
        kind: 'bool', 'int', 'uint', 'float', 'complex' or 'string'.
        np_dtype: numpy storage of ONE unpacked element (ml_dtypes where numpy has none;
            object for strings).
        py_name: the attribute name on ``dsl`` (``dsl.float32``).
    """

    onnx_name: str
    onnx_code: int
    bits: int
    kind: str
    np_dtype: np.dtype
    py_name: str

    @property
    def packed(self) -> bool:
        """True for sub-byte types stored several to a byte (ONNX raw layout).

        string has bits 0 (no fixed size) and is not packed.
        """
        return 0 < self.bits < 8

    @property
    def per_byte(self) -> int:
        """Elements per storage byte (1 for byte-or-wider types and string)."""
        return 8 // self.bits if self.packed else 1

    def packed_nbytes(self, count: int) -> int:
        """Bytes of ONNX raw storage for ``count`` elements."""
        if self.kind == "string":
            raise DTypeError(f"dsl: string tensors have no fixed-size storage")
        return -(-count * self.bits // 8)

    def __repr__(self) -> str:
        return f"dsl.{self.py_name}"

    def __str__(self) -> str:
        return self.onnx_name

    def __reduce__(self):
        return (dtype, (self.onnx_name,))


def _entry(onnx_name, code, bits, kind, storage, py_name):
    return DType(onnx_name, code, bits, kind, np.dtype(storage), py_name)


# (onnx name, TensorProto code, bits, kind, numpy storage, dsl attribute name)
ALL: tuple[DType, ...] = tuple(_entry(*row) for row in (
    ("float", 1, 32, "float", np.float32, "float32"),
    ("uint8", 2, 8, "uint", np.uint8, "uint8"),
    ("int8", 3, 8, "int", np.int8, "int8"),
    ("uint16", 4, 16, "uint", np.uint16, "uint16"),
    ("int16", 5, 16, "int", np.int16, "int16"),
    ("int32", 6, 32, "int", np.int32, "int32"),
    ("int64", 7, 64, "int", np.int64, "int64"),
    ("string", 8, 0, "string", object, "string"),
    ("bool", 9, 8, "bool", np.bool_, "bool"),
    ("float16", 10, 16, "float", np.float16, "float16"),
    ("double", 11, 64, "float", np.float64, "float64"),
    ("uint32", 12, 32, "uint", np.uint32, "uint32"),
    ("uint64", 13, 64, "uint", np.uint64, "uint64"),
    ("complex64", 14, 64, "complex", np.complex64, "complex64"),
    ("complex128", 15, 128, "complex", np.complex128, "complex128"),
    ("bfloat16", 16, 16, "float", ml_dtypes.bfloat16, "bfloat16"),
    ("float8e4m3fn", 17, 8, "float", ml_dtypes.float8_e4m3fn, "float8e4m3fn"),
    ("float8e4m3fnuz", 18, 8, "float", ml_dtypes.float8_e4m3fnuz, "float8e4m3fnuz"),
    ("float8e5m2", 19, 8, "float", ml_dtypes.float8_e5m2, "float8e5m2"),
    ("float8e5m2fnuz", 20, 8, "float", ml_dtypes.float8_e5m2fnuz, "float8e5m2fnuz"),
    ("uint4", 21, 4, "uint", ml_dtypes.uint4, "uint4"),
    ("int4", 22, 4, "int", ml_dtypes.int4, "int4"),
    ("float4e2m1", 23, 4, "float", ml_dtypes.float4_e2m1fn, "float4e2m1"),
    ("float8e8m0", 24, 8, "float", ml_dtypes.float8_e8m0fnu, "float8e8m0"),
    ("uint2", 25, 2, "uint", ml_dtypes.uint2, "uint2"),
    ("int2", 26, 2, "int", ml_dtypes.int2, "int2"),
))

_BY_CODE = {t.onnx_code: t for t in ALL}
_BY_NAME: dict[str, DType] = {}
for _t in ALL:
    _BY_NAME[_t.onnx_name] = _t
    _BY_NAME[_t.py_name] = _t
    if _t.kind != "string":
        _BY_NAME.setdefault(_t.np_dtype.name, _t)  # numpy / ml_dtypes spelling
_BY_NAME.update({"bool_": _BY_NAME["bool"], "str": _BY_NAME["string"], "object": _BY_NAME["string"]})
_BY_NUMPY = {t.np_dtype: t for t in ALL if t.kind != "string"}


def _from_numpy_dtype(np_dt: np.dtype) -> DType | None:
    if np_dt.kind in "OUS":
        return _BY_NAME["string"]
    if np_dt.fields is not None or np_dt.subdtype is not None:
        return None
    return _BY_NUMPY.get(np_dt.newbyteorder("="))


def dtype(spec: Any) -> DType:
    """Look up an element type.

    Args:
        spec: a DType, an ONNX name ('float', 'float8e4m3fn'), a numpy or ml_dtypes name
            ('float32', 'float8_e4m3fn'), a numpy / ml_dtypes dtype or scalar type, or a
            ``TensorProto.DataType`` code (17).

    Returns:
        The DType.

    Raises:
        DTypeError: nothing matches ``spec``.

    Example:
        >>> dtype("float8e4m3fn").onnx_code
        17
    """
    if isinstance(spec, DType):
        return spec
    found = None
    if isinstance(spec, (bool, np.bool_)):
        found = None
    elif isinstance(spec, (int, np.integer)):
        found = _BY_CODE.get(int(spec))
    elif isinstance(spec, str):
        found = _BY_NAME.get(spec)
    else:
        try:
            np_dt = np.dtype(spec)
        except (TypeError, ValueError):
            np_dt = None
        if np_dt is not None and spec is not None:
            found = _from_numpy_dtype(np_dt)
    if found is None:
        raise DTypeError(f"dsl.dtype: unknown element type {spec!r}; expected an ONNX type name "
                         f"(e.g. 'float', 'int4'), a numpy/ml_dtypes dtype or an ONNX code 1-26")
    return found


def of_array(array: np.ndarray, op: str = "dsl") -> DType:
    """The DType of a numpy array; DTypeError for dtypes ONNX has no type for."""
    found = _from_numpy_dtype(array.dtype)
    if found is None:
        raise DTypeError(f"{op}: numpy dtype {array.dtype} has no ONNX element type")
    return found


# ONNX widened the "all tensor types" set in steps; each schema version takes the
# newest step at or below it (e.g. Unsqueeze-13 -> step 13, Reshape-19 -> step 19).
_V1 = ("bool complex64 complex128 float16 float double int8 int16 int32 int64 "
       "uint8 uint16 uint32 uint64 string").split()
_STEPS = {
    1: _V1,
    13: _V1 + ["bfloat16"],
    19: _V1 + ["bfloat16", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz"],
}
_STEPS[21] = _STEPS[19] + ["int4", "uint4"]
_STEPS[23] = _STEPS[21] + ["float4e2m1"]
_STEPS[24] = _STEPS[23] + ["float8e8m0"]
_STEPS[25] = _STEPS[24] + ["int2", "uint2"]


def all_types(since_version: int) -> frozenset[DType]:
    """The ONNX 'all tensor types' set as of a schema version (see _STEPS)."""
    step = max(v for v in _STEPS if v <= since_version)
    return frozenset(_BY_NAME[n] for n in _STEPS[step])


def types(*names: str) -> frozenset[DType]:
    """A type set from ONNX names."""
    return frozenset(dtype(n) for n in names)


FLOATS_V1 = types("float16", "float", "double")
