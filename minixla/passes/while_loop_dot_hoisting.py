"""Hoist a loop's per-step dot with a stacked input out of the loop (minixla's own pass; XLA
has none like it -- the nearest are cuDNN's RNNs, which compute every step's input projection
as one big GEMM before the recurrence).

A ``scan`` over ``xs`` (``[T, ...]``) reads step ``t`` with ``dynamic-slice``; an RNN cell then
multiplies that slice by a weight matrix the loop passes through unchanged::

    body:  x_t = reshape(dynamic-slice(xs, t, 0, ..., 0))        # [B, K]
           p_t = dot(x_t, U)                                       # [B, N], U invariant

Each step's ``p_t`` depends only on ``xs`` and ``U``, not on the carry, so all ``T`` of them
are one dot before the loop, ``P = reshape(dot(reshape(xs, [T*B, K]), U), [T, B, N])``, and the
body reads its row: ``p_t = reshape(dynamic-slice(P, t, 0, 0))``. ``dynamic-slice`` clamps ``t``
into ``[0, T-1]`` the same way for ``xs`` and ``P``, so every index gives the same row; the
other dims are sliced whole, so their start indices do not matter. One ``[T*B, K] x [K, N]``
GEMM instead of ``T`` small ones: the loop keeps only the work that depends on the carry
(``h @ W``), and the big GEMM runs at full speed, over every thread (a loop body runs on one).

Taken when the loop's trip count is known and at least ``T`` (each row of ``P`` is used; a
loop that stops early would waste the rest), the dot has no batch dims, contracts the
slice's last dim with one dim of a rank-2 invariant rhs, is float, and ``P`` is at most
``MAX_HOISTED_BYTES`` or at most as big as ``xs`` (``N <= K``: the loop's memory stays within
twice what its caller passed, however long the sequence; a fixed limit alone made a scan of
10,000 steps a different program from one of 1,000 -- a per-step dot and a copy of ``x_t``
each trip -- which compiled ~15% slower and ran ~20% slower). ``P`` joins the loop state as one more pass-through element, as
``while-loop-invariant-code-motion`` does with what it hoists. Dots are not bit-identical
across GEMM shapes in general: the result agrees with the per-step dot to rounding (in
minixla's GEMM the ``K`` blocks and their order are the same, so it is usually exact).
"""
from __future__ import annotations

import math

import numpy as np

from minixla.hlo.ir import HloInstruction, Shape
from minixla.passes.pipeline import HloPass
from minixla.passes.while_loop_analysis import init_elements, trip_count

#: the largest stacked result (bytes) the pass materializes, unless it is no bigger than the
#: stacked input it is computed from
MAX_HOISTED_BYTES = 1 << 28
_FLOATS = ("float16", "bfloat16", "float32", "float64")


