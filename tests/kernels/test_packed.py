"""Tests of kernels/packed.py: 2-bit and 4-bit pack/unpack against plain numpy formulas and .py_func."""
import ast
from pathlib import Path

import numpy as np
import pytest

from kernels import packed

BITS = pytest.mark.parametrize("bits", [2, 4])
COUNTS = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 63, 1001]


def pack_formula(codes: np.ndarray, bits: int) -> np.ndarray:
    """ONNX raw layout: element i in byte i // per_byte at bit (i % per_byte) * bits, zero padding."""
    per_byte = 8 // bits
    out = np.zeros(-(-codes.size * bits // 8), np.uint8)
    for i, code in enumerate(codes.tolist()):
        out[i // per_byte] |= (code & ((1 << bits) - 1)) << (i % per_byte * bits)
    return out


def unpack_formula(raw: np.ndarray, start: int, count: int, bits: int) -> np.ndarray:
    per_byte = 8 // bits
    element = np.arange(start, start + count)
    return ((raw[element // per_byte] >> (element % per_byte * bits)) & ((1 << bits) - 1)).astype(np.uint8)


def random_codes(count: int, seed: int, high: int = 256) -> np.ndarray:
    """uint8 codes; high bits set on purpose (only the low ``bits`` may be used)."""
    return np.random.default_rng(seed).integers(0, high, count, dtype=np.uint8)


@BITS
@pytest.mark.parametrize("count", COUNTS)
def test_pack_matches_formula(bits, count):
    codes = random_codes(count, seed=count)
    out = packed.pack(codes, bits)
    assert out.dtype == np.uint8 and out.shape == (-(-count * bits // 8),)
    np.testing.assert_array_equal(out, pack_formula(codes, bits))


@BITS
@pytest.mark.parametrize("count", COUNTS)
def test_unpack_of_pack_round_trips(bits, count):
    codes = random_codes(count, seed=count, high=1 << bits)
    np.testing.assert_array_equal(packed.unpack(packed.pack(codes, bits), 0, count, bits), codes)


@BITS
@pytest.mark.parametrize("seed", range(6))
def test_unpack_matches_formula_at_any_start(bits, seed):
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, int(rng.integers(1, 40)), dtype=np.uint8)
    capacity = raw.size * (8 // bits)
    for _ in range(20):
        start = int(rng.integers(0, capacity + 1))
        count = int(rng.integers(0, capacity - start + 1))
        out = packed.unpack(raw, start, count, bits)
        assert out.dtype == np.uint8 and out.shape == (count,)
        np.testing.assert_array_equal(out, unpack_formula(raw, start, count, bits))


@pytest.mark.parametrize("bits, raw, expected", [
    (4, [0x21, 0xF3], [1, 2, 3, 15]),
    (2, [0b11100100, 0b00000001], [0, 1, 2, 3, 1, 0, 0, 0]),
])
def test_low_bits_hold_the_first_element(bits, raw, expected):
    raw = np.array(raw, np.uint8)
    assert packed.unpack(raw, 0, len(expected), bits).tolist() == expected
    assert packed.pack(np.array(expected, np.uint8), bits).tolist() == raw.tolist()


@BITS
@pytest.mark.parametrize("count", [1, 5, 17])
def test_unpack_bits_writes_only_count_elements(bits, count):
    raw = random_codes(10, seed=3)
    out = np.full(count + 4, 0xAA, np.uint8)
    packed.unpack_bits(raw, 2, count, bits, out)
    np.testing.assert_array_equal(out[:count], unpack_formula(raw, 2, count, bits))
    assert out[count:].tolist() == [0xAA] * 4


@BITS
@pytest.mark.parametrize("count", [1, 3, 7, 17])
def test_pack_bits_overwrites_all_of_out(bits, count):
    codes = random_codes(count, seed=count)
    out = np.full(-(-count * bits // 8), 0xFF, np.uint8)
    packed.pack_bits(codes, bits, out)
    np.testing.assert_array_equal(out, pack_formula(codes, bits))


@BITS
@pytest.mark.parametrize("count", [0, 1, 6, 33])
def test_jitted_kernels_equal_py_func(bits, count):
    codes = random_codes(count, seed=count + bits)
    size = -(-count * bits // 8)
    jitted, python = np.zeros(size, np.uint8), np.zeros(size, np.uint8)
    packed.pack_bits(codes, bits, jitted)
    packed.pack_bits.py_func(codes, bits, python)
    np.testing.assert_array_equal(jitted, python)
    raw = random_codes(size + 1, seed=count)
    for start in (0, 1, 3):
        span = max(0, min(count, (size + 1) * (8 // bits) - start))
        jitted, python = np.zeros(span, np.uint8), np.zeros(span, np.uint8)
        packed.unpack_bits(raw, start, span, bits, jitted)
        packed.unpack_bits.py_func(raw, start, span, bits, python)
        np.testing.assert_array_equal(jitted, python)


def test_kernels_never_import_dsl():
    """packed.py imports numba, numpy and its own package (kernels/parallel.py) only; no kernel
    module imports dsl (dsl installs its thread policy into kernels/parallel.py instead)."""
    def imports(path):
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                found.add((node.module or "").split(".")[0] if node.level == 0 else
                          "<kernels>" if node.level == 1 else "<outside kernels>")
        return found
    assert imports(Path(packed.__file__)) <= {"numba", "numpy", "<kernels>"}
    for path in Path(packed.__file__).parent.glob("*.py"):
        assert not imports(path) & {"dsl", "<outside kernels>"}, path.name


@pytest.mark.parametrize("bits", [2, 4])
@pytest.mark.parametrize("start, count", [(0, 800_001), (2, 799_999), (1, 700_001), (4, 300_000), (3, 101)])
def test_unpack_values_matches_a_table_gather_on_every_path(bits, start, count):
    """The whole-byte parallel path, its odd tail, the generic parallel rows and the small path."""
    rng = np.random.default_rng(bits * 1000 + start)
    per_byte = 8 // bits
    buf = rng.integers(0, 256, (start + count) // per_byte + 1, dtype=np.uint8)
    values = rng.standard_normal(1 << bits).astype(np.float32)
    shifts = np.arange(per_byte, dtype=np.uint8) * bits
    codes = ((buf[:, None] >> shifts) & ((1 << bits) - 1)).reshape(-1)
    out = np.empty(count, np.float32)
    packed.unpack_values(buf, start, count, packed.byte_table(values, bits), out)
    np.testing.assert_array_equal(out, values[codes[start:start + count]])
