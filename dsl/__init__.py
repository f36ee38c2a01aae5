"""dsl: a tensor DSL with exact ONNX operator semantics, an eager numpy engine and numba kernels.

Public API (pinned in DESIGN.md): element types (``dsl.float32``, ``dsl.int4``, ...,
``dsl.dtype``), ``dsl.Tensor``, the eager shape ops (``dsl.unsqueeze`` ...), ONNX import
(``dsl.from_onnx``) and the IR types (``dsl.TensorType``, ``dsl.Program``).
"""
from . import dtypes as _dtypes
from .dtypes import DType, dtype
from .eager import (cast, dequantize_linear, expand, flatten, identity, quantize_linear, reshape, shape,
                    squeeze, transpose, unsqueeze)
from .compare import CompareReport, compare
from .functional import (abs, add, clip, concat, constant_of_shape, div, equal, erf, exp, gather, greater,  # noqa: A004
                         greater_equal, less, less_equal, log, log_softmax, logical_and, logical_not, logical_or,
                         matmul, maximum, minimum, mul, neg, pow, range, reciprocal, reduce_max, reduce_mean, reduce_min,
                         reduce_sum, relu, sigmoid, size, slice, softmax, sqrt, sub, tanh, where)
from . import frontend as _frontend  # noqa: F401  (x[...], x.T, x.sum ... on traced values and Tensors)
from .jit import JitFunction, jit
from .layout import contiguous
from .lru import set_cache_limits
from .errors import (DslError, DTypeError, InputError, ResourceError, ShapeError, UnsupportedAttributeError,
                     UnsupportedError)
from .ir import Graph, Node, OptionalType, SequenceType, TensorType, Value
from .ops import LATEST_OPSET
from .program import Program, from_onnx
from .tensor import Tensor

for _t in _dtypes.ALL:
    globals()[_t.py_name] = _t
double = _dtypes.dtype("double")
del _t

__version__ = "0.1.0"


def __getattr__(name):
    if name == "dask":  # optional extra, imported on first use: dsl.dask.apply(...)
        import importlib
        return importlib.import_module("dsl.dask")
    raise AttributeError(f"module 'dsl' has no attribute {name!r}")

__all__ = [
    "DType", "dtype", "Tensor", "TensorType", "SequenceType", "OptionalType", "Graph", "Node", "Value",
    "Program", "from_onnx", "LATEST_OPSET",
    "jit", "JitFunction", "contiguous", "set_cache_limits", "compare", "CompareReport", "cast", "dequantize_linear", "quantize_linear",
    "unsqueeze", "squeeze", "reshape", "flatten", "transpose", "expand", "shape", "identity",
    "add", "sub", "mul", "div", "pow", "neg", "abs", "exp", "log", "sqrt", "reciprocal", "tanh", "sigmoid",
    "relu", "erf", "equal", "less", "greater", "less_equal", "greater_equal", "logical_not", "logical_and",
    "logical_or", "where", "maximum", "minimum", "clip", "reduce_sum", "reduce_max", "reduce_min", "reduce_mean", "softmax",
    "log_softmax", "matmul", "slice", "concat", "gather", "size", "constant_of_shape", "range",
    "DslError", "DTypeError", "InputError", "ResourceError", "ShapeError", "UnsupportedAttributeError",
    "UnsupportedError",
    *[t.py_name for t in _dtypes.ALL], "double",
]
