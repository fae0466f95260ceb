"""Tutorial 01's exercise: a jaxpr interpreter (JAX's ``jax.core.eval_jaxpr``).

Write ``eval_jaxpr(closed_jaxpr, *args)``: run the equations of ``closed_jaxpr.jaxpr`` in order
on concrete arrays and return the list of output values.

- an environment maps each ``Var`` to its value: start with ``jaxpr.constvars`` ->
  ``closed_jaxpr.consts`` and ``jaxpr.invars`` -> ``args``;
- an equation's input is a ``Var`` (look it up) or a ``minixla.core.jaxpr.Literal`` (use its
  ``.value``);
- outside tracing, ``eqn.primitive.bind(*values, **eqn.params)`` computes the primitive on
  arrays; it returns a list when ``eqn.primitive.multiple_results`` is true, else one array;
- ``jaxpr.outvars`` may hold literals too.

Check: ``MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch01_eval_jaxpr.py``.
"""


def eval_jaxpr(closed_jaxpr, *args) -> list:
    raise NotImplementedError("tutorial 01 exercise: write eval_jaxpr")
