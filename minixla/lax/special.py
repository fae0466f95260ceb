"""Special functions: ``erf_inv`` (JAX's primitive of that name), ``fma`` and ``nextafter``,
which the samplers of ``minixla.random`` need, and JAX's gamma, zeta, Bessel and incomplete
beta family (``lgamma``, ``digamma``, ``polygamma``, ``zeta``, ``igamma``, ``igammac``,
``igamma_grad_a``, ``random_gamma_grad``, ``bessel_i0e``, ``bessel_i1e``, ``betainc``), each
a primitive whose eager implementation is ``jax.lax``'s and whose lowering is the expansion
JAX eager computes, written in minixla's lax ops (``minixla.lax.special_expansions``).

``erf_inv`` is a primitive, as in JAX: its eager implementation is ``jax.lax.erf_inv`` and its
lowering is the polynomial XLA decomposes ``chlo.erf_inv`` into for float32 (Giles, "Approximating
the erfinv function", GPU Gems 2012: ``w = -log1p(-x*x)``, a degree-8 polynomial in ``w - 2.5``
below ``w = 5`` and in ``sqrt(w) - 3`` above, times ``x``; ``+-inf`` at ``+-1``), built from
ordinary HLO ops so every backend runs it. Its Horner steps are ``fma`` s because XLA:CPU
contracts them: with separate roundings 4.5% of the results differ (by up to 2 ulp).

``fma(a, b, c)`` is ``a * b + c`` rounded once. minixla never contracts a user's ``a * b + c``
(JAX eager does not), but JAX's own jitted library code -- ``jax.random.uniform``'s
``floats * (maxval - minval) + minval``, ``erf_inv`` -- is compiled by XLA, which does; ``fma``
makes that contraction explicit where minixla must reproduce such code bit for bit. It is not a
``jax.lax`` function (its eager implementation is ``jax.jit(lambda a, b, c: a * b + c)``, which
XLA contracts). For float16 and bfloat16 whether XLA contracts depends on the host
(``xla_contracts``); the LLVM backend's ``fma`` of those dtypes follows it.
"""
from __future__ import annotations

import functools

import numpy as np
import jax

from minixla.core import errors
from minixla.core.avals import ShapedArray, get_aval
from minixla.lax.base import _FLT, _is_float, _jax_impl, _scalar_like, _std_prim
from minixla.lax.elementwise import _broadcast_shapes, _unary_rule
from minixla.lax import elementwise as _ew

erf_inv_p = _std_prim("erf_inv", _unary_rule(_FLT, "erf_inv"))


def _fma_rule(a, b, c):
    if not (a.dtype == b.dtype == c.dtype):
        raise errors.DTypeError(f"fma requires arguments of one dtype, got {a.dtype.name}, "
                                f"{b.dtype.name}, {c.dtype.name}")
    if not _is_float(a.dtype):
        raise errors.DTypeError(f"fma does not accept dtype {a.dtype.name}")
    return ShapedArray(_broadcast_shapes(a, b, c), a.dtype, a.weak_type and b.weak_type and c.weak_type)


_fma_jit = jax.jit(lambda a, b, c: a * b + c)
fma_p = _std_prim("fma", _fma_rule, impl=lambda a, b, c: np.asarray(_fma_jit(a, b, c)))


@functools.lru_cache(maxsize=None)
def xla_contracts(dtype) -> bool:
    """Whether XLA:CPU on this host contracts ``a * b + c`` of ``dtype`` into one fma (what
    ``fma`` then means for that dtype). float32/float64: always. float16 and bfloat16 are
    host-dependent: with AVX512-FP16 (an Intel Sapphire Rapids-class CPU) XLA's LLVM keeps f16
    arithmetic in ``half`` and contracts it; without it (AMD Zen 4) f16 is promoted op by op,
    each product rounded to f16 before the add, and so is bfloat16. Answered by asking XLA:
    ``_fma_jit`` on triples where the two readings differ (then cached per dtype)."""
    dtype = np.dtype(dtype)
    if dtype.itemsize >= 4:
        return True
    rng = np.random.default_rng(0)
    a, b, c = (rng.uniform(0.5, 2.0, 512).astype(dtype) for _ in range(3))
    c = -c
    f32 = np.float32
    fused = (a.astype(f32) * b.astype(f32) + c.astype(f32)).astype(dtype)  # (the f32 product is exact)
    split = ((a.astype(f32) * b.astype(f32)).astype(dtype).astype(f32) + c.astype(f32)).astype(dtype)
    got = np.asarray(_fma_jit(a, b, c))
    u = np.uint16
    if (got.view(u) == fused.view(u)).all():
        return True
    if (got.view(u) == split.view(u)).all():
        return False
    raise AssertionError(f"XLA's {dtype.name} a * b + c is neither one fma nor a rounded product and an add")

