"""The continuous samplers of ``jax.random`` that transform uniform, normal, exponential and
gamma draws (JAX 0.10): ``cauchy``, ``lognormal``, ``pareto``, ``rayleigh``, ``weibull_min``,
``maxwell``, ``double_sided_maxwell``, ``triangular``, ``wald``, ``f``, ``generalized_normal``,
``ball``, ``multivariate_normal``, ``orthogonal``.

Each is JAX's sequence of splits and ops in JAX's order and dtype (the parameters converted to
the sample dtype first, every op in that dtype: float16 stays float16, as in JAX), so for the
same key, shape and dtype the bits are JAX's. JAX jits each sampler; what XLA's algebraic
simplifier then does to its ops is written out here, since minixla's eager ops and its compiled
programs do not do it:

- a product of two scalar broadcasts is reassociated, ``(x * c1) * c2 -> x * (c1 * c2)``:
  ``lognormal`` is ``exp(erf_inv(u) * (sigma * sqrt 2))`` for a scalar ``sigma`` (the two
  roundings of ``normal(...) * sigma`` give another last bit in about 1 of 5 float16 values);
- ``x ** 2`` (``integer_pow``) is ``x * x``;
- ``(a / b) / (c / d)`` is ``(a d) / (b c)`` (``f``), ``a / b ** c`` is ``a * b ** -c``
  (``ball``).

``multivariate_normal`` and ``orthogonal`` factor a matrix with ``minixla.numpy.linalg``: their
samples are JAX's to the factorization's rounding (a few ulp), not bit for bit (and ``'svd'``
/ ``'eigh'`` factors are unique only up to the signs of their vectors, so those samples are
JAX's in distribution).
"""
from __future__ import annotations

import math

import numpy as np

from minixla import lax
from minixla import numpy as mnp
from minixla.core import errors
from minixla.core.avals import ShapedArray, canonicalize_dtype, canonicalize_shape, get_aval, promote_types
from minixla.random import rbg as _rbg
from minixla.random import samplers as _s
from minixla.random.keys import _key_base, _rewrap


class TypePromotionError(errors.MinixlaError, ValueError):
    """A parameter that would not cast safely to the sample dtype (``jax.dtypes.TypePromotionError``)."""


def _shape_of(x):
    return tuple(np.shape(x)) if isinstance(x, (bool, int, float, complex)) else tuple(get_aval(x).shape)


def _check_broadcast_shapes(name, shape, *args):
    """``shape`` canonicalized and checked against the parameters' shapes, or their broadcast
    when ``shape`` is None (JAX's ``_check_broadcast_shapes``)."""
    shapes = [_shape_of(a) for a in args]
    if shape is None:
        return tuple(np.broadcast_shapes(*shapes)) if shapes else ()
    shape = canonicalize_shape(shape)
    try:
        np.broadcast_shapes(shape, *shapes)
    except ValueError:
        raise ValueError(f"Incompatible shapes for broadcasting: shapes={[tuple(shape), *shapes]}") from None
    _s._check_shape(name, shape, *shapes)
    return shape


def _check_all_safe_to_cast(name, dtype, *args):
    """JAX's ``_check_all_safe_to_cast``: each argument's dtype promotes to ``dtype`` (a Python
    scalar is weak: it always does; a float32 array into float16 does not)."""
    for arg in args:
        aval = get_aval(arg)
        if aval.dtype == dtype:
            continue
        if promote_types(aval, ShapedArray((), dtype))[0] != dtype:
            raise TypePromotionError(f"In arguments to {name}, cannot safely cast argument of type "
                                     f"{aval.dtype} to {dtype}")


def _float_dtype(name, dtype, what="a float dtype"):
    dtype = canonicalize_dtype(float if dtype is None else dtype)
    if not (dtype.kind == "f" or dtype.name == "bfloat16"):
        raise ValueError(f"dtype argument to `{name}` must be {what}, got {dtype}")
    return dtype


def _c(v, dtype):
    return np.asarray(v, dtype)


def _is_scalar(x):
    return get_aval(x).size == 1 and get_aval(x).ndim == 0


def _keys2(typed, base):
    k1, k2 = _s._two_keys(_s._split(base, typed or None))
    return _rewrap(typed, k1), _rewrap(typed, k2)


