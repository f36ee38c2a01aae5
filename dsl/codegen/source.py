"""numba source text of a fused group for one layout variant (rank, per-leaf storage, inner stride):
elementwise kernels by the loop-nest schedule (dsl/kir/elementwise.py, rendered by loops.py),
last-axis row kernels (reductions, softmax, epilogues) by the row template below, which is yet
to become a schedule.

Kernels take ``(start, stop, shape, <leaf buffers, offsets, strides>, <outputs>)`` and cover
rows start..stop of the outermost dim, so the runtime can split work across threads (the
kernels release the GIL). Output buffers are fresh, flat and C-contiguous.
"""
from __future__ import annotations

import math
import re

import numpy as np

from . import scalar
from ..kir import elementwise
from ..kir.group import Group
from . import loops
from .fused import PREAMBLE, Rendered, render
from .prelude import TRUNC, helper_lines

INNER_BROADCAST, INNER_UNIT, INNER_STRIDED = 0, 1, 2


def _header(group: Rendered, rank: int, outputs: int, leaf_kinds) -> list[str]:
    """Module text up to and including the kernel's setup lines."""
    count = len(group.leaves)
    params = ["start", "stop", "shape"]
    for i in range(count):
        params += [f"b{i}", f"o{i}", f"s{i}"]
    params += [f"out{j}" for j in range(outputs)]
    packed_tables = sorted({scalar.packed_table_source(leaf.dtype)
                            for leaf, kind in zip(group.leaves, leaf_kinds) if kind[0]})
    lines = [PREAMBLE, TRUNC, *helper_lines(group.helpers), *packed_tables, "",
             "@numba.njit(cache=True, nogil=True, error_model='numpy')",
             f"def kernel({', '.join(params)}):"]
    # Index arithmetic is unsigned: numba then skips negative-index wraparound, which lets LLVM
    # vectorize the inner loop (measured 1.6x). Negative strides wrap mod 2**64 and every
    # partial sum of a valid view is >= 0, so the indices are exact.
    lines += [f"    n{k} = np.uint64(shape[{k}])" for k in range(1, rank)]
    for i in range(count):
        lines.append(f"    p{i}_m1 = np.uint64(o{i})")
        lines += [f"    s{i}_{k} = np.uint64(s{i}[{k}])" for k in range(rank)]
    return lines


def _block(leaf_kinds, i: int, k: int) -> int:
    """Leaf i's block divisor along coalesced dim k (1 unless it is a blocked parameter)."""
    kind = leaf_kinds[i] if leaf_kinds is not None else ()
    return kind[2][k] if len(kind) > 2 else 1


def _step(i: int, k: int, leaf_kinds) -> str:
    """Leaf i's offset contribution of loop index i{k}: i{k} * stride, or (i{k} // block) *
    stride for a blocked parameter (a literal divisor: a shift for powers of two)."""
    block = _block(leaf_kinds, i, k)
    return f"i{k} * s{i}_{k}" if block == 1 else f"(i{k} // np.uint64({block})) * s{i}_{k}"


def _loop(k: int, count: int, rank: int, ind: str, leaf_kinds=None) -> list[str]:
    """Header of loop k: its output index q{k} and, above the innermost dim, leaf offsets."""
    loop = "range(np.uint64(start), np.uint64(stop))" if k == 0 else f"range(n{k})"
    inner = ind + "    "
    lines = [f"{ind}for i{k} in {loop}:",
             f"{inner}q{k} = " + (f"i{k}" if k == 0 else f"q{k - 1} * n{k} + i{k}")]
    if k < rank - 1:
        prev = "m1" if k == 0 else str(k - 1)
        lines += [f"{inner}p{i}_{k} = p{i}_{prev} + {_step(i, k, leaf_kinds)}" for i in range(count)]
    return lines


