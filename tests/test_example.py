"""The digits CNN example end to end, in its fast mode, as a user runs it."""
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).parent.parent


def test_digits_cnn_fast_json():
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "digits_cnn.py"), "--fast", "--json"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    figures = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(figures) == {"accuracy", "max_abs_diff_llvm", "max_abs_diff_jax_backend", "kernels_unfused",
                            "kernels_fused", "conv_bias_relu_fused", "arena_bytes", "naive_bytes", "compile_ms",
                            "startup_ms"}
    assert figures["accuracy"] >= 0.9
    assert figures["max_abs_diff_llvm"] <= 1e-4
    assert figures["max_abs_diff_jax_backend"] <= 1e-4
    assert figures["conv_bias_relu_fused"] is True
    assert figures["kernels_fused"] < figures["kernels_unfused"]
    # (equal when fusion leaves only temporaries that are live together, e.g. the two conv
    # activations once softmax is one row fusion: nothing left to share)
    assert 0 < figures["arena_bytes"] < figures["naive_bytes"]
    assert figures["compile_ms"] > 0 and isinstance(figures["startup_ms"], float)
