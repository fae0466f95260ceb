"""``cumlogsumexp`` (``jax.lax``'s name and signature): a parallel prefix scan
(``composites.associative_scan``: no new primitive, so every transformation and backend
handles it) over ``logaddexp``, with JAX's ``logaddexp`` JVP
(``+inf`` replaced by 0 in the exponent, so infinite entries give finite tangents, not NaN). JAX lowers it to a reduce-window that XLA rewrites, so values agree with JAX's
to rounding (a few ulp), not bit for bit.
"""
from __future__ import annotations

from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.lax.composites import associative_scan


def cumlogsumexp(operand, axis=0, reverse=False):
    """Inclusive cumulative ``log(sum(exp(operand)))`` along ``axis`` without overflow
    (``jax.lax.cumlogsumexp``); ``reverse`` scans from the end. Floating dtypes only
    (DTypeError otherwise)."""
    from minixla.numpy.misc import _logaddexp  # (jnp.logaddexp with JAX's custom_jvp rule; numpy imports lax)
    dt = get_aval(operand).dtype
    if dt.kind != "f" and dt.name != "bfloat16":
        raise errors.DTypeError(f"cumlogsumexp does not accept dtype {dt.name}")
    nd = get_aval(operand).ndim
    return associative_scan(_logaddexp, operand, reverse=bool(reverse), axis=int(axis) % nd if nd else 0)


__all__ = ["cumlogsumexp"]
