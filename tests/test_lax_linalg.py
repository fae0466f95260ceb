"""minixla.lax.linalg (lu, triangular_solve, cholesky, qr, eigh, svd) and the decompositions of
minixla.numpy.linalg (det, slogdet, inv, solve, eigh, svd, pinv, lstsq, ...) against JAX eager
(LAPACK), under jit on both backends, in float32 and float64, sizes 1, 2, 3 (batched), 8 and 33.

Tolerances come from the conditioning, computed here with NumPy: a backward-stable
factorization of ``A`` is accurate to ~``eps * cond(A)`` relative; eigenvalues to
``eps * ||A||`` absolute; an eigenvector (here the sign-free projector ``V diag(c) V^T``) to
``eps * ||A|| / gap``. Eigen- and singular vectors are compared through sign-invariant products
(``V diag(c) V^T``, ``U diag(c) V^T``), since their signs are not unique. Each program holds
many cases, so few programs are compiled.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.lax import linalg as jla

import minixla
import minixla.numpy as mnp
from minixla.core import errors
from minixla.lax import linalg as la
from minixla.testing import _describe_mismatch, check_against_jax

import os

rng = np.random.default_rng(7)
DEEP = os.environ.get("MINIXLA_DEEP_LINALG") == "1"
# (each decomposition is a loop nest costing ~0.5-1 s to compile per backend: the default run
# compiles each once or twice; MINIXLA_DEEP_LINALG=1 runs every size in both dtypes on both backends)
ALL_SIZES = [(1, 1), (2, 2), (2, 3, 3), (8, 8), (33, 33)]
EVERYTHING = ("lu", "triangular_solve", "cholesky", "eigh", "svd", "qr")
#: what the default run does at each size (the big one: the loops whose trip count grows)
DEFAULT_OPS = {(33, 33): ("lu", "cholesky", "eigh"), (2, 2): ("eigh",), (1, 1): ("lu", "qr"),
               (8, 8): ("lu", "triangular_solve", "cholesky", "eigh", "svd")}


def _orth(shape):
    return np.linalg.qr(rng.standard_normal(shape))[0]


def _mats(dt, sizes):
    """Random matrices with singular values spread over [1, 3] and SPD matrices with eigenvalues
    over [1, 4] (random orthogonal factors): conditioned and separated enough that the
    tolerances stay meaningful at every size, the gaps known."""
    mats, spds = [], []
    for s in sizes:
        n = s[-1]
        q1, q2, q3 = _orth(s), _orth(s), _orth(s)
        mats.append(((q1 * np.linspace(1, 3, n)) @ q2).astype(dt))
        spds.append(((q3 * np.linspace(1, 4, n)) @ np.swapaxes(q3, -1, -2)).astype(dt))
    return mats, spds


def _program(lin, np_, ops):
    """The decompositions ``ops[i]`` of matrix ``i``, as quantities that do not depend on sign choices."""
    def prog(mats, spds, tall, wide):
        out = []
        for a, s, which in zip(mats, spds, ops):
            n = a.shape[-1]
            c = np_.arange(1, n + 1, dtype=a.dtype)
            if "lu" in which:
                out += list(lin.lu(a))
            if "triangular_solve" in which:
                out.append(lin.triangular_solve(a, s, left_side=True, lower=True))
                out.append(lin.triangular_solve(a, s, left_side=False, lower=False, transpose_a=True,
                                                unit_diagonal=True))
            if "cholesky" in which:
                out.append(lin.cholesky(s))
            if "eigh" in which:
                v, w = lin.eigh(s)
                out += [w, (v * c) @ np_.swapaxes(v, -1, -2)]
            if "svd" in which:
                u, sv, vh = lin.svd(a)
                out += [sv, (u * c) @ vh]
            if "qr" in which:
                out += list(lin.qr(a))
        if tall is not None:
            out += list(lin.qr(tall, full_matrices=False)) + list(lin.qr(wide))
            u, sv, vh = lin.svd(tall, full_matrices=False)
            out += [sv, (u * sv) @ vh]
        return out
    return prog


def _tolerances(dt, mats, spds):
    """(rtol, atol) for the whole program: the worst case over its matrices."""
    eps = np.finfo(dt).eps
    worst = 1.0
    for a, s in zip(mats, spds):
        for m in (a.reshape(-1, *a.shape[-2:]), s.reshape(-1, *s.shape[-2:])):
            worst = max(worst, float(np.max(np.linalg.cond(m.astype(np.float64)))))
        for x in (s, a):  # the eigen/singular-value gaps (projectors' conditioning)
            x64 = x.reshape(-1, *x.shape[-2:]).astype(np.float64)
            vals = np.linalg.eigvalsh(x64) if x is s else np.linalg.svd(x64, compute_uv=False)
            gaps = np.diff(np.sort(vals, axis=-1), axis=-1)
            if gaps.size:
                worst = max(worst, float(np.max(np.abs(vals))) / float(np.min(gaps)))
    return 30 * eps * worst, 30 * eps * worst


def check_against_jitted_jax(f, jax_f, *args, rtol, atol, backend):
    """``check_against_jax`` with the reference under ``jax.jit``: the same LAPACK calls as JAX
    eager (``disable_jit`` would also run every small op of jnp.linalg's wrappers one by one,
    ~5 s of CPU a program here); the tolerances are the conditioning's, far above an ulp."""
    want = jax.tree_util.tree_leaves(jax.jit(jax_f)(*args))
    got = jax.tree_util.tree_leaves(minixla.jit(f, backend=backend)(*args))
    assert len(got) == len(want)
    problems = [m for i, (g, w) in enumerate(zip(got, want))
                if (m := _describe_mismatch(f"[{backend}] output {i}", g, w, rtol, atol))]
    assert not problems, "\n".join(problems)


