"""Helpers of the kernel-IR tests: a loop-nest kernel compiled by the numba renderer and run by the
interpreter (dsl/kir/interp.py) on the same inputs."""
import numpy as np

from dsl import kir
from dsl.codegen import compile as codegen_compile
from dsl.codegen.loops import kernel_source
from dsl.kir import interp
from dsl.kir import loops as L


def arguments(kernel, params: dict, buffers: dict) -> list:
    """The kernel's arguments in its signature's order (uint64 params, int64 vectors, raw buffers)."""
    out = []
    for item in kernel.signature():
        if isinstance(item, L.Buffer):
            out.append(buffers[item.name])
        elif isinstance(item, L.ParamVector):
            out.append(np.array([params[n] for n in item.names], np.int64))
        else:
            out.append(np.uint64(params[item] % 2 ** 64))
    return out


def aligned(size: int, dtype) -> np.ndarray:
    """Zeros starting on a 64-byte boundary (streaming stores need whole aligned lines)."""
    itemsize = np.dtype(dtype).itemsize
    block = np.zeros(size * itemsize + 64, np.uint8)
    start = -block.ctypes.data % 64
    return block[start:start + size * itemsize].view(dtype)


def raw(array: np.ndarray, elem) -> np.ndarray:
    return array.view(kir.types.storage(elem)) if not elem.packed else array


def run(kernel, inputs: dict, out_shapes: dict, params: dict, spans=None):
    """(compiled outputs, interpreted outputs): ``inputs`` maps a buffer name to (raw flat array
    for the compiled kernel, element array for the interpreter); ``spans`` (start, stop) pairs
    run one after another as threads would."""
    L.verify(kernel)
    compiled = codegen_compile.compile_kernel(kernel_source(kernel))
    outs = {b.name: b for b in kernel.buffers if b.role == "out"}
    got = {name: aligned(size, kir.types.storage(outs[name].elem)) for name, size in out_shapes.items()}
    want = {name: np.zeros(size, outs[name].elem.np_dtype) for name, size in out_shapes.items()}
    for start, stop in spans or [(params["start"], params["stop"])]:
        values = {**params, "start": start, "stop": stop}
        compiled(*arguments(kernel, values, {**{k: v[0] for k, v in inputs.items()}, **got}))
        interp.run_kernel(kernel, {**{k: v[1] for k, v in inputs.items()}, **want}, values)
    return {k: v.view(outs[k].elem.np_dtype) for k, v in got.items()}, want