def _jnp_dtype(*xs):
    """``(dtype, weak)`` of a ``jax.numpy`` binary op on ``xs`` (avals, or values: a Python
    scalar is weakly typed, as when JAX traces it as an argument of its jitted sampler)."""
    return promote_types(*(x if isinstance(x, ShapedArray) else get_aval(x) for x in xs))


def _as(x, dtype):
    return lax.convert_element_type(x, dtype)


def _true_divide_one_by(p):
    """JAX's ``1 / p`` (``1.0 / p``) for a traced ``p``: ``(value, aval)``, in the inexact
    dtype ``p`` promotes to (a Python scalar: the default float, weakly typed)."""
    from minixla.numpy.promotion import _to_inexact
    dtype, weak = _jnp_dtype(1, p)
    dtype = _to_inexact(dtype)
    return lax.div(_c(1, dtype), _as(p, dtype)), ShapedArray((), dtype, weak)


def _power(x, y, y_aval=None):
    """``jnp.power(x, y)`` for a traced ``y``: ``lax.pow`` of the promoted operands, or with an
    integer ``y`` as it is (a float ``x``)."""
    x_aval = get_aval(x)
    y_aval = y_aval or get_aval(y)
    if y_aval.dtype.kind in "iu" and (x_aval.dtype.kind == "f" or x_aval.dtype.name == "bfloat16"):
        return lax.pow(x, y)
    dtype, _ = _jnp_dtype(x_aval, y_aval)
    return lax.pow(_as(x, dtype), _as(y, dtype))


def _multiply(x, y):
    """``jnp.multiply(x, y)``: both in their promoted dtype, broadcast."""
    dtype, _ = _jnp_dtype(x, y)
    return mnp.multiply(_as(x, dtype), _as(y, dtype))


def cauchy(key, shape=(), dtype=None):
    """Standard Cauchy floats (``jax.random.cauchy``): ``tan(pi (u - 1/2))`` for ``u`` uniform
    in ``[eps, 1)``. Raises ``ValueError`` for a non-float dtype."""
    base, typed = _key_base("cauchy", key)
    dtype = _float_dtype("cauchy", dtype)
    shape = canonicalize_shape(shape)
    u = _s.uniform(_rewrap(typed, base), shape, dtype, minval=float(mnp.finfo(dtype).eps), maxval=1.)
    return lax.tan(lax.mul(_c(np.pi, dtype), lax.sub(u, _c(0.5, dtype))))


def lognormal(key, sigma=np.float32(1), shape=None, dtype=None):
    """Log-normal floats (``jax.random.lognormal``): ``exp(sigma * normal)``; ``shape`` defaults
    to ``sigma``'s. Raises ``ValueError`` for a non-float dtype, ``TypePromotionError`` (a
    ``ValueError``) for a ``sigma`` that does not cast safely (the default float32 ``sigma``
    into float16, as JAX)."""
    base, typed = _key_base("lognormal", key)
    dtype = _float_dtype("lognormal", dtype, "a float or complex dtype")
    shape = _check_broadcast_shapes("lognormal", shape, sigma)
    _check_all_safe_to_cast("lognormal", dtype, sigma)
    sigma = lax.convert_element_type(sigma, dtype)
    if _is_scalar(sigma) and shape:  # (XLA folds the two scalar factors: erf_inv(u) * (sigma * sqrt 2))
        lo = _s._nextafter_const(-1., 0., dtype)
        u = _s._uniform(base, lo, _c(1., dtype), shape, dtype)
        return lax.exp(lax.mul(lax.erf_inv(u), lax.mul(sigma, _c(np.sqrt(2), dtype))))
    return lax.exp(mnp.multiply(_s.normal(_rewrap(typed, base), shape, dtype), sigma))


def pareto(key, b, shape=None, dtype=None):
    """Pareto(b) floats (``jax.random.pareto``): ``exp(e / b)`` for an exponential ``e``;
    ``shape`` defaults to ``b``'s. Raises ``ValueError`` for a non-float dtype or a ``b`` that
    does not cast safely."""
    base, typed = _key_base("pareto", key)
    dtype = _float_dtype("pareto", dtype)
    shape = _check_broadcast_shapes("pareto", shape, b)
    _check_all_safe_to_cast("pareto", dtype, b)
    b = lax.convert_element_type(b, dtype)
    e = _s.exponential(_rewrap(typed, base), shape, dtype)
    return lax.exp(mnp.divide(e, b))


