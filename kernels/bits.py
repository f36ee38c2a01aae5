"""Scalar bit casts (float <-> same-width uint) for numba code, and float16 / bfloat16 conversion.

numba has no float16 on the CPU and no scalar bitcast, so generated kernels carry float16
and bfloat16 as uint16 bits and convert with these helpers (exact decode, RNE encode).
"""
import platform

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic


def _bitcast(src, dst, llvm_type):
    @intrinsic
    def cast(typingctx, value):
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], llvm_type)
        return dst(src), codegen
    return cast


f32_from_bits = _bitcast(types.uint32, types.float32, ir.FloatType())
bits_from_f32 = _bitcast(types.float32, types.uint32, ir.IntType(32))
f64_from_bits = _bitcast(types.uint64, types.float64, ir.DoubleType())
bits_from_f64 = _bitcast(types.float64, types.uint64, ir.IntType(64))


@numba.njit(cache=True, nogil=True, inline="always")
def bf16_to_f32(bits):
    """bfloat16 bits (uint16) -> float32: bfloat16 is the top half of a float32."""
    return f32_from_bits(np.uint32(bits) << np.uint32(16))


@numba.njit(cache=True, nogil=True, inline="always")
def f32_to_bf16(value):
    """float32 -> bfloat16 bits, round to nearest even; NaN -> quiet NaN with the sign kept."""
    word = bits_from_f32(np.float32(value))
    if (word & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000):
        return np.uint16((word >> np.uint32(16)) & np.uint32(0x8000) | np.uint32(0x7FC0))
    rounding = np.uint32(0x7FFF) + ((word >> np.uint32(16)) & np.uint32(1))
    return np.uint16((word + rounding) >> np.uint32(16))


def _host_has_f16c() -> bool:
    """Whether the CPU numba compiles for converts float16 in hardware (x86 F16C: vcvtph2ps /
    vcvtps2ph; every x86-64 since 2012) or natively (aarch64): LLVM's half conversions then
    become those instructions, else calls to a runtime library numba's JIT does not link."""
    try:
        from llvmlite import binding
        features = binding.get_host_cpu_features()
    except Exception:  # (an llvmlite without the query: the bit-level helpers)
        return False
    return bool(features.get("f16c")) or platform.machine().lower() in ("aarch64", "arm64")


HARDWARE_F16 = _host_has_f16c()


@intrinsic
def _half_bits_to_f32(typingctx, bits):
    def codegen(context, builder, signature, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())
    return types.float32(types.uint16), codegen


@intrinsic
def _f32_to_half_bits(typingctx, value):
    def codegen(context, builder, signature, args):
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))
    return types.uint16(types.float32), codegen


@numba.njit(cache=True, nogil=True, inline="always")
def _f16_to_f32_bits(bits):
    h = np.uint32(bits)
    sign = (h & np.uint32(0x8000)) << np.uint32(16)
    exponent = (h >> np.uint32(10)) & np.uint32(0x1F)
    mantissa = h & np.uint32(0x3FF)
    if exponent == 0x1F:
        return f32_from_bits(sign | np.uint32(0x7F800000) | (mantissa << np.uint32(13)))
    if exponent == 0:
        magnitude = np.float32(mantissa) * np.float32(5.960464477539063e-08)  # mantissa * 2^-24
        return -magnitude if sign else magnitude
    return f32_from_bits(sign | ((exponent + np.uint32(112)) << np.uint32(23)) | (mantissa << np.uint32(13)))


@numba.njit(cache=True, nogil=True, inline="always")
def _f16_to_f32_hardware(bits):
    h = np.uint32(bits)
    # (the hardware quiets a signaling NaN; numpy keeps its payload as it is, and so does this)
    nan = ((h & np.uint32(0x7C00)) == np.uint32(0x7C00)) & ((h & np.uint32(0x3FF)) != np.uint32(0))
    kept = f32_from_bits(((h & np.uint32(0x8000)) << np.uint32(16)) | np.uint32(0x7F800000)
                         | ((h & np.uint32(0x3FF)) << np.uint32(13)))
    return kept if nan else _half_bits_to_f32(np.uint16(bits))


