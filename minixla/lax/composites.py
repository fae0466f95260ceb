"""Functions ``jax.lax`` defines by composing primitives, with no primitive of their own here:
``associative_scan`` (a parallel prefix scan), ``conv_transpose``, ``reduce`` for the standard
monoids, and small conveniences (``square``, ``reciprocal``, ``full_like``, ``collapse``,
``broadcast_to_rank``, ``batch_matmul``, ``dynamic_update_slice_in_dim``, ...).

Because they only bind existing primitives, every transformation (jvp, vjp, vmap) and every
backend already handles them.
"""
from __future__ import annotations

import math

import jax
import numpy as np

from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.lax import elementwise as ew
from minixla.lax import structural as st
from minixla.lax.contractions import conv_dimension_numbers, conv_general_dilated, dot_general
from minixla.lax.indexing import dynamic_update_slice
from minixla.lax import reductions as red
from minixla.lax.base import reduction_identity

__all__ = ["associative_scan", "conv_transpose", "reduce", "square", "reciprocal", "full_like",
           "collapse", "broadcast_to_rank", "batch_matmul", "dynamic_update_slice_in_dim",
           "dynamic_update_index_in_dim"]


# ---------------------------------------------------------------------------------------
# associative_scan: a prefix scan in O(log n) depth.

