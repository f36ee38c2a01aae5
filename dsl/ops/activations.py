"""Activation functions (Elu, Selu, Celu, LeakyRelu, PRelu, HardSigmoid, HardSwish, Softplus, Softsign,
ThresholdedRelu, Shrink, Gelu, Mish, Swish): the spec text's formula evaluated in the compute domain.

Every op computes in its compute domain (float16 and bfloat16 in float32, dsl/ops/math.py) and
rounds once to the output type. Float attributes are ONNX floats: float32 values, exact in
either domain (the function bodies' CastLike would round them to float16 first; the spec text
does not). ``exp(x) - 1`` is computed as expm1 (the same real number, without the cancellation).
Products with x are IEEE products, as the function bodies give: +-inf times a factor that is 0
is NaN (HardSwish, Gelu, Mish and Swish at -inf), and Softsign at +-inf is inf / inf = NaN.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from kernels.special import erf_f64

from .. import dtypes, kir
from ..errors import InputError
from ..ir import TensorType
from .lowering import Elementwise
from .math import BF16, F, SIGNED, UNSIGNED, domain_array, finish
from .minmax import maximum, minimum
from .registry import Attr, Call, Input, OpDef, Schema, register

_CONSUMED = Attr("consumed_inputs", "ints", None)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_SQRT_HALF = math.sqrt(0.5)


# ---- numpy (reference) and kernel-IR building blocks ------------------------------------------
def _math64(fn):
    """fn evaluated in float64, rounded once to the domain array's type (float32 or float64)."""
    return lambda x: np.asarray(fn(np.array(x, np.float64))).astype(x.dtype)


_expm1, _tanh, _erf = _math64(np.expm1), _math64(np.tanh), _math64(erf_f64)
_softplus = _math64(lambda x: np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x))))
_sigmoid = _math64(lambda x: np.where(x >= 0, 1 / (1 + np.exp(-x)), np.exp(x) / (1 + np.exp(x))))


def _k(value, like: kir.Expr) -> kir.Expr:
    return kir.const(value, like.dtype)


def _add(a, b):
    return kir.binary("add", a, b)


def _sub(a, b):
    return kir.binary("sub", a, b)


def _mul(a, b):
    return kir.binary("mul", a, b)


def _div(a, b):
    return kir.binary("div", a, b)


def _lt(a, b):
    return kir.compare("lt", a, b)


def _selu_np(x, alpha, gamma):
    c = x.dtype.type
    return np.where(x < 0, c(gamma) * (c(alpha) * _expm1(x)), c(gamma) * x)


def _selu_expr(a, alpha, gamma):
    negative = _mul(_k(gamma, a), _mul(_k(alpha, a), kir.unary("expm1", a)))
    return kir.select(_lt(a, _k(0, a)), negative, _mul(_k(gamma, a), a))


def _celu_np(x, alpha):
    c = x.dtype.type
    return maximum(x, c(0)) + minimum(c(alpha) * _expm1(x / c(alpha)), c(0))


def _celu_expr(a, alpha):
    negative = _mul(_k(alpha, a), kir.unary("expm1", _div(a, _k(alpha, a))))
    return _add(kir.binary("max", a, _k(0, a)), kir.binary("min", negative, _k(0, a)))


def _hard_sigmoid_np(x, alpha, beta):
    one, zero = x.dtype.type(1), x.dtype.type(0)
    return maximum(minimum(x * x.dtype.type(alpha) + x.dtype.type(beta), one), zero)


def _hard_sigmoid_expr(a, alpha, beta):
    linear = _add(_mul(a, _k(alpha, a)), _k(beta, a))
    return kir.binary("max", kir.binary("min", linear, _k(1, a)), _k(0, a))


def _gelu_np(x, approximate):
    c = x.dtype.type
    if approximate == "tanh":
        inner = c(_SQRT_2_OVER_PI) * (x + c(0.044715) * (x * x * x))
        return (c(0.5) * x) * (c(1) + _tanh(inner))
    return (c(0.5) * x) * (c(1) + _erf(x * c(_SQRT_HALF)))


def _gelu_expr(a, approximate):
    if approximate == "tanh":
        cube = _mul(_mul(a, a), a)
        inner = _mul(_k(_SQRT_2_OVER_PI, a), _add(a, _mul(_k(0.044715, a), cube)))
        return _mul(_mul(_k(0.5, a), a), _add(_k(1, a), kir.unary("tanh", inner)))
    return _mul(_mul(_k(0.5, a), a), _add(_k(1, a), kir.unary("erf", _mul(a, _k(_SQRT_HALF, a)))))


