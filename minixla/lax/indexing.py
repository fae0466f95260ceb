"""Indexing primitives: ``dynamic_slice``/``dynamic_update_slice``, ``gather`` and the
``scatter`` family, their dimension numbers and ``GatherScatterMode`` (out-of-bounds modes).
"""
from __future__ import annotations

import enum
import warnings
from collections import namedtuple

import numpy as np
import jax

from minixla.core import errors
from minixla.core.avals import ShapedArray, get_aval
from minixla.core.tracing import Tracer
from minixla.lax.base import _check_dims, _int_kinds, _is_float, _std_prim
from minixla.lax.elementwise import add, lt, select_n
from minixla.lax.structural import reshape


def _check_scalar_indices(opname, idx, ndim):
    if len(idx) != ndim:
        raise errors.ShapeError(f"{opname} needs one start index per operand dim ({ndim}), got {len(idx)}")
    for i in idx:
        if i.shape != () or i.dtype.kind not in _int_kinds:
            raise errors.DTypeError(f"{opname} start indices must be integer scalars, got {i.str_short()}")


def _dynamic_slice_rule(x, *idx, slice_sizes):
    _check_scalar_indices("dynamic_slice", idx, x.ndim)
    if len(slice_sizes) != x.ndim or any(not 0 <= s <= n for s, n in zip(slice_sizes, x.shape)):
        raise errors.ShapeError(f"dynamic_slice slice_sizes {tuple(slice_sizes)} must be within "
                                f"the operand shape {x.shape}")
    return ShapedArray(slice_sizes, x.dtype, x.weak_type)


dynamic_slice_p = _std_prim(
    "dynamic_slice", _dynamic_slice_rule,
    impl=lambda x, *idx, slice_sizes: np.asarray(jax.lax.dynamic_slice(x, idx, slice_sizes)))


def _dynamic_update_slice_rule(x, update, *idx):
    _check_scalar_indices("dynamic_update_slice", idx, x.ndim)
    if update.dtype != x.dtype:
        raise errors.DTypeError(f"dynamic_update_slice update dtype {update.dtype.name} differs "
                                f"from the operand's {x.dtype.name}")
    if update.ndim != x.ndim or any(u > n for u, n in zip(update.shape, x.shape)):
        raise errors.ShapeError(f"dynamic_update_slice update shape {update.shape} must fit in "
                                f"the operand shape {x.shape}")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


dynamic_update_slice_p = _std_prim(
    "dynamic_update_slice", _dynamic_update_slice_rule,
    impl=lambda x, u, *idx: np.asarray(jax.lax.dynamic_update_slice(x, u, idx)))


GatherDimensionNumbers = namedtuple("GatherDimensionNumbers",
                                    ["offset_dims", "collapsed_slice_dims", "start_index_map"])
GatherDimensionNumbers.__doc__ = """XLA gather dimension numbers (``jax.lax.GatherDimensionNumbers``
without batching dims). The start indices' last dim is the index vector."""
ScatterDimensionNumbers = namedtuple("ScatterDimensionNumbers",
                                     ["update_window_dims", "inserted_window_dims",
                                      "scatter_dims_to_operand_dims"])
ScatterDimensionNumbers.__doc__ = """XLA scatter dimension numbers (``jax.lax.ScatterDimensionNumbers``
without batching dims). The scatter indices' last dim is the index vector."""


class GatherScatterMode(enum.Enum):
    """How a gather or scatter treats out-of-bounds indices (``jax.lax.GatherScatterMode``).

    ``CLIP``: each start index is clamped so the whole window is inside the operand.
    ``FILL_OR_DROP``: a gather returns ``fill_value`` for a window that is not wholly inside the
    operand; a scatter skips such a window. ``PROMISE_IN_BOUNDS``: the caller promises in-bounds
    indices; what happens otherwise is XLA's native behavior (a gather clamps, a scatter drops).
    HLO's gather and scatter have no mode: a mode is lowered to clamps, compares and selects
    around the native op, as JAX lowers it (so every backend sees plain XLA semantics).
    """
    CLIP = "clip"
    FILL_OR_DROP = "fill"
    PROMISE_IN_BOUNDS = "promise_in_bounds"

    @staticmethod
    def from_any(s):
        """``"clip"``, ``"fill"``/``"drop"``/``None`` (FILL_OR_DROP), ``"promise_in_bounds"`` or
        a ``GatherScatterMode`` (ours or ``jax.lax``'s); else ``ValueError``."""
        if isinstance(s, GatherScatterMode):
            return s
        if isinstance(s, jax.lax.GatherScatterMode):
            s = s.name
        key = {"clip": "CLIP", "fill": "FILL_OR_DROP", "drop": "FILL_OR_DROP", None: "FILL_OR_DROP",
               "promise_in_bounds": "PROMISE_IN_BOUNDS"}.get(s, s)
        if key not in GatherScatterMode.__members__:
            raise ValueError(f'Unknown gather mode "{s}"')
        return GatherScatterMode[key]

    def __repr__(self):  # as the jaxpr printer shows params
        return f"GatherScatterMode.{self.name}"


