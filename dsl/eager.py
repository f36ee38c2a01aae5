"""Eager calls of single ops on numpy arrays and packed Tensors (``dsl.unsqueeze`` and siblings)."""
from __future__ import annotations

import numpy as np

from .errors import DslError, DTypeError, InputError, out_of_memory
from .ops import registry
from .tensor import Tensor
from .trace import Tracer, current_builder
from .values import as_array, int_vector, runtime_type


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _unless(value, default):
    """None when ``value`` is the keyword's default int (so that opsets without the attribute
    accept the call), else ``value`` unchanged for the schema to check."""
    return None if _is_int(value) and value == default else value


def _index_input(spec) -> bool:
    """An input of axes / shapes / indices (its own integer types, read by the rule): Python ints
    and lists become int64 arrays. Range's start / limit / delta take the data's type instead."""
    return spec.needs_value and spec.types is not None


def _bind(opdef, schema, positional, named):
    """Split named arguments into schema inputs and attributes for this version."""
    inputs = list(positional) + [None] * (len(schema.inputs) - len(positional))
    attrs = {}
    for name, value in named.items():
        index = schema.input_index(name)
        if index is not None:
            if value is not None:
                inputs[index] = int_vector(value, opdef.name, name) if _index_input(schema.inputs[index]) \
                    else as_array(value, opdef.name, name)
        elif schema.attr(name) is not None:
            # one int where a list is expected, as the axes input of later versions accepts
            attrs[name] = [value] if schema.attr(name).kind == "ints" and _is_int(value) else value
        elif value is not None:
            raise InputError(f"{opdef.name}: argument {name}={value!r} does not exist at opset version "
                             f"{schema.version}")
    while inputs and inputs[-1] is None and len(inputs) > len(positional):
        inputs.pop()
    return inputs, attrs


def _traced(builder, opdef, opset, positional: list, named: dict, count: int = 1):
    """Inside @dsl.jit: add the op to the traced graph instead of computing it."""
    if opset is not None and opset != builder.graph.opset:
        raise InputError(f"{opdef.name}: opset={opset} inside a function traced at opset "
                         f"{builder.graph.opset}; set the opset on dsl.jit instead")
    schema = opdef.schema(builder.graph.opset)
    inputs, attrs = [None] * len(schema.inputs), {}
    for index, value in enumerate(positional):
        inputs[index] = value
    for name, value in named.items():
        index = schema.input_index(name)
        if index is not None:
            inputs[index] = value
        elif schema.attr(name) is not None:
            attrs[name] = [value] if schema.attr(name).kind == "ints" and _is_int(value) else value
        elif value is not None:
            raise InputError(f"{opdef.name}: argument {name}={value!r} does not exist at opset version "
                             f"{schema.version}")
    while inputs and inputs[-1] is None:
        inputs.pop()
    lifted = []
    for spec, value in zip(schema.inputs, inputs):
        if value is None or isinstance(value, Tracer):
            lifted.append(value)
        elif _index_input(spec):
            lifted.append(builder.lift(int_vector(value, opdef.name, spec.name)))
        else:
            lifted.append(builder.lift(value, next((v for v in inputs if isinstance(v, Tracer)), None)))
    outputs = builder.add(opdef.name, lifted, attrs)
    if count != 1:
        return list(outputs[:count])
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def call(op_type: str, data, opset: int | None = None, *, outputs: int = 1, **named):
    """Run one op eagerly. numpy in -> numpy out (a view wherever numpy makes one, and never
    the input object itself); a packed or plain ``Tensor`` in -> ``Tensor`` out (sharing its
    buffer for view ops). ``outputs`` > 1: a list of the op's first ``outputs`` outputs."""
    opdef = registry.get(op_type)
    builder = current_builder([data, *named.values()])
    if builder is not None:
        return _traced(builder, opdef, opset, [data], named, outputs)
    opset = registry.LATEST_OPSET if opset is None else opset
    schema = opdef.schema(opset)
    is_tensor = isinstance(data, Tensor)
    first = data if is_tensor else as_array(data, op_type, "data")
    inputs, attrs = _bind(opdef, schema, [first], named)
    _, op_call, out_types = registry.bind(op_type, opset, [None if x is None else runtime_type(x) for x in inputs],
                                          inputs, attrs)
    try:
        if outputs != 1:
            return _run_all(opdef, op_call, inputs, is_tensor)[:outputs]
        return _run(opdef, op_call, data, inputs, is_tensor)
    except MemoryError:
        raise out_of_memory(op_type, out_types) from None


