"""Dot and convolution kernels (XLA:CPU's ``DotOpEmitter`` and its convolution emitter), split
from ``kernels.py``: the register-tiled GEMM of ``gemm.py`` with an optional fused elementwise
tail, the precompiled library routine for backward-pass dots with a tail (``dot_library.py``),
and the row kernels for what the micro-kernel does not take (integer dots, grouped or dilated
convolutions). ``kernels._emit_body`` picks among them.
"""
from __future__ import annotations

import contextlib
import math

import numpy as np
from llvmlite import ir

from minixla.backends.llvm import elemental as E
from minixla.backends.llvm import dot_library as DL
from minixla.backends.llvm import gemm as G
from minixla.backends.llvm import ir_types as T
from minixla.backends.llvm import kernels as _kernels  # (the cost model; kernels imports this module)
from minixla.backends.llvm.loops import Index, delinearize, for_loop, if_then, linearize, loop_nest, row_major_strides
from minixla.hlo.ir import ELEMENTWISE


def _tail_fn(kb, root, core, multi_of):
    """``tail(b, bb, m, n, acc)`` for ``gemm.Gemm``: the fused tail's value at one element."""
    if root is core:
        return None

    def tail(b, bb, m, n, acc):
        index = _root_index(b, root, core, multi_of(b, bb, m, n))
        return kb.emitter(values={core: acc}).emit(root, index)
    return tail


def _tail_streams(kb, root, core):
    """The kernel arguments the fused tail reads at the output element's own linear index
    (``gemm.Gemm.tail_streams``): buffers of the core's size reached from the root through
    elementwise ops and reshapes only -- the weights of an SGD update ``w - lr * (x.T @ dy)``,
    the saved activations of a relu mask. Returns ``[(pointer, element type, bytes)]``."""
    if root is core:
        return []
    streams, seen, todo = [], set(), [root]
    while todo:
        i = todo.pop()
        if i in seen or i is core or i.shape.size != core.shape.size:
            continue
        seen.add(i)
        if i in kb.buffers:
            if kb.buffers[i] is not kb.out:
                streams.append((kb.buffers[i], T.mem_type(i.shape.dtype), np.dtype(i.shape.dtype).itemsize))
        elif i.opcode in ELEMENTWISE or i.opcode == "reshape":
            todo.extend(i.operands)
        elif i.opcode == "dynamic-slice" and _row_block_slice(kb, i):
            streams.append(_row_block_stream(kb, i))
    return streams


def _row_block_slice(kb, ds) -> bool:
    """Whether ``ds`` is a ``dynamic-slice`` of a kernel argument along its leading dim only
    (the other dims whole: a ``scan``'s step ``t`` of ``xs``, or of the hoisted input
    projection ``x_t @ U`` an RNN cell adds in its GEMM's tail), so the slice is one
    contiguous block of it."""
    x = ds.operands[0]
    sizes = tuple(ds.attrs["dynamic_slice_sizes"])
    return (x in kb.buffers and kb.buffers[x] is not kb.out and x.shape.rank >= 1
            and sizes[1:] == tuple(x.shape.dims[1:]))


def _row_block_stream(kb, ds):
    """The tail stream of a ``_row_block_slice``: the block's first element, its start index
    clamped as the elemental emitter clamps it (so the same rows are prefetched as are read).
    Measured on the RNN cell ``tanh(h @ W + p_t + b)``: ``p_t`` (32 KiB of a 32 MiB array a
    new one each step) read by the tail straight from memory cost ~25% of the step."""
    b = kb.builder
    x = ds.operands[0]
    start = E._clamped_start(kb.emitter(), ds, 1, x.shape.dims[0] - ds.attrs["dynamic_slice_sizes"][0])
    row = math.prod(x.shape.dims[1:])
    ety = T.mem_type(x.shape.dtype)
    base = b.gep(kb.buffers[x], [b.mul(start, T.i64(row))], source_etype=ety)
    return (base, ety, np.dtype(x.shape.dtype).itemsize)


def _root_index(b, root, core, multi):
    """The index of the fusion's output element that holds the core's element ``multi``. A
    reshape between the core and the root (a tail over ``reshape(dot)``, as reverse mode makes
    for the gradient of a flattening layer) keeps the row-major linear index."""
    if root.shape.dims == core.shape.dims:
        return Index(b, core.shape.dims, multi=multi)
    return Index(b, root.shape.dims, linear=linearize(b, multi, core.shape.dims))