def _jax_mode(mode, default=None):
    return getattr(jax.lax.GatherScatterMode, (mode or default or GatherScatterMode.FILL_OR_DROP).name)


def gather_fill_value(fill_value, dtype):
    """The fill of a FILL_OR_DROP gather as a scalar of ``dtype`` (``jax.lax.gather``'s default:
    NaN for inexact dtypes, the minimum of a signed and the maximum of an unsigned integer, True
    for bool); a given value is cast as NumPy casts it (JAX builds the fill with ``np.array``)."""
    dtype = np.dtype(dtype)
    if fill_value is None:
        if _is_float(dtype) or dtype.kind == "c":
            fill_value = np.nan
        elif dtype.kind in "iu":
            fill_value = np.iinfo(dtype).min if dtype.kind == "i" else np.iinfo(dtype).max
        elif dtype == np.bool_:
            fill_value = True
        else:
            raise errors.DTypeError(f"gather: no default fill_value for dtype {dtype.name}")
    if np.ndim(fill_value) != 0:
        raise ValueError("fill_value argument to indexed get() must be a scalar")
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(fill_value).astype(dtype)[()]


def _gather_rule(x, indices, *, dimension_numbers, slice_sizes, mode=None, fill_value=None):
    dn = dimension_numbers
    if indices.dtype.kind not in _int_kinds:
        raise errors.DTypeError(f"gather indices must be integers, got {indices.dtype.name}")
    if indices.ndim < 1 or indices.shape[-1] != len(dn.start_index_map):
        raise errors.ShapeError(f"gather indices' last dim ({indices.shape}) must have "
                                f"len(start_index_map) = {len(dn.start_index_map)} entries")
    _check_dims("gather start_index_map", dn.start_index_map, x.ndim)
    _check_dims("gather collapsed_slice_dims", dn.collapsed_slice_dims, x.ndim)
    if len(slice_sizes) != x.ndim or any(not 0 <= s <= n for s, n in zip(slice_sizes, x.shape)):
        raise errors.ShapeError(f"gather slice_sizes {tuple(slice_sizes)} must be within the operand "
                                f"shape {x.shape}")
    if any(slice_sizes[d] != 1 for d in dn.collapsed_slice_dims):
        raise errors.ShapeError("gather collapsed_slice_dims must have slice size 1")
    window = [slice_sizes[d] for d in range(x.ndim) if d not in dn.collapsed_slice_dims]
    out_rank = indices.ndim - 1 + len(window)
    if (len(dn.offset_dims) != len(window) or list(dn.offset_dims) != sorted(set(dn.offset_dims))
            or any(not 0 <= d < out_rank for d in dn.offset_dims)):
        raise errors.ShapeError(f"gather offset_dims {tuple(dn.offset_dims)} are invalid")
    batch = iter(indices.shape[:-1])
    win = iter(window)
    shape = [next(win) if d in dn.offset_dims else next(batch) for d in range(out_rank)]
    return ShapedArray(shape, x.dtype, x.weak_type)


def _gather_impl(x, indices, *, dimension_numbers, slice_sizes, mode=None, fill_value=None):
    dn = jax.lax.GatherDimensionNumbers(tuple(dimension_numbers.offset_dims),
                                        tuple(dimension_numbers.collapsed_slice_dims),
                                        tuple(dimension_numbers.start_index_map))
    mode = _jax_mode(mode, GatherScatterMode.PROMISE_IN_BOUNDS)
    return np.asarray(jax.lax.gather(x, indices, dn, tuple(slice_sizes), mode=mode, fill_value=fill_value))


gather_p = _std_prim("gather", _gather_rule, impl=_gather_impl)


