"""The dispatch and cold-start benchmarks run (no timing is checked)."""
from benchmarks import cold_start, dispatch


def test_dispatch_benchmark_runs_tiny(capsys):
    rows = dispatch.main(["--repeat", "1", "--scale", "0.01"])
    assert [r["case"].split()[0] for r in rows] == ["small", "pytree"]
    assert all(r["minixla_us"] > 0 and r["jax_us"] > 0 for r in rows)
    assert "ratio" in capsys.readouterr().out


def test_cold_start_settings_cover_the_issue():
    assert cold_start.SETTINGS == ("minixla", "minixla+cache", "jax", "jax+cache")
    assert "value_and_grad" in cold_start._CHILD and "digits_cnn" in cold_start._CHILD
