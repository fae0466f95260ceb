"""Tutorial 12's exercise: ``pad_to_bucket`` makes a jitted function compile once per bucket."""
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from _exercise import exercise_module


def test_pads_to_the_smallest_bucket_and_keeps_the_input():
    pad_to_bucket = exercise_module("ch12_buckets").pad_to_bucket
    x = np.arange(10, dtype=np.int16).reshape(5, 2)
    before = x.copy()
    padded, n = pad_to_bucket(x, (16, 8, 4))
    assert padded.shape == (8, 2) and padded.dtype == np.int16
    np.testing.assert_array_equal(padded[:5], x)
    assert not padded[5:].any()
    assert isinstance(n, np.ndarray) or isinstance(n, np.generic)
    assert n.dtype == np.int32 and int(n) == 5
    np.testing.assert_array_equal(x, before)
    exact, m = pad_to_bucket(np.ones(4, np.float32), [4, 8])
    assert exact.shape == (4,) and int(m) == 4


@pytest.mark.parametrize("x,buckets", [(np.ones(9), (4, 8)), (np.ones(2), ()), (np.ones(2), (0, 4))])
def test_errors(x, buckets):
    pad_to_bucket = exercise_module("ch12_buckets").pad_to_bucket
    with pytest.raises(ValueError):
        pad_to_bucket(x, buckets)


def test_one_compile_per_bucket():
    pad_to_bucket = exercise_module("ch12_buckets").pad_to_bucket

    def total(tokens, n):
        return mnp.sum(mnp.where(mnp.arange(tokens.shape[0]) < n, tokens, 0.0))
    f = minixla.jit(total, backend="jax")
    for length in range(1, 13):
        tokens = np.arange(1, length + 1, dtype=np.float32)
        assert float(f(*pad_to_bucket(tokens, (4, 8, 16)))) == tokens.sum()
    assert f._cache_size() == 3
