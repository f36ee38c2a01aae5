"""The elementwise schedule (dsl/kir/elementwise.py) and the statements it uses, rendered for numba
(dsl/codegen/loops.py) and checked against the kernel-IR interpreter (dsl/kir/interp.py) and
numpy: every inner-dim variant (broadcast, unit, strided, blocked parameters), byte pairs of
4-bit inputs at odd offsets and odd lengths, streamed strips, tiles with block transposes; the
hoisting pass (dsl/kir/hoist.py) keeps results and moves what is invariant out of loops."""
import itertools

import ml_dtypes
import numpy as np
import pytest

import dsl
from dsl import kir
from dsl.codegen.loops import kernel_source
from dsl.kir import elementwise as E
from dsl.kir import loops as L
from dsl.kir.hoist import hoist
from kernel_runs import raw, run

U = L.index_var


def strided_params(rank: int, shape: tuple, strides: list, offsets: list) -> dict:
    params = {"start": 0, "stop": shape[0], **{f"n{k}": d for k, d in enumerate(shape)}}
    for i, (st, off) in enumerate(zip(strides, offsets)):
        params[f"o{i}"] = off
        params.update({f"s{i}_{k}": s for k, s in enumerate(st)})
    return params


def inner_kind(stride: int) -> int:
    return E.BROADCAST if stride == 0 else E.UNIT if stride == 1 else E.STRIDED


@pytest.mark.parametrize("x_strides, y_strides", [((4, 1), (0, 1)), ((1, 3), (4, 0)), ((8, 2), (1, 3))])
def test_each_inner_layout_matches_the_interpreter_and_numpy(x_strides, y_strides):
    shape = (3, 4)
    xb = np.arange(40, dtype=np.float32) * 0.5
    yb = -np.arange(40, dtype=np.float32)
    x = np.lib.stride_tricks.as_strided(xb[1:], shape, [s * 4 for s in x_strides])
    y = np.lib.stride_tricks.as_strided(yb, shape, [s * 4 for s in y_strides])
    f32 = dsl.float32
    value = kir.binary("add", kir.binary("mul", kir.leaf(0, f32), kir.const(3.0, "float32")), kir.leaf(1, f32))
    layouts = [E.Layout(False, inner_kind(x_strides[-1])), E.Layout(False, inner_kind(y_strides[-1]))]
    kernel = E.elementwise_kernel([value], [f32], [(f32, False), (f32, False)], layouts, 2)
    params = strided_params(2, shape, [x_strides, y_strides], [1, 0])
    got, want = run(kernel, {"b0": (xb, xb), "b1": (yb, yb)}, {"out0": 12}, params, [(0, 1), (1, 3)])
    np.testing.assert_array_equal(got["out0"], want["out0"])
    np.testing.assert_array_equal(got["out0"].reshape(shape), x * np.float32(3) + y)


@pytest.mark.parametrize("name", ["int4", "uint4", "float4e2m1"])
@pytest.mark.parametrize("offset, cols, spans", [(0, 6, [(0, 3)]), (1, 5, [(0, 3)]), (0, 7, [(0, 1), (1, 3)])])
def test_byte_pairs_of_4_bit_inputs_at_odd_offsets_and_lengths(name, offset, cols, spans):
    elem = dsl.dtype(name)
    rng = np.random.default_rng(cols + offset)
    count = offset + 3 * cols
    values = rng.integers(0, 16, count + 1).astype(np.uint8)
    elements = values.view(getattr(ml_dtypes, name))[:count] if name != "float4e2m1" else \
        ml_dtypes.float4_e2m1fn(np.zeros(count))
    if name == "float4e2m1":
        elements = values[:count].view(ml_dtypes.float4_e2m1fn)
    packed = dsl.Tensor.from_numpy(np.asarray(elements)).packed()
    value = kir.binary("mul", kir.cast(kir.leaf(0, elem), dsl.float32), kir.leaf(1, dsl.float32))
    scale = np.arange(1, 4, dtype=np.float32)
    layouts = [E.Layout(True, E.UNIT), E.Layout(False, E.BROADCAST)]
    kernel = E.elementwise_kernel([value], [dsl.float32], [(elem, True), (dsl.float32, False)], layouts, 2)
    params = strided_params(2, (3, cols), [(cols, 1), (1, 0)], [offset, 0])
    got, want = run(kernel, {"b0": (packed, np.asarray(elements)), "b1": (scale, scale)}, {"out0": 3 * cols}, params,
                    spans)
    np.testing.assert_array_equal(got["out0"], want["out0"])
    expected = np.asarray(elements)[offset:].astype(np.float32).reshape(3, cols) * scale[:, None]
    np.testing.assert_array_equal(got["out0"].reshape(3, cols), expected)
    assert "for jj in range(" in kernel_source(kernel)