def _strides(instr):
    return row_major_strides(instr.shape.dims)


def _merged_stride(operand, dims):
    """The one stride of the flattened ``dims`` (row-major in the order given), or None."""
    st, sizes = _strides(operand), operand.shape.dims
    dims = [d for d in dims if sizes[d] != 1]  # (they contribute nothing to the position)
    if not dims:
        return 1
    for a, c in zip(dims, dims[1:]):
        if st[a] != st[c] * sizes[c]:
            return None
    return st[dims[-1]]


def _offset(b, operand, dims, value):
    """``sum(multi[d] * stride[d])`` for the multi-dim index of ``value`` over ``dims``."""
    if not dims:
        return T.i64(0)
    st = _strides(operand)
    sizes = [operand.shape.dims[d] for d in dims]
    total = None
    for d, n, v in zip(dims, sizes, delinearize(b, value, sizes)):
        if n == 1:
            continue
        term = b.mul(v, T.i64(st[d]), flags=("nsw", "nuw"))
        total = term if total is None else b.add(total, term, flags=("nsw", "nuw"))
    return T.i64(0) if total is None else total


def _gemm_operands(kb, lhs, rhs, dtype) -> bool:
    """Whether a dot/conv's operands suit the GEMM: a float dtype it supports for both, and the
    lhs a kernel argument (its rows are read in place)."""
    return (G.supported_dtype(dtype) and lhs.shape.dtype == dtype and rhs.shape.dtype == dtype
            and lhs in kb.buffers)


def gemm_for_dot(kb, dot, root):
    """The ``gemm.Gemm`` of a float dot whose lhs is a kernel argument, or None."""
    lhs, rhs = dot.operands
    dtype = np.dtype(dot.shape.dtype)
    if not _gemm_operands(kb, lhs, rhs, dtype):
        return None
    lb, lc, lf, rb, rc, rf = E.dot_parts(dot)
    a_stride = _merged_stride(lhs, lc)
    if a_stride is None:
        return None
    dims = dot.shape.dims
    batch = math.prod(dims[:len(lb)])
    M = math.prod([lhs.shape.dims[d] for d in lf])
    N = math.prod([rhs.shape.dims[d] for d in rf])
    K = math.prod([lhs.shape.dims[d] for d in lc])
    if batch * M * N * K == 0:
        return None
    a_base = kb.buffers[lhs]
    item = T.mem_type(dtype)

    def a_row(b, bb, m, t):  # (not inbounds: the micro-kernel prefetches one tile past the end)
        off = b.add(_offset(b, lhs, lb, bb), _offset(b, lhs, lf, m))
        return b.gep(a_base, [off], source_etype=item)

    rsizes_c = [rhs.shape.dims[d] for d in rc]
    rsizes_f = [rhs.shape.dims[d] for d in rf]
    rsizes_b = [rhs.shape.dims[d] for d in rb]

    def b_elem(b, bb, t, c, n):
        multi = [None] * rhs.shape.rank
        for ds, v, sizes in ((rb, bb, rsizes_b), (rc, c, rsizes_c), (rf, n, rsizes_f)):
            for d, iv in zip(ds, delinearize(b, v, sizes)):
                multi[d] = iv
        return kb.emitter().emit(rhs, Index(b, rhs.shape.dims, multi=multi))

    bsizes = list(dims[:len(lb)])
    msizes = list(dims[len(lb):len(lb) + len(lf)])
    nsizes = list(dims[len(lb) + len(lf):])

    def multi_of(b, bb, m, n):
        return delinearize(b, bb, bsizes) + delinearize(b, m, msizes) + delinearize(b, n, nsizes)

    tail = _tail_fn(kb, root, dot, multi_of)
    if E.gemv_tail_starts_at_minus_zero(dot, M, N):
        tail = _minus_zero_tail(kb, dot, dtype, N, tail, (bsizes, msizes, nsizes))
    return G.Gemm(dtype, batch, M, N, 1, K, a_row, a_stride, b_elem, tail,
                  kb.threads, a_row_stride=_merged_stride(lhs, lf),
                  tail_streams=_tail_streams(kb, root, dot), b_panels=_b_panels(kb, dot))


