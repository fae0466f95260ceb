"""Reference solution of tutorial 03's exercise (see
``tutorials/exercises/ch03_divide_by_power_of_two.py``)."""
import ml_dtypes
import numpy as np

from minixla.hlo.evaluator import is_float
from minixla.hlo.ir import HloInstruction, Shape
from minixla.passes.algebraic_simplifier import scalar_constant_bits
from minixla.passes.pipeline import HloPass


def exact_normal_reciprocal(c: np.ndarray):
    """``1/c`` as a 0-d array of c's dtype when c = ±2**k and c and 1/c are normal, else None."""
    v = float(c)
    if not np.isfinite(v) or v == 0.0:
        return None
    mantissa, _ = np.frexp(abs(v))
    if mantissa != 0.5:  # not a power of two: 1/c is rounded
        return None
    smallest_normal = float(ml_dtypes.finfo(c.dtype).smallest_normal)
    r = np.asarray(1.0 / v, c.dtype)
    if abs(v) < smallest_normal or not np.isfinite(float(r)) or abs(float(r)) < smallest_normal:
        return None
    return r


class DivideByPowerOfTwo(HloPass):
    name = "divide-by-power-of-two"

    def run(self, module) -> bool:
        changed = False
        for comp in module.computations:
            out, mapping = [], {}  # the new instruction list; divide -> its multiply
            for instr in comp.instructions:
                if any(o in mapping for o in instr.operands):
                    instr.operands = [mapping.get(o, o) for o in instr.operands]
                new = self.rewrite(module, instr, out) if instr.opcode == "divide" else None
                out.append(instr)
                if new is not None:
                    mapping[instr] = new
            comp.instructions = out
            comp.root = mapping.get(comp.root, comp.root)
            changed |= bool(mapping)
        return changed

    def rewrite(self, module, instr, out):
        x, y = instr.operands
        if not is_float(instr.shape.dtype):
            return None
        c = scalar_constant_bits(y)
        r = None if c is None else exact_normal_reciprocal(c)
        if r is None:
            return None
        const = HloInstruction("constant", Shape(instr.shape.dtype, ()), literal=r,
                               name=module.unique_name("constant"))
        out.append(const)
        operand = const
        if instr.shape.rank:
            operand = HloInstruction("broadcast", instr.shape, [const], {"dimensions": ()},
                                     name=module.unique_name("broadcast"))
            out.append(operand)
        mul = HloInstruction("multiply", instr.shape, [x, operand], name=module.unique_name("multiply"),
                             metadata=dict(instr.metadata))
        out.append(mul)
        return mul
