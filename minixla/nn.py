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
from minixla.interpreters.custom_derivatives import custom_jvp
from minixla.interpreters.eval import op_by_op


def _float_arg(x):
    x, = jnp._promote_inexact(jnp._arr(x))
    return jnp.asarray(x) if not isinstance(x, jnp.Tracer) else x


def _named_custom_jvp(name):
    """``custom_jvp`` of the decorated function, named ``name`` in a jaxpr as JAX's is."""
    def wrap(fun):
        fun.__name__ = fun.__qualname__ = name
        return custom_jvp(fun)
    return wrap


def _kink_free(g, keep):
    """The tangent ``g`` where ``keep``, 0 elsewhere (JAX's ``select(keep, g, full_like(g, 0))``)."""
    return lax.select(keep, g, jnp.zeros_like(g))


def relu(x):
    """``max(x, 0)`` (``jax.nn.relu``). As JAX's ``custom_jvp``, the derivative at 0 is 0
    (not the 0.5 that ``max``'s tie split would give): the tangent is ``g`` where ``x > 0``."""
    return _relu(jnp._arr(x))


@_named_custom_jvp("relu")
def _relu(x):
    return jnp.maximum(x, 0)


_relu.defjvps(lambda g, ans, x: _kink_free(g, x > 0))


def relu6(x):
    """``min(max(x, 0), 6)`` (``jax.nn.relu6``). As JAX's ``custom_jvp``, the derivative is 0 at
    both kinks 0 and 6 (the tangent is ``g`` where ``0 < x < 6``); ``hard_sigmoid`` and
    ``hard_silu`` inherit it."""
    return _relu6(jnp._arr(x))


@_named_custom_jvp("relu6")
def _relu6(x):
    return jnp.minimum(jnp.maximum(x, 0), 6.)


_relu6.defjvps(lambda g, ans, x: _kink_free(g, jnp.logical_and(x > 0, x < 6)))


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


def softmax(x, axis=-1, where=None):
    """``exp(x - max) / sum(exp(x - max))`` along ``axis`` (``jax.nn.softmax``); with ``where``
    only the masked-in entries take part, the others give 0."""
    x = _float_arg(x)
    x_max = jnp.max(x, axis, where=where, initial=-np.inf, keepdims=True)
    x_safe = x if where is None else jnp.where(where, x, -np.inf)
    # (the max carries no gradient, as in JAX's default softmax -- jax_softmax_custom_jvp is off in
    # jax 0.10: its cancelling terms through the max would round differently from JAX's)
    unnormalized = jnp.exp(x_safe - lax.stop_gradient(x_max))
    result = unnormalized / jnp.sum(unnormalized, axis, where=where, keepdims=True)
    return result if where is None else jnp.where(where, result, 0)


def log_softmax(x, axis=-1, where=None):
    """``x - max - log(sum(exp(x - max)))`` along ``axis`` (``jax.nn.log_softmax``); with
    ``where`` the masked-out entries give ``-inf``."""
    x = _float_arg(x)
    x_max = jnp.max(x, axis, where=where, initial=-np.inf, keepdims=True)
    x_safe = x if where is None else jnp.where(where, x, -np.inf)
    shifted = x_safe - lax.stop_gradient(x_max)
    shifted_logsumexp = jnp.log(jnp.sum(jnp.exp(shifted), axis, where=where, keepdims=True))
    result = shifted - shifted_logsumexp
    return result if where is None else jnp.where(where, result, -np.inf)


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False, where=None):
    """``log(sum(b * exp(a)))`` along ``axis`` without overflow (``jax.nn.logsumexp``, i.e.
    ``jax.scipy.special.logsumexp``): the max is subtracted first (0 where it is not finite,
    so all -inf gives -inf and +inf gives +inf). ``b`` scales each term (a zero ``b`` drops
    its term); a negative sum gives NaN, or with ``return_sign`` the pair ``(log|sum|, sign)``;
    ``where`` masks the reduction."""
    if where is not None:
        a = jnp.where(where, a, 0)
    if b is not None:
        a, b = jnp._promote_inexact(jnp._arr(a), jnp._arr(b))
        a = jnp.where(b != 0, a, -np.inf)
    else:
        a = _float_arg(a)
    aval = get_aval(a)
    dims = jnp._canon_axes(axis, aval.ndim)
    amax = jnp.max(a, axis=dims, keepdims=keepdims, where=where, initial=-np.inf)
    amax = lax.stop_gradient(lax.select(jnp.isfinite(amax), amax, jnp.full_like(amax, 0)))
    amax_with_dims = amax if keepdims else jnp.expand_dims(amax, dims)
    exp_a = lax.exp(jnp.subtract(a, amax_with_dims))
    if b is not None:
        exp_a = jnp.multiply(exp_a, b)
    sumexp = jnp.sum(exp_a, axis=dims, keepdims=keepdims, where=where)
    sign = jnp.sign(sumexp)
    out = lax.add(lax.log(jnp.abs(sumexp)), amax)
    if return_sign:
        return out, sign
    if b is not None:
        out = jnp.where(sign < 0, np.asarray(np.nan, get_aval(out).dtype), out)
    return out


