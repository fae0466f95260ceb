"""Row kernels: the kernel of a *row fusion* (rule 8 of ``minixla/passes/fusion.py``).

A row fusion computes an output of shape ``(R..., C...)`` from reductions over the minor dims
``C...`` that are broadcast back along their own row: softmax is
``max -> exp(x - max) -> sum -> exp(x - max) / sum``, layernorm ``mean -> var -> (x - mean) *
rsqrt(var + eps) * gamma + beta``. A loop kernel would recompute each reduction for every
output element, so before rule 8 these were three kernels, each reading ``x`` from DRAM.

The row kernel's units are the rows (the positions of ``R...``); for each row it runs
one pass over the row per reduction, in program order, then one pass writing the output::

    for row in [lo, hi):
        m = -inf;  for c: m = max(m, x[row, c])             # into a register
        s = 0;     for c: s = s + exp(x[row, c] - m)        # m broadcast from the register
                   for c: out[row, c] = exp(x[row, c] - m) / s

The row (at most rule 8's 32 KiB budget) is read from DRAM by the first pass and from L1/L2
by the others. When the first reduction is exact in any order (softmax's max), each row's
last pass also accumulates the *next* row's first reduction (``_read_ahead``), so DRAM reads
stream under the ``exp`` instead of stopping for it; a chunk's first row runs it alone::

    m = max(x[lo, :])                                    # the chunk's first row only
    for row in [lo, hi):
        s = 0; m' = -inf
        for c: e = exp(x[row, c] - m); out[row, c] = e; s += e; m' = max(m', x[row + 1, c])
        for c: out[row, c] = out[row, c] * (1 / s)
        m = m'

Values that depend only on the row (``m``, ``s``, ``rsqrt(var + eps)``) are
computed once per row, before the pass that reads them. Every element is computed by the
same elemental emitter as in the unfused kernels, so the elementwise results are
bit-identical; each reduction accumulates in registers with ``reassoc`` (the only
fast-math flag: it lets LLVM vectorize the pass), in blocks combined pairwise like the reduce
kernel (``reductions.accumulate``), so sums agree with it within the reduction tolerance and
max/min exactly.

The backend does not trust the pass: ``row_plan`` re-derives every member's access class
(``row_access`` of the fusion pass) and returns None for anything else, which the loop
kernel then emits (correct, but slow).
"""
from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from minixla.backends.llvm import elemental as E
from minixla.backends.llvm import ir_types as T
from minixla.backends.llvm import kernels as K
from minixla.backends.llvm import reductions as R
from minixla.backends.llvm.loops import Index, delinearize, for_loop, if_then
from minixla.passes.fusion import join_row_classes, row_access


def row_plan(root, buffers):
    """``(split, reductions in program order, {instr: access class})`` when the expression
    rooted at ``root`` (stopping at the kernel's ``buffers``) is a row fusion, else None."""
    if root.opcode == "reduce" or root.shape.is_tuple or not root.shape.dims:
        return None
    expr = [i for i in K._expression(root, buffers) if i not in buffers]  # operands first
    reduces = [i for i in expr if i.opcode == "reduce"]
    if not reduces or any(i.opcode in ("dot", "convolution") for i in expr):
        return None
    dims = root.shape.dims
    split = min(reduces[0].attrs.get("dimensions", ()), default=0)
    users = defaultdict(list)
    for u in expr:
        for o in u.operands:
            users[o].append(u)
    classes = {root: "full"}
    for i in reversed(expr[:-1]):
        c = join_row_classes(i, [row_access(u, classes[u], i, split, dims) for u in users[i]], split, dims)
        if c is None:
            return None
        classes[i] = c
    return split, reduces, classes


def emit_rows_if_row_fusion(kb, root) -> bool:
    """Emit the row kernel of ``root`` into ``kb`` if it is a row fusion; False otherwise."""
    plan = row_plan(root, kb.buffers)
    if plan is None:
        return False
    emit_rows(kb, root, *plan)
    return True


