"""Tutorial 09's exercise: a ``jvp_rules`` row and a ``transpose_rules`` row.

1. ``tanh_jvp(primals, tangents)``: ``primals == [x]``, ``tangents == [t]`` (an array or a
   tracer, never ``Zero`` here: the JVP trace skips a primitive whose tangents are all zero).
   Return ``(tanh(x), tangent_out)``. d tanh(x) = (1 - tanh(x)**2) dx. Use ``minixla.lax``
   (``lax.tanh``, ``lax.mul``, ``lax.sub``, ...) and the scalar ``1`` in ``x``'s dtype
   (``np.asarray(1, dtype)[()]``), so that the rule can be differentiated again.
2. ``reduce_sum_transpose(ct, x, *, axes)``: ``x`` is an ``UndefinedPrimal`` (``x.aval.shape``
   is known, its value is not); ``ct`` has ``x``'s shape without the ``axes``. Return
   ``[cotangent of x]``: every element of ``x`` contributed once to its sum, so it receives
   the sum's cotangent (``lax.broadcast_in_dim(ct, shape, broadcast_dimensions)``).

The tables are ``minixla.interpreters.ad.jvp_rules`` / ``transpose_rules``; the test installs
your rules with ``minixla.interpreters.rules.using_rule``.
Check: ``MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch09_jvp_transpose.py``.
"""


def tanh_jvp(primals, tangents):
    raise NotImplementedError("tutorial 09 exercise: write the JVP rule of tanh")


def reduce_sum_transpose(ct, x, *, axes):
    raise NotImplementedError("tutorial 09 exercise: write the transpose rule of reduce_sum")
