"""``@dsl.jit``: trace once per input signature, plan fused kernels, run them; ``dsl.compare``."""
from __future__ import annotations

import importlib
import inspect
import os
import threading
import weakref

import numpy as np

from . import trace as tracing
from .compiler import Executable, check_math, prepare_backend
from .errors import DslError, InputError
from .ir import TensorType
from .lru import LRU
from .ops import registry
from .tensor import Tensor
from .values import plain_array

_LIVE = weakref.WeakSet()  # every JitFunction, so a forked child can renew their locks


def native_args(args) -> tuple:
    """Arguments as kernels read them (as Program.run checks feeds): numpy scalars as 0-d arrays,
    ndarray subclasses as plain arrays (masked arrays refused), non-native byte order converted
    once."""
    for a in args:  # the common case, checked cheaply (a loop: no generator to build)
        if not (type(a) is np.ndarray and a.dtype.isnative or type(a) is Tensor):
            return tuple(_native_arg(a, i) for i, a in enumerate(args))
    return args


def _native_arg(arg, index):
    if isinstance(arg, TensorType):
        raise InputError(f"jit: argument {index} is a dsl.TensorType; a jit function runs on arrays (f(x)), "
                         f"types describe inputs to f.lower(...)")
    if isinstance(arg, np.generic):
        arg = np.asarray(arg)
    elif isinstance(arg, np.ndarray) and type(arg) is not np.ndarray:
        arg = plain_array(arg, "jit", f"argument {index}")
    if isinstance(arg, np.ndarray) and arg.dtype.kind not in "OUSV" and not arg.dtype.isnative:
        arg = arg.astype(arg.dtype.newbyteorder("="))
    return arg


def _arg_key(arg, index):
    if isinstance(arg, np.ndarray):
        return ("a", arg.dtype, arg.shape)
    if isinstance(arg, Tensor):
        return ("t", arg.dtype.onnx_name, arg.shape)
    raise InputError(f"jit: argument {index} is a {type(arg).__name__}; expected a numpy array or "
                     f"dsl.Tensor")


_TRACING = threading.local()  # .stack: the JitFunctions this thread is tracing, outermost first


def _tracing_stack() -> list:
    stack = getattr(_TRACING, "stack", None)
    if stack is None:
        stack = _TRACING.stack = []
    return stack


