"""Loop-nest kernels (dsl/kir/loops.py): the numba renderer (dsl/codegen/loops.py) against the
interpreter (dsl/kir/interp.py run_kernel) on kernels of the patterns the op set needs: tiled
transposed reads, reductions with vector accumulators, guarded loads (concatenation, padding),
gathers through loaded indices, stores into slices of an output, packed int4 loads."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsl
from dsl import kir
from dsl.codegen import compile as codegen_compile
from dsl.codegen.loops import kernel_source
from dsl.kir import interp
from dsl.kir import loops as L

U = L.index_var


def run_both(kernel, inputs: dict, outputs: dict, params: dict):
    """(compiled outputs, interpreted outputs), each {name: flat array}."""
    L.verify(kernel)
    source = kernel_source(kernel)
    compiled = codegen_compile.compile_kernel(source)
    got = {k: np.zeros_like(v) for k, v in outputs.items()}
    args = [np.uint64(params[p]) for p in kernel.params]
    args += [inputs[b.name].view(kir.types.storage(b.elem)) if b.role == "in" else got[b.name]
             for b in kernel.buffers if b.role != "temp"]
    compiled(*args)
    want = {k: np.zeros_like(v) for k, v in outputs.items()}
    interp.run_kernel(kernel, {**inputs, **want}, params)
    return got, want, source


def transpose_add(rows, cols, tile):
    """out[i, j] = x[j, i] + y[i, j] in tiles of tile x tile (x read transposed)."""
    f32 = dsl.float32
    x, y, out = L.Buffer("x", f32), L.Buffer("y", f32), L.Buffer("out", f32, "out")
    n, m, t = U("n"), U("m"), L.index(tile)
    bi, bj, i, j = U("bi"), U("bj"), U("i"), U("j")
    i_end = kir.binary("min", L.add(kir.binary("mul", bi, t), t), n)
    j_end = kir.binary("min", L.add(kir.binary("mul", bj, t), t), m)
    value = kir.binary("add", L.load(x, L.add(L.mul(j, n), i)), L.load(y, L.add(L.mul(i, m), j)))
    body = [L.For("bi", L.index(0), kir.binary("floordiv", L.add(n, L.index(tile - 1)), t), [
        L.For("bj", L.index(0), kir.binary("floordiv", L.add(m, L.index(tile - 1)), t), [
            L.For("i", L.mul(bi, t), i_end, [
                L.For("j", L.mul(bj, t), j_end, [L.Store(out, L.add(L.mul(i, m), j), value)])])])])]
    return L.Kernel("transpose_add", [x, y, out], ["n", "m"], body)


@pytest.mark.parametrize("rows, cols, tile", [(5, 7, 2), (16, 16, 8), (1, 9, 4)])
def test_tiled_transposed_reads(rows, cols, tile):
    rng = np.random.default_rng(rows * cols)
    x = rng.standard_normal((cols, rows)).astype(np.float32)
    y = rng.standard_normal((rows, cols)).astype(np.float32)
    got, want, source = run_both(transpose_add(rows, cols, tile), {"x": x.ravel(), "y": y.ravel()},
                                 {"out": np.zeros(rows * cols, np.float32)}, {"n": rows, "m": cols})
    np.testing.assert_array_equal(got["out"], want["out"])
    np.testing.assert_array_equal(got["out"].reshape(rows, cols), x.T + y)
    assert "for bj in range(" in source


def column_sums(elem):
    """out[j] = sum_i x[i, j]: the reduction loop outside, a vector accumulator over j inside."""
    x, out, acc = L.Buffer("x", elem), L.Buffer("out", dsl.float32, "out"), L.Buffer("acc", dsl.double, "temp")
    n, m, i, j = U("n"), U("m"), U("i"), U("j")
    value = kir.convert(L.load(x, L.add(L.mul(i, m), j)), "float64")
    body = [L.Alloc(acc, m),
            L.For("j", L.index(0), m, [L.Store(acc, j, kir.const(0.0, "float64"))]),
            L.For("i", L.index(0), n, [
                L.For("j", L.index(0), m, [L.Store(acc, j, kir.binary("add", L.load(acc, j), value))])]),
            L.For("j", L.index(0), m, [L.Store(out, j, kir.cast(L.load(acc, j), dsl.float32))])]
    return L.Kernel("column_sums", [x, out, acc], ["n", "m"], body)


@pytest.mark.parametrize("elem, np_type", [(dsl.float32, np.float32), (dsl.float16, np.float16),
                                           (dsl.bfloat16, ml_dtypes.bfloat16), (dsl.int8, np.int8)])
def test_reductions_with_vector_accumulators(elem, np_type):
    x = (np.random.default_rng(1).standard_normal((6, 9)) * 20).astype(np_type)
    got, want, _ = run_both(column_sums(elem), {"x": x.ravel()}, {"out": np.zeros(9, np.float32)}, {"n": 6, "m": 9})
    np.testing.assert_array_equal(got["out"], want["out"])
    np.testing.assert_allclose(got["out"], x.astype(np.float64).sum(0).astype(np.float32), rtol=1e-6)


def concat_pad(pad_value: float):
    """out = pad(concat([a, b], axis 0), one row of pad_value above): guarded loads pick a, b or
    the default; no read happens outside what each input holds."""
    a, b, out = L.Buffer("a", dsl.float32), L.Buffer("b", dsl.float32), L.Buffer("out", dsl.float32, "out")
    na, nb, m, i, j = U("na"), U("nb"), U("m"), U("i"), U("j")
    row = kir.binary("sub", i, L.index(1))  # (only read where i >= 1)
    in_a = kir.binary("and", kir.compare("ge", i, L.index(1)), kir.compare("lt", i, L.add(na, L.index(1))))
    in_b = kir.compare("ge", i, L.add(na, L.index(1)))
    zero = kir.const(pad_value, "float32")
    from_b = L.load(b, L.add(L.mul(kir.binary("sub", row, na), m), j), in_b, zero)
    value = L.load(a, L.add(L.mul(row, m), j), in_a, from_b)
    body = [L.For("i", L.index(0), L.add(na, nb, L.index(1)), [
        L.For("j", L.index(0), m, [L.Store(out, L.add(L.mul(i, m), j), value)])])]
    return L.Kernel("concat_pad", [a, b, out], ["na", "nb", "m"], body)


def test_guarded_loads_for_concatenation_and_padding():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = -np.arange(9, dtype=np.float32).reshape(3, 3) - 1
    got, want, _ = run_both(concat_pad(7.5), {"a": a.ravel(), "b": b.ravel()}, {"out": np.zeros(18, np.float32)},
                            {"na": 2, "nb": 3, "m": 3})
    expected = np.concatenate([np.full((1, 3), 7.5, np.float32), a, b])
    np.testing.assert_array_equal(got["out"].reshape(6, 3), expected)
    np.testing.assert_array_equal(want["out"], got["out"])


def gather_rows(elem, packed: bool):
    """out[k, j] = table[ids[k], j]: an index taken from a loaded value (ids validated by the
    caller before the kernel runs)."""
    table, ids = L.Buffer("table", elem, packed=packed), L.Buffer("ids", dsl.int64)
    out = L.Buffer("out", dsl.float32, "out")
    k, j, m, count = U("k"), U("j"), U("m"), U("count")
    row = kir.convert(L.load(ids, k), "uint64")
    value = kir.cast(L.load(table, L.add(L.mul(row, m), j)), dsl.float32)
    body = [L.For("k", L.index(0), count, [L.For("j", L.index(0), m, [L.Store(out, L.add(L.mul(k, m), j), value)])])]
    return L.Kernel("gather_rows", [table, ids, out], ["count", "m"], body)


@pytest.mark.parametrize("elem, packed", [(dsl.float32, False), (dsl.float16, False), (dsl.int4, True)])
def test_gathers_through_loaded_indices(elem, packed):
    rng = np.random.default_rng(4)
    if elem == dsl.int4:
        values = rng.integers(-8, 8, (10, 6)).astype(ml_dtypes.int4)
        table = dsl.Tensor.from_numpy(values).packed()
        oracle_table = values.ravel()
    else:
        values = rng.standard_normal((10, 6)).astype(elem.np_dtype)
        table = oracle_table = values.ravel()
    ids = np.array([3, 0, 9, 3], np.int64)
    kernel = gather_rows(elem, packed)
    L.verify(kernel)
    compiled = codegen_compile.compile_kernel(kernel_source(kernel))
    got = np.zeros(24, np.float32)
    compiled(np.uint64(4), np.uint64(6), table if packed else table.view(kir.types.storage(elem)), ids, got)
    want = np.zeros(24, np.float32)
    interp.run_kernel(kernel, {"table": oracle_table, "ids": ids, "out": want}, {"count": 4, "m": 6})
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got.reshape(4, 6), values.astype(np.float32)[ids])


def slice_store(start: int):
    """out[:, start:start + m] = x (a store into a slice of a wider output; KV-cache append)."""
    x, out = L.Buffer("x", dsl.float32), L.Buffer("out", dsl.float32, "out")
    n, m, width, i, j = U("n"), U("m"), U("width"), U("i"), U("j")
    body = [L.For("i", L.index(0), n, [L.For("j", L.index(0), m, [
        L.Store(out, L.add(L.mul(i, width), j, L.index(start)), L.load(x, L.add(L.mul(i, m), j)))])])]
    return L.Kernel("slice_store", [x, out], ["n", "m", "width"], body)


def test_stores_into_slices_of_an_output():
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    got, want, _ = run_both(slice_store(3), {"x": x.ravel()}, {"out": np.zeros(20, np.float32)},
                            {"n": 2, "m": 4, "width": 10})
    expected = np.zeros((2, 10), np.float32)
    expected[:, 3:7] = x
    np.testing.assert_array_equal(got["out"].reshape(2, 10), expected)
    np.testing.assert_array_equal(want["out"], got["out"])


@pytest.mark.parametrize("build, message", [
    (lambda: L.Kernel("k", [], [], [L.Assign("a", U("nowhere"))]), "nowhere is used before it is defined"),
    (lambda: L.Kernel("k", [L.Buffer("o", dsl.float32, "out")], [], [L.Assign("a", L.load(L.Buffer("o", dsl.float32, "out"),
                                                                                           L.index(0)))]),
     "load from o, not an input"),
    (lambda: L.Kernel("k", [b := L.Buffer("o", dsl.float32, "out")], [], [L.Store(b, L.index(0), kir.const(1, "int8"))]),
     "store of int8 into o"),
])
def test_verifier_refuses_malformed_kernels(build, message):
    with pytest.raises(kir.IRError, match=message):
        L.verify(build())


def test_a_kernel_reads_back_only_an_output_it_has_stored():
    """The row schedule keeps a softmax row's exponentials in the output and scales them in place;
    a load of an output before any store to it reads uninitialized memory and is refused."""
    out = L.Buffer("o", dsl.float32, "out")
    store = L.Store(out, L.index(0), kir.const(2.0, "float32"))
    read = L.Store(out, L.index(1), L.load(out, L.index(0)))
    L.verify(L.Kernel("k", [out], [], [store, read]))
    with pytest.raises(kir.IRError, match="load from o, not an input, a temp or an output the kernel writes"):
        L.verify(L.Kernel("k", [out], [], [read, store]))
    got = {"o": np.zeros(2, np.float32)}
    interp.run_kernel(L.Kernel("k", [out], [], [store, read]), got, {})
    np.testing.assert_array_equal(got["o"], [2.0, 2.0])


OPS = ["add", "sub", "mul", "max", "min", "div"]


@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(st.data())
def test_random_elementwise_loop_kernels_match_the_interpreter(data):
    """Random expression trees over two loaded inputs and constants, in a 2-d loop nest with a
    random (possibly transposed) read order: the rendered kernel equals the interpreter."""
    scalar = data.draw(st.sampled_from(["float32", "int32", "float64"]))
    elem = {"float32": dsl.float32, "int32": dsl.int32, "float64": dsl.double}[scalar]
    a, b, out = L.Buffer("a", elem), L.Buffer("b", elem), L.Buffer("out", elem, "out")
    n, m, i, j = U("n"), U("m"), U("i"), U("j")
    transposed = data.draw(st.booleans())
    index_a = L.add(L.mul(j, n), i) if transposed else L.add(L.mul(i, m), j)
    leaves = [L.load(a, index_a), L.load(b, L.add(L.mul(i, m), j)), kir.const(3, scalar)]
    node = leaves[0]
    for _ in range(data.draw(st.integers(1, 6))):
        node = kir.binary(data.draw(st.sampled_from(OPS)), node, data.draw(st.sampled_from(leaves)))
    kernel = L.Kernel("random", [a, b, out], ["n", "m"], [L.For("i", L.index(0), n, [
        L.For("j", L.index(0), m, [L.Store(out, L.add(L.mul(i, m), j), node)])])])
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    av = (rng.integers(-9, 9, 12) + (0.5 if scalar != "int32" else 0)).astype(elem.np_dtype)
    bv = (rng.integers(-9, 9, 12)).astype(elem.np_dtype)
    with np.errstate(all="ignore"):
        got, want, _ = run_both(kernel, {"a": av, "b": bv}, {"out": np.zeros(12, elem.np_dtype)}, {"n": 3, "m": 4})
    np.testing.assert_array_equal(got["out"], want["out"])
