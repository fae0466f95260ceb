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
                            "startup_ms", "train_backend", "train_ms_per_step_minixla", "train_ms_per_step_jax",
                            "final_loss", "max_abs_grad_diff"}
    # Trained by minixla's compiled step (300 steps in --fast mode); the default 1500 reach >= 0.97.
    assert figures["train_backend"] == "minixla"
    assert figures["accuracy"] >= 0.95
    assert figures["final_loss"] < 0.2  # from ln(10) = 2.3 at the start: it learned
    # minixla.jit(minixla.grad(loss)) against jax.grad eagerly, at the initial parameters (the
    # gradients are O(1e-2 .. 1); f32 rounding of a 64-image mean)
    assert figures["max_abs_grad_diff"] <= 1e-5
    assert figures["train_ms_per_step_minixla"] > 0 and figures["train_ms_per_step_jax"] > 0
    assert figures["max_abs_diff_llvm"] <= 1e-4
    assert figures["max_abs_diff_jax_backend"] <= 1e-4
    assert figures["conv_bias_relu_fused"] is True
    assert figures["kernels_fused"] < figures["kernels_unfused"]
    # (equal when fusion leaves only temporaries that are live together, e.g. the two conv
    # activations once softmax is one row fusion: nothing left to share)
    assert 0 < figures["arena_bytes"] < figures["naive_bytes"]
    assert figures["compile_ms"] > 0 and isinstance(figures["startup_ms"], float)
