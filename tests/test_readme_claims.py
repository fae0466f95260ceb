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


def test_readme_spmd_partitioner_example():
    # "Sharding and multiple devices": the partitioned Megatron MLP printed in the README.
    import os
    import re

    from jax.sharding import PartitionSpec as P

    from minixla.sharding import evaluate_partitioned, partition
    readme = open(os.path.join(os.path.dirname(__file__), "..", "README.md")).read()
    section = readme[readme.index("### minixla's SPMD partitioner"):]
    shown = re.search(r"```\n(HloModule jit_mlp, num_partitions=2\n.*?)```", section, re.S).group(1)

    def mlp(x, w1, w2):
        return mnp.tanh(x @ w1) @ w2
    x, w1, w2 = np.ones((8, 4), np.float32), np.ones((4, 6), np.float32), np.ones((6, 3), np.float32)
    m = partition(mlp, {"model": 2}, in_specs=(P(), P(None, "model"), P("model", None)),
                  out_specs=P(), args=(x, w1, w2))
    assert m.to_string() == shown
    np.testing.assert_allclose(evaluate_partitioned(m, x, w1, w2), np.tanh(x @ w1) @ w2, rtol=1e-6)
