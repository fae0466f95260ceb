"""``minixla.numpy.linalg``: the part of ``jax.numpy.linalg`` that composes from reductions and
contractions (norms, ``matrix_power``, the Array API's ``vecdot``/``matmul``/``tensordot``/
``trace``/``diagonal``/``outer``/``cross``/``matrix_transpose``), with ``jax.numpy.linalg``'s
signatures, dtypes and errors.

Not here yet: everything that needs a matrix decomposition (``cholesky``, ``qr``, ``lu``,
``eigh``, ``svd``, ``solve``, ``inv``, ``det``, ``slogdet``, ``pinv``, ...), and so the norms
built on singular values (``ord=2``, ``-2``, ``"nuc"`` for matrices) and ``matrix_power`` with
a negative exponent: they raise ``UnsupportedError``.
"""
from __future__ import annotations

import operator

import numpy as np

from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.numpy import contractions as _c
from minixla.numpy import creation as _cr
from minixla.numpy import elementwise as _ew
from minixla.numpy import manipulation as _mn
from minixla.numpy import matrices as _m
from minixla.numpy import promotion as _p
from minixla.numpy import reductions as _r


def _inexact(x):
    x, = _p._promote_inexact(_p._arr(x))
    return x


def _sq_sum(x, axis, keepdims):
    return _ew.sqrt(_r.sum(_ew.multiply(x, x), axis=axis, keepdims=keepdims))


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):  # noqa: A002 (the Array API's name)
    """The ``ord``-norm of ``x`` over ``axis`` (all axes for ``None``), as
    ``jax.numpy.linalg.vector_norm``: ``2`` (default), ``1``, ``inf``, ``-inf``, ``0`` (the count
    of nonzeros, as a float) or any other ``p`` (``sum(|x|**p)**(1/p)``). Raises ValueError for a
    string ``ord``."""
    x = _inexact(x)
    if ord is None or (not isinstance(ord, str) and ord == 2):
        return _sq_sum(x, axis, keepdims)
    if isinstance(ord, str):
        hint = {"inf": "Use 'jax.numpy.inf' instead.", "-inf": "Use '-jax.numpy.inf' instead."}.get(ord, "")
        raise ValueError(f"Invalid order '{ord}' for vector norm.{hint}")
    if ord == np.inf:
        return _r.amax(_ew.abs(x), axis=axis, keepdims=keepdims, initial=0)
    if ord == -np.inf:
        return _r.amin(_ew.abs(x), axis=axis, keepdims=keepdims)
    if ord == 0:
        return _r.sum(_ew.not_equal(x, 0), dtype=get_aval(x).dtype, axis=axis, keepdims=keepdims)
    if ord == 1:
        return _r.sum(_ew.abs(x), axis=axis, keepdims=keepdims)
    ax = _ew.abs(x)
    dt = get_aval(ax).dtype
    p = np.asarray(ord, dt)
    out = _r.sum(_ew.power(ax, p), axis=axis, keepdims=keepdims)
    return _ew.power(out, np.asarray(1.0 / p, dt))


def norm(x, ord=None, axis=None, keepdims=False):  # noqa: A002 (numpy's name)
    """A vector norm (one axis, or all of a 1-D ``x``) or a matrix norm (two axes, or all of a
    2-D ``x``; ``None``/``"fro"``, ``1``, ``-1``, ``inf``, ``-inf``), as ``jax.numpy.linalg.norm``;
    ``axis=None`` with ``ord=None`` is the 2-norm of the flattened array. The singular-value
    norms (``2``, ``-2``, ``"nuc"``) need an SVD: UnsupportedError. Raises ValueError for another
    ``ord`` or more than two axes."""
    x = _inexact(x)
    nd = get_aval(x).ndim
    if axis is None:
        if ord is None:
            return _sq_sum(x, None, keepdims)
        axes = tuple(range(nd))
    elif isinstance(axis, tuple):
        axes = tuple(_p._canon_axis1(a, nd) for a in axis)
    else:
        axes = (_p._canon_axis1(axis, nd),)
    if len(axes) == 1:
        return vector_norm(x, ord=2 if ord is None else ord, axis=axes, keepdims=keepdims)
    if len(axes) != 2:
        raise ValueError(f"Improper number of axes for norm: axis={axes!r}. Pass one axis to compute a "
                         "vector-norm, or two axes to compute a matrix-norm.")
    row, col = axes
    if ord is None or ord in ("f", "fro"):
        return _sq_sum(x, axes, keepdims)
    if isinstance(ord, str) and ord != "nuc":
        raise ValueError(f"Invalid order '{ord}' for matrix norm.")
    if ord in (1, -1):
        inner, outer = row, col
        if not keepdims and col > row:
            outer -= 1
    elif ord in (np.inf, -np.inf):
        inner, outer = col, row
        if not keepdims and row > col:
            outer -= 1
    elif ord in ("nuc", 2, -2):
        raise errors.UnsupportedError(f"norm: ord={ord!r} of a matrix needs its singular values (an SVD), "
                                      "which minixla does not have yet")
    else:
        raise ValueError(f"Invalid order '{ord}' for matrix norm.")
    sums = _r.sum(_ew.abs(x), axis=inner, keepdims=keepdims)
    if ord in (1, np.inf):
        return _r.amax(sums, axis=outer, keepdims=keepdims, initial=0)
    return _r.amin(sums, axis=outer, keepdims=keepdims)


