"""Structural primitives: broadcast, reshape, transpose, slice, iota, squeeze, rev, pad,
concatenate, and the functions that build or stage arrays (``full``, ``stage_constant``).
"""
from __future__ import annotations

import builtins

import numpy as np
import jax

from minixla.core import errors
from minixla.core.avals import ShapedArray, WeakScalar, canonicalize_dtype, get_aval, weak_array
from minixla.core.avals import canonicalize_shape
from minixla.core.tracing import Tracer
from minixla.lax.base import _check_dims, _scalar_like, _std_prim
from minixla.lax.elementwise import convert_element_type, convert_element_type_p


# ---------------------------------------------------------------------------------------
# Structural primitives.

def _broadcast_in_dim_rule(x, *, shape, broadcast_dimensions):
    if len(broadcast_dimensions) != x.ndim:
        raise errors.ShapeError(
            f"broadcast_dimensions {broadcast_dimensions} must have one entry per operand dim ({x.ndim})")
    if list(broadcast_dimensions) != sorted(set(broadcast_dimensions)) or any(
            d < 0 or d >= len(shape) for d in broadcast_dimensions):
        raise errors.ShapeError(f"broadcast_dimensions {broadcast_dimensions} must be strictly "
                                f"increasing and within the output rank {len(shape)}")
    for i, d in enumerate(broadcast_dimensions):
        if x.shape[i] not in (1, shape[d]):
            raise errors.ShapeError(f"cannot broadcast operand dim {i} of size {x.shape[i]} "
                                    f"to output dim {d} of size {shape[d]} (target shape {shape})")
    return ShapedArray(shape, x.dtype, x.weak_type)


broadcast_in_dim_p = _std_prim("broadcast_in_dim", _broadcast_in_dim_rule,
                               impl=lambda x, *, shape, broadcast_dimensions: np.asarray(
                                   jax.lax.broadcast_in_dim(x, shape, broadcast_dimensions)))


def _reshape_rule(x, *, new_sizes, dimensions=None):
    if any(d < 0 for d in new_sizes):
        raise errors.ShapeError(f"reshape sizes must be non-negative, got {new_sizes}")
    if int(np.prod(new_sizes, dtype=np.int64)) != x.size:
        raise errors.ShapeError(f"cannot reshape array of shape {x.shape} (size {x.size}) "
                                f"into shape {tuple(new_sizes)} (size {int(np.prod(new_sizes))})")
    if dimensions is not None:
        raise errors.UnsupportedError("reshape with dimensions= is not supported; transpose first")
    return ShapedArray(new_sizes, x.dtype, x.weak_type)


reshape_p = _std_prim("reshape", _reshape_rule)


def _transpose_rule(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise errors.ShapeError(f"transpose permutation {permutation} is not a permutation of "
                                f"the operand's {x.ndim} axes")
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, x.weak_type)


transpose_p = _std_prim("transpose", _transpose_rule)


