"""The elementwise schedule: a fused group's outputs (expressions of its inputs, dsl/kir/group.py)
computed over the group's coalesced shape as one loop-nest kernel (dsl/kir/loops.py).

Calling convention (the runtime's, dsl/runtime.py KernelRunner): ``(start, stop, shape, b0, o0,
s0, b1, o1, s1, ..., out0, out1, ...)``: rows [start, stop) of dim 0 (threads split it),
``shape`` the coalesced shape, per input its flat buffer, element offset and element strides;
outputs are flat and C-contiguous.

The loops walk dims in order; each dim's loop extends the per-input offsets ``p{i}_{k}`` and the
output index ``q{k}`` incrementally. The innermost loop's variant per input (``Layout``) is
part of the kernel: stride 0 (broadcast: loaded once per row, hoisted), 1 or any; blocked
parameters (one value per run of B elements) index by ``i // B``. Then, as the layout asks:

- parameters blocked along the inner dim: a loop over blocks loads them once per block, the
  block's elements run as a plain loop (an int4 [4096, 8192] dequant with blocks of 32: 14 ->
  5 ms);
- 4-bit inputs read with unit inner stride: two elements per step from one byte load (both
  nibbles by constant shifts: 1.8x on an int4 dequant), the odd start and tail one at a time;
- streamed outputs: the inner dim in strips of STAGE elements computed into L1 buffers, then
  copied out with non-temporal stores (exp over 16M float32, 2 threads: 7.2 ms with the stores
  inside the compute loop, 3.5 ms staged, 3.1 ms for y = x * 2);
- a tile for inputs read across their memory order (a transposed view): the last two dims in
  rows x cols tiles, each such input first copied per tile into an L1 buffer by SIMD block
  transposes, the next tile's part of the inputs read in place prefetched (transpose(x) + y on
  float32 [8192, 8192]: 0.12x of dsl.contiguous of the view as a strided loop, 0.72x tiled).

Loop-invariant code then moves out of the loops (dsl/kir/hoist.py; the domain is never empty).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..dtypes import DType
from . import expr as kir
from . import types as kir_types
from . import loops as L
from .hoist import hoist
from .moves import raw_moves

BROADCAST, UNIT, STRIDED = 0, 1, 2
STAGE = 512  # elements computed into an L1 buffer before they are streamed out
LINE_BYTES = 64


@dataclass(frozen=True)
class Layout:
    """One input's layout at a coalesced rank: ``inner`` (BROADCAST / UNIT / STRIDED: its stride
    along the innermost dim is 0, 1 or other), ``blocks`` (per dim, the block divisor of a
    blocked parameter; 1 for plain dims) and ``guard`` (read inside a concatenation's part k:
    loaded only where guard k holds)."""

    packed: bool
    inner: int
    blocks: tuple = ()
    guard: int | None = None  # inside a concatenation's part k: loaded only where guard k holds
    gathers: tuple = ()  # a gather's data: per loaded coordinate, its index expression (of other inputs)

    def block(self, k: int) -> int:
        return self.blocks[k] if self.blocks else 1


@dataclass(frozen=True)
class Tile:
    """``rows`` x ``cols`` tiles of the last two dims; ``staged``: the inputs copied per tile
    (read across their memory order), ``unit`` those of them with stride 1 along dim -2."""

    rows: int
    cols: int
    staged: tuple
    unit: tuple


def block_lanes(elem: DType, rows: int, cols: int) -> int:
    """Lanes of a block transpose (64 bytes of elements square) for an input of ``elem``, 0 when
    it does not apply (bool, sub-byte or 16-byte items, a tile it does not divide)."""
    if elem.packed or elem.bits not in (8, 16, 32, 64) or elem.onnx_name == "bool":
        return 0
    lanes = LINE_BYTES * 8 // elem.bits
    return lanes if rows % lanes == 0 and cols % lanes == 0 else 0


U = L.index_var


def _c(value: int) -> kir.Const:
    return L.index(value)


class _Schedule:
    def __init__(self, outputs, out_dtypes, inputs, layouts, rank, stream, tile, guards=()):
        self.rank, self.last, self.layouts, self.stream, self.tile = rank, rank - 1, layouts, tuple(stream), tile
        self.guards = tuple(guards)  # per concatenation guard, its coalesced dim
        self.part = None  # (parts(): the concatenation part being built; its items need no guard)
        self.prev = "m1" if rank == 1 else str(rank - 2)
        self.buffers = [L.Buffer(f"b{i}", elem, "in", packed) for i, (elem, packed) in enumerate(inputs)]
        self.outs = [L.Buffer(f"out{j}", dt, "out") for j, dt in enumerate(out_dtypes)]
        self.outputs = outputs
        self.temps: list[L.Buffer] = []
        # streamed outputs computed in strips (not with byte pairs, inner blocks or tiles)
        self.strips_on = bool(self.stream) and not self.pairs() and not self.inner_block() and tile is None
        self.staged = {j: L.Buffer(f"stg{j}", self.outs[j].elem, "temp") for j in self.stream} if self.strips_on else {}

    # ---- indices --------------------------------------------------------------------------------
    def step(self, i: int, k: int, position: kir.Expr | None = None) -> kir.Expr:
        """Input i's offset step along dim k: i{k} * s{i}_{k}, or (i{k} // B) * s{i}_{k}."""
        position = position if position is not None else U(f"i{k}")
        block = self.layouts[i].block(k)
        if block != 1:
            position = kir.binary("floordiv", position, _c(block))
        return L.mul(position, U(f"s{i}_{k}"))

    def base(self, i: int) -> kir.Var:
        return U(f"p{i}_{self.prev}")

    def origin(self, i: int, loads: dict | None = None) -> kir.Expr:
        """Input i's offset before the innermost dim; a gather's data adds each loaded
        coordinate (negative: counted from the end; checked before the kernel runs) times its
        stride, with the index inputs read by ``loads``."""
        base = self.base(i)
        for t, coordinate in enumerate(self.layouts[i].gathers):
            loaded = kir.replace_all([coordinate], lambda leaf: loads[leaf.index])[0]
            at = kir.convert(loaded, L.INDEX)
            if kir_types.is_signed(loaded.dtype):
                at = kir.select(kir.compare("lt", loaded, kir.const(0, loaded.dtype)), L.add(at, U(f"gn{i}_{t}")), at)
            base = L.add(base, L.mul(at, U(f"gs{i}_{t}")))
        return base

    def index(self, i: int, block_var: str | None = None, loads: dict | None = None) -> kir.Expr:
        """Input i's element at the innermost index (``block_var``: its block when blocked along
        it; ``loads``: the other inputs' loads, for a gather's coordinates)."""
        layout, last = self.layouts[i], self.last
        base = self.origin(i, loads)
        if layout.block(last) != 1:
            if block_var is not None:
                return L.add(base, L.mul(U(block_var), U(f"s{i}_{last}")))
            return L.add(base, self.step(i, last))
        if layout.inner == BROADCAST:
            return base
        if layout.inner == UNIT:
            return L.add(base, U(f"i{last}"))
        return L.add(base, L.mul(U(f"i{last}"), U(f"s{i}_{last}")))

    def out_index(self) -> list:
        k = self.last
        value = U("i0") if k == 0 else L.add(L.mul(U(f"q{k - 1}"), U(f"n{k}")), U(f"i{k}"))
        return [L.Assign(f"q{k}", value)]

    # ---- element bodies -------------------------------------------------------------------------
    def values(self, loads: dict) -> list[kir.Expr]:
        """The outputs with input i read by ``loads[i]`` (a Load expression); values the
        outputs share stay shared."""
        values = kir.replace_all(self.outputs, lambda leaf: loads[leaf.index])
        if self.guards:
            values = kir.replace_all(values, self.picked, kinds=(kir.Pick,))
        return values

    def guard(self, k: int) -> kir.Expr:
        """Guard k: g{k}_lo <= i{d} < g{k}_hi along its coalesced dim d."""
        at = U(f"i{self.guards[k]}")
        return kir.binary("and", kir.compare("ge", at, U(f"g{k}_lo")), kir.compare("lt", at, U(f"g{k}_hi")))

    def picked(self, pick: kir.Pick) -> kir.Expr:
        """A concatenation: item j where its guard holds, else the next (the last item is taken
        where no earlier guard holds; the guards cover the dim)."""
        if self.part is not None:
            return pick.items[pick.guards.index(self.part)]
        value = pick.items[-1]
        for item, k in zip(reversed(pick.items[:-1]), reversed(pick.guards[:-1])):
            value = kir.select(self.guard(k), item, value)
        return value

    def loads(self, block_var: str | None = None, overrides: dict | None = None) -> dict:
        """Each input's Load at the current index; inside a concatenation's part, guarded."""
        found = {}
        gathered = [i for i, layout in enumerate(self.layouts) if layout.gathers]
        for i, buffer in [*[(i, b) for i, b in enumerate(self.buffers) if i not in gathered],
                          *[(i, self.buffers[i]) for i in gathered]]:  # (a gather's indices first)
            k = self.layouts[i].guard
            index = self.index(i, block_var, found)
            if k is None or k == self.part:
                found[i] = L.load(buffer, index)
            elif self.part is None:
                found[i] = L.load(buffer, index, self.guard(k), kir.const(0, L.load(buffer, index).dtype))
            else:  # (another part's input: not read in this part's loop)
                found[i] = kir.const(0, L.load(buffer, index).dtype)
        found.update(overrides or {})
        return found

    def element(self, loads: dict, staged: dict | None = None) -> list:
        """One element's statements: its output index, then each output stored (into its strip
        buffer when ``staged`` maps the output to one)."""
        bound, values = share(self.values(loads), f"v{self.last}_")
        body = [*self.out_index(), *bound]
        for j, (out, value) in enumerate(zip(self.outs, values)):
            if staged and j in staged:
                body.append(L.Store(staged[j], kir.binary("sub", U(f"i{self.last}"), U("sb_")), value))
            else:
                body.append(L.Store(out, U(f"q{self.last}"), value, j in self.stream))
        return body

    # ---- the innermost dim ------------------------------------------------------------------------
    def inner_block(self) -> int:
        blocks = {layout.block(self.last) for layout in self.layouts} - {1}
        return blocks.pop() if len(blocks) == 1 else 0

    def pairs(self) -> list[int]:
        """4-bit inputs read with unit inner stride, when every packed input moving along the
        inner dim is one (a blocked packed parameter loads per element inside that loop)."""
        moving = [i for i, lay in enumerate(self.layouts)
                  if lay.packed and lay.inner != BROADCAST and lay.block(self.last) == 1]
        if self.guards:
            return []  # (guarded loads one element at a time)
        assert not any(self.layouts[i].gathers for i in moving)  # (no ONNX gather takes a packed type)
        if moving and all(self.layouts[i].inner == UNIT and self.buffers[i].elem.bits == 4 for i in moving):
            return moving
        return []

    def inner(self, lo: kir.Expr, hi: kir.Expr, overrides: dict | None = None) -> list:
        """The innermost loop i{last} over [lo, hi) (tiled by inner-blocked parameters)."""
        block = self.inner_block()
        if not block:
            return self.elements(lo, hi, self.loads(None, overrides))
        size = _c(block)
        lob = kir.binary("max", U("lo0_"), L.mul(U("bk_"), size))
        hib = kir.binary("min", U("hi0_"), L.add(L.mul(U("bk_"), size), size))
        return [L.Assign("lo0_", lo), L.Assign("hi0_", hi),
                L.For("bk_", kir.binary("floordiv", U("lo0_"), size),
                      kir.binary("floordiv", L.add(U("hi0_"), _c(block - 1)), size),
                      [L.Assign("lob_", lob), L.Assign("hib_", hib),
                       *self.elements(U("lob_"), U("hib_"), self.loads("bk_", overrides))])]

    def elements(self, lo: kir.Expr, hi: kir.Expr, loads: dict) -> list:
        pairs = self.pairs()
        if pairs:
            return self.byte_pairs(lo, hi, loads, pairs)
        if self.strips_on:
            return self.strips(lo, hi, loads)
        return [L.For(f"i{self.last}", lo, hi, self.element(loads))]

    def byte_pairs(self, lo: kir.Expr, hi: kir.Expr, loads: dict, pairs: list) -> list:
        """Two elements a step while every pair input starts on a byte boundary: one byte load,
        both nibbles decoded; an odd tail element and odd starts run one element a step. Byte
        indices are base + jj (not (p + i) >> 1): LLVM then sees consecutive loads and vectorizes."""
        last = f"i{self.last}"
        one = self.element(loads)
        even = None
        for i in pairs:
            test = kir.compare("eq", kir.binary("mod", L.add(self.origin(i, loads), U("lo_")), _c(2)), _c(0))
            even = test if even is None else kir.binary("and", even, test)

        def half(k: int) -> list:
            parts = {i: L.load(self.buffers[i], L.add(U(f"pb{i}"), U("jj")), part=k) for i in pairs}
            return self.element({**loads, **parts})
        count = kir.binary("floordiv", kir.binary("sub", U("hi_"), U("lo_")), _c(2))
        step = [L.Assign(last, L.add(U("lo_"), L.mul(U("jj"), _c(2)))), *half(0),
                L.Assign(last, L.add(U(last), _c(1))), *half(1)]
        tail = kir.compare("ne", kir.binary("mod", kir.binary("sub", U("hi_"), U("lo_")), _c(2)), _c(0))
        then = [*[L.Assign(f"pb{i}", kir.binary("floordiv", L.add(self.origin(i, loads), U("lo_")), _c(2)))
                  for i in pairs],
                L.For("jj", _c(0), count, step),
                L.If(tail, [L.Assign(last, kir.binary("sub", U("hi_"), _c(1))), *one])]
        return [L.Assign("lo_", lo), L.Assign("hi_", hi),
                L.If(even, then, [L.For(last, U("lo_"), U("hi_"), one)])]

    def strips(self, lo: kir.Expr, hi: kir.Expr, loads: dict) -> list:
        """The inner loop in strips of STAGE elements: computed into L1 buffers stg{j}, then
        copied out with streaming stores (the other outputs are stored directly)."""
        last, staged = f"i{self.last}", self.staged
        strip = self.element(loads, staged)
        copy = [*self.out_index(),
                *[L.Move(self.outs[j], U(f"q{self.last}"), staged[j], kir.binary("sub", U(last), U("sb_")), True)
                  for j in self.stream]]
        count = kir.binary("floordiv", L.add(kir.binary("sub", U("hi_"), U("lo_")), _c(STAGE - 1)), _c(STAGE))
        sb = L.add(U("lo_"), L.mul(U("st_"), _c(STAGE)))
        return [L.Assign("lo_", lo), L.Assign("hi_", hi),
                L.For("st_", _c(0), count, [
                    L.Assign("sb_", sb), L.Assign("se_", kir.binary("min", L.add(U("sb_"), _c(STAGE)), U("hi_"))),
                    L.For(last, U("sb_"), U("se_"), strip), L.For(last, U("sb_"), U("se_"), copy)])]

    # ---- loops over the outer dims ------------------------------------------------------------------
    def level(self, k: int) -> list:
        """Loop k's first statements: its output index q{k} and, above the innermost dim, the
        inputs' offsets p{i}_{k}."""
        q = U("i0") if k == 0 else L.add(L.mul(U(f"q{k - 1}"), U(f"n{k}")), U(f"i{k}"))
        prev = "m1" if k == 0 else str(k - 1)
        return [L.Assign(f"q{k}", q),
                *[L.Assign(f"p{i}_{k}", L.add(U(f"p{i}_{prev}"), self.step(i, k))) for i in range(len(self.buffers))]]

    def bounds(self, k: int):
        return (U("start"), U("stop")) if k == 0 else (_c(0), U(f"n{k}"))

    def nest(self, dims: int, body: list, first: int = 0) -> list:
        """Loops over dims first..dims-1 around ``body``."""
        for k in reversed(range(first, dims)):
            body = [L.For(f"i{k}", *self.bounds(k), [*self.level(k), *body])]
        return body

    def split_dim(self) -> int | None:
        """The outer dim one concatenation's guards all lie on (its loop then runs once per part
        over that part's range, each part's items unguarded: stores into slices of the output),
        or None (guarded loads)."""
        picks = [n for n in kir.postorder(self.outputs) if isinstance(n, kir.Pick)]
        if len(picks) != 1 or not self.guards or len(set(self.guards)) != 1 or self.guards[0] >= self.last:
            return None
        return self.guards[0] if set(picks[0].guards) == set(range(len(self.guards))) else None

    def parts(self, d: int) -> list:
        """Dim d's loop once per part k over its range within the thread's [lo, hi) of d."""
        loops = []
        lo, hi = self.bounds(d)
        for k in range(len(self.guards)):
            self.part = k
            inner = self.nest(self.last, self.inner(*self.bounds(self.last)), d + 1)
            start, stop = kir.binary("max", lo, U(f"g{k}_lo")), kir.binary("min", hi, U(f"g{k}_hi"))
            loops.append(L.For(f"i{d}", start, stop, [*self.level(d), *inner]))
        self.part = None
        return self.nest(d, loops)

    def kernel(self) -> L.Kernel:
        count = len(self.buffers)
        setup = [L.Assign(f"p{i}_m1", U(f"o{i}")) for i in range(count)]
        for buffer in self.staged.values():
            self.temps.append(buffer)
            setup.append(L.Alloc(buffer, _c(STAGE)))
        split = self.split_dim()
        if self.tile is not None:
            body = self.tiled()
        elif split is not None:
            body = self.parts(split)
        else:
            body = self.nest(self.last, self.inner(*self.bounds(self.last)))
        body = hoist(raw_moves([*setup, *body]))
        arguments, params = self.signature()
        bounds = tuple(f"g{k}_{end}" for k in range(len(self.guards)) for end in ("lo", "hi"))
        if bounds:
            arguments.append(L.ParamVector("bounds", bounds))
            params += bounds
        gathers = tuple(f"g{kind}{i}_{t}" for i, layout in enumerate(self.layouts)
                        for t in range(len(layout.gathers)) for kind in ("s", "n"))
        if gathers:  # per gather coordinate: the data's stride along its axis and that axis's size
            arguments.append(L.ParamVector("gathers", gathers))
            params += gathers
        arguments += self.outs
        return L.Kernel("elementwise", [*self.buffers, *self.outs, *self.temps], params, body, arguments)

    def signature(self) -> tuple[list, list]:
        """(arguments, params) up to the inputs': start, stop, the shape, per input its buffer,
        offset and strides (the runtime's calling convention, see the module docstring)."""
        names = [f"n{k}" for k in range(self.rank)]
        arguments, params = ["start", "stop", L.ParamVector("shape", tuple(names))], ["start", "stop", *names]
        for i, buffer in enumerate(self.buffers):
            strides = tuple(f"s{i}_{k}" for k in range(self.rank))
            arguments += [buffer, f"o{i}", L.ParamVector(f"s{i}", strides)]
            params += [f"o{i}", *strides]
        return arguments, params

    # ---- tiles ---------------------------------------------------------------------------------------
    def tiled(self) -> list:
        """The last two dims in tiles (see the module docstring); rank >= 2, no packed or blocked
        inputs; thread spans split dim 0."""
        tile, row, last = self.tile, self.rank - 2, self.last
        rows, cols = _c(tile.rows), _c(tile.cols)
        base = "m1" if row == 0 else str(row - 1)
        staged_buffers = {}
        setup = []
        for i in tile.staged:
            buffer = L.Buffer(f"tb{i}", self.buffers[i].elem, "temp")
            self.temps.append(buffer)
            staged_buffers[i] = buffer
            setup.append(L.Alloc(buffer, _c(tile.rows * tile.cols)))
        at = L.add(L.mul(kir.binary("sub", U(f"i{row}"), U("r0_")), cols), kir.binary("sub", U(f"i{last}"), U("c0_")))
        overrides = {i: L.load(buffer, at) for i, buffer in staged_buffers.items()}
        staging = []
        for i, buffer in staged_buffers.items():
            step_row = U(f"i{row}") if i in tile.unit else L.mul(U(f"i{row}"), U(f"s{i}_{row}"))
            source = L.add(U(f"p{i}_{base}"), step_row, L.mul(U(f"i{last}"), U(f"s{i}_{last}")))
            scalar = [L.For(f"i{last}", U("c0_"), U("c1_"), [
                L.For(f"i{row}", U("r0_"), U("r1_"), [L.Move(buffer, at, self.buffers[i], source)])])]
            lanes = block_lanes(self.buffers[i].elem, tile.rows, tile.cols) if i in tile.unit else 0
            if not lanes:
                staging += scalar
                continue
            whole = kir.binary("and", kir.compare("eq", kir.binary("sub", U("r1_"), U("r0_")), rows),
                               kir.compare("eq", kir.binary("sub", U("c1_"), U("c0_")), cols))
            bi, bj = L.mul(U("biq_"), _c(lanes)), L.mul(U("bjq_"), _c(lanes))
            block = L.TransposeBlock(self.buffers[i], L.add(U(f"p{i}_{base}"), U("r0_"), bi,
                                                            L.mul(L.add(U("c0_"), bj), U(f"s{i}_{last}"))),
                                     U(f"s{i}_{last}"), buffer, L.add(L.mul(bi, cols), bj), cols, lanes)
            # (source rows outermost: long runs)
            staging.append(L.If(whole, [L.For("bjq_", _c(0), _c(tile.cols // lanes), [
                L.For("biq_", _c(0), _c(tile.rows // lanes), [block])])], scalar))
        prefetch = []
        for i, layout in enumerate(self.layouts):
            if i in tile.staged or layout.inner != UNIT:
                continue
            per_line = max(1, LINE_BYTES * 8 // max(self.buffers[i].elem.bits, 8))
            prefetch += [L.Prefetch(self.buffers[i], L.add(U(f"p{i}_{row}"), U("c1_"), _c(k)))
                         for k in range(0, tile.cols, per_line)]
        lo, hi = self.bounds(row)
        per_row = [*self.level(row), *prefetch, *self.inner(U("c0_"), U("c1_"), overrides)]
        tiles = [L.Assign("r_lo", lo), L.Assign("r_hi", hi),
                 L.For("tr_", kir.binary("floordiv", U("r_lo"), rows),
                       kir.binary("floordiv", L.add(U("r_hi"), _c(tile.rows - 1)), rows), [
                     L.Assign("r0_", kir.binary("max", U("r_lo"), L.mul(U("tr_"), rows))),
                     L.Assign("r1_", kir.binary("min", U("r_hi"), L.add(L.mul(U("tr_"), rows), rows))),
                     L.For("tc_", _c(0), kir.binary("floordiv", L.add(U(f"n{last}"), _c(tile.cols - 1)), cols), [
                         L.Assign("c0_", L.mul(U("tc_"), cols)),
                         L.Assign("c1_", kir.binary("min", U(f"n{last}"), L.add(U("c0_"), cols))),
                         *staging, L.For(f"i{row}", U("r0_"), U("r1_"), per_row)])])]
        return [*setup, *self.nest(row, tiles)]


def share(roots: list, prefix: str) -> tuple[list, list]:
    """(Assigns, roots): the values several roots use, computed once. Each largest such
    subexpression (a shared node some unshared node or root uses; not a constant, name or
    index arithmetic) becomes a named Assign, and the roots read the names."""
    reach: dict[int, set] = {}
    for r, root in enumerate(roots):
        for node in kir.postorder([root]):
            reach.setdefault(id(node), set()).add(r)
    order = kir.postorder(roots)

    def shareable(node) -> bool:
        return len(reach[id(node)]) > 1 and not isinstance(node, (kir.Const, kir.Var)) and node.dtype != L.INDEX
    bind = {id(c) for n in order if not shareable(n) for c in n.children() if shareable(c)}
    bind |= {id(r) for r in roots if shareable(r)}
    if not bind:
        return [], list(roots)
    assigns, names = [], {}
    memo: dict[int, kir.Expr] = {}
    for node in order:
        children = [memo[id(c)] for c in node.children()]
        same = all(a is b for a, b in zip(children, node.children()))
        rebuilt = node if same else kir.with_children(node, children)
        if id(node) in bind:
            names[id(node)] = f"{prefix}{len(assigns)}"
            assigns.append(L.Assign(names[id(node)], rebuilt))
            rebuilt = kir.var(names[id(node)], node.dtype)
        memo[id(node)] = rebuilt
    return assigns, [memo[id(r)] for r in roots]


def elementwise_kernel(outputs: list, out_dtypes: list, inputs: list, layouts: list, rank: int,
                       stream: tuple = (), tile: Tile | None = None, guards: tuple = ()) -> L.Kernel:
    """The kernel computing ``outputs`` (expressions whose Leaf i reads ``inputs[i]`` = (element
    type, packed) laid out as ``layouts[i]``) of ``out_dtypes`` over a coalesced ``rank``;
    outputs whose index is in ``stream`` are written with streaming stores (the caller checks
    alignment: each run of stores starts on a cache line). ``guards[k]``: the coalesced dim of
    concatenation guard k (its bounds: the ``bounds`` argument, lo and hi per guard)."""
    return _Schedule(outputs, out_dtypes, inputs, layouts, rank, stream, tile, guards).kernel()


__all__ = ["BROADCAST", "Layout", "STAGE", "STRIDED", "Tile", "UNIT", "block_lanes", "elementwise_kernel"]
