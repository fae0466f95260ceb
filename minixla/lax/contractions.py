"""Contractions: ``dot_general`` (and ``dot``) and ``conv_general_dilated`` with its
dimension numbers and padding helpers.
"""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
import jax

from minixla.core import errors
from minixla.core.avals import ShapedArray, canonicalize_dtype, get_aval
from minixla.lax.base import _std_prim


# ---------------------------------------------------------------------------------------
# Contractions.

def _dot_general_rule(lhs, rhs, *, dimension_numbers, precision=None, preferred_element_type=None):
    (lc, rc), (lb, rb) = dimension_numbers
    if lhs.dtype != rhs.dtype:
        raise errors.DTypeError(f"dot_general requires equal dtypes, got {lhs.dtype.name}, {rhs.dtype.name}")
    if lhs.dtype == np.bool_:
        raise errors.DTypeError("dot_general does not accept bool operands")
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise errors.ShapeError(f"dot_general dimension_numbers {dimension_numbers} are unbalanced")
    for dims, aval in ((lc + lb, lhs), (rc + rb, rhs)):
        if len(set(dims)) != len(dims) or any(d < 0 or d >= aval.ndim for d in dims):
            raise errors.ShapeError(f"dot_general dimension_numbers {dimension_numbers} invalid for "
                                    f"shapes {lhs.shape} and {rhs.shape}")
    for a, b in list(zip(lc, rc)) + list(zip(lb, rb)):
        if lhs.shape[a] != rhs.shape[b]:
            raise errors.ShapeError(
                f"dot_general contracting/batch dims must match: lhs dim {a} has size {lhs.shape[a]} "
                f"but rhs dim {b} has size {rhs.shape[b]} (shapes {lhs.shape} and {rhs.shape})")
    batch = [lhs.shape[d] for d in lb]
    lfree = [d for i, d in enumerate(lhs.shape) if i not in lc and i not in lb]
    rfree = [d for i, d in enumerate(rhs.shape) if i not in rc and i not in rb]
    dtype = np.dtype(preferred_element_type) if preferred_element_type is not None else lhs.dtype
    return ShapedArray(batch + lfree + rfree, dtype, lhs.weak_type and rhs.weak_type)


dot_general_p = _std_prim("dot_general", _dot_general_rule)


ConvDimensionNumbers = namedtuple("ConvDimensionNumbers", ["lhs_spec", "rhs_spec", "out_spec"])
ConvDimensionNumbers.__doc__ = """Conv layout as in ``jax.lax.ConvDimensionNumbers``.

``lhs_spec = (batch dim, feature dim, *spatial dims)``, ``rhs_spec = (out-feature dim,
in-feature dim, *spatial dims)``, ``out_spec = (batch dim, feature dim, *spatial dims)``."""


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers) -> ConvDimensionNumbers:
    """Canonicalize ``None``, ``('NCHW', 'OIHW', 'NCHW')``-style strings or a ConvDimensionNumbers."""
    nd = len(lhs_shape)
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return dimension_numbers
    if dimension_numbers is None:
        iota = tuple(range(nd))
        return ConvDimensionNumbers(iota, iota, iota)
    lhs, rhs, out = dimension_numbers
    if not (len(lhs) == len(rhs) == len(out) == nd):
        raise errors.ShapeError(f"conv dimension_numbers {dimension_numbers} must each have {nd} letters")

    def spec(s, first, second):
        spatial = [c for c in s if c not in (first, second)]
        if first not in s or second not in s:
            raise errors.ShapeError(f"conv layout '{s}' must contain '{first}' and '{second}'")
        return (s.index(first), s.index(second)) + tuple(s.index(c) for c in spatial), spatial

    lhs_spec, lsp = spec(lhs, "N", "C")
    rhs_spec, rsp = spec(rhs, "O", "I")
    out_spec, osp = spec(out, "N", "C")
    # Spatial dims are matched by letter, in the order they appear in the rhs (kernel) spec.
    lhs_spec = lhs_spec[:2] + tuple(lhs.index(c) for c in rsp)
    out_spec = out_spec[:2] + tuple(out.index(c) for c in rsp)
    return ConvDimensionNumbers(lhs_spec, rhs_spec, out_spec)


