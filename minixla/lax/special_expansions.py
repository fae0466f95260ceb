"""The special functions of ``minixla.lax.special`` written in minixla's own lax ops: what each
one lowers to (``minixla.hlo.lowering`` traces the expansion and inlines it), so every backend
runs it -- the HLO evaluator, LLVM and the JAX hand-off -- and no NumPy runs in the compiler.

Each expansion is the algorithm JAX eager computes (XLA's ``chlo`` decompositions for
``lgamma``, ``digamma``, ``zeta``, ``polygamma`` and ``bessel_i1e``; JAX's own lax code for
``bessel_i0e``, the incomplete gamma family and ``regularized_incomplete_beta``), with the same
constants and the same order of operations, so that on the hand-off XLA compiles the graph JAX
eager compiles and the values agree bit for bit; on LLVM they differ only by minixla's own
``log``/``exp``/``sin``/``pow`` approximations (the error is measured in ``tests/test_special.py``).

- ``lgamma``: Lanczos (g = 7, 9 coefficients), ``log(t)`` as ``log(g + 1/2) + log1p(z / (g + 1/2))``,
  the reflection ``log(pi) - log|sin(pi frac(x))| - lgamma(1 - x)`` below 1/2.
- ``digamma``: the derivative of the same Lanczos sum, reflected with ``pi cot(pi x)``.
- ``zeta(x, q)`` (Hurwitz): 10 terms of the sum, then Euler-Maclaurin with 12 Bernoulli terms.
- ``polygamma(n, x) = (-1)^(n+1) n! zeta(n + 1, x)``, ``digamma`` at n = 0.
- ``bessel_i0e``/``bessel_i1e``: Cephes' Chebyshev series on ``[0, 8]`` and ``(8, inf)``.
- ``igamma``/``igammac``/``igamma_grad_a``/``random_gamma_grad``: the power series below
  ``max(1, a)``, the continued fraction above, each a ``while_loop`` over the whole array that
  runs until every element converged (with the derivative in ``a`` carried alongside).
- ``regularized_incomplete_beta``: the modified Lentz continued fraction (DLMF 8.17.22), using
  the symmetry ``I_x(a, b) = 1 - I_{1-x}(b, a)`` where it converges slowly.

float16/bfloat16 are computed in float32 and rounded back, as XLA and JAX do.
"""
from __future__ import annotations

import numpy as np

from minixla.lax import elementwise as ew
from minixla.lax import reductions as red
from minixla.lax import structural as st

# Lanczos' approximation as XLA uses it (g = 7, n = 9): Gamma(z + 1) = sqrt(2 pi) (z + g + 1/2)^(z + 1/2)
# exp(-(z + g + 1/2)) A(z), A(z) = BASE + sum_i C_i / (z + i + 1).
LANCZOS_G = 7.0
LANCZOS_BASE = 0.99999999999980993227684700473478
LANCZOS = (676.520368121885098567009190444019, -1259.13921672240287047156078755283,
           771.3234287776530788486528258894, -176.61502916214059906584551354,
           12.507343278686904814458936853, -0.13857109526572011689554707,
           9.984369578019570859563e-6, 1.50563273514931155834e-7)

#: Euler-Maclaurin's terms for zeta, B_2k / (2k)!, from k = 12 down to k = 1
ZETA_BERNOULLI = (-1.3954464685812522e-19, 5.5090028283602295e-18, -2.1748686985580617e-16,
                  8.5860620562778452e-15, -3.3896802963225832e-13, 1.3382536530684679e-11,
                  -5.2841901386874932e-10, 2.08767569878681e-08, -8.2671957671957675e-07,
                  3.3068783068783071e-05, -0.0013888888888888889, 0.083333333333333329)

