"""``jax.tree``'s short names (``minixla.tree.map``, ``leaves``, ``flatten``, ...): JAX's own
functions over JAX's pytree registry, which minixla shares (see ``minixla.tree_util``)."""
from jax.tree import *  # noqa: F401,F403