#: (dtype, backend, sizes, with the tall/wide QR and SVD): the hand-off's XLA compile of these
#: loops is the dearest (~10 s for the float32 program), so by default it gets the batched case only
CONFIGS = [(np.float32, "llvm", [(2, 3, 3), (33, 33)], True), (np.float64, "llvm", [(1, 1), (2, 2), (8, 8)], False),
           (np.float32, "jax", [(2, 3, 3)], False)]
if DEEP:
    CONFIGS = [(dt, b, ALL_SIZES, True) for dt in (np.float32, np.float64) for b in ("llvm", "jax")]


@pytest.mark.parametrize("dt,backend,sizes,rect", CONFIGS, ids=lambda c: getattr(c, "__name__", str(c)))
def test_decompositions_match_jax(dt, backend, sizes, rect, x64):
    ops = [EVERYTHING if DEEP else DEFAULT_OPS.get(s, EVERYTHING) for s in sizes]
    mats, spds = _mats(dt, sizes)
    tall, wide = rng.standard_normal((9, 5)).astype(dt), rng.standard_normal((4, 6)).astype(dt)
    if not rect:
        tall = wide = None
    rtol, atol = _tolerances(dt, mats + ([] if tall is None else [tall]),
                             spds + ([] if tall is None else [tall.T @ tall]))
    assert rtol < (1e-2 if dt == np.float32 else 1e-9)  # (a test that can fail)
    check_against_jitted_jax(_program(la, mnp, ops), _program(jla, jnp, ops), mats, spds, tall, wide,
                             rtol=rtol, atol=atol, backend=backend)


def test_grad_of_a_loop_whose_body_computes_from_literals_only():
    # regression: re-tracing a scan/while body for jvp/transpose ran its literal-only equations
    # (``zeros(())``, ``sin(ones(3))``) eagerly, and the re-traced body then closed over them
    # (an AssertionError in the scan JVP); every loop in minixla.lax.linalg has such equations
    def f(np_, lax):
        body = lambda i, c: np_.where(c > 0, c, np_.zeros((), c.dtype)) * 2 + np_.sin(np_.ones(3))  # noqa: E731
        return lambda x: lax.fori_loop(0, 3, body, x).sum()
    x = np.array([1.0, -2.0, 0.5], np.float32)
    np.testing.assert_allclose(minixla.grad(f(mnp, minixla.lax))(x), jax.grad(f(jnp, jax.lax))(x))
    np.testing.assert_allclose(minixla.vmap(minixla.grad(f(mnp, minixla.lax)))(np.stack([x, -x])),
                               jax.vmap(jax.grad(f(jnp, jax.lax)))(np.stack([x, -x])))