# Cephes' Chebyshev coefficients (float64; float32 uses the last terms only, as Cephes' i0f/i1f):
# i0e on [0, 8] in x/2 - 2, on (8, inf) in 32/x - 2 (then divided by sqrt(x)); i1e likewise.
I0E_A = (-4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
         1.71539128555513303061e-15, -1.16853328779934516808e-14, 7.67618549860493561688e-14,
         -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
         9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-9,
         -1.30002500998624804212e-8, 6.04699502254191894932e-8, -2.67079385394061173391e-7,
         1.11738753912010371815e-6, -4.41673835845875056359e-6, 1.64484480707288970893e-5,
         -5.75419501008210370398e-5, 1.88502885095841655729e-4, -5.76375574538582365885e-4,
         1.63947561694133579842e-3, -4.32430999505057594430e-3, 1.05464603945949983183e-2,
         -2.37374148058994688156e-2, 4.93052842396707084878e-2, -9.49010970480476444210e-2,
         1.71620901522208775349e-1, -3.04682672343198398683e-1, 6.76795274409476084995e-1)
I0E_B = (-7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
         3.46122286769746109310e-17, -2.82762398051658348494e-16, -3.42548561967721913462e-16,
         1.77256013305652638360e-15, 3.81168066935262242075e-15, -9.55484669882830764870e-15,
         -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
         7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11,
         -3.14991652796324136454e-11, 1.18891471078464383424e-11, 4.94060238822496958910e-10,
         3.39623202570838634515e-9, 2.26666899049817806459e-8, 2.04891858946906374183e-7,
         2.89137052083475648297e-6, 6.88975834691682398426e-5, 3.36911647825569408990e-3,
         8.04490411014108831608e-1)
I1E_A = (2.77791411276104639959e-18, -2.11142121435816608115e-17, 1.55363195773620046921e-16,
         -1.10559694773538630805e-15, 7.60068429473540693410e-15, -5.04218550472791168711e-14,
         3.22379336594557470981e-13, -1.98397439776494371520e-12, 1.17361862988909016308e-11,
         -6.66348972350202774223e-11, 3.62559028155211703701e-10, -1.88724975172282928790e-9,
         9.38153738649577178388e-9, -4.44505912879632808065e-8, 2.00329475355213526229e-7,
         -8.56872026469545474066e-7, 3.47025130813767847674e-6, -1.32731636560394358279e-5,
         4.78156510755005422638e-5, -1.61760815825896745588e-4, 5.12285956168575772895e-4,
         -1.51357245063125314899e-3, 4.15642294431288815669e-3, -1.05640848946261981558e-2,
         2.47264490306265168283e-2, -5.29459812080949914269e-2, 1.02643658689847095384e-1,
         -1.76416518357834055153e-1, 2.52587186443633654823e-1)
I1E_B = (7.51729631084210481353e-18, 4.41434832307170791151e-18, -4.65030536848935832153e-17,
         -3.20952592199342395980e-17, 2.96262899764595013876e-16, 3.30820231092092828324e-16,
         -1.88035477551078244854e-15, -3.81440307243700780478e-15, 1.04202769841288027642e-14,
         4.27244001671195135429e-14, -2.10154184277266431302e-14, -4.08355111109219731823e-13,
         -7.19855177624590851209e-13, 2.03562854414708950722e-12, 1.41258074366137813316e-11,
         3.25260358301548823856e-11, -1.89749581235054123450e-11, -5.58974346219658380687e-10,
         -3.83538038596423702205e-9, -2.63146884688951950684e-8, -2.51223623787020892529e-7,
         -3.88256480887769039346e-6, -1.10588938762623716291e-4, -9.76109749136146840777e-3,
         7.78576235018280120474e-1)
#: how many of each table float32 uses (Cephes' single-precision series)
F32_TERMS = {"i0e_a": 18, "i0e_b": 7, "i1e_a": 17, "i1e_b": 7}


def _dt(x):
    return np.dtype(x.dtype)


def _c(x, v):
    """``v`` as a rank-0 constant of ``x``'s dtype (lax ops combine it with any shape)."""
    return np.asarray(v, _dt(x))


def _full(x, v):
    return st.full(tuple(x.shape), v, _dt(x)) if x.shape else _c(x, v)


def _fma(a, b, c):
    """``a * b + c`` rounded once: where XLA:CPU's LLVM contracts a product whose only use is
    an add or subtract (JAX eager's values have that rounding), the expansion says so."""
    from minixla.lax.special import fma
    return fma(a, b, c)


def _over(x, k):
    """``x / k`` for a constant ``k`` as XLA's simplifier rewrites it: ``x * (1/k)``, the
    reciprocal rounded in ``x``'s dtype."""
    return ew.mul(x, _c(x, 1 / np.asarray(k, _dt(x))))


