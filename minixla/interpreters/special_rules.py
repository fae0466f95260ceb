"""JVP and batching rules of the special functions (``minixla.lax.special``; issue 14), JAX's:

- ``lgamma' = digamma``, ``digamma' = polygamma(1, .)``, ``polygamma(m, x)' = polygamma(m + 1, x)``
  in ``x`` (in ``m``: JAX's ``ValueError``);
- ``igamma``'s in ``a`` is ``igamma_grad_a``, in ``x`` the density ``exp(-x + (a - 1) log x - lgamma(a))``;
  ``igammac``'s are their negatives;
- ``bessel_i0e' = bessel_i1e - sign(x) i0e``, ``bessel_i1e' = i0e - i1e (sign(x) + 1/x)`` (0.5
  at ``|x| <= eps``);
- ``betainc``'s in ``x`` is the beta density (in ``a``/``b``: JAX's ``ValueError``).

``zeta``, ``igamma_grad_a`` and ``random_gamma_grad`` have no JVP in JAX either
(``minixla.interpreters.rules.MISSING`` says so). Every one of them is elementwise: it batches
as the other n-ary elementwise ops (batch axis first, unbatched operands broadcast).
"""
from __future__ import annotations

import ml_dtypes

from minixla import lax as L
from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.interpreters.ad_rules import _const, defjvp
from minixla.interpreters.batching import defbroadcasting, defvectorized


def _not_differentiable(message):
    def rule(g, ans, *args):
        raise errors.TransformValueError(message)
    return rule


defjvp(L.lgamma_p, lambda g, ans, x: L.mul(g, L.digamma(x)))
defjvp(L.digamma_p, lambda g, ans, x: L.mul(g, L.polygamma(_const(x, 1), x)))
defjvp(L.polygamma_p, _not_differentiable("polygamma gradient with respect to m is not supported"),
       lambda g, ans, m, x: L.mul(g, L.polygamma(L.add(m, _const(m, 1)), x)))


def _igamma_dx(g, ans, a, x):
    one = _const(a, 1)
    return L.mul(g, L.exp(L.sub(L.add(L.neg(x), L.mul(L.sub(a, one), L.log(x))), L.lgamma(a))))


def _igamma_da(g, ans, a, x):
    return L.mul(g, L.igamma_grad_a(a, x))


defjvp(L.igamma_p, _igamma_da, _igamma_dx)
defjvp(L.igammac_p, lambda *args: L.neg(_igamma_da(*args)), lambda *args: L.neg(_igamma_dx(*args)))

defjvp(L.bessel_i0e_p, lambda g, ans, x: L.mul(g, L.sub(L.bessel_i1e(x), L.mul(L.sign(x), ans))))


def _bessel_i1e_jvp(g, ans, x):
    eps = _const(x, ml_dtypes.finfo(get_aval(x).dtype).eps)
    not_tiny = L.gt(L.abs(x), eps)
    safe_x = L.select(not_tiny, x, L.full_like(x, eps))
    dy = L.sub(L.bessel_i0e(safe_x), L.mul(ans, L.add(L.sign(safe_x), L.reciprocal(safe_x))))
    return L.mul(g, L.select(not_tiny, dy, L.full_like(x, 0.5)))


defjvp(L.bessel_i1e_p, _bessel_i1e_jvp)


def _betainc_dx(g, ans, a, b, x):
    lbeta = L.sub(L.add(L.lgamma(a), L.lgamma(b)), L.lgamma(L.add(a, b)))
    one = _const(x, 1)
    partial = L.exp(L.sub(L.add(L.mul(L.sub(b, one), L.log1p(L.neg(x))), L.mul(L.sub(a, one), L.log(x))), lbeta))
    return L.mul(partial, g)


_betainc_ab = _not_differentiable("Betainc gradient with respect to a and b not supported.")
defjvp(L.regularized_incomplete_beta_p, _betainc_ab, _betainc_ab, _betainc_dx)

for _p in (L.lgamma_p, L.digamma_p, L.bessel_i0e_p, L.bessel_i1e_p):
    defvectorized(_p)
for _p in (L.polygamma_p, L.zeta_p, L.igamma_p, L.igammac_p, L.igamma_grad_a_p, L.random_gamma_grad_p):
    defbroadcasting(_p)
defbroadcasting(L.regularized_incomplete_beta_p)
