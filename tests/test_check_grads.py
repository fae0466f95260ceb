"""``minixla.testing.check_grads`` (central differences in float64, as
``jax.test_util.check_grads``) over the differentiable primitives, first and second order,
forward and reverse mode.

CI checks a few composite functions (each chains a family of primitives, so few programs are
evaluated); ``MINIXLA_DEEP_FUZZ=1`` also sweeps every per-primitive case of ``ad_cases.py`` on
every mode (eager and compiled on both backends).
"""
import os

import numpy as np
import pytest

import minixla.numpy as mnp
from minixla import lax, nn
from minixla.testing import check_grads

from ad_cases import CASES, IDS, MODES

DEEP = bool(os.environ.get("MINIXLA_DEEP_FUZZ"))
R = np.random.default_rng(7)


def pos(*shape):
    return R.uniform(0.6, 1.4, shape)


def sym(*shape):
    return R.uniform(-1.5, 1.5, shape)


def unary_family(x):
    """Every smooth unary primitive, on a domain where all are smooth (x in (0.6, 1.4))."""
    ops = [lax.sin, lax.cos, lambda v: lax.tan(v * 0.5), lax.tanh, lax.exp, lax.exp2, lax.expm1, lax.log,
           lax.log1p, lax.sqrt, lax.rsqrt, lax.cbrt, lax.logistic, lax.erf, lax.erfc, lax.neg,
           lambda v: lax.integer_pow(v, 3), lambda v: lax.integer_pow(v, -2)]
    return tuple(op(x) for op in ops)


def binary_family(x, y):
    """Binary primitives; x in (0.6, 1.4), y in (-1.5, 1.5) so max/min never tie and rem stays
    away from its jumps (|x| / |y| is not near an integer for these draws)."""
    return (lax.add(x, y), lax.sub(x, y), lax.mul(x, y), lax.div(y, x), lax.pow(x, y), lax.atan2(y, x),
            lax.max(x, y), lax.min(x, y), lax.rem(y, x + 2.0), lax.clamp(-0.5, y, 0.5 + x * 0.0),
            lax.select_n(y > 0, x, y))


ROWS = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                   scatter_dims_to_operand_dims=(0,))


def structural_family(x, u):
    """Shapes and data movement: x f64[3, 4], u f64[2, 2]."""
    idx = np.array([2, 0, 2], np.int32)
    b = lax.broadcast_in_dim(x, (2, 3, 4), (1, 2))
    return (lax.transpose(lax.reshape(b, (6, 4)), (1, 0)), lax.squeeze(lax.expand_dims(x, (0,)), (0,)),
            lax.rev(x, (0, 1)), lax.slice(x, (0, 1), (3, 4), (2, 2)), lax.pad(x, u[0, 0], [(1, -1, 1), (-1, 2, 0)]),
            lax.concatenate([x, u[:1, :1] @ x[:1]], 0),
            lax.dynamic_slice(x, (np.int32(1), np.int32(1)), (2, 2)),
            lax.dynamic_update_slice(x, u * u, (np.int32(1), np.int32(2))),
            x[idx], lax.scatter_add(x, idx[:, None], x[idx] * u[0, 0], ROWS), mnp.where(x > 1.0, x * u[0, 1], -x))


def reduction_family(x):
    """Reductions and scans over f64[3, 4] with distinct values (no ties)."""
    return (lax.reduce_sum(x, (0,)), lax.reduce_max(x, (1,)), lax.reduce_min(x, (0, 1)),
            lax.reduce_prod(x, (1,)), lax.cumsum(x, 1), lax.cumprod(x, 0, reverse=True), lax.cummax(x, 1),
            lax.cummin(x, 0), nn.logsumexp(x, axis=1), nn.softmax(x, axis=0), mnp.var(x, axis=1))


def contraction_family(x, w, k):
    """dot_general with batch dims and conv_general_dilated with strides, padding, dilation
    and feature groups: x f64[2, 3, 4], w f64[2, 4, 3], k f64[4, 1, 2, 2] (OIHW, 2 groups)."""
    d = lax.dot_general(x, w, (((2,), (1,)), ((0,), (0,))))
    img = lax.reshape(x, (1, 2, 3, 4))
    c = lax.conv_general_dilated(img, k, (1, 2), [(1, 0), (0, 1)], rhs_dilation=(1, 2), feature_group_count=2)
    return d, c


FAMILIES = [
    ("unary", unary_family, (pos(5),)),
    ("binary", binary_family, (pos(2, 3), sym(2, 3))),
    ("structural", structural_family, (sym(3, 4), sym(2, 2))),
    ("reductions", reduction_family, (np.arange(12.0).reshape(3, 4) * 0.1 + pos(3, 4) * 0.01,)),
    ("contractions", contraction_family, (sym(2, 3, 4), sym(2, 4, 3), sym(4, 1, 2, 2))),
]


@pytest.mark.parametrize("name,fn,args", FAMILIES, ids=[f[0] for f in FAMILIES])
def test_check_grads_second_order(x64, name, fn, args):
    # reverse to second order (the Hessian-vector products of grad(grad)), forward to first (the
    # unary and binary families to second: their rules are the ones forward-over-forward re-enters)
    check_grads(fn, args, order=2, modes=("rev",))
    check_grads(fn, args, order=2 if name in ("unary", "binary") else 1, modes=("fwd",))


def test_check_grads_compiled_first_order(x64):
    check_grads(contraction_family, FAMILIES[-1][2], order=1, modes=("rev",), backend="llvm")


def test_check_grads_catches_a_wrong_derivative(x64):
    x = pos(3)
    # stop_gradient hides a dependence from AD but not from central differences
    for modes in (("fwd",), ("rev",)):
        with pytest.raises(AssertionError, match="central differences"):
            check_grads(lambda v: v * lax.stop_gradient(v), (x,), order=1, modes=modes)
    # a mistake in the second derivative only: f = x**2/2 - (x - sg(x))**2/2 is x**2/2 everywhere
    # and AD gets f' = x - (x - sg(x)) right, but differentiates that to 0 instead of 1
    def f(v):
        return 0.5 * v * v - 0.5 * lax.integer_pow(v - lax.stop_gradient(v), 2)
    check_grads(f, (x,), order=1)
    for modes in (("fwd",), ("rev",)):
        with pytest.raises(AssertionError, match="order 2"):
            check_grads(f, (x,), order=2, modes=modes)
    with pytest.raises(TypeError, match="float arrays"):
        check_grads(lambda v: v, (np.arange(3),), order=1)


#: per-primitive cases (ad_cases.py) where the derivative has a kink or a jump at the sample,
#: or that do not differentiate the function central differences see (stop_gradient)
NOT_SMOOTH = {"abs_at_0", "sqrt_at_0", "pow_at_0", "max", "min", "reduce_max_ties", "reduce_min_ties",
              "convert_f32_bf16", "convert_to_int", "stop_gradient", "cbrt", "clamp", "floor", "ceil", "round",
              "sign"}


@pytest.mark.skipif(not DEEP, reason="the per-primitive sweep runs with MINIXLA_DEEP_FUZZ=1")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,fn,args", [c for c in CASES if c[0] not in NOT_SMOOTH],
                         ids=[i for i in IDS if i not in NOT_SMOOTH])
def test_check_grads_every_primitive(x64, name, fn, args, mode):
    args = tuple(np.asarray(a, np.float64) for a in args)
    check_grads(fn(lax), args, order=2, backend=None if mode == "eager" else mode)
