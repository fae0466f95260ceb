"""Reference solution of tutorial 02's exercise (see ``tutorials/exercises/ch02_popcnt.py``)."""
import numpy as np


def popcnt(instr, x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    bits = x.view(np.dtype(f"u{x.dtype.itemsize}"))  # the two's-complement bit pattern
    counts = np.zeros(x.shape, np.int64)
    for _ in range(8 * x.dtype.itemsize):
        counts += (bits & 1).astype(np.int64)
        bits = bits >> 1
    return counts.astype(x.dtype)
