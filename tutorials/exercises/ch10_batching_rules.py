"""Tutorial 10's exercise: two rows of ``minixla.interpreters.batching.batching_rules``.

A batching rule takes ``vals`` (the operands, each holding every example) and ``dims`` (each
operand's batch axis, an int, or ``None`` for an operand that is the same for every example)
and returns ``(batched result, its batch axis)``. Bind primitives with ``minixla.lax``'s
``*_p.bind(...)`` (e.g. ``lax.reduce_sum_p.bind(x, axes=...)``) or its functions.

1. ``reduce_sum_batch(vals, dims, *, axes)``: one operand, batched (``dims[0]`` is an int).
   ``axes`` are the reduced axes *of one example*. Do not move the batch axis (no
   ``transpose``): renumber the axes of the example into axes of the batched array, and
   return where the batch axis is after the reduction.
2. ``concatenate_batch(vals, dims, *, dimension)``: several operands, each batched along its
   own axis or not at all (``None``), at least one batched. Put every batch axis in the same
   place (``minixla.interpreters.batching.moveaxis(x, src, dst)``), broadcast the unbatched
   operands to the batch size (``lax.broadcast_in_dim``), and concatenate along the right
   dimension of the batched arrays.

The test installs your rules with ``minixla.interpreters.rules.using_rule``.
Check: ``MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch10_batching_rules.py``.
"""


def reduce_sum_batch(vals, dims, *, axes):
    raise NotImplementedError("tutorial 10 exercise: write the batching rule of reduce_sum")


def concatenate_batch(vals, dims, *, dimension):
    raise NotImplementedError("tutorial 10 exercise: write the batching rule of concatenate")