# ---- the float unary ops: (name, input, {version: types}, {attr: default}, numpy form, kir form) --
# Each form takes the domain value and the attributes (as float32-rounded floats, in schema order).
_FLOATS = {1: F, 6: F, 22: F + BF16}
_UNARY = (
    # Elu: alpha * (exp(x) - 1) for x < 0, x for x >= 0
    ("Elu", "X", _FLOATS, {"alpha": 1.0},
     lambda x, alpha: np.where(x < 0, x.dtype.type(alpha) * _expm1(x), x),
     lambda a, alpha: kir.select(_lt(a, _k(0, a)), _mul(_k(alpha, a), kir.unary("expm1", a)), a)),
    # Selu: gamma * (alpha * e^x - alpha) for x <= 0, gamma * x for x > 0 (the body's Less: +-0 -> gamma * x)
    ("Selu", "X", _FLOATS, {"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875},
     _selu_np, _selu_expr),
    # Celu: max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
    ("Celu", "X", {12: ("float",), 28: F + BF16}, {"alpha": 1.0},
     _celu_np, _celu_expr),
    # LeakyRelu: alpha * x for x < 0, x for x >= 0
    ("LeakyRelu", "X", {1: F, 6: F, 16: F + BF16}, {"alpha": 0.01},
     lambda x, alpha: np.where(x < 0, x.dtype.type(alpha) * x, x),
     lambda a, alpha: kir.select(_lt(a, _k(0, a)), _mul(_k(alpha, a), a), a)),
    # HardSigmoid: max(0, min(1, alpha * x + beta)); NaN propagates through Min / Max
    ("HardSigmoid", "X", _FLOATS, {"alpha": 0.2, "beta": 0.5}, _hard_sigmoid_np, _hard_sigmoid_expr),
    # HardSwish: x * HardSigmoid<alpha = 1/6, beta = 0.5>(x) (1/6 in the domain, as the text says)
    ("HardSwish", "X", {14: F, 22: F + BF16}, {},
     lambda x: x * _hard_sigmoid_np(x, 1 / 6, 0.5), lambda a: _mul(a, _hard_sigmoid_expr(a, 1 / 6, 0.5))),
    # Softplus: ln(exp(x) + 1), evaluated without overflow
    ("Softplus", "X", {1: F, 22: F + BF16}, {}, _softplus, lambda a: kir.unary("softplus", a)),
    # Softsign: x / (1 + |x|)
    ("Softsign", "input", {1: F, 22: F + BF16}, {},
     lambda x: x / (x.dtype.type(1) + np.abs(x)), lambda a: _div(a, _add(_k(1, a), kir.unary("abs", a)))),
    # ThresholdedRelu: x for x > alpha, else 0 (NaN -> 0)
    ("ThresholdedRelu", "X", {10: F, 22: F + BF16}, {"alpha": 1.0},
     lambda x, alpha: np.where(x.dtype.type(alpha) < x, x, x.dtype.type(0)),
     lambda a, alpha: kir.select(_lt(_k(alpha, a), a), a, _k(0, a))),
    # Mish: x * tanh(softplus(x))
    ("Mish", "X", {18: F, 22: F + BF16}, {},
     lambda x: x * _tanh(_softplus(x)), lambda a: _mul(a, kir.unary("tanh", kir.unary("softplus", a)))),
    # Swish: x * sigmoid(alpha * x)
    ("Swish", "X", {24: F + BF16}, {"alpha": 1.0},
     lambda x, alpha: x * _sigmoid(x.dtype.type(alpha) * x),
     lambda a, alpha: _mul(a, kir.unary("sigmoid", _mul(_k(alpha, a), a)))),
)


def _same_type_rule(call: Call) -> list:
    return [TensorType(call.types[0].dtype, call.types[0].shape)]


def _float_attrs(names):
    """The rule of an op with float attributes: their float32 values, in order, in ``call.plan``."""
    def rule(call: Call) -> list:
        with np.errstate(over="ignore"):  # (a float beyond float32's range is inf, as in an ONNX float)
            call.plan = tuple(float(np.float32(call.attrs[name])) for name in names)
        return _same_type_rule(call)
    return rule


# Selu-1's defaults are the constants rounded to 5 digits; every other version's are one table
_LEGACY_DEFAULTS = {("Selu", 1): {"alpha": 1.6732, "gamma": 1.0507}}
_CONSUMED_AT_1 = ("Elu", "Selu", "LeakyRelu", "HardSigmoid")  # (not Softplus-1, Softsign-1)


def _unary_schema(name, input_name, version, names, defaults) -> Schema:
    defaults = _LEGACY_DEFAULTS.get((name, version), defaults)
    attrs = tuple(Attr(key, "float", float(np.float32(value))) for key, value in defaults.items())
    consumed = (_CONSUMED,) if version == 1 and name in _CONSUMED_AT_1 else ()
    return Schema(version, (Input(input_name),), attrs + consumed, dtypes.types(*names))


def _register_unary(name, input_name, versions, defaults, fn, expr) -> None:
    schemas = tuple(_unary_schema(name, input_name, v, names, defaults) for v, names in versions.items())

    def reference(call: Call, xs: list) -> list:
        with np.errstate(all="ignore"):
            out = fn(domain_array(xs[0]), *call.plan)
        return [finish(out, call.types[0].dtype)]

    register(OpDef(name, schemas, _float_attrs(list(defaults)), reference=reference,
                   kernel=Elementwise(lambda call, args: expr(args[0], *call.plan)), doc=f"Elementwise {name}."))


for _row in _UNARY:
    _register_unary(*_row)


# ---- Gelu -----------------------------------------------------------------------------------------
def _gelu_rule(call: Call) -> list:
    approximate = call.attrs["approximate"]
    if approximate not in ("none", "tanh"):
        call.fail(f"approximate {approximate!r} is not one of ['none', 'tanh']", InputError)
    call.plan = approximate
    return _same_type_rule(call)


def _gelu_reference(call: Call, xs: list) -> list:
    with np.errstate(all="ignore"):
        out = _gelu_np(domain_array(xs[0]), call.plan)
    return [finish(out, call.types[0].dtype)]


register(OpDef("Gelu", (Schema(20, (Input("X"),), (Attr("approximate", "string", "none"),),
                               dtypes.types(*F, *BF16)),),
               _gelu_rule, reference=_gelu_reference,
               kernel=Elementwise(lambda call, args: _gelu_expr(args[0], call.plan)),
               doc="Elementwise 0.5 x (1 + erf(x / sqrt(2))), or its tanh approximation."))


# ---- Shrink ---------------------------------------------------------------------------------------
# Spec text: y = x + bias for x < -lambd, x - bias for x > lambd, else 0. On integers the
# comparisons are exact (x < t is x < ceil(t) for an integer x; never or always outside the
# type's range), and bias is CastLike(bias, input) as the function body has it: truncated
# toward zero, wrapped to the type; the additions wrap.
@dataclass(frozen=True)
class ShrinkPlan:
    """Shrink's constants (``call.plan``): each test a number to compare with or a bool (the
    test's value for every x of the type); the bias in the domain's kind."""

    below: object   # x < below
    above: object   # x > above
    bias: float | int


def _int_tests(lambd: float, info) -> tuple:
    low, high = int(info.min), int(info.max)
    if math.isnan(lambd):
        return False, False
    below = -lambd
    below = True if below > high else False if below <= low else math.ceil(below)
    above = False if lambd >= high else True if lambd < low else math.floor(lambd)
    return below, above


def _shrink_rule(call: Call) -> list:
    dt = call.types[0].dtype
    lambd, bias = float(np.float32(call.attrs["lambd"])), float(np.float32(call.attrs["bias"]))
    if dt.kind == "float":
        call.plan = ShrinkPlan(-lambd, lambd, bias)
    else:
        if not math.isfinite(bias):
            call.fail(f"bias {bias} cannot be cast to {dt} (the function body's CastLike)", InputError)
        bits = dt.np_dtype.itemsize * 8
        wrapped = int(bias) % (1 << bits)
        if dt.kind == "int" and wrapped >= 1 << (bits - 1):
            wrapped -= 1 << bits
        call.plan = ShrinkPlan(*_int_tests(lambd, ml_dtypes.iinfo(dt.np_dtype)), wrapped)
    return _same_type_rule(call)


def _shrink_reference(call: Call, xs: list) -> list:
    x = domain_array(xs[0])
    plan, c = call.plan, x.dtype.type
    below = np.full(x.shape, plan.below) if isinstance(plan.below, bool) else x < c(plan.below)
    above = np.full(x.shape, plan.above) if isinstance(plan.above, bool) else x > c(plan.above)
    with np.errstate(all="ignore"):
        out = np.where(below, x + c(plan.bias), np.where(above, x - c(plan.bias), c(0)))
    return [finish(out, call.types[0].dtype)]


def _shrink_expr(call, args) -> kir.Expr:
    a, plan = args[0], call.plan

    def test(op, value):
        return kir.const(value, "bool") if isinstance(value, bool) else kir.compare(op, a, _k(value, a))

    bias = _k(plan.bias, a)
    return kir.select(test("lt", plan.below), _add(a, bias),
                      kir.select(test("gt", plan.above), _sub(a, bias), _k(0, a)))


register(OpDef("Shrink", (Schema(9, (Input("input"),), (Attr("bias", "float", 0.0), Attr("lambd", "float", 0.5)),
                                 dtypes.types(*F, *SIGNED, *UNSIGNED)),),
               _shrink_rule, reference=_shrink_reference, kernel=Elementwise(_shrink_expr),
               doc="Elementwise x + bias below -lambd, x - bias above lambd, else 0."))


# ---- PRelu ----------------------------------------------------------------------------------------
# slope * x for x < 0, x for x >= 0. From version 7 slope broadcasts unidirectionally to X.
# Versions 1 and 6 say only "if slope is of size 1, the value is shared across different
# channels": besides shapes that broadcast, a 1-D slope of X's channel count (dim 1, as in
# Caffe2's PRelu, which they come from) applies per channel. ``call.plan``: the slope's shape
# as read (None: as given).
_PRELU = {1: F, 6: F, 7: F, 9: F + ("int32", "int64", "uint32", "uint64"),
          16: F + BF16 + ("int32", "int64", "uint32", "uint64")}


def _broadcasts_to(x_shape: tuple, slope_shape: tuple) -> bool:
    """Whether slope broadcasts unidirectionally to X (each dim 1 or X's; unknown dims match)."""
    if len(slope_shape) > len(x_shape):
        return False
    tail = x_shape[len(x_shape) - len(slope_shape):]
    return all(s == 1 or s == d or not isinstance(s, int) or not isinstance(d, int)
               for s, d in zip(slope_shape, tail))


def _prelu_rule(call: Call) -> list:
    x, slope = call.types[0], call.types[1]
    call.plan = None
    if x.shape is not None and slope.shape is not None:
        x_shape, slope_shape = tuple(x.shape), tuple(slope.shape)
        if _broadcasts_to(x_shape, slope_shape):
            pass
        elif call.version < 7 and len(slope_shape) == 1 and len(x_shape) >= 2 and slope_shape[0] == x_shape[1]:
            call.plan = slope_shape + (1,) * (len(x_shape) - 2)
        else:
            call.fail(f"slope shape {list(slope_shape)} does not broadcast unidirectionally to X shape "
                      f"{list(x_shape)}")
    return [TensorType(x.dtype, x.shape)]


def _prelu_reference(call: Call, xs: list) -> list:
    x, slope = domain_array(xs[0]), domain_array(xs[1])
    if call.plan is not None:
        slope = slope.reshape(call.plan)
    with np.errstate(all="ignore"):
        out = np.where(x < x.dtype.type(0), slope * x, x)
    return [finish(out, call.types[0].dtype)]


def _prelu_expr(call, args) -> kir.Expr:
    x, slope = args
    return kir.select(_lt(x, _k(0, x)), _mul(slope, x), x)


def _prelu_path(call: Call, index: int) -> tuple:
    if index != 1 or call.plan is None:
        return ()
    return ((("prelu_channels", call.plan), lambda view, shape=call.plan: view.reshape(shape)),)


register(OpDef("PRelu", tuple(Schema(v, (Input("X"), Input("slope")), (_CONSUMED,) if v == 1 else (),
                                     dtypes.types(*names)) for v, names in _PRELU.items()),
               _prelu_rule, reference=_prelu_reference, kernel=Elementwise(_prelu_expr, input_path=_prelu_path),
               doc="Elementwise slope * x for x < 0, else x (slope broadcast to X)."))


# ---- SwiGLU ---------------------------------------------------------------------------------------
# Y = Swish_alpha(A) * B = A * sigmoid(alpha * A) * B; A and B of one shape ("broadcasting is not
# applied"), computed in the domain and rounded once, as every op here.
def _swiglu_rule(call: Call) -> list:
    a, b = call.types[0], call.types[1]
    if a.shape is not None and b.shape is not None and len(a.shape) != len(b.shape) or any(
            isinstance(m, int) and isinstance(n, int) and m != n for m, n in zip(a.shape or (), b.shape or ())):
        call.fail(f"A shape {list(a.shape)} and B shape {list(b.shape)} differ; SwiGLU does not broadcast")
    return _float_attrs(["alpha"])(call)


def _swiglu_reference(call: Call, xs: list) -> list:
    a, b = domain_array(xs[0]), domain_array(xs[1])
    with np.errstate(all="ignore"):
        out = a * _sigmoid(a.dtype.type(call.plan[0]) * a) * b
    return [finish(out, call.types[0].dtype)]


def _swiglu_expr(call, args) -> kir.Expr:
    a, b = args
    return _mul(_mul(a, kir.unary("sigmoid", _mul(_k(call.plan[0], a), a))), b)


register(OpDef("SwiGLU", (Schema(28, (Input("A"), Input("B")), (Attr("alpha", "float", 1.0),), dtypes.types(*F, *BF16)),),
               _swiglu_rule, reference=_swiglu_reference, kernel=Elementwise(_swiglu_expr),
               doc="Elementwise Swish_alpha(A) * B, A and B of one shape."))