def padtype_to_pads(in_shape, window_shape, window_strides, padding):
    """'SAME'/'VALID'/explicit pairs -> explicit ``(low, high)`` pairs (SAME puts the odd pad high)."""
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            return tuple((0, 0) for _ in in_shape)
        if mode in ("SAME", "SAME_LOWER"):
            pads = []
            for d, k, s in zip(in_shape, window_shape, window_strides):
                out = -(-d // s)
                total = max((out - 1) * s + k - d, 0)
                lo = total // 2 if mode == "SAME" else total - total // 2
                pads.append((lo, total - lo))
            return tuple(pads)
        raise errors.ShapeError(f"unknown padding '{padding}' (expected 'SAME', 'VALID' or pairs)")
    return tuple((int(lo), int(hi)) for lo, hi in padding)


def _conv_rule(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
               feature_group_count=1, batch_group_count=1, precision=None, preferred_element_type=None):
    dn = dimension_numbers
    if lhs.dtype != rhs.dtype:
        raise errors.DTypeError(f"conv_general_dilated requires equal dtypes, got "
                                f"{lhs.dtype.name}, {rhs.dtype.name}")
    if lhs.ndim != rhs.ndim or lhs.ndim < 2:
        raise errors.ShapeError(f"conv operands must have equal rank >= 2, got {lhs.shape}, {rhs.shape}")
    if batch_group_count != 1:
        raise errors.UnsupportedError("batch_group_count != 1 is not supported yet")
    nsp = lhs.ndim - 2
    if not (len(window_strides) == len(padding) == len(lhs_dilation) == len(rhs_dilation) == nsp):
        raise errors.ShapeError(f"conv strides/padding/dilations must each have {nsp} entries")
    cin = lhs.shape[dn.lhs_spec[1]]
    g = feature_group_count
    if cin != rhs.shape[dn.rhs_spec[1]] * g:
        raise errors.ShapeError(
            f"conv input features ({cin}) must equal kernel input features "
            f"({rhs.shape[dn.rhs_spec[1]]}) x feature_group_count ({g})")
    cout = rhs.shape[dn.rhs_spec[0]]
    if cout % g:
        raise errors.ShapeError(f"conv output features {cout} not divisible by feature_group_count {g}")
    out_sp = []
    for i in range(nsp):
        d = (lhs.shape[dn.lhs_spec[2 + i]] - 1) * lhs_dilation[i] + 1 if lhs.shape[dn.lhs_spec[2 + i]] else 0
        k = (rhs.shape[dn.rhs_spec[2 + i]] - 1) * rhs_dilation[i] + 1
        lo, hi = padding[i]
        padded = d + lo + hi
        if window_strides[i] < 1:
            raise errors.ShapeError(f"conv window stride must be >= 1, got {window_strides}")
        out_sp.append(max(0, (padded - k) // window_strides[i] + 1) if padded >= k else 0)
    out_shape = [0] * lhs.ndim
    out_shape[dn.out_spec[0]] = lhs.shape[dn.lhs_spec[0]]
    out_shape[dn.out_spec[1]] = cout
    for i in range(nsp):
        out_shape[dn.out_spec[2 + i]] = out_sp[i]
    dtype = np.dtype(preferred_element_type) if preferred_element_type is not None else lhs.dtype
    return ShapedArray(out_shape, dtype)


def _conv_impl(lhs, rhs, *, dimension_numbers, **params):
    dn = jax.lax.ConvDimensionNumbers(*dimension_numbers)
    return np.asarray(jax.lax.conv_general_dilated(lhs, rhs, dimension_numbers=dn, **params))


conv_general_dilated_p = _std_prim("conv_general_dilated", _conv_rule, impl=_conv_impl)


# ---------------------------------------------------------------------------------------
# User-facing functions.

def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    """General contraction (``jax.lax.dot_general``).

    ``dimension_numbers = ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``.
    Output dims: batch dims, then lhs free dims, then rhs free dims.
    """
    (lc, rc), (lb, rb) = dimension_numbers
    dn = ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))
    pet = canonicalize_dtype(preferred_element_type) if preferred_element_type is not None else None
    return dot_general_p.bind(lhs, rhs, dimension_numbers=dn, precision=precision,
                              preferred_element_type=pet)


def dot(lhs, rhs, precision=None, preferred_element_type=None):
    """Vector/matrix product contracting the last dim of ``lhs`` with the first of ``rhs``."""
    la, ra = get_aval(lhs), get_aval(rhs)
    if la.ndim not in (1, 2) or ra.ndim not in (1, 2):
        raise errors.ShapeError(f"lax.dot takes rank 1 or 2 operands, got {la.shape} and {ra.shape}")
    return dot_general(lhs, rhs, (((la.ndim - 1,), (0,)), ((), ())), precision, preferred_element_type)


def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None, rhs_dilation=None,
                         dimension_numbers=None, feature_group_count=1, batch_group_count=1,
                         precision=None, preferred_element_type=None):
    """N-d convolution (cross-correlation), as ``jax.lax.conv_general_dilated``.

    Args:
      lhs: input, e.g. NCHW ``[N, C, H, W]``; rhs: kernel, e.g. OIHW ``[O, I, kh, kw]``.
      window_strides: one int per spatial dim. padding: ``'SAME'``, ``'VALID'`` or
        ``[(low, high), ...]``; SAME puts the odd pad at the end.
      dimension_numbers: ``None`` (NCHW/OIHW/NCHW), strings like ``('NHWC', 'HWIO', 'NHWC')``
        or a ``ConvDimensionNumbers``.
    Raises:
      ShapeError / DTypeError naming the shapes and the caller's line.
    """
    la, ra = get_aval(lhs), get_aval(rhs)
    dn = conv_dimension_numbers(la.shape, ra.shape, dimension_numbers)
    nsp = la.ndim - 2
    window_strides = tuple(int(s) for s in window_strides)
    lhs_dilation = tuple(lhs_dilation) if lhs_dilation is not None else (1,) * nsp
    rhs_dilation = tuple(rhs_dilation) if rhs_dilation is not None else (1,) * nsp
    if isinstance(padding, str) and any(d != 1 for d in lhs_dilation):
        raise errors.ShapeError(
            f"conv_general_dilated: string padding '{padding}' is not defined with lhs_dilation "
            f"{lhs_dilation} (as in JAX); give explicit (low, high) pairs\n  at: {errors.user_source_line()}")
    if isinstance(padding, str):
        in_sp = [(la.shape[dn.lhs_spec[2 + i]] - 1) * lhs_dilation[i] + 1 for i in range(nsp)]
        k_sp = [(ra.shape[dn.rhs_spec[2 + i]] - 1) * rhs_dilation[i] + 1 for i in range(nsp)]
        padding = padtype_to_pads(in_sp, k_sp, window_strides, padding)
    else:
        padding = padtype_to_pads(None, None, None, padding)
    pet = canonicalize_dtype(preferred_element_type) if preferred_element_type is not None else None
    return _conv_batch_groups(
        lhs, rhs, window_strides=window_strides, padding=padding, lhs_dilation=lhs_dilation,
        rhs_dilation=rhs_dilation, dimension_numbers=dn, feature_group_count=feature_group_count,
        batch_group_count=batch_group_count, precision=precision, preferred_element_type=pet)


