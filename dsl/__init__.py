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
from .functional import (abs, add, argmax, argmin, bitcast, center_crop_pad, clip, compress, concat,  # noqa: A004
                         constant_of_shape, cumprod, cumsum, depth_to_space, div, equal, erf, exp, eye_like, gather,
                         gather_elements, gather_nd, greater, greater_equal, hardmax, less, less_equal, log,
                         log_softmax, logical_and, logical_not, logical_or, matmul, maximum, minimum, mul, neg,
                         nonzero, one_hot, pad, pow, range, reciprocal, reduce_l1, reduce_l2, reduce_log_sum,
                         reduce_log_sum_exp, reduce_max, reduce_mean, reduce_min, reduce_prod, reduce_sum,
                         reduce_sum_square, relu, reverse_sequence, scatter_elements, scatter_nd, sigmoid, size,
                         slice, softmax, space_to_depth, split, sqrt, stack, sub, tanh, tensor_scatter, tile, topk, trilu,
                         where)
from .functional import (acos, acosh, asin, asinh, atan, atanh, ceil, cos, cosh, floor, is_inf,  # noqa: A004
                         is_nan, round, sign, sin, sinh, tan)
from .functional import (bit_shift, bitwise_and, bitwise_not, bitwise_or, bitwise_xor, mean, mod,  # noqa: A004
                         sum, xor)
from .functional import (celu, elu, gelu, hard_sigmoid, hard_swish, leaky_relu, mish, prelu, selu, shrink,
                         softplus, softsign, swiglu, swish, thresholded_relu)
from .functional import dropout, negative_log_likelihood_loss, softmax_cross_entropy_loss
from .functional import (batch_normalization, group_normalization, instance_normalization,
                         layer_normalization, lp_normalization, mean_variance_normalization, rms_normalization)
from .functional import dynamic_quantize_linear, einsum, gemm, matmul_integer, qlinear_matmul
from .functional import rotary_embedding
from .functional import attention
from .functional import causal_conv_with_state, linear_attention
from . import frontend as _frontend  # noqa: F401  (x[...], x.T, x.sum ... on traced values and Tensors)
from .jit import JitFunction, jit
from .layout import contiguous
from .lru import set_cache_limits
from .thread_policy import set_threads
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
    "jit", "JitFunction", "contiguous", "set_cache_limits", "set_threads", "compare", "CompareReport", "cast", "dequantize_linear", "quantize_linear",
    "unsqueeze", "squeeze", "reshape", "flatten", "transpose", "expand", "shape", "identity",
    "add", "sub", "mul", "div", "pow", "neg", "abs", "exp", "log", "sqrt", "reciprocal", "tanh", "sigmoid",
    "relu", "erf", "equal", "less", "greater", "less_equal", "greater_equal", "logical_not", "logical_and",
    "logical_or", "where", "maximum", "minimum", "clip", "reduce_sum", "reduce_max", "reduce_min", "reduce_mean", "reduce_prod",
    "reduce_l1", "reduce_l2", "reduce_sum_square", "reduce_log_sum", "reduce_log_sum_exp", "argmax", "argmin", "softmax",
    "log_softmax", "matmul", "slice", "concat", "gather", "size", "constant_of_shape", "range",
    "stack", "split", "tile", "pad", "depth_to_space", "space_to_depth", "reverse_sequence", "center_crop_pad",
    "gather_elements", "gather_nd", "scatter_elements", "scatter_nd", "one_hot", "compress", "nonzero",
    "tensor_scatter", "cumsum", "cumprod", "topk", "trilu", "eye_like", "hardmax", "bitcast",
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "floor", "ceil", "round", "sign", "is_nan", "is_inf",
    "mod", "bit_shift", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "xor", "sum", "mean",
    "elu", "selu", "celu", "leaky_relu", "prelu", "hard_sigmoid", "hard_swish", "softplus", "softsign", "thresholded_relu", "shrink", "gelu", "mish", "swish", "swiglu",
    "negative_log_likelihood_loss", "softmax_cross_entropy_loss", "dropout",
    "layer_normalization", "rms_normalization", "lp_normalization", "group_normalization",
    "instance_normalization", "batch_normalization", "mean_variance_normalization", "rotary_embedding", "attention",
    "linear_attention", "causal_conv_with_state",
    "gemm", "einsum", "matmul_integer", "qlinear_matmul", "dynamic_quantize_linear",
    "DslError", "DTypeError", "InputError", "ResourceError", "ShapeError", "UnsupportedAttributeError",
    "UnsupportedError",
    *[t.py_name for t in _dtypes.ALL], "double",
]