def rayleigh(key, scale, shape=None, dtype=None):
    """Rayleigh(scale) floats (``jax.random.rayleigh``): ``scale sqrt(-2 log u)``; ``shape``
    defaults to ``scale``'s. Raises ``ValueError`` for a non-float dtype or a ``scale`` that does
    not cast safely."""
    base, typed = _key_base("rayleigh", key)
    dtype = _float_dtype("rayleigh", dtype)
    shape = _check_broadcast_shapes("rayleigh", shape, scale)
    _check_all_safe_to_cast("rayleigh", dtype, scale)
    u = _s.uniform(_rewrap(typed, base), shape, dtype)
    scale = _s._bcast(lax.convert_element_type(scale, dtype), shape)
    return lax.mul(scale, lax.sqrt(lax.mul(lax.log(u), _c(-2, dtype))))


def weibull_min(key, scale, concentration, shape=(), dtype=None):
    """Weibull floats (``jax.random.weibull_min``): ``(-log1p(-u)) ** (1 / concentration) *
    scale``, the inverse CDF; ``shape`` is the sample shape. Raises ``ValueError`` for a
    non-float dtype."""
    base, typed = _key_base("weibull_min", key)
    dtype = _float_dtype("weibull_min", dtype)
    shape = canonicalize_shape(shape)
    u = _s.uniform(_rewrap(typed, base), shape, dtype, minval=0, maxval=1)
    inv_c, inv_aval = _true_divide_one_by(concentration)
    return _multiply(_power(lax.neg(lax.log1p(lax.neg(u))), inv_c, inv_aval), scale)


#: the most normals (3 per maxwell value) that XLA:CPU fuses with maxwell's row sum
_MAXWELL_FUSED_ELEMENTS = 4096


def maxwell(key, shape=(), dtype=None):
    """One-sided Maxwell floats (``jax.random.maxwell``): the norm of 3 standard normals,
    ``sqrt(sum(n * n))`` over a trailing axis of 3 (``jnp.linalg.norm``: summed in float32
    for float16). Raises ``ValueError`` for a non-float dtype."""
    base, typed = _key_base("maxwell", key)
    dtype = _float_dtype("maxwell", dtype)
    shape = canonicalize_shape(shape)
    n = _s.normal(_rewrap(typed, base), (*shape, 3), dtype)
    if dtype == np.float16:
        return lax.sqrt(_sum_last(lax.mul(n, n)))
    x0, x1, x2 = (lax.reshape(lax.slice_in_dim(n, i, i + 1, axis=len(shape)), shape) for i in range(3))
    if dtype.itemsize == 2:
        # bfloat16 (XLA:CPU computes it in float32 and, allowing excess precision, keeps float32
        # between the ops): the squares (exact in float32) summed in float32, rounded once to
        # bfloat16 before the sqrt. (Past 4,096 normals XLA's separate row-sum fusion rounds
        # otherwise: not reproduced, 1 ulp in ~10% of the values.)
        y0, y1, y2 = (_as(x, np.float32) for x in (x0, x1, x2))
        total = lax.add(lax.add(lax.mul(y0, y0), lax.mul(y1, y1)), lax.mul(y2, y2))
        return lax.sqrt(_as(total, dtype))
    # XLA:CPU fuses the squares into its row sum and contracts them into FMAs while the normals
    # have at most 4,096 elements (1,365 rows): in order (x0^2 first), but float32 threefry
    # draws x1^2 first (that fusion holds the threefry hash too). Past that the row sum is a
    # fusion of its own, which adds the rounded squares as (x0^2 + x2^2) + x1^2.
    if 3 * math.prod(shape) > _MAXWELL_FUSED_ELEMENTS:
        return lax.sqrt(lax.add(lax.add(lax.mul(x0, x0), lax.mul(x2, x2)), lax.mul(x1, x1)))
    if dtype.itemsize == 4 and (typed or _rbg.default_impl()).name == "threefry2x32":
        return lax.sqrt(lax.fma(x2, x2, lax.fma(x0, x0, lax.mul(x1, x1))))
    return lax.sqrt(lax.fma(x2, x2, lax.fma(x1, x1, lax.mul(x0, x0))))


