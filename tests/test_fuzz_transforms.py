"""The differential fuzzer's transformation modes (``minixla/fuzz/transforms.py``): the random
programs of ``tests/test_fuzz.py`` through ``grad``/``vjp``, ``jvp`` and ``vmap`` under
``minixla.jit`` on both backends, against the same transformation by JAX eager.

``MINIXLA_FUZZ_GRAD_EXAMPLES``, ``MINIXLA_FUZZ_JVP_EXAMPLES`` and ``MINIXLA_FUZZ_VMAP_EXAMPLES``
set the number of programs per mode (a few for CI, the same every run unless
``MINIXLA_FUZZ_RANDOM=1``; then ``--hypothesis-seed=N`` splits a deep run over processes), and
``MINIXLA_FUZZ_LOG`` names a file that keeps the program being run. Every mismatch a deep run
found is pinned in ``test_transform_regressions`` against JAX's value.
"""
import os

import jax
import numpy as np
import pytest

from hypothesis import HealthCheck, given, settings, strategies as st

import minixla
from minixla import lax as mlax

from minixla.fuzz.programs import programs
from minixla.fuzz.transforms import GRAD_DTYPES, MAX_OPS, SPECIAL_RATE, fuzz_transform

DERANDOMIZE = not os.environ.get("MINIXLA_FUZZ_RANDOM")
LOG = os.environ.get("MINIXLA_FUZZ_LOG")


def _examples(mode, default):
    return int(os.environ.get(f"MINIXLA_FUZZ_{mode.upper()}_EXAMPLES", default))


def _fuzz(n):
    return settings(max_examples=n, deadline=None, derandomize=DERANDOMIZE, print_blob=True,
                    suppress_health_check=list(HealthCheck))


differentiable_programs = programs(dtypes=GRAD_DTYPES, max_ops=MAX_OPS, special_rate=SPECIAL_RATE)


@_fuzz(_examples("grad", 4))
@given(differentiable_programs, st.data())
def test_grad_of_random_programs(prog, data):
    fuzz_transform("grad", prog, data, LOG)


@_fuzz(_examples("jvp", 3))
@given(differentiable_programs, st.data())
def test_jvp_of_random_programs(prog, data):
    fuzz_transform("jvp", prog, data, LOG)


@_fuzz(_examples("vmap", 4))
@given(programs(max_ops=MAX_OPS), st.data())
def test_vmap_of_random_programs(prog, data):
    fuzz_transform("vmap", prog, data, LOG)


# ---------------------------------------------------------------------------------------
# Mismatches the deep runs found, pinned against JAX's values.

def _conv_grouped(L):
    return lambda x, w: L.conv_general_dilated(x, w, (1,), [(1, 0)], feature_group_count=2)


@pytest.mark.parametrize("size", [0, 2])
def test_vmap_conv_over_a_batch_of_zero_examples(size):
    # the batching rule divided the merged output dim by the batch size (ZeroDivisionError), and a
    # batched kernel with a batched input made 0 * G feature groups for 0 examples
    r = np.random.default_rng(0)
    x = r.normal(size=(size, 2, 4, 5)).astype(np.float32)
    w = r.normal(size=(size, 4, 2, 3)).astype(np.float32)
    for in_axes in [(0, None), (None, 0), (0, 0), (1, -1)]:
        xa = np.moveaxis(x, 0, in_axes[0]) if in_axes[0] is not None else x[0] if size else x.sum(0)
        wa = np.moveaxis(w, 0, in_axes[1]) if in_axes[1] is not None else w[0] if size else w.sum(0)
        want = jax.vmap(_conv_grouped(jax.lax), in_axes=in_axes)(xa, wa)
        got = minixla.jit(minixla.vmap(_conv_grouped(mlax), in_axes=in_axes))(xa, wa)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
        assert got.shape == want.shape


def test_replay_grad_reproduces_a_deep_run_case():
    """The deep run pickles each failing grad/vjp case (``transforms.LAST``); ``replay_grad``
    re-runs it against JAX. The case is the deep grad run's first find (seed 9501): the gradient
    through an empty gather of ``x ** 0.5`` was NaN where ``x == 0`` (0 * inf); JAX's empty
    gather is a constant, so its gradient is 0 there."""
    import numpy as np
    from minixla.fuzz import transforms
    x = np.array([[-1., 0., 2.], [-0.0, -3., 4.], [np.inf, 1e-40, 5.]], np.float32)
    case = dict(program=[("power_float", [0], {"y": 0.5}),
                         ("getitem", [1], {"index": (slice(-1, 2, -2), np.array([0, -1], np.int32))})],
                outputs=[2], inputs=(x,), diff=(0,), cts=(np.ones((0, 2), np.float32),))
    got, want = transforms.replay_grad(case)
    np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(want[0]))
    assert not np.isnan(np.asarray(got[0])).any()
