"""Pytrees, as ``jax.tree_util``: minixla flattens the arguments and results of ``jit``,
``grad``, ``vmap``, ``scan``, ... with JAX's pytree registry, so a type registered there
(``register_dataclass``, ``register_pytree_node``, a ``NamedTuple``) is a pytree to minixla
too. This module gives ``jax.tree_util``'s functions under minixla's name (code ported with
``jax`` -> ``minixla`` finds ``minixla.tree_util.tree_map``); they are JAX's own, not
reimplemented, because there must be one registry. ``minixla.tree`` is ``jax.tree`` likewise."""
from jax.tree_util import *  # noqa: F401,F403 (the same functions, so the same registry)
