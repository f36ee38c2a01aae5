"""kernels/bits.py's float16 conversions: the hardware forms (F16C / native half, where the host
has them) are the bit-level helpers' function, input for input: every half, and a strided sweep
of float32 with every special value (scripts: the same over all 2^32 float32 inputs gave 0
mismatches)."""
import numba
import numpy as np
import pytest

from kernels import bits

HALVES = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)


@numba.njit(cache=True)
def _decode(fn, codes):
    out = np.empty(codes.size, np.float32)
    for i in range(codes.size):
        out[i] = fn(codes[i])
    return out


@numba.njit(cache=True)
def _encode(fn, words):
    out = np.empty(words.size, np.uint16)
    for i in range(words.size):
        out[i] = fn(bits.f32_from_bits(words[i]))
    return out


def float32_words() -> np.ndarray:
    """Every 4099th float32 bit pattern, plus the edges: zeros, subnormals, the float16 range's
    rounding boundaries (65504, 65520), infinities, quiet and signaling NaNs of both signs."""
    edges = [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x33000000, 0x33000001, 0x387FC000, 0x38800000,
             0x477FE000, 0x477FEFFF, 0x477FF000, 0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x7F800001, 0x7FC00000,
             0xFFC00001, 0x7FA00000, 0xFF802000]
    return np.concatenate([np.arange(0, 1 << 32, 4099, dtype=np.uint64).astype(np.uint32),
                           np.array(edges, np.uint32)])


def test_every_half_decodes_exactly_keeping_nan_payloads():
    got = _decode(bits.f16_to_f32, HALVES)
    np.testing.assert_array_equal(got.view(np.uint32), _decode(bits._f16_to_f32_bits, HALVES).view(np.uint32))
    want = HALVES.view(np.float16).astype(np.float32)  # (numpy keeps a signaling NaN's payload too)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_float32_encodes_to_the_nearest_even_half():
    words = float32_words()
    got = _encode(bits.f32_to_f16, words)
    np.testing.assert_array_equal(got, _encode(bits._f32_to_f16_bits, words))
    values = words.view(np.float32)
    numbers = ~np.isnan(values)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got[numbers], values[numbers].astype(np.float16).view(np.uint16))
    assert ((got[~numbers] & 0x7E00) == 0x7E00).all()  # (a NaN comes out quiet)


@pytest.mark.skipif(not bits.HARDWARE_F16, reason="this host converts float16 in software only")
def test_hardware_conversions_are_single_instructions():
    _decode(bits.f16_to_f32, HALVES[:8])
    _encode(bits.f32_to_f16, float32_words()[:8])
    asm = "".join(loop.inspect_asm(signature) for loop in (_decode, _encode) for signature in loop.signatures
                  if "hardware" in str(signature[0]))
    assert ("vcvtph2ps" in asm and "vcvtps2ph" in asm) or "fcvt" in asm
