"""Tutorial 13's exercise: two sharding-propagation rules, written as *dimension maps*
(``minixla.passes.sharding_propagation.dim_map``, XLA's ``sharding_propagation.cc``).

A dimension map says, for an instruction ``instr`` and its operand ``k``, which operand dim
each result dim comes from: a list of length ``instr.shape.rank`` whose entry ``j`` is the
operand dim that result dim ``j`` is, or ``None`` when result dim ``j`` comes from no single
operand dim (so it cannot be tiled from that operand). Propagation uses it forward (operand
tiles -> result tiles) and backward (the inverse), and the partitioner computes the
instruction locally on the dims it maps.

- ``broadcast_dim_map(instr, k)``: HLO ``broadcast`` has one operand; its attribute
  ``instr.attrs["dimensions"]`` lists, for each operand dim ``i``, the result dim it becomes.
  The other result dims are new.
- ``sort_dim_map(instr, k)``: HLO ``sort`` sorts along ``instr.attrs["dimensions"][0]``; all
  its operands have the result's shape (``argsort`` sorts the keys and an ``iota`` together).
  minixla has no built-in rule for ``sort`` (it runs replicated); yours lets a sort along an
  unsharded dim stay local.

Try a rule with ``using_dim_map(opcode, rule)`` from ``minixla.passes.sharding_propagation``.
Check: ``MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch13_dim_maps.py``.
"""


def broadcast_dim_map(instr, k):
    raise NotImplementedError("tutorial 13 exercise: write broadcast_dim_map")


def sort_dim_map(instr, k):
    raise NotImplementedError("tutorial 13 exercise: write sort_dim_map")
