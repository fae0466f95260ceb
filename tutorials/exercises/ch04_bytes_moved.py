"""Tutorial 04's exercise: the bytes the kernels of a program move.

Write ``bytes_moved(module) -> int``: the sum, over the instructions of ``module.entry`` (in
``module.entry.instructions``) that launch a kernel, of the bytes of the instruction's distinct
operands (an operand used twice is read once) plus the bytes of its result
(``instr.shape.nbytes``). ``parameter``, ``constant``, ``tuple``, ``get-tuple-element``,
``reshape`` and ``bitcast`` launch no kernel (a row-major reshape is a bitcast).

Check: ``MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch04_bytes_moved.py``.
"""


def bytes_moved(module) -> int:
    raise NotImplementedError("tutorial 04 exercise: write bytes_moved")