class WhileLoopDotHoisting(HloPass):
    name = "while-loop-dot-hoisting"

    def run(self, module) -> bool:
        changed = False
        for comp in list(module.computations):
            for loop in [i for i in comp.instructions if i.opcode == "while"]:
                changed |= self._hoist(comp, loop)
        return changed

    @staticmethod
    def _candidates(loop):
        """``(dot, xs element, rhs element)`` of every dot the pass can hoist out of ``loop``."""
        init = init_elements(loop)
        _, body = loop.called
        root = body.root
        n = trip_count(loop)
        if init is None or root.opcode != "tuple" or n is None:
            return []
        param = body.parameters[0]

        def passthrough(i):  # the state element ``i`` reads, if the body passes it through
            if i.opcode != "get-tuple-element" or i.operands[0] is not param:
                return None
            k = i.attrs["index"]
            r = root.operands[k]
            ok = r.opcode == "get-tuple-element" and r.operands[0] is param and r.attrs["index"] == k
            return k if ok else None

        found = []
        for d in body.instructions:
            if d.opcode != "dot" or d.attrs.get("lhs_batch_dims") or d.attrs.get("rhs_batch_dims"):
                continue
            lhs, rhs = d.operands
            if lhs.opcode != "reshape" or lhs.operands[0].opcode != "dynamic-slice":
                continue
            ds = lhs.operands[0]
            kx, kw = passthrough(ds.operands[0]), passthrough(rhs)
            if kx is None or kw is None:
                continue
            xs = ds.operands[0].shape
            sizes = tuple(ds.attrs["dynamic_slice_sizes"])
            if (xs.rank < 2 or sizes != (1, *xs.dims[1:]) or tuple(lhs.shape.dims) != xs.dims[1:]
                    or tuple(d.attrs["lhs_contracting_dims"]) != (lhs.shape.rank - 1,)
                    or rhs.shape.rank != 2 or len(d.attrs["rhs_contracting_dims"]) != 1):
                continue
            T = xs.dims[0]
            if (n < T or d.shape.dtype.name not in _FLOATS or xs.dtype != d.shape.dtype
                    or T * d.shape.nbytes > max(MAX_HOISTED_BYTES, xs.nbytes) or T * d.shape.size == 0):
                continue
            found.append((d, kx, kw))
        return found

    def _hoist(self, comp, loop) -> bool:
        if loop is comp.root or any(u.opcode != "get-tuple-element" for u in comp.users()[loop]):
            return False  # (the state grows: only element reads of the result may see it)
        found = self._candidates(loop)
        if not found:
            return False
        module = comp.module
        init = init_elements(loop)
        cond, body = loop.called
        param, root = body.parameters[0], body.root
        new_init, before = [], []
        for d, kx, kw in found:
            xs, w = init[kx], init[kw]
            K = xs.shape.dims[-1]
            M = math.prod(xs.shape.dims[:-1])
            rc = d.attrs["rhs_contracting_dims"][0]
            N = w.shape.dims[1 - rc]
            x2 = HloInstruction("reshape", Shape(xs.shape.dtype, (M, K)), [xs], name=module.unique_name("reshape"))
            attrs = dict(d.attrs, lhs_contracting_dims=(1,))
            p2 = HloInstruction("dot", Shape(d.shape.dtype, (M, N)), [x2, w], attrs,
                                name=module.unique_name("dot"), metadata=dict(d.metadata))
            p = HloInstruction("reshape", Shape(d.shape.dtype, (xs.shape.dims[0], *d.shape.dims)), [p2],
                               name=module.unique_name("reshape"))
            before += [x2, p2, p]
            new_init.append(p)
        at = comp.instructions.index(loop.operands[0])
        comp.instructions[at:at] = before
        n = len(init)
        shape = Shape.tuple_of(list(loop.shape.tuple_shapes) + [p.shape for p in new_init])
        loop.operands[0].operands = list(init) + new_init
        loop.operands[0].shape = shape
        loop.shape = shape
        for c in (cond, body):
            c.parameters[0].shape = shape
        reads, replace = [], {}
        for m, ((d, kx, kw), p) in enumerate(zip(found, new_init)):
            g = HloInstruction("get-tuple-element", p.shape, [param], {"index": n + m},
                               name=module.unique_name("get-tuple-element"))
            reads.append(g)
            ds = d.operands[0].operands[0]
            t = ds.operands[1]
            zero = HloInstruction("constant", Shape(t.shape.dtype, ()), literal=np.zeros((), t.shape.dtype),
                                  name=module.unique_name("constant"))
            row = HloInstruction("dynamic-slice", Shape(d.shape.dtype, (1, *d.shape.dims)),
                                 [g, t] + [zero] * d.shape.rank,
                                 {"dynamic_slice_sizes": (1, *d.shape.dims)}, name=module.unique_name("dynamic-slice"))
            r = HloInstruction("reshape", d.shape, [row], name=module.unique_name("reshape"))
            at = body.instructions.index(d)
            body.instructions[at:at] = [zero, row, r]
            replace[d] = r
        body.instructions = [param] + reads + [i for i in body.instructions if i is not param]
        body.replace_uses(replace)
        new_root = HloInstruction("tuple", shape, list(root.operands) + reads, name=module.unique_name("tuple"))
        body.instructions.append(new_root)
        body.root = new_root
        body.remove_dead()
        return True
