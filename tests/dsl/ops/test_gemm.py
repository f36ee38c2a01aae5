"""Gemm and Einsum (dsl/ops/gemm.py) against plain numpy formulas, on both engines."""
from __future__ import annotations

import numpy as np
import onnx.defs
import pytest

import dsl
from dsl.eager import call
from dsl.ops import registry
from tests.dsl.dsl_test_helpers import assert_schema_in_force_matches_onnx, onnx_allowed, schemas_with_onnx

GEMM_VERSIONS = [1, 6, 7, 9, 11, 13]
EINSUM_VERSIONS = [12, 28]
FLOATS = ["float16", "float", "double"]
GEMM_INTS = ["int32", "int64", "uint32", "uint64"]
EINSUM_INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
ENGINES = ["numpy", "jit"]


def test_schemas_match_onnx():
    for opset in range(1, dsl.LATEST_OPSET + 1):
        assert_schema_in_force_matches_onnx("Gemm", opset)
        assert_schema_in_force_matches_onnx("Einsum", opset)
    for schema, spec in schemas_with_onnx("Gemm"):  # (the helper compares int / string defaults only)
        allowed = onnx_allowed("Gemm", schema.version)
        assert [(i.name, i.optional) for i in schema.inputs] == \
            [(i.name, i.option == onnx.defs.OpSchema.FormalParameterOption.Optional) for i in spec.inputs]
        for formal, mine in zip(spec.inputs, schema.inputs):
            assert {t.onnx_name for t in (mine.types or schema.types)} == allowed[formal.type_str], formal.name
        assert {a.name for a in schema.attrs} == set(spec.attributes), schema.version
        for attr in schema.attrs:
            default = spec.attributes[attr.name].default_value
            want = default.f if attr.kind == "float" else default.i
            assert attr.default == want, (schema.version, attr.name)
    for schema, spec in schemas_with_onnx("Einsum"):  # onnx's one variadic input: Inputs_0 required, then slots
        assert spec.inputs[0].option == onnx.defs.OpSchema.FormalParameterOption.Variadic
        assert [i.name for i in schema.inputs] == [f"Inputs_{k}" for k in range(64)]
        assert [i.optional for i in schema.inputs] == [False] + [True] * 63
        assert {t.onnx_name for t in schema.types} == onnx_allowed("Einsum", schema.version)[spec.inputs[0].type_str]
        assert [a.name for a in schema.attrs] == list(spec.attributes) == ["equation"]
        assert spec.attributes["equation"].required
    assert [s.version for s in registry.get("Gemm").schemas] == GEMM_VERSIONS
    assert [s.version for s in registry.get("Einsum").schemas] == EINSUM_VERSIONS


def run(fn, engine, *arrays, opset=None, **kw):
    """fn(*arrays, **kw) eagerly (numpy in) or through dsl.jit at ``opset``."""
    if engine == "numpy":
        return fn(*arrays, opset=opset, **kw)
    return dsl.jit(lambda *a: fn(*a, **kw), opset=dsl.LATEST_OPSET if opset is None else opset)(*arrays)


def np_type(name):
    return dsl.dtype(name).np_dtype


def values(name, shape, rng, low=-4, high=5):
    dt = dsl.dtype(name)
    if dt.kind == "uint":
        low = 0
    return rng.integers(low, high, shape).astype(dt.np_dtype)


def wrap(exact: np.ndarray, name: str) -> np.ndarray:
    """Python-int results reduced modulo 2**bits into ``name`` (two's complement)."""
    bits = np.dtype(np_type(name)).itemsize * 8
    low = exact.astype(object) % (1 << bits)
    if dsl.dtype(name).kind == "int":
        low = np.where(low >= 1 << (bits - 1), low - (1 << bits), low)
    return np.array(low.tolist(), np_type(name)).reshape(exact.shape)


def gemm_formula(a, b, c, alpha, beta, trans_a, trans_b, name):
    a2 = a.T if trans_a else a
    b2 = b.T if trans_b else b
    if dsl.dtype(name).kind == "float":
        out = alpha * (a2.astype(np.float64) @ b2.astype(np.float64))  # (alpha, beta exact in every T here)
        if c is not None and beta != 0:
            out = out + beta * c.astype(np.float64)
        return out.astype(np_type(name))
    out = (a2.astype(object) @ b2.astype(object)) * int(alpha)
    if c is not None and beta != 0:
        out = out + np.broadcast_to(c.astype(object) * int(beta), out.shape)
    return wrap(np.asarray(out), name)


def types_of_gemm(version):
    names = FLOATS + (GEMM_INTS if version >= 9 else []) + (["bfloat16"] if version >= 13 else [])
    return [(version, name) for name in names]