def _isnan(x):
    return ew.ne(x, x)


def _any(pred):
    return red.reduce_or(pred, tuple(range(len(pred.shape)))) if pred.shape else pred


def _or(*ps):
    out = ps[0]
    for p in ps[1:]:
        out = ew.bitwise_or(out, p)
    return out


def _and(*ps):
    out = ps[0]
    for p in ps[1:]:
        out = ew.bitwise_and(out, p)
    return out


def _not(p):
    return ew.bitwise_not(p)


def _finfo(x):
    import ml_dtypes
    return ml_dtypes.finfo(_dt(x))


# ---------------------------------------------------------------------------------------
# lgamma, digamma, zeta, polygamma (XLA's chlo decompositions).

def lgamma(x):
    c = lambda v: _c(x, v)  # noqa: E731
    reflect = ew.lt(x, c(0.5))
    z = ew.select(reflect, ew.neg(x), ew.sub(x, c(1)))
    acc = ew.add(ew.div(c(LANCZOS[0]), ew.add(z, c(1))), c(LANCZOS_BASE))
    for i, coef in enumerate(LANCZOS[1:], start=1):
        acc = ew.add(acc, ew.div(c(coef), ew.add(z, c(i + 1))))
    gh = LANCZOS_G + 0.5
    t = ew.add(z, c(gh))
    # log(t) as log(g + 1/2) + log1p(z / (g + 1/2)): exact where a device log is not
    log_t = ew.add(ew.log1p(_over(z, gh)), c(np.log(gh)))
    # (z + 1/2 - t / log t) log t, not (z + 1/2) log t - t, which overflows first
    log_y = ew.add(_fma(ew.sub(ew.add(z, c(0.5)), ew.div(t, log_t)), log_t,
                        c((np.log(2) + np.log(np.pi)) / 2)), ew.log(acc))
    # lgamma(x) = log(pi) - log|sin(pi x)| - lgamma(1 - x), with sin(pi x) read off the
    # fractional part of |x| folded onto [0, 1/2] (exactly 0 at the integers: +inf there)
    ax = ew.abs(x)
    frac = ew.sub(ax, ew.floor(ax))
    frac = ew.select(ew.lt(c(0.5), frac), ew.sub(c(1), frac), frac)
    denom = ew.log(ew.sin(ew.mul(frac, c(np.pi))))
    reflection = ew.select(ew.is_finite(denom), ew.sub(ew.sub(c(np.log(np.pi)), denom), log_y),
                           ew.neg(denom))
    out = ew.select(reflect, reflection, log_y)
    return ew.select(ew.eq(ax, c(np.inf)), _full(x, np.inf), out)


def digamma(x):
    c = lambda v: _c(x, v)  # noqa: E731
    reflect = ew.lt(x, c(0.5))
    z = ew.select(reflect, ew.neg(x), ew.sub(x, c(1)))
    num, denom = c(0), None
    for i, coef in enumerate(LANCZOS):
        zi = ew.add(z, c(i + 1))
        num = ew.sub(num, ew.div(c(coef), ew.mul(zi, zi)))
        term = ew.div(c(coef), zi)
        denom = ew.add(term, c(LANCZOS_BASE)) if denom is None else ew.add(denom, term)
    gh = LANCZOS_G + 0.5
    t = ew.add(z, c(gh))
    log_t = ew.add(ew.log1p(_over(z, gh)), c(np.log(gh)))
    y = ew.sub(ew.add(log_t, ew.div(num, denom)), ew.div(c(LANCZOS_G), t))
    # digamma(x) = digamma(1 - x) - pi cot(pi x), with x shifted by a whole number for accuracy
    shifted = ew.add(x, ew.abs(ew.floor(ew.add(x, c(0.5)))))
    arg = ew.mul(shifted, c(np.pi))
    reflection = ew.sub(y, ew.div(ew.mul(ew.cos(arg), c(np.pi)), ew.sin(arg)))
    out = ew.select(reflect, reflection, y)
    pole = ew.bitwise_and(ew.le(x, c(0)), ew.eq(x, ew.floor(x)))
    return ew.select(pole, _full(x, np.nan), out)


