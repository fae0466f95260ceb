"""Kernels for ops that are not "one expression per output element".

``scatter`` writes each update element into a position computed from the scatter indices;
several updates may land on the same position (``x.at[[0, 0]].add(1)`` adds twice), so it
cannot be emitted elementally. Its kernel (XLA:CPU emits the same loop) is:

1. ``out = operand`` (a copy, elementwise: fused producers of the operand are computed here);
2. for every update element, in row-major order: compute its operand position; if the
   whole update window lies inside the operand, ``out[pos] = combiner(out[pos], update)``,
   else the window is dropped (XLA's semantics, JAX's ``mode='drop'``).

``kernels.py`` dispatches a kernel whose root opcode is a key of ``KERNELS`` here.
"""
from __future__ import annotations

import math

from llvmlite import ir

from minixla.backends.llvm import elemental as E
from minixla.backends.llvm import ir_types as T
from minixla.backends.llvm.loops import Index, for_loop, if_then, loop_nest


def scatter_operand_index(b, em, scatter, upd_multi):
    """(operand position, in-bounds flag) of the update element at ``upd_multi``."""
    operand, indices, updates = scatter.operands
    a = scatter.attrs
    window_dims_upd = a["update_window_dims"]
    inserted = a["inserted_window_dims"]
    to_operand = a["scatter_dims_to_operand_dims"]
    scatter_ivs = [v for d, v in enumerate(upd_multi) if d not in window_dims_upd]
    window_sizes = [updates.shape.dims[d] for d in window_dims_upd]
    op_window_dims = [d for d in range(operand.shape.rank) if d not in inserted]
    size = [1] * operand.shape.rank
    offset = [T.i64(0)] * operand.shape.rank
    for d, n, u in zip(op_window_dims, window_sizes, window_dims_upd):
        size[d], offset[d] = n, upd_multi[u]
    start = [T.i64(0)] * operand.shape.rank
    for k, d in enumerate(to_operand):
        iv = em.emit(indices, Index(b, indices.shape.dims, multi=scatter_ivs + [T.i64(k)]))
        start[d] = E.index_value(b, iv, indices.shape.dtype)
    valid = None
    for d, n in enumerate(operand.shape.dims):
        # 0 <= start <= n - size, as one unsigned compare (needs n >= size, checked by the shape rule)
        ok = b.icmp_unsigned("<=", start[d], T.i64(n - size[d]))
        valid = ok if valid is None else b.and_(valid, ok)
    multi = [b.add(s, o) for s, o in zip(start, offset)]
    return Index(b, operand.shape.dims, multi=multi), valid


def emit_scatter(kb, scatter):
    b = kb.builder
    operand, _indices, updates = scatter.operands
    dtype = T.check_dtype(scatter.shape.dtype, "scatter")
    n = math.prod(scatter.shape.dims)
    if n == 0:
        return
    with for_loop(b, 0, n, "copy") as i:
        x = kb.emitter().emit(operand, Index(b, scatter.shape.dims, linear=i))
        T.store_element(b, x, kb.out, dtype, i)
    if updates.shape.size == 0:
        return
    with loop_nest(b, updates.shape.dims, "u") as ivs:
        em = kb.emitter()
        pos, valid = scatter_operand_index(b, em, scatter, ivs)
        value = em.emit(updates, Index(b, updates.shape.dims, multi=ivs))
        with if_then(b, valid if valid is not None else ir.Constant(T.I1, 1), "inbounds"):
            o = pos.linear
            acc = T.load_element(b, kb.out, dtype, o)
            T.store_element(b, E.emit_reducer(b, scatter.called[0], acc, value), kb.out, dtype, o)


#: root opcode -> fn(kernel builder, root instruction): emits the kernel body.
KERNELS = {"scatter": emit_scatter}


def _emit_sort(kb, instr):  # (issue 14) a radix sort, see sort.py
    from minixla.backends.llvm.sort import emit_sort
    emit_sort(kb, instr)


KERNELS["sort"] = _emit_sort
