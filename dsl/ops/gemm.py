"""Gemm (a composite of Transpose, MatMul, Mul and Add) and Einsum (numpy.einsum reference).

Gemm: Y = alpha * A' * B' + beta * C with A' = A^T if transA, B' = B^T if transB; A and B are
2-D, C (optional from version 11) unidirectionally broadcasts to [M, N] (versions 1 and 6 with
``broadcast`` = 0: C must be [M, N]). Its meaning is written as an ONNX function body
(dsl/ops/expansion.py), so the JIT runs the MatMul on BLAS and fuses alpha, beta and C into one
elementwise epilogue. Choices:
- beta = 0 leaves C out (an inf or NaN in C does not reach Y): the spec names BLAS level 3 as
  its definition, whose C "need not be set" when beta is zero; onnx's reference and
  onnxruntime do the same. alpha = 1 and beta = 1 multiply nothing.
- float types: alpha and beta are rounded to T and each step (MatMul, Mul, Add) rounds to T
  (float16 / bfloat16 products accumulate in float32, as MatMul's).
- integer types: an integral alpha / beta is taken modulo 2**bits and the whole computation
  wraps in T (exact modular arithmetic); a fractional one computes alpha * (A'B') + beta * C in
  double and truncates to T (as onnx's reference, whose float64 result is cast back).

Einsum: the equation is parsed and checked here (terms per input, ranks, ellipses, repeated
letters of one size), then run as numpy.einsum on an explicit, ellipsis-free equation, so a bad
equation is a DslError naming it. Where numpy is looser than the spec, the spec wins: every
ellipsis must stand for the same number of dims (numpy broadcasts differing counts); ellipsis
dims broadcast (size 1 against n), lettered dims must be equal. The implicit output is the
letters occurring once, in ASCII order, after the ellipsis dims. float16 / bfloat16 sum in
float32 and round once; integer sums wrap.
"""
from __future__ import annotations

import string
from dataclasses import dataclass

import numpy as np

from .. import dtypes
from ..ir import TensorType
from . import chunks
from .expansion import expanded_reference
from .math import BF16, F, domain_array, finish
from .registry import Attr, Call, Input, OpDef, Schema, register

_INTS = ("int32", "int64", "uint32", "uint64")


# ---- Gemm --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GemmPlan:
    """What the Gemm rule decided: the output [M, N] and whether C takes part (beta != 0)."""

    out: tuple
    use_c: bool


def _gemm_rule(call: Call) -> list:
    a, b = call.types[0], call.types[1]
    c = call.input_type(2)
    dt = a.dtype
    if a.shape is None or b.shape is None:
        return [TensorType(dt, None)]
    for name, shape in (("A", a.shape), ("B", b.shape)):
        if len(shape) != 2:
            call.fail(f"input {name} has shape {list(shape)}; expected a 2-D matrix")
    m, k = a.shape[::-1] if call.attrs["transA"] else a.shape
    k_b, n = b.shape[::-1] if call.attrs["transB"] else b.shape
    if isinstance(k, int) and isinstance(k_b, int) and k != k_b:
        call.fail(f"A' shape [{m}, {k}] and B' shape [{k_b}, {n}] (transA={call.attrs['transA']}, "
                  f"transB={call.attrs['transB']}): inner dims {k} and {k_b} differ")
    out = (m, n)
    if c is not None and c.shape is not None:
        _check_c(call, tuple(c.shape), out)
    call.plan = GemmPlan(out, c is not None and call.attrs["beta"] != 0.0)
    return [TensorType(dt, out)]


def _check_c(call: Call, c_shape: tuple, out: tuple) -> None:
    if call.version < 7 and not call.attrs.get("broadcast", 0):
        if len(c_shape) != 2 or any(isinstance(x, int) and isinstance(y, int) and x != y
                                    for x, y in zip(c_shape, out)):
            call.fail(f"C shape {list(c_shape)} must be [M, N] = {list(out)} with broadcast=0 "
                      f"(version {call.version}); set broadcast=1 to broadcast C")
        return
    if len(c_shape) > 2:
        call.fail(f"C shape {list(c_shape)} has rank {len(c_shape)}; expected rank <= 2, "
                  f"unidirectionally broadcastable to [M, N] = {list(out)}")
    for c_dim, dim in zip(c_shape[::-1], out[::-1]):
        if isinstance(c_dim, int) and isinstance(dim, int) and c_dim not in (1, dim):
            call.fail(f"C shape {list(c_shape)} is not unidirectionally broadcastable to [M, N] = "
                      f"{list(out)}: dim {c_dim} vs {dim}")


def _wrapped_factor(value: float, dt):
    """An integral factor as T (modulo 2**bits), or None when it is fractional or too large."""
    if not float(value).is_integer() or abs(value) >= 2.0 ** 63:
        return None
    return np.array(int(value), np.int64).astype(dt.np_dtype)


