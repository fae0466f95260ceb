"""Cumulative reductions (cumsum/cumprod/cummax/cummin) run as O(n) scans.

They lower to a ``reduce-window`` whose window covers a prefix (suffix) of the axis; the LLVM
backend used to compute it window by window, O(n^2) (``cumsum`` of 2**18 elements never
finished). Now ``minixla.hlo.scan.scan_axis`` recognizes the window, the LLVM backend emits a
scan kernel and the evaluator accumulates along the axis. Values are JAX's (eager, exact for
short axes; for long float axes XLA:CPU scans in a tree, so there they agree to rounding) and
bit-identical to the window-by-window order the elemental code computed (prefix windows; a
float suffix window on an axis of 32 or more is accumulated from the end, as XLA does not keep
the window order there either).
"""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import minixla
import minixla.hlo.evaluator as EV
from minixla import lax
from minixla.hlo.scan import scan_axis

OPS = ["cumsum", "cumprod", "cummax", "cummin"]
CASES = [((5,), 0), ((3, 4), 0), ((3, 4), 1), ((2, 3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), 2),
         ((1,), 0), ((0,), 0), ((0, 4), 1), ((3, 1), 1)]


def _data(shape, dtype, seed=0):
    rs = np.random.RandomState(seed)
    if dtype == np.bool_:
        return rs.rand(*shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        return rs.randint(-3, 4, shape).astype(dtype)
    return rs.randn(*shape).astype(dtype)


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.uint8) if a.size else a


@pytest.mark.parametrize("backend", ["llvm", "jax"])
@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.float16, np.bool_])
@pytest.mark.parametrize("op", OPS)
def test_cumulative_matches_jax(op, dtype, backend):
    # every (shape, axis, reverse) case in one program, each on its own input (one compile per
    # test instead of 20: each output is its own reduce-window and scan kernel all the same)
    cases = [(shape, axis, reverse) for shape, axis in CASES for reverse in (False, True)]
    xs = [_data(shape, dtype) for shape, _, _ in cases]
    try:
        want = [getattr(jax.lax, op)(x, axis=axis, reverse=reverse) for x, (_, axis, reverse) in zip(xs, cases)]
    except TypeError:  # JAX rejects bool cumsum/cumprod: so must we
        for x, (_, axis, reverse) in zip(xs, cases):
            with pytest.raises(TypeError):
                minixla.jit(lambda x: getattr(lax, op)(x, axis=axis, reverse=reverse), backend=backend)(x)
        return
    got = minixla.jit(lambda *xs: [getattr(lax, op)(x, axis=axis, reverse=reverse)
                                   for x, (_, axis, reverse) in zip(xs, cases)], backend=backend)(*xs)
    assert len(got) == len(cases)
    for g, w, case in zip(got, want, cases):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (op, *case)
        np.testing.assert_array_equal(_bits(g), _bits(w), err_msg=f"{op} {case}")


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_narrow_and_long_float_scans_round_as_jax(dtype):
    # A prefix scan is XLA's blocked one (``scan._emit_blocked_scan``: blocks of 16, their totals
    # scanned recursively): JAX's bits. A suffix runs in sequence, each partial result rounded to
    # the dtype (bfloat16 included: the elemental code kept the running sum in f32); JAX (XLA's
    # tree scan) agrees to rounding.
    x = _data((300, 3), dtype, seed=1)
    for axis in (0,):
        for reverse in (False, True):
            f = minixla.jit(lambda x: lax.cumsum(x, axis=axis, reverse=reverse), backend="llvm")
            got = np.asarray(f(x))
            want = np.asarray(jax.lax.cumsum(x, axis=axis, reverse=reverse))
            if not reverse:
                np.testing.assert_array_equal(_bits(got), _bits(want))
                continue
            xs = np.flip(x, axis)
            acc = np.zeros(np.delete(x.shape, axis), dtype)
            seq = []
            for k in range(x.shape[axis]):
                acc = (acc.astype(np.float32) + np.take(xs, k, axis).astype(np.float32)).astype(dtype)
                seq.append(acc)
            seq = np.flip(np.stack(seq, axis), axis)
            np.testing.assert_array_equal(_bits(got), _bits(seq))
            tol = 1e-4 if dtype == np.float32 else 0.1
            np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=tol, atol=tol * 10)


def _compiled_llvm(fn, x):
    return minixla.jit(fn, backend="llvm").lower(x).compile()


