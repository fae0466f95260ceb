"""Tutorial 08's exercise: ``ulp_distance`` counts the float32 values between two floats."""
import numpy as np
import pytest

from _exercise import exercise_module

TINY = np.float32(1e-45)  # the smallest subnormal
BIG = np.finfo(np.float32).max
NAN_MAX = np.iinfo(np.int64).max

PAIRS = [
    (1.0, 1.0, 0), (-0.0, 0.0, 0), (0.0, -0.0, 0),
    (1.0, np.nextafter(np.float32(1), np.float32(2)), 1),
    (1.0, np.nextafter(np.float32(1), np.float32(0)), 1),
    (1.0, 2.0, 2**23), (-1.0, -2.0, 2**23), (-1.0, 1.0, 2 * 0x3F800000),
    (TINY, -TINY, 2), (TINY, 0.0, 1), (-TINY, 0.0, 1), (TINY, 2 * TINY, 1),
    (BIG, np.inf, 1), (-BIG, -np.inf, 1), (-np.inf, np.inf, 2 * 0x7F800000),
    (np.nan, np.nan, 0), (np.nan, 1.0, NAN_MAX), (np.inf, np.nan, NAN_MAX), (-0.0, np.nan, NAN_MAX),
]


@pytest.mark.parametrize("a,b,want", PAIRS, ids=[f"{a}_{b}" for a, b, _ in PAIRS])
def test_pairs(a, b, want):
    ulp_distance = exercise_module("ch08_ulp_distance").ulp_distance
    got = ulp_distance(np.array([a], np.float32), np.array([b], np.float32))
    assert got.dtype == np.int64 and got.shape == (1,)
    assert int(got[0]) == want


def test_random_neighbours_and_shape(rng):
    """Walk k steps with nextafter from random floats of every magnitude and sign: the
    distance is k, both ways, and the result has the inputs' shape."""
    ulp_distance = exercise_module("ch08_ulp_distance").ulp_distance
    bits = rng.integers(0, 2**32, 60, dtype=np.uint64).astype(np.uint32)
    a = bits.view(np.float32)
    a = np.where(np.isfinite(a), a, np.float32(3.0)).reshape(3, 4, 5)
    k = rng.integers(0, 6, a.shape)
    b = a.copy()
    direction = np.where(rng.random(a.shape) < 0.5, -np.inf, np.inf).astype(np.float32)
    for step in range(5):
        move = k > step
        b = np.where(move, np.nextafter(b, direction), b)
    got = ulp_distance(a, b)
    assert got.shape == a.shape
    np.testing.assert_array_equal(got, ulp_distance(b, a))
    simple = (a != 0) & (np.sign(a) == np.sign(b))  # (walks across zero: the pairs above)
    np.testing.assert_array_equal(got[simple], k[simple])
