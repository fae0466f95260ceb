"""Reference solution of tutorial 07's exercise (see ``tutorials/exercises/ch07_packing.py``)."""
import numpy as np


def pack_panel(b, k0: int, kc: int, j0: int, nr: int):
    out = np.zeros((kc, nr), b.dtype)
    block = b[k0:k0 + kc, j0:j0 + nr]
    out[:block.shape[0], :block.shape[1]] = block
    return out


def attainable_gflops(flops: float, nbytes: float, peak_gflops: float, bandwidth_gbs: float) -> float:
    return float(min(peak_gflops, bandwidth_gbs * flops / nbytes))
