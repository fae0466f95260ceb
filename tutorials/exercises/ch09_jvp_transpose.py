"""Tutorial 09's exercise: a ``jvp_rules`` row and a ``transpose_rules`` row.

1. ``tanh_jvp(primals, tangents)``: ``primals == [x]``, ``tangents == [t]`` (an array or a
   tracer, never ``Zero`` here: the JVP trace skips a primitive whose tangents are all zero).
   Return the pair ``(tanh(x), tangent_out)`` (one tuple, as the rows the tutorial calls in its
   section 1; not ``defjvp``'s per-operand form). d tanh(x) = (1 - tanh(x)**2) dx. Use
   ``minixla.lax`` (``lax.tanh``, ``lax.mul``, ``lax.sub``, ...), not NumPy, so that the rule
   can be differentiated again (``grad(grad(f))`` calls it on tracers, where ``np.tanh`` raises
   ``ConcretizationTypeError``). A Python ``1.0`` is weakly typed and takes ``x``'s dtype; or
   make it explicit, ``np.asarray(1, x.dtype)[()]`` (``.dtype`` works on arrays and tracers).
2. ``reduce_sum_transpose(ct, x, *, axes)``: ``x`` is an ``UndefinedPrimal`` (``x.aval.shape``
   is known, its value is not); ``ct`` has ``x``'s shape without the ``axes``. Return
   ``[cotangent of x]``: every element of ``x`` contributed once to its sum, so it receives
   the sum's cotangent (``lax.broadcast_in_dim(ct, shape, broadcast_dimensions)``, the
   dimensions of ``x`` that ``ct`` keeps). Return a list even for one operand: a bare array
   raises ``TransformTypeError``, as does a cotangent that is not ``x``'s shape.

The tables are ``minixla.interpreters.ad.jvp_rules`` / ``transpose_rules``; the test installs
your rules with ``minixla.interpreters.rules.using_rule``.
Check: ``MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch09_jvp_transpose.py``.
"""
import numpy as np  # noqa: F401 (for your code)

from minixla import lax  # noqa: F401 (for your code)


def tanh_jvp(primals, tangents):
    raise NotImplementedError("tutorial 09 exercise: write the JVP rule of tanh")


def reduce_sum_transpose(ct, x, *, axes):
    raise NotImplementedError("tutorial 09 exercise: write the transpose rule of reduce_sum")
