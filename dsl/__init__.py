"""dsl: a tensor DSL with exact ONNX operator semantics, an eager numpy engine and numba kernels.

Public API (pinned in DESIGN.md): element types (``dsl.float32``, ``dsl.int4``, ...,
``dsl.dtype``), ``dsl.Tensor``, the eager shape ops (``dsl.unsqueeze`` ...), ONNX import
(``dsl.from_onnx``) and the IR types (``dsl.TensorType``, ``dsl.Program``).
"""
from . import dtypes as _dtypes
from .dtypes import DType, dtype
from .eager import expand, flatten, identity, reshape, shape, squeeze, transpose, unsqueeze
from .errors import DslError, DTypeError, InputError, ShapeError, UnsupportedError
from .ir import Graph, Node, OptionalType, SequenceType, TensorType, Value
from .onnx_io import from_onnx
from .ops import LATEST_OPSET
from .program import Program
from .tensor import Tensor

for _t in _dtypes.ALL:
    globals()[_t.py_name] = _t
double = _dtypes.dtype("double")
del _t

__version__ = "0.1.0"

__all__ = [
    "DType", "dtype", "Tensor", "TensorType", "SequenceType", "OptionalType", "Graph", "Node", "Value",
    "Program", "from_onnx", "LATEST_OPSET",
    "unsqueeze", "squeeze", "reshape", "flatten", "transpose", "expand", "shape", "identity",
    "DslError", "DTypeError", "InputError", "ShapeError", "UnsupportedError",
    *[t.py_name for t in _dtypes.ALL], "double",
]
