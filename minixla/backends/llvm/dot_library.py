"""A precompiled GEMM for plain dots (XLA:CPU's runtime matmul, ``runtime_matmul.cc``).

XLA:CPU does not generate code for a dot that has nothing fused into it: it emits a call to a
matrix-multiply routine compiled into its runtime (Eigen's). We do the same with our own
GEMM (``gemm.py``): ``minixla_dot_<f32|f64>`` is the whole blocked, packed, register-tiled
algorithm with every size and stride a *run-time* argument. It is JIT-compiled once per
process on first use (like the micro-kernels it calls), so the kernel of a plain dot is a
single call -- about 1 ms of LLVM time instead of the 15-20 ms of a GEMM kernel specialised
to its shapes. A dot with a fused tail (kOutput: bias, activation) or a fused producer of its
rhs keeps the specialised kernel, which applies those while the tile is in L1.

The routine computes, for units ``[lo, hi)`` (the same units as ``gemm.Gemm``)::

    out[bb, m, n] = sum_k A[a_off(bb) + m * a_m + k * a_k] * B[b_off(bb) + k * b_k + n * b_n]

with ``out`` contiguous ``[batch, M, N]`` and ``bb`` split over up to ``MAX_BATCH_DIMS`` batch
dimensions, each with its own stride in A and B. Its arguments::

    void minixla_dot_<dt>(ptr A, ptr B, ptr out, ptr params, ptr mk_full, ptr mk_row_edge,
                          ptr mk_col_edge, ptr mk_corner, i64 lo, i64 hi)

``params`` is an ``i64`` array (``Params.values``); the four ``mk_*`` are the micro-kernels of
a full tile, of the last ``M % MR`` rows, of the last ``N % NR`` columns and of the corner
(the caller knows which tile shapes its sizes need and passes only those). The results are
bit-identical to the specialised kernel's: the same K blocks, tiles and micro-kernels, in the
same order.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from minixla.backends.llvm import gemm as G
from minixla.backends.llvm import ir_types as T
from minixla.backends.llvm.loops import for_loop, if_then

#: batch dimensions the routine walks (a dot with more gets the specialised kernel)
MAX_BATCH_DIMS = 6

#: positions in ``params``
_M, _N, _K, _AM, _AK, _BK, _BN, _ROWS, _CHUNKS, _PANELS, _NBD, _MRT, _BATCH = range(13)


@dataclass
class Params:
    """The run-time description of one plain dot (all sizes and strides in elements)."""
    M: int
    N: int
    K: int
    a_m: int
    a_k: int
    b_k: int
    b_n: int
    batch: list          # [(size, a_stride, b_stride)], outermost first

    def values(self, g: G.Gemm) -> list[int]:
        head = [self.M, self.N, self.K, self.a_m, self.a_k, self.b_k, self.b_n,
                g.rows_per_unit, g.row_chunks, g.panels, len(self.batch), tile_rows(g)]
        return head + [v for dim in self.batch for v in dim]


def _micro_kernel_ptr():
    # (a typed pointer only to llvmlite, which needs the function type to emit an indirect
    # call; LLVM prints and sees ``ptr``)
    return G.micro_kernel_type(None).as_pointer()


def routine_type() -> ir.FunctionType:
    return ir.FunctionType(ir.VoidType(), [T.PTR] * 4 + [_micro_kernel_ptr()] * 4 + [T.I64, T.I64])


def routine_name(dtype) -> str:
    return {np.dtype(np.float32): "minixla_dot_f32", np.dtype(np.float64): "minixla_dot_f64"}[np.dtype(dtype)]


def routine(dtype) -> str:
    """The routine's name, compiled on first use in this process (``gemm.library_routine``)."""
    name = routine_name(dtype)
    return G.library_routine(name, lambda module: _emit_routine(module, name, np.dtype(dtype)))


def tile_rows(g: G.Gemm) -> int:
    """The register tile's rows: ``gemm.TALL_MR`` when the dot is one narrow panel (``N`` less
    than a full tile: a dense layer with 10 classes), ``gemm.MR`` otherwise."""
    return g.tile_rows(g.N) if g.N < g.NR else G.MR


