"""Tutorial 07's exercise: ``pack_panel`` packs (and zero-pads) a panel of B, and a blocked GEMM
built on it multiplies right; ``attainable_gflops`` is the roofline bound."""
import numpy as np
import pytest

from _exercise import exercise_module


@pytest.mark.parametrize("k0,kc,j0,nr", [(0, 4, 0, 8), (2, 4, 8, 8), (8, 4, 0, 16), (9, 3, 13, 4), (0, 16, 0, 32)])
def test_pack_panel(k0, kc, j0, nr):
    b = np.arange(10 * 16, dtype=np.float32).reshape(10, 16) + 1  # no zeros inside b
    got = exercise_module("ch07_packing").pack_panel(b, k0, kc, j0, nr)
    want = np.zeros((kc, nr), np.float32)
    rows, cols = max(0, min(kc, 10 - k0)), max(0, min(nr, 16 - j0))
    want[:rows, :cols] = b[k0:k0 + rows, j0:j0 + cols]
    assert got.shape == (kc, nr) and got.dtype == b.dtype and got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)
    got[...] = -1  # a copy, not a view of b
    assert b.min() == 1


def _blocked_matmul(a, b, pack, kc, nr, mr):
    """C = A @ B, K block by K block, panel by panel, tile by tile, from packed panels."""
    m, k = a.shape
    n = b.shape[1]
    c = np.zeros((-(-m // mr) * mr, -(-n // nr) * nr), np.float64)
    a_pad = np.zeros((c.shape[0], -(-k // kc) * kc))
    a_pad[:m, :k] = a
    for k0 in range(0, k, kc):
        for j0 in range(0, n, nr):
            panel = pack(b, k0, kc, j0, nr)
            assert panel.shape == (kc, nr)
            for i0 in range(0, m, mr):
                c[i0:i0 + mr, j0:j0 + nr] += a_pad[i0:i0 + mr, k0:k0 + kc] @ panel
    return c[:m, :n]


@pytest.mark.parametrize("m,k,n", [(8, 16, 32), (7, 13, 19), (1, 5, 3)])
def test_blocked_gemm_on_packed_panels(m, k, n, rng):
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    got = _blocked_matmul(a, b, exercise_module("ch07_packing").pack_panel, kc=4, nr=8, mr=4)
    np.testing.assert_allclose(got, a @ b, rtol=1e-12, atol=1e-12)


def test_attainable_gflops():
    f = exercise_module("ch07_packing").attainable_gflops
    assert f(100, 1000, 50.0, 20.0) == pytest.approx(2.0)              # memory-bound: 0.1 flop/byte x 20 GB/s
    assert f(2 * 512 ** 3, 3 * 512 ** 2 * 4, 100.0, 20.0) == pytest.approx(100.0)  # compute-bound: the peak
    assert f(6e9, 1e9, 60.0, 10.0) == pytest.approx(60.0)              # exactly on the ridge
