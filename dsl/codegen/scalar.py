"""numba source for loading, casting and storing each element type inside a generated kernel.

Values live in the compute domains of dsl/kir/types.py; ``coerce`` renders a kir Cast: it
rounds a compute value to a type's exact value set, so a fused chain gives the same bits as
running the ops one by one.
"""
from __future__ import annotations

from ..dtypes import DType
from ..kir import types

# numba's spelling of each native type's compute domain (np.bool_ for bool)
NATIVE = {name: "bool_" if scalar == "bool" else scalar for name, scalar in types.NATIVE.items()}
TABLE_FLOATS = types.TABLE_FLOATS
SUB_BYTE_INTS = types.SUB_BYTE_INTS
supported = types.supported


def domain(dt: DType) -> str:
    """The numpy scalar type name a kernel computes this type in (dsl/kir/types.py)."""
    scalar = types.domain(dt)
    return "bool_" if scalar == "bool" else scalar


def is_float_domain(name: str) -> bool:
    return types.is_float(name)


def raw_view(dt: DType) -> str:
    """The numpy dtype name a buffer of this type is viewed as for the kernel."""
    return types.storage(dt)


def load(dt: DType, packed: bool, raw: str, index: str, table: str) -> str:
    """Expression loading element ``index`` of raw buffer ``raw`` into the compute domain."""
    name = dt.onnx_name
    if packed:
        return _load_packed(dt, raw, index, table)
    code = f"{raw}[{index}]"
    if name in NATIVE:
        return code
    if name == "float16":
        return f"_bits.f16_to_f32({code})"
    if name == "bfloat16":
        return f"_bits.bf16_to_f32({code})"
    if name in TABLE_FLOATS:
        return f"{table}[np.int64({code}) & 255]"
    return sub_byte_value(name, f"np.int64({code})")


def sub_byte_value(name: str, value: str) -> str:
    """The integer expression ``value`` wrapped to sub-byte int type ``name`` (its low bits,
    two's complement when signed), as the type's compute domain int8 / uint8."""
    bits, signed = SUB_BYTE_INTS[name]
    mask, sign = (1 << bits) - 1, 1 << (bits - 1)
    if signed:
        return f"np.int8((({value} & {mask}) ^ {sign}) - {sign})"
    return f"np.uint8({value} & {mask})"


def _load_packed(dt: DType, raw: str, index: str, table: str) -> str:
    """Element ``index`` (uint64) of packed bytes: one lookup in the module's ``_P_<type>`` table
    at (byte << log2(elements per byte)) | position (kernels.packed.code_table): no shifts or
    sign arithmetic in the loop."""
    per_byte = 8 // dt.bits
    log2 = per_byte.bit_length() - 1
    byte = f"np.uint64({raw}[({index}) >> np.uint64({log2})])"
    return f"_P_{dt.onnx_name}[({byte} << np.uint64({log2})) | (({index}) & np.uint64({per_byte - 1}))]"


def load_part(dt: DType, byte: str, part: int) -> str:
    """Element ``part`` (0: the low bits) of the int32 ``byte`` of packed elements: shifts by
    constants for the sub-byte integers, which vectorize (a per-element table lookup is a
    gather); the module's ``_P_<type>`` table for 4-bit floats."""
    if dt.onnx_name in SUB_BYTE_INTS:
        return sub_byte_value(dt.onnx_name, byte if part == 0 else f"({byte} >> {dt.bits * part})")
    log2 = (8 // dt.bits).bit_length() - 1
    return f"_P_{dt.onnx_name}[(np.uint64({byte}) << np.uint64({log2})) | np.uint64({part})]"


def packed_table_source(dt: DType) -> str:
    """Module-level definition of the ``_P_<type>`` table a packed load reads."""
    if dt.onnx_name in TABLE_FLOATS:
        return (f"_P_{dt.onnx_name} = _packed.code_table({dt.bits}, "
                f"values=_floats.decode_table({dt.onnx_name!r}))")
    return f"_P_{dt.onnx_name} = _packed.code_table({dt.bits}, signed={SUB_BYTE_INTS[dt.onnx_name][1]})"


def encoder_name(fmt: str, saturate: bool, round_mode: str = "up") -> str:
    """Name of the generated scalar encoder for a table float (round_mode matters for e8m0 only)."""
    mode = round_mode if fmt == "float8e8m0" else "up"
    return f"_encode_{fmt}_{int(bool(saturate))}_{mode}"


def _float32_once(expr: str, src_domain: str) -> str:
    """A float32 from which rounding to any narrower float gives the once-rounded result:
    wide sources round to ODD on the way (float64 and 64-bit ints; narrower ints are exact)."""
    if src_domain == "float64":
        return f"_bits.f64_to_f32_odd({expr})"
    if src_domain in ("int64", "uint64"):
        to_f64 = "_bits.i64_to_f64_odd" if src_domain == "int64" else "_bits.u64_to_f64_odd"
        return f"_bits.f64_to_f32_odd({to_f64}({expr}))"
    if src_domain in ("int32", "uint32"):
        return f"_bits.f64_to_f32_odd(np.float64({expr}))"
    return f"np.float32({expr})"


def coerce(expr: str, src_domain: str, dt: DType, saturate: bool = True, round_mode: str = "up") -> str:
    """Round a compute-domain value ``expr`` (of ``src_domain``) to ``dt``'s value set,
    with ONNX Cast semantics, returning an expression in ``dt``'s compute domain."""
    name = dt.onnx_name
    if name == "bool":
        return expr if src_domain == "bool_" else f"({expr} != 0)"
    if name in NATIVE and not is_float_domain(NATIVE[name]):
        if is_float_domain(src_domain):  # dsl/convert.py float_to_int: trunc, NaN/Inf -> 0, wrap
            helper = "_trunc_uint64" if name == "uint64" else "_trunc_int"
            return f"np.{NATIVE[name]}({helper}({expr}))"
        return f"np.{NATIVE[name]}({expr})"
    if name in NATIVE:
        return f"np.{NATIVE[name]}({expr})"
    narrow = _float32_once(expr, src_domain)
    if name == "float16":  # from float64 via round-to-odd float32: one rounding in total
        return f"_bits.f16_to_f32(_bits.f32_to_f16({narrow}))"
    if name == "bfloat16":
        return f"_bits.bf16_to_f32(_bits.f32_to_bf16({narrow}))"
    if name in TABLE_FLOATS:
        return f"_T_{name}[{encoder_name(name, saturate, round_mode)}({narrow})]"
    if is_float_domain(src_domain):  # dsl/convert.py: truncated, out of range -> 0
        bits, signed = SUB_BYTE_INTS[name]
        low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        return sub_byte_value(name, f"_trunc_sub_byte({expr}, np.int64({low}), np.int64({high}))")
    return sub_byte_value(name, f"np.int64({expr})")


def store(dt: DType, value: str) -> str:
    """Expression of what a compute value is written as into a ``raw_view`` output buffer."""
    name = dt.onnx_name
    if name in NATIVE:
        return value
    if name == "float16":
        return f"_bits.f32_to_f16({value})"
    if name == "bfloat16":
        return f"_bits.f32_to_bf16({value})"
    if name in TABLE_FLOATS:
        # the value is already exact in the type; the non-saturating encoder keeps Inf and NaN
        return f"np.uint8({encoder_name(name, False)}({value}))"
    bits, _ = SUB_BYTE_INTS[name]
    return f"np.uint8(np.int64({value}) & {(1 << bits) - 1})"
