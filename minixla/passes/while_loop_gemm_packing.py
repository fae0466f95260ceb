"""Pack a loop's invariant GEMM operand once, before the loop (minixla's own pass, configured
by the backend; XLA:CPU's nearest are oneDNN's weight "pre-packing" and the packed-B formats of
its runtime matmul, which also trade one copy of a constant operand for every call's).

A GEMM copies its rhs ``B`` (``[K, N]``) into *panels* before it multiplies: per column panel
of ``NR`` columns (the register tile's width) and per block of ``K``, a contiguous
``[K-block, NR]`` piece, so the micro-kernel reads ``NR`` consecutive elements per ``k``
(``backends/llvm/gemm.py``, "Packing"). In an RNN cell ``h = tanh(h @ W + ...)`` inside a
``scan``, ``W`` is the same every step, so every step packs it again: for hidden 256 and
batch 32 that copy of 256 KiB was about a quarter of the step.

The pass rewrites such a dot so that its rhs *is* the packed layout, an ordinary HLO value::

    body:  d = dot(h, W)                          # h [.., K], W [K, N] invariant, N = P * NR
    ==>    W_p = transpose(reshape(W, [K, P, NR]), dimensions={1, 0, 2})    # [P, K, NR]
           d   = reshape(dot(h, W_p), [.., N])    # contracting W_p's dim 1, free dims (P, NR)

``W_p`` depends only on the invariant ``W``, so ``while-loop-invariant-code-motion`` (run
by this pass after the rewrite) computes it once before the loop -- before every enclosing
loop that passes ``W`` through too -- and passes it in as one more state element: its own
buffer, live across the loop. ``while-loop-simplifier`` then drops ``W`` from the state when
nothing else in the loop reads it. ``dot(h, W_p)`` is ``[.., P, NR]``, whose
row-major order is ``[.., N]``'s: the reshape moves no data. (A transposed ``W``, ``h @ W.T``
as a backward pass multiplies, packs as ``transpose(reshape(W, [P, NR, K]), {0, 2, 1})``.)

The backend recognizes a rhs already in panels (``[P, K, NR]`` with its own ``NR``,
contracting dim 1; ``kernels_dot.gemm_for_dot``) and its GEMM reads each ``[K-block, NR]``
piece in place instead of copying it. The K blocks, tiles and micro-kernel calls are the same
as with the copy, in the same order, so the result is bit-identical to the unpacked dot's.

Taken for a float dot in a ``while`` body with no batch dims, a rank-2 rhs that the body
passes through unchanged or a constant (weights the function closes over, which
``while-loop-constant-sinking`` moved into the body; the panels are then computed from the
literal once per call, into the arena), one contracting dim, a non-invariant lhs (an invariant one is
``while-loop-invariant-code-motion``'s), and ``N`` a multiple of ``panel_columns`` (no padding
panel). Runs once, after the simplification fixed point (``jit.py``), for the LLVM backend
only: ``panel_columns`` is its register tile's width (``gemm.NV * lanes``); the JAX hand-off
packs for itself.
"""
from __future__ import annotations

from minixla.hlo.ir import HloInstruction, Shape
from minixla.passes.pipeline import HloPass
from minixla.passes.while_loop_analysis import init_elements
from minixla.passes.while_loop_invariant_code_motion import WhileLoopInvariantCodeMotion
from minixla.passes.while_loop_simplifier import WhileLoopSimplifier

_DTYPES = ("float32", "float64")


def _panel_columns_for(panel_columns, dtype) -> int | None:
    if callable(panel_columns):
        return panel_columns(dtype)
    if isinstance(panel_columns, dict):
        return panel_columns.get(dtype.name)
    return panel_columns