def _sum_last(x):
    """``jnp.sum(x, axis=-1)`` as XLA:CPU adds a short row, one element after the other from
    0 (float16/bfloat16 in float32, as ``jnp.sum``), written out so that every backend adds in
    that order. Rows longer than 8: ``minixla.numpy.sum``."""
    shape = get_aval(x).shape
    dtype = get_aval(x).dtype
    if shape[-1] > 8:
        return mnp.sum(x, axis=-1)
    acc_dtype = np.dtype(np.float32) if dtype.itemsize < 4 else dtype
    acc = lax.full(shape[:-1], 0, acc_dtype)
    for i in range(shape[-1]):
        col = lax.reshape(lax.slice_in_dim(x, i, i + 1, axis=len(shape) - 1), shape[:-1])
        acc = lax.add(acc, _as(col, acc_dtype))
    return _as(acc, dtype)


def double_sided_maxwell(key, loc, scale, shape=(), dtype=None):
    """Double-sided Maxwell floats (``jax.random.double_sided_maxwell``): ``sign * maxwell *
    scale + loc`` (keys ``split(key)``: maxwell, rademacher); the result's shape is ``shape +
    broadcast(loc, scale)`` (``shape=()``: the parameters' shape). Raises ``ValueError`` for a
    non-float dtype."""
    base, typed = _key_base("double_sided_maxwell", key)
    dtype = _float_dtype("double_sided_maxwell", dtype)
    shape = canonicalize_shape(shape)
    params_shape = tuple(np.broadcast_shapes(_shape_of(loc), _shape_of(scale)))
    shape = (shape or params_shape) + params_shape
    k_maxwell, k_sign = _keys2(typed, base)
    m = maxwell(k_maxwell, shape, dtype)
    sign = _s.rademacher(k_sign, shape, dtype)
    return mnp.add(mnp.multiply(mnp.multiply(sign, m), scale), loc)


def triangular(key, left, mode, right, shape=None, dtype=None):
    """Triangular(left, mode, right) floats (``jax.random.triangular``), by the inverse CDF:
    ``left + sqrt(u (right - left) (mode - left))`` below ``u = (mode - left) / (right -
    left)``, ``right - sqrt((1 - u) (right - left) (right - mode))`` above. Raises ``ValueError``
    for a non-float dtype or parameters that do not cast safely."""
    base, typed = _key_base("triangular", key)
    dtype = _float_dtype("triangular", dtype)
    shape = _check_broadcast_shapes("triangular", shape, left, mode, right)
    _check_all_safe_to_cast("triangular", dtype, left, mode, right)
    left, right, mode = (_s._bcast(lax.convert_element_type(v, dtype), shape) for v in (left, right, mode))
    fc = lax.div(lax.sub(mode, left), lax.sub(right, left))
    u = _s.uniform(_rewrap(typed, base), shape, dtype)
    out1 = lax.add(left, lax.sqrt(lax.mul(lax.mul(u, lax.sub(right, left)), lax.sub(mode, left))))
    out2 = lax.sub(right, lax.sqrt(lax.mul(lax.mul(lax.sub(_c(1, dtype), u), lax.sub(right, left)),
                                           lax.sub(right, mode))))
    return lax.select(lax.lt(u, fc), out1, out2)


def wald(key, mean, shape=None, dtype=None):
    """Wald (inverse Gaussian) floats (``jax.random.wald``), Michael, Schucany and Haas's method:
    ``x = mean + mean^2 y / 2 - mean / 2 sqrt(4 mean y + mean^2 y^2)`` for ``y = n^2`` (``n``
    normal), kept when a uniform ``z <= mean / (mean + x)``, else ``mean^2 / x`` (keys
    ``split(key)``). Raises ``ValueError`` for a non-float dtype or a ``mean`` that does not cast
    safely."""
    base, typed = _key_base("wald", key)
    dtype = _float_dtype("wald", dtype)
    shape = _check_broadcast_shapes("wald", shape, mean)
    _check_all_safe_to_cast("wald", dtype, mean)
    k1, k2 = _keys2(typed, base)
    mean = _s._bcast(lax.convert_element_type(mean, dtype), shape)
    z = _s.uniform(k2, shape, dtype)
    mean_sq = lax.mul(mean, mean)
    half = _c(0.5, dtype)
    if math.prod(shape) == 1:  # (one element: XLA moves normal's sqrt(2) out of the squares, as constants)
        lo = _s._nextafter_const(-1., 0., dtype)
        e = lax.erf_inv(_s._uniform(_key_base("wald", k1)[0], lo, _c(1., dtype), shape, dtype))
        e2 = lax.mul(e, e)
        two = lax.mul(_c(np.sqrt(2), dtype), _c(np.sqrt(2), dtype))
        y = lax.mul(e2, two)
        y_sq = lax.mul(lax.mul(e2, e2), lax.mul(two, two))
        four_mean_y = (lax.mul(mean, e2), lax.mul(_c(4, dtype), two))
    else:
        v = _s.normal(k1, shape, dtype)
        y = lax.mul(v, v)
        y_sq = lax.mul(y, y)
        four_mean_y = (lax.mul(_c(4, dtype), mean), y)
    # (the products XLA:CPU contracts into FMAs: float32/64 everywhere, float16/bfloat16 only on
    # a host with native f16 arithmetic, which ``lax.fma`` follows)
    sqrt_term = lax.sqrt(lax.fma(*four_mean_y, lax.mul(mean_sq, y_sq)))
    x = lax.fma(lax.neg(lax.mul(mean, half)), sqrt_term, lax.add(mean, lax.mul(lax.mul(mean_sq, y), half)))
    return lax.select(lax.le(z, lax.div(mean, lax.add(mean, x))), x, lax.div(mean_sq, x))


