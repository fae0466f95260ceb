"""Window functions (``jax.numpy``'s, from the same ops in the same order): ``hamming``,
``hanning``, ``blackman``, ``bartlett``, ``kaiser``; and phase ``unwrap``. Each returns ``M`` points of the default
float dtype (all ones for ``M <= 1``); ``M`` must be a static int. Mirrors
``jax/_src/numpy/window_functions.py``.

JAX jits these, so XLA divides by a broadcast scalar by multiplying with its reciprocal:
``_over`` does the same, eagerly too (bit-identical results).
"""
from __future__ import annotations

import numpy as np

from minixla import lax
from minixla.core import errors
from minixla.core.tracing import Tracer
from minixla.core.avals import get_aval
from minixla.numpy.promotion import _arr, _default_float, _promote_dtypes, _where_line
from minixla.numpy.elementwise import (
    _div_by_constant, abs, cos, floor_divide, greater, less, logical_and, multiply, reciprocal, remainder,
    sqrt, true_divide, where, equal)
from minixla.numpy.manipulation import concatenate
from minixla.numpy.reductions import cumsum
from minixla.numpy.sequences import diff
from minixla.numpy.floatbits import i0

__all__ = ["hamming", "hanning", "blackman", "bartlett", "kaiser", "unwrap"]


def _window(M, name):
    """``(M, iota)``: the static length and ``0, 1, ..., M-1`` in the default float dtype, or
    ``(M, None)`` for ``M <= 1`` (the window is then ones)."""
    if isinstance(M, Tracer):
        raise errors.ConcretizationTypeError(f"M argument of jnp.{name} must be static{_where_line()}")
    M = int(M)
    return M, (None if M <= 1 else lax.iota(_default_float(), M))


def _over(x, d):
    """``x / d`` for an array ``x`` and a scalar ``d`` as XLA computes it in a jitted function:
    ``x * (1 / d)`` (a constant ``d`` folded in ``x``'s dtype)."""
    if isinstance(d, (int, float)):
        return _div_by_constant(x, d)
    return multiply(x, reciprocal(d))


def _ones(M):
    return lax.full((max(M, 0),), 1, _default_float())


def hamming(M):
    """The Hamming window ``0.54 - 0.46 cos(2 pi n / (M - 1))`` (``jnp.hamming``)."""
    M, n = _window(M, "hamming")
    return _ones(M) if n is None else 0.54 - 0.46 * cos(_over(2 * np.pi * n, M - 1))


def hanning(M):
    """The Hann window ``0.5 (1 - cos(2 pi n / (M - 1)))`` (``jnp.hanning``)."""
    M, n = _window(M, "hanning")
    return _ones(M) if n is None else 0.5 * (1 - cos(_over(2 * np.pi * n, M - 1)))


def blackman(M):
    """The Blackman window (``jnp.blackman``)."""
    M, n = _window(M, "blackman")
    if n is None:
        return _ones(M)
    return 0.42 - 0.5 * cos(_over(2 * np.pi * n, M - 1)) + 0.08 * cos(_over(4 * np.pi * n, M - 1))


def bartlett(M):
    """The Bartlett (triangular) window ``1 - |2n + 1 - M| / (M - 1)`` (``jnp.bartlett``)."""
    M, n = _window(M, "bartlett")
    return _ones(M) if n is None else 1 - _over(abs(2 * n + 1 - M), M - 1)


def kaiser(M, beta):
    """The Kaiser window ``i0(beta sqrt(1 - ((n - a)/a)**2)) / i0(beta)``, ``a = (M-1)/2``
    (``jnp.kaiser``); ``beta`` may be traced (then eagerly within 1 ulp of JAX's jitted kaiser,
    bit-identical under ``jit``)."""
    M, n = _window(M, "kaiser")
    if n is None:
        return _ones(M)
    alpha = 0.5 * (M - 1)
    return _over(i0(beta * sqrt(1 - _over(n - alpha, alpha) ** 2)), i0(beta))


def unwrap(p, discont=None, axis=-1, period=2 * np.pi):
    """``p`` with jumps larger than ``discont`` (default ``period / 2``) along ``axis`` replaced
    by their ``period`` complement (``jnp.unwrap``): the corrections' cumulative sum added to
    all but the first element. ``p`` and ``period`` are promoted together (integers use
    ``period // 2``). ``ValueError`` for complex input."""
    p, period = _promote_dtypes(_arr(p), _arr(period))
    dtype = np.dtype(get_aval(p).dtype)
    if dtype.kind == "c":
        raise ValueError("jnp.unwrap does not support complex inputs.")
    if get_aval(p).shape[axis] == 0:
        return p
    if discont is None:
        discont = true_divide(period, 2)
    interval = floor_divide(period, 2) if dtype.kind in "iu" else true_divide(period, 2)
    dd = diff(p, axis=axis)
    ddmod = remainder(dd + interval, period) - interval
    ddmod = where(logical_and(equal(ddmod, -interval), greater(dd, 0)), interval, ddmod)
    ph_correct = where(less(abs(dd), discont), 0, ddmod - dd)
    nd = len(get_aval(p).shape)
    ax = axis % nd
    head = (slice(None),) * ax
    return concatenate((_slice(p, head, 0, 1),
                        _slice(p, head, 1, None) + cumsum(ph_correct, axis=axis)), axis=axis)


def _slice(x, head, lo, hi):
    from minixla.numpy.indexing import _getitem
    return _getitem(x, head + (slice(lo, hi),))