def test_orthogonal_initializer_matches_jax():
    # the same normal draws as JAX (bit-identical), orthonormalized by minixla's Householder QR:
    # equal to rounding (the QR of a well-conditioned Gaussian matrix: a few ulp)
    key = np.asarray(jax.random.PRNGKey(1))

    def prog(init_mod):
        return lambda k: [init_mod.orthogonal(scale=2.0, column_axis=ca)(k, shape)
                          for shape, ca in [((5, 3), -1), ((2, 3, 4), 1)]]
    got = check_against_jax(prog(minixla.nn.initializers), prog(jax.nn.initializers), key,
                            rtol=1e-5, atol=2e-6, backends=("llvm",))["llvm"]
    q = np.asarray(got[0]) / 2
    np.testing.assert_allclose(q.T @ q, np.eye(3), atol=1e-6)
    with pytest.raises(ValueError, match="at least a 2D shape"):
        minixla.nn.initializers.orthogonal()(key, (3,))


def _loss(np_, lin):
    """A scalar touching every decomposition's every output (sign-free for eigh/svd)."""
    def f(a, s, w):
        c = np_.arange(1.0, 5.0, dtype=a.dtype)
        v, e = lin.eigh(s)
        u, sv, vh = lin.svd(a)
        q, r = lin.qr(a)
        return (np_.linalg.det(a) + np_.linalg.slogdet(s)[1] + (np_.linalg.inv(a) * w).sum()
                + (np_.linalg.solve(a, w) * w).sum() + (lin.cholesky(s) * w).sum() + (e * c).sum()
                + (((v * c) @ v.T) * w).sum() + (sv * c).sum() + (((u * c) @ vh) * w).sum()
                + (q * w).sum() + (r * w).sum() + (lin.lu(a)[0] * w).sum()
                + (lin.triangular_solve(s, w, left_side=True, lower=True) * w).sum())
    return f


def test_gradients_match_jax(x64):
    # reverse mode through the loops (lu, triangular_solve, cholesky, qr: the pivot index carries
    # no gradient) and through eigh's/svd's custom_jvp, float64, against jax.grad (JAX's own
    # rules: custom_linear_solve, the LU/Cholesky/QR/eigh/SVD JVPs); the reference runs under
    # jax.jit, whose LAPACK calls are JAX eager's (eager grad here costs ~10 s of CPU)
    r = np.random.default_rng(1)
    a = r.standard_normal((4, 4))
    s = a @ a.T + np.eye(4)
    w = r.standard_normal((4, 4))
    got = minixla.jit(minixla.grad(_loss(mnp, la), argnums=(0, 1)))(a, s, w)
    want = jax.jit(jax.grad(_loss(jnp, jla), argnums=(0, 1)))(a, s, w)
    # cond(a) ~ 6, the eigen/singular-value gaps >= 0.2: derivatives lose those factors only
    for g, x in zip(got, want):
        np.testing.assert_allclose(g, x, rtol=1e-9, atol=1e-9)


def test_errors_as_jax():
    v, m23 = np.ones(3, np.float32), np.ones((2, 3), np.float32)
    for fn, args, exc, msg in [(la.lu, (v,), TypeError, "Input 0 to lu must have rank at least 2"),
                               (la.qr, (v,), TypeError, "Input 0 to qr must have rank at least 2"),
                               (la.triangular_solve, (m23, m23), ValueError, "must be a square matrix"),
                               (la.cholesky, (m23,), TypeError, "square"), (la.eigh, (m23,), TypeError, "square")]:
        with pytest.raises(exc, match=msg):
            fn(*args)
        with pytest.raises(exc):  # (the class JAX raises)
            getattr(jla, fn.__name__)(*args)
    with pytest.raises(errors.UnsupportedError, match="pivoting"):
        la.qr(np.eye(2, dtype=np.float32), pivoting=True)


def test_an_empty_batch_of_matrices():
    # found by the fuzzer's linear-algebra family: a zero-sized batch dim made take_along_axis
    # (solve's pivoting, inv) build a gather whose slices could not fit, and eigh/svd reduce their
    # convergence test over no matrices (max of an empty array)
    def f(L, np_, a, r):
        return (np_.linalg.solve(a, a), np_.linalg.inv(a), L.eigh(a)[0], L.eigh(a)[1], L.svd(r)[0],
                L.svd(r)[1], L.svd(r, full_matrices=False)[2], np_.take_along_axis(r, np_.zeros((0, 4, 2), np.int32), 1))
    a, r = np.zeros((0, 2, 2), np.float32), np.zeros((0, 3, 2), np.float32)
    want = f(jla, jnp, a, r)
    for backend in ("llvm", "jax"):
        got = minixla.jit(lambda a, r: f(la, mnp, a, r), backend=backend)(a, r)
        assert [(g.shape, g.dtype) for g in got] == [(w.shape, w.dtype) for w in want], backend