def f(key, dfnum, dfden, shape=None, dtype=None):
    """F(dfnum, dfden) floats (``jax.random.f``): ``(chi2(dfnum) / dfnum) / (chi2(dfden) /
    dfden)``, the keys ``split(key)`` (the denominator's first). Raises ``ValueError`` for a
    non-float dtype or parameters that do not cast safely."""
    from minixla.random.gamma import chisquare
    base, typed = _key_base("f", key)
    dtype = _float_dtype("f", dtype)
    shape = _check_broadcast_shapes("f", shape, dfnum, dfden)
    _check_all_safe_to_cast("f", dtype, dfnum, dfden)
    dfden = lax.convert_element_type(dfden, dtype)
    dfnum = lax.convert_element_type(dfnum, dtype)
    k_dfd, k_dfn = _keys2(typed, base)
    chi2_dfn = chisquare(k_dfn, dfnum, shape, dtype)
    chi2_dfd = chisquare(k_dfd, dfden, shape, dtype)
    # JAX's (chi2_dfn / dfnum) / (chi2_dfd / dfden) as XLA's simplifier rewrites it,
    # (a / b) / (c / d) -> (a d) / (b c)
    return lax.div(mnp.multiply(chi2_dfn, dfden), mnp.multiply(chi2_dfd, dfnum))


def generalized_normal(key, p, shape=(), dtype=None):
    """Generalized normal floats, density ``~ exp(-|x|^p)`` (``jax.random.generalized_normal``):
    ``sign * g ** (1 / p)`` for ``g ~ Gamma(1 / p)`` (keys ``split(key)``: gamma, rademacher)."""
    from minixla.random.gamma import gamma
    base, typed = _key_base("generalized_normal", key)
    dtype = canonicalize_dtype(float if dtype is None else dtype)
    shape = canonicalize_shape(shape)
    return _generalized_normal(typed, base, p, shape, dtype, gamma)


def _generalized_normal(typed, base, p, shape, dtype, gamma):
    k1, k2 = _keys2(typed, base)
    inv_p, inv_aval = _true_divide_one_by(p)
    g = gamma(k1, inv_p, shape, dtype)
    r = _s.rademacher(k2, shape, dtype)
    return _multiply(r, _power(g, inv_p, inv_aval))


def ball(key, d, p=2, shape=(), dtype=None):
    """Points uniform in the unit Lp ball of dimension ``d`` (``jax.random.ball``), shaped
    ``(*shape, d)``: ``g / (sum |g|^p + e) ** (1 / p)`` for generalized normals ``g`` and an
    exponential ``e`` (keys ``split(key)``). ``d`` must be a concrete int."""
    from minixla.random.gamma import gamma
    base, typed = _key_base("ball", key)
    dtype = canonicalize_dtype(float if dtype is None else dtype)
    shape = canonicalize_shape(shape)
    d = int(d)
    k1, k2 = _keys2(typed, base)
    g = _generalized_normal(typed, _key_base("ball", k1)[0], p, (*shape, d), dtype, gamma)
    e = _s.exponential(k2, shape, dtype)
    p_aval = get_aval(p)
    norm_p = _sum_last(_power(lax.abs(g), _as(p, p_aval.dtype), p_aval))
    inv_p, inv_aval = _true_divide_one_by(p)
    # JAX's g / (...) ** (1 / p), as XLA's simplifier rewrites it: a / b ** c -> a * b ** -c
    r = _power(mnp.add(norm_p, e), lax.neg(inv_p), inv_aval)
    return mnp.multiply(g, mnp.expand_dims(r, -1))


