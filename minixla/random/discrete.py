"""The discrete samplers of ``jax.random`` not in ``samplers``/``poisson`` (JAX 0.10):
``geometric``, ``binomial``, ``multinomial``.

- ``geometric``: ``floor(log u / log1p(-p)) + 1`` (``u = 0`` read as 1).
- ``binomial`` (as TensorFlow Probability, and JAX): below ``n q = 10`` (``q = min(p, 1 - p)``)
  the inversion method -- count the geometric waiting times ``ceil(log u / log1p(-q))`` whose
  sum stays within ``n``, one ``split`` of the key per step --, above it Hormann's transformed
  rejection ("The generation of binomial random variates", 1993: BTRS), both ``while_loop`` s over
  the whole array, both evaluated for every element (the other method sees a harmless count: 0,
  resp. 1e4 with ``q = 1/2``) and selected per element; ``p > 1/2`` samples ``n - X(1 - p)``;
  NaN or negative ``n``, NaN or negative ``p`` give NaN, ``n = inf`` gives inf.
- ``multinomial``: a ``scan`` over the categories, ``binomial(remaining n, p_i / (p_i + ... +
  p_k))`` (keys ``split(key, k)``).

The ops are JAX's in its order and dtype; the products XLA:CPU contracts into FMAs when it
compiles JAX's ``_btrs`` (``1.15 + 2.53 stddev``, ``n p + 0.5``, ``(...) u + c``, the
Stirling-bound sums) are ``lax.fma`` s. As JAX jits its ``_binomial``, the sampler is a
``minixla.jit`` function (shape, dtype and key implementation static): called eagerly it
compiles once per shape and dtype; inside a trace it is one ``jit`` equation.
"""
from __future__ import annotations

import numpy as np

from minixla import lax
from minixla import numpy as mnp
from minixla.core.avals import canonicalize_dtype, canonicalize_shape, get_aval
from minixla.numpy.promotion import _promote_inexact
from minixla.random import rbg as _rbg
from minixla.random import samplers as _s
from minixla.random.keys import _key_base
from minixla.random.transforms import _check_broadcast_shapes, _float_dtype, _shape_of


def geometric(key, p, shape=None, dtype=None):
    """Geometric(p) integers >= 1 (``jax.random.geometric``): trials up to the first success;
    ``shape`` defaults to ``p``'s, ``dtype`` to the default int. Raises ``ValueError`` for a
    non-integer dtype or a ``p`` that does not broadcast to ``shape``."""
    base, _ = _key_base("geometric", key)
    dtype = canonicalize_dtype(int if dtype is None else dtype)
    if dtype.kind not in "iu":
        raise ValueError(f"dtype argument to `geometric` must be an int dtype, got {dtype}")
    shape = _check_broadcast_shapes("geometric", shape, p)
    p, = _promote_inexact(p)
    pdt = get_aval(p).dtype
    u = _s._uniform(base, 0., 1., shape, pdt)
    u = lax.select(lax.eq(u, np.asarray(0, pdt)), lax.full(shape, 1, pdt), u)
    log_u = lax.log(u)
    log_one_minus_p = _s._bcast(lax.log1p(lax.neg(p)), shape)
    g = lax.add(lax.floor(lax.div(log_u, log_one_minus_p)), np.asarray(1, pdt))
    return lax.convert_element_type(g, dtype)


_STIRLING_TAIL = [0.0810614667953272, 0.0413406959554092, 0.0276779256849983, 0.02079067210376509,
                  0.0166446911898211, 0.0138761288230707, 0.0118967099458917, 0.0104112652619720,
                  0.00925546218271273, 0.00833056343336287]


def _stirling_approx_tail(k):
    """``log k! - (k + 1/2) log(k + 1) + (k + 1) - log(2 pi) / 2``: a table below 10, else the
    series ``(1/12 - (1/360 - 1/1260 / (k+1)^2) / (k+1)^2) / (k + 1)`` (of ``k`` clamped to
    [0, 9], as JAX's)."""
    dtype = get_aval(k).dtype
    c = lambda v: np.asarray(v, dtype)  # noqa: E731
    use_tail = lax.le(k, c(9))
    k = lax.clamp(c(0), k, c(9))
    kp1 = lax.add(k, c(1))
    kp1sq = lax.mul(kp1, kp1)
    approx = lax.div(lax.sub(c(1. / 12), lax.div(lax.sub(c(1. / 360), lax.div(c(1. / 1260), kp1sq)), kp1sq)), kp1)
    idx = lax.convert_element_type(lax.floor(k), np.int32)
    return lax.select(use_tail, mnp.take(np.asarray(_STIRLING_TAIL, dtype), idx), approx)


def _below(i, max_iters, dtype):
    return lax.lt(lax.convert_element_type(i, dtype), np.asarray(max_iters, dtype))


def _split_n(key, n, impl):
    out = impl.split(key, (n,))
    return [out[j] for j in range(n)]