#: XLA's float32 erf_inv coefficients (highest degree first): w < 5, then w >= 5.
ERF_INV_F32 = (
    (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
     -0.00125372503, -0.00417768164, 0.246640727, 1.50140941),
    (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
     -0.0076224613, 0.00943887047, 1.00167406, 2.83297682),
)


def erf_inv(x):
    """The inverse error function, elementwise (``jax.lax.erf_inv``): float arrays, ``+-inf``
    at ``+-1``, NaN outside ``[-1, 1]``. Under ``jit``, float32/16 use XLA's polynomial (bit for
    bit on the hand-off; on LLVM within minixla's ``log1p`` error); float64 is eager only."""
    return erf_inv_p.bind(x)


def fma(a, b, c):
    """``a * b + c`` with one rounding (IEEE fusedMultiplyAdd): float arrays of one dtype and
    shape (or rank 0). XLA's contraction made explicit; see the module docstring. In f16/bf16
    it is what XLA:CPU computes on this host (``xla_contracts``): one rounding with native f16
    arithmetic (AVX512-FP16), else ``round(round(a * b) + c)``."""
    return fma_p.bind(_scalar_like(a, b), _scalar_like(b, a), _scalar_like(c, a))


def nextafter(x1, x2):
    """The next float after ``x1`` towards ``x2``, elementwise (``jax.lax.nextafter``), for
    every float dtype, built from integer ops on the bits; NaN if either is NaN. Denormal
    steps are exact bits (XLA:CPU would flush a denormal result to zero in later arithmetic)."""
    x1, x2 = _scalar_like(x1, x2), _scalar_like(x2, x1)
    s1, s2 = get_aval(x1).shape, get_aval(x2).shape
    if s1 != s2 and () in (s1, s2):  # a rank-0 operand, as JAX's jaxprs hold (``nextafter a inf:f16[]``)
        from minixla.lax.structural import broadcast_in_dim
        x1, x2 = (broadcast_in_dim(x1, s2, ()), x2) if s1 == () else (x1, broadcast_in_dim(x2, s1, ()))
    dt = get_aval(x1).dtype
    if dt != get_aval(x2).dtype or not _is_float(dt):
        raise errors.DTypeError(f"nextafter requires two float arguments of one dtype, got "
                                f"{dt.name}, {get_aval(x2).dtype.name}")
    it = np.dtype(f"int{8 * dt.itemsize}")
    shape = get_aval(x1).shape

    def const(v, dtype):  # a constant of x1's shape (select_n takes no rank-0 cases)
        from minixla.lax.structural import full
        return full(shape, v, dtype) if shape else np.asarray(v, dtype)
    bits = _ew.bitcast_convert_type(x1, it)
    zero = np.asarray(0, dt)
    # Away from zero when x2 lies beyond x1 on x1's side: one more in the magnitude bits.
    # x1's side is its sign bit, not ``x1 < 0``: XLA:CPU reads a negative denormal as -0 in a
    # float compare, which stepped -denormal away from a larger x2 (JAX gives -0.0).
    up = _ew.ne(_ew.lt(x1, x2), _ew.lt(bits, np.asarray(0, it)))
    one = np.asarray(1, it)
    stepped = _ew.bitcast_convert_type(_ew.select(up, _ew.add(bits, one), _ew.sub(bits, one)), dt)
    smallest = np.asarray(1, it).view(dt)  # the smallest denormal, signed towards x2
    at_zero = _ew.select(_ew.lt(x2, zero), const(-smallest, dt), const(smallest, dt))
    # (zero tested on the bits: XLA:CPU reads a denormal as 0 in a float compare)
    magnitude = _ew.bitwise_and(bits, np.asarray(np.iinfo(it).max, it))
    out = _ew.select(_ew.eq(magnitude, np.asarray(0, it)), at_zero, stepped)
    out = _ew.select(_ew.eq(x1, x2), x2, out)
    nan = _ew.bitwise_or(_ew.ne(x1, x1), _ew.ne(x2, x2))
    return _ew.select(nan, _ew.add(x1, x2), out)


# ---------------------------------------------------------------------------------------
# The gamma, zeta, Bessel and incomplete beta family (issue 14). Shape rules as JAX's
# ``standard_unop``/``standard_naryop`` over floats: one float dtype, equal shapes (or rank 0).

