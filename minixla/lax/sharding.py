"""``with_sharding_constraint``: pin the layout of an intermediate value over the mesh
(``jax.lax.with_sharding_constraint``, the ``sharding_constraint`` primitive of
``jax/_src/pjit.py``).

The value does not change: the constraint only tells the partitioner how the array must be laid
out at that point of the program. In HLO it is XLA's ``custom-call`` with
``custom_call_target="Sharding"`` and a ``sharding=`` attribute (what JAX's lowering emits too):

    %c = f32[8,4]{1,0} custom-call(%x), custom_call_target="Sharding", sharding={devices=[2,1]0,1}

Eager it is the identity (a one-device run has nothing to lay out). Autodiff and ``vmap``
follow JAX: the tangent and the cotangent get the same constraint; under ``vmap`` the spec
gains an unsharded (``None``) entry for the batch dimension (``minixla.interpreters.sharding_rules``).
"""
from __future__ import annotations

import numpy as np
from jax import tree_util

from minixla.core.primitive import Primitive, impl_rules, shape_rules
from minixla.core.tracing import Tracer

__all__ = ["with_sharding_constraint"]


def _shape_rule(x, *, sharding):
    from minixla.sharding.api import to_hlo_sharding
    # (the checks now, at the user's line: rank and mesh axes; an uneven split is allowed
    # here, as JAX allows it: XLA pads the last shard)
    to_hlo_sharding(sharding, x.shape, "operand", check_divisible=False)
    return x


#: the identity that constrains its operand's sharding (JAX's ``sharding_constraint``)
sharding_constraint_p = Primitive("sharding_constraint")
shape_rules[sharding_constraint_p] = _shape_rule
impl_rules[sharding_constraint_p] = lambda x, *, sharding: x


def with_sharding_constraint(x, shardings):
    """``x`` (an array or a pytree of arrays) constrained to be laid out as ``shardings``
    (``jax.lax.with_sharding_constraint``).

    Args:
      x: arrays of any shape and dtype (unchanged: same shape, dtype and values).
      shardings: a ``jax.sharding.NamedSharding``, a ``PartitionSpec`` under
        ``jax.set_mesh(mesh)``, or a pytree prefix of ``x`` of those.
    Returns:
      ``x``. Inside ``minixla.jit`` each traced leaf becomes a ``sharding_constraint`` equation,
      lowered to ``custom-call(...), custom_call_target="Sharding", sharding={...}``; the
      ``jax`` backend runs it as ``jax.lax.with_sharding_constraint`` on the mesh (XLA's
      partitioner honours it); the ``llvm`` backend, which runs one device unless a partitioner
      is asked for, removes it (XLA's ``ShardingRemover``). Eager: the identity.
    Raises:
      ShardingError (ValueError): a spec longer than the rank of its array, a mesh axis not
      in the mesh, an axis used twice, or a bare PartitionSpec without a mesh. (A dimension
      the mesh axes do not divide is allowed, as in JAX: XLA pads.)
    """
    from minixla.sharding.api import _broadcast, to_hlo_sharding
    pairs = []
    _broadcast(shardings, x, (), "with_sharding_constraint", pairs)
    leaves, treedef = tree_util.tree_flatten(x)
    out = []
    for (path, s), leaf in zip(pairs, leaves):
        if s is None:
            out.append(leaf)
            continue
        shape = leaf.aval.shape if isinstance(leaf, Tracer) else np.shape(leaf)
        # (checked here, before JAX builds a NamedSharding, so the message names the leaf)
        to_hlo_sharding(s, shape, "x" + tree_util.keystr(path), check_divisible=False)
        out.append(sharding_constraint_p.bind(leaf, sharding=_as_named(s))
                   if isinstance(leaf, Tracer) else leaf)
    return tree_util.tree_unflatten(treedef, out)


def _as_named(s):
    """A bare PartitionSpec becomes a NamedSharding over the context mesh now (the trace may
    be lowered later, outside ``jax.set_mesh``)."""
    import jax.sharding as js
    if isinstance(s, js.PartitionSpec):
        from minixla.sharding.api import _named
        mesh, spec = _named(s, "with_sharding_constraint")
        return js.NamedSharding(mesh, spec)
    return s
