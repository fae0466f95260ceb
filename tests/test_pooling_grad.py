"""Derivatives of max/min pooling (reduce_window_max/min's JVP, minixla/interpreters/
ad_window_rules.py) against JAX's select_and_gather_add rule."""
import jax
import numpy as np
import pytest

import minixla
import minixla.lax as ml

X = np.random.RandomState(1).randn(2, 7, 6, 3).astype(np.float32)
CASES = {  # window, strides, padding, base_dilation, window_dilation
    "2x2/2 valid": ((1, 2, 2, 1), (1, 2, 2, 1), "VALID", None, None),
    "3x3/2 same": ((1, 3, 3, 1), (1, 2, 2, 1), "SAME", None, None),
    "base dilated": ((1, 2, 2, 1), (1, 2, 2, 1), "VALID", (1, 2, 1, 1), None),
    "window dilated": ((1, 2, 2, 1), (1, 1, 1, 1), ((0, 0), (1, 2), (0, 1), (0, 0)), None, (1, 2, 1, 1)),
}
CHOOSERS = {"max": (ml.max, jax.lax.max, -np.inf), "min": (ml.min, jax.lax.min, np.inf)}


def _pool(lax, comp, init, case):
    window, strides, padding, base, wdil = case
    return lambda v: lax.reduce_window(v, init, comp, window, strides, padding, base, wdil)


@pytest.mark.parametrize("chooser,case", [("max", c) for c in CASES] + [("min", "3x3/2 same")])
def test_pooling_jvp_and_grad_match_jax(chooser, case):
    ours, theirs, init = CHOOSERS[chooser]
    f, g = _pool(ml, ours, init, CASES[case]), _pool(jax.lax, theirs, init, CASES[case])
    _, t = minixla.jvp(f, (X,), (2 * X + 1,))
    _, t_ref = jax.jvp(g, (X,), (2 * X + 1,))
    np.testing.assert_array_equal(t, t_ref)
    loss = lambda pool: lambda v: (pool(v) ** 2).sum()  # noqa: E731
    if CASES[case][4] is None:  # JAX has no VJP with window dilation; compare with its jvp
        ref = jax.grad(loss(g))(X)
    else:
        ref = jax.jacfwd(loss(g))(X)
    np.testing.assert_allclose(minixla.grad(loss(f))(X), ref, rtol=1e-6)


def test_pooling_grad_compiled_and_batched():
    ours, theirs, init = CHOOSERS["max"]
    f, g = _pool(ml, ours, init, CASES["3x3/2 same"]), _pool(jax.lax, theirs, init, CASES["3x3/2 same"])
    loss = lambda pool: lambda v: (pool(v) * v[:, :4, :3]).sum()  # noqa: E731
    np.testing.assert_allclose(minixla.jit(minixla.grad(loss(f)))(X), jax.grad(loss(g))(X), rtol=1e-5)
    xs = X[None, :1].repeat(2, 0)  # (vmap of grad, eagerly: a small batch)
    np.testing.assert_allclose(minixla.vmap(minixla.grad(loss(f)))(xs), jax.vmap(jax.grad(loss(g)))(xs),
                               rtol=1e-5)
    # ties: the gradient goes to one element of the window (the first), as JAX's
    tie = np.ones((1, 4, 4, 1), np.float32)
    np.testing.assert_array_equal(minixla.grad(lambda v: f(v).sum())(tie),
                                  jax.grad(lambda v: g(v).sum())(tie))


def test_max_min_pooling_from_another_init_value():
    # JAX pads with the init value and folds it into every window: max(c, window max), exactly
    x = X.copy()
    x[0, 0, 0, 0] = np.nan
    for ours, theirs in [(ml.max, jax.lax.max), (ml.min, jax.lax.min)]:
        for init in (0.0, -1.0):
            got = minixla.jit(lambda v: ml.reduce_window(v, init, ours, (1, 2, 2, 1), (1, 2, 2, 1), "SAME"))(x)
            np.testing.assert_array_equal(got, jax.lax.reduce_window(x, init, theirs, (1, 2, 2, 1),
                                                                     (1, 2, 2, 1), "SAME"))


