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
    # "a result JAX types weakly ... is a WeakArray ... broadcast_in_dim(1.0, (3,), ()) +
    # float16_array is float16"; "mnp.float16(x) is asarray(x, float16)"
    weak = minixla.lax.broadcast_in_dim(1.0, (3,), ())
    assert isinstance(weak, np.ndarray) and weak.weak_type
    assert (weak + np.ones(3, np.float16)).dtype == np.float16
    assert mnp.float16(np.ones(2)).dtype == np.float16 and np.dtype(mnp.float16) == np.float16


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


def test_performance_tables_name_their_host():
    # "the table says which host it came from": every table of the current harness in the
    # Performance section follows its host report (CPU, LLVM target, vector ISA, threads), has
    # the harness's columns, and the section gives the one-line commands that regenerate them.
    import pathlib
    import re

    from benchmarks import run

    readme = (pathlib.Path(__file__).parent.parent / "README.md").read_text()
    section = readme.split("\n## Performance\n", 1)[1].split("\n### Training steps\n", 1)[0]
    assert "`python -m benchmarks --markdown`" in section and "`python -m benchmarks --cpu haswell --markdown`" in section
    columns = run.format_table({"limits": {}, "results": []}, header=False).splitlines()[0]
    blocks = section.split(columns)
    assert len(blocks) == 4, "the Intel host's table, its restricted (AVX2) table, the AMD host's table"
    for before in blocks[:-1]:
        host = before.rsplit("\n- Host: ", 1)[1]
        assert re.search(r"\n- minixla: LLVM [\d.]+ \(llvmlite [\d.]+\) targets `[\w-]+` .*features, \d+ thread", host)
        assert re.search(r"\n- XLA:CPU: jax [\d.]+ / jaxlib [\d.]+, \d+ intra-op thread", host)
        assert "15 interleaved rounds" in host and "10th..90th percentile" in host
    assert "targets `haswell` (restricted" in blocks[1]
    assert "targets `rocketlake` (the host)" in blocks[0] and "targets `znver4` (the host)" in blocks[2]


def test_readme_blocked_sum_order_differs_from_eager_as_stated():
    import jax.numpy as jnp
    x = np.array([1e8, 1, -1e8, 1], np.float32)
    assert float(jnp.sum(x)) == 1.0 and float(minixla.jit(mnp.sum)(x)) == 2.0
