"""RotaryEmbedding against a plain per-pair rotation, on both engines, and its fused JIT kernel."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import dsl
from dsl.ops import registry
from tests.dsl.dsl_test_helpers import assert_schemas_match_onnx

DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16]


def test_schema_matches_onnx():
    assert_schemas_match_onnx("RotaryEmbedding")
    assert [s.version for s in registry.get("RotaryEmbedding").schemas] == [23]


def rope(x, cos, sin, positions, interleaved, rotary, num_heads):
    """Each pair (a, b) of a head's first ``rotary`` elements -> (a cos - b sin, a sin + b cos), in float64."""
    x = x.astype(np.float64)
    three_d = x.ndim == 3
    if three_d:  # (batch, sequence, hidden) -> (batch, heads, sequence, head)
        b, s, hidden = x.shape
        x = x.reshape(b, s, num_heads, hidden // num_heads).transpose(0, 2, 1, 3)
    cos, sin = cos.astype(np.float64), sin.astype(np.float64)
    if positions is not None:
        cos, sin = cos[positions], sin[positions]
    rotary = rotary or x.shape[3]
    half = rotary // 2
    y = x.copy()
    for i in range(half):
        first, second = (2 * i, 2 * i + 1) if interleaved else (i, i + half)
        a, b_ = x[..., first], x[..., second]
        c, s_ = cos[:, None, :, i], sin[:, None, :, i]
        y[..., first], y[..., second] = a * c - b_ * s_, a * s_ + b_ * c
    if three_d:
        y = y.transpose(0, 2, 1, 3).reshape(y.shape[0], y.shape[2], -1)
    return y


def inputs(dt, rank, rotary, with_positions, seed=0):
    rng = np.random.default_rng(seed)
    batch, heads, seq, head = 2, 3, 5, 8
    shape = (batch, heads, seq, head) if rank == 4 else (batch, seq, heads * head)
    x = rng.standard_normal(shape).astype(dt)
    half = (rotary or head) // 2
    if with_positions:
        angles = rng.uniform(-3, 3, (11, half))
        positions = rng.integers(0, 11, (batch, seq))
    else:
        angles, positions = rng.uniform(-3, 3, (batch, seq, half)), None
    return x, np.cos(angles).astype(dt), np.sin(angles).astype(dt), positions


@pytest.mark.sweep
@pytest.mark.parametrize("engine", ["numpy", "jit"])
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("rank", [3, 4])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rotary", [0, 4])
@pytest.mark.parametrize("with_positions", [True, False])
def test_values(engine, dt, rank, interleaved, rotary, with_positions):
    x, cos, sin, positions = inputs(dt, rank, rotary, with_positions)
    heads = 3 if rank == 3 else 0
    kw = dict(interleaved=interleaved, rotary_embedding_dim=rotary, num_heads=heads)
    args = (x, cos, sin) if positions is None else (x, cos, sin, positions)
    fn = lambda *a: dsl.rotary_embedding(*a, **kw)  # noqa: E731
    got = fn(*args) if engine == "numpy" else dsl.jit(fn)(*args)
    want = rope(x, cos, sin, positions, interleaved, rotary, 3)
    assert got.dtype == x.dtype and got.shape == x.shape
    tol = {np.float32: 1e-6, np.float16: 2e-3}.get(dt, 1.6e-2)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol * 4)
    if rotary:  # the unrotated tail is the input, bit for bit
        tail = (x if rank == 4 else x.reshape(2, 5, 3, 8))[..., rotary:]
        assert (np.asarray(got) if rank == 4 else np.asarray(got).reshape(2, 5, 3, 8))[..., rotary:].tobytes() == tail.tobytes()


def test_float32_equals_the_spec_formula_bit_for_bit():
    # the body's x*cos + (x'*sin)*(-1) is the spec's x1*cos - x2*sin exactly (negation is exact)
    x, cos, sin, positions = inputs(np.float32, 4, 0, True, seed=3)
    c, s = cos[positions][:, None], sin[positions][:, None]
    x1, x2 = x[..., :4], x[..., 4:]
    want = np.concatenate([c * x1 - s * x2, s * x1 + c * x2], axis=-1)
    for got in (dsl.rotary_embedding(x, cos, sin, positions), dsl.jit(dsl.rotary_embedding)(x, cos, sin, positions)):
        assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("rotary", [0, 4])
def test_jit_fuses_the_rotation_into_one_kernel(rotary):
    # the rotation, the unrotated tail's Where and the consumer are one kernel; the two position gathers
    # of the caches ([batch, sequence, rotary / 2], a heads-th of x) run as kernels of their own
    x, cos, sin, positions = inputs(np.float32, 4, rotary, True)
    f = dsl.jit(lambda x, c, s, p: dsl.rotary_embedding(x, c, s, p, rotary_embedding_dim=rotary) * 2.0)
    executable = f.executable(x, cos, sin, positions)
    kernels = [line for line in executable.explain(source=False).splitlines() if "kernel [" in line]
    assert executable.kernel_count == 3 and sum("kernel [Gather]" in line for line in kernels) == 2, kernels
    np.testing.assert_allclose(f(x, cos, sin, positions), 2 * rope(x, cos, sin, positions, 0, rotary, 0), rtol=1e-6, atol=1e-6)


def test_position_out_of_the_cache_raises():
    x, cos, sin, positions = inputs(np.float32, 4, 0, True)
    positions = positions.copy()
    positions[1, 2] = 11
    for fn in (dsl.rotary_embedding, dsl.jit(dsl.rotary_embedding)):
        with pytest.raises(dsl.DslError, match="11"):
            fn(x, cos, sin, positions)


def _bad(change):
    x, cos, sin, positions = inputs(np.float32, 4, 0, True)
    args = dict(x=x, cos_cache=cos, sin_cache=sin, position_ids=positions)
    kw = {}
    change(args, kw)
    return lambda: dsl.rotary_embedding(*args.values(), **kw)


@pytest.mark.parametrize("change,match", [
    (lambda a, k: a.update(x=a["x"][0]), "num_heads 0 with a 3-D X"),
    (lambda a, k: a.update(x=a["x"][0, 0]), "rank 2"),
    (lambda a, k: (a.update(x=a["x"].transpose(0, 2, 1, 3).reshape(2, 5, 24)), k.update(num_heads=5)),
     "hidden size 24 is not divisible by num_heads 5"),
    (lambda a, k: k.update(num_heads=4), "num_heads 4 .*expected num_heads 3"),
    (lambda a, k: k.update(rotary_embedding_dim=3), "rotary_embedding_dim 3"),
    (lambda a, k: k.update(rotary_embedding_dim=10), "rotary_embedding_dim 10"),
    (lambda a, k: a.update(cos_cache=a["cos_cache"][:, :3]), r"cos_cache shape \[11, 3\]"),
    (lambda a, k: a.update(sin_cache=a["sin_cache"].astype(np.float16)), "sin_cache' has element type float16"),
    (lambda a, k: a.update(position_ids=a["position_ids"][:, :4]), r"position_ids shape \[2, 4\]"),
    (lambda a, k: a.update(position_ids=a["position_ids"].astype(np.int32)), "position_ids"),
    (lambda a, k: (a.pop("position_ids"), a.update(cos_cache=a["cos_cache"][:2])), r"cos_cache shape \[2, 4\]"),
])
def test_errors(change, match):
    with pytest.raises(dsl.DslError, match=match):
        _bad(change)()
