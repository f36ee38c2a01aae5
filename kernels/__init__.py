"""numba kernels: plain functions over raw uint views. This package never imports dsl.

Callers validate shapes, strides and lengths before entering a kernel: a kernel
trusts its inputs (numba does not bounds-check by default).
"""
