"""Scalar types of the kernel IR: the compute domain each ONNX element type is computed in, and
the storage a buffer of it is read as. Backend-neutral (no numba here).

Every value in a kernel lives in a *compute domain*, one of SCALARS: its own numpy scalar type
when it has one, float32 for the narrow floats (float16, bfloat16, float8, float4, e8m0), int8 /
uint8 for int4/int2 and uint4/uint2. A Cast node rounds a domain value to a type's exact value
set, so a fused chain gives the same bits as running the ops one by one.
"""
from __future__ import annotations

from ..dtypes import DType, dtype as dtype_of

SCALARS = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64")
NATIVE = {"bool": "bool", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
          "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
          "float": "float32", "double": "float64"}
TABLE_FLOATS = ("float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float8e8m0", "float4e2m1")
SUB_BYTE_INTS = {"int4": (4, True), "uint4": (4, False), "int2": (2, True), "uint2": (2, False)}


def supported(dt: DType) -> bool:
    """Whether kernels compute this element type (not strings or complex)."""
    return dt.onnx_name in NATIVE or dt.onnx_name in TABLE_FLOATS or dt.onnx_name in SUB_BYTE_INTS \
        or dt.onnx_name in ("float16", "bfloat16")


def domain(dt: DType) -> str:
    """The scalar type (one of SCALARS) a kernel computes values of ``dt`` in."""
    if dt.onnx_name in NATIVE:
        return NATIVE[dt.onnx_name]
    if dt.onnx_name in SUB_BYTE_INTS:
        return "int8" if SUB_BYTE_INTS[dt.onnx_name][1] else "uint8"
    return "float32"


def storage(dt: DType) -> str:
    """The numpy dtype name a buffer of ``dt`` is viewed as by kernels (raw bits for the
    formats numpy-level code cannot compute in)."""
    if dt.onnx_name in NATIVE:
        return "bool_" if dt.onnx_name == "bool" else NATIVE[dt.onnx_name]
    return "uint16" if dt.bits == 16 else "uint8"


def numpy_name(scalar: str) -> str:
    """numpy's name of a scalar type (np.bool_ for bool)."""
    return "bool_" if scalar == "bool" else scalar


def is_float(scalar: str) -> bool:
    return scalar in ("float32", "float64")


def is_signed(scalar: str) -> bool:
    return scalar.startswith("int")


def is_integer(scalar: str) -> bool:
    return scalar.startswith(("int", "uint"))


def sub_byte_range(dt: DType) -> tuple[int, int]:
    """[low, high] of a 2- or 4-bit integer type."""
    bits, signed = SUB_BYTE_INTS[dt.onnx_name]
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


def element_type(scalar: str) -> DType:
    """The element type whose compute domain is the native scalar type ``scalar`` (the type of a
    temporary buffer holding such values)."""
    return dtype_of({"float32": "float", "float64": "double"}.get(scalar, scalar))
