"""Pack and unpack sub-byte element codes (4-bit, 2-bit) in ONNX raw layout.

Layout: element i lives in byte i // per_byte at bit (i % per_byte) * bits, first
element in the low bits; unused high bits of the last byte are zero. Codes are
the raw bit patterns (uint8, value in the low ``bits``); sign and float meaning are
applied by the caller's dtype view. One compiled signature per function: the
element type never reaches the kernel.
"""
import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def unpack_bits(packed, start, count, bits, out):
    """out[j] = code of element start + j of ``packed`` (uint8 arrays).

    Requires len(out) >= count and len(packed) * (8 // bits) >= start + count.
    """
    per_byte = 8 // bits
    mask = (1 << bits) - 1
    for j in range(count):
        element = start + j
        out[j] = (packed[element // per_byte] >> ((element % per_byte) * bits)) & mask


@numba.njit(cache=True, nogil=True)
def pack_bits(codes, bits, out):
    """Pack ``codes`` (uint8, low ``bits`` used) into ``out`` (uint8, all of it written).

    Requires len(out) == ceil(len(codes) * bits / 8).
    """
    per_byte = 8 // bits
    mask = (1 << bits) - 1
    count = codes.shape[0]
    for byte_index in range(out.shape[0]):
        value = 0
        first = byte_index * per_byte
        for k in range(per_byte):
            element = first + k
            if element < count:
                value |= (codes[element] & mask) << (k * bits)
        out[byte_index] = value


def unpack(packed: np.ndarray, start: int, count: int, bits: int) -> np.ndarray:
    """Codes of elements [start, start + count) as a new uint8 array."""
    out = np.empty(count, np.uint8)
    if count:
        unpack_bits(packed, start, count, bits, out)
    return out


def pack(codes: np.ndarray, bits: int) -> np.ndarray:
    """Pack a 1-D uint8 code array into a new ONNX raw-layout uint8 array."""
    out = np.empty(-(-codes.shape[0] * bits // 8), np.uint8)
    if out.shape[0]:
        pack_bits(codes, bits, out)
    return out