def _binomial_inversion(key, count, prob, shape, dtype, max_iters, impl):
    pdt = get_aval(prob).dtype
    log1minusprob = lax.log1p(lax.neg(prob))

    def body(carry):
        i, num_geom, geom_sum, key = carry
        subkey, key = _split_n(key, 2, impl)
        num_geom_out = lax.select(lax.le(geom_sum, count), lax.add(num_geom, np.asarray(1, pdt)), num_geom)
        u = _s._uniform(subkey, 0., 1., shape, pdt)
        geom = lax.ceil(lax.div(lax.log(u), log1minusprob))
        return lax.add(i, np.int32(1)), num_geom_out, lax.add(geom_sum, geom), key

    def cond(carry):
        i, _, geom_sum, _ = carry
        return lax.bitwise_and(mnp.any(lax.le(geom_sum, count)), _below(i, max_iters, dtype))

    init = (np.int32(0), lax.full(shape, 0, pdt), lax.full(shape, 0, pdt), key)
    k = lax.while_loop(cond, body, init)[1]
    return lax.convert_element_type(lax.sub(k, np.asarray(1, pdt)), dtype)




def _btrs(key, count, prob, shape, dtype, max_iters, impl):
    pdt = get_aval(prob).dtype
    c_ = lambda v: np.asarray(v, pdt)  # noqa: E731
    one = c_(1)
    stddev = lax.sqrt(lax.mul(lax.mul(count, prob), lax.sub(one, prob)))
    b = lax.fma(c_(2.53), stddev, c_(1.15))
    a = lax.fma(c_(0.01), prob, lax.fma(c_(0.0248), b, c_(-0.0873)))
    c = lax.fma(count, prob, c_(0.5))
    v_r = lax.sub(c_(0.92), lax.div(c_(4.2), b))
    r = lax.div(prob, lax.sub(one, prob))
    alpha = lax.mul(lax.add(c_(2.83), lax.div(c_(5.1), b)), stddev)
    m = lax.floor(lax.mul(lax.add(count, one), prob))

    def body(carry):
        i, k_out, accepted, key = carry
        key, subkey_0, subkey_1 = _split_n(key, 3, impl)
        u = _s._uniform(subkey_0, 0., 1., shape, pdt)
        v = _s._uniform(subkey_1, 0., 1., shape, pdt)
        u = lax.sub(u, c_(0.5))
        us = lax.sub(c_(0.5), lax.abs(u))
        accept1 = lax.bitwise_and(lax.ge(us, c_(0.07)), lax.le(v, v_r))
        k = lax.floor(lax.fma(lax.add(lax.div(lax.mul(c_(2), a), us), b), u, c))
        reject = lax.bitwise_or(lax.lt(k, c_(0)), lax.gt(k, count))
        v = lax.log(lax.div(lax.mul(v, alpha), lax.add(lax.div(a, lax.mul(us, us)), b)))
        cm1 = lax.add(lax.sub(count, m), one)
        ck1 = lax.add(lax.sub(count, k), one)
        t1 = lax.mul(lax.add(m, c_(0.5)), lax.log(lax.div(lax.add(m, one), lax.mul(r, cm1))))
        ub = lax.fma(lax.add(count, one), lax.log(lax.div(cm1, ck1)), t1)
        ub = lax.fma(lax.add(k, c_(0.5)), lax.log(lax.div(lax.mul(r, ck1), lax.add(k, one))), ub)
        ub = lax.add(ub, _stirling_approx_tail(m))
        ub = lax.add(ub, _stirling_approx_tail(lax.sub(count, m)))
        ub = lax.sub(ub, _stirling_approx_tail(k))
        ub = lax.sub(ub, _stirling_approx_tail(lax.sub(count, k)))
        accept = lax.bitwise_or(accept1, lax.bitwise_and(lax.bitwise_not(reject), lax.le(v, ub)))
        return (lax.add(i, np.int32(1)), lax.select(accept, k, k_out), lax.bitwise_or(accepted, accept), key)

    def cond(carry):
        i, _, accepted, _ = carry
        return lax.bitwise_and(mnp.any(lax.bitwise_not(accepted)), _below(i, max_iters, dtype))

    init = (np.int32(0), lax.full(shape, -1, pdt), lax.full(shape, False, np.bool_), key)
    return lax.convert_element_type(lax.while_loop(cond, body, init)[1], dtype)


