"""The benchmark suite runs end to end in a tiny mode (no timing is checked, only that every
workload runs on every framework, agrees with jax, and the table/JSON/plot are written)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks import run, workloads as W


def test_suite_runs_tiny(tmp_path, capsys):
    suite = run.main(["--scale", "0.002", "--repeat", "1", "--min-sample-ms", "0", "--compile-repeat", "1",
                      "--quick-limits", "--out", str(tmp_path), "--no-plot"])
    names = [r["name"] for r in suite["results"]]
    assert names == [w.name for w in W.workloads()]
    for r in suite["results"]:
        assert set(r["time_ms"]) == set(run.FRAMEWORKS)
        assert all(t > 0 for t in r["time_ms"].values())
        assert r["compile_ms"]["minixla"] > 0 and r["compile_ms"]["jax"] > 0
        assert r["max_norm_diff_vs_jax"] < 1e-4, r["name"]
    lim = suite["limits"]
    assert lim["fma_gflops"] > 0 and lim["copy_gbs"] > 0
    saved = json.loads((tmp_path / "benchmarks.json").read_text())
    assert [r["name"] for r in saved["results"]] == names
    table = capsys.readouterr().out
    assert "| workload |" in table and "peak FMA" in table


def test_plot_is_written(tmp_path):
    pytest.importorskip("matplotlib")
    suite = run.run_suite(W.workloads(0.001)[:2], scale=0.001, repeat=1, min_sample_ms=0, settle_ms=0, compile_repeat=0,
                          quick_limits=True, log=lambda *a: None)
    assert run.plot(suite, tmp_path / "b.png").stat().st_size > 0
    assert "selu" in run.format_table(suite)


def test_workloads_agree_with_numpy_at_small_scale():
    """The same program text gives the same answer on the three namespaces."""
    import jax
    import minixla

    for w in W.workloads(0.001):
        args = w.make_args(np.random.default_rng(1), 0.001)
        ref = np.asarray(w.fn(W.numpy_namespace(), *args), np.float64)
        mx = minixla.jit(lambda *a: w.fn(W.minixla_namespace(), *a))(*args)
        jx = jax.jit(lambda *a: w.fn(W.jax_namespace(), *a))(*args)
        for out in (mx, jx):
            np.testing.assert_allclose(np.asarray(out, np.float64), ref, rtol=2e-4, atol=2e-5, err_msg=w.name)


def test_sweep_grid():
    sweep = W.sweep_workloads()
    assert len(sweep) == len(W.SWEEP_BATCH) * len(W.SWEEP_SEQ)
    q, k, v = sweep[0].make_args(np.random.default_rng(0), 1.0)
    assert q.shape == (1, 4, 8, 64)
    assert sweep[0].work((q, k, v), None) == 2 * 2 * 1 * 4 * 8 * 8 * 64


def test_training_benchmarks_run_tiny(tmp_path, capsys):
    """The training-step workloads compile on both frameworks, agree with jax (every output of
    the step: new parameters, loss, gradients) and report times, ratios and memory."""
    from benchmarks import training

    results = training.main(["--scale", "0.01", "--rounds", "1", "--min-sample-ms", "0", "--settle-ms", "0",
                             "--compile-repeat", "1", "--out", str(tmp_path)])
    assert [r["name"] for r in results] == [w.name for w in training.training_workloads()]
    for r in results:
        assert r["time_ms"]["minixla"] > 0 and r["time_ms"]["jax"] > 0
        assert r["ratio_spread"][0] <= r["ratio_median"] <= r["ratio_spread"][1]
        assert r["max_norm_diff_vs_jax"] < 1e-4, r["name"]
        for fw in ("minixla", "jax"):
            assert r["memory"][fw]["argument_size_in_bytes"] > 0
    out = capsys.readouterr().out
    assert "temp bytes minixla / XLA" in out and "memory_analysis()" in out
    assert json.loads((tmp_path / "training.json").read_text())[0]["name"] == "mlp_train"