def _gemm_expand(call: Call, b, xs: list) -> list:
    dt = call.types[0].dtype
    alpha, beta = call.attrs["alpha"], call.attrs["beta"]
    a, bm = xs[0], xs[1]
    c = xs[2] if len(xs) > 2 and call.plan.use_c else None
    if call.attrs["transA"]:
        a = b.op("Transpose", a, perm=[1, 0])
    if call.attrs["transB"]:
        bm = b.op("Transpose", bm, perm=[1, 0])
    product = b.op("MatMul", a, bm)
    if dt.kind == "float":
        factors = (np.array(alpha, dt.np_dtype), np.array(beta, dt.np_dtype))
    else:
        factors = (_wrapped_factor(alpha, dt), _wrapped_factor(beta, dt))
        if None in factors:  # a fractional factor: alpha * AB + beta * C in double, truncated to T
            return [_gemm_in_double(call, b, product, c, alpha, beta, dt)]
    if alpha != 1.0:
        product = b.op("Mul", product, b.const(factors[0]))
    if c is None:
        return [product]
    if beta != 1.0:
        c = b.op("Mul", c, b.const(factors[1]))
    return [b.op("Add", product, c)]


def _gemm_in_double(call, b, product, c, alpha, beta, dt):
    double = dtypes.dtype("double")
    scaled = b.op("Mul", b.op("Cast", product, to=double.onnx_code), b.const(np.array(alpha, np.float64)))
    if c is not None:
        c_scaled = b.op("Mul", b.op("Cast", c, to=double.onnx_code), b.const(np.array(beta, np.float64)))
        scaled = b.op("Add", scaled, c_scaled)
    return b.op("Cast", scaled, to=dt.onnx_code)


def _gemm_schema(version: int) -> Schema:
    names = F if version < 9 else F + _INTS if version < 13 else F + _INTS + BF16
    attrs = (Attr("alpha", "float", 1.0), Attr("beta", "float", 1.0), Attr("transA", "int", 0),
             Attr("transB", "int", 0))
    if version < 7:
        attrs += (Attr("broadcast", "int", 0),)
    inputs = (Input("A"), Input("B"), Input("C", optional=version >= 11))
    return Schema(version, inputs, attrs, dtypes.types(*names))


register(OpDef(
    "Gemm", tuple(_gemm_schema(v) for v in (1, 6, 7, 9, 11, 13)), _gemm_rule,
    reference=expanded_reference(_gemm_expand), expand=_gemm_expand, chunk=chunks.WHOLE,
    doc="Y = alpha * A' B' + beta * C (A', B' transposed by transA / transB; C broadcast to [M, N])."))


# ---- Einsum ------------------------------------------------------------------------------------------
_LETTERS = frozenset(string.ascii_letters)


@dataclass(frozen=True)
class EinsumPlan:
    """The equation as numpy runs it (letters only, explicit output) and each operand's shape
    with its ellipsis dims broadcast (the reference broadcasts operands to them first)."""

    equation: str
    shapes: tuple


def _parse_term(call: Call, term: str, where: str) -> tuple[list, bool]:
    """(letters with None where the ellipsis is, whether there is one)."""
    if term.count("...") > 1:
        call.fail(f"equation {call.attrs['equation']!r}: {where} {term!r} has more than one ellipsis")
    head, dots, tail = term.partition("...")
    for part in (head, tail):
        bad = next((ch for ch in part if ch not in _LETTERS), None)
        if bad is not None:
            call.fail(f"equation {call.attrs['equation']!r}: {where} {term!r} has {bad!r}; expected letters "
                      f"a-z, A-Z and at most one '...'")
    return list(head) + ([None] if dots else []) + list(tail), bool(dots)


def _einsum_equation(call: Call) -> tuple[list, list | None]:
    raw = call.attrs["equation"]
    equation = (raw.decode() if isinstance(raw, bytes) else raw).replace(" ", "")
    if not equation:
        call.fail(f"equation {raw!r} is empty; expected terms like 'ij,jk->ik'")
    lhs, arrow, rhs = equation.partition("->")
    if "->" in rhs or "-" in lhs + rhs or ">" in lhs + rhs:
        call.fail(f"equation {raw!r}: '-' and '>' may only appear once, together, as '->'")
    terms = lhs.split(",")
    if len(terms) != len(call.types):
        call.fail(f"equation {raw!r} has {len(terms)} input term(s) but the op has {len(call.types)} input(s)")
    parsed = [_parse_term(call, term, f"term {k}") for k, term in enumerate(terms)]
    if not arrow:
        return parsed, None
    if "," in rhs:
        call.fail(f"equation {raw!r}: the output {rhs!r} has a ','; expected one term")
    out, _ = _parse_term(call, rhs, "output")
    return parsed, out


