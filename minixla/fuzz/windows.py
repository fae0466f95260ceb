"""The fuzzer's ``windows`` op family (``families.py`` draws it): ``lax.reduce_window`` with
``lax.max``/``lax.min``/``lax.add`` (max, min, sum and average pooling) and ``lax.conv_transpose``.

- ``reduce_window``: rank 1-4 operands (a lower-rank value gains leading size-1 dims inside the
  op), window dims 1-3, strides 1-3, ``"VALID"``/``"SAME"``/explicit (asymmetric, zero) padding,
  base and window dilation 1-2; float32/float16/bfloat16 and int32. ``max``/``min`` start from
  the identity (``-inf``/``+inf``, the integer extremes) or from the dtype's finite min/max (not
  the identity: XLA folds it into every window); ``add`` from 0; ``avg`` is the sum divided by
  the count of real (not padded, not hole) elements in each window, itself a window sum of ones.
- ``conv_transpose``: 1-D and 2-D, strides 1-2, ``"VALID"``/``"SAME"``/explicit padding (as is, or
  with ``use_consistent_padding``), kernel dilation 1-2, the default (channels-last) or the
  channels-first dimension numbers, ``transpose_kernel`` either way; a small constant kernel of
  multiples of 1/4.

Exactness, as ``programs.classify``'s reductions: ``max``/``min`` windows only read exact values
and are bit for bit (their derivative jumps at a tie: exact points keep ``grad`` checkable);
sums, averages and convolutions only read *nice* values (multiples of 1/4, at most 16 in
magnitude), whose float32 sums are exact in any order. float16 and bfloat16 accumulate in their
own precision (XLA's CPU reduce-window adds in the operand's type), so a window of ``n`` taps is
exact only while ``64 n <= 2^p`` (``p`` the significand bits); past that the result carries a
tolerance of ``n`` ulps of the largest partial sum (``16 n``), which only data movement reads.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
#: dtypes a window op reads (another dtype is skipped)
WINDOW_DTYPES = (np.dtype(np.float32), F16, BF16, np.dtype(np.int32))
#: significand bits (with the implicit one) of the narrow floats
_BITS = {F16: 11, BF16: 8}
#: the largest magnitude of a nice value (``programs.nice_floats``)
NICE_MAX = 16


def _is_float(dt):
    return np.dtype(dt).kind == "f" or np.dtype(dt) == BF16


def _lift(np_, x, rank):
    """``x`` with leading size-1 dims up to ``rank``."""
    return np_.reshape(x, (1,) * (rank - x.ndim) + tuple(x.shape))


def _init(fn, dtype, which):
    """The init value of a ``max``/``min``/``add`` window: the identity, or (``which == "finite"``)
    the dtype's finite extreme."""
    dtype = np.dtype(dtype)
    if fn in ("sum", "avg"):
        return np.zeros((), dtype)[()]
    info = ml_dtypes.finfo(dtype) if _is_float(dtype) else np.iinfo(dtype)
    if which == "finite" or not _is_float(dtype):
        return np.asarray(info.min if fn == "max" else info.max, dtype)[()]
    return np.asarray(-np.inf if fn == "max" else np.inf, dtype)[()]


def _window(np_, lax_, x, fn, p):
    comp = {"max": lax_.max, "min": lax_.min}.get(fn, lax_.add)
    return lax_.reduce_window(x, _init(fn, x.dtype, p["init"]), comp, p["dims"], p["strides"], p["padding"],
                              p["base_dilation"], p["window_dilation"])


def _windows(np_, lax_, args, p):
    fn = p["fn"]
    x = _lift(np_, args[0], p["rank"])
    if fn == "conv_transpose":
        w = np.asarray(p["w"]).astype(x.dtype)
        kw = dict(use_consistent_padding=True) if p["consistent"] else {}
        return lax_.conv_transpose(x, w, p["strides"], p["padding"], rhs_dilation=p["rhs_dilation"],
                                   dimension_numbers=p["dn"], transpose_kernel=p["transpose_kernel"], **kw)
    if fn != "avg":
        return _window(np_, lax_, x, fn, p)
    total = _window(np_, lax_, x, "sum", p)
    count = _window(np_, lax_, np_.ones(x.shape, x.dtype), "sum", p)
    return total / count


