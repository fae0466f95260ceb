"""The scan kernel: a cumulative reduction (``reduce-window`` over a prefix/suffix) in O(n).

``minixla.hlo.scan.scan_axis`` recognizes the window JAX emits for ``cumsum``/``cumprod``/
``cummax``/``cummin`` along axis ``a``; ``kernels.py`` emits this kernel when ``runs_as_scan``.
The elemental ``reduce-window`` rule re-reduces each output's whole window (O(n^2) along the
axis); XLA:CPU rewrites such a window into a scan, and so does this kernel. Viewing the array
as ``(outer, n, inner)`` around the axis::

    out[o, first, j] = reducer(init, x[o, first, j])
    out[o, i, j]     = reducer(out[o, i -/+ 1, j], x[o, i, j])     # i in scan order

That is the window's own order, ``((init . x0) . x1) . ...``, for an axis of at most 16; a
longer prefix (a simple reducer: add, multiply, max, min, ...) is computed in XLA:CPU's blocked
order instead (``_emit_blocked_scan``), so float sums and products round, and a max/min picks
its NaN, as ``jax.jit``'s do. A float16/bfloat16 partial result is rounded at each step, as in
JAX eager (the elemental rule kept it in f32). A suffix is accumulated from the end (see
``scan_keeps_window_order`` for when that changes float bits). The inner loop runs over the
contiguous ``j`` (the previous row is in L1, the loop vectorizes); for a minor axis
(``inner == 1``) the running value stays in a register. Units (what the executable splits
over threads) are the ``outer`` positions times chunks of ``inner``, so a unit never splits a
scan. ``x`` is read elementally: a fused operand expression is computed once per element.
"""
from __future__ import annotations

import math

from minixla.backends.llvm import elemental as E
from minixla.backends.llvm import ir_types as T
from minixla.backends.llvm.loops import Index, for_loop, if_then
from minixla.hlo.scan import SHORT_AXIS, scan_axis, scan_keeps_window_order

#: inner elements per unit (a vector loop long enough to amortize the unit's overhead).
INNER_CHUNK = 1024