class JitFunction:
    """A traced-and-compiled Python tensor function (see ``dsl.jit``)."""

    def __init__(self, fn, opset: int | None = None, math: str = "fast"):
        if isinstance(fn, JitFunction):
            fn = fn.fn
        self.math = check_math(math, "dsl.jit")
        if not callable(fn):
            raise InputError(f"dsl.jit: {fn!r:.60} is a {type(fn).__name__}; expected a function of tensors "
                             f"(use @dsl.jit or dsl.jit(fn))")
        self.fn = fn
        self.opset = registry.LATEST_OPSET if opset is None else opset
        self.__name__ = getattr(fn, "__name__", "jit_fn")
        self.__doc__ = getattr(fn, "__doc__", None)
        self.params = Parameters(fn, self.__name__)
        self._cache = LRU("signatures")
        self._lock = threading.Lock()  # guards _locks
        self._locks: dict = {}  # signature -> the lock of its trace in progress
        _LIVE.add(self)
        prepare_backend()

    def __getstate__(self) -> dict:
        """Pickles as the Python function and opset (dask / multiprocessing ship jit functions);
        compiled state is per process and rebuilt on first use."""
        return {"fn": self.fn, "opset": self.opset, "math": self.math}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["fn"], state["opset"], state.get("math", "fast"))

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        return _MethodRefusal(self, type(instance).__name__)

    def _trace(self, types: list, layout: tuple | None = None) -> tracing.Builder:
        builder = tracing.Builder(self.__name__, self.opset)
        stack = _tracing_stack()
        stack.append(self)
        try:
            graph = tracing.trace_into(builder, self.fn, types, *self.params.caller(layout, len(types)))
        finally:
            stack.pop()
        assert graph is builder.graph
        return builder

    def _refuse_recursion(self) -> None:
        if self in _tracing_stack():
            raise DslError(f"jit: {self.__name__} calls itself while it is being traced (recursion); a "
                           f"traced function runs once per input signature and cannot recurse: write the "
                           f"repetition as a Python loop inside it")

    def executable(self, *args, **kwargs) -> Executable:
        """The compiled Executable for these arguments' signature (traced on first use)."""
        names, values = self.params.bind(args, kwargs)
        return self._executable(native_args(values), names)

    def _executable(self, args: tuple, names: tuple | None = None) -> Executable:
        try:
            key = tuple((a.dtype, a.shape) if type(a) is np.ndarray else ("t", a.dtype.onnx_name, a.shape)
                        for a in args)
        except AttributeError:
            key = tuple(_arg_key(a, i) for i, a in enumerate(args))
        if names is not None:
            key = (names,) + key
        found = self._cache.get(key)
        if found is None:
            self._refuse_recursion()
            with self._lock:  # one lock per signature: a trace that starts another (another thread
                lock = self._locks.setdefault(key, threading.Lock())  # calling f) does not wait on itself
            with lock:
                found = self._cache.get(key)
                if found is None:
                    builder = self._trace([tracing.input_type(a, i) for i, a in enumerate(args)], names)
                    found = Executable(builder.graph, builder.calls, builder.constants, self.math)
                    self._cache[key] = found
            with self._lock:
                self._locks.pop(key, None)
        return found

    def __call__(self, *args, **kwargs):
        if not kwargs and len(args) == self.params.count and self.params.simple:
            names, values = None, native_args(args)
        else:
            names, values = self.params.bind(args, kwargs)
            values = native_args(values)
        # (arrays and Tensors come back as they are: then none is a Tracer)
        if values is not args and any(type(a) is tracing.Tracer for a in values):
            return self._inline(args, kwargs)  # called inside another traced function
        try:
            executable = self._executable(values, names)
        except InputError:
            handler = _argument_handler(values)
            if handler is None:
                raise
            return handler(self, *values)  # e.g. dask arrays in: a lazy blockwise program out
        outputs = executable.run(dict(zip(executable.input_names, values)))
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _inline(self, args: tuple, kwargs: dict):
        """A jit function called by another one while it traces: its ops join the caller's graph."""
        self._refuse_recursion()
        stack = _tracing_stack()
        stack.append(self)
        try:
            return self.fn(*args, **kwargs)
        finally:
            stack.pop()

    def lower(self, *args, **kwargs):
        """The traced Program; args may be arrays, Tensors, numpy scalars or dsl.TensorType
        (symbolic dims allowed)."""
        from .program import Program
        names, values = self.params.bind(args, kwargs)
        values = [v if isinstance(v, TensorType) else _native_arg(v, i) for i, v in enumerate(values)]
        self._refuse_recursion()
        return Program(self._trace([tracing.input_type(a, i) for i, a in enumerate(values)], names).graph)

    def to_onnx(self, *args, **kwargs):
        """Export the program traced for these arguments as ONNX.

        Args:
            args, kwargs: example arrays, Tensors or dsl.TensorType (symbolic dims allowed), as
                for a call.

        Returns:
            An onnx.ModelProto importing this function's opset; onnx.checker accepts it.

        Raises:
            DslError: as ``lower``; UnsupportedError without the optional onnx package.

        Example:
            >>> model = dsl.jit(lambda x: x[:, ::-1], opset=18).to_onnx(dsl.TensorType(dsl.float32, ("n", 4)))
        """
        return self.lower(*args, **kwargs).to_onnx()

    def explain(self, *args, **kwargs) -> str:
        """Fusion groups, views and generated kernel sources for these arguments."""
        return self.executable(*args, **kwargs).explain()


# Front ends for other array types (dsl.dask) register (module prefixes, handler(jit_fn, *args));
# a call whose arguments come from such a module goes to the handler, loaded on first use.
ARGUMENT_HANDLERS: dict[tuple, object] = {}
_PLUGINS = {("dask.", "dsl.dask"): "dsl.dask"}


def _argument_handler(values: tuple):
    for prefixes, plugin in _PLUGINS.items():
        if any(type(a).__module__.startswith(prefixes) for a in values):
            if prefixes not in ARGUMENT_HANDLERS:
                importlib.import_module(plugin)  # registers itself in ARGUMENT_HANDLERS
            return ARGUMENT_HANDLERS.get(prefixes)
    return None


