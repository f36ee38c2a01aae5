"""The bit-exact moves pass (dsl/kir/moves.py): stores that only move float16 / bfloat16 / 8-bit
float elements become raw copies, on the numba renderer and the interpreter alike; stores that
compute stay decoded."""
import numpy as np
import pytest

import dsl
from dsl.kir import expr as kir
from dsl.kir import interp
from dsl.kir import loops as L
from dsl.kir.moves import raw_bits, raw_moves

from dsl.codegen import compile as codegen_compile
from dsl.codegen.loops import kernel_source

U = L.index_var
BITS = {"float16": [0xFCC9, 0x7C01, 0x7E00, 0x8000, 0x3C00, 0x0001],
        "bfloat16": [0x7F81, 0xFFA3, 0x7FC0, 0x8000, 0x3F80, 0x0001],
        "float8e4m3fn": [0x7F, 0xFF, 0x38, 0x80, 0x01, 0x40]}


def select_kernel(elem, compute: bool):
    """out[i] = x[i] if i is even else (y[i] if i < 4 else 0) (times 1 when ``compute``)."""
    x, y, out = L.Buffer("x", elem), L.Buffer("y", elem), L.Buffer("out", elem, "out")
    i = U("i")
    even = kir.compare("eq", kir.binary("mod", i, L.index(2)), L.index(0))
    low = kir.compare("lt", i, L.index(4))
    value = kir.select(even, L.load(x, i), kir.select(low, L.load(y, i), kir.const(0.0, "float32")))
    if compute:
        value = kir.binary("mul", value, kir.const(1.0, "float32"))
    body = [L.For("i", L.index(0), U("n"), [L.Store(out, i, kir.cast(value, elem))])]
    return L.Kernel("select", [x, y, out], ["n"], raw_moves(body))


@pytest.mark.parametrize("name", list(BITS))
def test_moves_copy_bits_on_both_backends(name):
    elem = dsl.dtype(name)
    storage = np.uint16 if elem.bits == 16 else np.uint8
    x = np.array(BITS[name], storage).view(elem.np_dtype)
    y = x[::-1].copy()
    kernel = select_kernel(elem, compute=False)
    assert L.walk(kernel.body) and all(s.raw for s in L.walk(kernel.body) if isinstance(s, L.Store))
    L.verify(kernel)
    compiled = codegen_compile.compile_kernel(kernel_source(kernel))
    got = np.zeros(6, storage)
    compiled(np.uint64(6), x.view(storage), y.view(storage), got)
    want = np.zeros(6, elem.np_dtype)
    interp.run_kernel(kernel, {"x": x, "y": y, "out": want}, {"n": 6})
    expected = np.array([x[0], y[1], x[2], y[3], x[4], 0], elem.np_dtype).view(storage)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(want.view(storage), expected)


def test_computing_stores_stay_decoded_and_other_types_untouched():
    kernel = select_kernel(dsl.dtype("float16"), compute=True)
    assert not any(s.raw for s in L.walk(kernel.body) if isinstance(s, L.Store))
    f32 = L.Buffer("x", dsl.float32)
    body = raw_moves([L.Store(L.Buffer("o", dsl.float32, "out"), U("i"), L.load(f32, U("i")))])
    assert not body[0].raw  # (float32 loads and stores are bits already)
    assert raw_bits(L.load(L.Buffer("x", dsl.float16), U("i")), dsl.dtype("bfloat16")) is None  # (a conversion)