def micro_kernels(g: G.Gemm) -> list[str | None]:
    """The micro-kernel names for the four tile shapes of ``g`` (None where a shape never occurs),
    each compiled on first use (``gemm.micro_kernel``)."""
    mrt = tile_rows(g)
    rest_m = g.M % mrt
    width = g.N % g.NR
    nv = -(-width // g.lanes)
    edge = (nv, width - (nv - 1) * g.lanes < g.lanes) if width else None
    full_rows = g.M >= mrt
    full_cols = g.N >= g.NR

    def mk(mr, nv_masked):
        return G.micro_kernel(g.dtype, mr, *nv_masked)
    return [mk(mrt, (G.NV, False)) if full_rows and full_cols else None,
            mk(rest_m, (G.NV, False)) if rest_m and full_cols else None,
            mk(mrt, edge) if full_rows and edge else None,
            mk(rest_m, edge) if rest_m and edge else None]


def _emit_routine(module, name, dtype):
    fn = ir.Function(module, routine_type(), name=name)
    fn.attributes.add("nounwind")
    A, B, out, params, mk_full, mk_redge, mk_cedge, mk_corner, lo, hi = fn.args
    for a in (A, B, out):
        a.add_attribute("noalias")
    entry = ir.IRBuilder(fn.append_basic_block("entry"))
    b = ir.IRBuilder(fn.append_basic_block("body"))
    ety = T.reg_type(dtype)
    lanes = G.lanes(dtype)
    NR = G.NV * lanes
    pack = entry.alloca(ety, size=T.i64(G.KC * NR), name="pack")
    pack.align = 64
    rows = entry.alloca(T.PTR, size=T.i64(max(G.MR, G.TALL_MR, G.TALL_MR2)), name="rows")
    a_off_slot = entry.alloca(T.I64, name="a_off")
    b_off_slot = entry.alloca(T.I64, name="b_off")
    rem_slot = entry.alloca(T.I64, name="rem")
    entry.branch(b.block)

    add = lambda x, y: b.add(x, y, flags=("nsw", "nuw"))  # noqa: E731
    mul = lambda x, y: b.mul(x, y, flags=("nsw", "nuw"))  # noqa: E731
    smin = lambda x, y: b.select(b.icmp_signed("<", x, y), x, y)  # noqa: E731

    def param(k):
        return b.load(b.gep(params, [k if isinstance(k, ir.Value) else T.i64(k)], inbounds=True,
                            source_etype=T.I64), typ=T.I64)

    def elem(base, index, ty=ety):
        return b.gep(base, [index], inbounds=True, source_etype=ty)

    M, N, K, a_m, a_k, b_k, b_n = (param(k) for k in (_M, _N, _K, _AM, _AK, _BK, _BN))
    rows_per_unit, row_chunks, panels, nbd, mrt = (param(k) for k in (_ROWS, _CHUNKS, _PANELS, _NBD, _MRT))
    i64_0 = T.i64(0)
    zero = T.constant(dtype, 0)
    prefetch = ir.Function(module, ir.FunctionType(ir.VoidType(), [T.PTR] + [ir.IntType(32)] * 3),
                           name="llvm.prefetch.p0")
    per_line = max(1, 64 // dtype.itemsize)
    i32 = lambda v: ir.Constant(ir.IntType(32), v)  # noqa: E731

    with for_loop(b, lo, hi, "u") as u:
        jp = b.urem(u, panels)
        rest = b.udiv(u, panels)
        mc = b.urem(rest, row_chunks)
        bb = b.udiv(rest, row_chunks)
        # The batch position's offsets in A and B, innermost batch dimension first.
        b.store(i64_0, a_off_slot)
        b.store(i64_0, b_off_slot)
        b.store(bb, rem_slot)
        with for_loop(b, 0, nbd, "bd") as i:
            slot = mul(b.sub(b.sub(nbd, T.i64(1)), i), T.i64(3))
            size = param(add(slot, T.i64(_BATCH)))
            r = b.load(rem_slot, typ=T.I64)
            idx = b.urem(r, size)
            b.store(b.udiv(r, size), rem_slot)
            b.store(add(b.load(a_off_slot, typ=T.I64), mul(idx, param(add(slot, T.i64(_BATCH + 1))))), a_off_slot)
            b.store(add(b.load(b_off_slot, typ=T.I64), mul(idx, param(add(slot, T.i64(_BATCH + 2))))), b_off_slot)
        a_base = elem(A, b.load(a_off_slot, typ=T.I64))
        b_base = elem(B, b.load(b_off_slot, typ=T.I64))
        out_base = elem(out, mul(mul(bb, M), N))
        row_lo = mul(mc, rows_per_unit)
        row_hi = smin(add(row_lo, rows_per_unit), M)
        j0 = mul(jp, T.i64(NR))
        width = smin(T.i64(NR), b.sub(N, j0))
        col_edge = b.icmp_signed("<", width, T.i64(NR))
        nv = b.udiv(add(width, T.i64(lanes - 1)), T.i64(lanes))
        n_last = b.sub(width, mul(b.sub(nv, T.i64(1)), T.i64(lanes)))
        padded = mul(nv, T.i64(lanes))
        n_blocks = b.udiv(add(K, T.i64(G.KC - 1)), T.i64(G.KC))
        with for_loop(b, 0, n_blocks, "bc") as bc:
            c0 = mul(bc, T.i64(G.KC))
            cb = smin(T.i64(G.KC), b.sub(K, c0))
            first = b.icmp_unsigned("==", bc, i64_0)
            # Pack B's K block: pack[c * NR + n] = B(c0 + c, j0 + n), zeros up to a whole vector.
            # (Two loop orders, so the inner loop reads B contiguously when B is, either way.)
            b_col = elem(b_base, mul(j0, b_n))
            with b.if_else(b.icmp_unsigned("==", b_n, T.i64(1))) as (then, otherwise):
                with then:
                    with for_loop(b, 0, cb, "pc") as c:
                        src = elem(b_col, mul(add(c0, c), b_k))
                        dst = elem(pack, mul(c, T.i64(NR)))
                        with for_loop(b, 0, width, "pn") as n:
                            b.store(b.load(elem(src, n), typ=ety), elem(dst, n))
                with otherwise:
                    with for_loop(b, 0, width, "qn") as n:
                        src = elem(b_col, add(mul(n, b_n), mul(c0, b_k)))
                        with for_loop(b, 0, cb, "qc") as c:
                            b.store(b.load(elem(src, mul(c, b_k)), typ=ety), elem(pack, add(mul(c, T.i64(NR)), n)))
            with if_then(b, col_edge, "zpad"), for_loop(b, 0, cb, "zc") as c:
                with for_loop(b, width, padded, "zn") as n:
                    b.store(zero, elem(pack, add(mul(c, T.i64(NR)), n)))
            n_tiles = b.udiv(add(b.sub(row_hi, row_lo), b.sub(mrt, T.i64(1))), mrt)
            with for_loop(b, 0, n_tiles, "mt") as t:
                m0 = add(row_lo, mul(t, mrt))
                mr = smin(mrt, b.sub(row_hi, m0))
                row_edge = b.icmp_signed("<", mr, mrt)
                a_col = mul(c0, a_k)
                with for_loop(b, 0, mr, "r") as r:
                    b.store(elem(a_base, add(mul(add(m0, r), a_m), a_col)), elem(rows, r, T.PTR))
                # Prefetch the next tile's strip of A (see gemm.py: short strips defeat the
                # hardware prefetcher). A prefetch never faults, so past the end it is harmless.
                with if_then(b, b.and_(b.icmp_unsigned("==", a_k, T.i64(1)), b.not_(row_edge)), "pf"):
                    with for_loop(b, 0, mrt, "pfr") as r:
                        nxt = b.gep(a_base, [add(mul(add(add(m0, mrt), r), a_m), c0)], source_etype=ety)
                        with for_loop(b, 0, cb, "pfk", step=per_line) as k:
                            b.call(prefetch, [b.gep(nxt, [k], source_etype=ety), i32(0), i32(3), i32(1)])
                mk = b.select(row_edge, b.select(col_edge, mk_corner, mk_redge), b.select(col_edge, mk_cedge, mk_full))
                tile = elem(out_base, add(mul(m0, N), j0))
                b.call(mk, [rows, a_k, pack, T.i64(1), cb, tile, N, first, n_last])
    b.ret_void()


def emit_call(builder: ir.IRBuilder, g: G.Gemm, p: Params, A, B, out, lo, hi) -> None:
    """Emit the call of the routine for ``g`` (described by ``p``) at the builder's position."""
    module = builder.module
    name = routine(g.dtype)
    fn = module.globals.get(name) or ir.Function(module, routine_type(), name=name)
    values = p.values(g)
    arr = ir.ArrayType(T.I64, len(values))
    table = ir.GlobalVariable(module, arr, name=f"{builder.function.name}.dot_params")
    table.global_constant = True
    table.linkage = "private"
    table.initializer = ir.Constant(arr, values)
    kernels = []
    for mk in micro_kernels(g):
        if mk is None:
            kernels.append(ir.Constant(_micro_kernel_ptr(), None))
        else:
            kernels.append(module.globals.get(mk) or ir.Function(module, G.micro_kernel_type(g.dtype), name=mk))
    builder.call(fn, [A, B, out, table, *kernels, lo, hi])