class WhileLoopGemmPacking(HloPass):
    """``panel_columns``: the GEMM's panel width in elements, an int, or a ``{dtype name: int}``
    dict, or a callable of the dtype (None: that dtype is left alone)."""
    name = "while-loop-gemm-packing"

    def __init__(self, panel_columns):
        self.panel_columns = panel_columns

    def run(self, module) -> bool:
        changed = False
        for comp in list(module.computations):
            for loop in [i for i in comp.instructions if i.opcode == "while"]:
                changed |= self._pack(comp, loop)
        if changed:
            # The panels go before the loop, and before every enclosing loop that passes ``W``
            # through as well (a scan inside a ``fori_loop``); then ``W`` leaves the states that
            # no longer read it. (The fixed point before this pass left nothing else to hoist.)
            licm = WhileLoopInvariantCodeMotion()
            for _ in range(8):
                if not licm.run(module):
                    break
            WhileLoopSimplifier().run(module)
        return changed

    def _candidates(self, loop):
        """``[(dot, NR)]``: the dots of ``loop``'s body whose rhs the pass packs."""
        init = init_elements(loop)
        _, body = loop.called
        root = body.root
        if init is None or root.opcode != "tuple":
            return []
        param = body.parameters[0]

        def invariant(i):  # a state element the body passes through unchanged, or a constant
            if i.opcode == "constant":  # (closed-over weights, sunk into the body)
                return True
            if i.opcode != "get-tuple-element" or i.operands[0] is not param:
                return False
            k = i.attrs["index"]
            r = root.operands[k]
            return r.opcode == "get-tuple-element" and r.operands[0] is param and r.attrs["index"] == k

        found = []
        for d in body.instructions:
            if d.opcode != "dot" or d.attrs.get("lhs_batch_dims") or d.attrs.get("rhs_batch_dims"):
                continue
            lhs, rhs = d.operands
            dtype = d.shape.dtype
            if (dtype.name not in _DTYPES or lhs.shape.dtype != dtype or rhs.shape.dtype != dtype
                    or not invariant(rhs) or invariant(lhs) or rhs.shape.rank != 2
                    or len(d.attrs["rhs_contracting_dims"]) != 1 or len(d.attrs["lhs_contracting_dims"]) != 1):
                continue
            nr = _panel_columns_for(self.panel_columns, dtype)
            rc = d.attrs["rhs_contracting_dims"][0]
            K, N = rhs.shape.dims[rc], rhs.shape.dims[1 - rc]
            if not nr or N % nr or K == 0 or N == 0 or d.shape.size == 0:
                continue
            found.append((d, nr))
        return found

    def _pack(self, comp, loop) -> bool:
        found = self._candidates(loop)
        if not found:
            return False
        module = comp.module
        body = loop.called[1]
        replace = {}
        for d, nr in found:
            lhs, rhs = d.operands
            dtype = d.shape.dtype
            rc = d.attrs["rhs_contracting_dims"][0]
            K, N = rhs.shape.dims[rc], rhs.shape.dims[1 - rc]
            P = N // nr
            if rc == 0:  # W [K, N] -> [K, P, NR] -> [P, K, NR]
                split, perm = (K, P, nr), (1, 0, 2)
            else:        # W [N, K] -> [P, NR, K] -> [P, K, NR]
                split, perm = (P, nr, K), (0, 2, 1)
            r = HloInstruction("reshape", Shape(dtype, split), [rhs], name=module.unique_name("reshape"))
            panels = HloInstruction("transpose", Shape(dtype, (P, K, nr)), [r], {"dimensions": perm},
                                    name=module.unique_name("transpose"), metadata=dict(d.metadata))
            attrs = dict(d.attrs, rhs_contracting_dims=(1,))
            free = d.shape.dims[:-1]
            dp = HloInstruction("dot", Shape(dtype, (*free, P, nr)), [lhs, panels], attrs,
                                name=module.unique_name("dot"), metadata=dict(d.metadata))
            out = HloInstruction("reshape", d.shape, [dp], name=module.unique_name("reshape"))
            at = body.instructions.index(d)
            body.instructions[at:at] = [r, panels, dp, out]
            replace[d] = out
        body.replace_uses(replace)
        body.remove_dead()
        return True
