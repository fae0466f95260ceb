"""Shared cases for the transformation tests (test_jvp, test_vjp, test_vmap): one small
program per primitive, written once against a ``lax`` module so the same code runs with
``minixla.lax`` and ``jax.lax``. Each case: (name, fn(L) -> f, args)."""
import numpy as np

import jax
import minixla

R = np.random.default_rng(0)


def pos(*shape):
    return R.uniform(0.5, 2.0, shape).astype(np.float32)


def sym(*shape):
    return R.uniform(-2.0, 2.0, shape).astype(np.float32)


TIES = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], np.float32)

UNARY = ["neg", "abs", "sign", "floor", "ceil", "exp", "exp2", "expm1", "log", "log1p", "sqrt", "rsqrt",
         "cbrt", "tanh", "logistic", "sin", "cos", "tan", "erf", "erfc"]
POSITIVE = {"log", "sqrt", "rsqrt", "log1p"}

CASES = [(n, (lambda L, n=n: getattr(L, n)), (pos(2, 3) if n in POSITIVE else sym(2, 3),)) for n in UNARY]
CASES += [
    ("round", lambda L: (lambda x: L.round(x, 1)), (sym(2, 3),)),
    ("abs_at_0", lambda L: L.abs, (np.array([0.0, -1.0, 2.0], np.float32),)),
    ("sqrt_at_0", lambda L: L.sqrt, (np.array([0.0, 1.0, 4.0], np.float32),)),
    ("integer_pow3", lambda L: (lambda x: L.integer_pow(x, 3)), (sym(2, 3),)),
    ("integer_pow-2", lambda L: (lambda x: L.integer_pow(x, -2)), (pos(2, 3),)),
    ("integer_pow0", lambda L: (lambda x: L.integer_pow(x, 0)), (sym(3),)),
    ("integer_pow1", lambda L: (lambda x: L.integer_pow(x, 1)), (sym(3),)),
    ("add", lambda L: L.add, (sym(2, 3), sym(2, 3))),
    ("sub", lambda L: L.sub, (sym(2, 3), sym(2, 3))),
    ("mul", lambda L: L.mul, (sym(2, 3), sym(2, 3))),
    ("mul_scalar", lambda L: L.mul, (np.float32(1.5), sym(2, 3))),
    ("add_scalar", lambda L: L.add, (sym(2, 3), np.float32(0.5))),
    ("div", lambda L: L.div, (sym(2, 3), pos(2, 3))),
    ("div_scalar", lambda L: L.div, (np.float32(2.0), pos(3))),
    ("max", lambda L: L.max, (TIES, np.full((2, 3), 2.0, np.float32))),
    ("min", lambda L: L.min, (TIES, np.full((2, 3), 2.0, np.float32))),
    ("pow", lambda L: L.pow, (pos(2, 3), sym(2, 3))),
    ("pow_at_0", lambda L: L.pow, (np.array([0.0, 0.0, 2.0], np.float32), np.array([0.0, 2.0, 0.0], np.float32))),
    ("atan2", lambda L: L.atan2, (sym(2, 3), sym(2, 3))),
    ("rem", lambda L: L.rem, (sym(2, 3), pos(2, 3))),
    ("clamp", lambda L: (lambda x: L.clamp(np.float32(-1.0), x, np.float32(1.0))), (sym(2, 3),)),
    ("clamp_arrays", lambda L: L.clamp, (np.full(4, -0.5, np.float32), sym(4), np.full(4, 0.5, np.float32))),
    ("select_n", lambda L: (lambda x, y: L.select_n(x > 0, x, y)), (sym(2, 3), sym(2, 3))),
    ("convert_f32_bf16", lambda L: (lambda x: L.convert_element_type(x, jax.numpy.bfloat16).astype(np.float32)
                                    if L is jax.lax else
                                    L.convert_element_type(L.convert_element_type(x, jax.numpy.bfloat16),
                                                           np.float32)), (sym(2, 3),)),
    ("convert_to_int", lambda L: (lambda x: L.mul(x, L.convert_element_type(
        L.convert_element_type(x, np.int32), np.float32))), (sym(2, 3),)),
    ("broadcast_in_dim", lambda L: (lambda x: L.broadcast_in_dim(x, (4, 2, 3), (1, 2))), (sym(2, 3),)),
    ("broadcast_expand", lambda L: (lambda x: L.broadcast_in_dim(x, (2, 3), (0, 1))), (sym(2, 1),)),
    ("reshape", lambda L: (lambda x: L.reshape(x, (3, 2))), (sym(2, 3),)),
    ("transpose", lambda L: (lambda x: L.transpose(x, (2, 0, 1))), (sym(2, 3, 4),)),
    ("squeeze", lambda L: (lambda x: L.squeeze(x, (1,))), (sym(2, 1, 3),)),
    ("expand_dims", lambda L: (lambda x: L.expand_dims(x, (0, 2))), (sym(2, 3),)),
    ("rev", lambda L: (lambda x: L.rev(x, (0, 1))), (sym(2, 3),)),
    ("slice", lambda L: (lambda x: L.slice(x, (0, 1), (2, 5), (1, 2))), (sym(2, 6),)),
    ("pad", lambda L: (lambda x, v: L.pad(x, v, [(1, -1, 1), (-1, 2, 0)])), (sym(3, 4), np.float32(0.5))),
    ("concatenate", lambda L: (lambda x, y: L.concatenate([x, y, x], 1)), (sym(2, 3), sym(2, 2))),
    ("reduce_sum", lambda L: (lambda x: L.reduce_sum(x, (0, 2))), (sym(2, 3, 4),)),
    ("reduce_max_ties", lambda L: (lambda x: L.reduce_max(x, (1,))), (TIES,)),
    ("reduce_min_ties", lambda L: (lambda x: L.reduce_min(x, (0,))), (TIES,)),
    ("dot_general", lambda L: (lambda x, y: L.dot_general(x, y, (((1,), (0,)), ((), ())))), (sym(2, 3), sym(3, 4))),
    ("dot_general_batch", lambda L: (lambda x, y: L.dot_general(x, y, (((2,), (1,)), ((0,), (2,))))),
     (sym(2, 3, 4), sym(5, 4, 2))),
    ("dot_general_mixed", lambda L: (lambda x, y: L.dot_general(x, y, (((0, 2), (3, 1)), ((1,), (0,))))),
     (sym(4, 2, 3, 5), sym(2, 3, 6, 4))),
    ("cumsum", lambda L: (lambda x: L.cumsum(x, 1)), (sym(2, 4),)),
    ("cumsum_rev", lambda L: (lambda x: L.cumsum(x, 0, reverse=True)), (sym(3, 2),)),
    ("dynamic_slice", lambda L: (lambda x: L.dynamic_slice(x, (np.int32(1), np.int32(2)), (2, 2))), (sym(3, 5),)),
    ("dynamic_update_slice", lambda L: (lambda x, u: L.dynamic_update_slice(x, u, (np.int32(1), np.int32(0)))),
     (sym(3, 4), sym(2, 2))),
    ("stop_gradient", lambda L: (lambda x: L.mul(x, L.stop_gradient(L.mul(x, x)))), (sym(3),)),
]
IDS = [c[0] for c in CASES]


