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
by the others. Values that depend only on the row (``m``, ``s``, ``rsqrt(var + eps)``) are
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

from minixla.backends.llvm import elemental as E
from minixla.backends.llvm import ir_types as T
from minixla.backends.llvm import kernels as K
from minixla.backends.llvm import reductions as R
from minixla.backends.llvm.loops import Index, delinearize, for_loop
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
    with for_loop(b, kb.lo, kb.hi, "row") as u:
        row_multi = delinearize(b, u, row_dims)
        base = b.mul(u, T.i64(cols), flags=("nsw", "nuw"))
        values = {}  # this row's reductions and the row values broadcast from them

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

        for red in reduces:
            operand, init = red.operands
            dtype = T.check_dtype(red.shape.dtype, "reduce")
            hoist_row_values(operand)
            comp = red.called[0]

            def step(acc, ivs, red=red, comp=comp, dtype=dtype, reassoc=True):
                index = element_index(ivs[0])
                em = kb.emitter(values)
                x = em.emit(operand, index)
                if red is reduces[-1] and kept is not None:
                    T.store_element(b, em.emit(kept, index), kb.out, out_dtype, index.linear)
                return T.round_narrow(b, E.emit_reducer(b, comp, acc, x, reassoc=reassoc), dtype)

            values[red] = R.accumulate(
                b, T.reg_type(dtype), kb.emitter(values).emit(init, Index(b, (), multi=[])), [cols], step,
                lambda x, y, comp=comp, dtype=dtype: T.round_narrow(b, E.emit_reducer(b, comp, x, y), dtype),
                R.block_identity(comp, dtype), "c", interleave=_interleave(operand, values, kb.buffers),
                redo_nan=E.ordered_step(step, comp, dtype))
        hoist_row_values(root)
        buffers = dict(kb.buffers) if kept is None else {**kb.buffers, kept: kb.out}
        with for_loop(b, 0, cols, "c", interleave=_interleave(root, values, buffers)) as c:
            index = element_index(c)
            value = E.ElementalEmitter(b, buffers, values).emit(root, index)
            T.store_element(b, value, kb.out, out_dtype, index.linear)


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
