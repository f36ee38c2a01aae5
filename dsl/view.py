"""View(shape, strides, offset) in ELEMENT units, and the transforms that stay views.

Element units make packed 4-bit and 2-bit tensors view exactly like byte-sized ones:
element i of a packed buffer is nibble/crumb i, wherever it lives in a byte.
Size-1 and broadcast dims always carry stride 0 (one canonical form, so two views
of the same elements compare equal).
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np


def _canonical(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(0 if dim == 1 else stride for dim, stride in zip(shape, strides))


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """C-order strides in elements, 0 for size-1 dims."""
    strides, step = [], 1
    for dim in reversed(shape):
        strides.append(0 if dim == 1 else step)
        step *= max(dim, 1)
    return tuple(reversed(strides))


@dataclass(frozen=True)
class View:
    """Which buffer elements a tensor reads: element ``idx`` is at
    ``offset + sum(idx[k] * strides[k])``. Callers validate axes; View trusts them.
    """

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0

    def __post_init__(self):
        assert len(self.shape) == len(self.strides)
        object.__setattr__(self, "strides", _canonical(self.shape, self.strides))

    @staticmethod
    def contiguous(shape, offset: int = 0) -> "View":
        shape = tuple(int(d) for d in shape)
        return View(shape, contiguous_strides(shape), offset)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return prod(self.shape)

    @property
    def is_contiguous(self) -> bool:
        """True when the elements are exactly buffer[offset : offset + size] in C order."""
        return self.size == 0 or self.strides == contiguous_strides(self.shape)

    def span(self) -> tuple[int, int]:
        """(lowest, highest + 1) buffer element index this view touches; (offset, offset) if empty."""
        if self.size == 0:
            return self.offset, self.offset
        low = self.offset + sum(s * (d - 1) for d, s in zip(self.shape, self.strides) if s < 0)
        high = self.offset + sum(s * (d - 1) for d, s in zip(self.shape, self.strides) if s > 0)
        return low, high + 1

    def unsqueeze(self, axes) -> "View":
        """Insert size-1 dims at the given normalized OUTPUT positions."""
        out_rank = self.rank + len(axes)
        inserted = set(axes)
        dims = iter(zip(self.shape, self.strides))
        shape, strides = [], []
        for pos in range(out_rank):
            dim, stride = (1, 0) if pos in inserted else next(dims)
            shape.append(dim)
            strides.append(stride)
        return View(tuple(shape), tuple(strides), self.offset)

    def squeeze(self, axes) -> "View":
        """Drop the given normalized size-1 dims."""
        dropped = set(axes)
        keep = [k for k in range(self.rank) if k not in dropped]
        return View(tuple(self.shape[k] for k in keep), tuple(self.strides[k] for k in keep), self.offset)

    def permute(self, perm) -> "View":
        """Reorder dims: output dim k is input dim perm[k]."""
        return View(tuple(self.shape[p] for p in perm), tuple(self.strides[p] for p in perm), self.offset)

    def expand(self, shape) -> "View":
        """Broadcast to ``shape`` (numpy rules, already validated): new and size-1 dims get stride 0."""
        lead = len(shape) - self.rank
        strides = [0] * lead + [0 if dim == 1 else stride for dim, stride in zip(self.shape, self.strides)]
        return View(tuple(shape), tuple(strides), self.offset)

    def slice(self, axis: int, start: int, stop: int, step: int = 1) -> "View":
        """Basic slicing along one axis with normalized, in-range start/stop (Python semantics)."""
        count = len(range(start, stop, step))
        shape = list(self.shape)
        strides = list(self.strides)
        offset = self.offset + (start * strides[axis] if count else 0)
        shape[axis] = count
        strides[axis] = strides[axis] * step
        return View(tuple(shape), tuple(strides), offset)

    def reshape(self, shape) -> "View | None":
        """The same elements in C order under a new shape, or None when that needs a copy.

        Follows numpy's no-copy rule (``_attempt_nocopy_reshape``): split both shapes into
        runs of equal element count; each run of old dims must be contiguous in itself.
        """
        shape = tuple(int(d) for d in shape)
        assert prod(shape) == self.size
        if self.size == 0 or self.size == 1:
            return View.contiguous(shape, self.offset)
        old = [(d, s) for d, s in zip(self.shape, self.strides) if d != 1]
        new_strides = [0] * len(shape)
        oi = ni = 0
        while oi < len(old) and ni < len(shape):
            oj, nj = oi + 1, ni + 1
            old_count, new_count = old[oi][0], shape[ni]
            while old_count != new_count:
                if new_count < old_count:
                    new_count *= shape[nj]
                    nj += 1
                else:
                    old_count *= old[oj][0]
                    oj += 1
            for k in range(oi, oj - 1):
                if old[k][1] != old[k + 1][0] * old[k + 1][1]:
                    return None
            step = old[oj - 1][1]
            for k in range(nj - 1, ni - 1, -1):
                new_strides[k] = step
                step *= shape[k]
            oi, ni = oj, nj
        return View(shape, tuple(new_strides), self.offset)

    def compose(self, outer: "View") -> "View | None":
        """``outer`` indexes this view's elements in C order (as if they were a flat buffer);
        return the single View of the underlying buffer, or None when this view's elements
        are not one evenly strided run (``reshape((size,))`` needs a copy). None is
        conservative: some such compositions are still affine (e.g. ``outer`` undoing a
        transpose), but they are not searched for."""
        flat = self.reshape((self.size,))
        if flat is None:
            return None
        step = flat.strides[0] if self.size > 1 else 0
        return View(outer.shape, tuple(s * step for s in outer.strides), self.offset + outer.offset * step)


@dataclass(frozen=True)
class BlockedView(View):
    """A View whose dim k moves through the buffer once every ``blocks[k]`` indices: element
    ``idx`` is at ``offset + sum((idx[k] // blocks[k]) * strides[k])``.

    This is how a blocked quantization parameter (one value per ``block_size`` run of the data
    along an axis, ceil(D / block_size) values) reads at the data's shape. Fused kernels index
    it directly; broadcasting, unsqueeze, squeeze and permutations keep it blocked; any other
    transform returns None, so the runtime copies it out (``source`` then ``spread_values``)
    and goes on with a plain View.
    """

    blocks: tuple[int, ...] = ()

    def __post_init__(self):
        super().__post_init__()
        assert len(self.blocks) == len(self.shape) and all(b >= 1 for b in self.blocks)

    @staticmethod
    def spread(view: View, axis: int, block: int, size: int) -> "BlockedView":
        """``view`` (ceil(size / block) values along ``axis``) read at ``size`` along it."""
        assert view.shape[axis] == -(-size // block)
        shape = view.shape[:axis] + (size,) + view.shape[axis + 1:]
        blocks = [*getattr(view, "blocks", (1,) * view.rank)]
        blocks[axis] = block
        return BlockedView(shape, view.strides, view.offset, tuple(blocks))

    @property
    def is_contiguous(self) -> bool:
        return self.size == 0 or (View.is_contiguous.fget(self) and all(b == 1 for b in self.blocks))

    def span(self) -> tuple[int, int]:
        if self.size == 0:
            return self.offset, self.offset
        reach = [s * ((d - 1) // b) for d, s, b in zip(self.shape, self.strides, self.blocks)]
        return self.offset + sum(r for r in reach if r < 0), self.offset + sum(r for r in reach if r > 0) + 1

    def source(self) -> View:
        """The parameter itself: ceil(size / block) values along each blocked dim."""
        return View(tuple(-(-d // b) for d, b in zip(self.shape, self.blocks)), self.strides, self.offset)

    def spread_values(self, values: np.ndarray) -> np.ndarray:
        """``values`` (the source's elements, C order) as this view reads them."""
        for k, (size, block) in enumerate(zip(self.shape, self.blocks)):
            if block > 1:
                values = np.repeat(values, block, axis=k).take(np.arange(size), axis=k)
        return values

    def unsqueeze(self, axes) -> "BlockedView":
        plain = View.unsqueeze(self, axes)
        inserted = set(axes)
        blocks = iter(self.blocks)
        return BlockedView(plain.shape, plain.strides, self.offset,
                           tuple(1 if pos in inserted else next(blocks) for pos in range(plain.rank)))

    def squeeze(self, axes) -> "BlockedView":
        plain = View.squeeze(self, axes)
        return BlockedView(plain.shape, plain.strides, self.offset,
                           tuple(b for k, b in enumerate(self.blocks) if k not in set(axes)))

    def permute(self, perm) -> "BlockedView":
        plain = View.permute(self, perm)
        return BlockedView(plain.shape, plain.strides, self.offset, tuple(self.blocks[p] for p in perm))

    def expand(self, shape) -> "BlockedView":
        plain = View.expand(self, shape)
        lead = len(shape) - self.rank
        return BlockedView(plain.shape, plain.strides, self.offset, (1,) * lead + self.blocks)

    def slice(self, axis, start, stop, step=1):
        return None

    def reshape(self, shape):
        return None

    def compose(self, outer):
        return None