def _binomial_impl(key, count, prob, shape, dtype, impl_name):
    impl = _rbg.IMPLS[impl_name]
    pdt = get_aval(prob).dtype
    c_ = lambda v: np.asarray(v, pdt)  # noqa: E731
    full = lambda v: lax.full(shape, v, pdt)  # noqa: E731
    count = _s._bcast(lax.convert_element_type(count, pdt), shape)
    prob = _s._bcast(prob, shape)
    p_lt_half = lax.lt(prob, c_(0.5))
    q = lax.select(p_lt_half, prob, lax.sub(c_(1), prob))
    count_nan_or_neg = lax.bitwise_or(lax.ne(count, count), lax.lt(count, c_(0)))
    count_inf = lax.eq(lax.abs(count), c_(np.inf))
    q_is_nan = lax.ne(q, q)
    q_l_0 = lax.lt(q, c_(0))
    q = lax.select(lax.bitwise_or(q_is_nan, q_l_0), full(0.01), q)
    use_inversion = lax.bitwise_or(count_nan_or_neg, lax.le(lax.mul(count, q), c_(10)))
    count = lax.floor(count)
    count_inv = lax.select(use_inversion, count, full(0))
    count_btrs = lax.select(use_inversion, full(1e4), count)
    q_btrs = lax.select(use_inversion, full(0.5), q)
    max_iters = np.finfo(dtype).max
    samples = lax.select(use_inversion, _binomial_inversion(key, count_inv, q, shape, dtype, max_iters, impl),
                         _btrs(key, count_btrs, q_btrs, shape, dtype, max_iters, impl))
    invalid = lax.bitwise_or(lax.bitwise_or(q_l_0, q_is_nan), count_nan_or_neg)
    samples = lax.select(invalid, lax.full(shape, np.nan, dtype), samples)
    samples = lax.select(lax.bitwise_and(count_inf, lax.bitwise_not(invalid)), lax.full(shape, np.inf, dtype), samples)
    keep = lax.bitwise_or(lax.bitwise_or(p_lt_half, count_nan_or_neg), lax.bitwise_or(q_is_nan, count_inf))
    return lax.select(keep, samples, lax.sub(lax.convert_element_type(count, dtype), samples))


_binomial_jit = None


def _binomial(key, count, prob, shape, dtype, impl_name):
    """``_binomial_impl`` under ``minixla.jit`` (shape, dtype, implementation static), as JAX
    jits its ``_binomial``."""
    global _binomial_jit
    if _binomial_jit is None:
        from minixla.jit import jit
        _binomial_impl.__name__ = "_binomial"
        _binomial_jit = jit(_binomial_impl, static_argnums=(3, 4, 5))
    return _binomial_jit(key, count, prob, shape, dtype, impl_name)


def _binomial_args(n, p, shape):
    if shape is None:
        shape = tuple(np.broadcast_shapes(_shape_of(n), _shape_of(p)))
    else:
        _s._check_shape("binomial", shape, _shape_of(n), _shape_of(p))
    p, = _promote_inexact(p)
    return shape, p


def binomial(key, n, p, shape=None, dtype=None):
    """Binomial(n, p) counts as floats (``jax.random.binomial``); ``n`` (floored) and ``p``
    broadcast to ``shape`` (default their broadcast shape); ``dtype`` a float dtype (default
    float32, float64 under x64). Raises ``ValueError`` for a non-float dtype or shapes that do
    not broadcast to ``shape``."""
    base, typed = _key_base("binomial", key)
    dtype = _float_dtype("binomial", dtype)
    if shape is not None:
        shape = canonicalize_shape(shape)
    shape, p = _binomial_args(n, p, shape)
    return _binomial(base, n, p, shape, dtype, (typed or _rbg.default_impl()).name)


def multinomial(key, n, p, *, shape=None, dtype=None, unroll=1):
    """Multinomial counts of ``n`` trials over the categories of ``p``'s last axis
    (``jax.random.multinomial``), shaped ``shape`` (default ``p.shape``; its last axis is the
    categories'): ``n`` broadcast to ``shape[:-1]``; ``dtype`` default float32 (float64 under
    x64); ``unroll`` is the ``scan``'s."""
    base, typed = _key_base("multinomial", key)
    impl = typed or _rbg.default_impl()
    n, p = _promote_inexact(n, p)
    shape = tuple(get_aval(p).shape) if shape is None else canonicalize_shape(shape)
    n = mnp.broadcast_to(n, shape[:-1])
    p = mnp.broadcast_to(p, shape)
    pdt = get_aval(p).dtype

    def step(remainder, ratio_key):
        ratio, k = ratio_key
        rshape, ratio = _binomial_args(remainder, mnp.clip(ratio, 0, 1), None)
        count = _binomial(k, remainder, ratio, rshape, get_aval(remainder).dtype, impl.name)
        return lax.sub(remainder, count), count

    p = mnp.moveaxis(p, -1, 0)
    remaining = lax.cumsum(p, 0, reverse=True)
    ratios = lax.div(p, lax.select(lax.eq(remaining, np.asarray(0, pdt)), lax.full_like(remaining, 1), remaining))
    keys = impl.split(base, (shape[-1],))
    _, counts = lax.scan(step, n, (ratios, keys), unroll=unroll)
    return mnp.moveaxis(counts, 0, -1).astype(canonicalize_dtype(float if dtype is None else dtype))