def _split_hoisted(group: Rendered, loads: dict, leaf_kinds, blocked_fixed: bool = False,
                   lines: list | None = None) -> tuple[list[str], list[str]]:
    """(lines whose value does not change along the innermost dim: loads of leaves broadcast
    along it and what is computed from those alone; all other lines). Hoisting the computed
    ones matters beyond speed: LLVM's loop vectorizer takes time exponential in the depth of a
    loop-invariant chain left inside the loop (4 float16 round trips in a row kernel: minutes).
    With ``blocked_fixed`` leaves blocked along the inner dim count as fixed too (inside one
    block of a tiled loop, see _inner_loop). ``lines`` (default: the group's) may be an
    epilogue's, whose row value is never fixed."""
    hoisted, rest, invariant = [], [], set()
    for line in group.lines if lines is None else lines:
        var, expr = line.split(" = ", 1)
        if expr in loads:
            i = int(expr[4:])
            moves = leaf_kinds[i][1] != INNER_BROADCAST and not (blocked_fixed and _block(leaf_kinds, i, -1) != 1)
        else:
            moves = any(name not in invariant for name in re.findall(r"\bt\d+\b", expr))
        if not moves:
            invariant.add(var)
        (rest if moves else hoisted).append(f"{var} = {loads.get(expr, expr)}")
    return hoisted, rest


def kernel_source(group: Group, rank: int, leaf_kinds: list[tuple], stream: tuple = (), math: str = "fast",
                  tile: tuple | int = 0, guards: tuple = ()) -> str:
    """Elementwise kernel for ``group`` at a coalesced ``rank``: the schedule of
    dsl/kir/elementwise.py rendered by loops.py. leaf_kinds[i] = (packed, inner) or, for a
    blocked parameter, (packed, inner, block divisor per dim); outputs whose index is in
    ``stream`` are written with streaming stores; ``math`` is the float math mode ("fast" or
    "exact", see fused.py); ``tile`` ((rows, cols), staged leaves, those of them with unit
    stride along dim -2; or 0) walks the last two dims in tiles; ``guards`` gives each
    concatenation guard's coalesced dim (group.guards; their bounds: the kernel's ``bounds``
    argument)."""
    layouts = [elementwise.Layout(kind[0], kind[1], kind[2] if len(kind) > 2 else (), leaf.guard,
                                  tuple(coordinate for coordinate, _ in leaf.gathers))
               for leaf, kind in zip(group.leaves, leaf_kinds)]
    inputs = [(leaf.dtype, kind[0]) for leaf, kind in zip(group.leaves, leaf_kinds)]
    shape = elementwise.Tile(*tile[0], tuple(tile[1]), tuple(tile[2])) if tile else None
    kernel = elementwise.elementwise_kernel(group.outputs, [s.type.dtype for s in group.sinks], inputs, layouts, rank,
                                            stream, shape, tuple(guards))
    return loops.kernel_source(kernel, math)


def _inner_block(leaf_kinds, last: int) -> int:
    """The block size of the leaves blocked along the inner dim (0: none, or sizes differ)."""
    blocks = {_block(leaf_kinds, i, last) for i in range(len(leaf_kinds))} - {1}
    return blocks.pop() if len(blocks) == 1 else 0


def _inner_loop(group: Rendered, rank: int, leaf_kinds, loads: dict, lo: str, hi: str, wrap) -> list[str]:
    """The innermost loop, i{last} over [lo, hi); ``wrap(lines)`` gives an element's statements
    around its computed lines (the caller hoists what is fixed along the whole dim).

    Parameters blocked along this dim (one value per run of B elements: blocked quantization
    along the last axis) are tiled: a loop over blocks loads them, and computes what depends
    only on them, once per block; the elements of a block then run as a plain loop (or a byte
    pair loop) that LLVM vectorizes (an int4 [4096, 8192] dequant with blocks of 32: 14 -> 5 ms)."""
    last = rank - 1
    pairs = _byte_pair_leaves(group, leaf_kinds)
    block = _inner_block(leaf_kinds, last)
    if not block:
        return _elements(group, rank, leaf_kinds, pairs, loads, lo, hi, wrap, False)
    prev = "m1" if rank == 1 else str(rank - 2)
    tiled = dict(loads)
    tiled.update((f"LOAD{i}", _load(group, leaf_kinds, i, f"p{i}_{prev} + bk_ * s{i}_{last}"))
                 for i in range(len(group.leaves)) if _block(leaf_kinds, i, last) != 1)
    outer = {line.split(" = ")[0] for line in _split_hoisted(group, loads, leaf_kinds)[0]}
    per_block = [line for line in _split_hoisted(group, tiled, leaf_kinds, True)[0] if line.split(" = ")[0] not in outer]
    size = f"np.uint64({block})"
    return [f"lo0_ = {lo}", f"hi0_ = {hi}",
            f"for bk_ in range(lo0_ // {size}, (hi0_ + np.uint64({block - 1})) // {size}):",
            f"    lob_ = max(lo0_, bk_ * {size})", f"    hib_ = min(hi0_, bk_ * {size} + {size})",
            *["    " + line for line in per_block],
            *["    " + line for line in _elements(group, rank, leaf_kinds, pairs, tiled, "lob_", "hib_", wrap, True)]]


