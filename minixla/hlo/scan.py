"""Recognizing a cumulative reduction (a *scan*) written as a ``reduce-window``.

JAX lowers ``cumsum``/``cumprod``/``cummax``/``cummin`` along axis ``a`` of length ``n`` to a
``reduce-window`` whose window covers the whole axis (size ``n``, stride 1, no dilation) padded by
``(n-1, 0)``, so output ``i`` reduces elements ``0..i`` (``(0, n-1)`` when reversed: ``i..n-1``),
every other dim having a window of 1. Computed window by window that is O(n^2) work; XLA:CPU
rewrites such a window into a scan along the axis, O(n). ``scan_axis`` is the one test the
fusion pass, the LLVM backend (``backends/llvm/scan.py``) and the HLO evaluator share.
"""
from __future__ import annotations

import numpy as np


def scan_axis(instr) -> tuple[int, bool] | None:
    """``(axis, reverse)`` when ``instr`` is a one-operand ``reduce-window`` computing a prefix
    (``reverse=False``) or suffix (``reverse=True``) reduction along ``axis``; else ``None``.

    A window over an axis of length 1 is not a scan (each output is one element: elemental code
    is already O(n)). Mirrors the windows XLA:CPU's ``ReduceWindowRewriter`` turns into scans.
    """
    if instr.opcode != "reduce-window" or len(instr.operands) != 2 or instr.shape.is_tuple:
        return None
    w = instr.attrs["window"]
    dims = instr.operands[0].shape.dims
    if tuple(instr.shape.dims) != tuple(dims):
        return None
    if any(s != 1 for s in w["stride"]) or any(d != 1 for d in (*w["lhs_dilate"], *w["rhs_dilate"])):
        return None
    found = None
    for d, (n, size, pad) in enumerate(zip(dims, w["size"], w["pad"])):
        pad = tuple(pad)
        if size == 1 and pad == (0, 0):
            continue
        if found is not None or n < 2 or size != n or pad not in ((n - 1, 0), (0, n - 1)):
            return None
        found = (d, pad == (0, n - 1))
    return found


#: below this axis length a suffix scan whose order matters is computed window by window.
SHORT_AXIS = 32


def scan_keeps_window_order(instr) -> bool:
    """Whether a running accumulator gives the window's own values bit for bit.

    A prefix window is reduced in scan order anyway: ``((init . x0) . x1) ...``. A suffix
    window reduces ``x_i, x_i+1, ...`` left to right, while the scan from the end computes
    ``x_i . (x_i+1 . ...)``: the same only for exactly associative and commutative reducers,
    i.e. integer and bool dtypes. (For float sums XLA itself only keeps the window order on
    short axes; longer ones it scans as a tree, so there the values agree to rounding.)
    """
    _axis, reverse = scan_axis(instr)
    dtype = instr.shape.dtype
    return not reverse or np.dtype(dtype).kind in "biu"


def runs_as_scan(instr) -> bool:
    """``scan_axis(instr)`` holds and a running accumulator computes it (the HLO evaluator's
    test): always unless the window order matters (``scan_keeps_window_order``) and the axis is
    short, where each window is reduced in its own order (JAX eager's bits; at most 32^2 steps
    per position). The LLVM scan kernel makes the same choice inside the kernel."""
    found = scan_axis(instr)
    if found is None:
        return False
    return scan_keeps_window_order(instr) or instr.shape.dims[found[0]] >= SHORT_AXIS