def associative_scan(fn, elems, reverse: bool = False, axis: int = 0):
    """All prefix combinations ``fn(...fn(fn(e0, e1), e2)..., ek)`` along ``axis``
    (``jax.lax.associative_scan``).

    Args:
      fn: an associative binary function on pytrees of arrays shaped like ``elems`` (it is
        called on slices along ``axis``, so it must work elementwise over the other dims).
      elems: a pytree of arrays, all with the same size ``n`` along ``axis``.
      reverse: scan from the end (``result[i]`` combines ``elems[i:]``).
      axis: the scanned axis.

    Returns the pytree of prefix results, shaped like ``elems``.

    The scan recurses on pairs (Ladner-Fischer / Blelloch style): combine neighbours
    ``(e0,e1), (e2,e3), ...``, scan that half-length sequence, then fill in the even positions with
    one more combine. That is ``2 log2 n`` levels of wide elementwise work instead of ``n``
    sequential steps -- what makes it fast on vector hardware -- but the association order differs
    from a sequential loop, so a floating-point ``fn`` that is only approximately associative
    (``+`` on floats) rounds differently (as in JAX). Raises ``ValueError`` if the leaves'
    sizes along ``axis`` differ.
    """
    if not callable(fn):
        raise TypeError("lax.associative_scan: fn argument should be callable.")
    leaves, tree = jax.tree_util.tree_flatten(elems)
    if not leaves:
        return elems
    avals = [get_aval(x) for x in leaves]
    if not -avals[0].ndim <= axis < avals[0].ndim:  # (JAX's canonicalize_axis; not axis % ndim)
        raise errors.ShapeError(f"axis {axis} is out of bounds for array of dimension {avals[0].ndim}")
    ax = axis % avals[0].ndim
    sizes = {a.shape[ax] if ax < a.ndim else None for a in avals}
    if len(sizes) != 1:
        raise ValueError("Array inputs to associative_scan must have the same "
                         f"first dimension. (saw: {[a.shape for a in avals]})")
    if reverse:
        leaves = [st.rev(x, (ax,)) for x in leaves]

    def combine(a, b):
        out = fn(jax.tree_util.tree_unflatten(tree, a), jax.tree_util.tree_unflatten(tree, b))
        out_leaves, out_tree = jax.tree_util.tree_flatten(out)
        if out_tree != tree:
            raise TypeError(f"associative_scan: fn must return a pytree like elems ({tree}), "
                            f"got {out_tree}")
        return out_leaves

    def sl(xs, start, stop=None, step=1):
        return [st.slice_in_dim(x, start, stop, step, ax) for x in xs]

    def scan(xs):
        n = get_aval(xs[0]).shape[ax]
        if n < 2:
            return xs
        odd = scan(combine(sl(xs, 0, n - 1, 2), sl(xs, 1, None, 2)))   # prefixes at 1, 3, 5, ...
        # Prefixes at 2, 4, ...: the odd prefix before them combined with the element itself.
        even = combine(sl(odd, 0, (n - 1) // 2) if n % 2 == 0 else odd, sl(xs, 2, None, 2))
        even = [st.concatenate([st.slice_in_dim(x, 0, 1, 1, ax), e], ax) for x, e in zip(xs, even)]
        return [_interleave(e, o, ax) for e, o in zip(even, odd)]

    out = scan(leaves)
    if reverse:
        out = [st.rev(x, (ax,)) for x in out]
    return jax.tree_util.tree_unflatten(tree, out)


def _interleave(even, odd, axis):
    """``[e0, o0, e1, o1, ...]`` along ``axis`` (``len(even)`` is ``len(odd)`` or one more)."""
    ne, no = get_aval(even).shape[axis], get_aval(odd).shape[axis]
    if ne > no:  # pad odd with one element so the two stack, then drop it
        odd = st.pad(odd, st.full((), 0, get_aval(odd).dtype),
                     [(0, 1 if d == axis else 0, 0) for d in range(get_aval(odd).ndim)])
    pair = st.concatenate([st.expand_dims(even, (axis + 1,)), st.expand_dims(odd, (axis + 1,))],
                          axis + 1)
    shape = list(get_aval(even).shape)
    shape[axis] = 2 * ne
    flat = st.reshape(pair, tuple(shape))
    return st.slice_in_dim(flat, 0, ne + no, 1, axis)


# ---------------------------------------------------------------------------------------
# Convolutions and reductions.

_DEFAULT_CONV_LAYOUTS = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"),
                         4: ("NHWC", "HWIO", "NHWC"), 5: ("NHWDC", "HWDIO", "NHWDC")}


def _transpose_pads(k: int, s: int, padding) -> tuple:
    """Padding of the stride-dilated input that makes a conv the transpose of a strided conv
    with window ``k``, stride ``s`` and ``padding`` ('SAME', 'VALID' or an explicit pair)."""
    if padding == "SAME":
        total = k + s - 2
        low = k - 1 if s > k - 1 else math.ceil(total / 2)
    elif padding == "VALID":
        total, low = k + s - 2 + max(k - s, 0), k - 1
    else:
        low, high = (k - p - 1 for p in padding)
        total = low + high
    return (low, total - low)


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel: bool = False, precision=None, preferred_element_type=None,
                   use_consistent_padding: bool = False):
    """The transposed ("deconvolution", fractionally strided) convolution
    (``jax.lax.conv_transpose``): a stride-1 convolution of ``lhs`` dilated by ``strides``.

    Args:
      lhs: ``[N, *spatial, C]`` in the default layout (``NHWC`` for 2-D), or as
        ``dimension_numbers`` say. rhs: the kernel, ``HWIO`` by default.
      strides: the up-sampling factor per spatial dim.
      padding: 'SAME', 'VALID' (meant as in the forward strided conv this one transposes) or
        ``(low, high)`` pairs: the padding of the stride-dilated input as they are, or with
        ``use_consistent_padding=True`` the forward conv's (a pair ``p`` becomes ``k_eff - p - 1``
        pads, as JAX's).
      transpose_kernel: flip the spatial dims and swap the kernel's I/O dims -- then this is
        exactly the gradient of ``conv_general_dilated`` with those strides.

    Output spatial size is ``(in - 1) * stride + k_eff - (pad sum of the forward conv)``.
    Raises ``ValueError`` for ranks without a default layout and unknown padding names.
    """
    nd = get_aval(lhs).ndim
    if nd != get_aval(rhs).ndim or nd < 2:
        raise errors.ShapeError(f"conv_transpose: lhs rank {nd} and rhs rank "
                                f"{get_aval(rhs).ndim} must be equal and at least 2")
    if dimension_numbers is None:
        if nd not in _DEFAULT_CONV_LAYOUTS:
            raise ValueError("No 4+ dimensional dimension_number defaults.")
        dimension_numbers = _DEFAULT_CONV_LAYOUTS[nd]
    dn = conv_dimension_numbers(get_aval(lhs).shape, get_aval(rhs).shape, dimension_numbers)
    kernel = [get_aval(rhs).shape[d] for d in dn.rhs_spec[2:]]
    rhs_dilation = tuple(rhs_dilation) if rhs_dilation is not None else (1,) * (nd - 2)
    if isinstance(padding, str) or use_consistent_padding:
        if isinstance(padding, str) and padding not in ("SAME", "VALID"):
            raise ValueError(f"Invalid padding mode: {padding}")
        per_dim = [padding] * len(strides) if isinstance(padding, str) else [tuple(p) for p in padding]
        eff = [(k - 1) * r + 1 for k, r in zip(kernel, rhs_dilation)]
        pads = tuple(_transpose_pads(k, s, p) for k, s, p in zip(eff, strides, per_dim))
    else:
        pads = tuple(tuple(p) for p in padding)
    if transpose_kernel:
        rhs = st.rev(rhs, tuple(dn.rhs_spec[2:]))
        perm = list(range(nd))
        perm[dn.rhs_spec[0]], perm[dn.rhs_spec[1]] = perm[dn.rhs_spec[1]], perm[dn.rhs_spec[0]]
        rhs = st.transpose(rhs, tuple(perm))
    return conv_general_dilated(lhs, rhs, (1,) * (nd - 2), pads, lhs_dilation=tuple(strides),
                                rhs_dilation=rhs_dilation, dimension_numbers=dn,
                                precision=precision, preferred_element_type=preferred_element_type)


