"""Common-subexpression elimination (XLA's ``xla/service/hlo_cse.cc``).

Rule: two instructions of one computation compute the same value when they have the same
opcode, result shape, attributes, called computations (compared by structure, so two
identical ``add`` reducer regions count as one) and the same operands — in either order for
a commutative opcode (``add``, ``multiply``, ``maximum``, ``minimum``, ``and``, ``or``, and
``compare`` with ``EQ``/``NE``). The later one is replaced by the earlier one.

Constants are equal when their dtype, dims and *bits* are equal: ``0.0`` and ``-0.0`` are
different constants, and NaNs merge only with the same payload.

Never merged: parameters (distinct inputs) and side-effecting or nondeterministic ops
(random numbers, custom calls, infeed/outfeed, ...): two ``rng`` calls are two samples.
Nor are instructions of different ``remat_scope`` s (a metadata key the lowering of
``checkpoint``'s backward pass sets): merging the recomputation with the forward pass would
undo the rematerialization (the role of XLA's ``optimization_barrier`` in JAX's lowering).

One sweep in program order, with a hash table keyed by the instruction's signature, so it
is O(n): operands are already canonical when their user is looked up.
"""
from __future__ import annotations

import numpy as np

from minixla.hlo.ir import COMMUTATIVE
from minixla.passes.pipeline import HloPass

#: opcodes whose two evaluations may differ or that do something besides returning a value.
SIDE_EFFECTING = {"rng", "rng-bit-generator", "rng-get-and-update-state", "custom-call", "infeed",
                  "outfeed", "send", "send-done", "recv", "recv-done", "all-reduce", "after-all"}


def _computation_fingerprint(comp, memo) -> tuple:
    """A structural key of a called computation: equal keys compute the same function."""
    key = memo.get(comp)
    if key is None:
        index = {instr: n for n, instr in enumerate(comp.instructions)}
        key = tuple(_local_key(i, [index[o] for o in i.operands], memo) + (i is comp.root,)
                    for i in comp.instructions)
        memo[comp] = key
    return key


def _local_key(instr, operand_keys, memo) -> tuple:
    literal = None
    if instr.opcode == "constant":
        lit = np.ascontiguousarray(instr.literal)
        literal = (lit.dtype.str, lit.shape, lit.tobytes())
    operand_keys = list(operand_keys)
    commutative = instr.opcode in COMMUTATIVE or (
        instr.opcode == "compare" and instr.attrs.get("direction") in ("EQ", "NE"))
    if commutative:
        operand_keys.sort()
    return (instr.opcode, instr.shape, tuple(operand_keys), repr(sorted(instr.attrs.items())),
            tuple(_computation_fingerprint(c, memo) for c in instr.called), literal,
            instr.parameter_number if instr.opcode == "parameter" else None,
            instr.metadata.get("remat_scope"))


class CommonSubexpressionElimination(HloPass):
    """Merge identical instructions (see the module docstring for the rule)."""
    name = "cse"

    def run(self, module) -> bool:
        changed = False
        memo: dict = {}
        for comp in module.computations:
            changed |= self._run_on(comp, memo)
        return changed

    def _run_on(self, comp, memo) -> bool:
        seen: dict = {}
        replaced: dict = {}
        ident: dict = {}
        for n, instr in enumerate(comp.instructions):
            if any(o in replaced for o in instr.operands):
                instr.operands = [replaced.get(o, o) for o in instr.operands]
            ident[instr] = n
            if instr.opcode in SIDE_EFFECTING or instr.opcode == "parameter":
                continue
            key = _local_key(instr, [ident[o] for o in instr.operands], memo)
            first = seen.get(key)
            if first is None:
                seen[key] = instr
            else:
                replaced[instr] = first
                ident[instr] = ident[first]
        if not replaced:
            return False
        comp.root = replaced.get(comp.root, comp.root)
        comp.instructions = [i for i in comp.instructions if i not in replaced]
        return True
