"""The gamma family of samplers, as ``jax.random`` (JAX 0.10): ``gamma``, ``loggamma``, ``beta``,
``dirichlet``, ``chisquare``, ``t``.

``random_gamma`` is a primitive, as in JAX: ``(key data uint32[*k, 2], a float[*k, *rest])`` to
samples shaped like ``a`` (``impl="rbg"``/``"unsafe_rbg"``: key data ``uint32[*k, 4]``; JAX's
key carries its implementation, minixla's primitive a parameter). Its eager implementation is
JAX's (jitted, as ``jax.random.gamma`` runs it); its lowering is JAX's ``_gamma_impl`` written
in minixla's ops: one key per element (the implementation's ``split`` of each key into
``prod(rest)``), and per element Marsaglia and Tsang's method
("A simple method for generating gamma variables", 2000) -- a ``while_loop`` drawing a normal
``x`` until ``v = (1 + c x)^3 > 0``, inside a ``while_loop`` that accepts ``d v`` when
``U < 1 - 0.0331 x^4`` or ``log U < x^2/2 + d (1 - v + log v)`` -- vmapped over the elements,
with ``a < 1`` boosted to ``a + 1`` and the sample scaled by ``U^(1/a)`` (in log space for
``loggamma``). The keys are split exactly as JAX splits them, so the draws are JAX's. As in
JAX, the elements are vmapped for threefry keys and mapped one after the other (``lax.map``, a
loop) for rbg keys: a vmapped ``rng_bit_generator`` would draw every element's bits from the
first element's key (JAX's batching rule), so the two differ.

The products that XLA contracts into FMAs when it compiles JAX's version (``1 + c x``,
``1 - 0.0331 x^4``, ``x^2/2 + d (...)``) are explicit ``lax.fma`` s here, so the hand-off
gives ``jax.random.gamma``'s bits.

Its derivative in ``a`` is JAX's implicit reparameterization: ``tangent * random_gamma_grad(a,
sample)`` (``/ sample`` in log space).
"""
from __future__ import annotations

import functools
import math

import jax
import ml_dtypes
import numpy as np

from minixla import lax
from minixla import numpy as mnp
from minixla.core import errors
from minixla.core.avals import ShapedArray, canonicalize_shape, get_aval
from minixla.lax.base import _std_prim
from minixla.random import rbg
from minixla.random.keys import _key_base, _rewrap
from minixla.random.samplers import _check_shape, _float_dtype, _normal, _uniform


def _random_gamma_rule(key, a, *, log_space, impl="threefry2x32"):
    size = rbg.resolve(impl).key_size
    if key.dtype != np.uint32 or not key.shape or key.shape[-1] != size:
        raise errors.DTypeError(f"random_gamma needs uint32[..., {size}] key data ({impl}), got "
                                f"{key.dtype.name}{list(key.shape)}")
    if tuple(a.shape[:len(key.shape) - 1]) != tuple(key.shape[:-1]):
        raise errors.ShapeError(f"random_gamma: the keys' shape {key.shape[:-1]} must lead a's shape {a.shape}")
    if not (a.dtype.kind == "f" or a.dtype.name == "bfloat16"):
        raise errors.DTypeError(f"random_gamma does not accept dtype {a.dtype.name}")
    return ShapedArray(a.shape, a.dtype)


@functools.lru_cache(maxsize=None)
def _jax_gamma(log_space, impl):
    from jax._src.random import random_gamma_p as jax_random_gamma_p
    return jax.jit(lambda k, a: jax_random_gamma_p.bind(jax.random.wrap_key_data(k, impl=impl), a,
                                                        log_space=log_space))


def _impl(key, a, *, log_space, impl="threefry2x32"):
    if np.ndim(key) == 1:  # one key: jax.random's own jitted sampler (its compile is shared)
        sample = jax.random.loggamma if log_space else jax.random.gamma
        return np.asarray(sample(jax.random.wrap_key_data(key, impl=impl), a, dtype=np.asarray(a).dtype))
    return np.asarray(_jax_gamma(bool(log_space), impl)(key, a))


random_gamma_p = _std_prim("random_gamma", _random_gamma_rule, impl=_impl)


def _split(key, n, impl=rbg.IMPLS["threefry2x32"]):
    out = impl.split(key, (n,))
    return [out[i] for i in range(n)]


