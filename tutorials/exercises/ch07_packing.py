"""Tutorial 07's exercise: packing a panel of B, and the roofline model.

1. ``pack_panel(b, k0, kc, j0, nr)``: ``b`` is a 2-D ``K x N`` array. Return a new C-contiguous
   ``(kc, nr)`` array of ``b``'s dtype holding ``b[k0:k0+kc, j0:j0+nr]``; where that block runs
   past the last row or column of ``b``, the missing entries are zeros (so an edge tile can be
   computed by the same full-size micro-kernel: zero rows of B add nothing to a dot).
2. ``attainable_gflops(flops, nbytes, peak_gflops, bandwidth_gbs)``: the roofline bound in
   GFLOP/s of a kernel doing ``flops`` floating point operations on ``nbytes`` bytes of memory
   traffic, on a machine with an FMA peak of ``peak_gflops`` GFLOP/s and a memory bandwidth of
   ``bandwidth_gbs`` GB/s (a float).

Check: ``MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch07_packing.py``.
"""


def pack_panel(b, k0: int, kc: int, j0: int, nr: int):
    raise NotImplementedError("tutorial 07 exercise: write pack_panel")


def attainable_gflops(flops: float, nbytes: float, peak_gflops: float, bandwidth_gbs: float) -> float:
    raise NotImplementedError("tutorial 07 exercise: write attainable_gflops")
