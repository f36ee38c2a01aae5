"""A fused group's kernel for one layout variant (coalesced rank, per-input storage and inner
stride, blocks): the elementwise schedule (elementwise.py) or, for a row op, the row schedule
(row_schedule.py). Backend-neutral: the runtime renders what these return (dsl/codegen)."""
from __future__ import annotations

from . import elementwise, row_schedule
from . import loops as L
from .group import Group

# a leaf's inner stride kind: 0, 1 or any other stride along the innermost coalesced dim
INNER_BROADCAST, INNER_UNIT, INNER_STRIDED = elementwise.BROADCAST, elementwise.UNIT, elementwise.STRIDED


def layouts(group: Group, leaf_kinds) -> tuple[list, list]:
    """(per leaf (element type, packed), per leaf its elementwise.Layout): leaf_kinds[i] is
    (packed, inner) or, for a blocked parameter, (packed, inner, block divisor per dim)."""
    found = [elementwise.Layout(kind[0], kind[1], kind[2] if len(kind) > 2 else (), leaf.guard,
                                tuple(coordinate for coordinate, _ in leaf.gathers))
             for leaf, kind in zip(group.leaves, leaf_kinds)]
    return [(leaf.dtype, kind[0]) for leaf, kind in zip(group.leaves, leaf_kinds)], found


def group_kernel(group: Group, rank: int, leaf_kinds: list, stream: tuple = (), tile: tuple | int = 0,
                 guards: tuple = ()) -> L.Kernel:
    """The elementwise kernel of ``group`` at a coalesced ``rank``: outputs whose index is in
    ``stream`` are written with streaming stores; ``tile`` ((rows, cols), staged leaves, those of
    them with unit stride along dim -2; or 0) walks the last two dims in tiles; ``guards`` gives
    each concatenation guard's coalesced dim (group.guards; their bounds: the kernel's ``bounds``
    argument)."""
    inputs, found = layouts(group, leaf_kinds)
    shape = elementwise.Tile(*tile[0], tuple(tile[1]), tuple(tile[2])) if tile else None
    return elementwise.elementwise_kernel(group.outputs, [s.type.dtype for s in group.sinks], inputs, found, rank,
                                          stream, shape, tuple(guards))


def row_group_kernel(group: Group, kinds, rank: int, leaf_kinds: list, out_dtypes, stream: tuple = (),
                     math: str = "fast") -> L.Kernel:
    """The row kernel of ``group``: reductions ``kinds`` (one output of ``out_dtypes`` each) or
    one softmax along its last dim (row_schedule.row_kernel)."""
    inputs, found = layouts(group, leaf_kinds)
    return row_schedule.row_kernel(group, list(kinds), list(out_dtypes), inputs, found, rank, stream, math)


__all__ = ["INNER_BROADCAST", "INNER_STRIDED", "INNER_UNIT", "group_kernel", "layouts", "row_group_kernel"]
