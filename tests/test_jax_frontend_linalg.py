"""The JAX front end on jax.numpy.linalg / jax.lax.linalg programs: lu, triangular_solve,
cholesky, qr, eigh, svd, lu_pivots_to_permutation, custom_linear_solve (jnp.linalg.solve/inv)
and platform_index (jnp.linalg.slogdet) import as minixla.lax.linalg's compositions; values
against JAX eager (eigen/singular vectors through sign-free products), and minixla.grad of an
imported solve against jax.grad (the custom_linear_solve rule carries dA's part)."""
import jax
import jax.numpy as jnp
import numpy as np

import minixla
from minixla.frontends.jax_importer import import_rules

rng = np.random.default_rng(11)
A = rng.standard_normal((4, 4)).astype(np.float32)
S = (A @ A.T + np.eye(4)).astype(np.float32)
B = rng.standard_normal((4, 2)).astype(np.float32)
C = np.arange(1, 5, dtype=np.float32)


def _program(a, s, b):
    w, v = jnp.linalg.eigh(s)
    u, sv, vh = jnp.linalg.svd(a)
    lu, piv, perm = jax.lax.linalg.lu(a)
    return (jnp.linalg.solve(a, b), jnp.linalg.slogdet(a)[1],
            jnp.linalg.cholesky(s), w, (v * C) @ v.T, sv, (u * C) @ vh, *jnp.linalg.qr(a), lu, piv, perm,
            jax.lax.linalg.triangular_solve(s, b, left_side=True, lower=True),
            jax.grad(lambda a: (jnp.linalg.solve(a, b) ** 2).sum())(a))


def test_linalg_programs_import_and_match_jax():
    for name in ("lu", "triangular_solve", "cholesky", "qr", "eigh", "svd", "lu_pivots_to_permutation",
                 "custom_linear_solve", "platform_index"):
        assert name in import_rules, name
    got = minixla.jit(_program, frontend="jax")(A, S, B)
    want = jax.jit(_program)(A, S, B)  # (the LAPACK calls of JAX eager, without its op-by-op wrappers)
    # cond(A) ~ 10, cond(S) ~ 60 (float32): a few ulp times those
    for i, (g, w) in enumerate(zip(got, want)):
        assert np.asarray(g).dtype == w.dtype and np.shape(g) == w.shape, i
        np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-5, err_msg=f"output {i}")
    loss = lambda a: (jnp.linalg.solve(a, B) ** 2).sum()  # noqa: E731
    g = minixla.grad(minixla.jit(loss, frontend="jax"))(A)
    np.testing.assert_allclose(g, jax.grad(loss)(A), rtol=2e-4, atol=2e-4)
