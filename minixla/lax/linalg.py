"""``minixla.lax.linalg`` (``jax.lax.linalg``): matrix decompositions written as compositions of
minixla's own primitives and control flow, so every backend (eager, ``backend="llvm"``, the
hand-off) and every transformation (jvp, grad, vmap) gets them with no new primitive.

- ``lu``: right-looking LU with partial pivoting (LAPACK ``getrf``'s choice: the first row of
  largest magnitude), one ``fori_loop`` step per column;
- ``triangular_solve``: forward/back substitution, one row a step, in JAX's four cases
  (``left_side``, ``lower``, ``transpose_a``, ``unit_diagonal``);
- ``cholesky``: column by column; a matrix that is not positive definite gives NaN in its
  lower triangle (as JAX, which replaces LAPACK ``potrf``'s failure by NaN);
- ``qr``: Householder reflections with LAPACK ``geqrf``'s signs (``R[j, j] = -sign(a) * norm``),
  ``Q`` accumulated as ``H_0 H_1 ... H_{k-1}``;
- ``eigh``: cyclic Jacobi in Brent and Luk's parallel order (``n/2`` disjoint rotations a
  step, each step two small matmuls) in a ``while_loop`` until the off-diagonal mass is below
  ``eps * ||A||``; eigenvalues ascending (as JAX), eigenvector signs may differ from LAPACK's.
  Its derivative is a ``custom_jvp`` with the standard formula (``dw = diag(V^T dA V)``,
  ``dV = V (F * (V^T dA V))``, ``F[i, j] = 1 / (w[j] - w[i])``: infinite for repeated
  eigenvalues, as JAX's);
- ``svd``: one-sided (Hestenes) Jacobi on the columns, in the same parallel order, singular
  values descending; derivative by JAX's ``svd`` formula in a ``custom_jvp``.

All accept leading batch dimensions natively (every step is a masked whole-matrix operation,
so a pivot or rotation may differ per batch element). Values agree with JAX's LAPACK to
rounding, scaled by the condition number, not bit for bit. The derivatives of ``lu``,
``triangular_solve``, ``cholesky`` and ``qr`` are those of the algorithm itself (the loops
differentiate; the pivot choice is an integer and carries no gradient).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from minixla.core import errors
from minixla.core.avals import get_aval


def _mnp():
    from minixla import numpy as mnp  # (minixla.numpy imports this module: bind on use)
    return mnp


def _lax():
    from minixla import lax
    return lax


def _tied_to(x, *outs):
    """``outs`` as though computed from ``x``: JAX's linalg primitives give every output batched
    like the operand under vmap, also for an empty matrix, whose results minixla writes as
    constants (a ``select_n`` on a predicate read from ``x``, false; empty ``x``: no cost)."""
    from minixla.core.tracing import Tracer
    if not isinstance(x, Tracer):
        return outs
    mnp, lax = _mnp(), _lax()
    pred = mnp.any(mnp.not_equal(x, x))
    return tuple(lax.select_n(pred, o, o) for o in outs)


def _operand(x, name, square=False, inexact=True):
    mnp = _mnp()
    x = mnp.asarray(x)
    aval = get_aval(x)
    if aval.ndim < 2:
        raise errors.ShapeError(f"Input 0 to {name} must have rank at least 2, but got shape={aval.shape}")
    if square and aval.shape[-1] != aval.shape[-2]:
        raise errors.ShapeError(f"The input to {name} must be a square matrix (or a batch of them), "
                                f"got shape {aval.shape}")
    if inexact and aval.dtype.kind not in "fc" and aval.dtype.name != "bfloat16":
        raise errors.DTypeError(f"{name} needs a floating-point operand, got {aval.dtype.name}")
    if aval.dtype.kind == "c":
        raise errors.UnsupportedError(f"{name}: complex matrices are not supported")
    return x


def _T(x):
    return _mnp().swapaxes(x, -1, -2)


def _idx(n):
    return _mnp().arange(n, dtype=np.int32)


def _col(a, j):
    """Column ``j`` (a traced scalar) of every matrix of ``a``: ``[..., m]``, exactly (a masked sum
    adds zeros only)."""
    mnp = _mnp()
    n = get_aval(a).shape[-1]
    return mnp.sum(mnp.where(_idx(n) == j, a, mnp.zeros((), a.dtype)), axis=-1)


def _row(a, i):
    """Row ``i`` (a traced scalar, or a per-matrix ``[...]`` array) of every matrix: ``[..., n]``."""
    mnp = _mnp()
    m = get_aval(a).shape[-2]
    i = mnp.asarray(i)
    mask = _idx(m) == (i[..., None] if get_aval(i).ndim else i)
    return mnp.sum(mnp.where(mask[..., :, None], a, mnp.zeros((), a.dtype)), axis=-2)


def _at(v, j):
    """``v[..., j]`` for a traced scalar ``j``."""
    mnp = _mnp()
    n = get_aval(v).shape[-1]
    return mnp.sum(mnp.where(_idx(n) == j, v, mnp.zeros((), v.dtype)), axis=-1, dtype=v.dtype)


# ---------------------------------------------------------------------------------------
# LU

def lu(x):
    """LU decomposition with partial pivoting (``jax.lax.linalg.lu``): ``x[..., m, n]`` ->
    ``[lu, pivots, permutation]`` (a list, as JAX's), with ``lu`` holding ``L`` (unit diagonal, below) and ``U``
    (on and above the diagonal), ``pivots[..., min(m, n)]`` int32 (row ``i`` was swapped with
    ``pivots[i]``, LAPACK's convention, 0-based) and ``permutation[..., m]`` int32 with
    ``x[perm] = L @ U``. A zero pivot is left in place (a singular ``U``, as LAPACK); floating
    dtypes only. Raises ShapeError for rank < 2."""
    mnp, lax = _mnp(), _lax()
    x = _operand(x, "lu")
    *batch, m, n = get_aval(x).shape
    k = min(m, n)
    rows, cols = _idx(m), _idx(n)
    dt = get_aval(x).dtype
    zero = mnp.zeros((), dt)

    def step(j, carry):
        a, perm, piv = carry
        mag = mnp.where(rows >= j, mnp.abs(_col(a, j)), mnp.asarray(-1, dt))
        p = mnp.argmax(mag, axis=-1).astype(np.int32)  # (an integer: no gradient flows through it)
        is_j, is_p = (rows == j), (rows == p[..., None])
        row_j, row_p = _row(a, j), _row(a, p)
        a = mnp.where(is_j[..., :, None], row_p[..., None, :],
                      mnp.where(is_p[..., :, None], row_j[..., None, :], a))
        perm_j = mnp.sum(mnp.where(is_j, perm, 0), axis=-1, dtype=np.int32)
        perm_p = mnp.sum(mnp.where(is_p, perm, 0), axis=-1, dtype=np.int32)
        perm = mnp.where(is_j, perm_p[..., None], mnp.where(is_p, perm_j[..., None], perm))
        piv = mnp.where(_idx(k) == j, p[..., None], piv)
        pivot = _at(row_p, j)
        # (a zero pivot means the column below is zero too: leave it, as LAPACK, no 0/0)
        safe = mnp.where(pivot == 0, mnp.ones((), dt), pivot)
        below = rows > j
        l = mnp.where(below, _col(a, j) / safe[..., None], zero)
        right = cols > j
        a = mnp.where(below[:, None] & right[None, :], a - l[..., :, None] * row_p[..., None, :], a)
        a = mnp.where(below[:, None] & (cols == j)[None, :], l[..., :, None], a)
        return a, perm, piv

    perm0 = mnp.broadcast_to(rows, (*batch, m))
    piv0 = mnp.zeros((*batch, k), np.int32)
    if k == 0:  # (nothing to eliminate; the step cannot even be traced: argmax of no rows)
        return [x, *_tied_to(x, piv0, perm0)]
    a, perm, piv = lax.fori_loop(0, k, step, (x, perm0, piv0))
    return [a, piv, perm]  # (a list, as jax.lax.linalg.lu's)


def lu_pivots_to_permutation(pivots, permutation_size: int):
    """The permutation ``[..., permutation_size]`` int32 that applies LAPACK-style row swaps
    ``pivots[..., k]`` (``jax.lax.linalg.lu_pivots_to_permutation``) in order."""
    mnp, lax = _mnp(), _lax()
    pivots = mnp.asarray(pivots)
    *batch, k = get_aval(pivots).shape
    rows = _idx(permutation_size)

    def step(i, perm):
        p = _at(pivots, i)
        is_i, is_p = rows == i, rows == p[..., None]
        pi = mnp.sum(mnp.where(is_i, perm, 0), axis=-1, dtype=np.int32)
        pp = mnp.sum(mnp.where(is_p, perm, 0), axis=-1, dtype=np.int32)
        return mnp.where(is_i, pp[..., None], mnp.where(is_p, pi[..., None], perm))
    return lax.fori_loop(0, k, step, mnp.broadcast_to(rows, (*batch, permutation_size)))


# ---------------------------------------------------------------------------------------
# triangular_solve

def _solve_lower_left(a, b, unit_diagonal):
    """``L x = b`` for the lower triangle of ``a[..., m, m]`` and ``b[..., m, n]``: forward
    substitution, right-looking (row ``k`` of ``x`` is final, then removed from the rows below)."""
    mnp, lax = _mnp(), _lax()
    m = get_aval(a).shape[-1]
    rows = _idx(m)

    def step(k, x):
        xk = _row(x, k)
        if not unit_diagonal:
            xk = xk / _at(_row(a, k), k)[..., None]
        lk = _col(a, k)
        x = mnp.where((rows > k)[:, None], x - lk[..., :, None] * xk[..., None, :], x)
        return mnp.where((rows == k)[:, None], xk[..., None, :], x)
    return lax.fori_loop(0, m, step, b)


def triangular_solve(a, b, left_side: bool = False, lower: bool = False, transpose_a: bool = False,
                     conjugate_a: bool = False, unit_diagonal: bool = False):
    """Solve ``op(a) @ x = b`` (``left_side``) or ``x @ op(a) = b`` for ``x``, ``op(a)`` being
    ``a`` or ``a.T`` (``transpose_a``), using only ``a``'s lower (``lower``) or upper triangle
    and, with ``unit_diagonal``, ones on its diagonal (``jax.lax.linalg.triangular_solve``).
    ``a[..., m, m]``, ``b[..., m, n]`` (left) or ``[..., n, m]`` (right), same batch dims and
    floating dtype; a zero on the diagonal gives inf/NaN as LAPACK's ``trsm``. Raises ShapeError
    for a non-square ``a`` or mismatched ``b``."""
    mnp = _mnp()
    a = _operand(a, "triangular_solve")
    b = _operand(b, "triangular_solve")
    sa, sb = get_aval(a).shape, get_aval(b).shape
    if sa[-1] != sa[-2]:
        raise errors.ShapeError(f"The first input to triangular_solve must be a square matrix. Got shape {sa}.")
    m = sa[-1]
    common = sb[-2] if left_side else sb[-1]
    if common != m or sa[:-2] != sb[:-2]:
        raise errors.ShapeError(f"Incompatible shapes for arguments to triangular_solve: {sa} and {sb}.")
    if get_aval(a).dtype != get_aval(b).dtype:
        raise errors.DTypeError(f"triangular_solve requires operands of the same dtype, got "
                                f"{get_aval(a).dtype.name} and {get_aval(b).dtype.name}")
    if not left_side:  # x op(a) = b  <=>  op(a)^T x^T = b^T
        return _T(triangular_solve(a, _T(b), left_side=True, lower=lower, transpose_a=not transpose_a,
                                   unit_diagonal=unit_diagonal))
    if transpose_a:
        a, lower = _T(a), not lower
    rows = _idx(m)
    keep = (rows[:, None] >= rows[None, :]) if lower else (rows[:, None] <= rows[None, :])
    a = mnp.where(keep, a, mnp.zeros((), a.dtype))
    if lower:
        return _solve_lower_left(a, b, unit_diagonal)
    # an upper triangle read backwards is a lower one: J U J (J x) = J b, J the reversal
    flip = mnp.flip(mnp.flip(a, -1), -2)
    return mnp.flip(_solve_lower_left(flip, mnp.flip(b, -2), unit_diagonal), -2)


# ---------------------------------------------------------------------------------------
# Cholesky

def _symmetrize(x):
    return (x + _T(x)) / np.asarray(2, get_aval(x).dtype)


def cholesky(x, *, symmetrize_input: bool = True):
    """The lower Cholesky factor ``L`` of a symmetric positive-definite ``x[..., n, n]``
    (``jax.lax.linalg.cholesky``): ``x = L @ L.T``, zeros above the diagonal. With
    ``symmetrize_input`` it factors ``(x + x.T) / 2``, else reads the lower triangle. A matrix
    that is not positive definite (a non-positive or NaN pivot) gives NaN on and below the
    diagonal, as JAX. Raises ShapeError for rank < 2 or a non-square ``x``."""
    mnp, lax = _mnp(), _lax()
    x = _operand(x, "cholesky", square=True)
    if symmetrize_input:
        x = _symmetrize(x)
    *batch, n, _ = get_aval(x).shape
    dt = get_aval(x).dtype
    rows = _idx(n)
    zero = mnp.zeros((), dt)

    def step(j, carry):
        l, ok = carry
        # column j of A minus what the finished columns contribute: A[:, j] - L[:, :j] L[j, :j]^T
        v = _col(x, j) - mnp.matmul(l, _row(l, j)[..., :, None])[..., 0]
        d = _at(v, j)
        ok = ok & (d > 0)
        sd = mnp.sqrt(mnp.where(d > 0, d, mnp.ones((), dt)))
        col = mnp.where(rows == j, sd[..., None], mnp.where(rows > j, v / sd[..., None], zero))
        l = mnp.where((rows == j)[None, :], col[..., :, None], l)
        return l, ok

    l, ok = lax.fori_loop(0, n, step, (mnp.zeros_like(x), mnp.ones(tuple(batch), bool)))
    lower = rows[:, None] >= rows[None, :]
    return mnp.where(ok[..., None, None], l, mnp.where(lower, mnp.asarray(np.nan, dt), zero))


# ---------------------------------------------------------------------------------------
# QR

def _householder_qr(x, full_matrices):
    mnp, lax = _mnp(), _lax()
    *batch, m, n = get_aval(x).shape
    k = min(m, n)
    dt = get_aval(x).dtype
    rows, cols = _idx(m), _idx(n)
    zero, one = mnp.zeros((), dt), mnp.ones((), dt)

    def step(j, carry):
        r, q = carry
        c = _col(r, j)
        alpha = _at(c, j)
        rest = mnp.where(rows > j, c, zero)
        xnorm2 = mnp.sum(rest * rest, axis=-1)
        flat = xnorm2 == 0  # H = I (tau = 0), as LAPACK's dlarfg
        # (the square roots only of what is used, so the unused branch has a finite derivative)
        norm = mnp.sqrt(mnp.where(flat, one, alpha * alpha + xnorm2))
        beta = mnp.where(alpha >= 0, -norm, norm)
        tau = mnp.where(flat, zero, (beta - alpha) / beta)
        scale = mnp.where(flat, one, alpha - beta)
        v = mnp.where(rows == j, one, mnp.where(rows > j, c / scale[..., None], zero))
        w = mnp.matmul(v[..., None, :], r)[..., 0, :]
        r = r - tau[..., None, None] * v[..., :, None] * w[..., None, :]
        newc = mnp.where(rows == j, mnp.where(flat, alpha, beta)[..., None], mnp.where(rows > j, zero, c))
        r = mnp.where((cols == j)[None, :], newc[..., :, None], r)
        qv = mnp.matmul(q, v[..., :, None])[..., 0]
        q = q - tau[..., None, None] * qv[..., :, None] * v[..., None, :]
        return r, q

    q0 = mnp.broadcast_to(mnp.eye(m, dtype=dt), (*batch, m, m))
    r, q = lax.fori_loop(0, k, step, (x, q0))
    if not full_matrices and m > n:
        q, r = q[..., :, :k], r[..., :k, :]
    return q, r


def qr(x, *, pivoting: bool = False, full_matrices: bool = True, use_magma=None):
    """QR decomposition by Householder reflections (``jax.lax.linalg.qr``): ``x[..., m, n]`` ->
    ``(q, r)`` with ``q`` orthogonal (``[..., m, m]``, or ``[..., m, min(m, n)]`` without
    ``full_matrices``), ``r`` upper triangular and ``x = q @ r``; signs as LAPACK's ``geqrf``
    (so as JAX's, to rounding). ``pivoting`` (column-pivoted QR) is not supported
    (UnsupportedError); ``use_magma`` is ignored. Raises ShapeError for rank < 2."""
    if pivoting:
        raise errors.UnsupportedError("qr: pivoting=True (column-pivoted QR) is not supported")
    x = _operand(x, "qr")
    return _householder_qr(x, full_matrices)


# ---------------------------------------------------------------------------------------
# Jacobi: eigh and svd

def _tournament(n):
    """Brent and Luk's round-robin order for an even ``n``: ``n - 1`` rounds, each pairing every
    index with one other, so every pair meets once a sweep. Returns ``(p, q)`` ``[n-1, n/2]``."""
    players = list(range(n))
    ps, qs = [], []
    for _ in range(n - 1):
        half = n // 2
        pairs = [tuple(sorted((players[i], players[n - 1 - i]))) for i in range(half)]
        ps.append([p for p, _ in pairs])
        qs.append([q for _, q in pairs])
        players = [players[0], players[-1]] + players[1:-1]
    return np.asarray(ps), np.asarray(qs)


def _one_hot_tables(n, dtype):
    p, q = _tournament(n)
    eye = np.eye(n, dtype=dtype)
    return eye[p], eye[q]  # [n-1, n/2, n]: row r of round s selects index p[s, r]


def _rotation(ep, eq, c, s):
    """The ``[..., n, n]`` matrix that is the identity except ``c, s; -s, c`` at each round's
    ``(p, q)`` block: ``ep``/``eq`` ``[n/2, n]`` one-hot, ``c``/``s`` ``[..., n/2]``."""
    mnp = _mnp()
    epT, eqT = mnp.swapaxes(ep, -1, -2), mnp.swapaxes(eq, -1, -2)
    return (mnp.matmul(epT * c[..., None, :], ep) + mnp.matmul(eqT * c[..., None, :], eq)
            + mnp.matmul(epT * s[..., None, :], eq) - mnp.matmul(eqT * s[..., None, :], ep))


def _jacobi_angle(app, aqq, apq):
    """``(c, s)`` of the rotation that zeroes ``apq`` (Golub and Van Loan's sym.schur2); the
    identity where ``apq`` is already 0."""
    mnp = _mnp()
    dt = get_aval(app).dtype
    one = mnp.ones((), dt)
    done = apq == 0
    tau = (aqq - app) / (2 * mnp.where(done, one, apq))
    t = mnp.where(tau >= 0, one, -one) / (mnp.abs(tau) + mnp.sqrt(one + tau * tau))
    t = mnp.where(done | ~mnp.isfinite(tau), mnp.zeros((), dt), t)
    c = one / mnp.sqrt(one + t * t)
    return c, t * c


_MAX_SWEEPS = 40


def _pad_even(a, n):
    mnp = _mnp()
    if n % 2 == 0:
        return a
    nd = get_aval(a).ndim
    return mnp.pad(a, [(0, 0)] * (nd - 2) + [(0, 1), (0, 1)])


def _eigh_jacobi(a):
    """Eigenvalues (ascending) and eigenvectors of the symmetric ``a[..., n, n]``."""
    mnp, lax = _mnp(), _lax()
    *batch, n, _ = get_aval(a).shape
    dt = get_aval(a).dtype
    if n == 0 or 0 in batch:  # (nothing to rotate; the sweeps' convergence test reduces over the batch)
        return mnp.zeros((*batch, n), dt), mnp.zeros((*batch, n, n), dt)
    big = n + n % 2
    # (an odd size gets a zero row and column: its rotations are all the identity, so the padded
    # coordinate never mixes and is cut off at the end)
    A = _pad_even(a, n)
    ep_tab, eq_tab = _one_hot_tables(big, dt)
    eps = np.finfo(dt).eps
    off_mask = 1 - np.eye(big, dtype=dt)

    def off(A):
        return mnp.sqrt(mnp.max(mnp.sum(A * A * off_mask, axis=(-2, -1))))

    scale = mnp.sqrt(mnp.max(mnp.sum(A * A, axis=(-2, -1))))

    def one_round(s, carry):
        A, V = carry
        ep = lax.dynamic_index_in_dim(ep_tab, s, 0, keepdims=False)
        eq = lax.dynamic_index_in_dim(eq_tab, s, 0, keepdims=False)
        Ap = mnp.matmul(ep, A)  # the rows p of every pair
        app = mnp.sum(Ap * ep, axis=-1)
        apq = mnp.sum(Ap * eq, axis=-1)
        aqq = mnp.sum(mnp.matmul(eq, A) * eq, axis=-1)
        c, sn = _jacobi_angle(app, aqq, apq)
        G = _rotation(ep, eq, c, sn)
        A = mnp.matmul(mnp.matmul(_T(G), A), G)
        return _symmetrize(A), mnp.matmul(V, G)

    def sweep(carry):
        A, V, i = carry
        A, V = lax.fori_loop(0, big - 1, one_round, (A, V))
        return A, V, i + 1

    def more(carry):
        A, _, i = carry
        return (off(A) > eps * scale) & (i < _MAX_SWEEPS)

    V0 = mnp.broadcast_to(mnp.eye(big, dtype=dt), (*batch, big, big))
    A, V, _ = lax.while_loop(more, sweep, (A, V0, np.int32(0)))
    w = mnp.diagonal(A, axis1=-2, axis2=-1)[..., :n]
    V = V[..., :n, :n]
    order = mnp.argsort(w, axis=-1)
    w = mnp.take_along_axis(w, order, axis=-1)
    V = mnp.take_along_axis(V, order[..., None, :], axis=-1)
    return w, V


_eigh_fn = None


def _eigh_custom():
    global _eigh_fn
    if _eigh_fn is not None:
        return _eigh_fn
    from minixla.interpreters.custom_derivatives import custom_jvp
    mnp = _mnp()
    f = custom_jvp(_eigh_jacobi)

    @f.defjvp
    def _jvp(primals, tangents):
        a, = primals
        da, = tangents
        w, v = f(a)
        n = get_aval(a).shape[-1]
        eye = mnp.eye(n, dtype=get_aval(a).dtype)
        # F[i, j] = 1 / (w[j] - w[i]) off the diagonal, 0 on it
        F = mnp.reciprocal(eye + w[..., None, :] - w[..., :, None]) - eye
        vdv = mnp.matmul(mnp.matmul(_T(v), da), v)
        return (w, v), (mnp.diagonal(vdv, axis1=-2, axis2=-1), mnp.matmul(v, F * vdv))
    _eigh_fn = f
    return f


def eigh(x, *, lower: bool = True, symmetrize_input: bool = True, sort_eigenvalues: bool = True,
         subset_by_index=None):
    """Eigen-decomposition of a symmetric ``x[..., n, n]`` (``jax.lax.linalg.eigh``): returns
    ``(v, w)`` -- eigenvectors as columns ``v[..., n, n]`` and eigenvalues ``w[..., n]``
    ascending, ``x @ v = v * w``. With ``symmetrize_input`` it decomposes ``(x + x.T) / 2``;
    otherwise the ``lower`` (or upper) triangle. Eigenvectors are unique only up to sign (and to
    a rotation within a repeated eigenvalue): they may differ from LAPACK's by those.
    ``sort_eigenvalues=False`` and ``subset_by_index`` are not supported (UnsupportedError).
    Raises ShapeError for rank < 2 or a non-square ``x``."""
    mnp = _mnp()
    if not sort_eigenvalues or subset_by_index is not None:
        raise errors.UnsupportedError("eigh: sort_eigenvalues=False and subset_by_index are not supported")
    x = _operand(x, "eigh", square=True)
    if symmetrize_input:
        x = _symmetrize(x)
    else:
        n = get_aval(x).shape[-1]
        tri = mnp.tril(x) if lower else mnp.triu(x)
        x = tri + _T(tri) - x * mnp.eye(n, dtype=get_aval(x).dtype)
    w, v = _eigh_custom()(x)
    return v, w


class SvdResult(NamedTuple):
    u: object
    s: object
    vh: object


def _svd_jacobi(a):
    """One-sided Jacobi SVD of ``a[..., m, n]`` with ``m >= n``: ``(u [..., m, n], s [..., n]
    descending, v [..., n, n])``."""
    mnp, lax = _mnp(), _lax()
    *batch, m, n = get_aval(a).shape
    dt = get_aval(a).dtype
    if 0 in batch:  # (as eigh's: no sweeps over an empty batch)
        return mnp.zeros((*batch, m, n), dt), mnp.zeros((*batch, n), dt), mnp.zeros((*batch, n, n), dt)
    big = n + n % 2
    U = a if n % 2 == 0 else mnp.pad(a, [(0, 0)] * len(batch) + [(0, 0), (0, 1)])
    ep_tab, eq_tab = _one_hot_tables(big, dt)
    eps = np.finfo(dt).eps

    def one_round(s, carry):
        U, V, worst = carry
        ep = lax.dynamic_index_in_dim(ep_tab, s, 0, keepdims=False)
        eq = lax.dynamic_index_in_dim(eq_tab, s, 0, keepdims=False)
        Up, Uq = mnp.matmul(U, _T(ep)), mnp.matmul(U, _T(eq))  # columns p and q: [..., m, n/2]
        app = mnp.sum(Up * Up, axis=-2)
        aqq = mnp.sum(Uq * Uq, axis=-2)
        apq = mnp.sum(Up * Uq, axis=-2)
        # (columns already orthogonal to working precision are left alone: convergence)
        rel = mnp.abs(apq) / mnp.sqrt(mnp.where((app > 0) & (aqq > 0), app * aqq, mnp.ones((), dt)))
        rel = mnp.where((app > 0) & (aqq > 0), rel, mnp.zeros((), dt))
        worst = mnp.maximum(worst, mnp.max(rel))
        apq = mnp.where(rel > eps, apq, mnp.zeros((), dt))
        c, sn = _jacobi_angle(app, aqq, apq)
        G = _rotation(ep, eq, c, sn)
        return mnp.matmul(U, G), mnp.matmul(V, G), worst

    def sweep(carry):
        U, V, _, i = carry
        U, V, worst = lax.fori_loop(0, big - 1, one_round, (U, V, mnp.zeros((), dt)))
        return U, V, worst, i + 1

    def more(carry):
        _, _, worst, i = carry
        return (worst > eps) & (i < _MAX_SWEEPS)

    V0 = mnp.broadcast_to(mnp.eye(big, dtype=dt), (*batch, big, big))
    U, V, _, _ = lax.while_loop(more, sweep, (U, V0, mnp.ones((), dt), np.int32(0)))
    U, V = U[..., :, :n], V[..., :n, :n]
    s = mnp.sqrt(mnp.sum(U * U, axis=-2))
    order = mnp.argsort(-s, axis=-1)
    s = mnp.take_along_axis(s, order, axis=-1)
    U = mnp.take_along_axis(U, order[..., None, :], axis=-1)
    V = mnp.take_along_axis(V, order[..., None, :], axis=-1)
    U = U / mnp.where(s > 0, s, mnp.ones((), dt))[..., None, :]
    # (a zero singular value leaves a zero column: any unit vector orthogonal to the others
    # will do, and a QR of U has them in the same places)
    fill = _householder_qr(U, False)[0]
    U = mnp.where((s > 0)[..., None, :], U, fill)
    return U, s, V


_svd_fn = None


def _svd_custom():
    global _svd_fn
    if _svd_fn is not None:
        return _svd_fn
    from minixla.interpreters.custom_derivatives import custom_jvp
    mnp = _mnp()

    def thin(a):
        m, n = get_aval(a).shape[-2:]
        if m >= n:
            return _svd_jacobi(a)
        u, s, v = _svd_jacobi(_T(a))
        return v, s, u
    f = custom_jvp(thin)

    @f.defjvp
    def _jvp(primals, tangents):
        # the thin-SVD derivative (as JAX's svd_jvp_rule, real case): with dP = U^T dA V,
        # ds = diag(dP); dU, dV from the antisymmetric parts scaled by F = 1 / (s_j^2 - s_i^2)
        a, = primals
        da, = tangents
        u, s, v = f(a)
        k = get_aval(s).shape[-1]
        m, n = get_aval(a).shape[-2:]
        dt = get_aval(a).dtype
        eye = mnp.eye(k, dtype=dt)
        dP = mnp.matmul(mnp.matmul(_T(u), da), v)
        ds = mnp.diagonal(dP, axis1=-2, axis2=-1)
        s2 = s * s
        F = mnp.reciprocal(eye + s2[..., None, :] - s2[..., :, None]) - eye
        s_inv = mnp.reciprocal(mnp.where(s == 0, mnp.ones((), dt), s))
        s_inv = mnp.where(s == 0, mnp.zeros((), dt), s_inv)
        dPs = dP * s[..., None, :]
        sdP = s[..., :, None] * dP
        du = mnp.matmul(u, F * (dPs + _T(dPs)))  # U (F o (dP S + S dP^T))
        dv = mnp.matmul(v, F * (sdP + _T(sdP)))  # V (F o (S dP + dP^T S))
        if m > n:
            proj = mnp.eye(m, dtype=dt) - mnp.matmul(u, _T(u))
            du = du + mnp.matmul(proj, mnp.matmul(da, v)) * s_inv[..., None, :]
        if n > m:
            proj = mnp.eye(n, dtype=dt) - mnp.matmul(v, _T(v))
            dv = dv + mnp.matmul(proj, mnp.matmul(_T(da), u)) * s_inv[..., None, :]
        return (u, s, v), (du, ds, dv)
    _svd_fn = f
    return f


def svd(x, *, full_matrices: bool = True, compute_uv: bool = True, subset_by_index=None,
        algorithm=None):
    """Singular value decomposition (``jax.lax.linalg.svd``): ``x[..., m, n]`` -> ``s[..., k]``
    (``k = min(m, n)``, descending) or, with ``compute_uv``, ``(u, s, vh)`` with
    ``x = u[..., :k] * s @ vh[..., :k, :]``, ``u[..., m, m]``/``vh[..., n, n]`` with
    ``full_matrices`` (else ``[..., m, k]``/``[..., k, n]``). One-sided Jacobi. Singular vectors
    are unique only up to sign (and the completion of ``u``/``vh`` beyond ``k`` with
    ``full_matrices`` to a rotation). An empty ``x`` (``k = 0``) gives no singular values and
    identities (``full_matrices``) or empty factors, as JAX. ``subset_by_index`` and ``algorithm`` are not supported
    (UnsupportedError). Raises ShapeError for rank < 2."""
    mnp = _mnp()
    if subset_by_index is not None or algorithm is not None:
        raise errors.UnsupportedError("svd: subset_by_index and algorithm are not supported")
    x = _operand(x, "svd")
    *batch, m, n = get_aval(x).shape
    if m == 0 or n == 0:
        # no singular values; the full factors are identities (as LAPACK's gesdd), the thin ones empty
        dt = get_aval(x).dtype
        s, = _tied_to(x, mnp.zeros((*batch, 0), dt))
        if not compute_uv:
            return s
        if full_matrices:
            return (*_tied_to(x, mnp.broadcast_to(mnp.eye(m, dtype=dt), (*batch, m, m))), s,
                    *_tied_to(x, mnp.broadcast_to(mnp.eye(n, dtype=dt), (*batch, n, n))))
        return (*_tied_to(x, mnp.zeros((*batch, m, 0), dt)), s, *_tied_to(x, mnp.zeros((*batch, 0, n), dt)))
    u, s, v = _svd_custom()(x)
    if not compute_uv:
        return s
    if full_matrices and m != n:
        # the rest of an orthonormal basis: the last columns of a complete QR of the thin factor
        if m > n:
            u = mnp.concatenate([u, _householder_qr(u, True)[0][..., :, n:]], axis=-1)
        else:
            v = mnp.concatenate([v, _householder_qr(v, True)[0][..., :, m:]], axis=-1)
    return u, s, _T(v)


__all__ = ["lu", "lu_pivots_to_permutation", "triangular_solve", "cholesky", "qr", "eigh", "svd"]

errors.wrap_public_functions(globals())
