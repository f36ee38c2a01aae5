"""Unary elementwise math (Neg, Abs, Exp, Log, Sqrt, Reciprocal, Tanh, Sigmoid, Relu, Erf) and Pow.

Every op computes in a compute domain and rounds once to the output type: float16 and
bfloat16 in float32 (as generated kernels do, dsl/codegen/scalar.py), the other types in
themselves; integer results wrap. The references below are the test oracle for the kernels.
"""
from __future__ import annotations

import numpy as np

from kernels.special import erf_f64

from .. import dtypes, kir
from ..convert import convert, to_wide
from ..ir import TensorType
from ..kir.interp import int_pow
from .arith import legacy_b_shape
from .lowering import Elementwise
from .registry import Attr, Call, Input, OpDef, Schema, register
from .shape import broadcast_dims

F = ("float16", "float", "double")
BF16 = ("bfloat16",)
SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
LEGACY_BROADCAST = (Attr("broadcast", "int", 0), Attr("axis", "int", None))


# ---- compute domains shared by the elementwise families ---------------------------------------
def domain_array(x: np.ndarray) -> np.ndarray:
    """``x`` in its compute domain: float16/bfloat16 as float32, other types unchanged."""
    wide = to_wide(x, dtypes.of_array(x))
    return wide.astype(np.float32) if wide.dtype == np.float16 else wide


def finish(result, dt) -> np.ndarray:
    """A compute-domain result rounded once to element type ``dt`` (Cast semantics)."""
    result = np.asarray(result)
    return result if result.dtype == dt.np_dtype else convert(result, dt)


def binary_shape(call: Call) -> tuple | None:
    """Output shape of a two-input op: numpy broadcasting from version 7, the legacy
    ``broadcast``/``axis`` rule before (only B broadcasts, aligned to A at ``axis``).
    Records B's (padded) shape in ``call.plan`` for the reference and the kernel."""
    a, b = call.types[0], call.types[1]
    if a.shape is None or b.shape is None:
        return None
    legacy = call.version < 7
    b_shape = legacy_b_shape(call, a.shape, b.shape) if legacy else tuple(b.shape)
    call.plan = b_shape
    shape = broadcast_dims(call, a.shape, b_shape)
    if legacy and shape != tuple(a.shape):
        call.fail(f"B shape {list(b.shape)} would broadcast A {list(a.shape)}; only B may broadcast")
    return shape


def legacy_inputs(call: Call, xs: list) -> list:
    """The reference's view of the inputs: B reshaped to the legacy-broadcast plan."""
    if call.version < 7 and call.plan is not None:
        return [xs[0], xs[1].reshape(call.plan)]
    return xs


def legacy_path(call: Call, index: int) -> tuple:
    """Kernel input path: under the legacy rule B is reshaped before numpy broadcasting."""
    if call.version >= 7 or index != 1 or call.plan is None:
        return ()
    return ((("legacy_b", call.plan), lambda view, shape=call.plan: view.reshape(shape)),)


# ---- unary ops ---------------------------------------------------------------------------------
def _unary_rule(call: Call) -> list:
    return [TensorType(call.types[0].dtype, call.types[0].shape)]


def _unary_reference(fn):
    def reference(call: Call, xs: list) -> list:
        with np.errstate(all="ignore"):
            out = fn(domain_array(xs[0]))
        return [finish(out, call.types[0].dtype)]
    return reference


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # The two-branch form never overflows: exp of a non-positive argument only.
    one = x.dtype.type(1)
    return np.where(x >= 0, one / (one + np.exp(-x)), np.exp(x) / (one + np.exp(x)))


def _erf(x: np.ndarray) -> np.ndarray:
    # erf is evaluated in float64 (libm) and rounded to float32 for the float32 domain: a
    # float32 erf accurate to the last bit. Integer inputs give trunc(erf(x)) in {-1, 0, 1}.
    out = erf_f64(np.ascontiguousarray(x, np.float64))
    return out.astype(np.float32) if x.dtype == np.float32 else out


def _erf_expr(a: kir.Expr) -> kir.Expr:
    # float32 stays float32 (the IR's erf is the correctly rounded function); integers (Erf-9)
    # compute in float64 and truncate in the output cast
    return kir.unary("erf", a if kir.types.is_float(a.dtype) else kir.convert(a, "float64"))


def _relu_expr(a: kir.Expr) -> kir.Expr:
    zero = kir.const(0, a.dtype)
    return kir.select(kir.compare("lt", a, zero), zero, a)


