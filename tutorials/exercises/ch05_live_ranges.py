"""Tutorial 05's exercise: live ranges (XLA's ``HloLiveRange``).

Write ``live_ranges(module) -> dict``: instruction name -> ``(start, end)`` for every value of
``module.entry`` that needs a buffer. The schedule is ``module.entry.instructions`` in order;
step n is the n-th instruction.

- Parameters, constants and ``tuple`` instructions get no entry (they live in the caller's
  arrays, in the executable, or are only a list of other values).
- A ``reshape`` or ``bitcast`` gets no entry either: it is another *name* for its operand's
  value (follow the chain to the value it names).
- ``start`` is the step of the instruction defining the value; ``end`` is the last step at
  which any instruction reads the value under any of its names (``start`` if none does).
- A value the program returns (the entry's ``root``, or an operand of a root ``tuple``, under
  any of its names) stays live to the end: ``end = len(schedule)``.

Check: ``MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch05_live_ranges.py``.
"""


def live_ranges(module) -> dict:
    raise NotImplementedError("tutorial 05 exercise: write live_ranges")
