"""minixla.numpy.linalg (the part that needs no decomposition): vector and matrix norms over
their orders and axes, matrix_power, and the Array API forms (vecdot, matmul, tensordot, trace,
diagonal, outer, cross, matrix_transpose) against JAX eager; one program under jit on both
backends and a gradient; JAX's errors, and UnsupportedError where an SVD/inverse is needed."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy.linalg as mla
from minixla.testing import check_against_jax

rng = np.random.default_rng(0)
A = rng.standard_normal((2, 3, 4)).astype(np.float32)
M = rng.standard_normal((3, 3)).astype(np.float32)
V = rng.standard_normal(5).astype(np.float32)
I = np.arange(12, dtype=np.int32).reshape(3, 4)

CASES = [("norm", (V,), {}), ("norm", (I,), {}), ("norm", (A,), dict(axis=1, ord=1)),
         ("norm", (A,), dict(axis=(0, 2), ord=np.inf, keepdims=True)), ("norm", (A,), dict(axis=(2, 1), ord=1)),
         ("norm", (A,), dict(axis=(1, 2), ord=-1)), ("norm", (A,), dict(axis=(2, 0), ord=-np.inf)),
         ("norm", (M,), dict(ord="fro")), ("norm", (V,), dict(ord=0)), ("norm", (V,), dict(ord=3)),
         ("norm", (V,), dict(ord=-np.inf)), ("vector_norm", (A,), dict(axis=(0, 1), ord=1)),
         ("matrix_norm", (A,), dict(ord=np.inf, keepdims=True)), ("matrix_power", (M, 0), {}),
         ("matrix_power", (M, 3), {}), ("matrix_power", (np.stack([M, M / 2]), 7), {}),
         ("matrix_power", (I[:3, :3], 5), {}), ("vecdot", (A, A[0]), {}), ("matmul", (A, A[0].T), {}),
         ("tensordot", (A, A), dict(axes=([1, 2], [1, 2]))), ("trace", (A,), dict(offset=1)),
         ("diagonal", (A,), {}), ("outer", (V, V[:3]), {}), ("cross", (M.T, M), dict(axis=0)),
         ("matrix_transpose", (A,), {})]


def test_eager_matches_jax():
    for name, args, kwargs in CASES:
        with jax.disable_jit():
            want = getattr(jnp.linalg, name)(*args, **kwargs)
        got = getattr(mla, name)(*args, **kwargs)
        assert np.asarray(got).dtype == want.dtype and np.shape(got) == want.shape, (name, kwargs)
        np.testing.assert_allclose(got, want, rtol=1e-5 if name == "matrix_power" else 2e-6, atol=2e-6,
                                   err_msg=f"{name} {kwargs}")


def test_jit_on_both_backends_and_grad():
    def prog(la):
        return lambda a, m, v: (la.norm(a, axis=(2, 1), ord=1), la.vector_norm(v, ord=3), la.matrix_norm(a),
                                la.matrix_power(m, 5), la.cross(m, m[::-1]), la.outer(v, v), la.trace(a))
    check_against_jax(prog(mla), prog(jnp.linalg), A, M, V, rtol=1e-5, atol=2e-6)
    got = minixla.grad(lambda m: mla.norm(mla.matrix_power(m, 3)) + mla.norm(m, ord=np.inf))(M)
    want = jax.grad(lambda m: jnp.linalg.norm(jnp.linalg.matrix_power(m, 3)) + jnp.linalg.norm(m, ord=np.inf))(M)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_errors_like_jax():
    with pytest.raises(ValueError, match="Invalid order 'inf' for vector norm.Use 'jax.numpy.inf'"):
        mla.vector_norm(V, ord="inf")
    with pytest.raises(ValueError, match="Invalid order 'max' for matrix norm"):
        mla.norm(M, ord="max")
    with pytest.raises(ValueError, match="Improper number of axes"):
        mla.norm(A, ord=1)
    # the decompositions' errors, as jax.numpy.linalg's (checked before anything is computed)
    for fn, args, exc, msg in [
            ("det", (A,), ValueError, r"Argument to _det\(\) must have shape \[..., n, n\], got \(2, 3, 4\)"),
            ("det", (V,), ValueError, r"_det\(\) must have shape"),
            ("slogdet", (A,), ValueError, r"Argument to slogdet\(\) must have shape"),
            ("inv", (A,), ValueError, r"Argument to inv must have shape \[..., n, n\], got \(2, 3, 4\)\."),
            ("solve", (M, V), ValueError, "inconsistent size for core dimension 'm': 5 vs 3"),
            ("solve", (V, V), ValueError, "left hand array must be at least two dimensional"),
            ("solve", (np.stack([M, M]), M[:2]), ValueError, "Prior to JAX v0.5.0"),
            ("qr", (V,), TypeError, "must have rank at least 2"), ("qr", (M, "raw2"), ValueError, "Unsupported QR"),
            ("cholesky", (A,), TypeError, "square"), ("eigh", (A,), TypeError, "square"),
            ("svd", (V,), TypeError, "must have rank at least 2"),
            ("lstsq", (M, V), ValueError, "Leading dimensions of input arrays must match")]:
        with pytest.raises(exc, match=msg):
            getattr(mla, fn)(*args)
        with pytest.raises(exc):  # (JAX raises the same class)
            getattr(jnp.linalg, fn)(*args)
    with pytest.raises(ValueError, match="only one of tol or rtol"):
        mla.matrix_rank(M, 1e-3, tol=1e-3)
    with pytest.raises(TypeError, match="must be square"):
        mla.matrix_power(A, 2)
    with pytest.raises(TypeError, match="exponent must be an integer"):
        mla.matrix_power(M, 1.5)
    with pytest.raises(ValueError, match="must be one-dimensional"):
        mla.outer(M, V)
    with pytest.raises(ValueError, match="3-dimensional vectors"):
        mla.cross(A, A)


# --- the decompositions (minixla.lax.linalg underneath): singular, non-PD and rank-deficient
# inputs batched with regular ones, so each function compiles one loop nest
_r = np.random.default_rng(3)
A4 = np.stack([_r.standard_normal((4, 4)), np.outer(np.arange(1.0, 5.0), [1.0, -2.0, 0.5, 3.0]) + np.diag([0, 0, 0, 0.0]),
               np.zeros((4, 4))]).astype(np.float32)
A4[1, :, 3] = A4[1, :, 0] + A4[1, :, 1]  # (rank 1: exactly singular in floating point too)
A2 = np.array([[[2.0, 1.0], [1.0, 3.0]], [[1.0, 2.0], [2.0, 4.0]]], np.float32)
S2 = np.array([[[4.0, 1.0], [1.0, 3.0]], [[1.0, 2.0], [2.0, 1.0]]], np.float32)  # PD, then not PD
B = _r.standard_normal((2, 1, 4, 3)).astype(np.float32)


def _singular_program(la_):
    return lambda a4, a2, s2: (la_.det(a4), *la_.slogdet(a4), la_.inv(a2), la_.cholesky(s2), la_.det(a4[:, :3, :3]))


def _decomposition_program(la_):
    def prog(a4, a2, b, m):
        spd = a4[0] @ a4[0].T + np.eye(4, dtype=np.float32)
        return (la_.solve(a4[:1], b), la_.solve(a4[0], b[0, 0, :, 0]), la_.eigvalsh(spd), la_.svdvals(a4),
                la_.matrix_rank(a4), la_.pinv(a4[:2]), la_.matrix_power(a2[:1], -2), la_.norm(m, 2),
                *la_.lstsq(a4[0, :, :3], b[0, 0]))
    return prog


def test_decompositions_under_jit_singular_inputs_as_jax():
    # singular/non-PD: JAX's inf/NaN patterns (det 0, slogdet (0, -inf), inv inf, cholesky NaN),
    # on both backends; the rest on llvm (the same loops: the hand-off's XLA compile is dear)
    check_against_jax(_singular_program(mla), _singular_program(jnp.linalg), A4, A2, S2, rtol=2e-5, atol=2e-5)
    # cond(a4[0]) ~ 20, cond(spd) ~ 400; pinv/rank near-zero singular values are cut by rtol
    from test_lax_linalg import check_against_jitted_jax
    check_against_jitted_jax(_decomposition_program(mla), _decomposition_program(jnp.linalg), A4, A2, B, M,
                             rtol=2e-4, atol=2e-4, backend="llvm")


# --- det's derivative is JAX's custom_jvp (the cofactor matrix, finite at a singular matrix)
def _eye_without(n, *zeros):
    e = np.eye(n)
    e[list(zeros), list(zeros)] = 0
    return e


_M4 = np.array([[1, 2, 3, 4], [2, 4, 6, 8], [0, 1, 0, 1], [1, 0, 1, 0.0]])  # rank 3: JAX's row 0 is [4, -4, -4, 4]
_S5 = np.stack([_r.standard_normal((5, 5)), _eye_without(5, 4), _eye_without(5, 0), _eye_without(5, 3, 4),
                _r.standard_normal((5, 4)) @ _r.standard_normal((4, 5)),
                np.pad(_M4, ((1, 0), (1, 0))) + _eye_without(5, 1, 2, 3, 4)])  # rank 5, 4, 4, 3, 4; 1 (+) M4
_T5 = _r.standard_normal((5, 5))


def _det_derivatives(la_, grad, jvp, vmap):
    def prog(s5, t5):
        return (vmap(grad(la_.det))(s5), *jvp(la_.det, (s5[0],), (t5,)),
                *jvp(la_.slogdet, (s5[0],), (t5,)), grad(lambda a: la_.slogdet(a)[1])(s5[0]))
    return prog


def test_det_gradient_at_singular_matrices_as_jax():
    # (sizes 1-6, rank n-1 and n-2, float64, jacfwd, hessian and the hand-off were checked against JAX
    # when this was written; one float32 program here keeps the suite's compile time small)
    args = (_S5.astype(np.float32), _T5.astype(np.float32))
    mx = _det_derivatives(mla, minixla.grad, minixla.jvp, minixla.vmap)
    jx = _det_derivatives(jnp.linalg, jax.grad, jax.jvp, jax.vmap)
    want = jax.tree_util.tree_leaves(jax.jit(jx)(*args))
    np.testing.assert_allclose(want[0][5, 1, 1:], [4, -4, -4, 4])  # (what the JAX reference says)
    got = jax.tree_util.tree_leaves(minixla.jit(mx)(*args))
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert np.asarray(g).dtype == w.dtype, i
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5, err_msg=f"output {i}")
    assert np.isfinite(got[0]).all()
    # (eager too: the bug was there as well)
    np.testing.assert_allclose(minixla.grad(mla.det)(args[0][1]), want[0][1], atol=1e-6)


def _empty_program(la_, lin):
    def prog(e, eb, wide, tall):
        return (la_.det(e), *la_.slogdet(e), la_.inv(e), la_.det(eb), *la_.slogdet(eb), la_.inv(eb), la_.solve(eb, eb[..., :1]), la_.cholesky(e),
                *la_.eigh(eb), la_.matrix_power(e, -2), *la_.qr(wide, mode="complete"), *la_.qr(tall),
                *la_.svd(tall), *la_.svd(wide, full_matrices=False), la_.svdvals(eb),
                la_.pinv(tall), *la_.lstsq(wide, wide[:, 0]), la_.norm(tall, 2), la_.norm(wide, "nuc"),
                la_.norm(e, 1), la_.norm(tall, -np.inf), *lin.lu(eb), *lin.lu(tall), *lin.svd(e))
    return prog


def test_empty_matrices_as_jax():
    # 0x0, a batch of them, (0, n) and (n, 0): JAX's values (det 1, slogdet (1, 0), identities
    # for the full SVD/QR factors, a zero lstsq solution), not a crash in an empty loop's body
    args = (np.zeros((0, 0), np.float32), np.zeros((2, 0, 0), np.float32), np.zeros((0, 3), np.float32),
            np.zeros((3, 0), np.float32))
    from jax.lax import linalg as jlin
    from minixla.lax import linalg as mlin
    want = jax.tree_util.tree_leaves(jax.jit(_empty_program(jnp.linalg, jlin))(*args))
    for got in (jax.tree_util.tree_leaves(minixla.jit(_empty_program(mla, mlin))(*args)),
                [mla.det(args[0]), *mla.slogdet(args[0]), mla.inv(args[0])]):
        for i, (g, w) in enumerate(zip(got, want)):
            assert np.shape(g) == w.shape and np.asarray(g).dtype == w.dtype, (i, np.shape(g), w.shape)
            np.testing.assert_array_equal(g, w, err_msg=f"output {i}")
    np.testing.assert_array_equal(want[:3], [1, 1, 0])
    for fn, arg in [(lambda la_, a: la_.norm(a, -2), args[3]), (lambda la_, a: la_.matrix_rank(a), args[0])]:
        with pytest.raises(ValueError):  # (the min/max of no singular values, as JAX's)
            fn(mla, arg)
        with pytest.raises(ValueError):
            fn(jnp.linalg, arg)