# (name, input name, {version: type names}, reference on domain arrays, kernel expr(a, domain))
_FLOAT_VERSIONS = {1: F, 6: F, 13: F + BF16}
_UNARY = (
    ("Neg", "X", {1: F, 6: F + SIGNED, 13: F + SIGNED + BF16}, np.negative, lambda a: kir.unary("neg", a)),
    ("Abs", "X", {1: F, 6: F + SIGNED + UNSIGNED, 13: F + SIGNED + UNSIGNED + BF16}, np.abs,
     lambda a: kir.unary("abs", a)),
    ("Exp", "input", _FLOAT_VERSIONS, np.exp, lambda a: kir.unary("exp", a)),
    ("Log", "input", _FLOAT_VERSIONS, np.log, lambda a: kir.unary("log", a)),
    ("Sqrt", "X", _FLOAT_VERSIONS, np.sqrt, lambda a: kir.unary("sqrt", a)),
    ("Reciprocal", "X", _FLOAT_VERSIONS, lambda x: x.dtype.type(1) / x,
     lambda a: kir.binary("div", kir.const(1, a.dtype), a)),
    ("Tanh", "input", _FLOAT_VERSIONS, np.tanh, lambda a: kir.unary("tanh", a)),
    ("Sigmoid", "X", _FLOAT_VERSIONS, _sigmoid, lambda a: kir.unary("sigmoid", a)),
    # max(0, x) with NaN kept and -0.0 kept (x < 0 is false for both), like np.maximum(x, 0)
    ("Relu", "X", {**_FLOAT_VERSIONS, 14: F + BF16 + SIGNED}, lambda x: np.where(x < 0, x.dtype.type(0), x),
     _relu_expr),
    ("Erf", "input", {9: F + SIGNED + UNSIGNED, 13: F + BF16}, _erf, _erf_expr),
)


def _register_unary(name: str, input_name: str, versions: dict, fn, expr) -> None:
    schemas = tuple(Schema(v, (Input(input_name),), (Attr("consumed_inputs", "ints", None),) if v == 1 else (),
                           dtypes.types(*names)) for v, names in versions.items())
    kernel = Elementwise(lambda call, args: expr(args[0]))
    register(OpDef(name, schemas, _unary_rule, reference=_unary_reference(fn), kernel=kernel,
                   doc=f"Elementwise {name}."))


for _row in _UNARY:
    _register_unary(*_row)


# ---- Pow ---------------------------------------------------------------------------------------
# Y has its own type variable from version 12, so the compute domain is numpy's promotion of
# the two compute domains (float32 x int32 -> float64, int32 x float32 -> float64), rounded
# once to X's type; onnxruntime does the same through std::pow(T, T1). Two integers give the
# exact power modulo 2**bits (numpy's wrapping), and a negative exponent gives 1 / x**|y|
# with integer Div semantics: 1 for x = 1, +-1 for x = -1, else 0 (0 for x = 0, as x / 0).
_POW_T = {1: F, 7: F, 12: F + ("int32", "int64"), 13: F + BF16 + ("int32", "int64"),
          15: F + BF16 + ("int32", "int64")}
_POW_T1 = {12: F + SIGNED + UNSIGNED, 13: F + SIGNED + UNSIGNED, 15: F + BF16 + SIGNED + UNSIGNED}


def _pow_expr(call, args) -> kir.Expr:
    x, y = args
    if kir.types.is_integer(x.dtype) and kir.types.is_integer(y.dtype):
        # the power modulo 2**64 (y >= 0; kir pow), truncated to X's width by the output cast;
        # an unsigned Y may exceed int64, so it computes in uint64
        wide = "uint64" if y.dtype.startswith("uint") else "int64"
        return kir.binary("pow", kir.convert(x, wide), kir.convert(y, wide))
    domain = np.result_type(np.dtype(kir.types.numpy_name(x.dtype)), np.dtype(kir.types.numpy_name(y.dtype))).name
    return kir.binary("pow", kir.convert(x, domain), kir.convert(y, domain))


def _pow_reference(call: Call, xs: list) -> list:
    x, y = (domain_array(v) for v in legacy_inputs(call, xs))
    with np.errstate(all="ignore"):
        if x.dtype.kind in "iu" and y.dtype.kind in "iu":
            out = int_pow(x, y)
        else:
            domain = np.result_type(x.dtype, y.dtype)
            out = np.power(x.astype(domain), y.astype(domain))
    return [finish(out, call.types[0].dtype)]


def _pow_rule(call: Call) -> list:
    return [TensorType(call.types[0].dtype, binary_shape(call))]


def _pow_schema(version: int) -> Schema:
    y_types = dtypes.types(*_POW_T1[version]) if version >= 12 else None
    return Schema(version, (Input("X"), Input("Y", y_types)), LEGACY_BROADCAST if version < 7 else (),
                  dtypes.types(*_POW_T[version]))


register(OpDef("Pow", tuple(_pow_schema(v) for v in _POW_T), _pow_rule, reference=_pow_reference,
               kernel=Elementwise(_pow_expr, input_path=legacy_path),
               doc="Elementwise X ** Y (Y broadcast); the result has X's type."))
