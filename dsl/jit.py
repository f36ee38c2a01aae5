"""``@dsl.jit``: trace once per input signature, plan fused kernels, run them; ``dsl.compare``."""
from __future__ import annotations

import threading
from functools import partial

import numpy as np

from . import trace as tracing
from .errors import DslError, InputError
from .codegen.compile import prepare_backend
from .ir import Graph, TensorType
from .ops import registry
from .passes.fuse import KernelStep, NodeStep, partition
from .runtime import KernelRunner, run_node
from .tensor import Tensor


class Executable:
    """A graph with concrete shapes, planned into steps, ready to run."""

    def __init__(self, graph: Graph, calls: dict, constants: dict):
        self.graph = graph
        self.constants = {k: _read_only(v) for k, v in constants.items()}
        self.steps = partition(graph, calls, constants)
        self.runners = [KernelRunner(s) if isinstance(s, KernelStep) else s for s in self.steps]
        self.input_names = [v.name for v in graph.inputs]
        self.output_names = [v.name for v in graph.outputs]
        self._calls = [runner.run if isinstance(runner, KernelRunner) else partial(run_node, runner)
                       for runner in self.runners]

    def run(self, feeds: dict) -> list:
        env = dict(self.constants)
        env.update(feeds)
        for step in self._calls:
            step(env)
        outputs = [env[name] for name in self.output_names]
        return [out.numpy() if type(out) is Tensor else out for out in outputs]

    def explain(self, source: bool = True) -> str:
        """Fusion groups, view steps and fallbacks; with ``source``, each kernel's generated
        numba source (as compiled for C-contiguous inputs)."""
        lines = []
        for index, step in enumerate(self.steps):
            if isinstance(step, NodeStep):
                kind = "view" if step.opdef.view is not None else "numpy"
                lines.append(f"step {index}: {kind:5s} {step.node.op_type} -> "
                             f"{', '.join('%' + v.name for v in step.node.outputs)}")
                continue
            group = step.group
            ops = [n.op_type for n in group.nodes] + [node.op_type for node, _, _ in step.row or []] + \
                [n.op_type for n in (group.epilogue.nodes if group.epilogue else [])]
            sinks = [node.outputs[0] for node, _, _ in step.row] if step.row else group.sinks
            if group.epilogue is not None:
                sinks = group.epilogue.sinks
            leaves = ", ".join(f"%{leaf.value.name}" + (f" via {len(leaf.path)} view steps" if leaf.path else "")
                               for leaf in group.leaves)
            lines.append(f"step {index}: kernel [{', '.join(ops)}] -> "
                         f"{', '.join(f'%{v.name}: {v.type}' for v in sinks)}; reads {leaves}")
            if source:
                text = self._runner(step).source_for_contiguous()
                text = text[text.index("@numba.njit(cache=True, nogil=True, error_model"):]
                lines += ["    " + line for line in text.splitlines()]
        return "\n".join(lines)

    def _runner(self, step):
        return next(r for r in self.runners if getattr(r, "group", None) is step.group)

    @property
    def kernel_count(self) -> int:
        return sum(isinstance(s, KernelStep) for s in self.steps)


def _read_only(value):
    """A read-only view of a constant, so no output aliasing it can change the program."""
    if isinstance(value, np.ndarray):
        value = value.view()
        value.flags.writeable = False
    return value


def native_args(args) -> tuple:
    """Arguments as kernels read them (as Program.run checks feeds): numpy scalars as 0-d arrays,
    non-native byte order converted once."""
    if all(type(a) is np.ndarray and a.dtype.isnative or type(a) is Tensor for a in args):
        return args  # the common case, checked cheaply
    args = tuple(np.asarray(a) if isinstance(a, np.generic) else a for a in args)
    return tuple(a.astype(a.dtype.newbyteorder("=")) if isinstance(a, np.ndarray) and a.dtype.kind not in "OUSV"
                 and not a.dtype.isnative else a for a in args)


def _arg_key(arg, index: int):
    if isinstance(arg, np.ndarray):
        return ("a", arg.dtype, arg.shape)
    if isinstance(arg, Tensor):
        return ("t", arg.dtype.onnx_name, arg.shape)
    raise InputError(f"jit: argument {index} is a {type(arg).__name__}; expected a numpy array or "
                     f"dsl.Tensor")


class JitFunction:
    """A traced-and-compiled Python tensor function (see ``dsl.jit``)."""

    def __init__(self, fn, opset: int | None = None):
        self.fn = fn
        self.opset = registry.LATEST_OPSET if opset is None else opset
        self.__name__ = getattr(fn, "__name__", "jit_fn")
        self.__doc__ = getattr(fn, "__doc__", None)
        self._cache: dict = {}
        self._lock = threading.Lock()
        prepare_backend()

    def __getstate__(self) -> dict:
        """Pickles as the Python function and opset (dask / multiprocessing ship jit functions);
        compiled state is per process and rebuilt on first use."""
        return {"fn": self.fn, "opset": self.opset}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["fn"], state["opset"])

    def _trace(self, types: list) -> tracing.Builder:
        builder = tracing.Builder(self.__name__, self.opset)
        graph = tracing.trace_into(builder, self.fn, types)
        assert graph is builder.graph
        return builder

    def executable(self, *args) -> Executable:
        """The compiled Executable for these arguments' signature (traced on first use)."""
        return self._executable(native_args(args))

    def _executable(self, args: tuple) -> Executable:
        try:
            key = tuple((a.dtype, a.shape) if type(a) is np.ndarray else ("t", a.dtype.onnx_name, a.shape)
                        for a in args)
        except AttributeError:
            key = tuple(_arg_key(a, i) for i, a in enumerate(args))
        found = self._cache.get(key)
        if found is None:
            with self._lock:
                found = self._cache.get(key)
                if found is None:
                    builder = self._trace([tracing.input_type(a, i) for i, a in enumerate(args)])
                    found = Executable(builder.graph, builder.calls, builder.constants)
                    self._cache[key] = found
        return found

    def __call__(self, *args):
        args = native_args(args)
        try:
            executable = self._executable(args)
        except InputError:
            if not any(type(a).__module__.startswith(("dask.", "dsl.dask")) for a in args):
                raise
            executable = None
        if executable is None:  # dask arrays in: a lazy blockwise program out
            from . import dask as dsl_dask
            return dsl_dask.apply(self, *args)
        outputs = executable.run(dict(zip(executable.input_names, args)))
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def lower(self, *args):
        """The traced Program; args may be arrays, Tensors or dsl.TensorType (symbolic dims allowed)."""
        from .program import Program
        return Program(self._trace([tracing.input_type(a, i) for i, a in enumerate(args)]).graph)

    def explain(self, *args) -> str:
        """Fusion groups, views and generated kernel sources for these arguments."""
        return self.executable(*args).explain()


def jit(fn=None, *, opset: int | None = None):
    """Compile a Python tensor function into fused numba kernels.

    Args:
        fn: a function of tensors using dsl functions and Python operators.
        opset: the ONNX opset whose op versions apply (default: the latest).

    Returns:
        A JitFunction: call it with numpy arrays / dsl.Tensors; ``.lower`` gives the Program,
        ``.explain`` the fusion plan.

    Example:
        >>> @dsl.jit
        ... def f(mask, scores):
        ...     m = dsl.unsqueeze(dsl.cast(mask, dsl.float32), [1, 2])
        ...     return scores + (1.0 - m) * -1e4
    """
    if fn is None:
        return lambda f: JitFunction(f, opset)
    return JitFunction(fn, opset)
