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
                          ptr mk_col_edge, ptr mk_corner, i64 lo, i64 hi, ptr tail, ptr ctx)

``params`` is an ``i64`` array (``Params.values``); the four ``mk_*`` are the micro-kernels of
a full tile, of the last ``M % MR`` rows, of the last ``N % NR`` columns and of the corner
(the caller knows which tile shapes its sizes need and passes only those). The results are
bit-identical to the specialised kernel's: the same K blocks, tiles and micro-kernels, in the
same order.

**A fused tail** (kOutput: bias, activation, the relu mask of a backward pass, an SGD update
``w - lr * (x.T @ dy)``) comes in as a small function of the calling kernel (``tail``, null for
a plain dot; ``TAIL_TYPE``)::

    void tail(ptr ctx, i64 bb, i64 m0, i64 mr, i64 j0, i64 width, i64 phase)

called for each tile of the last K block: with ``phase`` 0 before its micro-kernel (it
prefetches the tile's rows of the arrays the tail reads), with ``phase`` 1 after it, to
rewrite the finished ``mr x width`` tile at ``(bb, m0, j0)`` of ``out`` while it is in L1.
``ctx`` is the kernel's own pointer arguments, passed through. So a dot with a tail costs
the LLVM time of its tail only, not of a whole GEMM (measured on the MLP training step: a
specialised GEMM kernel was ~10x the LLVM time of a library call).

**A strided A** (``a_k != 1`` and ``a_m == 1``: a weight gradient ``x.T @ dy``) is packed per
unit and K block into ``MR``-row panels shared by a group of column panels, as ``gemm.py``
does (``Gemm.pack_a``); units are then ``batch x row chunks x panel groups``.
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
(_M, _N, _K, _AM, _AK, _BK, _BN, _ROWS, _CHUNKS, _PANELS, _NBD, _MRT, _GROUP, _GROUPS, _PACKA,
 _BATCH) = range(16)

#: pack a strided A only if each of its elements is packed at most this many times
#: (``Params.pack_a``)
PACK_A_MAX_GROUPS = 2

#: ``tail(ctx, bb, m0, mr, j0, width, phase)`` (see the module docstring)
TAIL_TYPE = ir.FunctionType(ir.VoidType(), [T.PTR] + [T.I64] * 6)


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

    def pack_a(self, g: G.Gemm) -> bool:
        """Whether the routine packs this dot's strided A (``gemm.Gemm.pack_a``): only when each
        element of A is packed at most ``PACK_A_MAX_GROUPS`` times (once per K block for each
        group of column panels sharing it). A weight gradient with few rows (``x.T @ dy`` of a
        256-feature input: one row chunk, its 16 column panels cut into 4-8 groups to feed the
        threads) repacked all of A per group, and read in place it ran 0.78-0.91x the time
        (one thread, interleaved, the MLP step's 256x1024 gradient); with 2 groups (the
        1024x1024 and 1024x256 ones) packing stays 0.82-0.93x the time of not packing."""
        return (bool(g.pack_a) and self.a_m == 1 and self.a_k != 1 and tile_rows(g) == G.MR
                and g.panel_groups <= PACK_A_MAX_GROUPS)

    def units(self, g: G.Gemm) -> int:
        """The routine's parallel units for this dot: ``batch x row chunks x panel groups``."""
        return g.batch * g.row_chunks * -(-g.panels // (g.panel_group if self.pack_a(g) else 1))

    def values(self, g: G.Gemm) -> list[int]:
        pack_a = self.pack_a(g)
        group = g.panel_group if pack_a else 1
        head = [self.M, self.N, self.K, self.a_m, self.a_k, self.b_k, self.b_n,
                g.rows_per_unit, g.row_chunks, g.panels, len(self.batch), tile_rows(g),
                group, -(-g.panels // group), int(pack_a)]
        return head + [v for dim in self.batch for v in dim]


def _micro_kernel_ptr():
    # (a typed pointer only to llvmlite, which needs the function type to emit an indirect
    # call; LLVM prints and sees ``ptr``)
    return G.micro_kernel_type(None).as_pointer()


def routine_type() -> ir.FunctionType:
    return ir.FunctionType(ir.VoidType(), [T.PTR] * 4 + [_micro_kernel_ptr()] * 4 + [T.I64, T.I64]
                           + [TAIL_TYPE.as_pointer(), T.PTR])


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
    A, B, out, params, mk_full, mk_redge, mk_cedge, mk_corner, lo, hi, tail, ctx = fn.args
    for a in (A, B, out):
        a.add_attribute("noalias")
    entry = ir.IRBuilder(fn.append_basic_block("entry"))
    b = ir.IRBuilder(fn.append_basic_block("body"))
    ety = T.reg_type(dtype)
    lanes = G.lanes(dtype)
    NR = G.NV * lanes
    MR = G.MR
    pack = entry.alloca(ety, size=T.i64(G.KC * NR), name="pack")
    pack.align = 64
    apack = entry.alloca(ety, size=T.i64(G.MAX_ROWS_PER_UNIT * G.KC), name="apack")
    apack.align = 64
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
    group, groups = param(_GROUP), param(_GROUPS)
    pack_a = b.icmp_unsigned("!=", param(_PACKA), T.i64(0))
    has_tail = b.icmp_unsigned("!=", b.ptrtoint(tail, T.I64), T.i64(0))
    i64_0 = T.i64(0)
    zero = T.constant(dtype, 0)
    prefetch = ir.Function(module, ir.FunctionType(ir.VoidType(), [T.PTR] + [ir.IntType(32)] * 3),
                           name="llvm.prefetch.p0")
    per_line = max(1, 64 // dtype.itemsize)
    i32 = lambda v: ir.Constant(ir.IntType(32), v)  # noqa: E731
    vty = ir.VectorType(ety, lanes)
    sub = ir.VectorType(ety, MR)

    with for_loop(b, lo, hi, "u") as u:
        jg = b.urem(u, groups)
        rest = b.udiv(u, groups)
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
        first_panel = mul(jg, group)
        end_panel = smin(add(first_panel, group), panels)
        n_blocks = b.udiv(add(K, T.i64(G.KC - 1)), T.i64(G.KC))
        last_block = b.sub(n_blocks, T.i64(1))
        with for_loop(b, 0, n_blocks, "bc") as bc:
            c0 = mul(bc, T.i64(G.KC))
            cb = smin(T.i64(G.KC), b.sub(K, c0))
            first = b.icmp_unsigned("==", bc, i64_0)
            last = b.icmp_unsigned("==", bc, last_block)
            # A strided A: this K block of the unit's rows into MR-row panels,
            # apack[p * KC * MR + c * MR + r] = A(row_lo + p * MR + r, c0 + c) (see gemm.py).
            with if_then(b, pack_a, "pka"):
                n_vec = b.udiv(b.sub(row_hi, row_lo), T.i64(lanes))
                # (c outer: each c reads a stretch of one row of x in order, which the hardware
                # prefetcher follows; m outer walked down columns a whole row apart)
                with for_loop(b, 0, cb, "ac") as c, for_loop(b, 0, n_vec, "as") as si:
                    m0 = add(row_lo, mul(si, T.i64(lanes)))
                    src0 = elem(a_base, m0)
                    dst0 = elem(apack, mul(b.udiv(b.sub(m0, row_lo), T.i64(MR)), T.i64(G.KC * MR)))
                    v = b.load(elem(src0, mul(add(c0, c), a_k)), typ=vty)
                    v.align = dtype.itemsize
                    for q in range(lanes // MR):
                        part = b.shuffle_vector(v, ir.Constant(vty, ir.Undefined),
                                                ir.Constant(ir.VectorType(ir.IntType(32), MR),
                                                            list(range(q * MR, (q + 1) * MR))))
                        dst = elem(dst0, add(T.i64(q * G.KC * MR), mul(c, T.i64(MR))))
                        st = b.store(part, b.bitcast(dst, sub.as_pointer()))
                        st.align = MR * dtype.itemsize
                with for_loop(b, add(row_lo, mul(n_vec, T.i64(lanes))), row_hi, "am") as m:
                    rr = b.urem(b.sub(m, row_lo), T.i64(MR))
                    dst0 = elem(apack, add(mul(b.udiv(b.sub(m, row_lo), T.i64(MR)), T.i64(G.KC * MR)), rr))
                    src = elem(a_base, m)
                    with for_loop(b, 0, cb, "ac") as c:
                        b.store(b.load(elem(src, mul(add(c0, c), a_k)), typ=ety), elem(dst0, mul(c, T.i64(MR))))
            with for_loop(b, first_panel, end_panel, "jp") as jp:
                j0 = mul(jp, T.i64(NR))
                width = smin(T.i64(NR), b.sub(N, j0))
                col_edge = b.icmp_signed("<", width, T.i64(NR))
                nv = b.udiv(add(width, T.i64(lanes - 1)), T.i64(lanes))
                n_last = b.sub(width, mul(b.sub(nv, T.i64(1)), T.i64(lanes)))
                padded = mul(nv, T.i64(lanes))
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
                        # B transposed (``dy @ w.T``): lanes x lanes blocks through registers
                        # when B is contiguous along K, the rest element by element
                        c_vec = b.select(b.icmp_unsigned("==", b_k, T.i64(1)), mul(b.udiv(cb, T.i64(lanes)), T.i64(lanes)), i64_0)
                        w_vec = mul(b.udiv(width, T.i64(lanes)), T.i64(lanes))
                        with for_loop(b, 0, w_vec, "tn", step=lanes) as n0:
                            with for_loop(b, 0, c_vec, "tc", step=lanes) as cc:
                                src = elem(b_col, add(mul(n0, b_n), add(c0, cc)))
                                vs = []
                                for i in range(lanes):
                                    v = b.load(elem(src, mul(T.i64(i), b_n)), typ=vty)
                                    v.align = dtype.itemsize
                                    vs.append(v)
                                vs = _transpose(b, vs, lanes)
                                dst = elem(pack, add(mul(cc, T.i64(NR)), n0))
                                for j in range(lanes):
                                    st = b.store(vs[j], b.bitcast(elem(dst, T.i64(j * NR)), vty.as_pointer()))
                                    st.align = dtype.itemsize
                        with for_loop(b, 0, width, "qn") as n:
                            src = elem(b_col, add(mul(n, b_n), mul(c0, b_k)))
                            c_from = b.select(b.icmp_unsigned("<", n, w_vec), c_vec, i64_0)
                            with for_loop(b, c_from, cb, "qc") as c:
                                b.store(b.load(elem(src, mul(c, b_k)), typ=ety), elem(pack, add(mul(c, T.i64(NR)), n)))
                with if_then(b, col_edge, "zpad"), for_loop(b, 0, cb, "zc") as c:
                    with for_loop(b, width, padded, "zn") as n:
                        b.store(zero, elem(pack, add(mul(c, T.i64(NR)), n)))
                n_tiles = b.udiv(add(b.sub(row_hi, row_lo), b.sub(mrt, T.i64(1))), mrt)
                with for_loop(b, 0, n_tiles, "mt") as t:
                    m0 = add(row_lo, mul(t, mrt))
                    mr = smin(mrt, b.sub(row_hi, m0))
                    row_edge = b.icmp_signed("<", mr, mrt)
                    with b.if_else(pack_a) as (then, otherwise):
                        with then:  # (mrt == MR: the tile's panel of the packed block)
                            panel = elem(apack, mul(b.udiv(b.sub(m0, row_lo), T.i64(MR)), T.i64(G.KC * MR)))
                            with for_loop(b, 0, mr, "r") as r:
                                b.store(elem(panel, r), elem(rows, r, T.PTR))
                        with otherwise:
                            a_col = mul(c0, a_k)
                            with for_loop(b, 0, mr, "r") as r:
                                b.store(elem(a_base, add(mul(add(m0, r), a_m), a_col)), elem(rows, r, T.PTR))
                    a_stride = b.select(pack_a, T.i64(MR), a_k)
                    # Prefetch the next tile's strip of A (see gemm.py: short strips defeat the
                    # hardware prefetcher). A prefetch never faults, so past the end it is harmless.
                    with if_then(b, b.and_(b.icmp_unsigned("==", a_k, T.i64(1)), b.not_(row_edge)), "pf"):
                        with for_loop(b, 0, mrt, "pfr") as r:
                            nxt = b.gep(a_base, [add(mul(add(add(m0, mrt), r), a_m), c0)], source_etype=ety)
                            with for_loop(b, 0, cb, "pfk", step=per_line) as k:
                                b.call(prefetch, [b.gep(nxt, [k], source_etype=ety), i32(0), i32(3), i32(1)])
                    tile = elem(out_base, add(mul(m0, N), j0))
                    if G.OUT_PREFETCH:  # (the tile's first store would otherwise wait for its lines)
                        with if_then(b, first, "opf"), for_loop(b, 0, mr, "opr") as r:
                            row = b.gep(tile, [mul(r, N)], source_etype=ety)
                            with for_loop(b, 0, width, "opn", step=per_line) as n:
                                b.call(prefetch, [b.gep(row, [n], source_etype=ety), i32(1), i32(3), i32(1)])
                    tail_now = b.and_(has_tail, last)
                    with if_then(b, tail_now, "tpf"):
                        b.call(tail, [ctx, bb, m0, mr, j0, width, i64_0])
                    mk = b.select(row_edge, b.select(col_edge, mk_corner, mk_redge),
                                  b.select(col_edge, mk_cedge, mk_full))
                    b.call(mk, [rows, a_stride, pack, T.i64(1), cb, tile, N, first, n_last])
                    with if_then(b, tail_now, "tail"):
                        b.call(tail, [ctx, bb, m0, mr, j0, width, T.i64(1)])
    b.ret_void()


def _transpose(b, rows, n):
    """The transpose of the ``n x n`` block held in ``n`` vectors of ``n`` lanes: for each bit
    ``k`` of the index, the off-diagonal ``k x k`` blocks of every ``2k x 2k`` block swap
    places (two two-input shuffles per pair of rows: ``n log2 n`` shuffles in all)."""
    rows = list(rows)
    k = n // 2
    i32v = lambda idx: ir.Constant(ir.VectorType(ir.IntType(32), n), idx)  # noqa: E731
    while k:
        lo = i32v([n + j - k if j & k else j for j in range(n)])
        hi = i32v([n + j if j & k else j + k for j in range(n)])
        for i in range(n):
            if not i & k:
                a, c = rows[i], rows[i + k]
                rows[i], rows[i + k] = b.shuffle_vector(a, c, lo), b.shuffle_vector(a, c, hi)
        k //= 2
    return rows


def emit_call(builder: ir.IRBuilder, g: G.Gemm, p: Params, A, B, out, lo, hi, tail=None, ctx=None) -> None:
    """Emit the call of the routine for ``g`` (described by ``p``) at the builder's position;
    ``tail``/``ctx``: the kernel's tail function (``TAIL_TYPE``) and its argument, or None."""
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
    if tail is None:
        tail, ctx = ir.Constant(TAIL_TYPE.as_pointer(), None), ir.Constant(T.PTR, None)
    builder.call(fn, [A, B, out, table, *kernels, lo, hi, tail, ctx])