_PADDING = st.sampled_from(["VALID", "SAME", "explicit"])


def draw_windows(draw, vals, k):
    x = vals[k]
    if x.dtype not in WINDOW_DTYPES or len(x.shape) > 4:
        return None
    fn = draw(st.sampled_from(["max", "min", "sum", "avg", "conv_transpose", "conv_transpose"]))
    if fn == "conv_transpose":
        return _draw_conv_transpose(draw, x, k)
    if fn == "avg" and not _is_float(x.dtype):
        return None
    rank = draw(st.integers(max(len(x.shape), 1), 4))
    pad = draw(_PADDING)
    if pad == "explicit":
        pad = tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in range(rank))
    return "fam_windows", [k], dict(
        fn=fn, rank=rank, init=draw(st.sampled_from(["identity", "identity", "finite"])),
        dims=tuple(draw(st.integers(1, 3)) for _ in range(rank)),
        strides=tuple(draw(st.integers(1, 3)) for _ in range(rank)), padding=pad,
        base_dilation=tuple(draw(st.sampled_from([1, 1, 2])) for _ in range(rank)),
        window_dilation=tuple(draw(st.sampled_from([1, 1, 2])) for _ in range(rank)))


#: spatial rank -> the default (channels-last) and the channels-first dimension numbers
LAYOUTS = {1: [None, ("NCH", "OIH", "NCH")], 2: [None, ("NCHW", "OIHW", "NCHW")]}


def _draw_conv_transpose(draw, x, k):
    if not _is_float(x.dtype):
        return None
    rank = draw(st.integers(max(len(x.shape), 3), 4))
    sp = rank - 2
    dn = draw(st.sampled_from(LAYOUTS[sp]))
    shape = (1,) * (rank - len(x.shape)) + x.shape
    c = shape[1] if dn else shape[-1]
    transpose_kernel = draw(st.booleans())
    ksize = tuple(draw(st.integers(1, 3)) for _ in range(sp))
    o = draw(st.integers(1, 2))
    # the kernel's "I" dim must hold lhs's channels (its "O" dim once transpose_kernel swaps them)
    i_, o_ = (o, c) if transpose_kernel else (c, o)
    wshape = (o_, i_) + ksize if dn else ksize + (i_, o_)
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    pad = draw(_PADDING)
    consistent = False
    if pad == "explicit":
        pad = tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in range(sp))
        consistent = draw(st.booleans())
    return "fam_windows", [k], dict(
        fn="conv_transpose", rank=rank, dn=dn, transpose_kernel=transpose_kernel, consistent=consistent,
        w=rng.integers(-8, 9, wshape) / 4, strides=tuple(draw(st.integers(1, 2)) for _ in range(sp)),
        padding=pad, rhs_dilation=tuple(draw(st.integers(1, 2)) for _ in range(sp)))


def _taps(p):
    """The most elements one output sums (conv: kernel taps times input channels)."""
    if p["fn"] == "conv_transpose":
        return int(np.prod(np.shape(p["w"])))
    return int(np.prod(p["dims"]))


def windows_flags(p, args):
    """(exact, nice[, tol]) of a window op's result (see the module docstring)."""
    x = args[0]
    if p["fn"] in ("max", "min"):  # (a finite init is a huge value: not nice)
        return (True, x.nice and p["init"] == "identity") if x.exact else None
    if _is_float(x.dtype) and not x.nice:
        return None
    if not _is_float(x.dtype):
        return x.exact, False
    n = _taps(p)
    # a sum term: a nice value (quarters up to 16), or one times a kernel entry (quarters up to 2)
    quanta, largest = (4 * 4 * 2 * NICE_MAX, 2 * NICE_MAX) if p["fn"] == "conv_transpose" else (4 * NICE_MAX, NICE_MAX)
    if x.dtype in _BITS and quanta * n > 2 ** _BITS[x.dtype]:
        eps = float(ml_dtypes.finfo(x.dtype).eps)
        return False, False, (2 * n * eps, float(largest * n), 0.0)
    return x.exact, False


OPS = {"fam_windows": _windows}
__all__ = ["draw_windows", "windows_flags", "OPS"]