def _elements(group: Rendered, rank: int, leaf_kinds, pairs: list[int], loads: dict, lo: str, hi: str,
              wrap, blocked_fixed: bool) -> list[str]:
    """Element loop i{last} over [lo, hi): byte pairs when ``pairs``, else one element a step."""
    last = rank - 1
    one = wrap(_split_hoisted(group, loads, leaf_kinds, blocked_fixed)[1])
    if pairs:
        return _byte_pairs(group, rank, leaf_kinds, pairs, loads, lo, hi, wrap, one, blocked_fixed)
    span = f"range({hi})" if lo == "np.uint64(0)" else f"range({lo}, {hi})"
    return [f"for i{last} in {span}:", *["    " + line for line in one]]


def _store(j: int, index: str, value: str, stream: tuple) -> str:
    """``out{j}[index] = value``; a streaming (non-temporal) store when j is in ``stream``: for
    outputs far larger than the caches it skips reading each line before writing it (measured
    1.8x on a 64 MiB float32 result). runtime.py streams only 64-byte aligned rows."""
    if j in stream:
        return f"_bits.stream_store(out{j}, {index}, {value})"
    return f"out{j}[{index}] = {value}"


def _fence(stream: tuple) -> list[str]:
    """The kernel's last line when it streamed: the stores land before the caller reads them."""
    return ["    _bits.stream_fence()"] if stream else []


def _byte_pair_leaves(group: Rendered, leaf_kinds) -> list[int]:
    """Indices of 4-bit packed leaves read with unit inner stride, when every packed leaf read
    along the inner dim is one: such kernels walk the inner dim a byte (two elements) at a time.
    (A blocked packed parameter loads per element inside that loop.)"""
    moving = [i for i, kind in enumerate(leaf_kinds)
              if kind[0] and kind[1] != INNER_BROADCAST and _block(leaf_kinds, i, -1) == 1]
    if moving and all(leaf_kinds[i][1] == INNER_UNIT and group.leaves[i].dtype.bits == 4 for i in moving):
        return moving
    return []


def _nibble(dt, byte: str, k: int) -> str:
    """Element k (0: low nibble, 1: high) of the int32 ``byte`` (scalar.load_part)."""
    return scalar.load_part(dt, byte, k)


