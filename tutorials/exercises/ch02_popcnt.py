"""Tutorial 02's exercise: the HLO evaluator's rule for ``popcnt``.

Write ``popcnt(instr, x) -> np.ndarray``: for an integer array ``x`` (any of int8..int64,
uint8..uint64), the number of 1 bits of each element, in two's complement for signed types
(``popcnt(-1)`` on ``s32`` is 32), with ``x``'s dtype and shape. ``instr`` is the ``popcnt``
``HloInstruction`` (its ``shape`` is the result's); a rule of ``minixla.hlo.evaluator``'s
``evaluate_rules`` receives it first, then the operand values.

Check: ``MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch02_popcnt.py``.
"""
import numpy as np


def popcnt(instr, x: np.ndarray) -> np.ndarray:
    raise NotImplementedError("tutorial 02 exercise: write the popcnt rule")