def _scatter_rule(x, indices, updates, *, dimension_numbers, **_):
    dn = dimension_numbers
    if indices.dtype.kind not in _int_kinds:
        raise errors.DTypeError(f"scatter indices must be integers, got {indices.dtype.name}")
    if updates.dtype != x.dtype:
        raise errors.DTypeError(f"scatter updates dtype {updates.dtype.name} differs from the "
                                f"operand's {x.dtype.name}")
    if indices.ndim < 1 or indices.shape[-1] != len(dn.scatter_dims_to_operand_dims):
        raise errors.ShapeError(f"scatter indices' last dim ({indices.shape}) must have "
                                f"{len(dn.scatter_dims_to_operand_dims)} entries")
    _check_dims("scatter inserted_window_dims", dn.inserted_window_dims, x.ndim)
    _check_dims("scatter scatter_dims_to_operand_dims", dn.scatter_dims_to_operand_dims, x.ndim)
    if len(dn.update_window_dims) + len(dn.inserted_window_dims) != x.ndim:
        raise errors.ShapeError("scatter: update_window_dims and inserted_window_dims must cover "
                                "the operand's dims")
    if updates.ndim != indices.ndim - 1 + len(dn.update_window_dims):
        raise errors.ShapeError(f"scatter updates rank {updates.ndim} must be "
                                f"{indices.ndim - 1 + len(dn.update_window_dims)}")
    _check_dims("scatter update_window_dims", dn.update_window_dims, updates.ndim)
    scatter_sizes = [n for d, n in enumerate(updates.shape) if d not in dn.update_window_dims]
    if tuple(scatter_sizes) != indices.shape[:-1]:
        raise errors.ShapeError(f"scatter updates shape {updates.shape} does not match the "
                                f"indices' batch shape {indices.shape[:-1]}")
    op_window = [d for d in range(x.ndim) if d not in dn.inserted_window_dims]
    for od, ud in zip(op_window, dn.update_window_dims):
        if updates.shape[ud] > x.shape[od]:
            raise errors.ShapeError(f"scatter update window {updates.shape} larger than operand {x.shape}")
    return x


def _scatter_impl(name):
    fn = {"scatter": jax.lax.scatter, "scatter-add": jax.lax.scatter_add,
          "scatter-mul": jax.lax.scatter_mul, "scatter-min": jax.lax.scatter_min,
          "scatter-max": jax.lax.scatter_max}[name]

    def impl(x, indices, updates, *, dimension_numbers, indices_are_sorted=False, unique_indices=False,
             mode=None):
        dn = jax.lax.ScatterDimensionNumbers(*map(tuple, dimension_numbers))
        return np.asarray(fn(x, indices, updates, dn, indices_are_sorted=indices_are_sorted,
                             unique_indices=unique_indices, mode=_jax_mode(mode)))
    return impl


scatter_p = _std_prim("scatter", _scatter_rule, impl=_scatter_impl("scatter"))
scatter_add_p = _std_prim("scatter-add", _scatter_rule, impl=_scatter_impl("scatter-add"))
scatter_mul_p = _std_prim("scatter-mul", _scatter_rule, impl=_scatter_impl("scatter-mul"))
scatter_min_p = _std_prim("scatter-min", _scatter_rule, impl=_scatter_impl("scatter-min"))
scatter_max_p = _std_prim("scatter-max", _scatter_rule, impl=_scatter_impl("scatter-max"))


# ---------------------------------------------------------------------------------------
# User-facing functions.

def _index_scalars(indices, shape, opname="dynamic_slice"):
    """Start indices as integer scalars of one dtype (the traced ones', or int32), with negative
    indices counted from the end of their dim, as ``jax.lax.dynamic_slice`` does before binding."""
    traced = [get_aval(i).dtype for i in indices if isinstance(i, Tracer)]
    dtype = traced[0] if traced else np.dtype(np.int32)
    out = []
    for i, n in zip(indices, shape):
        if not isinstance(i, Tracer):
            if np.asarray(i).dtype.kind not in "iub":  # (int() would truncate 0.5 to 0)
                raise errors.DTypeError(f"{opname}: start indices must be integers, got {i!r}\n"
                                        f"  at: {errors.user_source_line()}")
            v = int(i)
            out.append(np.asarray(v + n if v < 0 else v).astype(dtype)[()])
        elif get_aval(i).dtype.kind == "i":
            out.append(select_n(lt(i, np.asarray(0, dtype)[()]), i, add(i, np.asarray(n).astype(dtype)[()])))
        else:
            out.append(i)
    return out + list(indices[len(shape):])


def dynamic_slice(operand, start_indices, slice_sizes):
    """Slice of ``slice_sizes`` at traced ``start_indices`` (``jax.lax.dynamic_slice``): negative
    starts count from the end, then starts are clamped so the slice lies inside the operand."""
    return dynamic_slice_p.bind(operand, *_index_scalars(start_indices, get_aval(operand).shape),
                                slice_sizes=tuple(int(s) for s in slice_sizes))