def _byte_pairs(group: Rendered, rank: int, leaf_kinds, pairs: list[int], loads: dict, lo: str, hi: str,
                wrap, one: list[str], blocked_fixed: bool = False) -> list[str]:
    """Inner loop i{last} in [lo, hi) two elements per step while every byte-pair leaf starts on
    a byte boundary: one byte load, both nibbles decoded by constant shifts (measured 1.8x on an
    int4 dequant); an odd tail element and odd starts run ``one`` (the one-element body).
    ``wrap(lines)`` gives an element's statements around its computed lines."""
    last, prev = rank - 1, "m1" if rank == 1 else str(rank - 2)
    even = " and ".join(f"((p{i}_{prev} + lo_) & np.uint64(1)) == 0" for i in pairs)

    def element(k: int) -> list[str]:
        decoded = dict(loads)
        decoded.update((f"LOAD{i}", _nibble(group.leaves[i].dtype, f"pk{i}", k)) for i in pairs)
        return wrap(_split_hoisted(group, decoded, leaf_kinds, blocked_fixed)[1])

    step = ["    " + line for line in
            [f"i{last} = lo_ + (jj << np.uint64(1))",
             *[f"pk{i} = np.int32(b{i}[pb{i} + jj])" for i in pairs],
             *element(0), f"i{last} = i{last} + np.uint64(1)", *element(1)]]
    # byte indices as base + jj (not (p + i) >> 1): LLVM then sees consecutive loads and vectorizes
    return [f"lo_ = {lo}", f"hi_ = {hi}", f"if {even}:",
            *[f"    pb{i} = (p{i}_{prev} + lo_) >> np.uint64(1)" for i in pairs],
            "    for jj in range((hi_ - lo_) >> np.uint64(1)):", *["    " + line for line in step],
            "    if (hi_ - lo_) & np.uint64(1):", f"        i{last} = hi_ - np.uint64(1)",
            *["        " + line for line in one],
            "else:", f"    for i{last} in range(lo_, hi_):", *["        " + line for line in one]]


_ROW_INIT = {"sum": "0", "mean": "0", "max": "-np.inf", "min": "np.inf"}


def _accumulate(kind: str, acc: str, value: str, is_float: bool) -> str:
    """One accumulation step: branch-free, so the row loop vectorizes. Float max/min propagate
    NaN themselves (IEEE maximum / minimum)."""
    if kind in ("sum", "mean"):
        return f"{acc} = _bits.add_step({acc}, {value})"
    if is_float:
        return f"{acc} = _bits.{kind}imum_step({acc}, {value})"
    return f"{acc} = _bits.{kind}_step({acc}, {value})"