@numba.njit(cache=True, nogil=True, inline="always")
def _f32_to_f16_bits(value):
    word = bits_from_f32(np.float32(value))
    sign = np.uint32((word >> np.uint32(16)) & np.uint32(0x8000))
    magnitude = word & np.uint32(0x7FFFFFFF)
    if magnitude > np.uint32(0x7F800000):
        return np.uint16(sign | np.uint32(0x7E00) | ((magnitude >> np.uint32(13)) & np.uint32(0x1FF)))
    if magnitude >= np.uint32(0x477FF000):  # >= 65520 rounds to Inf
        return np.uint16(sign | np.uint32(0x7C00))
    if magnitude < np.uint32(0x38800000):  # below 2^-14: a half subnormal (or zero)
        scaled = f32_from_bits(magnitude) * np.float32(16777216.0)  # exact: value * 2^24
        return np.uint16(sign | np.uint32(np.rint(scaled)))
    rounding = np.uint32(0xFFF) + ((magnitude >> np.uint32(13)) & np.uint32(1))
    return np.uint16(sign | ((magnitude - np.uint32(0x38000000) + rounding) >> np.uint32(13)))


@numba.njit(cache=True, nogil=True, inline="always")
def _f32_to_f16_hardware(value):
    return _f32_to_half_bits(np.float32(value))


# IEEE half bits (uint16) -> float32, exact (subnormals, Inf and NaN payloads kept), and float32
# -> half bits, round to nearest even (overflow -> Inf, a NaN made quiet keeping its sign and top
# payload bits). The hardware forms are the same function (every one of the 2^32 float32 inputs
# and 2^16 half inputs: tests/kernels/test_bits.py) without branches: LLVM vectorizes them (one
# vcvtph2ps / vcvtps2ph for 8 elements) and compiles a float16 chain in a fraction of the time
# (the softmax row kernel of onnx's float16 local-window attention case, 7 round trips an
# element: 7.4 -> 4.5 s of numba + LLVM time).
f16_to_f32 = _f16_to_f32_hardware if HARDWARE_F16 else _f16_to_f32_bits
f32_to_f16 = _f32_to_f16_hardware if HARDWARE_F16 else _f32_to_f16_bits


@numba.njit(cache=True, nogil=True, inline="always")
def f64_to_f32_odd(value):
    """float64 -> float32 rounding to ODD: an inexact result gets an odd last bit. Rounding
    that again to any format at least 2 bits narrower (float16, bfloat16) equals rounding the
    float64 once (the round-to-odd theorem)."""
    x = np.float64(value)
    nearest = np.float32(x)
    if np.float64(nearest) == x or not np.isfinite(x) or not np.isfinite(nearest):
        return nearest
    word = bits_from_f32(nearest)
    if word & np.uint32(1):
        return nearest
    toward_zero = abs(np.float64(nearest)) > abs(x)  # RNE went away from zero: step back
    return f32_from_bits(word - np.uint32(1) if toward_zero else word + np.uint32(1))


@numba.njit(cache=True, nogil=True, inline="always")
def quantize_to_int(quotient, zero_point, low, high):
    """QuantizeLinear's integer step on x / scale: round half to even, add the zero point (in
    float64, exact for every quantized type), saturate to [low, high]; NaN -> low."""
    value = np.float64(np.rint(quotient)) + np.float64(zero_point)
    if value != value:
        return np.int64(low)
    return np.int64(min(max(value, np.float64(low)), np.float64(high)))


# Reduction steps. A kernel compiled with fastmath lets LLVM reassociate its element
# expressions too (it rewrote s + (1 - m) * -1e4 into (s - 1e4) + 1e4 * m, losing s's low
# bits); add_step is not numba-inlined, so after LLVM inlines it the flags stay on the
# accumulating add alone, which is all the loop vectorizer needs.
@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "nsz"})
def add_step(acc, value):
    """acc + value, reassociable (a vectorizable sum)."""
    return acc + value


@numba.njit(cache=True, nogil=True)
def max_step(acc, value):
    """max of integers (a select LLVM vectorizes as a max reduction)."""
    return value if value > acc else acc


