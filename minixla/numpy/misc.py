"""The rest of the ``jax.numpy`` surface: ``shape``/``ndim``/``size``, ``result_type``,
``can_cast``, ``logaddexp``.
"""
from __future__ import annotations

import math

import numpy as np

from minixla import lax
from minixla.core.avals import get_aval, promote_types
from minixla.interpreters.custom_derivatives import custom_jvp
from minixla.numpy.promotion import _arr, _full_shape, _promote_inexact


def shape(a):
    return get_aval(_arr(a)).shape


def ndim(a):
    return get_aval(_arr(a)).ndim


def size(a, axis=None):
    s = get_aval(_arr(a)).shape
    return math.prod(s) if axis is None else s[axis]


def result_type(*args):
    """JAX's result dtype for ``args`` (``jnp.result_type``)."""
    return promote_types(*(get_aval(_arr(a)) for a in args))[0]


def can_cast(from_, to, casting="safe"):
    return np.can_cast(from_, to, casting)


def logaddexp(x1, x2, /):
    """``log(exp(x1) + exp(x2))`` without overflow (``jnp.logaddexp``), computed as JAX does:
    ``max + log1p(exp(-|x1 - x2|))``, or ``x1 + x2`` where the difference is NaN. Its derivative
    is JAX's ``custom_jvp`` rule, ``t1 exp(x1 - out) + t2 exp(x2 - out)`` (an infinite ``x`` or
    ``out`` read as 0), so a tie ``x1 == x2`` gives (0.5, 0.5), not ``max``'s (0, 1); ``softplus``
    and ``log_sigmoid`` inherit it."""
    x1, x2 = _promote_inexact(_arr(x1), _arr(x2))
    x1, x2 = _full_shape(x1, x2)
    return _logaddexp(x1, x2)


def _replace_inf(x):
    """``x`` with ``+inf`` read as 0 (JAX's ``_replace_inf``: keeps ``exp(x - out)`` finite)."""
    return lax.select(lax.eq(x, lax.full_like(x, np.inf)), lax.full_like(x, 0), x)


def _logaddexp_jvp_rule(fun, exp, name):  # shared with ufuncs.logaddexp2
    """The JVP ``t1 exp(x1 - out) + t2 exp(x2 - out)`` of ``fun``, ``logaddexp`` (``exp = lax.exp``)
    or ``logaddexp2`` (``exp = lax.exp2``), with JAX's ``_replace_inf`` on each operand."""
    def rule(primals, tangents):
        (x1, x2), (t1, t2) = primals, tangents
        out = fun(x1, x2)
        r_out = _replace_inf(out)
        return out, lax.add(lax.mul(t1, exp(lax.sub(_replace_inf(x1), r_out))),
                            lax.mul(t2, exp(lax.sub(_replace_inf(x2), r_out))))
    rule.__name__ = rule.__qualname__ = name
    return rule


def _logaddexp_impl(x1, x2):
    amax = lax.max(x1, x2)
    delta = lax.sub(x1, x2)
    return lax.select(lax.ne(delta, delta), lax.add(x1, x2),
                      lax.add(amax, lax.log1p(lax.exp(lax.neg(lax.abs(delta))))))


_logaddexp_impl.__name__ = _logaddexp_impl.__qualname__ = "logaddexp"  # JAX's name in a jaxpr
_logaddexp = custom_jvp(_logaddexp_impl)
_logaddexp.defjvp(_logaddexp_jvp_rule(_logaddexp, lax.exp, "_logaddexp_jvp"))
