"""``jnp.gradient`` (central differences inside, one-sided at the edges, for uniform spacings
and coordinate arrays) and ``jnp.histogramdd``/``jnp.histogram2d`` (bins through
``searchsorted`` and one ``bincount`` over the raveled bin indices), as ``jax.numpy``'s."""
from __future__ import annotations

import builtins
import math

import numpy as np

from minixla import lax
from minixla.core.avals import get_aval
from minixla.numpy.promotion import _arr, _canon_axis1, _cast, _promote_inexact
from minixla.numpy.creation import asarray
from minixla.numpy.manipulation import concatenate, reshape, transpose
from minixla.numpy.elementwise import add, divide, equal, multiply, negative, subtract, where
from minixla.numpy.reductions import sum as _sum
from minixla.numpy.indexing import _getitem
from minixla.numpy.sequences import bincount, diff
from minixla.numpy.quantiles import histogram_bin_edges, searchsorted
from minixla.numpy.index_tricks import ix_, ravel_multi_index

__all__ = ["gradient", "histogram2d", "histogramdd"]


def _gradient_along(a, h, axis):
    """One axis of ``gradient``: first-order one-sided edges, second-order central inside.
    (minixla's ops throughout, not Python operators: eager values are NumPy arrays.)"""
    n, nd = get_aval(a).shape[axis], len(get_aval(a).shape)

    def part(x, lo, hi):
        return lax.slice_in_dim(x, lo, hi, axis=axis)
    first = subtract(part(a, 1, 2), part(a, 0, 1))
    last = subtract(part(a, n - 1, n), part(a, n - 2, n - 1))
    if np.ndim(h) == 0:
        inner = divide(multiply(subtract(part(a, 2, n), part(a, 0, n - 2)), 0.5), h)
        return concatenate((divide(first, h), inner, divide(last, h)), axis=axis)
    if np.ndim(h) != 1:
        raise ValueError("Spacing arrays must be 1D arrays or scalars.")
    if get_aval(h).shape[0] != n:
        raise ValueError("Spacing arrays must have the same length as the dimension along which "
                         "the gradient is calculated.")
    h = reshape(h, tuple(n if d == axis else 1 for d in range(nd)))
    first = divide(first, subtract(part(h, 1, 2), part(h, 0, 1)))
    last = divide(last, subtract(part(h, n - 1, n), part(h, n - 2, n - 1)))
    dx1, dx2 = subtract(part(h, 1, n - 1), part(h, 0, n - 2)), subtract(part(h, 2, n), part(h, 1, n - 1))
    ca = divide(negative(dx2), multiply(dx1, add(dx1, dx2)))
    cb = divide(subtract(dx2, dx1), multiply(dx1, dx2))
    cc = divide(dx1, multiply(dx2, add(dx1, dx2)))
    inner = add(add(multiply(ca, part(a, 0, n - 2)), multiply(cb, part(a, 1, n - 1))), multiply(cc, part(a, 2, n)))
    return concatenate((first, inner, last), axis=axis)


def gradient(f, *varargs, axis=None, edge_order=None):
    """The gradient of ``f`` along each axis in ``axis`` (default: all), as ``jnp.gradient``:
    ``(f[i+1] - f[i-1]) / 2h`` inside, ``(f[1] - f[0]) / h`` and ``(f[-1] - f[-2]) / h`` at the
    edges. ``varargs``: none (spacing 1), one spacing for all axes, or one per axis; each a
    scalar or a 1-D coordinate array (non-uniform second-order differences inside). One axis:
    an array of ``f``'s shape in the inexact dtype; several: a list. Raises
    ``NotImplementedError`` for ``edge_order``, ``ValueError`` for an axis shorter than 2 or a
    bad spacing array, ``TypeError`` for a wrong number of spacings (JAX's messages)."""
    if edge_order is not None:
        raise NotImplementedError("The 'edge_order' argument to jnp.gradient is not supported.")
    a, *spacing = _promote_inexact(_arr(f), *varargs)
    shape = get_aval(a).shape
    axes = tuple(range(len(shape))) if axis is None else tuple(
        _canon_axis1(i, len(shape)) for i in ((axis,) if np.ndim(axis) == 0 else axis))
    if not axes:
        return []
    if min(shape[i] for i in axes) < 2:
        raise ValueError("Shape of array too small to calculate a numerical gradient, at least 2 "
                         "elements are required.")
    if not spacing:
        dx = [1.0] * len(axes)
    elif len(spacing) in (1, len(axes)):
        dx = spacing * len(axes) if len(spacing) == 1 else spacing
    else:
        raise TypeError(f"Invalid number of spacing arguments {len(spacing)} for axis={axis}")
    out = [_gradient_along(a, h, ax) for ax, h in zip(axes, dx)]
    return out[0] if len(axes) == 1 else out