@numba.njit(cache=True, nogil=True)
def min_step(acc, value):
    """min of integers."""
    return value if value < acc else acc


@numba.njit(cache=True, nogil=True)
def within(values, lows, highs):
    """Whether each column c of the 2-d integer array ``values`` lies in [lows[c], highs[c]]:
    one pass of min / max per column (a fused gather's index check before its kernel runs)."""
    rows, columns = values.shape
    for c in range(columns):
        if rows == 0:
            return True
        low = high = values[0, c]
        for r in range(rows):
            v = values[r, c]
            low = v if v < low else low
            high = v if v > high else high
        if low < lows[c] or high > highs[c]:
            return False
    return True


def _float_extreme(llvm_name: str, flags: tuple = ()):
    @intrinsic
    def step(typingctx, acc, value):
        if not (isinstance(acc, types.Float) and acc == value):
            return None

        def codegen(context, builder, signature, args):
            ty = context.get_value_type(signature.args[0])
            fn = builder.module.declare_intrinsic(llvm_name, [ty], ir.FunctionType(ty, [ty, ty]))
            return builder.call(fn, args, fastmath=flags)
        return acc(acc, value), codegen
    return step


# IEEE 754-2019 maximum / minimum (llvm.maximum): NaN propagates, -0 < +0. A float max row
# then needs no NaN flag, and LLVM vectorizes it as a reduction (a select-based max with a
# NaN flag did not vectorize: 12 ms -> 3.9 ms for 8M float32, numpy 1.3 ms).
maximum_step = _float_extreme("llvm.maximum")
maximum_step.__doc__ = "maximum(acc, value) of floats; NaN if either is NaN."
minimum_step = _float_extreme("llvm.minimum")
minimum_step.__doc__ = "minimum(acc, value) of floats; NaN if either is NaN."

# The same for callers that rule out NaN and zero results themselves (llvm.maxnum with the
# nnan and nsz flags: one vmaxps a vector, where llvm.maximum lowers to six instructions on
# x86). A row reduction accumulates with it plus a NaN flag, and a row that saw a NaN or whose
# result is a zero (of either sign) is reduced again with maximum_step: the result is the same.
# Max over [8, 128256] float32: 80 -> 48 us (numpy 53).
maxnum_step = _float_extreme("llvm.maxnum", ("nnan", "nsz"))
maxnum_step.__doc__ = "max(acc, value) of floats, assuming neither is NaN; either zero may win."
minnum_step = _float_extreme("llvm.minnum", ("nnan", "nsz"))
minnum_step.__doc__ = "min(acc, value) of floats, assuming neither is NaN; either zero may win."


@numba.njit(cache=True, nogil=True, inline="always")
def exp_for_f32(x):
    """exp(x) as a float64 accurate to 1e-11 relative: ample for a result rounded to float32
    (<= 0.5 ulp + 1e-4 ulp), and vectorizable (no libm call): x = k ln2 + r in float64, a
    degree-10 Taylor polynomial on |r| <= ln(2)/2, exponent bits for 2**k. Below -708 -> 0,
    above 709 -> inf. Used by float32 Softmax rows (numpy's SIMD exp is the peer)."""
    value = np.float64(x)
    if value > 709.0:
        return np.inf
    if value < -708.0:
        return 0.0
    k = np.rint(value * 1.4426950408889634)
    r = value - k * 0.6931471805599453
    p = 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    return p * f64_from_bits(np.uint64((np.int64(k) + np.int64(1023)) << np.int64(52)))


@numba.njit(cache=True, nogil=True, inline="always")
def _odd_step(f, toward_zero):
    """The float64 next to ``f`` (an even-mantissa inexact result) in the given direction."""
    word = bits_from_f64(f)
    if word & np.uint64(1):
        return f
    return f64_from_bits(word - np.uint64(1) if toward_zero else word + np.uint64(1))


@numba.njit(cache=True, nogil=True, inline="always")
def i64_to_f64_odd(x):
    """int64 -> float64 rounding to odd (so a later float32 / narrow rounding is a single one)."""
    value = np.int64(x)
    f = np.float64(value)
    if f >= 9.223372036854775808e18:  # rounded up past INT64_MAX: the true value is below
        return _odd_step(f, True)
    back = np.int64(f)
    if back == value:
        return f
    return _odd_step(f, back > value if value > 0 else back < value)