def zeta(x, q):
    c = lambda v: _c(x, v)  # noqa: E731
    neg_x = ew.neg(x)
    s, a = ew.pow(q, neg_x), q
    for _ in range(9):
        a = ew.add(a, c(1))
        s = ew.add(s, ew.pow(a, neg_x))
    a = ew.add(a, c(1))
    a_inv_pow = ew.pow(a, neg_x)
    # the sum already converged (compared with the smallest denormal, as XLA does)
    converged = ew.lt(ew.abs(a_inv_pow), ew.mul(ew.abs(s), c(_finfo(x).smallest_subnormal)))
    s_tail = ew.add(s, ew.div(ew.mul(a_inv_pow, a), ew.sub(x, c(1))))
    inv_sq = ew.div(c(1), ew.mul(a, a))

    def factor(k):  # (x + 2k)(x + 2k - 1)
        return ew.mul(ew.add(x, c(2 * k)), ew.add(x, c(2 * k - 1)))
    # Horner in 1/a^2 with the rising factors; each product's one use is the next add (an fma)
    t_factor, t_rest = factor(11), ew.mul(inv_sq, c(ZETA_BERNOULLI[0]))
    for k, b in zip(range(10, 0, -1), ZETA_BERNOULLI[1:11]):
        t_factor, t_rest = factor(k), ew.mul(inv_sq, _fma(t_factor, t_rest, c(b)))
    t = _fma(t_factor, t_rest, c(ZETA_BERNOULLI[11]))
    out = _fma(a_inv_pow, _fma(ew.div(x, a), t, c(0.5)), s_tail)
    out = ew.select(converged, s, out)
    nan, inf = _full(x, np.nan), _full(x, np.inf)
    out = ew.select(ew.lt(x, c(1)), nan, out)
    q_nonpos = ew.le(q, c(0))
    out = ew.select(ew.bitwise_and(q_nonpos, ew.ne(x, ew.floor(x))), nan, out)
    x_even = ew.bitwise_and(ew.eq(x, ew.floor(x)), ew.eq(ew.rem(x, c(2)), c(0)))
    out = ew.select(ew.bitwise_and(q_nonpos, ew.eq(q, ew.floor(q))), ew.select(x_even, inf, nan), out)
    return ew.select(ew.eq(x, c(1)), inf, out)


def polygamma(n, x):
    from minixla.lax import special
    c = lambda v: _c(x, v)  # noqa: E731
    n1 = ew.add(n, c(1))
    sign = ew.sub(ew.mul(ew.rem(n, c(2)), c(2)), c(1))  # (-1)^(n+1)
    out = ew.mul(ew.mul(sign, ew.exp(special.lgamma(n1))), special.zeta(n1, x))
    out = ew.select(ew.eq(n, c(0)), special.digamma(x), out)
    bad = ew.bitwise_or(ew.ne(n, ew.floor(n)), ew.lt(n, c(0)))
    return ew.select(bad, _full(x, np.nan), out)


# ---------------------------------------------------------------------------------------
# Bessel functions (Cephes' Chebyshev series). ``/ sqrt(z)`` is ``* rsqrt(z)``, as XLA's
# simplifier rewrites it.

def _chebyshev(t, coefficients):
    b0, b1, b2 = _c(t, 0), _c(t, 0), _c(t, 0)
    for coef in coefficients:
        b2, b1 = b1, b0
        b0 = ew.add(_fma(t, b1, ew.neg(b2)), _c(t, coef))
    return ew.mul(ew.sub(b0, b2), _c(t, 0.5))


def _tables(x, a, b, name):
    if _dt(x).itemsize == 8:
        return a, b
    return a[-F32_TERMS[name + "_a"]:], b[-F32_TERMS[name + "_b"]:]


def bessel_i0e(x):
    a, b = _tables(x, I0E_A, I0E_B, "i0e")
    z = ew.abs(x)
    near = _chebyshev(_fma(_c(x, 0.5), z, _c(x, -2)), a)
    far = ew.mul(_chebyshev(ew.sub(ew.div(_c(x, 32), z), _c(x, 2)), b), ew.rsqrt(z))
    return ew.select(ew.le(z, _c(x, 8)), near, far)