def test_pooling_ties_nan_and_padding_select_xla_s_element():
    # XLA's SelectAndScatter rule (select ge for max, le for min): the first tap is selected and a
    # later one replaces it unless `selected >= tap`, so a NaN gives way to the next tap and a
    # padding tap (holding -inf) is a candidate: in [NaN, pad] and [pad, -inf] the cotangent is
    # dropped. minixla kept a NaN and credited a real -inf over the padding before it.
    x = np.array([np.nan, 1.0, -np.inf, np.nan, 0.0, -0.0, 2.0, np.nan, -np.inf, -np.inf, np.inf, np.nan],
                 np.float32)
    ct = np.arange(1, 14, dtype=np.float32)
    for chooser, window, stride in [("max", 2, 1), ("min", 3, 2)]:
        ours, theirs, init = CHOOSERS[chooser]
        y = x if chooser == "max" else -x
        def f(lax, comp):
            return lambda v: lax.reduce_window(v, init, comp, (window,), (stride,), ((1, 1),))
        n = f(jax.lax, theirs)(y).shape[0]
        want = jax.grad(lambda v: (f(jax.lax, theirs)(v) * ct[:n]).sum())(y)
        for backend in ("llvm", "jax"):
            got = minixla.jit(minixla.grad(lambda v: (f(ml, ours)(v) * ct[:n]).sum()), backend=backend)(y)
            np.testing.assert_array_equal(got, want, err_msg=f"{chooser} {window}/{stride} [{backend}]")
    # jax.jvp: JAX's select_and_gather_add (a fold from (-inf, 0) over the operand's own
    # elements), which differs from the gradient's selection in the corners -- a window of -inf
    # only gives 0, a NaN followed by padding only keeps its tangent -- as minixla's primitive
    t = np.arange(1, 13, dtype=np.float32)
    g = lambda lax, comp: lambda v: lax.reduce_window(v, -np.inf, comp, (2,), (1,), ((1, 1),))  # noqa: E731
    want = jax.jvp(g(jax.lax, jax.lax.max), (x,), (t,))[1]
    window = dict(window_dimensions=(2,), window_strides=(1,), padding=((1, 1),), base_dilation=(1,),
                  window_dilation=(1,))
    scatter_sel = ml.windows_select.scatter_selection(t, x, select_prim="ge", **window)
    assert not np.array_equal(want, scatter_sel)  # (the corners are in x: the two selections differ)
    jvp = lambda v, s: minixla.jvp(g(ml, ml.max), (v,), (s,))[1]  # noqa: E731
    np.testing.assert_array_equal(jvp(x, t), want)
    for backend in ("llvm", "jax"):
        np.testing.assert_array_equal(minixla.jit(jvp, backend=backend)(x, t), want, err_msg=backend)
    # 2-d with padding in the minor dim: XLA:CPU folds the last padded dim outermost, so the
    # window [[-inf, NaN], [2, -inf]] gives the last -inf's tangent (row-major would give 2's)
    x2 = np.array([[np.inf, -np.inf, np.nan, np.nan], [-1, 2, -np.inf, 1], [-1, 2, 2, 1]], np.float32)
    t2 = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    g2 = lambda lax, comp: lambda v: lax.reduce_window(v, -np.inf, comp, (2, 2), (1, 1),  # noqa: E731
                                                       ((1, 0), (0, 1)))
    want2 = jax.jvp(g2(jax.lax, jax.lax.max), (x2,), (t2,))[1]
    np.testing.assert_array_equal(minixla.jit(lambda v, s: minixla.jvp(g2(ml, ml.max), (v,), (s,))[1])(x2, t2),
                                  want2)
    # vmap of the jvp (the primitive's batching rule: the batch dim a window of one element)
    xs, ts = np.stack([x, x[::-1]]), np.stack([t, -t])
    np.testing.assert_array_equal(minixla.vmap(jvp)(xs, ts),
                                  jax.vmap(lambda v, s: jax.jvp(g(jax.lax, jax.lax.max), (v,), (s,))[1])(xs, ts))


@pytest.mark.parametrize("shape,window,strides,padding,base,wdil", [
    ((5,), (2,), (2,), ((2, 1),), (2,), (2,)),  # (the fuzzer's: a base-dilated, strided window sum)
    ((2, 3), (2, 3), (2, 1), ((2, 2), (0, 2)), (2, 1), (2, 2)),
    ((4, 1), (3, 1), (3, 1), "SAME", (2, 2), (1, 1)),
    ((0, 3), (2, 2), (1, 1), ((1, 0), (0, 1)), (2, 2), (1, 1)),
])
def test_sum_pooling_grad_with_base_dilation_matches_jax(shape, window, strides, padding, base, wdil):
    # JAX transposes reduce_window_sum with base_dilation too: the cotangent's window sum,
    # strided by base_dilation over the holes (it raised NotImplementedError here)
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    loss = lambda lax: lambda v: (lax.reduce_window(v, 0.0, lax.add, window, strides, padding, base,  # noqa: E731
                                                    wdil) * np.float32(1.5)).sum()
    want = jax.grad(loss(jax.lax))(x)
    np.testing.assert_array_equal(minixla.grad(loss(ml))(x), want)
    for backend in ("llvm", "jax"):
        np.testing.assert_array_equal(minixla.jit(minixla.grad(loss(ml)), backend=backend)(x), want)


def test_same_padding_with_base_dilation_is_worked_out_on_the_undilated_operand():
    # JAX's "SAME" pads from the operand's own dims (base_dilation left out) and the dilated
    # window: here (5, 1, 1), where padding the base-dilated dims would give (5, 1, 2)
    x = (np.arange(30).reshape(5, 2, 3) / 4).astype(np.float16)
    for comp, init in [("add", 0), ("max", -np.inf), ("min", np.inf)]:
        def f(lax):
            return lambda v: lax.reduce_window(v, np.float16(init), getattr(lax, comp), (2, 3, 3), (1, 2, 3),
                                               "SAME", (1, 1, 2), (1, 2, 2))
        want = f(jax.lax)(x)
        assert want.shape == (5, 1, 1)
        for got in (f(ml)(x), minixla.jit(f(ml))(x), minixla.jit(f(ml), backend="jax")(x)):
            np.testing.assert_array_equal(got, want)
        xs = np.stack([x, -x])
        np.testing.assert_array_equal(minixla.jit(minixla.vmap(f(ml)))(xs), jax.vmap(f(jax.lax))(xs))
