"""The transformations' rows of ``optimization_barrier`` (``minixla.lax.barrier``), JAX's rules
(``jax/_src/lax/lax.py``):

* JVP: the primals through one barrier, the tangents (zeros instantiated) through another;
* transpose: the barrier is linear (the identity): the cotangents of the undefined operands go
  through a barrier of their own (zeros instantiated, as JAX);
* vmap: the batched operands through the barrier, each keeping its batch dimension.
"""
from __future__ import annotations

from minixla.interpreters.ad import instantiate, is_undefined, jvp_rules, transpose_rules
from minixla.interpreters.batching import batching_rules
from minixla.lax.barrier import optimization_barrier_p


def _jvp(primals, tangents):
    return optimization_barrier_p.bind(*primals), optimization_barrier_p.bind(*map(instantiate, tangents))


def _transpose(cts, *args):
    which = [k for k, a in enumerate(args) if is_undefined(a)]
    out = [None] * len(args)
    if which:
        for k, ct in zip(which, optimization_barrier_p.bind(*(instantiate(cts[k]) for k in which))):
            out[k] = ct
    return out


def _batch(vals, dims):
    return optimization_barrier_p.bind(*vals), list(dims)


jvp_rules[optimization_barrier_p] = _jvp
transpose_rules[optimization_barrier_p] = _transpose
batching_rules[optimization_barrier_p] = _batch