def tangents_like(args, seed=1):
    r = np.random.default_rng(seed)
    return tuple(np.asarray(r.uniform(-1, 1, np.shape(a)), np.asarray(a).dtype) for a in args)


def as_np(tree):
    return jax.tree_util.tree_map(lambda x: np.asarray(x), tree)


def assert_tree_close(got, want, rtol=2e-5, atol=2e-6):
    gl, gt = jax.tree_util.tree_flatten(got)
    wl, wt = jax.tree_util.tree_flatten(want)
    assert gt == wt, (gt, wt)
    for g, w in zip(gl, wl):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, (g.shape, w.shape)
        if w.dtype == jax.dtypes.float0:
            assert g.dtype == w.dtype
            continue
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol)


MODES = ["eager", "llvm", "jax"]


def run(mode, fn, *args):
    """``fn(*args)`` eagerly or under ``minixla.jit`` with the given backend."""
    if mode == "eager":
        return fn(*args)
    return minixla.jit(fn, backend=mode)(*args)

CASES += [
    ("reduce_prod", lambda L: (lambda x: L.reduce_prod(x, (1,))), (sym(2, 5),)),
    ("reduce_prod_zero", lambda L: (lambda x: L.reduce_prod(x, (0, 1))),
     (np.array([[1.5, 0.0, 2.0], [0.5, -1.0, 3.0]], np.float32),)),
    ("cumprod", lambda L: (lambda x: L.cumprod(x, 1)), (sym(2, 5),)),
    ("cumprod_rev", lambda L: (lambda x: L.cumprod(x, 0, reverse=True)), (sym(3, 2),)),
    ("cummax", lambda L: (lambda x: L.cummax(x, 1)), (sym(2, 6),)),
    ("cummin_rev", lambda L: (lambda x: L.cummin(x, 0, reverse=True)), (sym(5, 2),)),
]
IDS = [c[0] for c in CASES]