def _slice_rule(x, *, start_indices, limit_indices, strides=None):
    strides = strides or (1,) * x.ndim
    if not (len(start_indices) == len(limit_indices) == len(strides) == x.ndim):
        raise errors.ShapeError("slice start/limit/strides must each have one entry per dim")
    out = []
    for s, l, st, d in zip(start_indices, limit_indices, strides, x.shape):
        if not (0 <= s <= l <= d) or st < 1:
            raise errors.ShapeError(f"slice [{s}:{l}:{st}] is out of bounds for a dim of size {d}")
        out.append(max(0, -(-(l - s) // st)))
    return ShapedArray(out, x.dtype, x.weak_type)


slice_p = _std_prim("slice", _slice_rule)


def _iota_rule(*, dtype, shape, dimension):
    if not 0 <= dimension < len(shape):
        raise errors.ShapeError(f"iota dimension {dimension} out of range for shape {shape}")
    return ShapedArray(shape, dtype)


iota_p = _std_prim("iota", _iota_rule,
                   impl=lambda *, dtype, shape, dimension: np.asarray(
                       jax.lax.broadcasted_iota(dtype, shape, dimension)))


def _squeeze_rule(x, *, dimensions):
    _check_dims("squeeze", dimensions, x.ndim)
    for d in dimensions:
        if x.shape[d] != 1:
            raise errors.ShapeError(f"squeeze: dimension {d} has size {x.shape[d]}, not 1")
    return ShapedArray([n for i, n in enumerate(x.shape) if i not in dimensions], x.dtype, x.weak_type)


squeeze_p = _std_prim("squeeze", _squeeze_rule)


def _rev_rule(x, *, dimensions):
    _check_dims("rev", dimensions, x.ndim)
    return x


rev_p = _std_prim("rev", _rev_rule)


def _pad_rule(x, padding_value, *, padding_config):
    if x.dtype != padding_value.dtype:
        raise errors.DTypeError(f"pad: operand dtype {x.dtype.name} and padding value dtype "
                                f"{padding_value.dtype.name} differ")
    if padding_value.shape != ():
        raise errors.ShapeError(f"pad: padding value must be a scalar, got shape {padding_value.shape}")
    if len(padding_config) != x.ndim:
        raise errors.ShapeError(f"pad: padding_config needs one (low, high, interior) per dim "
                                f"({x.ndim}), got {len(padding_config)}")
    out = []
    for n, (lo, hi, interior) in zip(x.shape, padding_config):
        if interior < 0:
            raise errors.ShapeError(f"pad: interior padding must be >= 0, got {interior}")
        size = lo + hi + n + max(n - 1, 0) * interior
        if size < 0:
            raise errors.ShapeError(f"pad: padding {(lo, hi, interior)} makes a negative size "
                                    f"for a dim of size {n}")
        out.append(size)
    return ShapedArray(out, x.dtype, x.weak_type)


pad_p = _std_prim("pad", _pad_rule)


def _concatenate_rule(*xs, dimension):
    if not xs:
        raise errors.ShapeError("concatenate needs at least one operand")
    x0 = xs[0]
    if not 0 <= dimension < builtins_max(x0.ndim, 1) or x0.ndim == 0:
        raise errors.ShapeError(f"concatenate dimension {dimension} is invalid for rank {x0.ndim}")
    for x in xs:
        if x.dtype != x0.dtype:
            raise errors.DTypeError("concatenate operands must have one dtype, got "
                                    + ", ".join(a.dtype.name for a in xs))
        if x.ndim != x0.ndim or any(a != b for i, (a, b) in enumerate(zip(x.shape, x0.shape))
                                    if i != dimension):
            raise errors.ShapeError("concatenate operands must have equal shapes except along "
                                    f"dimension {dimension}, got " + ", ".join(str(a.shape) for a in xs))
    shape = list(x0.shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return ShapedArray(shape, x0.dtype, all(x.weak_type for x in xs))


def builtins_max(a, b):
    return a if a > b else b


concatenate_p = _std_prim("concatenate", _concatenate_rule,
                          impl=lambda *xs, dimension: np.asarray(jax.lax.concatenate(xs, dimension)))


# ---------------------------------------------------------------------------------------
# User-facing functions.

def broadcast_in_dim(operand, shape, broadcast_dimensions):
    """Broadcast ``operand`` to ``shape``, its dim i landing on ``broadcast_dimensions[i]``."""
    return broadcast_in_dim_p.bind(operand, shape=tuple(int(d) for d in shape),
                                   broadcast_dimensions=tuple(int(d) for d in broadcast_dimensions))


def broadcast(operand, sizes):
    """Prepend dims of ``sizes`` (``jax.lax.broadcast``)."""
    nd = get_aval(operand).ndim
    shape = tuple(sizes) + get_aval(operand).shape
    return broadcast_in_dim(operand, shape, tuple(range(len(sizes), len(sizes) + nd)))


def reshape(operand, new_sizes, dimensions=None):
    """Row-major reshape (``jax.lax.reshape``): ``operand`` (any shape and dtype) to ``new_sizes``
    (same size), after permuting its axes by ``dimensions`` when given (JAX's order: a
    ``transpose`` first; the ``reshape`` equation then has ``dimensions=None``). A ``dimensions``
    that is not a permutation of the operand's axes is JAX's ``TypeError`` (a ``ShapeError``)."""
    new_sizes = tuple(int(d) for d in new_sizes)
    if dimensions is not None:
        dimensions = tuple(int(d) for d in dimensions)
        shape = get_aval(operand).shape
        if sorted(dimensions) != list(range(len(shape))):
            raise errors.ShapeError(f"reshape dimensions must be a permutation of operand dimensions, "
                                    f"got dimensions {dimensions} for shape {tuple(shape)}.")
        operand = transpose(operand, dimensions)
        dimensions = None
    if isinstance(operand, Tracer) and operand.shape == new_sizes:
        return operand
    return reshape_p.bind(operand, new_sizes=new_sizes, dimensions=dimensions)


def transpose(operand, permutation):
    """Permute axes: output dim i is operand dim ``permutation[i]`` (``jax.lax.transpose``)."""
    permutation = tuple(int(p) for p in permutation)
    if isinstance(operand, Tracer) and permutation == tuple(range(operand.ndim)):
        return operand
    return transpose_p.bind(operand, permutation=permutation)


def slice(operand, start_indices, limit_indices, strides=None):  # noqa: A001 (jax.lax's name)
    """Static strided slice (``jax.lax.slice``)."""
    return slice_p.bind(operand, start_indices=tuple(start_indices), limit_indices=tuple(limit_indices),
                        strides=tuple(strides) if strides is not None else None)


def slice_in_dim(operand, start_index, limit_index, stride=1, axis=0):
    """``slice`` along one ``axis`` (``jax.lax.slice_in_dim``); ``None`` and negative bounds
    count as in Python slicing."""
    shape = get_aval(operand).shape
    axis = int(axis) % len(shape)
    start, limit, _ = builtins.slice(start_index, limit_index).indices(shape[axis])
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[axis], limits[axis], strides[axis] = start, builtins.max(start, limit), int(stride)
    return slice(operand, starts, limits, strides)


def index_in_dim(operand, index, axis=0, keepdims=True):
    """The slice at static ``index`` of one ``axis`` (``jax.lax.index_in_dim``), the axis
    kept (size 1) or dropped."""
    size = get_aval(operand).shape[int(axis)]
    index = int(index) + size if int(index) < 0 else int(index)
    out = slice_in_dim(operand, index, index + 1, 1, axis)
    return out if keepdims else squeeze(out, (axis,))


def broadcasted_iota(dtype, shape, dimension):
    """Array of ``shape`` whose value is the index along ``dimension`` (``jax.lax.broadcasted_iota``)."""
    return iota_p.bind(dtype=canonicalize_dtype(dtype), shape=tuple(shape), dimension=int(dimension))


def iota(dtype, size):
    """``[0, 1, ..., size-1]`` (``jax.lax.iota``)."""
    return broadcasted_iota(dtype, (size,), 0)


def squeeze(array, dimensions):
    """Remove the size-1 ``dimensions`` (``jax.lax.squeeze``)."""
    nd = get_aval(array).ndim
    dims = tuple(sorted(int(d) % nd if nd else int(d) for d in dimensions))
    return squeeze_p.bind(array, dimensions=dims)


def expand_dims(array, dimensions):
    """Insert size-1 dims at ``dimensions`` of the result (``jax.lax.expand_dims``)."""
    shape = list(get_aval(array).shape)
    nd = len(shape) + len(dimensions)
    for d in sorted(int(d) % nd for d in dimensions):
        shape.insert(d, 1)
    return reshape(array, shape)


def rev(operand, dimensions):
    """Reverse the order of elements along ``dimensions`` (``jax.lax.rev``)."""
    return rev_p.bind(operand, dimensions=tuple(int(d) for d in dimensions))


def pad(operand, padding_value, padding_config):
    """Pad with ``(low, high, interior)`` per dim (``jax.lax.pad``); negative low/high crop."""
    config = tuple((int(lo), int(hi), int(i)) for lo, hi, i in padding_config)
    return pad_p.bind(operand, _scalar_like(padding_value, operand), padding_config=config)


def concatenate(operands, dimension):
    """Join ``operands`` along ``dimension`` (``jax.lax.concatenate``)."""
    return concatenate_p.bind(*operands, dimension=int(dimension))


def full(shape, fill_value, dtype=None, *, _weak_type=False):
    """An array of ``shape`` filled with ``fill_value`` (``jax.lax.full``). Inside a trace it is
    staged (a ``broadcast_in_dim`` of the scalar), so the result is a tracer like any other
    value of the traced function; outside, a numpy array."""
    from minixla.core.tracing import current_jaxpr_trace
    # As jax.lax.full: weakly typed when the dtype comes from a Python scalar (``full(2, 1)``
    # adds to an int8 array as int8), and a Python int wraps into the default int here.
    weak = _weak_type or (dtype is None and isinstance(fill_value, (int, float))
                          and not isinstance(fill_value, (bool, np.generic)))
    dtype = canonicalize_dtype(dtype if dtype is not None else np.asarray(fill_value).dtype)
    value = np.asarray(fill_value).astype(dtype)[()] if not isinstance(fill_value, Tracer) else fill_value
    shape = canonicalize_shape(shape)
    if isinstance(value, Tracer):
        return broadcast_in_dim(convert_element_type(value, dtype), shape, ())
    trace = current_jaxpr_trace()
    if trace is None:
        return weak_array(np.full(shape, value, dtype), weak)
    return trace.process_primitive(broadcast_in_dim_p, [WeakScalar(value) if weak else value],
                                   dict(shape=shape, broadcast_dimensions=()))


def stage_constant(x):
    """``x`` (a numpy array) as a value of the current trace if one is active (a constvar), else
    ``x`` itself: what ``jnp.arange`` & co. give inside ``jit``."""
    from minixla.core.tracing import current_jaxpr_trace
    trace = current_jaxpr_trace()
    if trace is None or isinstance(x, Tracer):
        return x
    x = np.asarray(x)
    return trace.process_primitive(convert_element_type_p, [x], dict(new_dtype=x.dtype, weak_type=False))