def matrix_norm(x, /, *, keepdims=False, ord="fro"):  # noqa: A002 (the Array API's name)
    """``norm(x, ord, axis=(-2, -1))`` (``jax.numpy.linalg.matrix_norm``)."""
    return norm(x, ord=ord, keepdims=keepdims, axis=(-2, -1))


def matrix_power(a, n):
    """``a @ a @ ... @ a`` (``n`` times) over the last two (square) axes by repeated squaring, in
    ``jax.numpy.linalg.matrix_power``'s order of products; ``n = 0`` gives the identity. Raises
    TypeError for rank < 2, non-square matrices or a non-integer ``n``; a negative ``n`` needs
    an inverse (UnsupportedError)."""
    arr = _p._arr(a)
    shape = get_aval(arr).shape
    if len(shape) < 2:
        raise TypeError(f"{len(shape)}-dimensional array given. Array must be at least two-dimensional")
    if shape[-2] != shape[-1]:
        raise TypeError("Last 2 dimensions of the array must be square")
    try:
        n = operator.index(n)
    except TypeError as err:
        raise TypeError(f"exponent must be an integer, got {n}") from err
    if n == 0:
        return _p.broadcast_to(_cr.eye(shape[-1], dtype=get_aval(arr).dtype), shape)
    if n < 0:
        raise errors.UnsupportedError("matrix_power with a negative exponent needs a matrix inverse, "
                                      "which minixla does not have yet")
    if n <= 3:
        out = arr
        for _ in range(n - 1):
            out = _c.matmul(out, arr)
        return out
    z = result = None
    while n > 0:
        z = arr if z is None else _c.matmul(z, z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else _c.matmul(result, z)
    return result


def vecdot(x1, x2, /, *, axis=-1, precision=None, preferred_element_type=None):
    """``sum(x1 * x2, axis)`` broadcasting the other axes (``jax.numpy.linalg.vecdot``)."""
    return _m.vecdot(x1, x2, axis=axis, precision=precision, preferred_element_type=preferred_element_type)


def matmul(x1, x2, /, *, precision=None, preferred_element_type=None):
    """``jnp.matmul`` (``jax.numpy.linalg.matmul``); ``precision`` is accepted and ignored (minixla
    computes in the operands' precision)."""
    if preferred_element_type is not None:
        x1, x2 = _cr.astype(x1, preferred_element_type), _cr.astype(x2, preferred_element_type)
    return _c.matmul(x1, x2)


def tensordot(x1, x2, /, *, axes=2, precision=None, preferred_element_type=None):
    """``jnp.tensordot`` (``jax.numpy.linalg.tensordot``)."""
    if preferred_element_type is not None:
        x1, x2 = _cr.astype(x1, preferred_element_type), _cr.astype(x2, preferred_element_type)
    return _c.tensordot(x1, x2, axes=axes)


def trace(x, /, *, offset=0, dtype=None):
    """The sum of the diagonals of the last two axes (``jax.numpy.linalg.trace``)."""
    return _m.trace(x, offset=offset, axis1=-2, axis2=-1, dtype=dtype)


def diagonal(x, /, *, offset=0):
    """The diagonals of the last two axes (``jax.numpy.linalg.diagonal``)."""
    return _m.diagonal(x, offset=offset, axis1=-2, axis2=-1)


def outer(x1, x2, /):
    """``x1[:, None] * x2[None, :]`` of two 1-D arrays (``jax.numpy.linalg.outer``); ValueError otherwise."""
    x1, x2 = _p._arr(x1), _p._arr(x2)
    n1, n2 = get_aval(x1).ndim, get_aval(x2).ndim
    if n1 != 1 or n2 != 1:
        raise ValueError(f"Input arrays must be one-dimensional, but they are x1.ndim={n1!r} x2.ndim={n2!r}")
    return _ew.multiply(_mn.reshape(x1, (-1, 1)), _mn.reshape(x2, (1, -1)))


def cross(x1, x2, /, *, axis=-1):
    """The cross product of 3-vectors along ``axis`` (``jax.numpy.linalg.cross``); ValueError
    unless both have size 3 there."""
    x1, x2 = _p._arr(x1), _p._arr(x2)
    s1, s2 = get_aval(x1).shape[axis], get_aval(x2).shape[axis]
    if s1 != 3 or s2 != 3:
        raise ValueError("Both input arrays must be (arrays of) 3-dimensional vectors, but they have "
                         f"x1.shape[axis]={s1!r} and x2.shape[axis]={s2!r}")
    return _m.cross(x1, x2, axis=axis)


def matrix_transpose(x, /):
    """Swap the last two axes (``jax.numpy.linalg.matrix_transpose``)."""
    return _m.matrix_transpose(x)


# Every public function is an API boundary: an error escaping it names the function, the
# shapes it was given and the user's line (``errors.api_boundary``). Keep this at the end.
errors.wrap_public_functions(globals())
