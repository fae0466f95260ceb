"""Tutorial 11's exercise: the trip count of a ``while`` (XLA's ``ComputeWhileLoopTripCount``).

Write ``trip_count(loop) -> int | None`` for an HLO ``while`` instruction ``loop``:

- its operand is a ``tuple`` instruction (the initial state); ``loop.called`` is
  ``[condition, body]``, each a computation of one tuple parameter;
- the loop counts when some state element ``k`` is a scalar integer that starts as a
  ``constant`` ``c``, the condition's root is ``compare(get-tuple-element(param, k), constant n)``
  with ``direction`` ``LT`` (or ``LE``), and the body's root tuple has, at position ``k``,
  ``add(get-tuple-element(param, k), constant s)`` (either operand order) with ``s > 0``;
- then the body runs ``max(0, ceil((n - c) / s))`` times (``n + 1 - c`` for ``LE``).

Return ``None`` for any other loop. A constant's value is ``int(instr.literal)``.

Check: ``MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch11_trip_count.py``.
"""


def trip_count(loop):
    raise NotImplementedError("tutorial 11 exercise: write trip_count")