def emit_scan(kb, rw, cost_ns: float):
    """Emit the body of the kernel computing scan-shaped ``reduce-window`` ``rw``."""
    axis, reverse = scan_axis(rw)
    b = kb.builder
    operand, init = rw.operands
    dims = rw.shape.dims
    dtype = T.check_dtype(rw.shape.dtype, "reduce-window")
    outer, n, inner = math.prod(dims[:axis]), dims[axis], math.prod(dims[axis + 1:])
    kb.kernel.strategy = "scan"
    kb.kernel.cost_ns = cost_ns
    if outer * n * inner == 0:
        return
    region = rw.called[0]
    chunk = min(inner, INNER_CHUNK)
    nchunks = -(-inner // chunk)
    kb.kernel.units = outer * nchunks
    init_value = kb.emitter().emit(init, Index(b, (), multi=[]))

    def row(o, k):  # linear offset of (o, k-th position in scan order, 0)
        k = T.i64(k) if isinstance(k, int) else k
        i = b.sub(T.i64(n - 1), k) if reverse else k
        return b.mul(b.add(b.mul(o, T.i64(n)), i), T.i64(inner))

    def x_at(linear):
        return kb.emitter().emit(operand, Index(b, dims, linear=linear))

    root, params = region.root, region.parameters
    simple = root.opcode in E.SIMPLE_REDUCERS and list(root.operands) == params

    def step(acc, x):  # f16/bf16 are computed in f32: round each partial result, as JAX does
        # (no ``reassoc``: the order of the partial results is the point)
        value = (E.binary_op(b, root.opcode, dtype, acc, x) if simple
                 else E.emit_reducer(b, region, acc, x))
        return T.round_narrow(b, value, dtype)

    with for_loop(b, kb.lo, kb.hi, "unit") as u:
        if nchunks == 1:
            o, j0, j1 = u, T.i64(0), T.i64(inner)
        else:
            o, c = b.udiv(u, T.i64(nchunks)), b.urem(u, T.i64(nchunks))
            j0 = b.mul(c, T.i64(chunk))
            end = b.add(j0, T.i64(chunk))
            j1 = b.select(b.icmp_signed("<", end, T.i64(inner)), end, T.i64(inner))
        if reverse and n < SHORT_AXIS and not scan_keeps_window_order(rw):
            # A short float suffix: each window in its own order (JAX eager's bits), O(n^2).
            acc = kb.alloca(T.reg_type(dtype), "window.acc")
            with for_loop(b, 0, n, "window") as i, for_loop(b, j0, j1, "window.j") as j:
                b.store(init_value, acc)
                with for_loop(b, i, n, "window.t") as t:
                    b.store(step(b.load(acc), x_at(b.add(row(o, b.sub(T.i64(n - 1), t)), j))), acc)
                T.store_element(b, b.load(acc), kb.out, dtype, b.add(row(o, b.sub(T.i64(n - 1), i)), j))
        elif not reverse and simple:
            _emit_blocked_scan(b, kb, n, chunk, j0, j1, init_value, step,
                               lambda k, j: x_at(b.add(row(o, k), b.add(j0, j))),
                               lambda k, j, v: T.store_element(b, v, kb.out, dtype, b.add(row(o, k), b.add(j0, j))))
        elif inner == 1:
            acc = kb.alloca(T.reg_type(dtype), "scan.acc")
            b.store(init_value, acc)
            with for_loop(b, 0, n, "scan") as k:
                lin = row(o, k)
                value = step(b.load(acc), x_at(lin))
                b.store(value, acc)
                T.store_element(b, value, kb.out, dtype, lin)
        else:
            first = row(o, 0)
            with for_loop(b, j0, j1, "scan.j") as j:
                lin = b.add(first, j)
                T.store_element(b, step(init_value, x_at(lin)), kb.out, dtype, lin)
            stride = -inner if reverse else inner
            with for_loop(b, 1, n, "scan") as k:
                base = row(o, k)
                prev = b.sub(base, T.i64(stride))
                with for_loop(b, j0, j1, "scan.j") as j:
                    lin = b.add(base, j)
                    acc = T.load_element(b, kb.out, dtype, b.add(prev, j))
                    T.store_element(b, step(acc, x_at(lin)), kb.out, dtype, lin)


#: XLA:CPU rewrites a scan longer than this into blocks of this many elements (see below)
SCAN_BLOCK = 16


def scan_levels(n: int) -> int:
    """How many times XLA:CPU's scan rewrite blocks a prefix scan of ``n`` elements: each level
    scans the totals of the blocks of the one below, until at most ``SCAN_BLOCK`` remain."""
    levels = 0
    while n > SCAN_BLOCK:
        n, levels = -(-n // SCAN_BLOCK), levels + 1
    return levels


def _emit_blocked_scan(b, kb, n, chunk, j0, j1, init, step, x_of, store):
    """A prefix scan computed as XLA:CPU computes it (its reduce-window rewriter, which JAX's
    ``cumsum``/``cummax``/... meet in ``jax.jit`` and eagerly alike), so float sums round as
    XLA's do and a max/min gives XLA's NaN bits. XLA scans ``x`` of ``n > 16`` elements as
    ``[B, 16]`` blocks (padded with ``init``): ``local[b, i]`` is block ``b``'s own prefix from
    ``init``; the block totals ``t = local[:, 15]`` are scanned the same way (recursively:
    ``S(t)``); ``out[16 b + i] = local[b, i] . carry[b]``, local first, with ``carry[0] = init``
    and ``carry[b] = S(t)[b - 1]``. Streamed here in one pass over ``x``: each level keeps its
    running ``local`` and ``carry`` per inner column ``j`` and its position in its block; when a
    block starts, the previous block's total is pushed one level up, whose scan value is the new
    carry. The top level (at most 16 elements) is a plain running value. ``x_of(k, j)``/
    ``store(k, j, v)`` read and write element ``k`` (scan order) of inner column ``j0 + j``."""
    levels = scan_levels(n)
    ty = init.type
    slots = lambda name: kb.alloca(ty, name, chunk)  # noqa: E731
    local = [slots(f"scan.local{lv}") for lv in range(levels)]
    carry = [slots(f"scan.carry{lv}") for lv in range(levels)]
    top = slots("scan.top")
    pos = [kb.alloca(T.I64, f"scan.pos{lv}") for lv in range(levels)]
    blk = [kb.alloca(T.I64, f"scan.blk{lv}") for lv in range(levels)]
    width = b.sub(j1, j0)

    def at(base, j):
        return b.gep(base, [j], inbounds=True, source_etype=ty)

    def columns(body):
        if chunk == 1:
            body(T.i64(0))
        else:
            with for_loop(b, 0, width, "scan.j") as j:
                body(j)

    def push(lv, value, result):
        """Push ``value(j)`` into level ``lv``'s sequence; ``result(j, v)`` gets its scan value."""
        if lv == levels:
            def top_step(j):
                v = step(b.load(at(top, j)), value(j))
                b.store(v, at(top, j))
                result(j, v)
            columns(top_step)
            return
        with if_then(b, b.icmp_unsigned("==", b.load(pos[lv]), T.i64(0)), f"scan.start{lv}"):
            first = b.icmp_unsigned("==", b.load(blk[lv]), T.i64(0))
            with if_then(b, first, f"scan.first{lv}"):
                columns(lambda j: b.store(init, at(carry[lv], j)))
            with if_then(b, b.not_(first), f"scan.next{lv}"):
                push(lv + 1, lambda j: b.load(at(local[lv], j)), lambda j, v: b.store(v, at(carry[lv], j)))
            columns(lambda j: b.store(init, at(local[lv], j)))

        def level_step(j):
            v = step(b.load(at(local[lv], j)), value(j))
            b.store(v, at(local[lv], j))
            result(j, step(v, b.load(at(carry[lv], j))))
        columns(level_step)
        nxt = b.add(b.load(pos[lv]), T.i64(1))
        wrap = b.icmp_unsigned("==", nxt, T.i64(SCAN_BLOCK))
        b.store(b.select(wrap, T.i64(0), nxt), pos[lv])
        b.store(b.add(b.load(blk[lv]), b.zext(wrap, T.I64)), blk[lv])

    for lv in range(levels):
        b.store(T.i64(0), pos[lv])
        b.store(T.i64(0), blk[lv])
    columns(lambda j: b.store(init, at(top, j)))
    with for_loop(b, 0, n, "scan") as k:
        push(0, lambda j: x_of(k, j), lambda j, v: store(k, j, v))