def bessel_i1e(x):
    a, b = _tables(x, I1E_A, I1E_B, "i1e")
    z = ew.abs(x)
    near = ew.mul(z, _chebyshev(_fma(z, _c(x, 0.5), _c(x, -2)), a))
    far = ew.mul(_chebyshev(ew.sub(ew.div(_c(x, 32), z), _c(x, 2)), b), ew.rsqrt(z))
    return ew.mul(ew.sign(x), ew.select(ew.le(z, _c(x, 8)), near, far))


# ---------------------------------------------------------------------------------------
# The incomplete gamma family (JAX's lax code, after XLA's math.cc).

VALUE, DERIVATIVE, SAMPLE_DERIVATIVE = "value", "derivative", "sample_derivative"


def _igamma_series(ax, x, a, enabled, mode):
    from minixla.lax.control_flow import while_loop
    from minixla.lax import special
    eps = _c(x, _finfo(x).eps)
    one = _c(x, 1)

    def body(vals):
        on, r, c, ans, xx, dc_da, dans_da = vals
        r = ew.add(r, one)
        dc_da = _fma(dc_da, ew.div(xx, r), ew.neg(ew.div(ew.mul(c, xx), ew.mul(r, r))))
        dans_da = ew.add(dans_da, dc_da)
        c = ew.mul(c, ew.div(xx, r))
        ans = ew.add(ans, c)
        if mode == VALUE:
            go = ew.bitwise_and(on, ew.gt(ew.div(c, ans), eps))
        else:
            go = ew.bitwise_and(on, ew.gt(ew.abs(ew.div(dc_da, dans_da)), eps))
        new = (r, c, ans, xx, dc_da, dans_da)
        return (go,) + tuple(ew.select(on, n, o) for n, o in zip(new, vals[1:]))

    init = (enabled, a, _full(a, 1), _full(a, 1), x, _full(a, 0), _full(a, 0))
    _, _, _, ans, _, _, dans_da = while_loop(lambda v: _any(v[0]), body, init)
    if mode == VALUE:
        return ew.div(ew.mul(ans, ax), a)
    dlogax_da = ew.sub(ew.log(x), special.digamma(ew.add(a, one)))
    if mode == DERIVATIVE:
        return ew.div(ew.mul(ax, _fma(ans, dlogax_da, dans_da)), a)
    return ew.div(ew.mul(ew.neg(_fma(ans, dlogax_da, dans_da)), x), a)