def test_parameters_blocked_along_the_inner_dim_load_once_per_block():
    f32 = dsl.float32
    rows, cols, block = 3, 10, 4
    x = np.arange(rows * cols, dtype=np.float32)
    scales = np.arange(1, rows * 3 + 1, dtype=np.float32)  # [rows, ceil(cols / block)]
    value = kir.binary("mul", kir.leaf(0, f32), kir.leaf(1, f32))
    layouts = [E.Layout(False, E.UNIT), E.Layout(False, E.STRIDED, (1, block))]
    kernel = E.elementwise_kernel([value], [f32], [(f32, False), (f32, False)], layouts, 2)
    params = strided_params(2, (rows, cols), [(cols, 1), (3, 1)], [0, 0])
    got, want = run(kernel, {"b0": (x, x), "b1": (scales, scales)}, {"out0": rows * cols}, params, [(0, 2), (2, 3)])
    np.testing.assert_array_equal(got["out0"], want["out0"])
    expected = x.reshape(rows, cols) * np.repeat(scales.reshape(rows, 3), block, axis=1)[:, :cols]
    np.testing.assert_array_equal(got["out0"].reshape(rows, cols), expected)
    source = kernel_source(kernel)
    body = source[source.index("for bk_ in"):].splitlines()
    inner = next(k for k, line in enumerate(body) if "for i1 in" in line)
    assert any("b1[" in line for line in body[:inner]) and not any("b1[" in line for line in body[inner:])


@pytest.mark.parametrize("elem", [dsl.float32, dsl.float16, dsl.float8e4m3fn])
def test_streamed_strips_give_the_values_of_plain_stores(elem):
    n = E.STAGE * 2 + 37
    x = (np.random.default_rng(5).standard_normal(n) * 4).astype(elem.np_dtype)
    value = kir.cast(kir.binary("mul", kir.leaf(0, elem), kir.const(2.0, "float32")), elem)
    layouts = [E.Layout(False, E.UNIT)]
    plain = E.elementwise_kernel([value], [elem], [(elem, False)], layouts, 1)
    streamed = E.elementwise_kernel([value], [elem], [(elem, False)], layouts, 1, stream=(0,))
    params = strided_params(1, (n,), [(1,)], [0])
    outs = []
    for kernel in (plain, streamed):
        got, want = run(kernel, {"b0": (raw(x, elem), x)}, {"out0": n}, params, [(0, 512), (512, n)])
        np.testing.assert_array_equal(got["out0"].view(np.uint8), want["out0"].view(np.uint8))
        outs.append(got["out0"])
    assert outs[0].tobytes() == outs[1].tobytes()
    assert "_bits.stream_store(out0" in kernel_source(streamed) and "stg0" in kernel_source(streamed)


