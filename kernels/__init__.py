"""numba kernels: plain functions over raw uint views. This package never imports dsl.

Callers validate shapes, strides and lengths before entering a kernel: a kernel
trusts its inputs (numba does not bounds-check by default).

Importing the package lets LLVM use 512-bit vectors on an AVX-512 host (see
``_prefer_512_bit_vectors``) unless ``DSL_VECTOR_BITS=256`` or NUMBA_CPU_NAME /
NUMBA_CPU_FEATURES are set.
"""
import os

from llvmlite import binding as _llvm
from numba.core import config as _numba_config


def _prefer_512_bit_vectors() -> None:
    """LLVM's tuning for Intel AVX-512 cores (skylake-avx512 to rocketlake and later) includes
    'prefer-256-bit': its loop vectorizer then emits 256-bit vectors, half of what the core's
    512-bit units take. The fused loops here are the code that needs the width: on this
    project's 2-core machine (reported as rocketlake) tanh over 4M float32 took 2.55 ms with
    256-bit and 2.0 with 512-bit vectors, erf 3.08 / 2.32, sigmoid 3.06 / 2.2, single-threaded.
    numba reads the target from its config when it first compiles, so this takes effect only
    if nothing was compiled before ``import kernels`` (then numba keeps its first choice), and
    it applies to every numba function of the process. Its cache is keyed by the target, so
    machine code compiled for one setting is never loaded under the other."""
    if os.environ.get("DSL_VECTOR_BITS", "").strip() == "256":
        return
    if _numba_config.CPU_NAME not in (None, "host") or _numba_config.CPU_FEATURES is not None:
        return  # (an explicit, e.g. cache-portable, target)
    features = _llvm.get_host_cpu_features()
    if not features.get("avx512f", False):
        return
    _numba_config.CPU_NAME = _llvm.get_host_cpu_name()
    _numba_config.CPU_FEATURES = features.flatten() + ",-prefer-256-bit"


_prefer_512_bit_vectors()