class _MethodRefusal:
    """What ``obj.f`` gives for a jit function ``f`` defined in a class: calling it explains."""

    def __init__(self, function: JitFunction, owner: str):
        self.function, self.owner = function, owner

    def __call__(self, *args, **kwargs):
        raise InputError(f"jit: {self.function.__name__} is used as a method of {self.owner}; @dsl.jit compiles "
                         f"functions of tensors: decorate a module-level function (or a @staticmethod) and "
                         f"pass what the method needs as arguments")


class Parameters:
    """A jit function's Python signature: binds positional and keyword arguments (keyword-only
    ones too) to the graph inputs, one per parameter that received a tensor (the values of a
    ``*args`` parameter are arg<i>, those of ``**kwargs`` their keywords); parameters left
    out keep their Python defaults inside the function."""

    def __init__(self, fn, name: str):
        try:
            self.signature = inspect.signature(fn)
        except (TypeError, ValueError):  # a builtin or extension callable: positional arguments
            self.signature = None
        params = list(self.signature.parameters.values()) if self.signature else []
        self.name = name
        self.positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self.count = len(self.positional)
        self.simple = self.signature is not None and len(params) == self.count and \
            all(p.default is p.empty for p in params)

    def bind(self, args: tuple, kwargs: dict) -> tuple:
        """(layout, argument values in order). The layout is None for the plain positional
        form, else a tuple of (parameter, kind, names of the graph inputs it received)."""
        if self.signature is None:
            if kwargs:
                raise InputError(f"jit: {self.name} takes positional arguments only; got keywords {sorted(kwargs)}")
            return None, tuple(args)
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise InputError(f"jit: {self.name}{self.signature}: {exc}") from None
        if self.simple and not kwargs:
            return None, tuple(args)
        layout, values = [], []
        for param in self.signature.parameters.values():
            if param.name not in bound.arguments:
                continue  # its default applies inside the function
            value = bound.arguments[param.name]
            if param.kind is param.VAR_POSITIONAL:
                names = tuple(f"arg{len(values) + k}" for k in range(len(value)))
                values += list(value)
            elif param.kind is param.VAR_KEYWORD:
                names = tuple(value)
                values += list(value.values())
            else:
                names = (param.name,)
                values.append(value)
            layout.append((param.name, param.kind, names))
        return tuple(layout), tuple(values)

    def caller(self, layout: tuple | None, count: int) -> tuple:
        """(graph input names, call(fn, tracers)) for a trace of ``count`` inputs."""
        if layout is None:
            names = tuple(self.positional[:count]) + tuple(f"arg{i}" for i in range(self.count, count))
            return names, lambda fn, tracers: fn(*tracers)

        def call(fn, tracers):
            arguments, position = {}, 0
            for name, kind, names in layout:
                taken = tracers[position:position + len(names)]
                position += len(names)
                if kind is inspect.Parameter.VAR_POSITIONAL:
                    arguments[name] = tuple(taken)
                elif kind is inspect.Parameter.VAR_KEYWORD:
                    arguments[name] = dict(zip(names, taken))
                else:
                    arguments[name] = taken[0]
            bound = inspect.BoundArguments(self.signature, arguments)
            return fn(*bound.args, **bound.kwargs)
        return tuple(n for _, _, names in layout for n in names), call


def jit(fn=None, *, opset: int | None = None, math: str = "fast"):
    """Compile a Python tensor function into fused numba kernels.

    Args:
        fn: a function of tensors using dsl functions and Python operators.
        opset: the ONNX opset whose op versions apply (default: the latest).
        math: "fast" (default): float32 exp, log, tanh, sigmoid, erf ... and softmax rows use
            kernels/vmath.py's vectorized functions, within the README's ulp table, and small
            constant powers become multiplications; "exact": libm calls and float64 softmax
            rows, bit-identical with the eager numpy engine.

    Returns:
        A JitFunction: call it with numpy arrays / dsl.Tensors; ``.lower`` gives the Program,
        ``.explain`` the fusion plan.

    Example:
        >>> @dsl.jit
        ... def f(mask, scores):
        ...     m = dsl.unsqueeze(dsl.cast(mask, dsl.float32), [1, 2])
        ...     return scores + (1.0 - m) * -1e4
    """
    check_math(math, "dsl.jit")
    if fn is None:
        return lambda f: JitFunction(f, opset, math)
    return JitFunction(fn, opset, math)


def _renew_locks_in_child() -> None:
    """A lock another thread held when the process forked stays held in the child forever."""
    for function in list(_LIVE):
        function._lock = threading.Lock()
        function._locks = {}


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_locks_in_child)
