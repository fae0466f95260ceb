"""Import rules for JAX's linear-algebra primitives (``jax.lax.linalg``'s ``lu_p``,
``lu_pivots_to_permutation_p``, ``triangular_solve_p``, ``cholesky_p``, ``qr_p``, ``eigh_p``,
``svd_p``), ``custom_linear_solve`` (what ``jnp.linalg.solve``/``inv`` trace to) and
``platform_index`` (``lax.platform_dependent``, in ``jnp.linalg.slogdet``).

Each JAX primitive becomes the matching ``minixla.lax.linalg`` composition (minixla's own
loops, so every minixla backend and transformation handles it). Output orders follow JAX's
primitives, which differ from the wrapper functions: ``eigh_p`` gives ``(v, w)``, ``svd_p``
gives ``(s, u, vt)``. Values agree with JAX's LAPACK to rounding (eigen- and singular vectors up
to sign), as ``minixla.lax.linalg`` documents.

``custom_linear_solve`` is imported as its ``solve`` jaxpr, plus a term that is exactly zero in
value (for finite solutions) and carries the derivative of a linear solve,
``dx = A^-1 (db - dA x)``: JAX differentiates it implicitly through ``matvec``, and
differentiating ``solve`` itself would miss ``A``'s dependence (its LU is a stopped constant).
"""
from __future__ import annotations

from minixla import lax
from minixla import numpy as mnp
from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.frontends.jax_control_flow import _body
from minixla.frontends.jax_importer import UNSUPPORTED, import_rules
from minixla.lax import linalg as la


def _unsupported(name, what):
    raise errors.UnsupportedError(f"{name}: {what} is not supported by minixla.lax.linalg")


def _lu(x):
    return list(la.lu(x))


def _triangular_solve(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    return la.triangular_solve(a, b, left_side=left_side, lower=lower, transpose_a=transpose_a,
                               conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)


def _cholesky(x, **_):
    # (cholesky_p reads the lower triangle; jax.lax.linalg.cholesky symmetrized before binding it)
    return la.cholesky(x, symmetrize_input=False)


def _qr(x, *, pivoting, full_matrices, use_magma=None):
    if pivoting:
        _unsupported("qr", "pivoting=True")
    return list(la.qr(x, full_matrices=full_matrices))


def _eigh(x, *, lower, sort_eigenvalues, subset_by_index, algorithm=None):
    if subset_by_index is not None and tuple(subset_by_index) != (0, get_aval(x).shape[-1]):
        _unsupported("eigh", "subset_by_index")
    v, w = la.eigh(x, lower=lower, symmetrize_input=False, sort_eigenvalues=True)
    return [v, w]


def _svd(x, *, full_matrices, compute_uv, subset_by_index, algorithm=None):
    if subset_by_index is not None and tuple(subset_by_index) != (0, min(get_aval(x).shape[-2:])):
        _unsupported("svd", "subset_by_index")
    if not compute_uv:
        return [la.svd(x, compute_uv=False)]
    u, s, vh = la.svd(x, full_matrices=full_matrices)
    return [s, u, vh]


def _lu_pivots_to_permutation(pivots, *, permutation_size):
    return la.lu_pivots_to_permutation(pivots, permutation_size)


def _custom_linear_solve(*args, const_lengths, jaxprs):
    # JAX's operands: the consts of matvec, vecmat, solve, transpose_solve, then b's leaves;
    # minixla's lax.custom_linear_solve on the bodies (vecmat: its own transpose of matvec)
    n_mv, n_vm, n_s, n_ts = (const_lengths.matvec, const_lengths.vecmat, const_lengths.solve,
                             const_lengths.transpose_solve)
    n = n_mv + n_vm + n_s + n_ts
    consts, b = list(args[:n]), list(args[n:])
    matvec = _body(jaxprs.matvec, consts[:n_mv])
    solve = _body(jaxprs.solve, consts[n_mv + n_vm:n_mv + n_vm + n_s])
    tsolve = None if jaxprs.transpose_solve is None else _body(jaxprs.transpose_solve, consts[n - n_ts:])
    return lax.custom_linear_solve(lambda x: list(matvec(*x)), b, lambda _, r: list(solve(*r)),
                                   None if tsolve is None else (lambda _, r: list(tsolve(*r))))


def _platform_index(*_, platforms, **__):
    # (``lax.platform_dependent``, as jnp.linalg.slogdet uses it: minixla compiles for the CPU
    # either way, so the branch for "cpu", else the default one, written None)
    for i, names in enumerate(platforms):
        if names is not None and "cpu" in names:
            return mnp.asarray(i, "int32")
    for i, names in enumerate(platforms):
        if names is None:
            return mnp.asarray(i, "int32")
    raise errors.UnsupportedError(f"platform_index: no branch for the CPU among {platforms}")


import_rules.update({"platform_index": _platform_index, "lu": _lu, "triangular_solve": _triangular_solve, "cholesky": _cholesky, "qr": _qr,
                     "eigh": _eigh, "svd": _svd, "lu_pivots_to_permutation": _lu_pivots_to_permutation,
                     "custom_linear_solve": _custom_linear_solve})
# (jax_importer lists it as missing; it is not any more)
UNSUPPORTED.pop("custom_linear_solve", None)
