"""Tutorial 08's exercise: the distance between two float32 arrays in ulp.

Write ``ulp_distance(a, b) -> np.ndarray``: for float32 arrays ``a`` and ``b`` of one shape, the
number of float32 values one must step over to go from ``a[i]`` to ``b[i]``, as ``int64``, of
their shape:

- 0 when the two are equal, ``-0.0`` and ``+0.0`` included; 1 between neighbours
  (``np.nextafter``), across zero as well (the smallest subnormal and its negative are 2 apart);
- ``+inf`` is 1 past the largest finite float;
- NaN against NaN is 0; NaN against anything else is ``np.iinfo(np.int64).max``.

Hint: the bit patterns of non-negative floats, read as integers (``a.view(np.int32)``), are in
the floats' order; those of negative floats in reverse order. Map both onto one number line.

Check: ``MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch08_ulp_distance.py``.
"""
import numpy as np  # noqa: F401 (for your code)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    raise NotImplementedError("tutorial 08 exercise: write ulp_distance")
