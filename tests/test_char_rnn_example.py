"""examples/char_rnn.py in its fast mode: a scan-based RNN trained by minixla follows JAX's
loss curve step by step and learns (the loss falls well below ln(vocabulary))."""
import json
import pathlib
import subprocess
import sys

import numpy as np

ROOT = pathlib.Path(__file__).parent.parent


def test_char_rnn_fast():
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "char_rnn.py"), "--fast", "--json"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    f = json.loads(r.stdout.strip().splitlines()[-1])
    assert abs(f["initial_loss"] - np.log(f["vocab"])) < 0.2
    assert f["final_loss"] < 0.6 * f["initial_loss"]
    assert f["max_abs_loss_diff"] < 1e-4  # the same curve as JAX's, from the same parameters
    assert f["ms_per_step_minixla"] > 0 and f["ms_per_step_jax"] > 0