def logmeanexp(x, axis=None, where=None, keepdims=False):
    """``logsumexp(x) - log(count)`` over ``axis`` (``jax.nn.logmeanexp``)."""
    lse = logsumexp(x, axis=axis, where=where, keepdims=keepdims)
    x = jnp._arr(x)
    ones = jnp.ones(get_aval(x).shape, get_aval(lse).dtype)
    count = jnp.sum(ones, axis=axis, where=where, keepdims=keepdims)
    return lse - jnp.log(count)


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


def identity(x):
    """``x`` itself (``jax.nn.identity``)."""
    return jnp.asarray(x) if not isinstance(x, jnp.Tracer) else x


def tanh(x):
    """``jnp.tanh`` (``jax.nn.tanh``)."""
    return jnp.tanh(x)


def hard_sigmoid(x):
    """``relu6(x + 3) / 6`` (``jax.nn.hard_sigmoid``)."""
    return relu6(x + 3.) / 6.


def hard_silu(x):
    """``x * hard_sigmoid(x)`` (``jax.nn.hard_silu``, alias ``hard_swish``)."""
    x = jnp._arr(x)
    return x * hard_sigmoid(x)


hard_swish = hard_silu


def celu(x, alpha=1.0):
    """``max(x, 0) + alpha * expm1(min(x, 0) / alpha)`` (``jax.nn.celu``)."""
    return jnp.maximum(x, 0.0) + alpha * jnp.expm1(jnp.minimum(x, 0.0) / alpha)


def glu(x, axis=-1):
    """Gated linear unit (``jax.nn.glu``): the halves ``x1, x2`` of ``axis``, ``x1 * sigmoid(x2)``.
    Raises ShapeError when the axis size is odd."""
    x = jnp._arr(x)
    size = get_aval(x).shape[axis]
    if size % 2:
        raise errors.ShapeError(f"glu: axis size must be divisible by 2, got {size}")
    x1, x2 = jnp.split(x, 2, axis)
    return x1 * sigmoid(x2)


def squareplus(x, b=4):
    """``(x + sqrt(x**2 + b)) / 2`` (``jax.nn.squareplus``)."""
    x = jnp._arr(x)
    y = x + jnp.sqrt(jnp.square(x) + b)
    return y / 2


def sparse_plus(x):
    """0 for ``x <= -1``, ``x`` for ``x >= 1``, ``(x + 1)**2 / 4`` between (``jax.nn.sparse_plus``)."""
    x = jnp._arr(x)
    return jnp.where(x <= -1.0, 0.0, jnp.where(x >= 1.0, x, (x + 1.0) ** 2 / 4))


def sparse_sigmoid(x):
    """``clip(x + 1, 0, 2) / 2`` (``jax.nn.sparse_sigmoid``)."""
    return 0.5 * jnp.clip(jnp._arr(x) + 1.0, 0.0, 2.0)


def soft_sign(x):
    """``x / (|x| + 1)`` (``jax.nn.soft_sign``)."""
    x = jnp._arr(x)
    return x / (jnp.abs(x) + 1)


def mish(x):
    """``x * tanh(softplus(x))`` (``jax.nn.mish``)."""
    x = jnp._arr(x)
    return x * jnp.tanh(softplus(x))


