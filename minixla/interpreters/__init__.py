"""Transformations as interpreters over the primitives (``jax/_src/interpreters``).

``ad`` (JVP, linearize, transpose), ``ad_rules`` and ``ad_scatter_rules`` (their
per-primitive rows), ``batching`` (vmap and its rows), ``eval`` (a jaxpr evaluated by binding),
``api`` (the public functions: ``jvp``, ``vjp``, ``grad``, ``vmap``, ...), and the call-like
primitives whose equations carry a sub-jaxpr (``calls``: what they share):
``custom_derivatives`` (``custom_jvp``/``custom_vjp``), ``remat`` (``checkpoint``) and
``jit_call`` (a ``minixla.jit`` function called while tracing). The trace stack they share is
``minixla.core.tracing._trace_stack``.
"""