def _igammac_continued_fraction(ax, x, a, enabled, mode):
    from minixla.lax.control_flow import while_loop
    from minixla.lax import special
    eps_v = _finfo(x).eps
    eps, one = _c(x, eps_v), _c(x, 1)

    def cond(vals):
        return ew.bitwise_and(ew.lt(vals[5], _c(x, 2000)), _any(vals[0]))

    def body(vals):
        (on, ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2,
         dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da, dans_da) = vals
        c = ew.add(c, one)
        y = ew.add(y, one)
        z = ew.add(z, _c(x, 2))
        yc = ew.mul(y, c)
        pk = _fma(pkm1, z, ew.neg(ew.mul(pkm2, yc)))
        qk = _fma(qkm1, z, ew.neg(ew.mul(qkm2, yc)))
        qk_nonzero = ew.ne(qk, _c(x, 0))
        r = ew.div(pk, qk)
        t = ew.select(qk_nonzero, ew.abs(ew.div(ew.sub(ans, r), r)), _full(r, 1))
        ans = ew.select(qk_nonzero, r, ans)
        dpk_da = _fma(pkm2, c, _fma(ew.neg(dpkm2_da), yc, _fma(dpkm1_da, z, ew.neg(pkm1))))
        dqk_da = _fma(qkm2, c, _fma(ew.neg(dqkm2_da), yc, _fma(dqkm1_da, z, ew.neg(qkm1))))
        dans_da_new = ew.select(qk_nonzero, ew.div(_fma(ew.neg(ans), dqk_da, dpk_da), qk), dans_da)
        grad_cond = ew.select(qk_nonzero, ew.abs(ew.sub(dans_da_new, dans_da)), _full(dans_da, 1))
        pkm2, pkm1, qkm2, qkm1 = pkm1, pk, qkm1, qk
        dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da = dpkm1_da, dqkm1_da, dpk_da, dqk_da
        # rescale when the numerators grow past 1/eps (JAX: reciprocal, integer_pow(-1))
        rescale = ew.gt(ew.abs(pk), _c(x, 1 / eps_v))
        pkm2, pkm1, qkm2, qkm1, dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da = (
            ew.select(rescale, ew.mul(v, eps), v)
            for v in (pkm2, pkm1, qkm2, qkm1, dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da))
        if mode == VALUE:
            go = ew.bitwise_and(on, ew.gt(t, eps))
        else:
            go = ew.bitwise_and(on, ew.gt(grad_cond, eps))
        new = (ans, t, y, z)
        rest = (pkm1, qkm1, pkm2, qkm2, dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da, dans_da_new)
        return ((go,) + tuple(ew.select(on, n, o) for n, o in zip(new, vals[1:5])) + (c,)
                + tuple(ew.select(on, n, o) for n, o in zip(rest, vals[6:])))

    y = ew.sub(one, a)
    z = ew.add(ew.add(x, y), one)
    pkm1 = ew.add(x, one)
    qkm1 = ew.mul(z, x)
    ans = ew.div(pkm1, qkm1)
    dqkm1_da = ew.neg(x)
    dans_da = ew.div(_fma(ew.neg(ans), dqkm1_da, _full(x, 0)), qkm1)
    init = (enabled, ans, _full(x, 1), y, z, _c(x, 0), pkm1, qkm1, _full(x, 1), x,
            _full(x, 0), _full(x, 0), _full(x, 0), dqkm1_da, dans_da)
    vals = while_loop(cond, body, init)
    ans = vals[1]
    if mode == VALUE:
        return ew.mul(ans, ax)
    dlogax_da = ew.sub(ew.log(x), special.digamma(a))
    if mode == DERIVATIVE:
        return ew.mul(ax, _fma(ans, dlogax_da, vals[14]))
    return ew.neg(ew.mul(_fma(ans, dlogax_da, vals[14]), x))


def _log_ax(a, x):
    """``a log x - x - lgamma(a)``, exp'd, and whether it underflows."""
    from minixla.lax import special
    ax = ew.sub(_fma(a, ew.log(x), ew.neg(x)), special.lgamma(a))
    underflow = ew.lt(ax, _c(x, -np.log(np.asarray(_finfo(x).max, _dt(x)))))
    return ax, underflow


def igamma(a, x):
    c = lambda v: _c(x, v)  # noqa: E731
    is_nan = ew.bitwise_or(_isnan(a), _isnan(x))
    x_inf = ew.eq(x, c(np.inf))
    a_zero, x_zero = ew.eq(a, c(0)), ew.eq(x, c(0))
    domain_error = _or(ew.lt(x, c(0)), ew.lt(a, c(0)), ew.bitwise_and(a_zero, x_zero), is_nan)
    use_igammac = ew.bitwise_and(ew.ge(x, c(1)), ew.gt(x, a))
    ax, underflow = _log_ax(a, x)
    ax = ew.exp(ax)
    enabled = _not(_or(x_zero, domain_error, underflow, x_inf))
    out = ew.select(
        use_igammac,
        ew.sub(c(1), _igammac_continued_fraction(ax, x, a, ew.bitwise_and(enabled, use_igammac), VALUE)),
        _igamma_series(ax, x, a, ew.bitwise_and(enabled, _not(use_igammac)), VALUE))
    out = ew.select(x_zero, _full(a, 0), out)
    out = ew.select(x_inf, _full(a, 1), out)
    return ew.select(domain_error, _full(a, np.nan), out)


def igammac(a, x):
    c = lambda v: _c(x, v)  # noqa: E731
    is_nan = ew.bitwise_or(_isnan(a), _isnan(x))
    a_zero, x_zero = ew.eq(a, c(0)), ew.eq(x, c(0))
    x_inf = ew.eq(x, c(np.inf))
    domain_error = _or(ew.lt(x, c(0)), ew.lt(a, c(0)), ew.bitwise_and(a_zero, x_zero), is_nan)
    use_igamma = ew.bitwise_or(ew.lt(x, c(1)), ew.lt(x, a))
    ax, underflow = _log_ax(a, x)
    enabled = _not(_or(domain_error, underflow, x_inf, a_zero))
    ax = ew.exp(ax)
    series = _igamma_series(ax, x, a, ew.bitwise_and(enabled, use_igamma), VALUE)
    fraction = _igammac_continued_fraction(ax, x, a, ew.bitwise_and(enabled, _not(use_igamma)), VALUE)
    out = ew.select(use_igamma, ew.sub(c(1), series), fraction)
    out = ew.select(ew.bitwise_or(x_inf, a_zero), _full(out, 0), out)
    return ew.select(domain_error, _full(a, np.nan), out)


