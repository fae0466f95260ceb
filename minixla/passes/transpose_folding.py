"""Transpose folding (XLA's ``xla/service/transpose_folding.cc``).

Rule: ``dot(transpose(x), y)`` computes the same values as a ``dot`` that reads ``x`` directly
with its dimension numbers renamed through the permutation: the transposed operand's dim ``d``
is ``x``'s dim ``perm[d]``. A ``dot`` only ever indexes its operands, so moving the
permutation into the indexing changes no arithmetic: the result is bit-identical.

Condition: the output of a ``dot`` lists the operand's free (neither batch nor contracting)
dims in increasing order. After folding they are listed in ``x``'s order, so the fold is done
only when the permutation keeps the free dims in the same relative order; otherwise the
result would come out transposed. Batch and contracting dims are paired explicitly, so any
permutation of them is fine.

Why it matters: attention's ``q @ k.T`` no longer materializes ``k.T`` (one kernel and one
buffer fewer); the dot kernel reads ``k`` with the right strides.

Second rule, a transposed *result*: ``transpose(dot(a, b))`` whose permutation keeps the batch
dims in front and swaps the block of ``a``'s free dims with the block of ``b``'s is
``dot(b, a)`` (``(A B)^T = B^T A^T``): each output element is the same products, summed over
the same contraction in the same order, so this too is bit-identical. Reverse mode makes this
pattern for every weight gradient (JAX's transpose rule of ``dot_general`` for the rhs is a
dot followed by a transpose); without the rule the 1024x1024 gradient of an MLP layer was
written once by the GEMM and then read at a 4 KiB stride by the update's loop (17 of the 105
ms of the MLP training step). Done only when the transpose is the dot's one user (otherwise
the product would be computed twice).
"""
from __future__ import annotations

from minixla.hlo.ir import HloInstruction
from minixla.passes.pipeline import HloPass

_DIMS = {0: ("lhs_batch_dims", "lhs_contracting_dims"), 1: ("rhs_batch_dims", "rhs_contracting_dims")}


def fold_operand(dot, i) -> bool:
    """Fold a ``transpose`` operand ``i`` (0 = lhs, 1 = rhs) of ``dot`` into it, if legal."""
    t = dot.operands[i]
    if t.opcode != "transpose":
        return False
    perm = t.attrs["dimensions"]
    batch_key, contract_key = _DIMS[i]
    batch, contract = dot.attrs[batch_key], dot.attrs[contract_key]
    free = [d for d in range(t.shape.rank) if d not in batch and d not in contract]
    source_free = [perm[d] for d in free]
    if source_free != sorted(source_free):
        return False
    dot.attrs[batch_key] = tuple(perm[d] for d in batch)
    dot.attrs[contract_key] = tuple(perm[d] for d in contract)
    dot.operands[i] = t.operands[0]
    return True


def swapped_dot(t, users):
    """``dot(b, a)`` computing ``t = transpose(dot(a, b))``, or None (see the module docstring)."""
    dot = t.operands[0]
    if dot.opcode != "dot" or len(users[dot]) != 1:
        return None
    a = dot.attrs
    nb = len(a["lhs_batch_dims"])
    free = [len(o.shape.dims) - nb - len(a[k]) for o, k in
            zip(dot.operands, ("lhs_contracting_dims", "rhs_contracting_dims"))]
    out = list(range(nb + sum(free)))
    want = out[:nb] + out[nb + free[0]:] + out[nb:nb + free[0]]
    if list(t.attrs["dimensions"]) != want or want == out:
        return None
    attrs = dict(a, lhs_batch_dims=a["rhs_batch_dims"], rhs_batch_dims=a["lhs_batch_dims"],
                 lhs_contracting_dims=a["rhs_contracting_dims"], rhs_contracting_dims=a["lhs_contracting_dims"])
    return HloInstruction("dot", t.shape, [dot.operands[1], dot.operands[0]], attrs, name=t.name,
                          metadata=dict(dot.metadata))


class TransposeFolding(HloPass):
    """Fold transposes into the dots that read them (the transposes then die in DCE), and a
    transposed dot result into a dot with swapped operands."""
    name = "transpose-folding"

    def run(self, module) -> bool:
        changed = False
        comp = module.entry
        for instr in comp.instructions:
            if instr.opcode == "dot":
                for i in (0, 1):
                    changed |= fold_operand(instr, i)
        users, mapping = None, {}
        for n, instr in enumerate(comp.instructions):
            if instr.opcode == "transpose" and instr.operands[0].opcode == "dot":
                users = users if users is not None else comp.users()
                new = swapped_dot(instr, users)
                if new is not None:
                    # the new dot takes the transpose's place; the old dot dies in DCE
                    comp.instructions[n] = mapping[instr] = new
        if mapping:
            comp.replace_uses(mapping)
            changed = True
        return changed