def test_large_cumsum_is_a_scan_kernel():
    # Regression: 2**18 elements never finished on the LLVM backend (O(n^2) window loops).
    n = 2 ** 20
    x = np.ones(n, np.int32)
    c = _compiled_llvm(lambda x: jnp_cumsum(x), x)
    assert [k["strategy"] for k in c.executable.kernels()] == ["scan"]
    np.testing.assert_array_equal(np.asarray(c(x)), np.arange(1, n + 1, dtype=np.int32))
    # Along the major axis of a matrix (vectorized over the rows, chunked into units), reversed.
    y = _data((1024, 1030), np.float32)
    c = _compiled_llvm(lambda y: lax.cummax(y, axis=0, reverse=True), y)
    assert [k["strategy"] for k in c.executable.kernels()] == ["scan"]
    np.testing.assert_array_equal(np.asarray(c(y)), np.flip(np.maximum.accumulate(np.flip(y, 0), 0), 0))
    s = np.asarray(minixla.jit(lambda y: lax.cumsum(y, axis=0), backend="llvm")(y))
    np.testing.assert_array_equal(_bits(s), _bits(np.asarray(jax.lax.cumsum(y, axis=0))))  # (XLA's blocked order)


def jnp_cumsum(x):
    import minixla.numpy as mnp
    return mnp.cumsum(x)


def test_fused_operand_is_read_once_in_the_scan_kernel():
    x = _data((4, 3000), np.float32)
    c = _compiled_llvm(lambda x: lax.cumsum(jnp_exp(x) * 2.0, axis=1), x)
    kernels = c.executable.kernels()
    assert len(kernels) == 1 and kernels[0]["strategy"] == "scan"
    assert "exponential" in kernels[0]["opcodes"]
    np.testing.assert_allclose(np.asarray(c(x)), np.asarray(jnp.cumsum(jnp.exp(x) * 2.0, axis=1)), rtol=1e-4)


def jnp_exp(x):
    import minixla.numpy as mnp
    return mnp.exp(x)


def test_scan_axis_recognizes_only_prefix_and_suffix_windows():
    x = np.zeros((3, 4), np.float32)
    m = minixla.jit(lambda x: lax.cumsum(x, axis=1, reverse=True)).lower(x).hlo_module
    rw, = [i for i in m.entry.instructions if i.opcode == "reduce-window"]
    assert scan_axis(rw) == (1, True)
    w = rw.attrs["window"]
    rw.attrs["window"] = dict(w, pad=((0, 0), (1, 2)))  # not a suffix any more
    assert scan_axis(rw) is None
    rw.attrs["window"] = dict(w, stride=(1, 2))
    assert scan_axis(rw) is None
    rw.attrs["window"] = dict(w, pad=((0, 0), (3, 0)))  # a prefix
    assert scan_axis(rw) == (1, False)


def test_evaluator_scan_matches_window_by_window(monkeypatch):
    # one module per dtype with every (op, axis, reverse) as an output, evaluated both ways
    cases = [(op, axis, reverse) for op in OPS for axis in (0, 1) for reverse in (False, True)]
    for dtype in (np.float32, np.int32, np.float16):
        x = _data((6, 5), dtype, seed=2)
        x[0, 0] = -0.0 if dtype != np.int32 else 0
        fn = minixla.jit(lambda x: [getattr(lax, op)(x, axis=axis, reverse=reverse) for op, axis, reverse in cases])
        m = fn.lower(x).hlo_module
        assert sum(i.opcode == "reduce-window" for i in m.entry.instructions) == len(cases)
        new = EV.evaluate(m, x)
        monkeypatch.setattr(EV, "runs_as_scan", lambda i: False)
        old = EV.evaluate(m, x)
        monkeypatch.undo()
        assert len(new) == len(old) == len(cases)
        for n, o, (op, axis, reverse) in zip(new, old, cases):
            np.testing.assert_array_equal(_bits(n), _bits(o), err_msg=f"{dtype} {op} {axis} {reverse}")
            want = np.asarray(getattr(jax.lax, op)(x, axis=axis, reverse=reverse))
            np.testing.assert_array_equal(_bits(n), _bits(want), err_msg=f"{dtype} {op} {axis} {reverse}")


def test_cumulative_gradients_follow_jaxs_associative_scan_at_ties_nan_and_inf():
    # Fuzzer find (seed 7001): the JVP scanned with +inf padding, which tied with an infinite
    # element and halved its tangent, and its Hillis-Steele tree split ties unlike JAX's.
    rs = np.random.RandomState(3)
    x = rs.choice(np.array([-1, 0, 1, 1, 2, np.inf, -np.inf, np.nan], np.float32), (4, 5))
    c = (rs.randint(-16, 17, (4, 5)) / 4).astype(np.float32)
    def loss(lax_, np_, x, c):  # (one program for all six: each compile costs)
        return sum(np_.sum(getattr(lax_, op)(x * k, axis=1, reverse=reverse) * c)
                   for k, op in enumerate(("cummax", "cummin", "cumprod"), 1) for reverse in (False, True))
    want = jax.grad(lambda x, c: loss(jax.lax, jnp, x, c))(x, c)
    got = minixla.jit(minixla.grad(lambda x, c: loss(lax, minixla.numpy, x, c)))(x, c)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
