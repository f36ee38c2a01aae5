"""Eager calls of single ops on numpy arrays and packed Tensors (``dsl.unsqueeze`` and siblings)."""
from __future__ import annotations

import numpy as np

from .errors import InputError
from .ops import registry
from .tensor import Tensor
from .values import as_array, int_vector, runtime_type


def _bind(opdef, schema, positional, named):
    """Split named arguments into schema inputs and attributes for this version."""
    inputs = list(positional) + [None] * (len(schema.inputs) - len(positional))
    attrs = {}
    for name, value in named.items():
        index = schema.input_index(name)
        if index is not None:
            if value is not None:
                inputs[index] = int_vector(value, opdef.name, name) if schema.inputs[index].needs_value \
                    else as_array(value, opdef.name, name)
        elif schema.attr(name) is not None:
            attrs[name] = value
        elif value is not None:
            raise InputError(f"{opdef.name}: argument {name}={value!r} does not exist at opset version "
                             f"{schema.version}")
    while inputs and inputs[-1] is None and len(inputs) > len(positional):
        inputs.pop()
    return inputs, attrs


def call(op_type: str, data, opset: int | None = None, **named):
    """Run one op eagerly. numpy in -> numpy out (a view wherever numpy makes one);
    a packed or plain ``Tensor`` in -> ``Tensor`` out sharing its buffer for view ops."""
    opdef = registry.get(op_type)
    schema = opdef.schema(registry.LATEST_OPSET if opset is None else opset)
    is_tensor = isinstance(data, Tensor)
    first = data if is_tensor else as_array(data, op_type, "data")
    inputs, attrs = _bind(opdef, schema, [first], named)
    op_call = opdef.make_call(schema, "", attrs, [None if x is None else runtime_type(x) for x in inputs],
                              inputs)
    opdef.infer(schema, op_call)
    if is_tensor and opdef.view is not None:
        view = opdef.view(op_call, data.view)
        if view is not None:
            return data.with_view(view)
    if op_call.folded is not None:
        out = op_call.folded[0]
    else:
        arrays = [x.numpy() if isinstance(x, Tensor) else x for x in inputs]
        out = opdef.reference(op_call, arrays)[0]
    return Tensor.from_numpy(out) if is_tensor and isinstance(out, np.ndarray) and \
        opdef.view is not None else out


def unsqueeze(data, axes, *, opset: int | None = None):
    """ONNX Unsqueeze: insert size-1 dims at ``axes`` (positions in the output).

    Args:
        data: numpy array (any ONNX element type, strings and complex included) or Tensor.
        axes: ints in [-r, r-1], r = data.ndim + len(axes); any order, no duplicates after
            normalization. A list, an int, or a 1-D int64 array (opset >= 13).
        opset: ONNX opset (1-28); None = latest. Opsets 1-10 reject negative axes; each
            opset accepts only its version's element types (float8 needs 21, int2 needs 25).

    Returns:
        numpy in -> a numpy VIEW of ``data``; Tensor in -> a Tensor on the same buffer.

    Raises:
        DslError: bad axes (out of range, duplicate, negative at opset < 11, int32 or 2-D
            axes tensor) or an element type the opset does not accept.

    Example:
        >>> unsqueeze(np.zeros((2, 3)), [0, -1]).shape
        (1, 2, 3, 1)
    """
    return call("Unsqueeze", data, opset, axes=axes)


def squeeze(data, axes=None, *, opset: int | None = None):
    """ONNX Squeeze: remove size-1 dims at ``axes`` (all size-1 dims when axes is None).

    Raises DslError for out-of-range or duplicate axes and for axes whose dim is not 1.

    Example:
        >>> squeeze(np.zeros((1, 3, 1)), [0]).shape
        (3, 1)
    """
    return call("Squeeze", data, opset, axes=axes)


def reshape(data, shape, *, allowzero: int = 0, opset: int | None = None):
    """ONNX Reshape: 0 copies the input dim (a real 0 with allowzero=1), -1 is inferred.

    Returns a view whenever numpy's no-copy rule allows it, else a C-order copy.

    Example:
        >>> reshape(np.zeros((2, 3, 4)), [0, -1]).shape
        (2, 12)
    """
    return call("Reshape", data, opset, shape=shape, allowzero=allowzero or None)


def flatten(data, axis: int = 1, *, opset: int | None = None):
    """ONNX Flatten: a 2-D result, dims before ``axis`` and from ``axis`` on multiplied.

    Example:
        >>> flatten(np.zeros((2, 3, 4)), 2).shape
        (6, 4)
    """
    return call("Flatten", data, opset, axis=axis)


def transpose(data, perm=None, *, opset: int | None = None):
    """ONNX Transpose: permute dims (reverse them when perm is None); always a view.

    Example:
        >>> transpose(np.zeros((2, 3, 4)), [2, 0, 1]).shape
        (4, 2, 3)
    """
    return call("Transpose", data, opset, perm=perm)


def expand(data, shape, *, opset: int | None = None):
    """ONNX Expand: broadcast to ``shape`` by numpy's rules; a read-only stride-0 view.

    Example:
        >>> expand(np.zeros((3, 1)), [2, 1, 4]).shape
        (2, 3, 4)
    """
    return call("Expand", data, opset, shape=shape)


def shape(data, *, start: int = 0, end: int | None = None, opset: int | None = None):
    """ONNX Shape: the dims [start:end) as a 1-D int64 array (start/end need opset >= 15).

    Example:
        >>> shape(np.zeros((2, 3, 4)), start=1).tolist()
        [3, 4]
    """
    return call("Shape", data, opset, start=start or None, end=end)


def identity(data, *, opset: int | None = None):
    """ONNX Identity: the input itself (no copy)."""
    return call("Identity", data, opset)