def _minus_zero_tail(kb, dot, dtype, N, tail, sizes):
    """``tail`` (or the identity) after XLA's epilogue sign: in the columns past the last full
    tile (``gemv_tile``), a +-0.0 result whose products are all -0.0 is -0.0 (a sum that starts from
    its first product, not from +0.0). The products are recomputed only for such a zero."""
    lhs, rhs = dot.operands
    lb, lc, lf, rb, rc, rf = E.dot_parts(dot)
    bsizes, msizes, nsizes = sizes
    csizes = [lhs.shape.dims[d] for d in lc]
    first = T.i64(N - N % E.gemv_tile(dtype))
    neg_zero = ir.Constant(T.reg_type(dtype), -0.0)

    def bits(b, v):
        return b.bitcast(v, ir.IntType(64 if v.type == ir.DoubleType() else 32))

    def fixed(b, bb, m, n, acc):
        slot = kb.alloca(acc.type, "gemv.acc")
        b.store(acc, slot)
        zero = b.fcmp_ordered("==", acc, ir.Constant(acc.type, 0.0))
        with if_then(b, b.and_(b.icmp_unsigned(">=", n, first), zero), "gemv.epilogue"):
            flag = kb.alloca(T.I1, "gemv.negzero")
            b.store(ir.Constant(T.I1, 1), flag)
            bv, mv, nv = delinearize(b, bb, bsizes), delinearize(b, m, msizes), delinearize(b, n, nsizes)
            with loop_nest(b, csizes, "gemv.k") as ks:
                x = E.load_converted(kb.emitter(), lhs, E.dot_operand_index(b, lhs, lb, bv, lc, ks, lf, mv), dtype)
                y = E.load_converted(kb.emitter(), rhs, E.dot_operand_index(b, rhs, rb, bv, rc, ks, rf, nv), dtype)
                p = b.fmul(x, y)
                is_neg_zero = b.icmp_unsigned("==", bits(b, p), bits(b, neg_zero))
                b.store(b.and_(b.load(flag), is_neg_zero), flag)
            b.store(b.select(b.load(flag), neg_zero, acc), slot)
        value = b.load(slot)
        return value if tail is None else tail(b, bb, m, n, value)
    return fixed


def _b_panels(kb, dot):
    """The rhs buffer of a dot whose rhs is already in the GEMM's packed panels, or None: a
    ``[P, K, NR]`` kernel argument contracted along its dim 1, ``NR`` the GEMM's panel width,
    no batch dims (what ``while-loop-gemm-packing`` makes of a loop-invariant rhs)."""
    lhs, rhs = dot.operands
    lb, lc, lf, rb, rc, rf = E.dot_parts(dot)
    if (rhs not in kb.buffers or kb.buffers[rhs] is kb.out or lb or rb or rhs.shape.rank != 3
            or tuple(rc) != (1,) or tuple(rf) != (0, 2)
            or rhs.shape.dims[2] != G.panel_columns(rhs.shape.dtype)):
        return None
    return kb.buffers[rhs]




def library_tail_pays(p) -> bool:
    """Whether a dot with a fused tail should call the library routine (``emit_library_dot``)
    rather than get a GEMM kernel specialised to its shapes: when an operand is read
    transposed -- the lhs down its columns (a weight gradient ``x.T @ g``: packed the same
    way by both) or the rhs across its rows (an input gradient ``g @ w.T``: the routine's
    16x16 register transposes pack it 8% faster) -- and so in every backward-pass dot. A
    forward dot with a tail (``relu(x @ w + b)``) ran 2-3% faster specialised (constant loop
    bounds), measured one thread, interleaved, so it keeps its kernel."""
    return p.a_k != 1 or p.b_n != 1


def dot_library_params(kb, dot):
    """The ``dot_library.Params`` of a dot that can call the precompiled routine (both
    operands kernel arguments, K, M, N and each batch dimension one stride apiece), or None."""
    lhs, rhs = dot.operands
    if lhs not in kb.buffers or rhs not in kb.buffers or kb.buffers[rhs] is kb.out or kb.buffers[lhs] is kb.out:
        return None
    lb, lc, lf, rb, rc, rf = E.dot_parts(dot)
    strides = [_merged_stride(lhs, lf), _merged_stride(lhs, lc), _merged_stride(rhs, rc), _merged_stride(rhs, rf)]
    if None in strides:
        return None
    lst, rst = _strides(lhs), _strides(rhs)
    batch = [(lhs.shape.dims[l], lst[l], rst[r]) for l, r in zip(lb, rb) if lhs.shape.dims[l] != 1]
    if len(batch) > DL.MAX_BATCH_DIMS:
        return None
    dims = lambda op, ds: math.prod(op.shape.dims[d] for d in ds)  # noqa: E731
    return DL.Params(dims(lhs, lf), dims(rhs, rf), dims(lhs, lc), *strides, batch)