def dynamic_slice_in_dim(operand, start_index, slice_size: int, axis: int = 0):
    """``dynamic_slice`` along one ``axis`` (``jax.lax.dynamic_slice_in_dim``)."""
    shape = get_aval(operand).shape
    axis = axis + len(shape) if axis < 0 else axis
    starts = [np.int32(0)] * len(shape)
    starts[axis] = start_index
    sizes = list(shape)
    sizes[axis] = slice_size
    return dynamic_slice(operand, starts, sizes)


def dynamic_index_in_dim(operand, index, axis: int = 0, keepdims: bool = True):
    """The slice at ``index`` of ``axis`` (``jax.lax.dynamic_index_in_dim``), that dim kept or dropped."""
    out = dynamic_slice_in_dim(operand, index, 1, axis)
    if keepdims:
        return out
    shape = get_aval(operand).shape
    axis = axis + len(shape) if axis < 0 else axis
    return reshape(out, shape[:axis] + shape[axis + 1:])


def dynamic_update_slice(operand, update, start_indices):
    """``operand`` with ``update`` written at (clamped) ``start_indices`` (``jax.lax.dynamic_update_slice``)."""
    return dynamic_update_slice_p.bind(operand, update, *_index_scalars(start_indices, get_aval(operand).shape,
                                                                        "dynamic_update_slice"))


def gather(operand, start_indices, dimension_numbers, slice_sizes, *, unique_indices=False,
           indices_are_sorted=False, mode=None, fill_value=None):
    """XLA gather (``jax.lax.gather``): for each index vector (the last dim of ``start_indices``,
    an integer array) a window of ``slice_sizes`` starting there. ``dimension_numbers`` is a
    ``GatherDimensionNumbers``. ``mode`` (a ``GatherScatterMode`` or its string) says what an
    out-of-bounds window gives; ``None`` means ``PROMISE_IN_BOUNDS`` as in JAX (in practice the
    start is clamped, as ``CLIP``); ``FILL_OR_DROP`` gives ``fill_value`` (see
    ``gather_fill_value``) for the whole window. ``unique_indices``/``indices_are_sorted`` are
    accepted for JAX's signature and do not change the result."""
    dn = GatherDimensionNumbers(*(tuple(int(d) for d in x) for x in dimension_numbers[:3]))
    mode = GatherScatterMode.from_any(GatherScatterMode.PROMISE_IN_BOUNDS if mode is None else mode)
    fill = (gather_fill_value(fill_value, get_aval(operand).dtype)
            if mode is GatherScatterMode.FILL_OR_DROP else None)
    return gather_p.bind(operand, start_indices, dimension_numbers=dn,
                         slice_sizes=tuple(int(s) for s in slice_sizes), mode=mode, fill_value=fill)


def _scatter_fn(p, doc):
    def fn(operand, scatter_indices, updates, dimension_numbers, indices_are_sorted=False,
           unique_indices=False, mode=None):
        dn = ScatterDimensionNumbers(*(tuple(int(d) for d in x) for x in dimension_numbers[:3]))
        return p.bind(operand, scatter_indices, updates, dimension_numbers=dn,
                      indices_are_sorted=bool(indices_are_sorted), unique_indices=bool(unique_indices),
                      mode=GatherScatterMode.from_any(mode))
    fn.__name__ = p.name.replace("-", "_")
    fn.__doc__ = (f"XLA scatter that {doc} (``jax.lax.{fn.__name__}``). ``mode``: ``None`` or "
                  "``FILL_OR_DROP`` (JAX's default) skips an update window that is not wholly inside "
                  "the operand, ``CLIP`` clamps its start indices first, ``PROMISE_IN_BOUNDS`` leaves "
                  "XLA's native behavior (skipped).")
    return fn


scatter = _scatter_fn(scatter_p, "replaces the operand's elements")
scatter_add = _scatter_fn(scatter_add_p, "adds into the operand")
scatter_mul = _scatter_fn(scatter_mul_p, "multiplies into the operand")
scatter_min = _scatter_fn(scatter_min_p, "takes the minimum with the operand")
scatter_max = _scatter_fn(scatter_max_p, "takes the maximum with the operand")


def scatter_sub(operand, scatter_indices, updates, dimension_numbers, *, indices_are_sorted=False,
                unique_indices=False, mode=None):
    """XLA scatter that subtracts from the operand (``jax.lax.scatter_sub``): the scatter-add of
    the negated updates, the same bits (``x - u`` is ``x + (-u)`` in IEEE arithmetic and in
    wrapping integers). Arguments, modes and errors as ``scatter_add``."""
    from minixla.lax.elementwise import neg
    return scatter_add(operand, scatter_indices, neg(updates), dimension_numbers,
                       indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode)
