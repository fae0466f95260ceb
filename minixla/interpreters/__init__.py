"""Transformations as interpreters over the primitives (``jax/_src/interpreters``).

``ad`` (JVP, linearize, transpose), ``ad_rules`` (their per-primitive rows), ``batching``
(vmap and its rows), ``eval`` (a jaxpr evaluated by binding) and ``api`` (the public
functions: ``jvp``, ``vjp``, ``grad``, ``vmap``, ...). The trace stack they share is
``minixla.core.tracing._trace_stack``.
"""