def multivariate_normal(key, mean, cov, shape=None, dtype=None, method="cholesky"):
    """Multivariate normal vectors (``jax.random.multivariate_normal``): ``mean + factor @ n``
    for standard normals ``n`` shaped ``shape + mean.shape[-1:]`` and ``factor`` the Cholesky
    factor of ``cov`` (``method='cholesky'``), or ``u sqrt(s)`` of its SVD (``'svd'``), ``v
    sqrt(w)`` of its eigendecomposition (``'eigh'``). ``shape`` defaults to the broadcast of
    ``mean.shape[:-1]`` and ``cov.shape[:-2]``. Raises ``ValueError`` for another method, a
    non-float dtype, ``mean.ndim < 1``, ``cov.ndim < 2`` or ``cov`` not ``(..., n, n)``."""
    from minixla.numpy.promotion import _promote_inexact
    base, typed = _key_base("multivariate_normal", key)
    mean, cov = _promote_inexact(mean, cov)
    if method not in {"svd", "eigh", "cholesky"}:
        raise ValueError("method must be one of {'svd', 'eigh', 'cholesky'}")
    dtype = get_aval(mean).dtype if dtype is None else _float_dtype("multivariate_normal", dtype)
    if not (dtype.kind == "f" or dtype.name == "bfloat16"):
        raise ValueError(f"dtype argument to `multivariate_normal` must be a float dtype, got {dtype}")
    mshape, cshape = get_aval(mean).shape, get_aval(cov).shape
    if not len(mshape) >= 1:
        raise ValueError(f"multivariate_normal requires mean.ndim >= 1, got mean.ndim == {len(mshape)}")
    if not len(cshape) >= 2:
        raise ValueError(f"multivariate_normal requires cov.ndim >= 2, got cov.ndim == {len(cshape)}")
    n = mshape[-1]
    if tuple(cshape[-2:]) != (n, n):
        raise ValueError(f"multivariate_normal requires cov.shape == (..., n, n) for n={n}, "
                         f"but got cov.shape == {tuple(cshape)}.")
    if shape is None:
        shape = tuple(np.broadcast_shapes(mshape[:-1], cshape[:-2]))
    else:
        shape = canonicalize_shape(shape)
        _s._check_shape("normal", shape, mshape[:-1], cshape[:-2])
    if method == "svd":
        u, s, _ = mnp.linalg.svd(cov)
        factor = mnp.multiply(u, mnp.sqrt(mnp.expand_dims(s, -2)))
    elif method == "eigh":
        w, v = mnp.linalg.eigh(cov)
        factor = mnp.multiply(v, mnp.sqrt(mnp.expand_dims(w, -2)))
    else:
        factor = mnp.linalg.cholesky(cov)
    normals = _s.normal(_rewrap(typed, base), shape + (n,), dtype)
    product = mnp.matmul(factor, mnp.expand_dims(normals, -1))  # (JAX: einsum('...ij,...j->...i'))
    return mnp.add(mean, mnp.squeeze(product, -1))


def orthogonal(key, n, shape=(), dtype=None, m=None):
    """A uniformly random orthogonal ``n x m`` matrix (``jax.random.orthogonal``), batched by
    ``shape``: the ``Q`` of the QR decomposition of a normal matrix, its columns' signs those of
    ``R``'s diagonal (Mezzadri's method); semi-orthogonal (transposed) when ``n < m``. ``n``,
    ``m`` must be concrete ints."""
    base, typed = _key_base("orthogonal", key)
    shape = canonicalize_shape(shape)
    dtype = canonicalize_dtype(float if dtype is None else dtype)
    n = int(n)
    m = n if m is None else int(m)
    z = _s.normal(_rewrap(typed, base), (*shape, max(n, m), min(n, m)), dtype)
    q, r = mnp.linalg.qr(z)
    d = mnp.diagonal(r, axis1=-2, axis2=-1)
    x = mnp.multiply(q, mnp.expand_dims(mnp.sign(d), -2))
    return mnp.swapaxes(x, -1, -2) if n < m else x