def _gamma_one(key, alpha, log_space, impl=rbg.IMPLS["threefry2x32"]):
    """One sample of Gamma(alpha) (scalar ``alpha``) from the raw key ``key``, as JAX's ``_gamma_one``."""
    dtype = get_aval(alpha).dtype
    c = functools.partial(np.asarray, dtype=dtype)
    zero, one = c(0), c(1)
    boost_mask = lax.ge(alpha, one)
    alpha_orig = alpha
    alpha = lax.select(boost_mask, alpha, lax.add(alpha, one))
    d = lax.sub(alpha, c(1. / 3.))
    cc = lax.mul(c(1. / 3.), lax.rsqrt(d))  # (XLA rewrites JAX's (1/3) / sqrt(d) so)

    def accept_not_yet(state):
        _, X, V, U = state
        # U >= 1 - 0.0331 X^2 and log U >= X/2 + d (1 - V + log V); X is x^2, V is v^3
        first = lax.ge(U, lax.fma(lax.neg(c(0.0331)), lax.mul(X, X), one))
        second = lax.ge(lax.log(U), lax.fma(X, c(0.5), lax.mul(d, lax.add(lax.sub(one, V), lax.log(V)))))
        return lax.bitwise_and(first, second)

    def draw(state):
        def next_xv(kxv):
            k, sub = _split(kxv[0], 2, impl)
            x = _normal(sub, (), dtype)
            return k, x, lax.fma(x, cc, one)
        k, x_key, u_key = _split(state[0], 3, impl)
        _, x, v = lax.while_loop(lambda kxv: lax.le(kxv[2], zero), next_xv, (x_key, zero, c(-1)))
        return k, lax.mul(x, x), lax.mul(lax.mul(v, v), v), _uniform(u_key, 0., 1., (), dtype)

    key, subkey = _split(key, 2, impl)
    _, _, V, _ = lax.while_loop(accept_not_yet, draw, (key, zero, one, c(2)))
    if log_space:
        log_samples = lax.neg(lax.neg(lax.log1p(lax.neg(_uniform(subkey, 0., 1., (), dtype)))))
        log_boost = lax.select(lax.bitwise_or(boost_mask, lax.eq(log_samples, zero)), zero,
                               lax.mul(log_samples, lax.div(one, alpha_orig)))
        return lax.add(lax.add(lax.log(d), lax.log(V)), log_boost)
    samples = lax.sub(one, _uniform(subkey, 0., 1., (), dtype))
    boost = lax.select(boost_mask, one, lax.pow(samples, lax.div(one, alpha_orig)))
    return lax.mul(lax.mul(d, V), boost)


def gamma_impl(key, a, log_space, impl="threefry2x32"):
    """``random_gamma`` written in minixla's ops (JAX's ``_gamma_impl`` with ``use_vmap``)."""
    from minixla import vmap
    impl = rbg.resolve(impl)
    kshape, a_shape = tuple(get_aval(key).shape[:-1]), tuple(get_aval(a).shape)
    count = math.prod(a_shape[len(kshape):])
    size = impl.key_size
    keys = lax.reshape(key, (math.prod(kshape), size))
    keys = vmap(lambda k: impl.split(k, (count,)))(keys)
    keys = lax.reshape(keys, (math.prod(a_shape), size))
    alphas = lax.reshape(a, (math.prod(a_shape),))
    one = functools.partial(_gamma_one, log_space=log_space, impl=impl)
    if impl.name == "threefry2x32":
        samples = vmap(one)(keys, alphas)
    else:  # (JAX's lax.map: see the module docstring)
        samples = lax.map(lambda ka: one(*ka), (keys, alphas))
    return lax.reshape(samples, a_shape)


def _register_rules():
    from minixla.core.tracing import trace_to_jaxpr
    from minixla.hlo.lowering import inline_jaxpr, lowering_rules
    from minixla.interpreters.ad_rules import defjvp
    from minixla.interpreters.batching import batching_rules, bdim_at_front

    @functools.lru_cache(maxsize=32)
    def traced(key_aval, a_aval, log_space, impl):
        return trace_to_jaxpr(lambda k, a: [gamma_impl(k, a, log_space, impl)], [key_aval, a_aval])

    def lower(ctx, operands, in_avals, out_aval, *, log_space, impl="threefry2x32"):
        k, a = (ShapedArray(tuple(v.shape), v.dtype) for v in in_avals)
        return inline_jaxpr(ctx, traced(k, a, bool(log_space), str(impl)), operands)[0]
    lowering_rules[random_gamma_p] = lower

    def gamma_grad(g, ans, key, a, *, log_space, impl="threefry2x32"):
        if log_space:  # d log(sample) = d sample / sample; a sample that rounds to 0 counts as tiny
            samples = lax.exp(ans)
            tiny = lax.full_like(samples, ml_dtypes.finfo(get_aval(samples).dtype).tiny)
            samples = lax.select(lax.eq(samples, np.asarray(0, get_aval(samples).dtype)), tiny, samples)
            grad = lax.div(lax.random_gamma_grad(a, samples), samples)
        else:
            grad = lax.random_gamma_grad(a, ans)
        return lax.mul(g, grad)
    defjvp(random_gamma_p, None, gamma_grad)

    def batch(vals, dims, **params):  # (JAX's rule: the batch axis first on both)
        size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)
        k, a = (bdim_at_front(v, d, size) for v, d in zip(vals, dims))
        return random_gamma_p.bind(k, a, **params), 0
    batching_rules[random_gamma_p] = batch


_register_rules()


