"""``minixla.random`` with ``rbg`` and ``unsafe_rbg`` keys (``minixla/random/rbg.py``): keys,
``split``, ``fold_in``, ``bits``, ``uniform``, ``normal``, ``randint`` bit-identical to
``jax.random``; raw ``uint32[4]`` keys under ``jax_default_prng_impl="rbg"``."""
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.random as mr

DEEP = os.environ.get("MINIXLA_DEEP_RANDOM", "0") not in ("", "0")


def _program(R, seed, deep=DEEP):
    k = R.key(seed, impl="rbg")
    s, f = R.split(k), R.fold_in(k, 7)
    u = R.key(seed, impl="unsafe_rbg")
    raw = R.PRNGKey(seed)  # (read with the default implementation: rbg here)
    out = [R.key_data(s), R.key_data(f), R.uniform(f, (7,)), R.normal(s[1], (3, 2)),
           R.key_data(R.split(u, 3)), R.key_data(R.fold_in(u, 5)), raw, R.bits(raw, (5,), jnp.uint8)]
    if deep:  # (MINIXLA_DEEP_RANDOM=1: every sampler of both implementations)
        for k in (k, u):
            s, f = R.split(k, 3), R.fold_in(k, 7)
            out += [R.bits(s[2], (5,), jnp.uint16), R.uniform(f, (4,), jnp.float32, -1., 2.),
                    R.normal(s[1], (3, 2)), R.randint(s[0], (5,), 0, 10), R.permutation(f, 6),
                    R.bernoulli(s[1], 0.3, (6,)), R.key_data(R.split(s[0], (2, 2)))]
        out += [R.split(raw), R.randint(raw, (5,), 0, 10)]
    return out


def test_rbg_keys_match_jax_random():
    jax.config.update("jax_default_prng_impl", "rbg")
    try:
        # jitted, both (jax.random's samplers run jitted; the seed an argument, so that minixla
        # traces the key derivation instead of running it op by op); one LLVM program
        seed = np.int32(42)
        want = jax.jit(lambda q: _program(jax.random, q))(seed)
        for backend in ("llvm", "jax") if DEEP else ("llvm",):
            got = minixla.jit(lambda q: _program(mr, q), backend=backend)(seed)
            for n, (g, w) in enumerate(zip(got, want)):
                assert np.asarray(g).dtype == np.asarray(w).dtype, n
                np.testing.assert_array_equal(g, w, err_msg=f"{backend} #{n}")
        with pytest.raises(TypeError, match=r"key_data.shape to end with \(4,\)"):  # (JAX's text)
            mr.uniform(np.zeros(2, np.uint32), (3,))
    finally:
        jax.config.update("jax_default_prng_impl", "threefry2x32")
    k = mr.key(1, impl="unsafe_rbg")
    assert str(k.dtype) == "key<urbg>" and mr.key_impl(k) == "unsafe_rbg" and k.shape == ()
    assert mr.key_data(mr.split(k, (2, 3))).shape == (2, 3, 4)
    # eagerly, and a JAX typed rbg key taken as minixla's
    jk = jax.random.key(9, impl="rbg")
    np.testing.assert_array_equal(mr.key_data(mr.fold_in(jk, 3)), jax.random.key_data(jax.random.fold_in(jk, 3)))
    with pytest.raises(minixla.core.errors.UnsupportedError, match="philox4x32"):
        mr.key(0, impl="philox4x32")


def test_gamma_family_hands_random_gamma_jaxs_keys(monkeypatch):
    """``gamma``/``loggamma``/``beta``/``t``/``dirichlet``/``chisquare`` with rbg and unsafe_rbg
    keys give ``random_gamma`` the keys JAX's samplers give it (``split`` of the key's own
    implementation: unsafe_rbg's is ``rng_bit_generator``'s, not rbg's threefry) and its
    implementation. (The draws themselves compile for minutes, as in JAX: ``MINIXLA_DEEP_RANDOM=1``,
    ``test_gamma_family_with_rbg_keys_is_jax_random``.) ``poisson`` refuses them, as JAX."""
    from minixla.core.primitive import impl_rules
    from minixla.random.gamma import random_gamma_p
    seen = []

    def record(key, a, *, log_space, impl="threefry2x32"):
        seen.append((np.asarray(key).tolist(), impl, bool(log_space)))
        return np.ones(np.shape(a), np.asarray(a).dtype)
    monkeypatch.setitem(impl_rules, random_gamma_p, record)
    a = np.array([0.5, 2.0], np.float32)
    for impl in ("rbg", "unsafe_rbg"):
        k, jk = mr.key(4, impl=impl), jax.random.key(4, impl=impl)
        seen.clear()
        mr.gamma(k, a), mr.loggamma(k, a), mr.beta(k, a, 1.5), mr.t(k, a), mr.dirichlet(k, a), mr.chisquare(k, a)
        data = lambda key: jax.random.key_data(key).tolist()  # noqa: E731
        ka, kb = jax.random.split(jk)
        want = [(data(jk), impl, False), (data(jk), impl, True), (data(ka), impl, True), (data(kb), impl, True),
                (data(kb), impl, False), (data(jk), impl, True), (data(jk), impl, True)]
        assert seen == want, impl
        with pytest.raises(NotImplementedError, match="only implemented for the threefry2x32"):
            mr.poisson(k, 3.0)


def _gamma_family(R, seed):
    out = []
    for impl in ("rbg", "unsafe_rbg"):
        k = R.key(seed, impl=impl)
        a = jnp.array([0.3, 1.0, 2.5, 7.0], jnp.float32)
        out += [R.gamma(k, a), R.loggamma(R.fold_in(k, 1), a), R.beta(R.fold_in(k, 2), a, 1.5),
                R.dirichlet(R.fold_in(k, 3), a), R.chisquare(R.fold_in(k, 4), a), R.t(R.fold_in(k, 5), a)]
    return out


@pytest.mark.skipif(not DEEP, reason="compiles for minutes (as JAX's own): MINIXLA_DEEP_RANDOM=1")
def test_gamma_family_with_rbg_keys_is_jax_random():
    """gamma/loggamma/beta/dirichlet/chisquare/t with rbg and unsafe_rbg keys against jax.jit:
    eagerly, under minixla.jit on both backends and imported (``frontend="jax"``). Exact, but
    for dirichlet's softmax (op by op here: 1 ulp) and, on LLVM, the log-space samplers (minixla's
    own ``log``, 1-2 ulp from XLA's)."""
    seed = np.int32(3)
    want = jax.jit(lambda s: _gamma_family(jax.random, s))(seed)
    runs = {"eager": lambda: _gamma_family(mr, seed),
            "llvm": lambda: minixla.jit(lambda s: _gamma_family(mr, s), backend="llvm")(seed),
            "jax": lambda: minixla.jit(lambda s: _gamma_family(mr, s), backend="jax")(seed),
            "import": lambda: minixla.jit(lambda s: _gamma_family(jax.random, s), frontend="jax",
                                          backend="jax")(seed)}
    for what, run in runs.items():
        for n, (g, w) in enumerate(zip(run(), want)):
            if n % 6 == 3 or (what == "llvm" and n % 6 in (1, 2, 4)):
                np.testing.assert_allclose(g, w, rtol=1e-6, err_msg=f"{what} #{n}")
            else:
                np.testing.assert_array_equal(g, w, err_msg=f"{what} #{n}")