@pytest.mark.parametrize("elem", [dsl.float32, dsl.int8, dsl.float16, dsl.dtype("bool")])
@pytest.mark.parametrize("rows, cols", [(64, 128), (70, 100)])
def test_tiles_with_transposed_inputs_staged_by_block_transposes(elem, rows, cols):
    """out = x.T + y, x read across its memory order (staged per tile; whole tiles by SIMD block
    transposes where 64 bytes of the type are square in the tile)."""
    rng = np.random.default_rng(rows)
    x = (rng.integers(0, 2, (cols, rows)) if elem == dsl.dtype("bool") else rng.integers(-9, 9, (cols, rows))).astype(elem.np_dtype)
    y = (rng.integers(0, 2, (rows, cols)) if elem == dsl.dtype("bool") else rng.integers(-9, 9, (rows, cols))).astype(elem.np_dtype)
    op = "or" if elem == dsl.dtype("bool") else "add"
    value = kir.binary(op, kir.leaf(0, elem), kir.leaf(1, elem))
    if elem.onnx_name not in ("bool", "float"):
        value = kir.cast(value, elem)
    layouts = [E.Layout(False, E.STRIDED), E.Layout(False, E.UNIT)]
    tile = E.Tile(64, 64, (0,), (0,))
    kernel = E.elementwise_kernel([value], [elem], [(elem, False), (elem, False)], layouts, 2, tile=tile)
    params = strided_params(2, (rows, cols), [(1, rows), (cols, 1)], [0, 0])
    got, want = run(kernel, {"b0": (raw(x.ravel(), elem), x.ravel()), "b1": (raw(y.ravel(), elem), y.ravel())},
                    {"out0": rows * cols}, params, [(0, rows // 2), (rows // 2, rows)])
    np.testing.assert_array_equal(got["out0"], want["out0"])
    expected = (x.T | y) if elem == dsl.dtype("bool") else (x.T + y).astype(elem.np_dtype)
    np.testing.assert_array_equal(got["out0"].reshape(rows, cols), expected)
    source = kernel_source(kernel)
    assert ("_copy.transpose_block(" in source) == (E.block_lanes(elem, 64, 64) > 0)


def test_hoisting_moves_invariant_work_out_and_keeps_values():
    """y[i, j] = exp(b[i] * 2) + x[i, j]: the load of b and the exp run once per row."""
    f32 = dsl.float32
    x, b, out = L.Buffer("x", f32), L.Buffer("b", f32), L.Buffer("out", f32, "out")
    i, j, n, m = U("i"), U("j"), U("n"), U("m")
    row = kir.unary("exp", kir.binary("mul", L.load(b, i), kir.const(2.0, "float32")))
    value = kir.binary("add", row, L.load(x, L.add(L.mul(i, m), j)))
    body = [L.For("i", L.index(0), n, [L.For("j", L.index(0), m, [L.Store(out, L.add(L.mul(i, m), j), value)])])]
    moved = hoist(body)
    inner = moved[0].body[-1]
    assert isinstance(inner, L.For) and inner.var == "j"
    hoisted = moved[0].body[:-1]  # exp(b[i] * 2), and i * m (built twice: two nodes)
    assert [s.name for s in hoisted] == ["h0_", "h1_", "h2_"]
    assert sum(isinstance(a.value, kir.Unary) and a.value.op == "exp" for a in hoisted) == 1
    assert not any(isinstance(node, L.Load) and node.buffer is b
                   for node in kir.postorder([inner.body[0].value]))
    for kernel_body in (body, moved):
        kernel = L.Kernel("k", [x, b, out], ["n", "m"], kernel_body)
        xv, bv = np.arange(6, dtype=np.float32), np.array([0.5, -1.0], np.float32)
        got, want = run(kernel, {"x": (xv, xv), "b": (bv, bv)}, {"out": 6}, {"n": 2, "m": 3, "start": 0, "stop": 0})
        np.testing.assert_allclose(got["out"], np.exp(bv * 2).repeat(3) + xv, rtol=1e-6)
        np.testing.assert_array_equal(want["out"].reshape(2, 3), np.exp(bv.astype(np.float64) * 2).astype(np.float32)[:, None]
                                      + xv.reshape(2, 3))


def test_hoisting_leaves_loads_of_buffers_the_loop_writes():
    f32 = dsl.float32
    acc, out = L.Buffer("acc", f32, "temp"), L.Buffer("out", f32, "out")
    i = U("i")
    body = [L.Alloc(acc, L.index(1)), L.Store(acc, L.index(0), kir.const(0.0, "float32")),
            L.For("i", L.index(0), U("n"), [
                L.Store(acc, L.index(0), kir.binary("add", L.load(acc, L.index(0)), kir.convert(i, "float32")))]),
            L.Store(out, L.index(0), L.load(acc, L.index(0)))]
    moved = hoist(body)
    assert moved[2].var == "i" and len(moved) == 4  # nothing left the loop
    kernel = L.Kernel("k", [out, acc], ["n"], moved)
    got, want = run(kernel, {}, {"out": 1}, {"n": 5, "start": 0, "stop": 0})
    assert got["out"][0] == want["out"][0] == 10.0


def test_statements_if_move_transpose_and_part_loads_match_the_interpreter():
    u8, i4 = dsl.uint8, dsl.int4
    src, dst, out = L.Buffer("src", u8), L.Buffer("dst", u8, "out"), L.Buffer("out", dsl.int8, "out")
    nib = L.Buffer("nib", i4, packed=True)
    i = U("i")
    odd = kir.compare("ne", kir.binary("mod", i, L.index(2)), L.index(0))
    body = [L.TransposeBlock(src, L.index(0), L.index(64), dst, L.index(0), L.index(64), 64),
            L.For("i", L.index(0), L.index(8), [
                L.If(odd, [L.Move(dst, L.add(L.index(4096), i), src, i)],
                     [L.Store(dst, L.add(L.index(4096), i), kir.const(7, "uint8"))]),
                L.Prefetch(src, L.add(i, L.index(64))),
                L.Store(out, L.mul(i, L.index(2)), L.load(nib, i, part=0)),
                L.Store(out, L.add(L.mul(i, L.index(2)), L.index(1)), L.load(nib, i, part=1))])]
    kernel = L.Kernel("k", [src, nib, dst, out], [], body)
    s = np.random.default_rng(0).integers(0, 256, 4096).astype(np.uint8)
    codes = np.random.default_rng(1).integers(-8, 8, 16).astype(ml_dtypes.int4)
    packed = dsl.Tensor.from_numpy(codes).packed()
    got, want = run(kernel, {"src": (s, s), "nib": (packed, codes)}, {"dst": 4096 + 8, "out": 16},
                    {"start": 0, "stop": 0})
    for name in ("dst", "out"):
        np.testing.assert_array_equal(got[name], want[name])
    np.testing.assert_array_equal(got["dst"][:4096].reshape(64, 64), s.reshape(64, 64).T)
    assert got["dst"][4096:].tolist() == [7 if k % 2 == 0 else s[k] for k in range(8)]
    np.testing.assert_array_equal(got["out"], codes.astype(np.int8))
    assert "if " in L.format_kernel(kernel) and "transpose<64>" in L.format_kernel(kernel)


@pytest.mark.parametrize("build, message", [
    (lambda: L.Kernel("k", [a := L.Buffer("a", dsl.float32)], [], [L.Move(a, L.index(0), a, L.index(0))]), "copy to a"),
    (lambda: L.Kernel("k", [L.Buffer("a", dsl.float32)], ["n"], [], ["n"]), "arguments do not pass"),
    (lambda: L.Kernel("k", [], [], [L.If(L.index(1), [])]), "if on a uint64"),
])
def test_verifier_refuses_malformed_new_statements(build, message):
    with pytest.raises(kir.IRError, match=message):
        L.verify(build())


def test_part_loads_need_a_packed_buffer():
    with pytest.raises(kir.IRError, match="part 0"):
        L.load(L.Buffer("a", dsl.uint8), L.index(0), part=0)
    with pytest.raises(kir.IRError, match="part 2"):
        L.load(L.Buffer("a", dsl.int4, packed=True), L.index(0), part=2)
    assert L.load(L.Buffer("a", dsl.int2, packed=True), L.index(0), part=3).part == 3


@pytest.mark.parametrize("rank, inner", itertools.product([1, 2, 3], [E.BROADCAST, E.UNIT, E.STRIDED]))
def test_every_rank_and_inner_kind_of_the_schedule(rank, inner):
    shape = (2, 3, 5)[-rank:]
    size = int(np.prod(shape))
    x = np.arange(64, dtype=np.int32) - 20
    strides = {E.BROADCAST: 0, E.UNIT: 1, E.STRIDED: 2}[inner]
    x_strides = tuple([15 * 2, 5 * 2][-(rank - 1):] if rank > 1 else ()) + (strides,)
    if rank == 1:
        x_strides = (strides,)
    view = np.lib.stride_tricks.as_strided(x, shape, [s * 4 for s in x_strides])
    value = kir.binary("mul", kir.leaf(0, dsl.int32), kir.const(-3, "int32"))
    kernel = E.elementwise_kernel([value, kir.leaf(0, dsl.int32)], [dsl.int32, dsl.int32], [(dsl.int32, False)],
                                  [E.Layout(False, inner)], rank)
    params = strided_params(rank, shape, [x_strides], [0])
    got, want = run(kernel, {"b0": (x, x)}, {"out0": size, "out1": size}, params)
    for name in ("out0", "out1"):
        np.testing.assert_array_equal(got[name], want[name])
    np.testing.assert_array_equal(got["out0"].reshape(shape), view * -3)
    np.testing.assert_array_equal(got["out1"].reshape(shape), view)