@numba.njit(cache=True, nogil=True, inline="always")
def u64_to_f64_odd(x):
    """uint64 -> float64 rounding to odd."""
    value = np.uint64(x)
    f = np.float64(value)
    if f >= 1.8446744073709551616e19:
        return _odd_step(f, True)
    back = np.uint64(f)
    if back == value:
        return f
    return _odd_step(f, back > value)


# ---- streaming (non-temporal) stores ------------------------------------------------------------
_NONTEMPORAL = ir.Constant(ir.IntType(32), 1)


@intrinsic
def stream_store(typingctx, array, index, value):
    """``array[index] = value`` as a non-temporal store: the cache line is written without
    being read first (a plain store reads it: a third of a streaming kernel's traffic) and is
    not kept in the caches. The store claims 64-byte alignment, which lets LLVM's vectorizer
    emit aligned streaming vector stores (vmovntps); the caller guarantees that every run of
    stores the vectorizer groups starts on a 64-byte boundary (runtime.py checks the buffer
    and the row length). Finish with ``stream_fence()`` before another thread reads. Bounds
    are checked like ``array[index] = value`` when numba's bounds checking is on."""
    if not (isinstance(array, types.Array) and array.ndim == 1 and isinstance(index, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        array_type, index_type, value_type = signature.args
        array = context.make_array(array_type)(context, builder, args[0])
        # numba's own element address, bounds-checked when NUMBA_BOUNDSCHECK=1 (as array[i] = v)
        pointer = cgutils.get_item_pointer2(
            context, builder, array.data, cgutils.unpack_tuple(builder, array.shape),
            cgutils.unpack_tuple(builder, array.strides), array_type.layout,
            [context.cast(builder, args[1], index_type, types.intp)], wraparound=False,
            boundscheck=context.enable_boundscheck)
        value = context.cast(builder, args[2], value_type, array_type.dtype)
        stored = context.data_model_manager[array_type.dtype].as_data(builder, value)
        store = builder.store(stored, pointer, align=64)
        store.set_metadata("nontemporal", builder.module.add_metadata([_NONTEMPORAL]))
        return context.get_dummy_value()
    return types.void(array, index, value), codegen


_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")


@intrinsic
def stream_fence(typingctx):
    """Orders this thread's streaming stores before whatever it does next, e.g. reporting the
    kernel done to another thread: sfence on x86 (which streaming stores need), else a full
    fence."""
    def codegen(context, builder, signature, args):
        if _X86:
            builder.call(builder.module.declare_intrinsic("llvm.x86.sse.sfence", (), ir.FunctionType(ir.VoidType(), [])), [])
        else:
            builder.fence("seq_cst")
        return context.get_dummy_value()
    return types.void(), codegen


@intrinsic
def prefetch(typingctx, array, index):
    """A read hint for the cache line of ``array[min(index, size - 1)]`` (llvm.prefetch, into
    all cache levels): it loads nothing into the program and cannot fault, and the index is
    clamped so the hint never names memory outside the array. For access patterns the
    hardware prefetchers miss: many short runs a large stride apart."""
    if not (isinstance(array, types.Array) and array.ndim == 1 and isinstance(index, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        array_type, index_type = signature.args
        array = context.make_array(array_type)(context, builder, args[0])
        size = builder.extract_value(array.shape, 0)
        i = context.cast(builder, args[1], index_type, types.intp)
        zero = ir.Constant(size.type, 0)
        last = builder.select(builder.icmp_unsigned(">", size, zero), builder.sub(size, ir.Constant(size.type, 1)), zero)
        i = builder.select(builder.icmp_unsigned("<", i, size), i, last)  # (an empty array: its data pointer)
        pointer = builder.bitcast(builder.gep(array.data, [i]), ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fn = builder.module.declare_intrinsic("llvm.prefetch", [pointer.type],
                                              ir.FunctionType(ir.VoidType(), [pointer.type, i32, i32, i32]))
        builder.call(fn, [pointer, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()
    return types.void(array, index), codegen
