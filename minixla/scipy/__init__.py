"""``minixla.scipy``: the parts of ``jax.scipy`` minixla has (``special``)."""
from minixla.scipy import special  # noqa: F401