def _einsum_rule(call: Call) -> list:
    dt = call.types[0].dtype
    parsed, out = _einsum_equation(call)
    if any(t.shape is None for t in call.types):
        return [TensorType(dt, None)]
    raw = call.attrs["equation"]
    sizes, ellipsis_rank, ellipsis_shape = {}, None, ()
    for k, ((letters, has_dots), value_type) in enumerate(zip(parsed, call.types)):
        shape, named = tuple(value_type.shape), len(letters) - has_dots
        if len(shape) < named or (not has_dots and len(shape) != named):
            call.fail(f"equation {raw!r}: term {k} names {named} dim(s){' and an ellipsis' if has_dots else ''} but "
                      f"input {k} has shape {list(shape)}")
        if has_dots:
            rank = len(shape) - named
            if ellipsis_rank is not None and rank != ellipsis_rank:
                call.fail(f"equation {raw!r}: the ellipsis of term {k} stands for {rank} dim(s), an earlier one "
                          f"for {ellipsis_rank}; every ellipsis must stand for the same number of dims")
            ellipsis_rank = rank
            at = letters.index(None)
            ellipsis_shape = _broadcast(call, ellipsis_shape, shape[at:at + rank], raw)
            shape = shape[:at] + (None,) + shape[at + rank:]
        for letter, dim in zip(letters, shape):
            if letter is None:
                continue
            known = sizes.setdefault(letter, dim)
            if isinstance(known, int) and isinstance(dim, int) and known != dim:
                call.fail(f"equation {raw!r}: letter {letter!r} has size {known} and, in input {k} shape "
                          f"{list(value_type.shape)}, size {dim}; a letter's dims must be equal")
            if not isinstance(known, int):
                sizes[letter] = dim
    out = _output_letters(call, parsed, out, raw)
    free = [ch for ch in string.ascii_letters if ch not in sizes][:ellipsis_rank or 0]
    if len(free) < (ellipsis_rank or 0):
        call.fail(f"equation {raw!r}: the ellipsis dims need {ellipsis_rank} more letters than the 52 "
                  f"numpy.einsum has")
    sizes.update(zip(free, ellipsis_shape))

    def spell(letters):
        return "".join("".join(free) if ch is None else ch for ch in letters)

    equation = ",".join(spell(letters) for letters, _ in parsed) + "->" + spell(out)
    shapes = tuple(tuple(sizes[ch] for ch in spell(letters)) for letters, _ in parsed)
    call.plan = EinsumPlan(equation, shapes)
    return [TensorType(dt, tuple(sizes[ch] for ch in spell(out)))]


def _broadcast(call: Call, left: tuple, right: tuple, raw: str) -> tuple:
    if not left:
        return tuple(right)
    dims = []
    for a, b in zip(left, right):
        if isinstance(a, int) and isinstance(b, int) and 1 not in (a, b) and a != b:
            call.fail(f"equation {raw!r}: ellipsis dims {list(left)} and {list(right)} do not broadcast")
        dims.append(b if a == 1 or not isinstance(a, int) else a)
    return tuple(dims)


def _output_letters(call: Call, parsed: list, out: list | None, raw: str) -> list:
    counts = {}
    for letters, _ in parsed:
        for ch in letters:
            if ch is not None:
                counts[ch] = counts.get(ch, 0) + 1
    has_dots = any(dots for _, dots in parsed)
    if out is None:
        return ([None] if has_dots else []) + sorted(ch for ch, n in counts.items() if n == 1)
    named = [ch for ch in out if ch is not None]
    repeated = next((ch for ch in named if named.count(ch) > 1), None)
    if repeated is not None:
        call.fail(f"equation {raw!r}: output letter {repeated!r} appears more than once")
    missing = next((ch for ch in named if ch not in counts), None)
    if missing is not None:
        call.fail(f"equation {raw!r}: output letter {missing!r} is in no input term")
    return out  # (ellipsis dims left out of it are summed over; an ellipsis no input has is 0 dims)


def _einsum_reference(call: Call, xs: list) -> list:
    plan = call.plan
    operands = [np.broadcast_to(domain_array(x), shape) for x, shape in zip(xs, plan.shapes)]
    with np.errstate(all="ignore"):
        result = np.einsum(plan.equation, *operands, optimize=True)
    return [finish(np.asarray(result, operands[0].dtype), call.types[0].dtype)]


_EINSUM_TYPES = F + ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_EINSUM_MAX_INPUTS = 64  # (variadic: slots without gaps, as Concat's)
_EINSUM_INPUTS = (Input("Inputs_0"),) + tuple(Input(f"Inputs_{k}", optional=True) for k in range(1, _EINSUM_MAX_INPUTS))

register(OpDef(
    "Einsum", tuple(Schema(v, _EINSUM_INPUTS, (Attr("equation", "string"),), dtypes.types(*names))
                    for v, names in ((12, _EINSUM_TYPES), (28, _EINSUM_TYPES + BF16))),
    _einsum_rule, reference=_einsum_reference, chunk=chunks.WHOLE,
    doc="Einstein summation of the inputs by `equation` (numpy.einsum; implicit or explicit output, '...')."))
