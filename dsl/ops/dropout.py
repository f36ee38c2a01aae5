"""Dropout at every version: inference is the identity; training mode (12+) draws numpy's MT19937 stream.

The spec leaves the random generator unspecified. Our definition, which reproduces the ONNX node
tests: with ``seed`` given, ``np.random.seed(seed); mask = np.random.uniform(0, 1, shape) >= ratio``
(numpy's legacy generator) and ``output = mask * data / (1 - ratio)``; without ``seed`` a fresh
draw. Versions before 12 have no training input and always run in inference mode (their
``is_test`` / ``ratio`` attributes are accepted and change nothing); their mask is all ones
(type T before 10, bool from 10). The JIT runs the numpy reference.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..errors import InputError
from ..ir import TensorType
from . import chunks
from .math import BF16, F, domain_array, finish
from .registry import Attr, Call, Input, OpDef, Schema, register

_F8 = ("float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz")
_BOOL = dtypes.types("bool")
_RATIO = Attr("ratio", "float", 0.5)


def _schemas() -> tuple:
    data = (Input("data"),)
    legacy = ((1, (Attr("consumed_inputs", "ints", None), Attr("is_test", "int", 0), _RATIO)),
              (6, (Attr("is_test", "int", 0), _RATIO)), (7, (_RATIO,)), (10, (_RATIO,)))
    out = [Schema(v, data, attrs, dtypes.types(*F)) for v, attrs in legacy]
    for v, t, t1 in ((12, F, F), (13, F + BF16, F), (22, BF16 + F + _F8, BF16 + F + _F8)):
        inputs = data + (Input("ratio", dtypes.types(*t1), optional=True),
                         Input("training_mode", _BOOL, optional=True))
        out.append(Schema(v, inputs, (Attr("seed", "int", None),), dtypes.types(*t)))
    return tuple(out)


def _check_ratio(call: Call, ratio) -> float:
    if ratio is None:
        return 0.5
    array = np.asarray(ratio)
    if array.size != 1:
        call.fail(f"ratio must be a scalar, got shape {list(array.shape)}", InputError)
    value = float(np.asarray(array, np.float64).reshape(()))
    if not 0.0 <= value < 1.0:
        call.fail(f"ratio {float(f'{value:.7g}')} out of range; expected a value in [0, 1)", InputError)
    return value


def _dropout_rule(call: Call) -> list:
    x = call.types[0]
    if call.version < 12:
        _check_ratio(call, call.attrs["ratio"])
    elif len(call.values) > 1 and call.values[1] is not None:
        _check_ratio(call, call.values[1])
    if len(call.types) > 1 and call.types[1] is not None and call.types[1].shape not in (None, ()):
        call.fail(f"ratio must be a scalar, got shape {list(call.types[1].shape)}", InputError)
    mask_dtype = x.dtype if call.version < 10 else dtypes.dtype("bool")
    count = 2 if call.outputs is None else max(call.outputs, 1)
    return [x, TensorType(mask_dtype, x.shape)][:count]


def _dropout_reference(call: Call, xs: list) -> list:
    x = xs[0]
    count = 2 if call.outputs is None else max(call.outputs, 1)
    training = call.version >= 12 and len(xs) > 2 and xs[2] is not None and bool(np.asarray(xs[2]))
    if call.version < 12:
        _check_ratio(call, call.attrs["ratio"])
        ratio = 0.0
    else:
        ratio = _check_ratio(call, xs[1] if len(xs) > 1 else None)
    if not training or ratio == 0.0:
        mask_dtype = call.types[0].dtype if call.version < 10 else dtypes.dtype("bool")
        mask = finish(np.ones(x.shape, np.float32), mask_dtype) if call.version < 10 else \
            np.ones(x.shape, bool)
        return [x, mask][:count]
    seed = call.attrs["seed"]
    if seed is not None:
        # RandomState(seed) is the stream np.random.seed(seed) starts, without touching global state
        draw = np.random.RandomState(seed).uniform(0, 1.0, x.shape)
    else:
        draw = np.random.default_rng().uniform(0, 1.0, x.shape)
    mask = draw >= ratio
    wide = domain_array(x)
    with np.errstate(all="ignore"):
        y = mask * wide / wide.dtype.type(1 - ratio)
    return [finish(y, call.types[0].dtype), mask][:count]


register(OpDef(
    "Dropout", _schemas(), _dropout_rule, reference=_dropout_reference, chunk=chunks.WHOLE,
    doc="Dropout: identity in inference; in training mode a seeded numpy MT19937 mask scaled by 1/(1-ratio)."))