def assert_close(got, want, name):
    got = np.asarray(got)
    assert got.dtype == np.dtype(np_type(name)) and got.shape == want.shape
    kind = dsl.dtype(name).kind
    if kind == "float":
        tol = {"float16": 2e-3, "bfloat16": 2e-2}.get(name, 1e-6)
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got, want)


# ---- Gemm values ---------------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("version,name", [p for v in GEMM_VERSIONS for p in types_of_gemm(v)])
def test_gemm_by_version_and_type(engine, version, name):
    rng = np.random.default_rng(version)
    a, b, c = values(name, (4, 3), rng), values(name, (5, 4), rng), values(name, (5,), rng)
    alpha, beta = (0.5, 2.0) if dsl.dtype(name).kind == "float" else (3.0, 2.0)
    got = run(dsl.gemm, engine, a, b, c, opset=version, alpha=alpha, beta=beta, trans_a=1, trans_b=1)
    assert_close(got, gemm_formula(a, b, c, alpha, beta, 1, 1, name), name)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("trans_a,trans_b", [(0, 0), (1, 0), (0, 1), (True, True)])
@pytest.mark.parametrize("c_shape", [(), (4,), (1, 4), (3, 1), (3, 4)])
@pytest.mark.parametrize("name", ["float", "int64"])
def test_gemm_trans_and_c_broadcast(engine, trans_a, trans_b, c_shape, name):
    rng = np.random.default_rng(len(c_shape))
    a = values(name, (2, 3) if trans_a else (3, 2), rng)
    b = values(name, (4, 2) if trans_b else (2, 4), rng)
    c = values(name, c_shape, rng)
    got = run(dsl.gemm, engine, a, b, c, alpha=2.0, beta=-1.0, trans_a=trans_a, trans_b=trans_b)
    assert_close(got, gemm_formula(a, b, c, 2.0, -1.0, trans_a, trans_b, name), name)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("version", [11, 13])
@pytest.mark.parametrize("name", ["float", "int32"])
def test_gemm_without_c_and_beta_zero(engine, version, name):
    rng = np.random.default_rng(0)
    a, b = values(name, (3, 2), rng), values(name, (2, 4), rng)
    got = run(lambda x, y, opset=None: dsl.gemm(x, y, opset=opset), engine, a, b, opset=version)
    assert_close(got, gemm_formula(a, b, None, 1.0, 1.0, 0, 0, name), name)
    if name == "float":  # beta = 0: C's inf / NaN does not reach Y (BLAS: C need not be set)
        c = np.array([np.inf, np.nan, -np.inf, 1.0], np.float32)
        got = run(dsl.gemm, engine, a, b, c, opset=version, beta=0.0)
        assert_close(got, gemm_formula(a, b, None, 1.0, 1.0, 0, 0, name), name)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("m,k,n", [(3, 0, 2), (0, 2, 3)])
