"""``minixla.random.poisson``, as ``jax.random.poisson`` (JAX 0.10, as TensorFlow and NumPy):
for ``lam < 10`` (or NaN) Knuth's method, for larger ``lam`` Hormann's transformed rejection
("The transformed rejection method for generating Poisson random variables", 1993), both
``while_loop`` s over the whole array (each loop runs until every element is done), both
evaluated for every element (the other method sees a harmless ``lam``: 0, resp. 1e5) and
selected per element; ``lam = 0`` gives 0.

- Knuth: count the uniforms (float32, one ``split`` of the key per step) whose product stays
  above ``exp(-lam)``, in log space: ``k - 1`` for the first ``k`` with ``sum log u <= -lam``.
- Rejection: per step ``split(key, 3)`` gives ``u`` in ``[-0.5, 0.5)`` and ``v`` in ``[0, 1)``;
  ``k = floor((2a/us + b) u + lam + 0.43)`` (``us = 0.5 - |u|``) is accepted by the squeeze
  ``us >= 0.07 and v <= v_r``, or unless rejected (``k < 0``, or ``us < 0.013 and v > us``) by
  ``log(v inv_alpha / (a / us^2 + b)) <= -lam + k log lam - lgamma(k + 1)``.

The keys are split as JAX splits them and the ops are JAX's, in its order, so the draws are
``jax.random.poisson``'s bits. What XLA does to JAX's ops when it compiles ``_poisson`` is
explicit here (read from its optimized HLO): the products it contracts into FMAs (``b``, ``a``,
``k``'s ``(...) u + lam``, ``t``'s ``k log lam - lam``) are ``lax.fma`` s, and ``b - 3.4``,
``b - 2`` are written as its simplifier folds them.
"""
from __future__ import annotations

import numpy as np

from minixla import lax
from minixla import numpy as mnp
from minixla.core.avals import canonicalize_dtype, canonicalize_shape, get_aval
from minixla.random import rbg as _rbg
from minixla.random import threefry
from minixla.random.keys import _key_base
from minixla.random.samplers import _check_shape, _uniform

_F32 = np.dtype("float32")


def _f(v):
    return np.asarray(v, _F32)


def _split(key, n):
    out = threefry.threefry_split(key, (n,))
    return [lax.reshape(lax.slice(out, (i, 0), (i + 1, 2)), (2,)) for i in range(n)]


def _below_max_iters(i, dtype):
    # JAX's ``i < dtype.type(iinfo(dtype).max)``: the weakly typed int32 counter takes ``dtype``
    return lax.lt(lax.convert_element_type(i, dtype), np.asarray(np.iinfo(dtype).max, dtype))


def _knuth(key, lam, shape, dtype):
    neg_lam = lax.neg(lam)

    def body(carry):
        i, k, rng, log_prod = carry
        rng, sub = _split(rng, 2)
        k = lax.select(lax.gt(log_prod, neg_lam), lax.add(k, np.asarray(1, dtype)), k)
        u = _uniform(sub, 0., 1., shape, _F32)
        return lax.add(i, np.int32(1)), k, rng, lax.add(log_prod, lax.log(u))

    def cond(carry):
        i, _, _, log_prod = carry
        return lax.bitwise_and(mnp.any(lax.gt(log_prod, neg_lam)), _below_max_iters(i, dtype))

    init = (np.int32(0), lax.full(shape, 0, dtype), key, lax.full(shape, 0, _F32))
    k = lax.while_loop(cond, body, init)[1]
    return lax.sub(k, np.asarray(1, dtype))


