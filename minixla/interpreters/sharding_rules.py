"""The transformations' rows of ``sharding_constraint`` (``minixla.lax.with_sharding_constraint``),
JAX's rules from ``jax/_src/pjit.py``:

* JVP: the constraint is linear (the identity), so the tangent gets the same constraint;
* transpose: so does the cotangent (the gradient of a constrained value is laid out alike);
* vmap: the batch dimension is not sharded -- the spec gains a ``None`` entry at its position.
"""
from __future__ import annotations

from minixla.interpreters.ad import Zero, jvp_rules, transpose_rules
from minixla.interpreters.batching import batching_rules
from minixla.lax.sharding import sharding_constraint_p


def _jvp(primals, tangents, *, sharding):
    (x,), (t,) = primals, tangents
    out = sharding_constraint_p.bind(x, sharding=sharding)
    return out, (t if isinstance(t, Zero) else sharding_constraint_p.bind(t, sharding=sharding))


def _transpose(ct, x, *, sharding):
    return [ct if isinstance(ct, Zero) else sharding_constraint_p.bind(ct, sharding=sharding)]


def _batch(vals, dims, *, sharding):
    import jax.sharding as js
    (x,), (d,) = vals, dims
    entries = list(sharding.spec)
    entries += [None] * max(0, d - len(entries))
    entries.insert(d, None)
    return sharding_constraint_p.bind(x, sharding=js.NamedSharding(sharding.mesh, js.PartitionSpec(*entries))), d


jvp_rules[sharding_constraint_p] = _jvp
transpose_rules[sharding_constraint_p] = _transpose
batching_rules[sharding_constraint_p] = _batch