def row_source(group: Group, kind, rank: int, leaf_kinds, out_dtype, stream: tuple = (), math: str = "fast") -> str:
    """Kernel reducing (or soft-maxing) ``group``'s single sink along its last dim.

    ``kind`` may be a list of reductions ('sum', 'mean', 'max', 'min') with one ``out_dtype``
    each: one pass over every row then feeds all of them (out0, out1, ...).
    Rows are dims 0..rank-2 (coalesced); the last dim is walked once per pass. Sums and
    softmax denominators accumulate in float64 (int64 for integers), then round once.
    A softmax output with index 0 in ``stream`` is written with streaming stores. With
    ``math="fast"`` a float32 softmax row computes in float32 (see _softmax_row_f32).
    """
    group = render(group, math)
    kinds = [kind] if isinstance(kind, str) else list(kind)
    out_dtypes = [out_dtype] if isinstance(kind, str) else list(out_dtype)
    kind = kinds[0]
    # Only the accumulation steps may reassociate (kernels/bits.py add_step/max_step): that
    # lets LLVM vectorize reductions (numpy's pairwise sums reorder too) while the element
    # expressions keep exact IEEE semantics.
    body = _header(group, rank, len(kinds), leaf_kinds)
    value_domain = scalar.domain(group.sinks[0].type.dtype)
    is_float = scalar.is_float_domain(value_domain)
    loads = _loads(group, rank, leaf_kinds)
    hoisted = _split_hoisted(group, loads, leaf_kinds)[0]
    last = rank - 1
    body.append(f"    rowlen = np.uint64(shape[{last}])")
    fast_softmax = kind in ("softmax", "logsoftmax") and math == "fast" and value_domain == "float32"
    if kind in ("softmax", "logsoftmax"):
        body.append(f"    tmp = np.empty(shape[{last}], np.{'float32' if fast_softmax else 'float64'})")
        scratch = fast_softmax and group.epilogue is None and out_dtypes[0].onnx_name == "float" and 0 not in stream
        if fast_softmax and kind == "logsoftmax" and not scratch:
            body.append(f"    etmp = np.empty(shape[{last}], np.float32)")
        if group.epilogue is not None:
            body.append(f"    rowv = np.empty(shape[{last}], np.{scalar.domain(group.epilogue.row_dtype)})")
    for k in range(rank - 1):
        body += _loop(k, len(group.leaves), rank, "    " * (k + 1), leaf_kinds)
    ind = "    " * rank
    row_index = f"q{rank - 2}"
    body += _prefetch_next_row(group, rank, leaf_kinds, ind, kind not in ("softmax", "logsoftmax"))
    value = group.out_vars[0]

    def row_pass(extra: list[str]) -> list[str]:
        code = _inner_loop(group, rank, leaf_kinds, loads, "np.uint64(0)", "rowlen", lambda body: [*body, *extra])
        return [ind + line for line in code]

    body += [ind + line for line in hoisted]
    if kind in ("softmax", "logsoftmax"):
        store = _epilogue_stores(group, loads, leaf_kinds, ind, last, row_index, out_dtypes[0], stream,
                                 "float32" if fast_softmax else "float64")
        if fast_softmax:
            # (an epilogue's log-softmax values are computed in a loop of their own: from tmp)
            reload = all(re.fullmatch(r"t\d+ = LOAD\d+", line) for line in group.lines) and \
                (kind == "softmax" or group.epilogue is None)
            body += _softmax_row_f32(kind, value, ind, last, row_pass, store,
                                     f"{row_index} * rowlen + i{last}" if scratch else None, reload)
        else:
            body += _softmax_row(kind, value, value_domain, ind, last, row_pass, store)
        return "\n".join(body + _fence(stream)) + "\n"
    steps, stores, exact = [], [], []
    for j, (kind, out_dtype) in enumerate(zip(kinds, out_dtypes)):
        acc, init = f"acc{j}", _ROW_INIT[kind]
        # integer sums in uint64: the same bits as int64, without numba's no-signed-wrap promise
        # (a wrapping int64 sum is defined); an integer mean needs the signed total (32-bit rows)
        acc_domain = value_domain if kind in ("max", "min") else "float64" if is_float else \
            "int64" if kind == "mean" else "uint64"
        body.append(f"{ind}{acc} = np.{acc_domain}({init})" if init in ("0",) or is_float
                    else f"{ind}{acc} = {_int_extreme(value_domain, kind)}")
        if kind in ("max", "min") and is_float:  # (maxnum and a NaN flag: see _guard_extremes)
            steps.append(f"{acc} = _bits.{kind}num_step({acc}, np.{acc_domain}({value}))")
            exact.append((acc, f"np.{acc_domain}({init})", _accumulate(kind, acc, f"np.{acc_domain}({value})", True)))
        else:
            steps.append(_accumulate(kind, acc, f"np.{acc_domain}({value})", is_float))
        result = acc
        if kind == "mean":  # integers: the exact mean truncated toward zero
            result = f"{acc} / np.float64(rowlen)" if is_float else f"_c_div({acc}, np.int64(rowlen))"
        if group.epilogue is not None:  # (a reduction alone in its kernel) its consumers, per row
            epilogue = group.epilogue
            stores.append(f"{ind}{epilogue.row_var} = {scalar.coerce(result, acc_domain, epilogue.row_dtype)}")
            fixed, moving = _split_hoisted(group, loads, leaf_kinds, lines=epilogue.lines)
            if tuple(epilogue.sinks[0].type.shape) == tuple(group.shape):
                # reduce then broadcast (x - max(x, -1)): a second pass over the row computes the
                # consumers per element with the row's result as a scalar
                stores += [ind + line for line in fixed]
                stores += [f"{ind}for i{last} in range(rowlen):", *[f"{ind}    {line}" for line in moving],
                           *[f"{ind}    out{k}[{row_index} * rowlen + i{last}] = {scalar.store(sink.type.dtype, var)}"
                             for k, (sink, var) in enumerate(zip(epilogue.sinks, epilogue.out_vars))]]
                continue
            stores += [ind + line for line in fixed + moving]  # (its leaves are per row: loads substituted)
            stores += [f"{ind}out{k}[{row_index}] = {scalar.store(sink.type.dtype, var)}"
                       for k, (sink, var) in enumerate(zip(epilogue.sinks, epilogue.out_vars))]
            continue
        coerced = scalar.coerce(result, acc_domain, out_dtype)
        stores.append(f"{ind}out{j}[{row_index}] = {scalar.store(out_dtype, coerced)}")
    if exact:
        steps.append(f"rnan_ = rnan_ | ({value} != {value})")
        body.append(f"{ind}rnan_ = False")
        passes = row_pass(steps) + _guard_extremes(exact, ind, lambda extra: ["    " + line for line in row_pass(extra)])
        return "\n".join(body + passes + stores) + "\n"
    return "\n".join(body + row_pass(steps) + stores) + "\n"