def emit_rows(kb, root, split, reduces, classes):
    """The row kernel (see the module docstring); units are the rows."""
    b = kb.builder
    dims = root.shape.dims
    row_dims, col_dims = dims[:split], dims[split:]
    rows, cols = math.prod(row_dims), math.prod(col_dims)
    out_dtype = T.check_dtype(root.shape.dtype, root.opcode)
    kb.kernel.strategy = "rows"
    kb.kernel.units = max(1, rows)
    n = rows * cols
    kb.kernel.cost_ns = K._elementwise_cost(root, kb.buffers, n) + sum(
        K._elementwise_cost(r.operands[0], kb.buffers, n) for r in reduces)
    if rows == 0:
        return
    kept = _kept_in_out(root, reduces, classes, kb.buffers)
    ahead = _read_ahead(reduces, classes, kb.buffers) if rows > 1 else False
    if ahead:  # (see ``_read_ahead``) the first reduction's value: this row's, then the next row's
        first = reduces[0]
        first_ty = T.reg_type(T.check_dtype(first.shape.dtype, "reduce"))
        carried = R.entry_alloca(b, first_ty, "row.first")
        next_acc = R.entry_alloca(b, first_ty, "row.next")
    with for_loop(b, kb.lo, kb.hi, "row") as u:
        row_multi = delinearize(b, u, row_dims)
        base = b.mul(u, T.i64(cols), flags=("nsw", "nuw"))
        values = {}  # this row's reductions and the row values broadcast from them
        if ahead:
            # the next row of this chunk (the last row reads itself again: no read past the end)
            nu = b.add(u, T.i64(1), flags=("nsw", "nuw"))
            nu = b.select(b.icmp_signed("<", nu, kb.hi), nu, u)
            next_multi = delinearize(b, nu, row_dims)
            next_base = b.mul(nu, T.i64(cols), flags=("nsw", "nuw"))

        def hoist_row_values(expr_root):
            """Compute, before the pass, the row values the pass broadcasts (once per row)."""
            stop = set(kb.buffers) | set(values)
            em = kb.emitter(values)
            for i in K._expression(expr_root, stop):
                if i in stop or i.opcode != "broadcast" or classes.get(i) != "full":
                    continue
                o = i.operands[0]
                if classes.get(o) == "row" and o not in values and o not in kb.buffers:
                    values[o] = em.emit(o, Index(b, o.shape.dims, multi=row_multi, linear=u))

        def element_index(c):
            return Index(b, dims, multi=row_multi + delinearize(b, c, col_dims), linear=b.add(base, c))

        def read_ahead(c):
            """Accumulate the next row's element ``c`` of the first reduction (in a later pass)."""
            red = reduces[0]
            index = Index(b, dims, multi=next_multi + delinearize(b, c, col_dims), linear=b.add(next_base, c))
            x = kb.emitter({}).emit(red.operands[0], index)
            dtype = T.check_dtype(red.shape.dtype, "reduce")
            b.store(T.round_narrow(b, E.emit_reducer(b, red.called[0], b.load(next_acc), x), dtype), next_acc)

        for k, red in enumerate(reduces):
            operand, init = red.operands
            dtype = T.check_dtype(red.shape.dtype, "reduce")
            comp = red.called[0]
            merged = ahead and red is reduces[-1] and len(reduces) > 1
            if merged:
                b.store(kb.emitter().emit(reduces[0].operands[1], Index(b, (), multi=[])), next_acc)

            def step(acc, ivs, red=red, comp=comp, dtype=dtype, merged=merged, reassoc=True):
                index = element_index(ivs[0])
                em = kb.emitter(values)
                x = em.emit(operand, index)
                if red is reduces[-1] and kept is not None:
                    T.store_element(b, em.emit(kept, index), kb.out, out_dtype, index.linear)
                if merged and reassoc:  # (not again in the ordered NaN redo: the vector pass read ahead)
                    read_ahead(ivs[0])
                return T.round_narrow(b, E.emit_reducer(b, comp, acc, x, reassoc=reassoc), dtype)

            def accumulate(step=step, operand=operand, init=init, comp=comp, dtype=dtype):
                return R.accumulate(
                    b, T.reg_type(dtype), kb.emitter(values).emit(init, Index(b, (), multi=[])), [cols], step,
                    lambda x, y, comp=comp, dtype=dtype: T.round_narrow(b, E.emit_reducer(b, comp, x, y), dtype),
                    R.block_identity(comp, dtype), "c", interleave=_interleave(operand, values, kb.buffers),
                    redo_nan=E.ordered_step(step, comp, dtype))

            if ahead and k == 0:  # read by the previous row's last pass, except a chunk's first row
                with if_then(b, b.icmp_signed("==", u, kb.lo), "row.cold"):
                    b.store(accumulate(), carried)
                values[red] = b.load(carried)
                ordered = E.ordered_step(step, comp, dtype)
                if ordered is not None:  # a NaN row read ahead (reassociated): again in XLA's order
                    values[red] = R.ordered_nan(b, T.reg_type(dtype), values[red], lambda: R.accumulate(
                        b, T.reg_type(dtype), kb.emitter(values).emit(init, Index(b, (), multi=[])), [cols],
                        ordered, name="c.ahead.nan"))
                continue
            hoist_row_values(operand)
            values[red] = accumulate()
            if merged:
                b.store(b.load(next_acc), carried)
        hoist_row_values(root)
        buffers = dict(kb.buffers) if kept is None else {**kb.buffers, kept: kb.out}
        if ahead and len(reduces) == 1:
            b.store(kb.emitter().emit(reduces[0].operands[1], Index(b, (), multi=[])), next_acc)
        with for_loop(b, 0, cols, "c", interleave=_interleave(root, values, buffers)) as c:
            index = element_index(c)
            value = E.ElementalEmitter(b, buffers, values).emit(root, index)
            T.store_element(b, value, kb.out, out_dtype, index.linear)
            if ahead and len(reduces) == 1:
                read_ahead(c)
        if ahead and len(reduces) == 1:
            b.store(b.load(next_acc), carried)