#: reducer name (``jax.lax``'s and minixla's function names) -> (HLO opcode, minixla reduction)
_MONOIDS = {"add": ("add", red.reduce_sum), "mul": ("multiply", red.reduce_prod),
            "max": ("maximum", red.reduce_max), "min": ("minimum", red.reduce_min),
            "bitwise_and": ("and", red.reduce_and), "bitwise_or": ("or", red.reduce_or)}


def _monoid_of(computation, init):
    """The minixla reduction for ``computation`` if it is a standard reducer and ``init`` its
    identity (``lax.base.reduction_identity``), else ``None``."""
    entry = _MONOIDS.get(getattr(computation, "__name__", None))
    if entry is None or np.ndim(init) != 0:
        return None
    init = np.asarray(init)
    if init.dtype == np.float64 or init.dtype == np.int64:  # a Python scalar: value matters
        init = init.astype(np.float32 if init.dtype.kind == "f" else np.int32)
    ident = reduction_identity(entry[0], init.dtype)
    same = np.array_equal(init, ident) and np.signbit(init) == np.signbit(ident)
    return entry[1] if same else None


def reduce(operands, init_values, computation, dimensions):
    """Reduce ``operands`` over ``dimensions`` with ``computation`` starting from
    ``init_values`` (``jax.lax.reduce``), for the standard monoids: ``computation`` one of
    ``lax.add``/``mul``/``max``/``min``/``bitwise_and``/``bitwise_or`` (jax's or minixla's)
    with its identity as the init value (0, 1, -inf/INT_MIN, +inf/INT_MAX, all-ones, 0).

    ``operands``/``init_values`` may be single arrays or matching pytrees (one reducer for
    each leaf). Raises ``NotImplementedError`` for any other computation (a general
    user-defined reducer needs a reduce primitive with a sub-jaxpr, which minixla does not have)
    and ``TypeError`` for mismatched trees.
    """
    leaves, tree = jax.tree_util.tree_flatten(operands)
    inits, init_tree = jax.tree_util.tree_flatten(init_values)
    if tree != init_tree:
        raise TypeError(f"reduce: operands {tree} and init_values {init_tree} must be the same tree")
    outs = []
    for x, init in zip(leaves, inits):
        if not isinstance(init, (int, float, bool, np.generic, np.ndarray)):
            raise NotImplementedError("reduce: init_values must be concrete scalars in minixla")
        reduction = _monoid_of(computation, init)
        if reduction is None:
            raise NotImplementedError(
                f"reduce: minixla reduces only with a standard monoid (add, mul, max, min, and, "
                f"or) and its identity; got {getattr(computation, '__name__', computation)!r} "
                f"with init {init!r}")
        outs.append(reduction(x, tuple(dimensions)))
    return jax.tree_util.tree_unflatten(tree, outs)


