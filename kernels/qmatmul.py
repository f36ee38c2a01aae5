"""Quantized matmul: ``out = x @ W^T`` for a W of packed codes, read straight from the codes:
the dequantized weight is never written out in full.

W is N rows of K codes of ``bits`` bits (2, 4 or 8), dequantized blockwise along K: row n's
block j (``block`` codes, G = block * bits / 8 bytes) has a scale s[n, j] and a zero point
z[n, j], and a code's weight is ``(value(code) - z) * s`` (DequantizeLinear's and MatMulNBits'
formula). A code's value is the unsigned integer in its bits minus ``offset`` (2^(bits-1) for a
signed type, whose codes are made unsigned by xor with ``flip``), or ``table[code]`` for float
codes (float8, float4e2m1). So that a block's scale multiplies once per block, not per code,

    out[m, n] = sum_j s[n, j] * (sum_{k in j} u_k x[m, k] - (offset + z[n, j]) * X[m, j]),

with u the unsigned values and X[m, j] the sum of x over block j (computed once per call). The
sums are float32, reassociated (vectorized), as BLAS's are; the result differs from
``x @ dequantized(W)^T`` by float32 rounding only. Where a loop writes weights out (``decode``,
and the GEMV of several rows, which decodes a row of W once for all rows of x) each is
``(value - (offset + z)) * s`` (an exact difference, one rounding): DequantizeLinear's float32
result, bit for bit.

Two layouts of the codes:
- **lanes** (``pack_lanes``, built once for a constant weight): row n's bytes are [G, nb],
  byte (t, j) holding byte t of block j. The inner loop runs over the blocks j as the vector
  lanes, unit-stride, each lane accumulating its own block, so no scale is spread per code.
- **plain** ([N, row_bytes], ONNX's raw layout of an int4 [N, K] tensor and MatMulNBits' B): a
  run-time weight is read as it is; the inner loop runs over the row's bytes and takes each
  byte's scale by index (block bytes a power of two).

A code's bits are cut out in uint8 (numba promotes integer arithmetic to int64, and LLVM then
vectorizes in 8-lane int64 vectors; ``np.uint8`` around each step narrows them back) and its
phase p (the p-th code of a byte) meets x split by phase, so every loop is unit-stride.
Indices are uint64: numba checks a signed index for wraparound, which blocks vectorization.

Entry points: ``gemv`` (M <= ROWS_MAX rows of x: N is split over the threads, so the packed
bytes stream once) and ``decode`` (rows n0..n1 of W as float32, K in the kernels' order, which
``in_kernel_order`` gives x too: the tiles a prefill matmul hands to BLAS). Callers check shapes and that the codes cover every block (kernels trust their
inputs).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache

import numba
import numpy as np

from . import bits as bits_

ROWS_MAX = 16   # rows of x up to which ``gemv`` beats dequantized tiles through BLAS
# Rows of W ahead whose codes a one-row GEMV hints to the caches. int4 4096 x 4096 layers, 960 MiB
# of codes (twice the L3), against onnxruntime: 124.7 ms without, 107.3 ms with 4 rows ahead
# (0.92x -> 1.10x); 8 and 16 rows measured the same as 4
PREFETCH_ROWS = 4
_FAST = {"reassoc", "contract"}
_FACTORED_LIMIT = 2.0 ** 120  # bound on the factored sum's terms below which none can overflow float32
_U = np.uint64


@dataclass(frozen=True)
class Codes:
    """How W's codes decode: ``bits`` per code; ``signed`` integers (offset 2^(bits-1)), or
    ``table`` (a float32 value per code) for float codes."""

    bits: int
    signed: bool = False
    table: np.ndarray | None = None

    @cached_property
    def flip(self) -> np.uint8:
        top = 1 << (self.bits - 1)
        return np.uint8(sum(top << s for s in range(0, 8, self.bits)) if self.signed and self.table is None else 0)

    @cached_property
    def offset(self) -> np.float32:
        return np.float32(1 << (self.bits - 1) if self.signed and self.table is None else 0)

    @cached_property
    def values(self) -> np.ndarray:
        """The table the loops index (zeros, never read, for integer codes)."""
        return np.zeros(256, np.float32) if self.table is None else np.ascontiguousarray(self.table, np.float32)


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def _dots(w, x, out, r):
    """out[m, r] = w . x[m] for every row m of x, four rows a pass (w loaded once for four)."""
    rows = x.shape[0]
    m = 0
    while m + 4 <= rows:
        x0, x1, x2, x3 = x[m], x[m + 1], x[m + 2], x[m + 3]
        a0 = a1 = a2 = a3 = np.float32(0.0)
        for i in range(w.size):
            k = _U(i)
            v = w[k]
            a0 += v * x0[k]
            a1 += v * x1[k]
            a2 += v * x2[k]
            a3 += v * x3[k]
        out[m, r], out[m + 1, r], out[m + 2, r], out[m + 3, r] = a0, a1, a2, a3
        m += 4
    while m < rows:
        xm = x[m]
        a = np.float32(0.0)
        for i in range(w.size):
            a += w[_U(i)] * xm[_U(i)]
        out[m, r] = a
        m += 1


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def _dots4(w, x, out, r):
    """out[m, r + j] = w[j] . x[m] for the 4 rows j of w and every row m of x: a 4 x 4 block of
    dot products a pass, each w and x vector loaded once for four products (4 rows of w at a time
    against _dots' one: 38.5 against 21.5 GFMA/s a core, x [16, 4096] in L2)."""
    rows = x.shape[0]
    w0, w1, w2, w3 = w[0], w[1], w[2], w[3]
    m = 0
    while m + 4 <= rows:
        x0, x1, x2, x3 = x[m], x[m + 1], x[m + 2], x[m + 3]
        a00 = a01 = a02 = a03 = a10 = a11 = a12 = a13 = np.float32(0.0)
        a20 = a21 = a22 = a23 = a30 = a31 = a32 = a33 = np.float32(0.0)
        for i in range(w0.size):
            k = _U(i)
            v0, v1, v2, v3 = w0[k], w1[k], w2[k], w3[k]
            y0, y1, y2, y3 = x0[k], x1[k], x2[k], x3[k]
            a00 += v0 * y0
            a01 += v1 * y0
            a02 += v2 * y0
            a03 += v3 * y0
            a10 += v0 * y1
            a11 += v1 * y1
            a12 += v2 * y1
            a13 += v3 * y1
            a20 += v0 * y2
            a21 += v1 * y2
            a22 += v2 * y2
            a23 += v3 * y2
            a30 += v0 * y3
            a31 += v1 * y3
            a32 += v2 * y3
            a33 += v3 * y3
        out[m, r], out[m, r + 1], out[m, r + 2], out[m, r + 3] = a00, a01, a02, a03
        out[m + 1, r], out[m + 1, r + 1], out[m + 1, r + 2], out[m + 1, r + 3] = a10, a11, a12, a13
        out[m + 2, r], out[m + 2, r + 1], out[m + 2, r + 2], out[m + 2, r + 3] = a20, a21, a22, a23
        out[m + 3, r], out[m + 3, r + 1], out[m + 3, r + 2], out[m + 3, r + 3] = a30, a31, a32, a33
        m += 4
    if m < rows:
        for j in range(4):
            _dots(w[j], x[m:], out[m:], r + j)


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def _lanes_dot(row, xt, acc, flip, table, bits, per, mask, use_table):
    """acc[j] += sum_{t, p} u(row[t, j], p) * xt[p, t, j] (row: [G, nb] bytes)."""
    for t in range(row.shape[0]):
        codes = row[t]
        for i in range(row.shape[1]):
            j = _U(i)
            c = np.uint8(codes[j] ^ flip)
            a = acc[j]
            for p in range(per):
                u = np.uint8(np.uint8(c >> np.uint8(p * bits)) & np.uint8(mask))
                a += (table[u] if use_table else np.float32(u)) * xt[p, t, j]
            acc[j] = a


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def _lanes_weights(row, scale_row, zero_row, offset, flip, table, out, bits, per, mask, use_table):
    """out[p, t, j] = the weight of code p of byte (t, j) of ``row``."""
    for t in range(row.shape[0]):
        codes = row[t]
        for i in range(row.shape[1]):
            j = _U(i)
            c = np.uint8(codes[j] ^ flip)
            s = scale_row[j]
            e = offset + zero_row[j]
            for p in range(per):
                u = np.uint8(np.uint8(c >> np.uint8(p * bits)) & np.uint8(mask))
                out[p, t, j] = ((table[u] if use_table else np.float32(u)) - e) * s


# Block bytes from which ``_plain_dot`` takes a row in two passes (the byte dots into a buffer,
# then a sum a block): int4 [4096, 4096] GEMVs on one thread, interleaved medians, ms, one pass /
# two passes: blocks of 64 codes 4.88 / 3.29, 128 codes 4.73 / 2.73, 256 codes 3.06 / 1.86. At 32
# codes (16 bytes) the two passes measured no faster (3.25 / 3.19): the block's loop is too short
# to vectorize, and the one pass loads each byte's scale on its own.
TWO_PASS_BYTES = 32


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def _plain_dot(row, xp, scale_row, shift, flip, table, bits, per, mask, use_table, qbuf):
    """sum_b s[b >> shift] sum_p u(row[b], p) xp[p, b] (``qbuf``: row.size float32 scratch)."""
    total = np.float32(0.0)
    if scale_row.size == 1:  # (one scale: no index per byte)
        for i in range(row.size):
            b = _U(i)
            c = np.uint8(row[b] ^ flip)
            for p in range(per):
                u = np.uint8(np.uint8(c >> np.uint8(p * bits)) & np.uint8(mask))
                total += (table[u] if use_table else np.float32(u)) * xp[p, b]
        return scale_row[0] * total
    if (1 << shift) >= TWO_PASS_BYTES:  # (the byte dots, unit-stride, then each block's sum)
        for i in range(row.size):
            b = _U(i)
            c = np.uint8(row[b] ^ flip)
            q = np.float32(0.0)
            for p in range(per):
                u = np.uint8(np.uint8(c >> np.uint8(p * bits)) & np.uint8(mask))
                q += (table[u] if use_table else np.float32(u)) * xp[p, b]
            qbuf[b] = q
        g = _U(1) << _U(shift)
        for j in range(scale_row.size):
            start = _U(j) * g
            stop = min(start + g, _U(row.size))
            part = np.float32(0.0)
            for i in range(start, stop):
                part += qbuf[_U(i)]
            total += scale_row[j] * part
        return total
    for i in range(row.size):
        b = _U(i)
        c = np.uint8(row[b] ^ flip)
        q = np.float32(0.0)
        for p in range(per):
            u = np.uint8(np.uint8(c >> np.uint8(p * bits)) & np.uint8(mask))
            q += (table[u] if use_table else np.float32(u)) * xp[p, b]
        total += scale_row[b >> _U(shift)] * q
    return total


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def _plain_weights(row, scale_row, zero_row, offset, shift, flip, table, out, bits, per, mask, use_table):
    """out[p, b] = the weight of code p of byte b of ``row``."""
    for i in range(row.size):
        b = _U(i)
        c = np.uint8(row[b] ^ flip)
        j = b >> _U(shift)
        s = scale_row[j]
        e = offset + zero_row[j]
        for p in range(per):
            u = np.uint8(np.uint8(c >> np.uint8(p * bits)) & np.uint8(mask))
            out[p, b] = ((table[u] if use_table else np.float32(u)) - e) * s


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def _lanes_rows(r0, r1, args, decode, bits, per, mask, use_table):
    """Rows r0 <= r < r1 of W in the lanes layout: with ``decode`` out[r - n0] = the row's
    weights in the kernels' order of K, else out[:, r] = x @ row."""
    xt, sums, codes, scale, zero, offset, flip, table, n0, out = args
    g, nb = codes.shape[1], codes.shape[2]
    rows = xt.shape[0]
    blocked = not decode and rows > 1  # (several rows of x: W's rows decoded into these buffers)
    acc = np.empty(nb, np.float32)
    weights = np.empty((per if blocked else 0, g, nb), np.float32)
    block = np.empty((4 if blocked else 0, per, g, nb), np.float32)
    flat = codes.reshape(codes.size)
    row_bytes = _U(g * nb)
    r = r0
    if blocked:  # (4 rows of W decoded, then a 4 x 4 block of dots a pass)
        while r + 4 <= r1:
            for j in range(4):
                _lanes_weights(codes[r + j], scale[r + j], zero[r + j], offset, flip, table, block[j], bits, per, mask,
                               use_table)
            _dots4(block.reshape((4, -1)), xt.reshape((rows, -1)), out, r)
            r += 4
    for r in range(r, r1):
        if decode:
            _lanes_weights(codes[r], scale[r], zero[r], offset, flip, table, out[r - n0].reshape((per, g, nb)),
                           bits, per, mask, use_table)
        elif rows == 1:
            ahead = _U(r + PREFETCH_ROWS) * row_bytes
            for line in range(0, row_bytes, 64):  # (the codes stream: a row hinted a few rows ahead)
                bits_.prefetch(flat, ahead + _U(line))
            acc[:] = 0.0
            _lanes_dot(codes[r], xt[0], acc, flip, table, bits, per, mask, use_table)
            total = np.float32(0.0)
            for j in range(nb):
                total += scale[r, j] * (acc[j] - (offset + zero[r, j]) * sums[0, j])
            out[0, r] = total
        else:
            _lanes_weights(codes[r], scale[r], zero[r], offset, flip, table, weights, bits, per, mask, use_table)
            _dots(weights.reshape(-1), xt.reshape(rows, -1), out, r)


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def _plain_rows(r0, r1, args, decode, bits, per, mask, use_table):
    """Rows r0 <= r < r1 of W in the plain layout, as _lanes_rows."""
    xp, sums, codes, scale, zero, offset, shift, flip, table, n0, out = args
    rows = xp.shape[0]
    nb = scale.shape[1]
    blocked = not decode and rows > 1
    weights = np.empty((per if blocked else 0, codes.shape[1]), np.float32)
    block = np.empty((4 if blocked else 0, per, codes.shape[1]), np.float32)
    qbuf = np.empty(codes.shape[1] if not decode and rows == 1 else 0, np.float32)
    r = r0
    if blocked:  # (as _lanes_rows: 4 rows of W a pass)
        while r + 4 <= r1:
            for j in range(4):
                _plain_weights(codes[r + j], scale[r + j], zero[r + j], offset, shift, flip, table, block[j], bits, per,
                               mask, use_table)
            _dots4(block.reshape((4, -1)), xp.reshape((rows, -1)), out, r)
            r += 4
    for r in range(r, r1):
        if decode:
            _plain_weights(codes[r], scale[r], zero[r], offset, shift, flip, table,
                           out[r - n0].reshape((per, codes.shape[1])), bits, per, mask, use_table)
        elif rows == 1:
            total = _plain_dot(codes[r], xp[0], scale[r], shift, flip, table, bits, per, mask, use_table, qbuf)
            for j in range(nb):
                total -= scale[r, j] * (offset + zero[r, j]) * sums[0, j]
            out[0, r] = total
        else:
            _plain_weights(codes[r], scale[r], zero[r], offset, shift, flip, table, weights, bits, per, mask, use_table)
            _dots(weights.reshape(-1), xp.reshape(rows, -1), out, r)


def _specialize(bits: int, use_table: bool, decode: bool) -> dict:
    """{layout: (serial, parallel) driver} of the row loops for one code width (``decode``:
    writing weights out, else the GEMV): ``bits`` and the codes a byte are literals in them
    (AVX-512 has no byte shift by a variable amount), so the loops cut codes with constant
    shifts. A driver references module globals and these constants only, which keeps it in
    numba's on-disk cache across processes (a closure over another jitted closure would hash
    anew in every process)."""
    per = 8 // bits
    mask = (1 << bits) - 1

    @numba.njit(cache=True, nogil=True)
    def lanes(lo, hi, args):
        _lanes_rows(lo, hi, args, decode, bits, per, mask, use_table)

    @numba.njit(cache=True, nogil=True, parallel=True)
    def lanes_parallel(lo, hi, tasks, args):
        for t in numba.prange(tasks):
            _lanes_rows(lo + (hi - lo) * t // tasks, lo + (hi - lo) * (t + 1) // tasks, args, decode, bits, per,
                        mask, use_table)

    @numba.njit(cache=True, nogil=True)
    def plain(lo, hi, args):
        _plain_rows(lo, hi, args, decode, bits, per, mask, use_table)

    @numba.njit(cache=True, nogil=True, parallel=True)
    def plain_parallel(lo, hi, tasks, args):
        for t in numba.prange(tasks):
            _plain_rows(lo + (hi - lo) * t // tasks, lo + (hi - lo) * (t + 1) // tasks, args, decode, bits, per,
                        mask, use_table)

    return {"lanes": (lanes, lanes_parallel), "plain": (plain, plain_parallel)}


_kernels = lru_cache(maxsize=None)(_specialize)


def _run(weight: "Weight", decode: bool, lo: int, hi: int, x, sums, n0: int, out, threads: int) -> None:
    """A row loop over rows [lo, hi) of W: on this thread, or in 4 spans a thread."""
    kind = weight.kind
    serial, parallel = _kernels(kind.bits, kind.table is not None, decode)["lanes" if weight.lanes else "plain"]
    shift = () if weight.lanes else (_shift(weight),)
    args = (x, sums, weight.codes, weight.scale, weight.zero, kind.offset, *shift, kind.flip, kind.values, n0, out)
    if threads > 1 and hi - lo > 1:
        parallel(lo, hi, min(hi - lo, threads * 4), args)
    else:
        serial(lo, hi, args)


@dataclass(frozen=True)
class Weight:
    """W ready for the kernels: ``codes`` in the lanes ([N, G, nb]) or plain ([N, row_bytes])
    layout, float32 ``scale`` and ``zero`` [N, nb], ``k`` codes a row, ``block`` codes a block."""

    codes: np.ndarray
    scale: np.ndarray
    zero: np.ndarray
    kind: Codes
    k: int
    block: int

    @property
    def lanes(self) -> bool:
        return self.codes.ndim == 3

    @property
    def n(self) -> int:
        return self.codes.shape[0]

    @cached_property
    def term_bound(self) -> float:
        """The most |s * (value - (offset + z))|-like factor any term of the factored sum can take
        per unit of |x|: max |s| * (max |value| + max |offset + z|); NaN or Inf where a scale or
        zero point is not finite (then only decoded weights give IEEE's answer)."""
        kind = self.kind
        values = np.abs(kind.values[np.isfinite(kind.values)]).max() if kind.table is not None \
            else float((1 << kind.bits) - 1)
        with np.errstate(all="ignore"):
            return float(np.abs(self.scale).max(initial=0.0)) * \
                (float(values) + float(np.abs(self.zero).max(initial=0.0)) + float(kind.offset))

    @property
    def block_bytes(self) -> int:
        """Bytes of codes a block (a row's bytes when a block spans the row)."""
        return self.codes.shape[1] if self.lanes or self.scale.shape[1] == 1 else self.block * self.kind.bits // 8


def plain_supported(row_bytes: int, block: int, bits: int, blocks: int) -> bool:
    """Whether a plain-layout W can be read as it is: one block a row, or blocks of a power of
    two bytes."""
    block_bytes = block * bits // 8
    return blocks == 1 or block * bits % 8 == 0 and block_bytes & (block_bytes - 1) == 0 \
        and blocks == -(-row_bytes // block_bytes)


def pack_lanes(codes: np.ndarray, bits: int, block: int) -> np.ndarray:
    """Unpacked codes [N, K] (uint8, one code an element) -> the lanes layout [N, G, nb]; the
    last block is padded with code 0 (its x is zero)."""
    per = 8 // bits
    n, k = codes.shape
    nb = -(-k // block)
    padded = np.zeros((n, nb * block), np.uint8)
    padded[:, :k] = codes
    grouped = padded.reshape(n, nb, block // per, per).transpose(0, 2, 1, 3)   # [N, G, nb, per]
    out = np.zeros((n, block // per, nb), np.uint8)
    for p in range(per):
        out |= (grouped[..., p] << (p * bits)).astype(np.uint8)
    return out


@numba.njit(cache=True, nogil=True)
def _lanes_split(x, k, out):
    """out[m, p, t, j] = x[m, (j G + t) per + p], 0 past K: x in the lanes layout's order."""
    per, g, nb = out.shape[1], out.shape[2], out.shape[3]
    for m in range(x.shape[0]):
        for p in range(per):
            for t in range(g):
                for j in range(nb):
                    i = (j * g + t) * per + p
                    out[m, p, t, j] = x[m, i] if i < k else np.float32(0.0)


def _x_layout(x: np.ndarray, weight: Weight, sums: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """x [M, K] -> (x split by phase in the weight's layout, block sums [M, nb] unless not
    ``sums``)."""
    per = 8 // weight.kind.bits
    m = x.shape[0]
    nb = weight.scale.shape[1]
    if weight.lanes:
        g = weight.codes.shape[1]
        split = np.empty((m, per, g, nb), np.float32)                          # [M, per, G, nb]
        _lanes_split(np.ascontiguousarray(x, np.float32), weight.k, split)
        if not sums:
            return split, None
        return split, split.sum(axis=(1, 2), dtype=np.float32)
    else:
        row_bytes = weight.codes.shape[1]
        block_codes = weight.block_bytes * per
        padded = np.zeros((m, max(row_bytes * per, nb * block_codes)), np.float32)
        padded[:, :weight.k] = x
        split = padded[:, :row_bytes * per].reshape(m, row_bytes, per).transpose(0, 2, 1)  # [M, per, row_bytes]
        if not sums:
            return np.ascontiguousarray(split), None
        block_sums = padded[:, :nb * block_codes].reshape(m, nb, block_codes).sum(axis=2, dtype=np.float32)
    return np.ascontiguousarray(split), block_sums


def _shift(weight: Weight) -> int:
    return 62 if weight.scale.shape[1] == 1 else int(weight.block_bytes).bit_length() - 1


def gemv(x: np.ndarray, weight: Weight, threads: int) -> np.ndarray:
    """x [M, K] float32 (M <= ROWS_MAX) @ W^T -> [M, N] float32, over ``threads`` threads. A
    row of x with an Inf or NaN goes through decoded weights (the factored sum would make
    inf - inf of it), and so does one whose factored terms could overflow float32 (a scale or
    zero point not finite, or scales near float32's range) though the weights do not; so do
    more rows than one."""
    split, sums = _x_layout(x, weight)
    out = np.empty((x.shape[0], weight.n), np.float32)
    if x.shape[0] == 1 and not (np.isfinite(sums).all()
                                and weight.term_bound * float(np.abs(x).sum(dtype=np.float64)) < _FACTORED_LIMIT):
        split = np.concatenate([split, split])  # (two rows: the decoding loop)
        twice = np.empty((2, weight.n), np.float32)
        _run(weight, False, 0, weight.n, split, np.concatenate([sums, sums]), 0, twice, threads)
        out[0] = twice[0]
        return out
    _run(weight, False, 0, weight.n, split, sums, 0, out, threads)
    return out


def kernel_order(weight: Weight) -> np.ndarray:
    """The k of each position of the kernels' order of K (``decode``'s columns; positions past K,
    padding, hold K)."""
    positions = np.arange(_x_layout(np.zeros((1, weight.k), np.float32), weight)[0].size)
    per = 8 // weight.kind.bits
    if weight.lanes:
        g, nb = weight.codes.shape[1], weight.codes.shape[2]
        p, rest = np.divmod(positions, g * nb)
        t, j = np.divmod(rest, nb)
        k = (j * g + t) * per + p
    else:
        p, b = np.divmod(positions, weight.codes.shape[1])
        k = b * per + p
    return np.minimum(k, weight.k)


def in_kernel_order(x: np.ndarray, weight: Weight) -> np.ndarray:
    """x [M, K] float32 with its columns in the kernels' order of K (zeros at padding):
    ``in_kernel_order(x) @ decode(...).T == x @ W^T``."""
    split, _ = _x_layout(x, weight, sums=False)
    return split.reshape(x.shape[0], -1)


def decode(weight: Weight, n0: int, n1: int, out: np.ndarray, threads: int) -> np.ndarray:
    """Rows n0..n1 of W as float32 into ``out`` [n1 - n0, width] (C-contiguous), each row's
    weights in the kernels' order of K (``kernel_order``): the tiles a prefill matmul hands to
    BLAS with ``in_kernel_order(x)``."""
    x = np.zeros((1,) * (3 if weight.lanes else 2) + (1,), np.float32)
    _run(weight, True, n0, n1, x, np.zeros((1, 1), np.float32), n0, out, threads)
    return out