def _conv_batch_groups(lhs, rhs, *, dimension_numbers, batch_group_count=1, feature_group_count=1, **params):
    """``conv_general_dilated_p`` with XLA's ``batch_group_count`` G (what ``jax.grad`` of a
    grouped convolution binds for the kernel's cotangent) as G convolutions: group g convolves
    the lhs batch elements ``[g*N/G, (g+1)*N/G)`` with the kernel's output features
    ``[g*O/G, (g+1)*O/G)``, concatenated along the output's feature dim (output batch N/G).
    ``dimension_numbers`` is a ``ConvDimensionNumbers``; the other params are the primitive's.
    Raises JAX's ``ValueError`` texts (as ``ShapeError``) for a G that divides neither size or
    both group counts above 1."""
    g, fg = int(batch_group_count), int(feature_group_count)
    if g == 1:
        return conv_general_dilated_p.bind(lhs, rhs, dimension_numbers=dimension_numbers, batch_group_count=1,
                                           feature_group_count=fg, **params)
    from minixla.lax.structural import concatenate, slice_in_dim
    dn = dimension_numbers
    n, o = get_aval(lhs).shape[dn.lhs_spec[0]], get_aval(rhs).shape[dn.rhs_spec[0]]
    if fg != 1:
        raise errors.ShapeError(f"At most one of batch_group_count and feature_group_count may be > 1, "
                                f"got batch_group_count={g} and feature_group_count={fg}")
    if g < 1 or n % g:
        raise errors.ShapeError(f"conv_general_dilated batch_group_count must divide lhs batch dimension "
                                f"size, but {g} does not divide {n}.")
    if o % g:
        raise errors.ShapeError(f"conv_general_dilated rhs output feature dimension size must be a multiple "
                                f"of batch_group_count, but {o} is not a multiple of {g}.")
    outs = [conv_general_dilated_p.bind(
        slice_in_dim(lhs, i * (n // g), (i + 1) * (n // g), axis=dn.lhs_spec[0]),
        slice_in_dim(rhs, i * (o // g), (i + 1) * (o // g), axis=dn.rhs_spec[0]),
        dimension_numbers=dn, batch_group_count=1, feature_group_count=1, **params) for i in range(g)]
    return concatenate(outs, dn.out_spec[1])


def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    """``conv_general_dilated`` in NCHW/OIHW layout with no dilation (``jax.lax.conv``);
    ``padding`` is ``'SAME'``/``'VALID'``. Shapes, dtypes and errors as ``conv_general_dilated``."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                              precision=None, preferred_element_type=None):
    """``conv_general_dilated`` in NCHW/OIHW layout with explicit ``(low, high)`` padding (or a
    padding string) and dilations (``jax.lax.conv_with_general_padding``)."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation,
                                rhs_dilation=rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_general_dilated_patches(lhs, filter_shape, window_strides, padding, lhs_dilation=None,
                                 rhs_dilation=None, dimension_numbers=None, precision=None,
                                 preferred_element_type=None):
    """The patches a convolution with a ``filter_shape`` window sees
    (``jax.lax.conv_general_dilated_patches``): for an input of ``C`` channels, an output of
    ``C * prod(filter_shape)`` features (channel-major, then the window's taps in row-major
    order) laid out by ``dimension_numbers``'s output spec. As JAX computes it: a grouped
    convolution (one group per channel) with a one-hot kernel, so an ``inf``/``NaN`` tap gives
    ``NaN`` in the other taps' features of that window, as in JAX."""
    from minixla.lax import elementwise as ew, structural as st
    la = get_aval(lhs)
    filter_shape = tuple(int(d) for d in filter_shape)
    dn = conv_dimension_numbers(la.shape, (1, 1) + filter_shape, dimension_numbers)
    taps, channels = math.prod(filter_shape), la.shape[dn.lhs_spec[1]]
    eye = ew.convert_element_type(ew.eq(st.broadcasted_iota(np.int32, (taps, taps), 0),
                                        st.broadcasted_iota(np.int32, (taps, taps), 1)), la.dtype)
    rhs = st.reshape(st.broadcast_in_dim(eye, (channels, taps, taps), (1, 2)), (channels * taps, 1) + filter_shape)
    # (O, I, *window) -> the layout the rhs spec names: dimension rhs_spec[k] holds logical dim k
    perm = [0] * (2 + len(filter_shape))
    for k, d in enumerate(dn.rhs_spec):
        perm[d] = k
    rhs = st.transpose(rhs, tuple(perm))
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, dn,
                                feature_group_count=channels, precision=precision,
                                preferred_element_type=preferred_element_type)
