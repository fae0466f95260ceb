"""``minixla.nn``: activation functions and friends, as ``jax.nn`` defines them.

Each function is written with the same ``minixla.numpy``/``minixla.lax`` ops, in the same
order, as ``jax.nn`` writes it, so results equal JAX eager's (bit-for-bit for the arithmetic,
within the documented ulp bound of the transcendental functions). Inputs are arrays or
tracers of a floating dtype (integer inputs are promoted as in JAX).
"""
from __future__ import annotations

import numpy as np

from minixla import lax
from minixla import numpy as jnp
from minixla.core import errors
from minixla.core.avals import canonicalize_dtype, get_aval


def _float_arg(x):
    x, = jnp._promote_inexact(jnp._arr(x))
    return jnp.asarray(x) if not isinstance(x, jnp.Tracer) else x


def relu(x):
    """``max(x, 0)`` (``jax.nn.relu``)."""
    return jnp.maximum(x, 0)


def relu6(x):
    """``min(max(x, 0), 6)`` (``jax.nn.relu6``)."""
    return jnp.minimum(jnp.maximum(x, 0), 6.)


def sigmoid(x):
    """``1 / (1 + exp(-x))`` as ``lax.logistic`` (``jax.nn.sigmoid``)."""
    return lax.logistic(_float_arg(x))


def silu(x):
    """``x * sigmoid(x)`` (``jax.nn.silu``, alias ``swish``)."""
    x = _float_arg(x)
    return x * sigmoid(x)


swish = silu


def log_sigmoid(x):
    """``-softplus(-x)`` (``jax.nn.log_sigmoid``)."""
    return -softplus(-_float_arg(x))


def gelu(x, approximate: bool = True):
    """Gaussian error linear unit (``jax.nn.gelu``): the tanh approximation by default,
    ``0.5 x erfc(-x / sqrt 2)`` with ``approximate=False``."""
    x = _float_arg(x)
    dt = get_aval(x).dtype
    if approximate:
        sqrt_2_over_pi = np.sqrt(2 / np.pi).astype(dt)
        cdf = 0.5 * (1.0 + jnp.tanh(sqrt_2_over_pi * (x + 0.044715 * (x ** 3))))
        return x * cdf
    sqrt_half = np.sqrt(0.5).astype(dt)
    return 0.5 * x * lax.erfc(-x * sqrt_half)


def elu(x, alpha=1.0):
    """``x`` if ``x > 0`` else ``alpha * expm1(x)`` (``jax.nn.elu``)."""
    x = jnp._arr(x)
    return jnp.where(x > 0, x, alpha * jnp.expm1(jnp.where(x > 0, 0., x)))


def selu(x):
    """Scaled ELU with the self-normalizing constants (``jax.nn.selu``)."""
    alpha = 1.6732632423543772848170429916717
    scale = 1.0507009873554804934193349852946
    return scale * elu(x, alpha)


def softplus(x):
    """``log(1 + exp(x))`` as ``logaddexp(x, 0)`` (``jax.nn.softplus``)."""
    return jnp.logaddexp(x, 0)


def leaky_relu(x, negative_slope=1e-2):
    """``x`` if ``x >= 0`` else ``negative_slope * x`` (``jax.nn.leaky_relu``)."""
    return jnp.where(x >= 0, x, negative_slope * x)


def hard_tanh(x):
    """``clip(x, -1, 1)`` (``jax.nn.hard_tanh``)."""
    return jnp.where(x > 1, 1, jnp.where(x < -1, -1, x))


def softmax(x, axis=-1):
    """``exp(x - max) / sum(exp(x - max))`` along ``axis`` (``jax.nn.softmax``)."""
    x = _float_arg(x)
    x_max = jnp.max(x, axis, initial=-np.inf, keepdims=True)
    unnormalized = jnp.exp(x - x_max)
    return unnormalized / jnp.sum(unnormalized, axis, keepdims=True)


def log_softmax(x, axis=-1):
    """``x - max - log(sum(exp(x - max)))`` along ``axis`` (``jax.nn.log_softmax``)."""
    x = _float_arg(x)
    x_max = jnp.max(x, axis, initial=-np.inf, keepdims=True)
    shifted = x - x_max
    shifted_logsumexp = jnp.log(jnp.sum(jnp.exp(shifted), axis, keepdims=True))
    return shifted - shifted_logsumexp


def logsumexp(a, axis=None, keepdims=False):
    """``log(sum(exp(a)))`` along ``axis`` without overflow (``jax.nn.logsumexp``): the max is
    subtracted first (0 where it is not finite, so all -inf gives -inf and +inf gives +inf)."""
    a = _float_arg(a)
    aval = get_aval(a)
    dims = jnp._canon_axes(axis, aval.ndim)
    amax = jnp.max(a, axis=dims, keepdims=keepdims, initial=-np.inf)
    amax = lax.select(jnp.isfinite(amax), amax, jnp.full_like(amax, 0))
    amax_with_dims = amax if keepdims else jnp.expand_dims(amax, dims)
    exp_a = lax.exp(jnp.subtract(a, amax_with_dims))
    sumexp = jnp.sum(exp_a, axis=dims, keepdims=keepdims)
    return lax.add(lax.log(jnp.abs(sumexp)), amax)


def one_hot(x, num_classes: int, *, dtype=None, axis=-1):
    """``x[..., None] == arange(num_classes)`` cast to ``dtype`` (``jax.nn.one_hot``);
    ``num_classes`` must be a static int; out-of-range classes give all zeros."""
    if not isinstance(num_classes, (int, np.integer)):
        raise errors.ConcretizationTypeError(f"one_hot: num_classes must be a static int, got "
                                             f"{num_classes!r}\n  at: {errors.user_source_line()}")
    x = jnp._arr(x)
    if not isinstance(x, jnp.Tracer):
        x = jnp.asarray(x)
    aval = get_aval(x)
    dtype = canonicalize_dtype(np.float64) if dtype is None else dtype
    pos = jnp._canon_axis1(axis, aval.ndim + 1)
    lhs = jnp.expand_dims(x, pos)
    rhs_shape = [1] * aval.ndim
    rhs_shape.insert(pos, int(num_classes))
    rhs = lax.broadcasted_iota(aval.dtype, rhs_shape, pos)
    return jnp.astype(jnp.equal(lhs, rhs), dtype)


# Every public function is an API boundary: an error escaping it names the function, the
# shapes it was given and the user's line (``errors.api_boundary``). Keep this at the end.
errors.wrap_public_functions(globals())


# ``minixla.nn.initializers`` (issue 14): a module of its own, reachable as an attribute and by
# ``import minixla.nn.initializers`` (nn is a module, so the submodule is registered by name).
import sys as _sys  # noqa: E402
from minixla import _nn_initializers as initializers  # noqa: E402

_sys.modules[__name__ + ".initializers"] = initializers