def histogramdd(sample, bins=10, range=None, weights=None, density=None):  # noqa: A002 (numpy's name)
    """``(hist, edges)`` of ``sample`` (N points, D coordinates) as ``jnp.histogramdd``: per dim
    ``bins`` is a static count or the edges (one for all dims, or a list of D); ``range`` a list
    of D ``(lo, hi)`` or ``None``. Bins are half-open except the last, closed; points outside
    are dropped. ``hist`` has one dim per coordinate (counts in the inexact dtype of ``sample``
    and ``weights``); ``density`` divides by the total and the bin volumes. ``ValueError`` for a
    bad ``range``, a weights shape other than ``(N,)`` or a wrong number of bins."""
    if weights is None:
        sample, = _promote_inexact(_arr(sample))
    else:
        sample, weights = _arr(sample), _arr(weights)
        if get_aval(weights).shape != get_aval(sample).shape[:1]:
            raise ValueError("should have one weight for each sample.")
        sample, weights = _promote_inexact(sample, weights)
    n, d = get_aval(sample).shape
    if range is not None and (len(range) != d or builtins.any(
            r is not None and np.shape(r)[0] != 2 for r in range)):
        raise ValueError(f"For sample.shape={(n, d)}, range must be a sequence of {d} pairs or Nones; "
                         f"got range={range}")
    try:
        per_dim = list(bins)
    except TypeError:  # one count for every dim
        per_dim = [bins] * d
    else:
        if len(per_dim) != d:
            raise ValueError("should be a bin for each dimension.")
    idx, edges = [], []
    for i in builtins.range(d):
        col = _getitem(sample, (slice(None), i))
        e = histogram_bin_edges(col, per_dim[i], None if range is None else range[i], weights)
        k = searchsorted(e, col, side="right")
        idx.append(where(equal(col, _getitem(e, -1)), subtract(k, 1), k))
        edges.append(e)
    nbins = tuple(get_aval(e).shape[0] + 1 for e in edges)
    flat = ravel_multi_index(tuple(idx), nbins, mode="clip")
    hist = reshape(bincount(flat, weights, length=math.prod(nbins)), nbins)
    hist = _getitem(hist, (slice(1, -1),) * d)
    if density:
        hist = _cast(hist, get_aval(sample).dtype)
        hist = divide(hist, _sum(hist))
        for norm in ix_(*(diff(e) for e in edges)):
            hist = divide(hist, norm)
    return hist, edges


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):  # noqa: A002 (numpy's name)
    """``(hist, x_edges, y_edges)``: ``histogramdd`` of the points ``(x[i], y[i])``
    (``jnp.histogram2d``); ``bins`` a count, a pair of counts or edge arrays, or one edge array
    for both."""
    x, y = _arr(x), _arr(y)
    try:
        nb = len(bins)
    except TypeError:
        nb = 1
    if nb not in (1, 2):
        bins = [asarray(bins)] * 2
    hist, edges = histogramdd(transpose(asarray([x, y])), bins, range, weights, density)
    return hist, edges[0], edges[1]