def _rejection(key, lam, shape, dtype):
    log_lam = lax.log(lam)
    sqrt_lam = lax.sqrt(lam)
    b = lax.fma(_f(2.53), sqrt_lam, _f(0.931))
    a = lax.fma(_f(0.02483), b, _f(-0.059))
    # ``b - 3.4`` and ``b - 2`` as XLA folds them, ``2.53 sqrt(lam) + (0.931 - 3.4)``: its
    # simplifier merges the two constants (in float32), then the product contracts
    inv_alpha = lax.add(_f(1.1239), lax.div(_f(1.1328), lax.fma(_f(2.53), sqrt_lam, _f(0.931) - _f(3.4))))
    v_r = lax.sub(_f(0.9277), lax.div(_f(3.6224), lax.fma(_f(2.53), sqrt_lam, _f(0.931) - _f(2))))
    two_a, neg_lam = lax.mul(_f(2), a), lax.neg(lam)

    def body(carry):
        i, k_out, accepted, rng = carry
        rng, sub0, sub1 = _split(rng, 3)
        u = lax.sub(_uniform(sub0, 0., 1., shape, _F32), _f(0.5))
        v = _uniform(sub1, 0., 1., shape, _F32)
        us = lax.sub(_f(0.5), lax.abs(u))
        k = lax.floor(lax.add(lax.fma(lax.add(lax.div(two_a, us), b), u, lam), _f(0.43)))
        s = lax.log(lax.div(lax.mul(v, inv_alpha), lax.add(lax.div(a, lax.mul(us, us)), b)))
        t = lax.sub(lax.fma(k, log_lam, neg_lam), lax.lgamma(lax.add(k, _f(1))))
        accept1 = lax.bitwise_and(lax.ge(us, _f(0.07)), lax.le(v, v_r))
        reject = lax.bitwise_or(lax.lt(k, _f(0)), lax.bitwise_and(lax.lt(us, _f(0.013)), lax.gt(v, us)))
        accept = lax.bitwise_or(accept1, lax.bitwise_and(lax.bitwise_not(reject), lax.le(s, t)))
        return (lax.add(i, np.int32(1)), lax.select(accept, k, k_out), lax.bitwise_or(accepted, accept), rng)

    def cond(carry):
        i, _, accepted, _ = carry
        return lax.bitwise_and(mnp.any(lax.bitwise_not(accepted)), _below_max_iters(i, dtype))

    init = (np.int32(0), lax.full(shape, -1, _F32), lax.full(shape, False, np.bool_), key)
    k = lax.while_loop(cond, body, init)[1]
    return lax.convert_element_type(k, dtype)


def _poisson_impl(key, lam, shape, dtype):
    use_knuth = lax.bitwise_or(lax.ne(lam, lam), lax.lt(lam, _f(10)))
    lam_knuth = lax.select(use_knuth, lam, lax.full(shape, 0, _F32))
    # (rejection's acceptance rate tends to 89% as lam grows: a large lam is a quick dummy)
    lam_rejection = lax.select(use_knuth, lax.full(shape, 1e5, _F32), lam)
    result = lax.select(use_knuth, _knuth(key, lam_knuth, shape, dtype),
                        _rejection(key, lam_rejection, shape, dtype))
    return lax.select(lax.eq(lam, _f(0)), lax.full(shape, 0, dtype), result)


_poisson_jit = None


def _poisson(key, lam, shape, dtype):
    """``_poisson_impl`` under ``minixla.jit`` (shape and dtype static), as JAX jits its
    ``_poisson``: called eagerly it compiles once per shape and dtype (the loops would
    otherwise run op by op); inside a trace it is one ``jit`` equation, inlined when lowered."""
    global _poisson_jit
    if _poisson_jit is None:
        from minixla.jit import jit
        _poisson_impl.__name__ = "_poisson"
        _poisson_jit = jit(_poisson_impl, static_argnums=(2, 3))
    return _poisson_jit(key, lam, shape, dtype)


def poisson(key, lam, shape=None, dtype=None):
    """Poisson(lam) integers (``jax.random.poisson``): ``P(k) = lam^k e^-lam / k!``; ``lam``
    (``>= 0``, computed in float32) broadcast to ``shape`` (default ``lam``'s shape); ``dtype``
    an integer dtype (default int32, int64 under x64). ``lam = 0`` gives 0 and NaN gives -1, as
    JAX. Raises ``ValueError`` for shapes that do not broadcast to ``shape``, ``TypeError`` for
    a key that is not a single key, ``NotImplementedError`` for an rbg/unsafe_rbg key (as JAX)."""
    base, typed = _key_base("poisson", key)
    impl = typed or _rbg.default_impl()
    if impl.name != "threefry2x32":
        raise NotImplementedError(f"`poisson` is only implemented for the threefry2x32 RNG, not {impl.tag}")
    dtype = canonicalize_dtype(int if dtype is None else dtype)
    if dtype.kind not in "iu":
        raise ValueError(f"dtype argument to `poisson` must be an int dtype, got {dtype}")
    lam_shape = tuple(np.shape(lam)) if isinstance(lam, (int, float)) else tuple(get_aval(lam).shape)
    shape = lam_shape if shape is None else canonicalize_shape(shape)
    _check_shape("poisson", shape, lam_shape)
    lam = lax.convert_element_type(mnp.broadcast_to(lam, shape), _F32)
    return _poisson(base, lam, shape, dtype)
