"""The rest of the ``jax.numpy`` surface: ``shape``/``ndim``/``size``, ``result_type``,
``can_cast``, ``logaddexp``.
"""
from __future__ import annotations

import math

import numpy as np

from minixla import lax
from minixla.core.avals import get_aval, promote_types
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
    ``max + log1p(exp(-|x1 - x2|))``, or ``x1 + x2`` where the difference is NaN."""
    x1, x2 = _promote_inexact(_arr(x1), _arr(x2))
    x1, x2 = _full_shape(x1, x2)
    amax = lax.max(x1, x2)
    delta = lax.sub(x1, x2)
    return lax.select(lax.ne(delta, delta), lax.add(x1, x2),
                      lax.add(amax, lax.log1p(lax.exp(lax.neg(lax.abs(delta))))))