def _read_ahead(reduces, classes, buffers):
    """Whether each row's last pass also accumulates the *next* row's first reduction.

    The first pass is the one that reads the row from DRAM; the others run on the row in
    cache. Done row after row, a row's compute passes (softmax's ``exp``) leave DRAM idle,
    and the hardware prefetchers, which follow a stream only within a 4 KiB page, start cold
    on every row of a page or more. Accumulating row ``r + 1``'s first reduction in row
    ``r``'s last pass (softmax: the max of the next row in the pass computing ``exp``) keeps
    the reads streaming under the arithmetic. Only for a reduction whose result does not
    depend on the order of its elements (max/min, integer and/or), since a chunk's first
    row is still reduced alone (by its own pass); and only when its operand needs no row
    value (it is computed before any other reduction of its row exists). (One exception to
    "exact": which NaN a max of a row holding NaNs of different payloads returns depends on
    the order, which LLVM leaves unspecified anyway; XLA:CPU's long row max drops NaNs.)
    """
    first, last = reduces[0], reduces[-1]
    if any(T.is_narrow_float(np.dtype(r.shape.dtype)) for r in reduces):
        return False  # (measured: LLVM no longer vectorizes a bf16 pass with both reductions)
    if not _order_free(first) or first.operands[1] not in buffers and first.operands[1].opcode != "constant":
        return False
    if len(reduces) > 1 and not _order_free(last) and \
            _interleave(last.operands[0], set(reduces[:-1]), buffers) != EXPENSIVE_PASS_INTERLEAVE:
        return False  # (LLVM's own interleave of the merged pass could change the sum's order)
    for i in K._expression(first.operands[0], set(buffers)):
        if i in buffers:
            continue
        if i.opcode == "reduce" or classes.get(i) == "row":
            return False
    return True


#: interleave count of a pass that computes an expensive op (exp, log, divide, ...) per element
EXPENSIVE_PASS_INTERLEAVE = 1


def _interleave(expr_root, values, buffers):
    """LLVM's interleave count for a pass over ``expr_root`` (None: LLVM's choice, which is 4
    copies of the loop body). A pass with an expensive op per element is not interleaved: its
    body is long enough for out-of-order execution to overlap iterations. Measured on softmax
    and attention: ~2 ms less LLVM time (of ~25), no change in run time beyond the noise.
    (Cheap passes, like the running max, keep LLVM's choice: they are latency-bound.)"""
    stop = set(buffers) | set(values)
    expensive = any(i.opcode in K._EXPENSIVE for i in K._expression(expr_root, stop) if i not in stop)
    return EXPENSIVE_PASS_INTERLEAVE if expensive else None


def _order_free(reduce):
    """Whether a reduce's result is the same in every order of its elements (its
    ``to_apply`` a float max/min or an integer and/or of its two parameters)."""
    comp = reduce.called[0]
    root, params = comp.root, comp.parameters
    if len(params) != 2 or list(root.operands) != list(params):
        return False
    return root.opcode in ("maximum", "minimum") or (
        not T.is_float(np.dtype(reduce.shape.dtype)) and root.opcode in ("and", "or"))


def _kept_in_out(root, reduces, classes, buffers):
    """An expensive element value of the last reduction pass that the output pass needs too
    (softmax's ``exp(x - max)``), or None. The last pass stores it into the output row and
    the output pass loads it back instead of computing it again: the same bits (it is stored
    in the output's dtype, which must be its own), one ``exp`` per element instead of two.
    """
    stop = set(buffers) | set(reduces[:-1])
    in_root = set(K._expression(root, stop))

    def costly(i):
        return any(j.opcode in K._EXPENSIVE and classes.get(j) == "full"
                   for j in K._expression(i, stop) if j not in stop)

    candidates = [i for i in K._expression(reduces[-1].operands[0], stop)
                  if i not in stop and i is not root and i in in_root and classes.get(i) == "full"
                  and i.shape.dtype == root.shape.dtype and costly(i)]
    return candidates[-1] if candidates else None