def _igamma_derivative(a, x, mode):
    c = lambda v: _c(x, v)  # noqa: E731
    is_nan = ew.bitwise_or(_isnan(a), _isnan(x))
    x_zero = ew.eq(x, c(0))
    domain_error = ew.bitwise_or(ew.lt(x, c(0)), ew.le(a, c(0)))
    use_igammac = ew.bitwise_and(ew.gt(x, c(1)), ew.gt(x, a))
    ax, underflow = _log_ax(a, x)
    ax = ew.exp(ax)
    enabled = _not(_or(x_zero, domain_error, underflow, is_nan))
    out = ew.select(
        use_igammac,
        ew.neg(_igammac_continued_fraction(ax, x, a, ew.bitwise_and(enabled, use_igammac), mode)),
        _igamma_series(ax, x, a, ew.bitwise_and(enabled, _not(use_igammac)), mode))
    out = ew.select(x_zero, _full(out, 0), out)
    return ew.select(ew.bitwise_or(domain_error, is_nan), _full(a, np.nan), out)


def igamma_grad_a(a, x):
    return _igamma_derivative(a, x, DERIVATIVE)


def random_gamma_grad(a, x):
    return _igamma_derivative(a, x, SAMPLE_DERIVATIVE)


# ---------------------------------------------------------------------------------------
# The regularized incomplete beta function (JAX's lax code).

def _lentz(num_iterations, small, threshold, numerator, denominator, inputs):
    """The modified Lentz algorithm for a continued fraction ``b0 + a1/(b1 + a2/(b2 + ...))``
    (Thompson and Barnett), every element until all converged or ``num_iterations``."""
    from minixla.lax.control_flow import while_loop
    x = inputs[0]

    def cond(vals):
        return ew.bitwise_and(ew.lt(vals[0], np.asarray(num_iterations, np.int32)), vals[1])

    def body(vals):
        it, _, c_prev, d_prev, h = vals
        an, bn = numerator(it, *inputs), denominator(it, *inputs)
        small_c = _full(x, small)
        c = ew.add(bn, ew.div(an, c_prev))
        c = ew.select(ew.lt(ew.abs(c), small_c), small_c, c)
        d = _fma(an, d_prev, bn)
        d = ew.select(ew.lt(ew.abs(d), small_c), small_c, d)
        d = ew.integer_pow(d, -1)
        delta = ew.mul(c, d)
        h = ew.mul(h, delta)
        unconverged = _any(ew.ge(ew.abs(ew.sub(delta, _c(x, 1))), _c(x, threshold)))
        return ew.add(it, np.asarray(1, np.int32)), unconverged, c, d, h

    # b0 = denominator(0) = 0 for the incomplete beta fraction: below ``small``, so h starts at it
    h = _full(x, small)
    init = (np.asarray(1, np.int32), np.asarray(True), h, _full(h, 0), h)
    return while_loop(cond, body, init)[4]