def test_gemm_empty_dims(engine, m, k, n):
    a, b, c = np.ones((m, k), np.float32), np.ones((k, n), np.float32), np.full((1, n), 3.0, np.float32)
    got = run(dsl.gemm, engine, a, b, c, alpha=2.0, beta=0.5)
    assert_close(got, gemm_formula(a, b, c, 2.0, 0.5, 0, 0, "float"), "float")


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", GEMM_INTS)
def test_gemm_integers_wrap(engine, name):
    info = np.iinfo(np_type(name))
    a = np.array([[info.max, info.max - 1], [info.min + 3, 7]], np_type(name))
    b = np.array([[info.max, 3], [5, info.max // 2]], np_type(name))
    c = np.array([[info.max, info.min], [1, 2]], np_type(name))
    got = run(dsl.gemm, engine, a, b, c, alpha=3.0, beta=-2.0)
    assert_close(got, gemm_formula(a, b, c, 3.0, -2.0, 0, 0, name), name)


@pytest.mark.parametrize("engine", ENGINES)
def test_gemm_fractional_alpha_on_integers_truncates(engine):
    a = np.array([[3, -5]], np.int32)
    b = np.array([[1], [1]], np.int32)
    c = np.array([[3]], np.int32)
    got = run(dsl.gemm, engine, a, b, c, alpha=0.5, beta=0.25)  # 0.5 * -2 + 0.75 = -0.25 -> 0
    np.testing.assert_array_equal(got, np.trunc(0.5 * (a.astype(float) @ b) + 0.25 * c).astype(np.int32))
    got = run(dsl.gemm, engine, a * 3, b, c, alpha=0.5, beta=1.0)  # -3 + 3 = 0; 0.5 * -6 + 3
    np.testing.assert_array_equal(got, [[0]])


def test_gemm_broadcast_zero_before_7_needs_full_c():
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    full = np.ones((2, 4), np.float32)
    np.testing.assert_array_equal(call("Gemm", a, 6, B=b, C=full), full * 4)
    with pytest.raises(dsl.DslError, match=r"Gemm.*C shape \[4\] must be \[M, N\] = \[2, 4\] with broadcast=0"):
        call("Gemm", a, 6, B=b, C=np.ones(4, np.float32))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("shapes,kw,match", [
    (((2, 3, 1), (3, 4)), {}, r"input A has shape \[2, 3, 1\]; expected a 2-D matrix"),
    (((3,), (3, 4)), {}, r"input A has shape \[3\]; expected a 2-D matrix"),
    (((2, 3), (4, 3)), {}, r"inner dims 3 and 4 differ"),
    (((3, 2), (3, 4)), {"trans_a": 0}, r"inner dims 2 and 3 differ"),
    (((2, 3), (3, 4), (3,)), {}, r"C shape \[3\] is not unidirectionally broadcastable to \[M, N\] = \[2, 4\]"),
    (((2, 3), (3, 4), (2,)), {}, r"C shape \[2\] is not unidirectionally broadcastable"),
    (((2, 3), (3, 4), (4, 4)), {}, r"C shape \[4, 4\] is not unidirectionally broadcastable"),
    (((2, 3), (3, 4), (1, 2, 4)), {}, r"C shape \[1, 2, 4\] has rank 3; expected rank <= 2"),
])
def test_gemm_shape_errors(engine, shapes, kw, match):
    arrays = [np.ones(s, np.float32) for s in shapes]
    with pytest.raises(dsl.DslError, match="Gemm.*" + match):
        run(dsl.gemm, engine, *arrays, **kw)


def test_gemm_type_errors():
    a = np.ones((2, 2), np.float32)
    with pytest.raises(dsl.DslError, match="Gemm"):
        dsl.gemm(a, a.astype(np.float64), a)
    with pytest.raises(dsl.DTypeError, match="Gemm"):
        dsl.gemm(a.astype(np.int32), a.astype(np.int32), a.astype(np.int32), opset=7)
    with pytest.raises(dsl.DTypeError, match="Gemm"):
        dsl.gemm(a.astype(np_type("bfloat16")), a.astype(np_type("bfloat16")), opset=11)
    with pytest.raises(dsl.DTypeError, match="Gemm"):
        dsl.gemm(a.astype(np.int8), a.astype(np.int8))
    with pytest.raises(dsl.DslError, match="Gemm.*C"):
        dsl.gemm(a, a, opset=9)  # C is required before version 11
    with pytest.raises(dsl.DslError, match="Gemm.*Python float"):
        dsl.gemm(a.astype(np.int32), a.astype(np.int32), 1.5)


# ---- Einsum values -------------------------------------------------------------------------------
EQUATIONS = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),            # matmul
    ("ij,jk", [(2, 3), (3, 4)]),                # implicit output: ik
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),   # batch matmul
    ("ii", [(3, 3)]),                           # trace
    ("ii->i", [(3, 3)]),                        # diagonal
    ("bii->bi", [(2, 3, 3)]),                   # batched diagonal
    ("ij->i", [(3, 4)]),                        # sum over a letter
    ("ij->", [(3, 4)]),                         # sum of all
    ("ij->ji", [(2, 3)]),                       # transpose
    ("ba", [(2, 3)]),                           # implicit output in letter order: a b -> transpose
    ("i,j->ij", [(2,), (3,)]),                  # outer
    ("i,i", [(4,)] * 2),                        # inner
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (1, 5, 3, 4)]),  # ellipsis dims broadcast
    ("...ii->...i", [(2, 3, 3)]),
    ("i...->...", [(3, 2, 2)]),                 # a summed letter in front of the ellipsis
    ("...j", [(2, 3)]),                         # implicit: ellipsis dims first, then j
    ("Ab,bC -> AC", [(2, 3), (3, 2)]),          # upper-case letters and spaces
    ("ij,jk,kl->il", [(2, 3), (3, 2), (2, 2)]),
]


def einsum_formula(equation, arrays, name):
    if dsl.dtype(name).kind == "float":
        out = np.einsum(equation, *[x.astype(np.float64) for x in arrays])
        return np.asarray(out).astype(np_type(name))
    return wrap(np.asarray(np.einsum(equation, *[x.astype(object) for x in arrays])), name)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("equation,shapes", EQUATIONS)