PREFETCH_BYTES = 4096  # of the next row, at most (longer rows are streams the hardware prefetches)


def _prefetch_next_row(group: Rendered, rank: int, leaf_kinds, ind: str, whole: bool) -> list[str]:
    """Before a row's passes: a prefetch of the first PREFETCH_BYTES of the next row of each
    leaf read along the row with unit stride (plain, unblocked elements), one per cache line,
    when that row is in this loop's range; with ``whole`` only for rows of at most
    PREFETCH_BYTES. The row's passes then compute while memory brings the next row in.
    Interleaved medians over 32 MiB of float32 (rows of 64 to 32768, with and without): softmax
    rows of 64 to 4096 3.5-3.7 -> 2.8-3.3 ms ([32, 512, 512] against onnxruntime, results evicted between
    runs: 2.6-2.7 -> 2.1-2.2); a sum of squares 2.0 -> 1.3 ms on rows of 64-128 and 1.6 -> 1.4
    at 1024, but 10-20% slower from rows of 4096 (long streams the hardware prefetches
    itself): reductions prefetch whole short rows only."""
    if rank < 2:
        return []
    k, inner = rank - 2, ind + "    "
    end = "np.uint64(stop)" if k == 0 else f"n{k}"
    lines, widest = [], 1
    for i, (leaf, kind) in enumerate(zip(group.leaves, leaf_kinds)):
        if kind[0] or kind[1] != INNER_UNIT or _block(leaf_kinds, i, rank - 1) != 1:
            continue
        size = max(1, leaf.dtype.bits // 8)
        widest = max(widest, size)
        span = f"min(rowlen, np.uint64({PREFETCH_BYTES // size}))"
        lines += [f"{inner}if s{i}_{k} != np.uint64(0):",  # (not a row broadcast: gamma, a bias)
                  f"{inner}    for f_ in range(np.uint64(0), {span}, np.uint64({max(1, 64 // size)})):",
                  f"{inner}        _bits.prefetch(b{i}, p{i}_{k} + s{i}_{k} + f_)"]
    short = f" and rowlen <= np.uint64({PREFETCH_BYTES // widest})" if whole else ""
    return [f"{ind}if i{k} + np.uint64(1) < {end}{short}:", *lines] if lines else []


def _guard_extremes(exact: list, ind: str, row_pass) -> list[str]:
    """Float max / min rows accumulate maxnum / minnum (one SIMD instruction; kernels/bits.py)
    and a NaN flag ``rnan_``; a row that saw a NaN or whose extreme is a zero is reduced again
    with the exact IEEE maximum / minimum steps. ``exact``: per accumulator (name, initial
    value, exact step); ``row_pass(steps)``: a pass over the row, one level deeper."""
    redo = " or ".join(["rnan_", *[f"{acc} == 0" for acc, _, _ in exact]])
    return [f"{ind}if {redo}:", *[f"{ind}    {acc} = {init}" for acc, init, _ in exact],
            *row_pass([step for _, _, step in exact])]


_LN_2_64 = 64 * math.log(2.0)


def _softmax_row_f32(kind, value, ind, last, row_pass, store, scratch, reload) -> list[str]:
    """The fast-math float32 row (float32 inputs, float16 and bfloat16 too): max (maxnum and a NaN
    flag; the rare rows with a NaN or a zero maximum are rescanned with the IEEE maximum);
    2**64 exp(v - max) by kernels/vmath.py's exp_times_2_64_f32 (below 1 ulp; never subnormal,
    so 2**k is an exponent add: 20-25% faster than exp_f32 on AVX2) in a loop of its own, the
    2**64 cancelling in the division by their sum (log-softmax: log(sum) - 64 ln 2; a row whose
    max is NaN or +-inf, where v - max may be NaN, gets a NaN sum: all NaN, as numpy); their sum
    in float64 in the next loop (in one loop the float64 sum made LLVM vectorize the exponential
    at 8 lanes, not 16: softmax [32, 512, 512] 2.8 -> 2.3 ms); scale by 1 / sum rounded to float32, or subtract
    max + log(sum). As in onnxruntime's and jax's softmax, v - max is a float32 difference: its
    rounding gives the result a relative error up to |v - max| * 2**-24 besides the few ulp of
    the rest (tests/dsl/test_fast_math.py). A compensated difference (TwoSum) cost 40% more time.

    ``reload``: the row value is a load alone, read again where it is needed instead of copied
    into ``tmp`` by the max pass. ``scratch``: the output's index along the row when the output
    is float32, unstreamed and has no epilogue: the exponentials are written there and scaled
    in place (the same bits, one pass over a row buffer fewer: 2.3 -> 2.0 ms)."""
    inner, i = ind + "    ", f"i{last}"
    reread = [f"v = np.float32({value})"]
    keep = [] if reload else [f"tmp[{i}] = v"]
    lines = [f"{ind}acc = np.float32(-np.inf)", f"{ind}rnan_ = False"]
    lines += row_pass([*reread, *keep, "acc = _bits.maxnum_step(acc, v)", "rnan_ = rnan_ | (v != v)"])
    if reload:
        rescan = lambda steps: ["    " + line for line in row_pass([*reread, *steps])]  # noqa: E731
        step = _accumulate("max", "acc", "v", True)
    else:
        rescan = lambda steps: [f"{ind}    for r_ in range(rowlen):", *[f"{ind}        {x}" for x in steps]]  # noqa: E731
        step = _accumulate("max", "acc", "tmp[r_]", True)
    lines += _guard_extremes([("acc", "np.float32(-np.inf)", step)], ind, rescan)
    exps = f"out0[{scratch}]" if scratch else f"tmp[{i}]" if kind == "softmax" else f"etmp[{i}]"
    exp = f"{exps} = _vmath.exp_times_2_64_f32(v - acc)"
    lines += row_pass([*reread, exp]) if reload else [f"{ind}for {i} in range(rowlen):", f"{inner}v = tmp[{i}]",
                                                    f"{inner}{exp}"]
    lines += [f"{ind}total = 0.0", f"{ind}for {i} in range(rowlen):",
              f"{inner}total = _bits.add_step(total, np.float64({exps}))",
              f"{ind}total = total if acc - acc == np.float32(0.0) else np.nan"]  # (a NaN or +-inf max: NaN)
    if kind == "softmax":
        lines.append(f"{ind}scale = np.float32(1.0 / total)")
        if scratch:
            return lines + [f"{ind}for {i} in range(rowlen):", f"{inner}{exps} = {exps} * scale"]
        before, body = store(f"tmp[{i}] * scale")
        return lines + [ind + line for line in before] + [f"{ind}for {i} in range(rowlen):",
                                                          *[inner + line for line in body]]
    lines.append(f"{ind}shift = acc + np.float32(np.log(total) - {_LN_2_64!r})")  # (the 2**64)
    before, body = store("v - shift" if reload else f"tmp[{i}] - shift")
    lines += [ind + line for line in before]
    if reload:
        return lines + row_pass([*reread, *body])
    return lines + [f"{ind}for {i} in range(rowlen):", *[inner + line for line in body]]


def _softmax_row(kind, value, value_domain, ind, last, row_pass, store) -> list[str]:
    """Three passes over a row (max; exp and sum; scale), all in float64 so the result rounds
    once. Narrow-float rows use the vectorizable exp_for_f32 (numpy's SIMD exp is the peer);
    float64 rows use libm exp. ``store(result)`` gives the last pass's body (see
    _epilogue_stores) and the lines to run before it."""
    exp = "np.exp" if value_domain == "float64" else "_bits.exp_for_f32"
    inner = ind + "    "
    lines = [f"{ind}acc = -np.inf"]
    lines += row_pass([f"v = np.float64({value})", f"tmp[i{last}] = v", _accumulate("max", "acc", "v", True)])
    lines += [f"{ind}total = 0.0", f"{ind}for i{last} in range(rowlen):", f"{inner}e = {exp}(tmp[i{last}] - acc)",
              f"{inner}total = _bits.add_step(total, e)"]
    if kind == "softmax":
        lines += [f"{inner}tmp[i{last}] = e", f"{ind}scale = 1.0 / total"]
        result = f"tmp[i{last}] * scale"
    else:
        lines.append(f"{ind}shift = acc + np.log(total)")
        result = f"tmp[i{last}] - shift"
    before, body = store(result)
    return lines + [ind + line for line in before] + [f"{ind}for i{last} in range(rowlen):",
                                                      *[inner + line for line in body]]


def _softmax_values(epilogue, result: str, ind: str, last: int, domain: str = "float64") -> list[str]:
    """An epilogue's softmax values, rounded to their type, into the row buffer ``rowv`` in a
    loop of their own: the epilogue's loop then has no float64 in it and vectorizes twice as
    wide (softmax -> float16: 15 -> 11 ms on [16, 512, 512], as fast as two kernels)."""
    return [f"{ind}for i{last} in range(rowlen):",
            f"{ind}    rowv[i{last}] = {scalar.coerce(result, domain, epilogue.row_dtype)}"]


def _epilogue_stores(group: Rendered, loads: dict, leaf_kinds, ind, last, row_index, out_dtype, stream,
                     domain: str = "float64"):
    """store(result) for _softmax_row: the softmax value (an expression of ``domain``) rounded to
    its type and written out, or, with an epilogue, fed to the epilogue's ops whose results are
    written (their lines that do not move along the row run once per row, before the pass)."""
    index = f"{row_index} * rowlen + i{last}"
    epilogue = group.epilogue

    def store(result: str) -> tuple[list[str], list[str]]:
        if epilogue is None:
            coerced = scalar.coerce(result, domain, out_dtype)
            return [], [_store(0, index, scalar.store(out_dtype, coerced), stream)]
        before, moving = _split_hoisted(group, loads, leaf_kinds, lines=epilogue.lines)
        before = [*_softmax_values(epilogue, result, "", last, domain), *before]
        body = [f"{epilogue.row_var} = rowv[i{last}]", *moving]
        body += [_store(j, index, scalar.store(sink.type.dtype, var), stream)
                 for j, (sink, var) in enumerate(zip(epilogue.sinks, epilogue.out_vars))]
        return before, body
    return store


def _int_extreme(domain: str, kind: str) -> str:
    info = np.iinfo(domain) if domain != "bool_" else None
    if info is None:
        return "False" if kind == "max" else "True"
    return f"np.{domain}({info.min if kind == 'max' else info.max})"


def _load(group: Rendered, leaf_kinds, i: int, index: str) -> str:
    leaf = group.leaves[i]
    return scalar.load(leaf.dtype, leaf_kinds[i][0], f"b{i}", index, f"_T_{leaf.dtype.onnx_name}")


def _loads(group: Rendered, rank: int, leaf_kinds) -> dict[str, str]:
    """LOADi placeholder -> load expression at the innermost loop's index."""
    last, prev = rank - 1, "m1" if rank == 1 else str(rank - 2)
    loads = {}
    for i, kind in enumerate(leaf_kinds):
        if _block(leaf_kinds, i, last) != 1:
            index = f"p{i}_{prev} + {_step(i, last, leaf_kinds)}"
        else:
            index = {INNER_BROADCAST: f"p{i}_{prev}", INNER_UNIT: f"p{i}_{prev} + i{last}",
                     INNER_STRIDED: f"p{i}_{prev} + i{last} * s{i}_{last}"}[kind[1]]
        loads[f"LOAD{i}"] = _load(group, leaf_kinds, i, index)
    return loads