def regularized_incomplete_beta(a, b, x):
    from minixla.lax import special
    c = lambda v: _c(x, v)  # noqa: E731
    shape = tuple(x.shape)

    def bcast(i):
        return st.broadcast_in_dim(i, shape, ()) if shape else i

    def numerator(it, a, b, x):  # DLMF 8.17.23 (the first partial numerator is 1)
        i = bcast(it)
        i_even = ew.eq(ew.rem(i, np.asarray(2, np.int32)), np.asarray(0, np.int32))
        i_one = ew.eq(i, np.asarray(1, np.int32))
        m_int = ew.div(ew.sub(i, np.asarray(1, np.int32)), np.asarray(2, np.int32))  # (i >= 1)
        m_zero = ew.eq(m_int, np.asarray(0, np.int32))
        m = ew.convert_element_type(m_int, _dt(x))
        one, two = _full(a, 1), _full(a, 2)
        # at m = 0 this form stays exact where denormals are flushed
        zero_num = ew.div(ew.mul(ew.neg(ew.add(a, b)), x), ew.add(a, one))
        a2m = _fma(two, m, a)
        even = ew.select(m_zero, zero_num, ew.div(
            ew.mul(ew.mul(ew.neg(ew.add(a, m)), ew.add(ew.add(a, b), m)), x),
            ew.mul(a2m, ew.add(a2m, one))))
        odd = ew.div(ew.mul(ew.mul(m, ew.sub(b, m)), x), ew.mul(ew.sub(a2m, one), a2m))
        return ew.select(i_one, _full(x, 1), ew.select(i_even, even, odd))

    def denominator(it, a, b, x):
        i = bcast(it)
        return ew.select(ew.eq(i, np.asarray(0, np.int32)), _full(x, 0), _full(x, 1))

    a_zero = ew.bitwise_or(ew.eq(a, c(0)), ew.eq(b, c(np.inf)))
    b_zero = ew.bitwise_or(ew.eq(b, c(0)), ew.eq(a, c(np.inf)))
    x_zero, x_one = ew.eq(x, c(0)), ew.eq(x, c(1))
    is_nan = _or(_isnan(a), _isnan(b), _isnan(x))
    result_zero = ew.bitwise_or(ew.bitwise_and(b_zero, _not(x_one)), ew.bitwise_and(a_zero, x_zero))
    result_one = ew.bitwise_or(ew.bitwise_and(a_zero, _not(x_zero)), ew.bitwise_and(b_zero, x_one))
    result_nan = _or(ew.lt(a, c(0)), ew.lt(b, c(0)), ew.lt(x, c(0)), ew.gt(x, c(1)))
    result_nan = ew.bitwise_or(result_nan, ew.bitwise_or(ew.bitwise_and(a_zero, b_zero), is_nan))
    # the fraction converges fast for x < (a + 1) / (a + b + 2) (DLMF 8.17.23); else use
    # I_x(a, b) = 1 - I_{1-x}(b, a) (DLMF 8.17.4)
    fast = ew.lt(x, ew.div(ew.add(a, c(1)), ew.add(ew.add(a, b), c(2))))
    a, b = ew.select(fast, a, b), ew.select(fast, b, a)
    x = ew.select(fast, x, ew.sub(c(1), x))
    f = _finfo(x)
    eps_half = float(np.asarray(f.eps / 2, _dt(x)))
    fraction = _lentz(200 if _dt(x) == np.float32 else 600, eps_half, eps_half,
                      numerator, denominator, [a, b, x])
    # a Gamma(a) = Gamma(a + 1) -> 1 as a -> 0: no division by a tiny a
    lbeta_small_a = ew.sub(special.lgamma(b), special.lgamma(ew.add(a, b)))
    lbeta = ew.add(special.lgamma(a), lbeta_small_a)
    log1m_x = ew.log1p(ew.neg(x))
    factor = ew.select(ew.lt(a, _full(a, float(np.asarray(f.tiny * 2, _dt(x))))),
                       ew.exp(ew.sub(ew.mul(log1m_x, b), lbeta_small_a)),
                       ew.div(ew.exp(ew.sub(_fma(ew.log(x), a, ew.mul(log1m_x, b)), lbeta)), a))
    out = ew.mul(fraction, factor)
    out = ew.select(fast, out, ew.sub(_full(out, 1), out))
    out = ew.select(result_zero, _full(a, 0), out)
    out = ew.select(result_one, _full(a, 1), out)
    return ew.select(result_nan, _full(a, np.nan), out)


#: primitive name -> its expansion (the lowering traces it on operands of one shape and dtype)
EXPANSIONS = {
    "lgamma": lgamma, "digamma": digamma, "zeta": zeta, "polygamma": polygamma,
    "bessel_i0e": bessel_i0e, "bessel_i1e": bessel_i1e, "igamma": igamma, "igammac": igammac,
    "igamma_grad_a": igamma_grad_a, "random_gamma_grad": random_gamma_grad,
    "regularized_incomplete_beta": regularized_incomplete_beta,
}