def log1mexp(x):
    """``log(1 - exp(-x))`` for ``x > 0``, by ``log(-expm1(-x))`` below ``log 2`` and
    ``log1p(-exp(-x))`` above (``jax.nn.log1mexp``); its derivative is JAX's ``custom_jvp``
    rule ``g / expm1(x)`` (one formula on both sides of the switch)."""
    return _log1mexp(jnp._arr(x))


@_named_custom_jvp("log1mexp")
def _log1mexp(x):
    c = jnp.log(2.0)
    return jnp.where(x < c, jnp.log(-jnp.expm1(-x)), jnp.log1p(-jnp.exp(-x)))


_log1mexp.defjvps(lambda g, ans, x: g / jnp.expm1(x))


def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None, *, algorithm="fast"):
    """``(x - mean) * rsqrt(variance + epsilon)`` along ``axis`` (``jax.nn.standardize``): the
    moments are computed (over ``where``) unless given; ``algorithm="fast"`` takes the variance
    as ``E[x^2] - E[x]^2`` clipped at 0, ``"stable"`` as ``E[(x - mean)^2]``. Raises ValueError
    for another algorithm."""
    x = jnp._arr(x)
    if mean is None:
        mean = jnp.mean(x, axis, keepdims=True, where=where)
    if variance is None:
        if algorithm == "stable":
            variance = jnp.mean(jnp.square(jnp.subtract(x, mean)), axis, keepdims=True, where=where)
        elif algorithm == "fast":
            variance = jnp.mean(jnp.square(x), axis, keepdims=True, where=where) - jnp.square(mean)
            variance = jnp.clip(variance, 0)
        else:
            raise ValueError(f"Unknown algorithm '{algorithm}'. Expected 'fast' or 'stable'.")
    return jnp.subtract(x, mean) * lax.rsqrt(variance + epsilon)


def _ensure_4d(t):
    t = jnp._arr(t)
    nd = get_aval(t).ndim
    return jnp.expand_dims(t, tuple(range(4 - nd))) if nd < 4 else t


def _large_negative(dtype):
    big = min(float(np.finfo(dtype).max), float(np.finfo(np.float32).max))
    return np.asarray(-0.7 * big, dtype)