@pytest.mark.parametrize("name", ["float", "int32"])
def test_einsum_equations(engine, equation, shapes, name):
    rng = np.random.default_rng(len(equation))
    arrays = [values(name, s, rng) for s in shapes]
    got = run(lambda *a, opset=None: dsl.einsum(equation, *a, opset=opset), engine, *arrays)
    assert_close(got, einsum_formula(equation.replace(" ", ""), arrays, name), name)


def types_of_einsum(version):
    return [(version, name) for name in FLOATS + EINSUM_INTS + (["bfloat16"] if version >= 28 else [])]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("version,name", [p for v in EINSUM_VERSIONS for p in types_of_einsum(v)])
def test_einsum_by_version_and_type(engine, version, name):
    rng = np.random.default_rng(version)
    a, b = values(name, (2, 3, 4), rng), values(name, (2, 4, 3), rng)
    equation = "bij,bjk->bik"
    got = run(lambda x, y, opset=None: dsl.einsum(equation, x, y, opset=opset), engine, a, b, opset=version)
    assert_close(got, einsum_formula(equation, [a, b], name), name)
    got = run(lambda x, opset=None: dsl.einsum("bii", x, opset=opset), engine, a[:, :3, :3], opset=version)
    assert_close(got, einsum_formula("bii", [a[:, :3, :3]], name), name)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", ["int8", "uint8", "int32"])
def test_einsum_integer_sums_wrap(engine, name):
    info = np.iinfo(np_type(name))
    a = np.full((2, 5), info.max, np_type(name))
    got = run(lambda x, opset=None: dsl.einsum("ij,ij->i", x, x, opset=opset), engine, a)
    assert_close(got, einsum_formula("ij,ij->i", [a, a], name), name)


def test_einsum_bfloat16_needs_28():
    a = np.ones((2, 2), np_type("bfloat16"))
    assert np.asarray(dsl.einsum("ij->", a, opset=28)).astype(np.float32) == 4.0
    with pytest.raises(dsl.DTypeError, match="Einsum"):
        dsl.einsum("ij->", a, opset=12)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("equation,shapes,match", [
    ("ij,jk->i2", [(2, 3), (3, 4)], r"output 'i2' has '2'; expected letters"),
    ("ij,jk", [(2, 3)], r"has 2 input term\(s\) but the op has 1 input"),
    ("ij", [(2, 3), (3, 4)], r"has 1 input term\(s\) but the op has 2 input"),
    ("ijk->i", [(2, 3)], r"term 0 names 3 dim\(s\) but input 0 has shape \[2, 3\]"),
    ("ij,jk->ik", [(2, 3), (4, 2)], r"letter 'j' has size 3 and, in input 1 shape \[4, 2\], size 4"),
    ("ii", [(2, 3)], r"letter 'i' has size 2 and, in input 0 shape \[2, 3\], size 3"),
    ("ij->k", [(2, 3)], r"output letter 'k' is in no input term"),
    ("ij->ii", [(2, 3)], r"output letter 'i' appears more than once"),
    ("......->", [(2, 3)], r"more than one ellipsis"),
    ("ij->i->j", [(2, 3)], r"'-' and '>' may only appear once"),
    ("i-j", [(2, 3)], r"'-' and '>' may only appear once"),
    ("ij->i,j", [(2, 3)], r"the output 'i,j' has a ','"),
    ("...i,...i->...", [(2, 3), (3,)], r"ellipsis of term 1 stands for 0 dim\(s\), an earlier one for 1"),
    ("...i,...i", [(2, 3), (4, 3)], r"ellipsis dims \[2\] and \[4\] do not broadcast"),
    ("", [(2, 3)], r"is empty"),
])
def test_einsum_equation_errors(engine, equation, shapes, match):
    arrays = [np.ones(s, np.float32) for s in shapes]
    with pytest.raises(dsl.DslError, match="Einsum.*" + match):
        run(lambda *a, opset=None: dsl.einsum(equation, *a, opset=opset), engine, *arrays)


def test_einsum_input_errors():
    a = np.ones((2, 2), np.float32)
    with pytest.raises(dsl.DslError, match="Einsum"):
        dsl.einsum("ij,jk", a, a.astype(np.float64))
    with pytest.raises(dsl.DTypeError, match="Einsum"):
        dsl.einsum("ij", a.astype(bool))
    with pytest.raises(dsl.InputError, match=r"Einsum: takes 1 to 64 inputs, got 0"):
        dsl.einsum("->")
    with pytest.raises(dsl.InputError, match=r"Einsum: equation 3 must be a str"):
        dsl.einsum(3, a)
