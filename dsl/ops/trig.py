"""Trigonometric and hyperbolic ops: Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh.

Floats only. float16 and bfloat16 compute in float32 and round once (dsl/ops/math.py); the
kernels lower to the kernel IR's float math (sin / cos: kernels/vmath.py under fast math, the
others libm), outside the domain the result is NaN (asin(2), acosh(0.5)) and at the poles the
signed infinity (atanh(+-1)).
"""
from __future__ import annotations

import numpy as np

from .. import kir
from .math import BF16, F, _register_unary


def _via_float64(fn):
    """``fn`` with float32 evaluated in float64 and rounded once: numpy's float32 tan / arcsin /
    arccos / arctan / cosh (SIMD) are up to 3 ulp off (measured on AVX-512), float64 libm rounded
    is the correctly rounded value in nearly every case (the kernel IR's definition,
    dsl/kir/interp.py) and what the kernels' float32 libm calls are held to."""
    def evaluate(x: np.ndarray) -> np.ndarray:
        return fn(x.astype(np.float64)).astype(np.float32) if x.dtype == np.float32 else fn(x)
    return evaluate


_SINCE_7 = {7: F, 22: F + BF16}
_SINCE_9 = {9: F, 22: F + BF16}
# (ONNX name, numpy function, kernel-IR unary op, {version: type names})
_TRIG = (
    ("Sin", np.sin, "sin", _SINCE_7), ("Cos", np.cos, "cos", _SINCE_7), ("Tan", np.tan, "tan", _SINCE_7),
    ("Asin", np.arcsin, "asin", _SINCE_7), ("Acos", np.arccos, "acos", _SINCE_7),
    ("Atan", np.arctan, "atan", _SINCE_7),
    ("Sinh", np.sinh, "sinh", _SINCE_9), ("Cosh", np.cosh, "cosh", _SINCE_9),
    ("Asinh", np.arcsinh, "asinh", _SINCE_9), ("Acosh", np.arccosh, "acosh", _SINCE_9),
    ("Atanh", np.arctanh, "atanh", _SINCE_9),
)

for _name, _fn, _op, _versions in _TRIG:
    _register_unary(_name, "input", _versions, _via_float64(_fn), lambda a, op=_op: kir.unary(op, a))
