"""The compiler layer: a typed graph -> passes (partition into fused kernel groups) -> kernel
plans -> an Executable the runtime steps through. trace/jit, Program, ONNX import and dsl.dask
all reach the backend through this module only."""
from __future__ import annotations

from functools import partial

import numpy as np

from .codegen.compile import prepare_backend
from .errors import InputError, out_of_memory, where
from .ir import Graph, TensorType
from .passes.expand import expand
from .passes.fuse import KernelStep, NodeStep, ReduceStep, StagedStep, partition
from .passes.replace import replace
from .runtime import KernelRunner, run_node
from .kir.scan_schedule import KINDS as SCAN_KINDS
from .ops.control_flow import Body
from .ops.lowering import QuantizedMatMul
from .ops.registry import INTERNAL
from .runtime_qmatmul import QuantMatMulRunner
from .runtime_reduce import ReduceRunner, StagedRunner
from .runtime_scan import ScanRunner
from .runtime_topk import TopKRunner
from .tensor import Tensor

__all__ = ["Executable", "MATH_MODES", "check_math", "prepare_backend"]


MATH_MODES = ("fast", "exact")


def check_math(math: str, label: str) -> str:
    """``math`` if it is a float math mode ("fast": kernels/vmath.py within the README's ulp
    bounds; "exact": libm calls), else InputError naming ``label``."""
    if math not in MATH_MODES:
        raise InputError(f"{label}: math={math!r}; expected one of {list(MATH_MODES)}")
    return math


class Executable:
    """A graph with concrete shapes, planned into steps, ready to run."""

    def __init__(self, graph: Graph, calls: dict, constants: dict, math: str = "fast"):
        graph, calls, constants = expand(graph, calls, constants, math)  # composites -> their primitive ops
        graph, calls = replace(graph, calls, constants)  # OpDef rewrites: matmuls of quantized weights
        self.graph = graph
        self.math = math
        self.constants = {k: _read_only(v) for k, v in constants.items()}
        self.steps = partition(graph, calls, constants)
        self.runners = [_runner(s, math, self.constants) for s in self.steps]
        self.input_names = [v.name for v in graph.inputs]
        self.output_names = [v.name for v in graph.outputs]
        self._calls = [partial(run_node, runner) if isinstance(runner, NodeStep) else runner.run
                       for runner in self.runners]

    def run(self, feeds: dict) -> list:
        env = dict(self.constants)
        env.update(feeds)
        for index, step in enumerate(self._calls):
            try:
                step(env)
            except MemoryError:
                raise self._out_of_memory(index) from None
        outputs = [env[name] for name in self.output_names]
        return [out.numpy() if type(out) is Tensor else out for out in outputs]

    def explain(self, source: bool = True) -> str:
        """Fusion groups, view steps and fallbacks; with ``source``, each kernel's generated
        numba source (as compiled for C-contiguous inputs)."""
        lines = []
        for index, step in enumerate(self.steps):
            if isinstance(step, NodeStep):  # (body: If / Loop / Scan, its bodies programs of their own)
                kind = "view" if step.opdef.view is not None else \
                    "body" if any(isinstance(v, Body) for v in step.node.attrs.values()) else \
                    self.runners[index].kind if isinstance(self.runners[index], QuantMatMulRunner) else \
                    "kernel" if step.opdef.domain == INTERNAL else "numpy"  # (an internal op: a kernels/ loop)
                lines.append(f"step {index}: {kind:5s} {step.node.op_type} -> "
                             f"{', '.join('%' + v.name for v in step.node.outputs)}")
                continue
            group = step.group
            ops = [n.op_type for n in group.nodes] + [node.op_type for node, _, _ in step.row or []] + \
                [f"{stage.node.op_type} (stage {k})" for k, stage in enumerate(group.stages)] + \
                [n.op_type for n in (group.epilogue.nodes if group.epilogue else [])]
            sinks = [node.outputs[0] for node, _, _ in step.row] if step.row else group.sinks
            if group.epilogue is not None:
                sinks = group.epilogue.sinks
            leaves = ", ".join(_leaf_text(leaf) for leaf in group.leaves)
            lines.append(f"step {index}: kernel [{', '.join(ops)}] -> "
                         f"{', '.join(f'%{v.name}: {v.type}' for v in sinks)}; reads {leaves}")
            if source:
                text = self._runner(step).source_for_contiguous()
                text = text[text.index("@numba.njit(cache=True, nogil=True, error_model"):]
                lines += ["    " + line for line in text.splitlines()]
        return "\n".join(lines)

    def _out_of_memory(self, index: int):
        step = self.steps[index]
        if isinstance(step, NodeStep):
            return out_of_memory(where(step.node.op_type, step.node.name), [v.type for v in step.node.outputs])
        runner = self.runners[index]
        return out_of_memory(f"jit kernel {index} of {self.graph.name}",
                             [TensorType(dt, shape) for _, dt, shape in runner.outputs])

    def _runner(self, step):
        return next(r for r in self.runners if getattr(r, "group", None) is step.group)

    @property
    def kernel_count(self) -> int:
        return sum(isinstance(s, KernelStep) for s in self.steps)


def _runner(step, math: str, constants: dict):
    """The runtime object of a planned step (a NodeStep runs as it is, unless its op reads
    quantized weights: QuantizedMatMul)."""
    if isinstance(step, ReduceStep):
        kind = step.row[0][2]
        return (ScanRunner if kind in SCAN_KINDS else TopKRunner if kind == "topk" else ReduceRunner)(step, math)
    if isinstance(step, StagedStep):
        return StagedRunner(step, math)
    if isinstance(step, KernelStep):
        return KernelRunner(step, math)
    if isinstance(step.opdef.kernel, QuantizedMatMul):
        return QuantMatMulRunner(step, constants)
    return step


def _read_only(value):
    """A read-only view of a constant, so no output aliasing it can change the program."""
    if isinstance(value, np.ndarray):
        value = value.view()
        value.flags.writeable = False
    return value


def _leaf_text(leaf) -> str:
    """How explain() names a kernel input: its value, its view steps, gathered or not."""
    views = len(leaf.path) - bool(leaf.gathers)
    return f"%{leaf.value.name}" + (" at loaded indices" if leaf.gathers else "") + \
        (f" via {views} view steps" if views else "")
