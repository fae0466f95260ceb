"""Claims of the README's Status section, checked."""
import numpy as np

import minixla
import minixla.numpy as mnp


def test_eager_results_are_numpy_arrays_and_jit_follows_jax():
    # "Outside jit, minixla functions return NumPy arrays ... mnp.arange(5) + 1.5 is float64
    # eagerly, float32 under jit"
    eager = mnp.arange(5) + 1.5
    assert type(mnp.arange(5)) is np.ndarray and eager.dtype == np.float64
    assert minixla.jit(lambda: mnp.arange(5) + 1.5)().dtype == np.float32
