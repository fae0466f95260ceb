"""``minixla.numpy.linalg`` (``jax.numpy.linalg``), with its signatures, dtypes and errors: the
norms, ``matrix_power``, the Array API's ``vecdot``/``matmul``/``tensordot``/``trace``/
``diagonal``/``outer``/``cross``/``matrix_transpose``, and the functions built on the
decompositions of ``minixla.lax.linalg`` (``det``, ``slogdet``, ``inv``, ``solve``,
``cholesky``, ``qr``, ``eigh``, ``eigvalsh``, ``svd``, ``svdvals``, ``matrix_rank``, ``pinv``,
``lstsq``, the singular-value norms). Those are compositions of minixla's primitives and loops,
so they run on every backend and transform; values agree with JAX's LAPACK to rounding times
the condition number. Complex matrices and the non-symmetric ``eig``/``eigvals`` are not
supported.
"""
from __future__ import annotations

import operator
from typing import Any, NamedTuple

import numpy as np

from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.lax import linalg as _lla
from minixla.numpy import contractions as _c
from minixla.numpy import creation as _cr
from minixla.numpy import elementwise as _ew
from minixla.numpy import indexing as _ix
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
    norms (``2``, ``-2``, ``"nuc"``) use ``svdvals``. Raises ValueError for another
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
        y = _mn.moveaxis(x, (row, col), (-2, -1))
        sv = svdvals(y)
        # (an empty matrix has no singular values: its 2-norm is 0 as JAX's, its -2-norm an error)
        out = _r.sum(sv, axis=-1) if ord == "nuc" else (
            _r.amax(sv, axis=-1, initial=0) if ord == 2 else _r.amin(sv, axis=-1))
        if keepdims:
            out = _mn.expand_dims(out, tuple(sorted(axes)))
        return out
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
    TypeError for rank < 2, non-square matrices or a non-integer ``n``; a negative ``n`` powers
    ``inv(a)``."""
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
        arr, n = inv(arr), -n
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


# ---------------------------------------------------------------------------------------
# On the decompositions (minixla.lax.linalg)

class SlogdetResult(NamedTuple):
    sign: Any
    logabsdet: Any


class EighResult(NamedTuple):
    eigenvalues: Any
    eigenvectors: Any


class QRResult(NamedTuple):
    Q: Any
    R: Any


class SVDResult(NamedTuple):
    U: Any
    S: Any
    Vh: Any


def _square(a, what):
    a = _inexact(a)
    shape = get_aval(a).shape
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"Argument to {what} must have shape [..., n, n], got {shape}")
    return a


def _diag(a):
    return _m.diagonal(a, axis1=-2, axis2=-1)


def _lazy_custom_jvp(fun, rule):
    """``custom_jvp(fun)`` with ``rule``, built on first use (the interpreters import
    ``minixla.numpy``, so this module cannot import them at load time)."""
    made = []

    def call(*args):
        if not made:
            from minixla.interpreters.custom_derivatives import custom_jvp
            f = custom_jvp(fun)
            f.defjvp(rule)
            made.append(f)
        return made[0](*args)
    return call


def _slogdet_lu(a):
    dt = get_aval(a).dtype
    n = get_aval(a).shape[-1]
    lu, piv, _ = _lla.lu(a)
    d = _diag(lu)
    is_zero = _r.any(_ew.equal(d, 0), axis=-1)
    swaps = _r.sum(_ew.not_equal(piv, _cr.arange(n, dtype=np.int32)), axis=-1)
    negs = _r.sum(_ew.less(d, 0), axis=-1)
    odd = _ew.equal(_ew.remainder(swaps + negs, 2), 1)
    sign = _ew.where(odd, np.asarray(-1, dt), np.asarray(1, dt))
    sign = _ew.where(is_zero, np.asarray(0, dt), sign)
    logdet = _ew.where(is_zero, np.asarray(-np.inf, dt), _r.sum(_ew.log(_ew.abs(d)), axis=-1))
    return sign, logdet


def _slogdet_small(a):
    det = _small_det(a, get_aval(a).shape[-1])
    return _ew.sign(det), _ew.log(_ew.abs(det))


def _trace_of_product(c, g):
    """``trace(c @ g)`` as ``sum(c.T * g)``: the rules below solve against the identity (primal
    values only) and apply the result to the tangent here, not loop over the tangent, so the
    tangent map has no loop and transposes for reverse mode."""
    return _r.sum(_ew.multiply(_m.matrix_transpose(c), g), axis=(-2, -1))


def _slogdet_lu_jvp(primals, tangents):
    # d log|det A| = trace(A^-1 dA) (inf/NaN for a singular A, as JAX's); the sign is locally
    # constant (its derivative at det = 0 is taken as 0, as JAX)
    a, = primals
    g, = tangents
    sign, logdet = _slogdet(a)
    return (sign, logdet), (_cr.zeros_like(sign), _trace_of_product(inv(a), g))


def _slogdet_small_jvp(primals, tangents):
    # JAX's closed forms: g/x for 1x1, the cofactor expansion over det for 2x2
    a, = primals
    g, = tangents
    sign, logdet = _slogdet(a)
    e = lambda m, i, j: _entry(m, i, j)  # noqa: E731
    if get_aval(a).shape[-1] == 1:
        dlog = _ew.divide(e(g, 0, 0), e(a, 0, 0))
    else:
        num = (e(g, 0, 0) * e(a, 1, 1) - e(g, 0, 1) * e(a, 1, 0)
               - e(g, 1, 0) * e(a, 0, 1) + e(g, 1, 1) * e(a, 0, 0))
        dlog = _ew.divide(num, _small_det(a, 2))
    return (sign, logdet), (_cr.zeros_like(sign), dlog)


_slogdet_lu_cj = _lazy_custom_jvp(_slogdet_lu, _slogdet_lu_jvp)
_slogdet_small_cj = _lazy_custom_jvp(_slogdet_small, _slogdet_small_jvp)


def _slogdet(a):
    return (_slogdet_small_cj if get_aval(a).shape[-1] in (1, 2) else _slogdet_lu_cj)(a)


def slogdet(a, *, method=None):
    """``(sign, logabsdet)`` of the determinants of ``a[..., n, n]`` (``jax.numpy.linalg.slogdet``):
    ``det = sign * exp(logabsdet)`` without overflow; a singular matrix gives ``(0, -inf)``, a
    ``0 x 0`` one ``(1, 0)``. By LU (``method=None``/``"lu"``; sizes 1 and 2 by their closed
    forms, as JAX); ``"qr"`` is not supported (UnsupportedError). Derivatives as JAX's
    ``custom_jvp``: ``d logabsdet = trace(solve(a, da))`` (inf/NaN at a singular ``a``), ``d sign
    = 0``. Raises ValueError for a non-square or rank < 2 ``a``."""
    a = _square(a, "slogdet()")
    if method not in (None, "lu"):
        if method == "qr":
            raise errors.UnsupportedError("slogdet: method='qr' is not supported (use the default LU)")
        raise ValueError(f"Unknown slogdet method '{method}'. Supported methods are 'lu' (`None`), and 'qr'.")
    return SlogdetResult(*_slogdet(a))


def _entry(a, i, j):
    return a[..., i, j]


def _small_det(a, n):
    e = lambda i, j: _entry(a, i, j)  # noqa: E731
    if n == 1:
        return e(0, 0)
    if n == 2:
        return _ew.subtract(_ew.multiply(e(0, 0), e(1, 1)), _ew.multiply(e(0, 1), e(1, 0)))
    m = _ew.multiply
    # the rule of Sarrus, in JAX's order of terms
    return (m(m(e(0, 0), e(1, 1)), e(2, 2)) + m(m(e(0, 1), e(1, 2)), e(2, 0)) + m(m(e(0, 2), e(1, 0)), e(2, 1))
            - m(m(e(0, 2), e(1, 1)), e(2, 0)) - m(m(e(0, 0), e(1, 2)), e(2, 1)) - m(m(e(0, 1), e(1, 0)), e(2, 2)))


def _cofactor_solve(a, b):
    """``(det(a), adj(a) @ b)`` for ``a[..., n, n]``, ``b[..., n, k]`` (same batch dims): what
    ``det(a) * solve(a, b)`` is for a regular ``a``, but finite for a singular one, as JAX's
    ``_cofactor_solve`` defines it. With ``P a = L U`` (partial pivoting), ``adj(a) b =
    det(a) U^-1 L^-1 P b``; the last row of ``U^-1 y`` is ``y[-1] / U[-1, -1]``, and ``det(a) /
    U[-1, -1]`` is the product ``p`` of the other pivots (with the permutation's sign). So the
    rows of ``L^-1 P b`` but the last are scaled by ``det(a)``, the last is kept, and ``U[-1, -1]``
    becomes ``1 / p``: for rank ``n - 1`` (``U[-1, -1] = 0``) nothing divides by zero. A zero
    among the other pivots (rank < n - 1, where the adjugate is 0) shows as a non-finite solve of
    ``U x = 1``: those matrices give 0."""
    n = get_aval(a).shape[-1]
    dt = get_aval(a).dtype
    if n == 0:  # (an empty product: det 1, and no entries to solve for)
        return _cr.ones(get_aval(a).shape[:-2], dt), b
    if n == 1:
        return a[..., 0, 0], b
    lu, piv, perm = _lla.lu(a)
    swaps = _r.sum(_ew.not_equal(piv, _cr.arange(n, dtype=np.int32)), axis=-1)
    sign = _ew.where(_ew.equal(_ew.remainder(swaps, 2), 1), np.asarray(-1, dt), np.asarray(1, dt))
    partial = _ew.multiply(_r.cumprod(_diag(lu), axis=-1), _mn.expand_dims(sign, -1))
    rows = _cr.arange(n, dtype=np.int32)
    corner = _ew.logical_and(_ew.equal(rows, n - 1)[:, None], _ew.equal(rows, n - 1)[None, :])
    lu = _ew.where(corner, _ew.divide(np.asarray(1, dt), partial[..., -2])[..., None, None], lu)
    ones = _cr.ones(get_aval(b).shape[:-1] + (1,), dt)
    probe = _lla.triangular_solve(lu, ones, left_side=True, lower=False)
    low_rank = _r.any(_ew.logical_not(_ew.isfinite(probe)), axis=(-2, -1))[..., None, None]
    zero = np.asarray(0, dt)
    x = _ew.where(low_rank, zero, b)
    x = _ix.take_along_axis(x, _mn.expand_dims(perm, -1), axis=-2)
    x = _lla.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True)
    x = _mn.concatenate([_ew.multiply(x[..., :-1, :], partial[..., -1:, None]), x[..., -1:, :]], axis=-2)
    x = _lla.triangular_solve(lu, x, left_side=True, lower=False)
    return partial[..., -1], _ew.where(low_rank, zero, x)


def _det(a):
    sign, logdet = _slogdet(a)
    return _ew.multiply(sign, _ew.exp(logdet))


def _det_jvp(primals, tangents):
    # d det = trace(adj(a) da): finite at a singular a (JAX's rule, through _cofactor_solve)
    a, = primals
    g, = tangents
    shape = get_aval(a).shape
    y, adj = _cofactor_solve(a, _p.broadcast_to(_cr.eye(shape[-1], dtype=get_aval(a).dtype), shape))
    return y, _trace_of_product(adj, g)


_det_cj = _lazy_custom_jvp(_det, _det_jvp)  # (named as JAX's, ``_det``, in a jaxpr)


def det(a):
    """The determinants ``[...]`` of ``a[..., n, n]`` (``jax.numpy.linalg.det``): closed forms for
    ``n = 2, 3`` (as JAX), else ``sign * exp(logabsdet)`` of the LU ``slogdet`` (``1`` for
    ``0 x 0``); integer input is promoted to float. The derivative of the LU form is JAX's
    ``custom_jvp``: ``trace(adj(a) @ da)``, finite at a singular ``a`` (the cofactor matrix; 0
    for rank < n - 1). Raises ValueError for a non-square or rank < 2 ``a``."""
    a = _inexact(a)
    shape = get_aval(a).shape
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"Argument to _det() must have shape [..., n, n], got {shape}")
    if shape[-1] in (2, 3):
        return _small_det(a, shape[-1])
    return _det_cj(a)


def _lu_solve(a, b):
    """``a[..., m, m] x = b[..., m, k]`` (same batch dims) by LU with partial pivoting."""
    lu, _, perm = _lla.lu(a)
    pb = _ix.take_along_axis(b, _mn.expand_dims(perm, -1), axis=-2)
    y = _lla.triangular_solve(lu, pb, left_side=True, lower=True, unit_diagonal=True)
    return _lla.triangular_solve(lu, y, left_side=True, lower=False)


def solve(a, b):
    """``x`` with ``a @ x = b`` (``jax.numpy.linalg.solve``): ``a[..., m, m]`` and ``b[m]`` (one
    right-hand side: ``x[..., m]``) or ``b[..., m, k]`` (``x[..., m, k]``), batch dims broadcast,
    as JAX >= 0.5. By LU with partial pivoting; a singular ``a`` gives inf/NaN. Raises
    ValueError for rank < 2, mismatched sizes, or the pre-0.5 batched-vector form."""
    a, b = _p._promote_inexact(_p._arr(a), _p._arr(b))
    sa, sb = get_aval(a).shape, get_aval(b).shape
    if len(sa) < 2:
        raise ValueError(f"left hand array must be at least two dimensional; got a.shape={sa}")
    if len(sb) > 1 and len(sa) == len(sb) + 1 and sa[-1] == sb[-1] and sa[-1] != sb[-2]:
        raise ValueError(f"Invalid shapes for solve: {sa}, {sb}. Prior to JAX v0.5.0, this would have been "
                         "treated as a batched 1-dimensional solve. To recover this behavior, use "
                         "solve(a, b[..., None]).squeeze(-1).")
    sig = "(m,m),(m)->(m)" if len(sb) == 1 else "(m,m),(m,n)->(m,n)"
    if sa[-1] != sa[-2] or (len(sb) == 1 and sb[0] != sa[-1]) or (len(sb) > 1 and sb[-2] != sa[-1]):
        other = sa[-2] if sa[-1] == sa[-2] else sa[-1]
        got = sb[-1] if len(sb) == 1 else sb[-2] if sa[-1] == sa[-2] else sa[-2]
        raise ValueError(f"inconsistent size for core dimension 'm': {got} vs {other} on vectorized "
                         f"function with excluded=frozenset() and signature={sig!r}")
    vector = len(sb) == 1
    if vector:
        b = _mn.expand_dims(b, -1)
        sb = get_aval(b).shape
    batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
    a = _p.broadcast_to(a, batch + sa[-2:])
    b = _p.broadcast_to(b, batch + sb[-2:])
    x = _lu_solve(a, b)
    return x[..., 0] if vector else x


def inv(a):
    """The inverses of ``a[..., n, n]`` (``jax.numpy.linalg.inv``): ``solve(a, I)``; a singular
    matrix gives inf/NaN entries. Raises ValueError for a non-square or rank < 2 ``a``."""
    a = _inexact(a)
    shape = get_aval(a).shape
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"Argument to inv must have shape [..., n, n], got {shape}.")
    return solve(a, _p.broadcast_to(_cr.eye(shape[-1], dtype=get_aval(a).dtype), shape))


def cholesky(a, *, upper=False, symmetrize_input=True):
    """The Cholesky factor of a symmetric positive-definite ``a[..., n, n]``
    (``jax.numpy.linalg.cholesky``): lower ``L`` with ``a = L @ L.T``, or ``upper=True`` its
    transpose. Not positive definite: NaN in the factor's triangle (as JAX). Raises
    ShapeError for a non-square or rank < 2 ``a``."""
    a = _inexact(a)
    L = _lla.cholesky(a, symmetrize_input=symmetrize_input)
    return _m.matrix_transpose(L) if upper else L


def qr(a, mode="reduced"):
    """The QR decomposition of ``a[..., m, n]`` (``jax.numpy.linalg.qr``), ``k = min(m, n)``:
    ``mode="reduced"`` ``(Q[..., m, k], R[..., k, n])``, ``"complete"`` ``(Q[..., m, m],
    R[..., m, n])``, ``"r"`` only ``R[..., k, n]``; Householder with LAPACK's signs. Raises
    ValueError for another mode, ShapeError for rank < 2."""
    a = _inexact(a)
    if mode not in ("reduced", "complete", "r"):
        if mode == "raw":
            raise errors.UnsupportedError("qr: mode='raw' is not supported")
        raise ValueError(f"Unsupported QR decomposition mode '{mode}'")
    q, r = _lla.qr(a, full_matrices=mode == "complete")
    return r if mode == "r" else QRResult(q, r)


def _uplo(UPLO):  # noqa: N803 (numpy's name)
    if UPLO not in (None, "L", "U"):
        raise ValueError(f"UPLO must be one of None, 'L', or 'U', got {UPLO}")
    return UPLO != "U"


def eigh(a, UPLO=None, symmetrize_input=True):  # noqa: N803 (numpy's name)
    """Eigenvalues (ascending) and eigenvectors (columns) of a symmetric ``a[..., n, n]``
    (``jax.numpy.linalg.eigh``): ``EighResult(eigenvalues[..., n], eigenvectors[..., n, n])``
    with ``a @ v = v * w``. ``symmetrize_input`` uses ``(a + a.T) / 2``, else the ``UPLO``
    triangle. Eigenvector signs may differ from LAPACK's (any sign is an eigenvector). Raises
    ShapeError for a non-square or rank < 2 ``a``."""
    a = _inexact(a)
    v, w = _lla.eigh(a, lower=_uplo(UPLO), symmetrize_input=symmetrize_input)
    return EighResult(w, v)


def eigvalsh(a, UPLO="L", *, symmetrize_input=True):  # noqa: N803 (numpy's name)
    """The eigenvalues (ascending) of a symmetric ``a[..., n, n]`` (``jax.numpy.linalg.eigvalsh``)."""
    return eigh(a, UPLO, symmetrize_input).eigenvalues


def svd(a, full_matrices=True, compute_uv=True, hermitian=False, subset_by_index=None):
    """The singular value decomposition of ``a[..., m, n]`` (``jax.numpy.linalg.svd``),
    ``k = min(m, n)``: ``SVDResult(U, S[..., k] descending, Vh)`` with ``a = U[..., :k] * S @
    Vh[..., :k, :]``; ``U[..., m, m]``/``Vh[..., n, n]`` with ``full_matrices``, else ``[..., m, k]``
    /``[..., k, n]``; only ``S`` without ``compute_uv``. One-sided Jacobi; singular vectors are
    unique only up to sign. ``hermitian`` is accepted (the general algorithm is used);
    ``subset_by_index`` is not supported. Raises ShapeError for rank < 2."""
    a = _inexact(a)
    out = _lla.svd(a, full_matrices=full_matrices, compute_uv=compute_uv, subset_by_index=subset_by_index)
    return SVDResult(*out) if compute_uv else out


def svdvals(x, /):
    """The singular values ``[..., min(m, n)]``, descending (``jax.numpy.linalg.svdvals``)."""
    return svd(x, compute_uv=False)


def matrix_rank(M, rtol=None, *, hermitian=False, tol=None):  # noqa: N803 (numpy's name)
    """The number of singular values above ``rtol`` (default ``S.max() * max(m, n) * eps``) of
    each matrix ``M[..., m, n]`` (``jax.numpy.linalg.matrix_rank``); ``tol`` is the old name of
    ``rtol``. A rank < 2 ``M`` gives ``any(M != 0)``."""
    if tol is not None:
        if rtol is not None:
            raise ValueError("matrix_rank: only one of tol or rtol may be specified.")
        rtol = tol
    M = _inexact(M)
    if get_aval(M).ndim < 2:
        return _cr.astype(_r.any(_ew.not_equal(M, 0)), np.int32)
    S = svdvals(M)
    dt = get_aval(S).dtype
    if rtol is None:
        rtol = _ew.multiply(_r.amax(S, axis=-1), np.asarray(max(get_aval(M).shape[-2:]) * np.finfo(dt).eps, dt))
    rtol = _mn.expand_dims(_p._arr(rtol), -1)
    return _r.sum(_ew.greater(S, rtol), axis=-1)


def pinv(a, rtol=None, hermitian=False):
    """The Moore-Penrose pseudo-inverse ``[..., n, m]`` of ``a[..., m, n]``
    (``jax.numpy.linalg.pinv``): ``V diag(1/s) U^T`` over the singular values above ``rtol *
    s.max()`` (default ``rtol = 10 * max(m, n) * eps``)."""
    a = _inexact(a)
    *batch, m, n = get_aval(a).shape
    dt = get_aval(a).dtype
    if m == 0 or n == 0:
        return _cr.zeros((*batch, n, m), dt)
    if rtol is None:
        rtol = np.asarray(10.0 * max(m, n) * np.finfo(dt).eps, dt)
    u, s, vh = svd(a, full_matrices=False)
    cutoff = _ew.multiply(_mn.expand_dims(_p._arr(rtol), -1), s[..., 0:1])
    s = _ew.where(_ew.greater(s, cutoff), s, np.asarray(np.inf, dt))
    return _c.matmul(_m.matrix_transpose(vh), _ew.divide(_m.matrix_transpose(u), _mn.expand_dims(s, -1)))


def lstsq(a, b, rcond=None, *, numpy_resid=False):
    """The least-squares solution of ``a[m, n] x = b[m]`` or ``b[m, k]``
    (``jax.numpy.linalg.lstsq``): ``(x, residuals, rank, s)`` via the SVD, singular values
    below ``rcond * s[0]`` (default ``eps * max(m, n)``; a negative ``rcond`` means ``eps``)
    dropped. ``residuals`` is ``||b - a x||**2`` per column; with ``numpy_resid`` (eager only,
    as JAX) empty when ``rank < n`` or ``m <= n``. An empty ``a`` gives the zero solution and no
    singular values, as JAX. Raises ValueError for mismatched leading
    dims, TypeError for other ranks."""
    a, b = _p._promote_inexact(_p._arr(a), _p._arr(b))
    sa, sb = get_aval(a).shape, get_aval(b).shape
    if sa[0] != sb[0]:
        raise ValueError("Leading dimensions of input arrays must match")
    vector = len(sb) == 1
    if vector:
        b = _mn.expand_dims(b, -1)
    if len(sa) != 2:
        raise TypeError(f"{len(sa)}-dimensional array given. Array must be two-dimensional")
    if get_aval(b).ndim != 2:
        raise TypeError(f"{len(sb)}-dimensional array given. Array must be one or two-dimensional")
    m, n = sa
    dt = get_aval(a).dtype
    if m == 0 or n == 0:  # (no singular values, so no s[0]: the zero solution, as JAX)
        s, rank = _cr.zeros((0,), dt), _r.sum(_cr.zeros((0,), bool))
        x = _cr.zeros((n, get_aval(b).shape[1]), dt)
    else:
        if rcond is None:
            rcond = np.asarray(np.finfo(dt).eps * max(m, n), dt)
        else:
            rcond = _ew.where(_ew.less(rcond, 0), np.asarray(np.finfo(dt).eps, dt), _cr.astype(rcond, dt))
        u, s, vh = svd(a, full_matrices=False)
        mask = _ew.logical_and(_ew.greater(s, 0), _ew.greater_equal(s, _ew.multiply(rcond, s[0])))
        rank = _r.sum(mask)
        safe = _ew.where(mask, s, np.asarray(1, dt))
        s_inv = _mn.expand_dims(_ew.where(mask, _ew.divide(np.asarray(1, dt), safe), np.asarray(0, dt)), -1)
        uTb = _c.matmul(_m.matrix_transpose(u), b)
        x = _c.matmul(_m.matrix_transpose(vh), _ew.multiply(s_inv, uTb))
    if numpy_resid and (int(rank) < n or m <= n):
        resid = _cr.zeros((0,), dt)
    else:
        resid = _ew.square(norm(_ew.subtract(b, _c.matmul(a, x)), axis=0))
    if vector:
        x = _mn.reshape(x, (-1,))
    return x, resid, rank, s


from minixla.numpy.linalg_tensor import *  # noqa: E402,F401,F403 (multi_dot, cond, tensorinv, tensorsolve)

# Every public function is an API boundary: an error escaping it names the function, the
# shapes it was given and the user's line (``errors.api_boundary``). Keep this at the end.
errors.wrap_public_functions(globals())