def _gamma(name, key, a, shape, dtype, log_space):
    base, typed = _key_base(name, key)
    impl = (typed or rbg.default_impl()).name
    dtype = _float_dtype(name, dtype)
    a_shape = tuple(get_aval(a).shape) if not isinstance(a, (int, float)) else ()
    shape = a_shape if shape is None else canonicalize_shape(shape)
    _check_shape(name, shape, a_shape)
    a = lax.convert_element_type(a, dtype)
    if a_shape != shape:
        a = mnp.broadcast_to(a, shape)
    params = {} if impl == "threefry2x32" else {"impl": impl}  # (a threefry equation prints as JAX's)
    return random_gamma_p.bind(base, a, log_space=log_space, **params)


def gamma(key, a, shape=None, dtype=None):
    """Gamma(a, 1) floats (``jax.random.gamma``): density ``x^(a-1) e^-x / Gamma(a)``; ``a``
    broadcast to ``shape`` (default ``a``'s shape). Differentiable in ``a`` (implicit
    reparameterization). Raises ``ValueError`` for a non-float dtype or shapes that do not
    broadcast to ``shape``."""
    return _gamma("gamma", key, a, shape, dtype, False)


def loggamma(key, a, shape=None, dtype=None):
    """``log`` of Gamma(a, 1) samples, computed in log space (``jax.random.loggamma``):
    accurate for small ``a``, where ``gamma`` underflows to 0."""
    return _gamma("loggamma", key, a, shape, dtype, True)


def _shape_of(x):
    return () if isinstance(x, (int, float)) else tuple(get_aval(x).shape)


def beta(key, a, b, shape=None, dtype=None):
    """Beta(a, b) floats (``jax.random.beta``): ``Ga / (Ga + Gb)`` from two log-gamma draws
    (keys ``split(key)``), scaled by their maximum so that neither underflows."""
    base, typed = _key_base("beta", key)
    dtype = _float_dtype("beta", dtype)
    shapes = (_shape_of(a), _shape_of(b))
    shape = tuple(np.broadcast_shapes(*shapes)) if shape is None else canonicalize_shape(shape)
    _check_shape("beta", shape, *shapes)
    a, b = (mnp.broadcast_to(lax.convert_element_type(v, dtype), shape) for v in (a, b))
    key_a, key_b = _split(base, 2, typed or rbg.default_impl())
    log_a = loggamma(_rewrap(typed, key_a), a, shape, dtype)
    log_b = loggamma(_rewrap(typed, key_b), b, shape, dtype)
    log_max = lax.max(log_a, log_b)
    ga, gb = lax.exp(lax.sub(log_a, log_max)), lax.exp(lax.sub(log_b, log_max))
    return lax.div(ga, lax.add(ga, gb))


def dirichlet(key, alpha, shape=None, dtype=None):
    """Dirichlet(alpha) vectors along the last axis (``jax.random.dirichlet``): the softmax of
    log-gamma draws; ``shape`` is the batch shape (``alpha.shape[:-1]`` by default)."""
    from minixla import nn
    base, typed = _key_base("dirichlet", key)
    dtype = _float_dtype("dirichlet", dtype)
    ashape = _shape_of(alpha)
    if not len(ashape) >= 1:
        raise ValueError(f"dirichlet requires alpha.ndim >= 1, got alpha.ndim == {len(ashape)}")
    shape = ashape[:-1] if shape is None else canonicalize_shape(shape)
    _check_shape("dirichlet", shape, ashape[:-1])
    alpha = lax.convert_element_type(alpha, dtype)
    return nn.softmax(loggamma(_rewrap(typed, base), alpha, shape + ashape[-1:], dtype), -1)


def chisquare(key, df, shape=None, dtype=None):
    """Chi-square(df) floats (``jax.random.chisquare``): ``2 exp(loggamma(df / 2))``."""
    base, typed = _key_base("chisquare", key)
    dtype = _float_dtype("chisquare", dtype)
    df = lax.convert_element_type(df, dtype)
    shape = _shape_of(df) if shape is None else canonicalize_shape(shape)
    _check_shape("chisquare", shape, _shape_of(df))
    two = np.asarray(2, dtype)
    return lax.mul(lax.exp(loggamma(_rewrap(typed, base), lax.div(df, two), shape, dtype)), two)


def t(key, df, shape=None, dtype=None):
    """Student's t(df) floats (``jax.random.t``): ``n sqrt((df/2) / g)`` for a normal ``n`` and
    ``g ~ Gamma(df/2)`` (keys ``split(key)``)."""
    base, typed = _key_base("t", key)
    dtype = _float_dtype("t", dtype)
    shape = _shape_of(df) if shape is None else canonicalize_shape(shape)
    _check_shape("t", shape, _shape_of(df))
    df = lax.convert_element_type(df, dtype)
    key_n, key_g = _split(base, 2, typed or rbg.default_impl())
    n = _normal(key_n, shape, dtype)
    half_df = lax.div(df, np.asarray(2, dtype))
    g = gamma(_rewrap(typed, key_g), half_df, shape, dtype)
    return mnp.multiply(n, mnp.sqrt(mnp.divide(half_df, g)))