def _nary_float_rule(name):
    def rule(*avals):
        dts = [a.dtype for a in avals]
        if any(d != dts[0] for d in dts):
            raise errors.DTypeError(f"{name} requires arguments to have the same dtypes, got "
                                    + ", ".join(d.name for d in dts))
        if not _is_float(dts[0]):
            raise errors.DTypeError(f"{name} does not accept dtype {dts[0].name}. Accepted dtypes "
                                    f"are subtypes of floating.")
        return ShapedArray(_broadcast_shapes(*avals), dts[0], all(a.weak_type for a in avals))
    return rule


def _special_prim(name, jax_name=None):
    return _std_prim(name, _nary_float_rule(name), impl=_jax_impl(jax_name or name))


lgamma_p = _special_prim("lgamma")
digamma_p = _special_prim("digamma")
bessel_i0e_p = _special_prim("bessel_i0e")
bessel_i1e_p = _special_prim("bessel_i1e")
polygamma_p = _special_prim("polygamma")
zeta_p = _special_prim("zeta")
igamma_p = _special_prim("igamma")
igammac_p = _special_prim("igammac")
igamma_grad_a_p = _special_prim("igamma_grad_a")
#: not a primitive in JAX (``jax.lax.random_gamma_grad`` is lax code); one here, with the same values
random_gamma_grad_p = _special_prim("random_gamma_grad")
regularized_incomplete_beta_p = _special_prim("regularized_incomplete_beta", "betainc")


def _bind(prim, *args):
    like = next((a for a in args if not isinstance(a, (bool, int, float))), None)
    return prim.bind(*[_scalar_like(a, like) for a in args])


def lgamma(x):
    """``log |Gamma(x)|`` elementwise (``jax.lax.lgamma``): float arrays; ``+inf`` at the poles
    (0 and the negative integers) and at ``+-inf``, NaN at NaN. XLA's Lanczos expansion."""
    return _bind(lgamma_p, x)


def digamma(x):
    """``psi(x) = d/dx log Gamma(x)`` elementwise (``jax.lax.digamma``): float arrays; NaN at
    the poles (0 and the negative integers)."""
    return _bind(digamma_p, x)


def polygamma(m, x):
    """``psi^(m)(x)``, the m-th derivative of ``digamma`` (``jax.lax.polygamma``): ``m`` and ``x``
    float arrays of one dtype; NaN where ``m`` is not a non-negative integer. Differentiable in
    ``x`` only (in ``m``: ``ValueError``, as JAX)."""
    return _bind(polygamma_p, m, x)


def zeta(x, q):
    """The Hurwitz zeta function ``sum_k (q + k)^-x`` (``jax.lax.zeta``): float arrays of one
    dtype; ``+inf`` at ``x = 1``, NaN for ``x < 1``. Not differentiable (as JAX's: its
    ``jax.scipy.special.zeta`` is, through a series, as ``minixla.scipy.special.zeta``)."""
    return _bind(zeta_p, x, q)


def igamma(a, x):
    """The regularized lower incomplete gamma function ``P(a, x)`` (``jax.lax.igamma``): float
    arrays of one dtype; NaN for ``a < 0``, ``x < 0`` or ``a = x = 0``."""
    return _bind(igamma_p, a, x)


def igammac(a, x):
    """The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``
    (``jax.lax.igammac``)."""
    return _bind(igammac_p, a, x)


def igamma_grad_a(a, x):
    """``d P(a, x) / da`` (``jax.lax.igamma_grad_a``): float arrays of one dtype; NaN for ``a <= 0``."""
    return _bind(igamma_grad_a_p, a, x)


def random_gamma_grad(a, x):
    """The derivative of a ``Gamma(a, 1)`` sample ``x`` in ``a`` (``jax.lax.random_gamma_grad``,
    implicit reparameterization: ``-(dP/da) / (dP/dx)``), what ``minixla.random.gamma``'s
    gradient uses."""
    return _bind(random_gamma_grad_p, a, x)


def bessel_i0e(x):
    """``exp(-|x|) I0(x)``, the exponentially scaled modified Bessel function of order 0
    (``jax.lax.bessel_i0e``): float arrays; Cephes' Chebyshev series."""
    return _bind(bessel_i0e_p, x)


def bessel_i1e(x):
    """``exp(-|x|) I1(x)`` (``jax.lax.bessel_i1e``): float arrays; odd in ``x``."""
    return _bind(bessel_i1e_p, x)


def betainc(a, b, x):
    """The regularized incomplete beta function ``I_x(a, b)`` (``jax.lax.betainc``, primitive
    ``regularized_incomplete_beta``): float arrays of one dtype; NaN outside ``0 <= x <= 1``
    or for negative ``a``/``b``. Differentiable in ``x`` only (in ``a``/``b``: ``ValueError``)."""
    return _bind(regularized_incomplete_beta_p, a, b, x)
