"""Tutorial 03's exercise: a simplifier rule, ``x / c -> x * (1/c)`` for a power of two ``c``.

Division is several times slower than multiplication. For floats, ``x / c == x * (1/c)`` bit for
bit when ``1/c`` is exact, i.e. ``c`` is ``±2**k``: both sides are then the same correctly
rounded scaling of ``x`` (NaN, ±inf, ±0.0 and subnormal results included). It is *wrong* when
``1/c`` is inexact (``x / 3.0`` is not ``x * 0.33333334``) and when ``c`` or ``1/c`` is subnormal
or zero: the backends flush subnormals to zero (FTZ/DAZ, like XLA:CPU and JAX eager), so
``x * 2**-127`` is ``x * 0``.

Write the pass ``DivideByPowerOfTwo`` (an ``HloPass``: ``run(module) -> bool``, True when it
changed the module). For every ``divide`` of a float dtype in every computation of the module
whose divisor (operand 1) is a constant ``c`` (a ``constant`` whose elements all have one value,
or a ``broadcast`` of a rank-0 ``constant``: ``scalar_constant_bits`` below returns that value as a
0-d array, or None) such that ``c`` and ``1/c`` are both normal numbers and ``1/c`` is exact:

- build a rank-0 ``constant`` holding ``1/c`` (``HloInstruction("constant", Shape(dtype, ()),
  literal=np.asarray(r, dtype), name=module.unique_name("constant"))``), a ``broadcast`` of it to
  the divide's shape when the divide is not rank 0 (``attrs={"dimensions": ()}``), and a
  ``multiply`` of the dividend and it, with the divide's shape;
- put them into ``comp.instructions`` before the divide (operands before users: the verifier
  rejects a user listed before its operand), and make every user of the divide, and
  ``comp.root`` if it is the divide, use the multiply instead (``comp.replace_all_uses(old,
  new)`` does both). Leave the dead divide for DCE.

The IR: ``module.computations`` is a property (a list, the entry last); ``comp.instructions`` a
list you may edit (loop over a copy, ``list(comp.instructions)``, since you insert into it);
``instr.operands``, ``instr.shape.dtype``, ``instr.shape.rank``. Give every new instruction a
``module.unique_name(opcode)``. ``np.frexp`` tells a power of two (mantissa ±0.5), and
``np.finfo(dtype).tiny`` is the smallest normal number.

Leave everything else alone: integer divides, non-constant divisors, ``x / 3.0``, ``x / 0.0``,
``x / 2**127`` (its reciprocal is subnormal).

Check: ``MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch03_divide_by_power_of_two.py``.
"""
import numpy as np  # noqa: F401 (for your code)

from minixla.hlo.ir import HloInstruction, Shape  # noqa: F401 (for your code)
from minixla.passes.algebraic_simplifier import scalar_constant_bits  # noqa: F401 (for your code)
from minixla.passes.pipeline import HloPass


class DivideByPowerOfTwo(HloPass):
    name = "divide-by-power-of-two"

    def run(self, module) -> bool:
        raise NotImplementedError("tutorial 03 exercise: write the pass")
