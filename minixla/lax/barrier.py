"""``optimization_barrier``: the identity that the compiler may not see through
(``jax.lax.optimization_barrier``, XLA's ``kOptimizationBarrier``).

The values pass unchanged, but every operand of one barrier is computed before any of its
results is used, and no pass moves work across it: in HLO it is

    %t = (f32[8], s32[]) tuple(%a, %b)
    %ob = (f32[8], s32[]) opt-barrier(%t)
    %a2 = f32[8] get-tuple-element(%ob), index=0

CSE cannot merge a value computed from ``%a2`` with the same value computed from ``%a`` (their
operands differ), the algebraic simplifier and ``tuple-simplifier`` do not look through it, fusion
does not fuse across it, constant folding does not fold it and loop-invariant code motion does
not hoist it. JAX uses it to keep a rematerialized forward pass from being merged back into the
original (``jax.checkpoint``). The LLVM backend, like XLA:CPU, removes the barriers after the
optimization passes (``minixla.passes.optimization_barrier_expander``); the ``jax`` hand-off
runs XLA's own. Autodiff and ``vmap`` are JAX's: the tangents (instantiated) and the cotangents
go through a barrier of their own, and batched operands keep their batch dimensions.
"""
from __future__ import annotations

import numpy as np
from jax import tree_util

from minixla.core.avals import get_aval
from minixla.core.primitive import Primitive, impl_rules, shape_rules

__all__ = ["optimization_barrier", "optimization_barrier_p"]

#: the multi-operand identity XLA may not optimize across (JAX's ``optimization_barrier_p``)
optimization_barrier_p = Primitive("optimization_barrier")
optimization_barrier_p.multiple_results = True
shape_rules[optimization_barrier_p] = lambda *avals: list(avals)
impl_rules[optimization_barrier_p] = lambda *xs: [np.asarray(x, get_aval(x).dtype) for x in xs]


def optimization_barrier(operand, /):
    """``operand`` (an array or a pytree of arrays) unchanged, behind one barrier
    (``jax.lax.optimization_barrier``): every leaf is computed before any result is used, and
    the compiler's passes do not move, merge or fold work across it.

    Args:
      operand: a pytree of arrays (any shapes and dtypes) or Python scalars.
    Returns:
      a pytree of the same structure, shapes, dtypes and values. Inside ``minixla.jit`` the
      leaves are one ``optimization_barrier`` equation (HLO ``opt-barrier`` of their tuple).
    Raises:
      TypeError: a leaf that is not an array or scalar (from ``get_aval``), as JAX.
    """
    leaves, treedef = tree_util.tree_flatten(operand)
    if not leaves:
        return operand
    return tree_util.tree_unflatten(treedef, optimization_barrier_p.bind(*leaves))
