"""Tiled transpose kernel (XLA:CPU emits a lone ``transpose`` as a tiled copy too).

A lone ``transpose`` of a kernel argument whose permutation swaps two groups of dims after an
identity prefix (``(1, 0)``, ``(0, 2, 1)``, ``(2, 0, 1)``...) reads the operand as a
``[B, R, C]`` array and writes the ``[B, C, R]`` output, ``out[b, c, r] = in[b, r, c]``. The
loop kernel (``kernels.emit_loop``) would walk each output row and read the operand a whole
row of ``C`` elements apart per element: on the MLP training step's ``h0.T`` (``dot_lhs_copy``,
a 256x1024 f32 operand read 4 KiB apart) that took 0.75-0.89 ms on one core. Here a unit is a
strip of ``tile`` rows ``r`` of one batch (``tile``: a vector register of elements, 16 for f32
with AVX-512), walked along ``C`` in ``tile x tile`` blocks: ``tile`` vector loads of the
block's rows, the register transpose of the library GEMM's B packing
(``dot_library._transpose``), ``tile`` vector stores of the output rows; edge blocks go element
by element. Measured on that ``h0.T``, one core: 0.08 ms with the operand in cache, 0.16 ms
from memory, 0.22 ms inside the step (the loop kernel: 0.75 / 0.87 / 0.89 ms). The copy is
exact (no arithmetic), any dtype.
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from minixla.backends.llvm import dot_library as DL
from minixla.backends.llvm import gemm as G
from minixla.backends.llvm import ir_types as T
from minixla.backends.llvm.loops import for_loop

#: single-core ns per byte moved (read + written), measured on the MLP step's 1 MiB h0.T
_NS_PER_BYTE = 0.05


def transpose_groups(t):
    """``(B, R, C)`` of a transpose that is a batched 2-D transpose of its operand viewed as
    ``[B, R, C]`` (output ``[B, C, R]``), or None (a transpose that keeps the minor dim, or a
    permutation of another form)."""
    if t.opcode != "transpose":
        return None
    perm = tuple(t.attrs["dimensions"])
    dims = t.operands[0].shape.dims
    n = len(perm)
    b = 0
    while b < n and perm[b] == b:
        b += 1
    for k in range(1, n - b):
        if perm[b:] == tuple(range(b + k, n)) + tuple(range(b, b + k)):
            B, R, C = math.prod(dims[:b]), math.prod(dims[b:b + k]), math.prod(dims[b + k:])
            return (B, R, C) if R > 1 and C > 1 else None
    return None


def emit_transpose(kb, t, groups) -> None:
    """The kernel of ``t`` (``transpose_groups(t) == groups``, its operand a kernel argument)."""
    B, R, C = groups
    b = kb.builder
    dtype = t.shape.dtype
    ety = T.mem_type(dtype)
    src = kb.buffers[t.operands[0]]
    item = np.dtype(dtype).itemsize
    tile = tile_size(item)
    rtiles = -(-R // tile)
    kb.kernel.strategy = "transpose"
    kb.kernel.units = B * rtiles
    kb.kernel.cost_ns = 2 * t.shape.size * item * _NS_PER_BYTE
    if t.shape.size == 0:
        return
    nuw = ("nsw", "nuw")
    add = lambda x, y: b.add(x, y, flags=nuw)  # noqa: E731
    mul = lambda x, y: b.mul(x, y, flags=nuw)  # noqa: E731

    def block(base, r0, rw, c0, cw):
        """out[c0 + cc, r0 + rr] = in[r0 + rr, c0 + cc] (offsets from ``base``, the batch's)."""
        with for_loop(b, 0, rw, "rr") as rr, for_loop(b, 0, cw, "cc") as cc:
            r, c = add(r0, rr), add(c0, cc)
            src_at = add(base, add(mul(r, T.i64(C)), c))
            dst_at = add(base, add(mul(c, T.i64(R)), r))
            b.store(b.load(T.element_ptr(b, src, dtype, src_at), typ=ety), T.element_ptr(b, kb.out, dtype, dst_at))

    def vector_block(base, r0, c0):
        """A full ``tile x tile`` block through registers: ``tile`` row loads, the register
        transpose of the library GEMM's B packing (``dot_library._transpose``), ``tile`` stores."""
        vty = ir.VectorType(ety, tile)
        rows = []
        for i in range(tile):
            v = b.load(b.bitcast(T.element_ptr(b, src, dtype, add(base, add(mul(add(r0, T.i64(i)), T.i64(C)), c0))),
                                 vty.as_pointer()), typ=vty)
            v.align = item
            rows.append(v)
        for j, v in enumerate(DL._transpose(b, rows, tile)):
            st = b.store(v, b.bitcast(T.element_ptr(b, kb.out, dtype, add(base, add(mul(add(c0, T.i64(j)), T.i64(R)), r0))),
                                      vty.as_pointer()))
            st.align = item

    def row_of_tiles(base, r0, full_rows):
        with for_loop(b, 0, C // tile, "ct") as ct:
            c0 = mul(ct, T.i64(tile))
            if full_rows is True:
                vector_block(base, r0, c0)
            else:
                block(base, r0, T.i64(tile) if full_rows is True else full_rows, c0, T.i64(tile))
        if C % tile:
            block(base, r0, T.i64(tile) if full_rows is True else full_rows, T.i64(C - C % tile), T.i64(C % tile))

    with for_loop(b, kb.lo, kb.hi, "u") as u:
        base = mul(b.udiv(u, T.i64(rtiles)), T.i64(R * C))
        r0 = mul(b.urem(u, T.i64(rtiles)), T.i64(tile))
        if R % tile == 0:
            row_of_tiles(base, r0, True)
        else:
            with b.if_else(b.icmp_signed("<=", b.add(r0, T.i64(tile)), T.i64(R))) as (then, otherwise):
                with then:
                    row_of_tiles(base, r0, True)
                with otherwise:
                    row_of_tiles(base, r0, b.sub(T.i64(R), r0))


def tile_size(itemsize: int) -> int:
    """Elements per tile side: a vector register's worth (at most 16, at least 4)."""
    return max(4, min(16, G.VECTOR_BYTES // itemsize))
