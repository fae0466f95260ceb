"""conv_general_dilated: jvp and both transposes (input and kernel cotangents) against JAX,
with strides, padding, lhs/rhs dilation, layouts and feature_group_count; eager and jitted."""
import jax
import numpy as np
import pytest

import minixla
from minixla import lax

from ad_cases import MODES, as_np, assert_tree_close, run

CONFIGS = {
    "same": ((2, 3, 7, 6), (4, 3, 3, 2), (1, 1), "SAME", None, None, None, 1),
    "strided_valid": ((2, 3, 7, 6), (4, 3, 3, 2), (2, 3), "VALID", None, None, None, 1),
    "padded_rhs_dilated": ((2, 3, 7, 6), (4, 3, 3, 2), (2, 1), [(1, 2), (0, 1)], (1, 1), (2, 1), None, 1),
    "nhwc_groups": ((2, 7, 6, 4), (3, 2, 2, 6), (2, 2), "SAME", None, (1, 2), ("NHWC", "HWIO", "NHWC"), 2),
    "depthwise_lhs_dilated": ((2, 6, 9, 5), (6, 1, 3, 3), (1, 2), [(2, 0), (1, 1)], (2, 1), None, None, 6),
    "1d_transposed": ((1, 2, 5), (4, 1, 3), (2,), [(1, 2)], (3,), (1,), None, 2),
    # an empty output (the window never fits): zero cotangents, where the transposes' padding
    # arithmetic gave the kernel cotangent a wrong shape and the hand-off a kernel of size 0
    "empty_output_2d": ((2, 4, 4, 1), (4, 2, 2, 2), (3, 3), [(3, 3), (1, -1)], (3, 3), (2, 2), None, 2),
    "empty_output_1d": ((2, 2, 3), (2, 2, 3), (1,), [(0, -1)], (2,), (2,), None, 1),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_conv_vjp_and_jvp_match_jax(name, mode):
    lhs_shape, rhs_shape, strides, padding, ld, rd, dn, groups = CONFIGS[name]
    r = np.random.default_rng(0)
    x = r.normal(size=lhs_shape).astype(np.float32)
    w = r.normal(size=rhs_shape).astype(np.float32)

    def f(L):
        return lambda x, w: L.conv_general_dilated(x, w, strides, padding, ld, rd, dn, feature_group_count=groups)
    y, pull = jax.vjp(f(jax.lax), x, w)
    ct = r.normal(size=y.shape).astype(np.float32)
    tx, tw = r.normal(size=x.shape).astype(np.float32), r.normal(size=w.shape).astype(np.float32)
    want = as_np((pull(ct), jax.jvp(f(jax.lax), (x, w), (tx, tw))))

    def ours(x, w, ct, tx, tw):
        return minixla.vjp(f(lax), x, w)[1](ct), minixla.jvp(f(lax), (x, w), (tx, tw))
    assert_tree_close(run(mode, ours, x, w, ct, tx, tw), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_conv_vmap_matches_jax(name, mode):
    lhs_shape, rhs_shape, strides, padding, ld, rd, dn, groups = CONFIGS[name]
    r = np.random.default_rng(1)

    def f(L):
        return lambda x, w: L.conv_general_dilated(x, w, strides, padding, ld, rd, dn, feature_group_count=groups)
    # the four in_axes in one program (one compile per mode, not four)
    all_axes = [(0, None), (None, 0), (0, 0), (len(lhs_shape), 1)]
    args = [r.normal(size=(s[:a] + (2,) + s[a:]) if a is not None else s).astype(np.float32)
            for axes in all_axes for s, a in zip((lhs_shape, rhs_shape), axes)]
    want = [as_np(jax.vmap(f(jax.lax), in_axes=axes)(*args[2 * k:2 * k + 2])) for k, axes in enumerate(all_axes)]

    def ours(*args):
        return [minixla.vmap(f(lax), in_axes=axes)(*args[2 * k:2 * k + 2]) for k, axes in enumerate(all_axes)]
    assert_tree_close(run(mode, ours, *args), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", MODES)
def test_per_example_gradients_of_a_small_cnn(mode):
    r = np.random.default_rng(2)
    w = r.normal(size=(3, 3, 1, 4)).astype(np.float32) * 0.3
    xs = r.normal(size=(5, 6, 6, 1)).astype(np.float32)

    def loss(L, np_, w, x):
        y = L.conv_general_dilated(x[None], w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return np_.sum(np_.maximum(y, 0.0) ** 2)
    import jax.numpy as jnp
    import minixla.numpy as mnp
    want = as_np(jax.vmap(jax.grad(lambda w, x: loss(jax.lax, jnp, w, x)), in_axes=(None, 0))(w, xs))
    got = run(mode, minixla.vmap(minixla.grad(lambda w, x: loss(lax, mnp, w, x)), in_axes=(None, 0)), w, xs)
    assert_tree_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", ["llvm", "jax"])
def test_grouped_conv_of_zeros_keeps_the_sign_of_zero(backend):
    # the vmap fuzzer (seed 9654): a sum of -0.0 products is -0.0 in XLA; the LLVM conv kernel
    # zeroed its output row with +0.0 first (+0.0 + -0.0 = +0.0)
    x = np.zeros((1, 5, 5), np.float32)
    x[0, 0, 1], x[0, 2, 3] = -0.0, 1.0
    w = np.array([[[1.0]], [[-0.75]], [[2.0]], [[0.25]], [[-1.5]]], np.float32)
    for v in (x, -x):
        got = minixla.jit(lambda a: minixla.lax.conv_general_dilated(a, w, (1,), [(0, 0)], feature_group_count=5),
                          backend=backend)(v)
        want = np.asarray(jax.lax.conv_general_dilated(v, w, (1,), [(0, 0)], feature_group_count=5))
        np.testing.assert_array_equal(got, want)
        assert (np.signbit(got) == np.signbit(want)).all()