def emit_library_dot(kb: _kernels._KernelBuilder, g: G.Gemm, params, dot, root=None):
    """A dot: one call of the precompiled GEMM routine (``dot_library.py``), passing it the
    kernel's fused tail (``root`` above the dot) as a small function of its own."""
    kb.kernel.strategy = "gemm-library"
    kb.kernel.units = params.units(g)  # (the routine's own: it may not pack A as ``g`` would)
    kb.kernel.cost_ns = g.flops * _kernels._NS_PER_FLOP
    lhs, rhs = dot.operands
    tail = ctx = None
    if (root is not None and root is not dot) or g.tail is not None:
        tail = _emit_tail_function(kb, g, root, dot)
        # the tail reads the kernel's own arguments: passed through the routine as one array
        args = kb.fn.args[:-2]
        ctx = kb.alloca(T.PTR, "tail_ctx", len(args))
        for k, a in enumerate(args):
            kb.builder.store(a, kb.builder.gep(ctx, [T.i64(k)], inbounds=True, source_etype=T.PTR))
    DL.emit_call(kb.builder, g, params, kb.buffers[lhs], kb.buffers[rhs], kb.out, kb.lo, kb.hi, tail, ctx)


def _emit_tail_function(kb: _kernels._KernelBuilder, g: G.Gemm, root, core) -> ir.Function:
    """``tail(ctx, bb, m0, mr, j0, width, phase)`` (``dot_library.TAIL_TYPE``) of the kernel
    being built: phase 0 prefetches the tile's rows of the tail's streams
    (``Gemm.tail_streams``), phase 1 applies the tail (``g.tail``) to the finished tile of
    ``out``. The elemental emitter runs on the tail function's builder, reading the kernel's
    arguments from ``ctx`` (``[out, in0, ..., const0, ...]``)."""
    module = kb.builder.module
    fn = ir.Function(module, DL.TAIL_TYPE, name=f"{kb.fn.name}.tail")
    args = kb.fn.args[:-2]
    # The tail proper takes the kernel's pointers as ``noalias`` arguments (as the kernel
    # does: loaded from ``ctx`` they could alias, and LLVM would version every loop on it).
    inner = ir.Function(module, ir.FunctionType(ir.VoidType(), [T.PTR] * len(args) + [T.I64] * 6),
                        name=f"{kb.fn.name}.tail_body")
    for f in (fn, inner):
        f.linkage = "internal"
        f.attributes.add("nounwind")
        f.attributes.add("noinline")  # (the denormal attribute goes on ``noinline nounwind`` defines)
    if G.PREFER_VECTOR_WIDTH:
        G.set_prefer_vector_width(inner, G.PREFER_VECTOR_WIDTH)
    wb = ir.IRBuilder(fn.append_basic_block("entry"))
    ctx = fn.args[0]
    loaded = [wb.load(wb.gep(ctx, [T.i64(k)], inbounds=True, source_etype=T.PTR), typ=T.PTR) for k in range(len(args))]
    wb.call(inner, loaded + list(fn.args[1:]))
    wb.ret_void()
    ptrs = inner.args[:len(args)]
    for a in ptrs:
        a.add_attribute("noalias")
    bb, m0, mr, j0, width, phase = inner.args[len(args):]
    entry = inner.append_basic_block("entry")
    body = inner.append_basic_block("body")
    b = ir.IRBuilder(body)
    position = {id(a): k for k, a in enumerate(args)}
    saved = kb.builder, kb.buffers, kb.out, kb._entry, g.tail_streams
    kb.builder, kb._entry = b, entry
    kb.buffers = {leaf: ptrs[position[id(ptr)]] for leaf, ptr in kb.buffers.items()}
    kb.out = ptrs[0]
    try:
        streams = _tail_streams(kb, root, core)
        dtype = core.shape.dtype
        with b.if_else(b.icmp_unsigned("==", phase, T.i64(0))) as (then, otherwise):
            with then:
                if G.TAIL_PREFETCH and streams:
                    start = b.add(b.mul(b.add(b.mul(bb, T.i64(g.M)), m0), T.i64(g.N)), j0)
                    with for_loop(b, 0, mr, "tpr") as r:
                        for base, ety, item in streams:
                            row = b.gep(base, [b.add(start, b.mul(r, T.i64(g.N)))], source_etype=ety)
                            with for_loop(b, 0, width, "tpn", step=max(1, 64 // item)) as n:
                                b.call(G._prefetch_fn(b.module), [b.gep(row, [n], source_etype=ety),
                                                                   ir.Constant(ir.IntType(32), 0),
                                                                   ir.Constant(ir.IntType(32), 3),
                                                                   ir.Constant(ir.IntType(32), 1)])
            with otherwise:
                with for_loop(b, 0, mr, "tr") as r:
                    m = b.add(m0, r)
                    row_start = b.mul(b.add(b.mul(bb, T.i64(g.M)), m), T.i64(g.N))
                    with for_loop(b, 0, width, "tn") as n:
                        nn = b.add(j0, n)
                        at = b.add(row_start, nn)
                        value = g.tail(b, bb, m, nn, T.load_element(b, kb.out, dtype, at))
                        T.store_element(b, value, kb.out, dtype, at)
        b.ret_void()
    finally:
        kb.builder, kb.buffers, kb.out, kb._entry, g.tail_streams = saved
    ir.IRBuilder(entry).branch(body)
    return fn


def gemm_for_convolution(kb, conv, root):
    """The ``gemm.Gemm`` of a float convolution with the input features innermost in the
    input and the output features innermost in the output (NHWC-like), no groups and no
    lhs dilation; or None."""
    lhs, rhs = conv.operands
    dtype = np.dtype(conv.shape.dtype)
    if not _gemm_operands(kb, lhs, rhs, dtype):
        return None
    dn, cg, og, groups, window = E.conv_parts(conv)
    dims = conv.shape.dims
    rank = len(dims)
    nsp = rank - 2
    if groups != 1 or any(d != 1 for d in window["lhs_dilate"]):
        return None
    if dn.out_spec[1] != rank - 1 or dn.lhs_spec[1] != rank - 1:
        return None
    outer = list(range(rank - 1))              # output dims in memory order, feature excluded
    outer_sizes = [dims[d] for d in outer]
    taps = list(window["size"])
    C, N = cg, og
    M, Tn = math.prod(outer_sizes), math.prod(taps)
    if M * N * Tn * C == 0:
        return None
    ety = T.reg_type(dtype)
    zeros = ir.GlobalVariable(kb.builder.module, ir.ArrayType(ety, max(C, 1)), name=f"{kb.fn.name}.zeros")
    zeros.global_constant = True
    zeros.linkage = "private"
    zeros.initializer = ir.Constant(ir.ArrayType(ety, max(C, 1)), None)
    zeros.align = 64
    a_base = kb.buffers[lhs]
    lhs_st = _strides(lhs)
    item = T.mem_type(dtype)

    def a_row(b, bb, m, t):
        om = [None] * rank
        for d, v in zip(outer, delinearize(b, m, outer_sizes)):
            om[d] = v
        ks = delinearize(b, t, taps)
        off = b.mul(om[dn.out_spec[0]], T.i64(lhs_st[dn.lhs_spec[0]]))
        valid = ir.Constant(T.I1, 1)
        for s in range(nsp):
            p, v = E.conv_input_position(b, conv, dn, window, s, om[dn.out_spec[2 + s]], ks[s])
            valid = b.and_(valid, v)
            off = b.add(off, b.mul(p, T.i64(lhs_st[dn.lhs_spec[2 + s]])))
        ptr = b.gep(a_base, [off], source_etype=item)  # (not inbounds: may point outside if not valid)
        return b.select(valid, ptr, zeros)

    def b_elem(b, bb, t, c, n):
        multi = [None] * rhs.shape.rank
        multi[dn.rhs_spec[0]], multi[dn.rhs_spec[1]] = n, c
        for s, k in enumerate(delinearize(b, t, taps)):
            multi[dn.rhs_spec[2 + s]] = k
        return kb.emitter().emit(rhs, Index(b, rhs.shape.dims, multi=multi))

    def multi_of(b, bb, m, n):
        multi = [None] * rank
        for d, v in zip(outer, delinearize(b, m, outer_sizes)):
            multi[d] = v
        multi[rank - 1] = n
        return multi

    return G.Gemm(dtype, 1, M, N, Tn, C, a_row, 1, b_elem, _tail_fn(kb, root, conv, multi_of), kb.threads,
                  tail_streams=_tail_streams(kb, root, conv))


def emit_gemm(kb: _kernels._KernelBuilder, g: G.Gemm):
    kb.kernel.strategy = "gemm"
    kb.kernel.units = g.units
    kb.kernel.cost_ns = g.flops * _kernels._NS_PER_FLOP
    G.emit_gemm(kb.builder, g, kb.out, kb.lo, kb.hi, kb.alloca)


# ---------------------------------------------------------------------------------------
# Dot and convolution rows: the general fallbacks.

def _apply_tail(kb, root, core, row_positions):
    """After a row of ``core`` is accumulated in ``out``: ``out[i] = tail(out[i])`` over the row."""
    if root is core:
        return
    b = kb.builder
    dims = core.shape.dims
    dtype = core.shape.dtype
    with row_positions() as multi:
        index = _root_index(b, root, core, multi)
        acc = T.load_element(b, kb.out, dtype, index.linear)
        value = kb.emitter(values={core: acc}).emit(root, index)
        T.store_element(b, value, kb.out, root.shape.dtype, index.linear)


def dot_row_strategy_ok(dot) -> bool:
    """In-place row accumulation pays off when the rhs's last dim is a free dim (contiguous rows)."""
    lb, lc, lf, rb, rc, rf = E.dot_parts(dot)
    rhs = dot.operands[1]
    return bool(rf) and rf[-1] == rhs.shape.rank - 1


def emit_dot(kb: _kernels._KernelBuilder, dot, root):
    """``out[b, m, :] = sum_k lhs[b, m, k] * rhs[b, k, :]``, innermost over the rhs free dims;
    units are the (batch, lhs free) positions."""
    b = kb.builder
    lhs, rhs = dot.operands
    dtype = T.check_dtype(dot.shape.dtype, "dot")
    lb, lc, lf, rb, rc, rf = E.dot_parts(dot)
    dims = dot.shape.dims
    kb.kernel.strategy = "dot-rows"
    kb.kernel.cost_ns = 2 * math.prod(dims) * math.prod(lhs.shape.dims[d] for d in lc) * _kernels._NS_PER_FLOP * 4
    if math.prod(dims) == 0:
        return
    nb, nl = len(lb), len(lf)
    row_dims = dims[nb + nl:]
    zero = T.constant(dtype, 0)
    N = math.prod(row_dims)
    if E.gemv_tail_starts_at_minus_zero(dot, math.prod(dims[nb:nb + nl]), N):
        # (XLA's scalar epilogue columns start from -0.0: ``elemental.gemv_tail_starts_at_minus_zero``)
        first = T.i64(N - N % E.gemv_tile(dtype))
        zero = lambda j: b.select(b.icmp_unsigned(">=", j, first), T.constant(dtype, -0.0), T.constant(dtype, 0))  # noqa: E731,E501
    else:
        zero = (lambda z: lambda j: z)(zero)
    with kb.units(dims[:nb + nl], "m") as outer:
        bv, lv = outer[:nb], outer[nb:]
        row_start = linearize(b, outer + [T.i64(0)] * len(row_dims), dims)

        @contextlib.contextmanager
        def row_positions():
            with loop_nest(b, row_dims, "n") as ns:
                yield outer + ns

        with for_loop(b, 0, math.prod(row_dims), "z") as j:
            T.store_element(b, zero(j), kb.out, dtype, b.add(row_start, j))
        with loop_nest(b, [lhs.shape.dims[d] for d in lc], "k") as ks:
            x = E.load_converted(kb.emitter(), lhs, E.dot_operand_index(b, lhs, lb, bv, lc, ks, lf, lv), dtype)
            with loop_nest(b, row_dims, "n") as ns:
                y = E.load_converted(kb.emitter(), rhs, E.dot_operand_index(b, rhs, rb, bv, rc, ks, rf, ns), dtype)
                o = b.add(row_start, linearize(b, ns, row_dims))
                acc = T.load_element(b, kb.out, dtype, o)
                T.store_element(b, E.multiply_accumulate(b, dtype, acc, x, y), kb.out, dtype, o)
        _apply_tail(kb, root, dot, row_positions)


def emit_convolution(kb: _kernels._KernelBuilder, conv, root):
    """For each (batch, output position): zero the row of output features, then for each
    window offset inside the input and each input feature ``c`` of a group,
    ``out[..., f] += lhs[..., c] * rhs[k, c, f]`` over the group's output features ``f``.
    Units are the output positions."""
    b = kb.builder
    lhs, rhs = conv.operands
    dtype = T.check_dtype(conv.shape.dtype, "convolution")
    dn, cg, og, groups, window = E.conv_parts(conv)
    dims = conv.shape.dims
    kb.kernel.strategy = "conv-rows"
    kb.kernel.cost_ns = 2 * math.prod(dims) * cg * math.prod(window["size"]) * _kernels._NS_PER_FLOP * 4
    if math.prod(dims) == 0:
        return
    fdim = dn.out_spec[1]
    fstride = row_major_strides(dims)[fdim]
    outer_dims = [d for d in range(len(dims)) if d != fdim]  # in memory order
    nsp = len(dims) - 2
    # (+0.0, as XLA's convolutions start: see elemental._conv_rule)
    zero = T.constant(dtype, 0)

    def full_index(outer_ivs, f):
        multi = [None] * len(dims)
        for d, v in zip(outer_dims, outer_ivs):
            multi[d] = v
        multi[fdim] = f
        return multi

    with kb.units([dims[d] for d in outer_dims], "o") as outer:
        multi0 = full_index(outer, T.i64(0))
        row_start = linearize(b, multi0, dims)
        batch = multi0[dn.out_spec[0]]
        out_pos = [multi0[dn.out_spec[2 + s]] for s in range(nsp)]

        def row_offset(f):
            return b.add(row_start, f if fstride == 1 else b.mul(f, T.i64(fstride)))

        @contextlib.contextmanager
        def row_positions():
            with for_loop(b, 0, dims[fdim], "f") as f:
                yield full_index(outer, f)

        with for_loop(b, 0, dims[fdim], "z") as f:
            T.store_element(b, zero, kb.out, dtype, row_offset(f))
        with for_loop(b, 0, groups, "g") as g, loop_nest(b, window["size"], "w") as ks:
            positions, valid = [], ir.Constant(T.I1, 1)
            for s in range(nsp):
                p, v = E.conv_input_position(b, conv, dn, window, s, out_pos[s], ks[s])
                positions.append(p)
                valid = b.and_(valid, v)
            # As XLA:CPU: padding zeros are multiplied (0 * inf = NaN), lhs-dilation holes skipped.
            pad_only = all(d == 1 for d in window["lhs_dilate"])
            if pad_only:
                positions = [b.select(valid, p, T.i64(0)) for p in positions]
            with if_then(b, ir.Constant(T.I1, 1) if pad_only else valid, "inside"), for_loop(b, 0, cg, "c") as c:
                lm = [None] * lhs.shape.rank
                lm[dn.lhs_spec[0]] = batch
                lm[dn.lhs_spec[1]] = b.add(b.mul(g, T.i64(cg)), c)
                for s in range(nsp):
                    lm[dn.lhs_spec[2 + s]] = positions[s]
                x = E.load_converted(kb.emitter(), lhs, Index(b, lhs.shape.dims, multi=lm), dtype)
                if pad_only:
                    x = b.select(valid, x, T.constant(dtype, 0))
                with for_loop(b, 0, og, "f") as fo:
                    f = b.add(b.mul(g, T.i64(og)), fo)
                    rm = [None] * rhs.shape.rank
                    rm[dn.rhs_spec[0]], rm[dn.rhs_spec[1]] = f, c
                    for s in range(nsp):
                        rm[dn.rhs_spec[2 + s]] = ks[s]
                    y = E.load_converted(kb.emitter(), rhs, Index(b, rhs.shape.dims, multi=rm), dtype)
                    o = row_offset(f)
                    acc = T.load_element(b, kb.out, dtype, o)
                    T.store_element(b, E.multiply_accumulate(b, dtype, acc, x, y), kb.out, dtype, o)
        _apply_tail(kb, root, conv, row_positions)
