"""Constant folding (XLA's ``xla/hlo/transforms/simplifiers/hlo_constant_folding.cc``).

Rule: an instruction whose operands are all ``constant`` is replaced by a ``constant``
holding its value, computed with the HLO evaluator (``minixla.hlo.evaluator``). The folded
value must be bit-for-bit what the backend would have computed at run time, so an
instruction is folded only when all of these hold:

1. Its opcode is in ``EXACT_OPCODES``: ops whose result is fully determined by IEEE-754 /
   two's-complement rules (``+ - * /``, integer ops, compares, selects, converts, ``sqrt``,
   exact data movement, integer reductions and float max/min reductions). Not folded:
   - transcendental functions (``exponential``, ``log``, ``tanh``, ``logistic``, ``rsqrt``,
     ``power``, ...): the backends compute them with their own polynomial approximations,
     which differ from NumPy's libm by an ulp or two — folding would change the answer;
   - float ``reduce`` add/multiply, float ``dot`` and ``convolution``: their rounding depends
     on the accumulation order, which the backend chooses (vectorized, tiled).
2. No float operand or result is subnormal (or the smallest normal, which a flushed result
   could round to): the LLVM backend, like XLA:CPU and JAX eager, flushes subnormals to zero,
   NumPy does not.
3. The result has at most ``max_elements`` elements, so folding never materializes a big
   array. ``broadcast`` and ``iota`` are never folded: they cost nothing to compute inside a
   fusion and folding them would only bloat the module (as in XLA).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from minixla.hlo.evaluator import evaluate_instruction, is_float
from minixla.hlo.ir import HloInstruction
from minixla.passes.pipeline import HloPass

EXACT_OPCODES = {
    "add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "and", "or",
    "xor", "not", "negate", "abs", "sign", "floor", "ceil", "sqrt", "compare", "select",
    "convert", "reshape", "transpose", "slice", "reverse", "concatenate",
    "shift-left", "shift-right-logical", "shift-right-arithmetic",
    "reduce", "dot", "convolution",
}
#: of EXACT_OPCODES, those that are exact only on integers and pred (order-dependent rounding).
_INTEGER_ONLY = {"dot", "convolution"}


def _has_subnormal_or_tiny(x: np.ndarray) -> bool:
    if not is_float(x.dtype) or x.size == 0:
        return False
    a = np.abs(x.astype(np.float64))
    tiny = float(ml_dtypes.finfo(x.dtype).smallest_normal)  # (np.finfo rejects bfloat16)
    return bool(np.any((a > 0) & (a <= tiny)))


def foldable(instr) -> bool:
    """Whether ``instr``'s opcode and dtypes are in the exactly-foldable set (rule 1)."""
    if instr.opcode not in EXACT_OPCODES or instr.shape.is_tuple:
        return False
    dtype = instr.operands[0].shape.dtype if instr.operands else instr.shape.dtype
    if instr.opcode in _INTEGER_ONLY and is_float(dtype):
        return False
    if instr.opcode == "reduce":
        root = instr.called[0].root
        exact_reducer = root.opcode in ("maximum", "minimum", "and", "or") or not is_float(dtype)
        return exact_reducer and len(instr.called[0].instructions) == 3
    return True


class ConstantFolding(HloPass):
    """Replace instructions of constant operands by their value (see the module docstring)."""
    name = "constant-folding"

    def __init__(self, max_elements: int = 1024):
        self.max_elements = max_elements

    def run(self, module) -> bool:
        changed = False
        for comp in module.computations:
            changed |= self._run_on(module, comp)
        return changed

    def _run_on(self, module, comp) -> bool:
        mapping, out = {}, []
        for instr in comp.instructions:
            if any(o in mapping for o in instr.operands):
                instr.operands = [mapping.get(o, o) for o in instr.operands]
            out.append(instr)
            if not instr.operands or any(o.opcode != "constant" for o in instr.operands):
                continue
            if instr.shape.is_tuple or instr.shape.size > self.max_elements or not foldable(instr):
                continue
            operands = [np.asarray(o.literal) for o in instr.operands]
            if any(_has_subnormal_or_tiny(x) for x in operands):
                continue
            value = evaluate_instruction(instr, operands)
            if _has_subnormal_or_tiny(value):
                continue
            const = HloInstruction("constant", instr.shape, literal=value,
                                   name=module.unique_name("constant"), metadata=dict(instr.metadata))
            out[-1] = const
            mapping[instr] = const
        if not mapping:
            return False
        comp.instructions = out
        comp.root = mapping.get(comp.root, comp.root)
        return True
