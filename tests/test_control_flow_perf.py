"""How loops run on the LLVM backend (issue 15's performance levers), checked for values.

- Small kernels of loop bodies, conditions and branches are defined in the calling code and
  inlined into the loop (``control_flow.inline_in_driver``); they rely on the driver having
  set MXCSR's flush-to-zero bits, so denormals must still flush as in JAX, and the caller's
  MXCSR must come back unchanged.
- ``benchmarks/control_flow.py --fast`` runs and agrees with JAX.
"""
import jax
import jax.numpy as jnp
import numpy as np

import minixla
from minixla import lax


def _jax_value(f, *args):
    with jax.disable_jit():  # (jax arrays: NumPy's own arithmetic keeps subnormals)
        return np.asarray(f(*[jnp.asarray(a) for a in args]))


def test_small_loop_kernels_are_inlined_and_flush_denormals_as_jax():
    # c * 0.5 leaves the normal range on the 3rd trip: XLA:CPU flushes it to 0 (FTZ/DAZ)
    def loop(c):
        return lax.fori_loop(0, 4, lambda i, c: c * 0.5 + c * 0.0, c)

    def branch(p, x):
        return lax.cond(p, lambda x: x * 0.25, lambda x: x * 4.0, x)

    def jloop(c):
        return jax.lax.fori_loop(0, 4, lambda i, c: c * 0.5 + c * 0.0, c)

    def jbranch(p, x):
        return jax.lax.cond(p, lambda x: x * 0.25, lambda x: x * 4.0, x)

    c = np.full(8, 4e-38, np.float32)
    fl = minixla.jit(loop)
    np.testing.assert_array_equal(fl(c), _jax_value(jloop, c))
    assert float(np.asarray(fl(c))[0]) == 0.0
    x = np.full(8, 2e-38, np.float32)
    np.testing.assert_array_equal(minixla.jit(branch)(True, x), _jax_value(jbranch, True, x))
    np.testing.assert_array_equal(minixla.jit(branch)(False, x), _jax_value(jbranch, False, x))
    # the caller's floating-point mode is back: NumPy still computes subnormals
    assert np.float32(4e-38) * np.float32(0.5) != 0
    # the loop's kernels are defined in the calling code and no call of them is left
    exe = fl.lower(c).compile().executable
    assert "minixla.inline" in exe.llvm_ir
    step = exe._jit.function_ir("minixla.seq0")
    assert "call void @minixla.inline" not in step and "@minixla_k_" not in step, step


def test_control_flow_benchmark_runs_fast():
    from benchmarks import control_flow
    out = control_flow.main(["--fast"])
    assert {r["name"] for r in out["rows"]} == {"rnn_scan", "rnn_grad", "fori_100"}
    for row in out["rows"]:
        assert row["max_abs_diff"] < 1e-4, row
        assert row["ratio"] > 0 and row["cpu_ratio"] > 0
    assert out["compile_short_ms"] > 0 and out["compile_long_ms"] > 0


def test_loop_program_is_written_to_and_read_from_the_persistent_cache(tmp_path):
    # (was: "cannot serialize": the loop's compile context held closures)
    from minixla import cache as pc
    def f(x):
        return lax.fori_loop(0, 9, lambda i, c: c * 0.5 + lax.cond(i > 4, lambda: 1.0, lambda: 0.25), x)
    x = np.ones(4, np.float32)
    with minixla.config.override(minixla_compilation_cache_dir=str(tmp_path / "cache"),
                                 minixla_persistent_cache_min_compile_time_secs=0.0):
        first = minixla.jit(f).lower(x).compile()
        again = minixla.jit(f).lower(x).compile()
    pc.enable_jax_cache()  # (JAX's own settings back)
    assert not first.persistent_cache_hit and again.persistent_cache_hit
    expected = _jax_value(lambda x: jax.lax.fori_loop(
        0, 9, lambda i, c: c * 0.5 + jax.lax.cond(i > 4, lambda: 1.0, lambda: 0.25), x), x)
    np.testing.assert_array_equal(again(x), expected)
