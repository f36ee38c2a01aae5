"""Module-level text every generated kernel module shares, after fused.PREAMBLE: the float to
integer truncations and the decode tables and encoders a kernel body names (its ``helpers``:
(kind, format, saturate, round_mode) tuples collected while rendering)."""
from __future__ import annotations

from . import scalar


def helper_lines(helpers: set) -> list[str]:
    """Module-level decode tables and scalar encoders the kernel body refers to."""
    lines = []
    for fmt in sorted({fmt for _, fmt, _, _ in helpers}):
        lines.append(f"_T_{fmt} = _floats._lookup_table({fmt!r}, np.float32)")
    for kind, fmt, flag, round_mode in sorted(h for h in helpers if h[0] == "encode"):
        name = scalar.encoder_name(fmt, flag, round_mode)
        word = "np.int64(_bits.bits_from_f32(np.float32(x)))"
        if fmt == "float8e8m0":
            mode = {"up": 0, "down": 1, "nearest": 2}[round_mode]
            call = f"_floats._e8m0_from_f32({word}, {flag}, {mode})"
        else:
            lines.append(f"{name}_params = _floats.minifloat_params({fmt!r}, {bool(flag)})")
            call = f"_floats._minifloat_from_f32({word}, {name}_params)"
        lines += ["@numba.njit(cache=True, nogil=True, inline='always')", f"def {name}(x):", f"    return {call}"]
    return lines


TRUNC = """\
@numba.njit(cache=True, nogil=True, inline='always')
def _trunc_int(x):
    # float -> int (dsl/convert.py float_to_int): truncate toward zero; NaN, Inf, |x| >= 2**63 -> 0
    if not np.isfinite(x) or abs(x) >= 9.223372036854775808e18:
        return np.int64(0)
    return np.int64(x)


@numba.njit(cache=True, nogil=True, inline='always')
def _trunc_sub_byte(x, low, high):
    # float -> int4/uint4/int2/uint2 (dsl/convert.py): truncate; NaN, Inf, out of range -> 0
    whole = _trunc_int(x)
    return whole if whole >= low and whole <= high else np.int64(0)


@numba.njit(cache=True, nogil=True, inline='always')
def _trunc_uint64(x):
    if x >= 9.223372036854775808e18 and x < 1.8446744073709551616e19:
        return np.uint64(x)
    return np.uint64(_trunc_int(x))
"""


