"""The row schedule: reductions and Softmax / LogSoftmax along a fused group's last dim, with the
producer cone fused and an optional epilogue (dsl/kir/group.py Epilogue), as one loop-nest kernel
(dsl/kir/loops.py) per layout variant.

Calling convention: the elementwise kernel's (dsl/kir/elementwise.py): rows are the coalesced
dims 0..rank-2 (threads split dim 0), the last dim ``n{last}`` is walked once per pass. Each
pass over a row is the elementwise schedule's innermost loop (byte pairs for 4-bit inputs, a
loop over blocks for parameters blocked along the row), so those layouts read as fast here.

- Reductions (``kinds``: sum, mean, max, min; several share one pass over the row): sums and
  means accumulate in float64 (integers: uint64, an integer mean in int64), then round once to
  the output type. Float max / min accumulate maxnum / minnum and a NaN flag; a row that saw a
  NaN or whose extreme is a zero is reduced again with the IEEE maximum / minimum (the same
  result, a SIMD instruction a step on the common rows). An epilogue computes its values from
  the row's result once per row, or, when it is of the group's shape (``x - max(x, -1)``), in a
  second pass over the row.
- Softmax / LogSoftmax (one kind): max, sum of exponentials, outputs.
  - Exact (and every non-float32 value): in float64, the row kept in a float64 buffer; the
    exponential of a narrower value is ``exp_for_float32`` (vectorizable, accurate far below a
    float32 ulp), of a float64 value libm's.
  - Fast float32: max (maxnum and a NaN flag, rescanned with the IEEE maximum when needed);
    ``exp_times_2_64`` (2**64 e**(v - max): never subnormal, so 2**k is an exponent add) in a
    loop of its own, the 2**64 cancelling in the division by their sum (log-softmax: log(sum)
    - 64 ln 2); the sum in float64 in the next loop (one loop with both vectorized the exponential
    at half width: softmax [32, 512, 512] 2.8 -> 2.3 ms). A row whose max is NaN or +-inf gets a
    NaN sum (all NaN, as numpy). As in onnxruntime's and jax's softmax, v - max is a float32
    difference: the result's relative error is up to |v - max| 2**-24 beyond the few ulp of the
    rest. A row value that is a load alone is read again where needed rather than copied to a
    row buffer; a plain float32 output with no epilogue holds the exponentials and is scaled in
    place (2.3 -> 2.0 ms).
  - An epilogue's inputs are read per element; its softmax values are rounded to their type in
    a loop of their own first (that loop then has no float64 in it and vectorizes twice as wide:
    softmax -> float16 15 -> 11 ms on [16, 512, 512]).
- Before a row's passes, the first PREFETCH_BYTES of the next row of each unit-stride input are
  prefetched (reductions: only rows that short; longer ones are streams the hardware
  prefetches). Interleaved medians over 32 MiB of float32: softmax rows of 64 to 4096 3.5-3.7 ->
  2.8-3.3 ms; a sum of squares 2.0 -> 1.3 ms on rows of 64-128 but 10-20% slower from 4096.
- Softmax outputs listed in ``stream`` are written with streaming stores.

Loop-invariant code then moves out of the loops (dsl/kir/hoist.py; rows are never empty: the
runtime runs no kernel over an empty group).
"""
from __future__ import annotations

import math

from . import expr as kir
from . import loops as L
from . import types
from .elementwise import LINE_BYTES, UNIT, Layout, U, _c, _Schedule
from .hoist import hoist
from .moves import raw_moves
from .reduce_schedule import _acc_dtype, _init, accumulation, guarded_extremes

REDUCTIONS = ("sum", "mean", "max", "min")
SOFTMAX = ("softmax", "logsoftmax")
PREFETCH_BYTES = L.NEXT_ROW_BYTES  # of the next row, at most
LN_2_64 = 64 * math.log(2.0)


def _bind(statements: list, loads: dict) -> list:
    """Assign / Accum / Store statements with each group input (Leaf i) read by ``loads[i]``."""
    bound = []
    for s in statements:
        value = kir.replace_all([s.value], lambda leaf: loads[leaf.index])[0]
        if isinstance(s, L.Assign):
            bound.append(L.Assign(s.name, value))
        elif isinstance(s, L.Accum):
            bound.append(L.Accum(s.name, s.op, value))
        else:
            bound.append(L.Store(s.buffer, s.index, value, s.stream, s.raw))
    return bound