# ---------------------------------------------------------------------------------------
# Conveniences.

def square(x):
    """``x * x`` (``jax.lax.square``)."""
    return ew.mul(x, x)


def reciprocal(x):
    """``1 / x`` (``jax.lax.reciprocal``: ``integer_pow(x, -1)``)."""
    return ew.integer_pow(x, -1)


def full_like(x, fill_value, dtype=None, shape=None):
    """An array shaped like ``x`` (or ``shape``) filled with ``fill_value``, in ``dtype`` or
    ``x``'s dtype (``jax.lax.full_like``)."""
    aval = get_aval(x)
    return st.full(aval.shape if shape is None else tuple(shape), fill_value,
                   aval.dtype if dtype is None else dtype)


def collapse(operand, start_dimension: int, stop_dimension: int | None = None):
    """Merge dims ``[start, stop)`` into one (``jax.lax.collapse``)."""
    shape = get_aval(operand).shape
    lo = start_dimension % len(shape) if shape else 0
    hi = len(shape) if stop_dimension is None else (
        stop_dimension if stop_dimension >= 0 else stop_dimension + len(shape))
    return st.reshape(operand, shape[:lo] + (math.prod(shape[lo:hi]),) + shape[hi:])


def broadcast_to_rank(x, rank: int):
    """``x`` with leading size-1 dims added up to ``rank`` (``jax.lax.broadcast_to_rank``)."""
    shape = get_aval(x).shape
    if rank <= len(shape):
        return x
    return st.broadcast(x, (1,) * (rank - len(shape)))


def batch_matmul(lhs, rhs, precision=None):
    """Matmul over the last two dims, batched over the leading ones (``jax.lax.batch_matmul``);
    raises ``ValueError`` for ranks below 2 or differing ranks."""
    la, ra = get_aval(lhs), get_aval(rhs)
    if la.ndim < 2 or la.ndim != ra.ndim:
        raise ValueError(f"Arguments to batch_matmul must be at least 2D and have the same "
                         f"rank, got {la.ndim} and {ra.ndim}.")
    batch = tuple(range(la.ndim - 2))
    return dot_general(lhs, rhs, (((la.ndim - 1,), (ra.ndim - 2,)), (batch, batch)),
                       precision=precision)


def dynamic_update_slice_in_dim(operand, update, start_index, axis: int):
    """``dynamic_update_slice`` with the start given along one ``axis`` (0 elsewhere)."""
    nd = get_aval(operand).ndim
    axis = axis % nd
    starts = [0] * nd
    starts[axis] = start_index
    return dynamic_update_slice(operand, update, starts)


def dynamic_update_index_in_dim(operand, update, index, axis: int):
    """Write ``update`` (with or without the size-1 ``axis``) at ``index`` of ``axis``."""
    nd = get_aval(operand).ndim
    axis = axis % nd
    if get_aval(update).ndim == nd - 1:
        update = st.expand_dims(update, (axis,))
    return dynamic_update_slice_in_dim(operand, update, index, axis)