def _run(opdef, op_call, data, inputs: list, is_tensor: bool):
    if is_tensor and opdef.view is not None:
        view = opdef.view(op_call, data.view)
        if view is not None:
            return data.with_view(view)
    if op_call.folded is not None:
        out = op_call.folded[0]
    else:
        direct = opdef.tensor_reference(op_call, inputs) if is_tensor and opdef.tensor_reference else None
        if direct is not None:
            return direct[0]
        arrays = [x.numpy() if isinstance(x, Tensor) else x for x in inputs]
        out = opdef.reference(op_call, arrays)[0]
    if isinstance(out, np.ndarray) and any(out is x for x in inputs):
        out = out.view()  # a new array object: reshaping the result must not reshape the input
    return Tensor.from_numpy(out) if is_tensor and isinstance(out, np.ndarray) else out


def _run_all(opdef, op_call, inputs: list, is_tensor: bool) -> list:
    """Every output of a multi-output op by its numpy reference, each a new array object."""
    arrays = [x.numpy() if isinstance(x, Tensor) else x for x in inputs]
    results = op_call.folded if op_call.folded is not None else opdef.reference(op_call, arrays)
    results = [out.view() if isinstance(out, np.ndarray) and any(out is x for x in inputs) else out
               for out in results]
    return [Tensor.from_numpy(out) if is_tensor and isinstance(out, np.ndarray) else out for out in results]


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
    return call("Reshape", data, opset, shape=shape, allowzero=_unless(allowzero, 0))


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
    return call("Shape", data, opset, start=_unless(start, 0), end=end)


def identity(data, *, opset: int | None = None):
    """ONNX Identity: the input itself (no copy)."""
    return call("Identity", data, opset)


def _dtype_code(value, op: str) -> int:
    """The ONNX code of an element-type argument; DTypeError naming ``op`` otherwise."""
    from . import dtypes as _dtypes
    try:
        return _dtypes.dtype(value).onnx_code
    except DslError:
        raise DTypeError(f"{op}: output_dtype {value!r} is not an ONNX element type") from None


def cast(x, to, *, saturate: bool = True, round_mode: str = "up", opset: int | None = None):
    """ONNX Cast: convert elements to ``to`` (a DType, ONNX name, numpy dtype or ONNX code).

    ``saturate`` (opset >= 19) applies to the float8 types and float8e8m0; ``round_mode``
    (opset >= 24: "up", "down", "nearest") to float8e8m0. Conversion rules: dsl/convert.py.

    Example:
        >>> cast(np.array([500.0], np.float32), "float8e4m3fn").astype(np.float32)
        array([448.], dtype=float32)
    """
    # `to` goes to the Cast rule as given: it resolves the type and names the op on error
    if not (isinstance(saturate, (bool, np.bool_)) or _is_int(saturate) and saturate in (0, 1)):
        raise InputError(f"Cast: saturate={saturate!r}; expected a bool (or 0 / 1)")
    return call("Cast", x, opset, to=to, saturate=None if saturate else 0,
                round_mode=None if round_mode == "up" else round_mode)


def dequantize_linear(x, scale, zero_point=None, *, axis: int = 1, block_size: int = 0,
                      output_dtype=None, opset: int | None = None):
    """ONNX DequantizeLinear: ``(x - zero_point) * scale``, per tensor, per axis or blocked.

    Example:
        >>> dequantize_linear(np.array([1, 2], np.int8), np.float32(0.5)).tolist()
        [0.5, 1.0]
    """
    out = None if output_dtype is None else _dtype_code(output_dtype, "DequantizeLinear")
    return call("DequantizeLinear", x, opset, x_scale=scale, x_zero_point=zero_point,
                axis=_unless(axis, 1), block_size=_unless(block_size, 0), output_dtype=out)


def quantize_linear(x, scale, zero_point=None, *, axis: int = 1, block_size: int = 0,
                    saturate: bool = True, output_dtype=None, opset: int | None = None):
    """ONNX QuantizeLinear: ``saturate(round_half_even(x / scale) + zero_point)``.

    Example:
        >>> quantize_linear(np.array([1.0, 300.0], np.float32), np.float32(1.0)).tolist()
        [1, 255]
    """
    out = None if output_dtype is None else _dtype_code(output_dtype, "QuantizeLinear")
    return call("QuantizeLinear", x, opset, y_scale=scale, y_zero_point=zero_point,
                axis=_unless(axis, 1), block_size=_unless(block_size, 0),
                saturate=None if saturate is True or saturate == 1 else int(bool(saturate)),
                output_dtype=out)