class _RowSchedule(_Schedule):
    """The elementwise schedule's loops and loads, with row passes for its element bodies."""

    def __init__(self, group, kinds: list, out_dtypes: list, inputs: list, layouts: list, rank: int,
                 stream: tuple, math: str):
        assert not group.guards and not any(layout.gathers for layout in layouts)
        super().__init__([group.outputs[0]], out_dtypes, inputs, layouts, rank, stream, None)
        self.strips_on, self.staged = False, {}  # (streamed softmax rows store directly)
        self.group, self.kinds, self.out_dtypes, self.math = group, list(kinds), list(out_dtypes), math
        self.epilogue = group.epilogue
        self.value_dtype = group.outputs[0].dtype
        self.body_of = None  # loads -> the statements of one element of the current pass

    # ---- passes ----------------------------------------------------------------------------------
    def element(self, loads: dict, staged: dict | None = None) -> list:
        return self.body_of(loads)

    def row_pass(self, body_of) -> list:
        """One pass over the row: ``body_of(loads)`` gives an element's statements."""
        self.body_of = body_of
        try:
            return self.inner(_c(0), self.rowlen)
        finally:
            self.body_of = None

    def plain_pass(self, body: list, var: str | None = None) -> list:
        """A pass over the row that reads no input (row buffers only), by ``var`` (default i{last})."""
        return [L.For(var or f"i{self.last}", _c(0), self.rowlen, body)]

    @property
    def rowlen(self) -> kir.Var:
        return U("rowlen")  # (n{last}, assigned first)

    def epilogue_values(self, loads: dict) -> list:
        return kir.replace_all(self.epilogue.outputs, lambda leaf: loads[leaf.index])

    def row_index(self) -> kir.Expr:
        return U(f"q{self.last - 1}")

    def element_index(self) -> kir.Expr:
        return L.add(L.mul(self.row_index(), self.rowlen), U(f"i{self.last}"))

    # ---- reductions --------------------------------------------------------------------------------
    def reductions(self) -> list:
        value_dtype = self.value_dtype
        is_float = types.is_float(value_dtype)
        inits, steps, extremes, stores = [], [], [], []
        v = kir.var("v", value_dtype)
        for j, (kind, out_dtype) in enumerate(zip(self.kinds, self.out_dtypes)):
            acc_type = _acc_dtype(kind, value_dtype)
            name = f"acc{j}"
            acc = kir.var(name, acc_type)
            if kind in ("max", "min") and is_float:
                extremes.append((name, kind))  # (guarded_extremes initializes them)
            else:
                inits.append(L.Assign(name, _init(kind, acc_type)))
                steps.append(L.Accum(name, accumulation(kind), kir.convert(v, acc_type)))
            result = acc
            if kind == "mean":  # (integers: the exact mean truncated toward zero)
                result = kir.binary("div", acc, kir.convert(self.rowlen, acc_type))
            if self.epilogue is not None:
                stores += self.reduction_epilogue(result)
            else:
                stores.append(L.Store(self.outs[j], self.row_index(), kir.cast(result, out_dtype)))
        passes = lambda statements: self.row_pass(lambda loads: _bind(statements, loads))  # noqa: E731
        if extremes:
            return [*inits, *guarded_extremes(extremes, self.outputs[0], passes, tuple(steps)), *stores]
        if len(steps) == 1:  # (the value in place: the hoister moves it whole out of the loop when
            # it does not vary along the row)
            steps = [L.Accum(s.name, s.op, kir.replace_all([s.value], lambda _: self.outputs[0], kinds=(kir.Var,))[0])
                     for s in steps]
            return [*inits, *passes(steps), *stores]
        return [*inits, *passes([L.Assign("v", self.outputs[0]), *steps]), *stores]

    def reduction_epilogue(self, result: kir.Expr) -> list:
        """The epilogue of a reduction alone in its kernel: per row, or per element of the row
        in a second pass when its outputs have the group's shape (reduce, then broadcast)."""
        epilogue = self.epilogue
        statements = [L.Assign(epilogue.row.name, kir.cast(result, epilogue.row_dtype))]
        if tuple(epilogue.sinks[0].type.shape) == tuple(self.group.shape):
            def body_of(loads):
                values = self.epilogue_values(loads)
                return [L.Store(out, self.element_index(), value) for out, value in zip(self.outs, values)]
            return statements + self.row_pass(body_of)
        values = self.epilogue_values(self.loads())  # (its inputs are per row: broadcast along it)
        return statements + [L.Store(out, self.row_index(), value) for out, value in zip(self.outs, values)]

    # ---- softmax ------------------------------------------------------------------------------------
    def softmax(self) -> list:
        kind = self.kinds[0]
        if self.math == "fast" and self.value_dtype == "float32":
            return self.softmax_f32(kind)
        return self.softmax_wide(kind)

    def stores(self, result) -> tuple[list, list, callable]:
        """(statements before the output pass, its per-element statements, loads -> that body
        for passes that read inputs) writing ``result`` (the softmax value at the current
        element) rounded to its type, or fed to the epilogue."""
        index, stream = self.element_index(), self.stream
        epilogue = self.epilogue
        if epilogue is None:
            store = [L.Store(self.outs[0], index, kir.cast(result, self.out_dtypes[0]), 0 in stream)]
            return [], store, lambda loads: store
        row_buffer = L.Buffer("rowv", types.element_type(types.domain(epilogue.row_dtype)), "temp")
        self.temps.append(row_buffer)
        i = U(f"i{self.last}")
        before = [L.Alloc(row_buffer, self.rowlen),
                  *self.plain_pass([L.Store(row_buffer, i, kir.cast(result, epilogue.row_dtype))])]

        def body_of(loads):
            values = self.epilogue_values(loads)
            return [L.Assign(epilogue.row.name, L.load(row_buffer, i)),
                    *[L.Store(out, index, value, j in stream) for j, (out, value) in enumerate(zip(self.outs, values))]]
        return before, body_of(self.loads()), body_of

    def temp(self, name: str, scalar: str) -> L.Buffer:
        buffer = L.Buffer(name, types.element_type(scalar), "temp")
        self.temps.append(buffer)
        return buffer

    def softmax_wide(self, kind: str) -> list:
        """Three passes in float64, the row in a float64 buffer: max; exp and sum; outputs."""
        tmp, i = self.temp("tmp", "float64"), U(f"i{self.last}")
        peak, total = kir.var("acc", "float64"), kir.var("total", "float64")
        v = kir.var("v", "float64")
        body = [L.Alloc(tmp, self.rowlen), L.Assign("acc", kir.const(-math.inf, "float64"))]
        body += self.row_pass(lambda loads: [L.Assign("v", kir.convert(self.values(loads)[0], "float64")),
                                             L.Store(tmp, i, v), L.Accum("acc", "max", v)])
        shifted = kir.binary("sub", L.load(tmp, i), peak)
        e = kir.unary("exp", shifted) if self.value_dtype == "float64" else kir.call("exp_for_float32", shifted)
        exps = [L.Assign("e", e), L.Accum("total", "add", kir.var("e", "float64"))]
        if kind == "softmax":
            exps.append(L.Store(tmp, i, kir.var("e", "float64")))
        body += [L.Assign("total", kir.const(0.0, "float64")), *self.plain_pass(exps)]
        if kind == "softmax":
            body.append(L.Assign("scale", kir.binary("div", kir.const(1.0, "float64"), total)))
            result = kir.binary("mul", L.load(tmp, i), kir.var("scale", "float64"))
        else:
            body.append(L.Assign("shift", kir.binary("add", peak, kir.unary("log", total))))
            result = kir.binary("sub", L.load(tmp, i), kir.var("shift", "float64"))
        before, store, _ = self.stores(result)
        return body + before + self.plain_pass(store)

    def softmax_f32(self, kind: str) -> list:
        """The fast float32 row (see the module docstring)."""
        i, f32 = U(f"i{self.last}"), "float32"
        epilogue = self.epilogue
        reload = isinstance(self.outputs[0], kir.Leaf) and (kind == "softmax" or epilogue is None)
        scratch = epilogue is None and self.out_dtypes[0].onnx_name == "float" and 0 not in self.stream
        v, peak = kir.var("v", f32), kir.var("acc", f32)
        total = kir.var("total", "float64")
        body = []
        tmp = None
        if not reload or (kind == "softmax" and not scratch):
            tmp = self.temp("tmp", f32)
            body.append(L.Alloc(tmp, self.rowlen))
        reread = lambda loads: [L.Assign("v", self.values(loads)[0])]  # noqa: E731
        passes = lambda statements: self.row_pass(lambda loads: _bind(statements, loads))  # noqa: E731
        keep = () if reload else (L.Store(tmp, i, v),)
        again = None if reload else (lambda body: self.plain_pass(body, "r_"), L.load(tmp, U("r_")))
        body += guarded_extremes([("acc", "max")], self.outputs[0], passes, keep, again=again)
        # the exponentials: in the output (scratch), the row buffer (softmax) or one of their own
        if scratch:
            exps, at = self.outs[0], self.element_index()
        elif kind == "softmax":
            exps, at = tmp, i
        else:
            exps, at = self.temp("etmp", f32), i
            body.append(L.Alloc(exps, self.rowlen))
        exponential = lambda x: L.Store(exps, at, kir.call("exp_times_2_64", kir.binary("sub", x, peak)))  # noqa: E731
        if reload:
            body += self.row_pass(lambda loads: [*reread(loads), exponential(v)])
        else:
            body += self.plain_pass([L.Assign("v", L.load(tmp, i)), exponential(v)])
        body += [L.Assign("total", kir.const(0.0, "float64")),
                 *self.plain_pass([L.Accum("total", "add", kir.convert(L.load(exps, at), "float64"))]),
                 # (a NaN or +-inf max: NaN)
                 L.Assign("total", kir.select(kir.compare("eq", kir.binary("sub", peak, peak), kir.const(0.0, f32)),
                                               total, kir.const(math.nan, "float64")))]
        if kind == "softmax":
            scale = kir.var("scale", f32)
            body.append(L.Assign("scale", kir.convert(kir.binary("div", kir.const(1.0, "float64"), total), f32)))
            if scratch:
                return body + self.plain_pass([L.Store(exps, at, kir.binary("mul", L.load(exps, at), scale))])
            before, store, _ = self.stores(kir.binary("mul", L.load(tmp, i), scale))
            return body + before + self.plain_pass(store)
        log_total = kir.binary("sub", kir.unary("log", total), kir.const(LN_2_64, "float64"))  # (the 2**64)
        body.append(L.Assign("shift", kir.binary("add", peak, kir.convert(log_total, f32))))
        shift = kir.var("shift", f32)
        if reload:
            before, _, body_of = self.stores(kir.binary("sub", v, shift))
            return body + before + self.row_pass(lambda loads: [*reread(loads), *body_of(loads)])
        before, store, _ = self.stores(kir.binary("sub", L.load(tmp, i), shift))
        return body + before + self.plain_pass(store)

    # ---- the kernel ---------------------------------------------------------------------------------
    def prefetch(self, whole: bool) -> list:
        """Prefetches of the next row's first PREFETCH_BYTES (see the module docstring); with
        ``whole``, only when the row is that short."""
        k = self.last - 1
        end = U("stop") if k == 0 else U(f"n{k}")
        lines, widest = [], 1
        for i, (layout, buffer) in enumerate(zip(self.layouts, self.buffers)):
            if layout.packed or layout.inner != UNIT or layout.block(self.last) != 1:
                continue
            size = max(1, buffer.elem.bits // 8)
            widest = max(widest, size)
            span = kir.binary("min", self.rowlen, _c(PREFETCH_BYTES // size))
            lines.append(L.If(kir.compare("ne", U(f"s{i}_{k}"), _c(0)), [
                L.prefetch_run(buffer, L.add(U(f"p{i}_{k}"), U(f"s{i}_{k}")), span, line_bytes=LINE_BYTES)]))
        if not lines:
            return []
        cond = kir.compare("lt", L.add(U(f"i{k}"), _c(1)), end)
        if whole:
            cond = kir.binary("and", cond, kir.compare("le", self.rowlen, _c(PREFETCH_BYTES // widest)))
        return [L.If(cond, lines)]

    def kernel(self) -> L.Kernel:
        softmax = self.kinds[0] in SOFTMAX
        per_row = [*self.prefetch(not softmax), *(self.softmax() if softmax else self.reductions())]
        setup = [L.Assign("rowlen", U(f"n{self.last}")), *[L.Assign(f"p{i}_m1", U(f"o{i}")) for i in range(len(self.buffers))]]
        allocs = [s for s in per_row if isinstance(s, L.Alloc)]  # (row buffers: once per kernel call)
        per_row = [s for s in per_row if not isinstance(s, L.Alloc)]
        body = hoist(raw_moves([*setup, *allocs, *self.nest(self.last, per_row)]))
        arguments, params = self.signature()
        arguments += self.outs
        name = "row_" + "_".join(self.kinds)
        return L.Kernel(name, [*self.buffers, *self.outs, *self.temps], params, body, arguments)


def row_kernel(group, kinds: list, out_dtypes: list, inputs: list, layouts: list[Layout], rank: int,
               stream: tuple = (), math: str = "fast") -> L.Kernel:
    """The kernel reducing (``kinds``: sum / mean / max / min, one output each, one pass) or
    soft-maxing (one of SOFTMAX) ``group``'s single output along its last coalesced dim, rows
    being dims 0..rank-2 (rank >= 2). ``inputs[i]`` = (element type, packed) and ``layouts[i]``
    describe group input i; ``out_dtypes`` are the outputs' types (the epilogue's sinks' when
    the group has an epilogue); softmax outputs whose index is in ``stream`` are written with
    streaming stores (the caller checks alignment); ``math`` is the float math mode."""
    assert rank >= 2 and (all(k in REDUCTIONS for k in kinds) or (len(kinds) == 1 and kinds[0] in SOFTMAX))
    return _RowSchedule(group, kinds, out_dtypes, inputs, layouts, rank, stream, math).kernel()


__all__ = ["PREFETCH_BYTES", "REDUCTIONS", "SOFTMAX", "row_kernel"]
