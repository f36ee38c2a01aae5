"""numba source text of a fused group for one layout variant (rank, per-leaf storage, inner stride):
the kernel dsl/kir/variants.py schedules (elementwise, or a last-axis row kernel: reductions,
softmax, epilogues) rendered by loops.py.

Kernels take ``(start, stop, shape, <leaf buffers, offsets, strides>, <outputs>)`` and cover
rows start..stop of the outermost dim, so the runtime can split work across threads (the
kernels release the GIL). Output buffers are fresh, flat and C-contiguous.
"""
from __future__ import annotations

from ..kir import variants
from ..kir.group import Group
from ..kir.variants import INNER_BROADCAST, INNER_STRIDED, INNER_UNIT  # noqa: F401 (what leaf_kinds hold)
from . import loops


def kernel_source(group: Group, rank: int, leaf_kinds: list[tuple], stream: tuple = (), math: str = "fast",
                  tile: tuple | int = 0, guards: tuple = ()) -> str:
    """Elementwise kernel for ``group`` at a coalesced ``rank`` (variants.group_kernel) in float
    math mode ``math`` ("fast" or "exact", see fused.py)."""
    return loops.kernel_source(variants.group_kernel(group, rank, leaf_kinds, stream, tile, guards), math)


def row_kernel_source(group: Group, kinds, rank: int, leaf_kinds, out_dtypes, stream: tuple = (),
                      math: str = "fast") -> str:
    """Row kernel for ``group`` (reductions ``kinds`` or one softmax along its last dim,
    variants.row_group_kernel) at a coalesced ``rank``."""
    return loops.kernel_source(variants.row_group_kernel(group, kinds, rank, leaf_kinds, out_dtypes, stream, math), math)