def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None, is_causal=False,
                          query_seq_lengths=None, key_value_seq_lengths=None, local_window_size=None,
                          implementation=None, return_residual=False):
    """Scaled dot-product attention as ``jax.nn.dot_product_attention`` with
    ``implementation="xla"``: ``query`` ``[B, T, N, H]``, ``key``/``value`` ``[B, S, K, H]``
    (``N`` a multiple of ``K``: grouped-query attention; rank-3 inputs get ``B = 1``), result
    ``[B, T, N, H]``. ``softmax(scale * q.k + bias)`` over ``S`` (``scale`` defaults to
    ``1/sqrt(H)``; logits in float32 or wider), entries masked out by ``mask`` (bool,
    broadcastable to ``[B, N, T, S]``), ``is_causal``, ``key_value_seq_lengths`` or
    ``query_seq_lengths`` set to a large negative number; rows past a query length give 0.
    ``local_window_size``, ``return_residual`` and ``implementation="cudnn"`` are not implemented
    (UnsupportedError); ValueError for mismatched shapes/dtypes as JAX."""
    if implementation not in (None, "xla"):
        if implementation == "cudnn":
            raise errors.UnsupportedError("dot_product_attention: implementation='cudnn' is not available "
                                          "in minixla (use 'xla')")
        raise ValueError(f"Unsupported implementation option: {implementation}")
    if local_window_size is not None or return_residual:
        raise errors.UnsupportedError("dot_product_attention: local_window_size / return_residual are "
                                      "not implemented in minixla")
    out_shape = get_aval(jnp._arr(query)).shape
    q, k, v = _ensure_4d(query), _ensure_4d(key), _ensure_4d(value)
    bias = _ensure_4d(bias) if bias is not None else None
    mask = _ensure_4d(mask) if mask is not None else None
    B, S, K, H = get_aval(k).shape
    for t, shape, dt, name in ((v, (B, S, K, H), get_aval(k).dtype, "value"),
                               (q, (B, -1, -1, H), get_aval(k).dtype, "query"),
                               (mask, (-1,) * 4, np.dtype(bool), "mask"), (bias, (-1,) * 4, None, "bias"),
                               (query_seq_lengths, (B,), np.dtype(np.int32), "query_seq_lengths"),
                               (key_value_seq_lengths, (B,), np.dtype(np.int32), "key_value_seq_lengths")):
        if t is None:
            continue
        ta = get_aval(jnp._arr(t))
        if ta.ndim != len(shape):
            raise ValueError(f"{name} ndim should be {len(shape)}, but got {ta.ndim}")
        if dt is not None and ta.dtype != dt:
            raise ValueError(f"{name} dtype should be {dt}, but got {ta.dtype}")
        if any(want != -1 and got != want for got, want in zip(ta.shape, shape)):
            raise ValueError(f"{name} shape should be {list(shape)}: but got {ta.shape}")
    _, T, N, _ = get_aval(q).shape
    if N % K:
        raise ValueError(f"The number of query heads must be a multiple of key/value heads, but got {N} vs {K}")
    G = N // K
    scale = 1.0 / np.sqrt(H) if scale is None else scale
    logits_dtype = np.promote_types(get_aval(q).dtype, np.float32)  # (bf16 -> f32 too)
    qg = jnp.reshape(q, (B, T, K, G, H))
    logits = jnp.einsum("BTKGH,BSKH->BKGTS", qg.astype(logits_dtype), k.astype(logits_dtype))
    logits = logits * jnp.asarray(scale, logits_dtype)

    def grouped(t):  # [tB, tN, T, S] -> broadcastable to [B, K, G, T, S]
        tb, tn, tt, ts = get_aval(t).shape
        return jnp.reshape(t, (tb, K, G, tt, ts)) if tn == N and tn != 1 else jnp.reshape(t, (tb, 1, 1, tt, ts))
    if bias is not None:
        logits = (logits + grouped(bias)).astype(logits_dtype)
    keep = None
    if mask is not None:
        keep = grouped(mask)
    if is_causal:
        causal = jnp.tril(jnp.ones((T, S), dtype=bool))
        keep = causal if keep is None else jnp.logical_and(keep, causal)
    if query_seq_lengths is not None or key_value_seq_lengths is not None:
        pad = np.ones((1, 1, 1, 1, 1), bool)
        if query_seq_lengths is not None:
            qi = lax.broadcasted_iota(np.int32, (B, 1, 1, T, 1), 3)
            pad = jnp.logical_and(pad, qi < jnp.reshape(query_seq_lengths, (B, 1, 1, 1, 1)))
        if key_value_seq_lengths is not None:
            ki = lax.broadcasted_iota(np.int32, (B, 1, 1, 1, S), 4)
            pad = jnp.logical_and(pad, ki < jnp.reshape(key_value_seq_lengths, (B, 1, 1, 1, 1)))
        keep = pad if keep is None else jnp.logical_and(keep, pad)
    if keep is not None:
        logits = jnp.where(jnp.broadcast_to(keep, get_aval(logits).shape), logits,
                           _large_negative(get_aval(logits).dtype))
    probs = softmax(logits.astype(np.float32), axis=-1).astype(get_aval(k).dtype)
    encoded = jnp.einsum("BKGTS,BSKH->BTKGH", probs, v)
    if query_seq_lengths is not None:
        qi = lax.broadcasted_iota(np.int32, (B, T, 1, 1, 1), 1)
        rows = qi < jnp.reshape(query_seq_lengths, (B, 1, 1, 1, 1))
        encoded = encoded * rows.astype(get_aval(encoded).dtype)
    return jnp.reshape(encoded, out_shape)


# Eagerly, every public function runs its ops one by one as JAX does (``op_by_op``: no NumPy
# arithmetic between minixla ops), and is an API boundary: an error escaping it names the
# function, the shapes it was given and the user's line (``errors.api_boundary``). Keep this at
# the end.
for _name, _value in list(globals().items()):
    if (not _name.startswith("_") and callable(_value) and not isinstance(_value, type)
            and getattr(_value, "__module__", None) == __name__):
        globals()[_name] = op_by_op(_value)
errors.wrap_public_functions(globals())


# ``minixla.nn.initializers`` (issue 14): a module of its own, reachable as an attribute and by
# ``import minixla.nn.initializers`` (nn is a module, so the submodule is registered by name).
import sys as _sys  # noqa: E402
from minixla import _nn_initializers as initializers  # noqa: E402

_sys.modules[__name__ + ".initializers"] = initializers
