"""Reductions over axes (sum, prod, max, min, and, or), argmax/argmin and the cumulative
reductions (``cumsum`` & co., lowered as XLA reduce-windows).
"""
from __future__ import annotations

import numpy as np
import jax

from minixla.core import errors
from minixla.core.avals import ShapedArray, canonicalize_dtype, get_aval
from minixla.lax.base import _ANY, _NUM, _int_kinds, _is_float, _std_prim


# ---------------------------------------------------------------------------------------
# Reductions.

def _reduce_rule(opname, kinds):
    def rule(x, *, axes):
        if x.dtype.kind not in kinds and not _is_float(x.dtype):
            raise errors.DTypeError(f"{opname} does not accept dtype {x.dtype.name}")
        if len(set(axes)) != len(axes) or any(a < 0 or a >= x.ndim for a in axes):
            raise errors.ShapeError(f"{opname} axes {axes} are invalid for rank {x.ndim}")
        return ShapedArray([d for i, d in enumerate(x.shape) if i not in axes], x.dtype, x.weak_type)
    return rule


reduce_sum_p = _std_prim("reduce_sum", _reduce_rule("reduce_sum", _NUM))
reduce_max_p = _std_prim("reduce_max", _reduce_rule("reduce_max", _ANY))
reduce_min_p = _std_prim("reduce_min", _reduce_rule("reduce_min", _ANY))


reduce_prod_p = _std_prim("reduce_prod", _reduce_rule("reduce_prod", _NUM))
reduce_and_p = _std_prim("reduce_and", _reduce_rule("reduce_and", "iub"))
reduce_or_p = _std_prim("reduce_or", _reduce_rule("reduce_or", "iub"))


def _argminmax_rule(opname):
    def rule(x, *, axes, index_dtype):
        if len(axes) != 1 or not 0 <= axes[0] < x.ndim:
            raise errors.ShapeError(f"{opname} axes {axes} are invalid for rank {x.ndim}")
        if np.dtype(index_dtype).kind not in _int_kinds:
            raise errors.DTypeError(f"{opname} index_dtype must be an integer type, got {index_dtype}")
        if x.shape[axes[0]] == 0:
            raise errors.ShapeError(f"{opname} requires a non-empty reduced dimension: "
                                    f"operand shape {x.shape}, axis {axes[0]}")
        return ShapedArray([n for i, n in enumerate(x.shape) if i != axes[0]], index_dtype)
    return rule


argmax_p = _std_prim("argmax", _argminmax_rule("argmax"),
                     impl=lambda x, *, axes, index_dtype: np.asarray(jax.lax.argmax(x, axes[0], index_dtype)))
argmin_p = _std_prim("argmin", _argminmax_rule("argmin"),
                     impl=lambda x, *, axes, index_dtype: np.asarray(jax.lax.argmin(x, axes[0], index_dtype)))


def _cumulative_rule(opname, kinds):
    def rule(x, *, axis, reverse):
        if x.dtype.kind not in kinds and not _is_float(x.dtype):
            raise errors.DTypeError(f"{opname} does not accept dtype {x.dtype.name}")
        if not 0 <= axis < x.ndim:
            raise errors.ShapeError(f"{opname} axis {axis} is invalid for rank {x.ndim}")
        return x
    return rule


cumsum_p = _std_prim("cumsum", _cumulative_rule("cumsum", _NUM))
cumprod_p = _std_prim("cumprod", _cumulative_rule("cumprod", _NUM))
cummax_p = _std_prim("cummax", _cumulative_rule("cummax", _NUM))
cummin_p = _std_prim("cummin", _cumulative_rule("cummin", _NUM))


# ---------------------------------------------------------------------------------------
# User-facing functions.

def reduce_sum(operand, axes):
    """Sum over ``axes`` (``jax.lax.reduce_sum``); empty axes give 0."""
    return reduce_sum_p.bind(operand, axes=tuple(sorted(int(a) for a in axes)))


def reduce_max(operand, axes):
    """Max over ``axes`` (NaN-propagating; empty extents give -inf / the dtype's min)."""
    return reduce_max_p.bind(operand, axes=tuple(sorted(int(a) for a in axes)))


def reduce_min(operand, axes):
    """Min over ``axes`` (NaN-propagating; empty extents give +inf / the dtype's max)."""
    return reduce_min_p.bind(operand, axes=tuple(sorted(int(a) for a in axes)))


def _axes(axes):
    return tuple(sorted(int(a) for a in axes))


def reduce_prod(operand, axes):
    """Product over ``axes`` (``jax.lax.reduce_prod``); empty extents give 1."""
    return reduce_prod_p.bind(operand, axes=_axes(axes))


def reduce_and(operand, axes):
    """Logical/bitwise and over ``axes`` (``jax.lax.reduce_and``); empty extents give True / all ones."""
    return reduce_and_p.bind(operand, axes=_axes(axes))


def reduce_or(operand, axes):
    """Logical/bitwise or over ``axes`` (``jax.lax.reduce_or``); empty extents give False / 0."""
    return reduce_or_p.bind(operand, axes=_axes(axes))


def argmax(operand, axis, index_dtype):
    """Index of the maximum along ``axis`` (``jax.lax.argmax``): the first maximum; a NaN counts
    as the maximum (the first NaN wins). Raises ShapeError for an empty axis, as JAX does."""
    return argmax_p.bind(operand, axes=(int(axis),), index_dtype=canonicalize_dtype(index_dtype))


def argmin(operand, axis, index_dtype):
    """Index of the minimum along ``axis`` (``jax.lax.argmin``); NaN and ties as ``argmax``."""
    return argmin_p.bind(operand, axes=(int(axis),), index_dtype=canonicalize_dtype(index_dtype))


def _cumulative(p):
    def fn(operand, axis=0, reverse=False):
        nd = get_aval(operand).ndim
        return p.bind(operand, axis=int(axis) % nd if nd else int(axis), reverse=bool(reverse))
    fn.__name__ = p.name
    fn.__doc__ = (f"Inclusive cumulative ``{p.name[3:]}`` along ``axis`` (``jax.lax.{p.name}``); "
                  "``reverse`` scans from the end.")
    return fn


cumsum, cumprod, cummax, cummin = map(_cumulative, (cumsum_p, cumprod_p, cummax_p, cummin_p))
