"""Tutorial 12's exercise: pad to a few bucket sizes, so a jitted function compiles once per bucket.

Write ``pad_to_bucket(x, buckets) -> (padded, n)``: ``x`` a numpy array of any dtype with at least
one dimension, ``buckets`` a sequence of positive sizes (any order). Return

- ``padded``: ``x`` padded with zeros along axis 0 to the smallest bucket ``>= len(x)`` (the
  other dimensions and the dtype unchanged; ``x`` itself is never modified);
- ``n``: the true length ``len(x)`` as an ``np.int32`` scalar (an array: passing it to a jitted
  function adds no static value to the signature).

An ``x`` longer than the largest bucket raises ``ValueError`` naming its length and the largest
bucket; an empty ``buckets`` or a bucket ``< 1`` raises ``ValueError`` too.

Check: ``MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_ch12_buckets.py``.
"""
import numpy as np  # noqa: F401 (for your code)


def pad_to_bucket(x, buckets):
    raise NotImplementedError("tutorial 12 exercise: write pad_to_bucket")
