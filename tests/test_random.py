"""``minixla.random`` against ``jax.random``: the same bits for the same key, shape and dtype,
eagerly and under ``minixla.jit`` on both backends (issue 14).

The samplers are compiled together, one program per backend, to keep the suite's compile
time small. The ones built on ``log``/``log1p``/``erf_inv`` are bit-identical too, on the LLVM
backend as well: its float32 transcendentals are XLA:CPU's algorithms (``math_xla.py``).
"""
import os

import numpy as np
import jax
import jax.random as jr
import pytest

import minixla
import minixla.numpy as mnp
import minixla.random as mr
from minixla import lax

BACKENDS = ("llvm", "jax")
SEED = 7


def _bits(a):
    a = np.asarray(a)
    if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
        return a.view(np.dtype(f"i{a.dtype.itemsize}"))
    return a


#: samplers made only of integer ops, exact float ops and explicit fmas: bit-identical everywhere.
EXACT = {
    "bits": lambda m, k: m.bits(k, (3, 5)),
    "bits_u8": lambda m, k: m.bits(k, (7,), np.uint8),
    "uniform": lambda m, k: m.uniform(k, (4, 5)),
    "uniform_bounds": lambda m, k: m.uniform(k, (300,), minval=0.3, maxval=1.7),
    "uniform_f16": lambda m, k: m.uniform(k, (64,), np.float16, -2., 3.),
    "uniform_bf16": lambda m, k: m.uniform(k, (64,), jax.numpy.bfloat16),
    "uniform_scalar": lambda m, k: m.uniform(k),
    "bernoulli": lambda m, k: m.bernoulli(k, 0.3, (50,)),
    "bernoulli_high": lambda m, k: m.bernoulli(k, np.float32([0.1, 0.5, 0.9]), mode="high"),
    "randint": lambda m, k: m.randint(k, (100,), -5, 17),
    "randint_u8_full": lambda m, k: m.randint(k, (100,), 0, 256, np.uint8),
    "randint_wide": lambda m, k: m.randint(k, (100,), -2 ** 31, 2 ** 31 - 1),
    "randint_empty_span": lambda m, k: m.randint(k, (5,), 3, 3),
    "rademacher": lambda m, k: m.rademacher(k, (50,)),
    "split": lambda m, k: m.split(k, 4),
    "split_shape": lambda m, k: m.split(k, (2, 3)),
    "fold_in": lambda m, k: m.fold_in(k, 12345),
    "categorical": lambda m, k: m.categorical(k, np.log(np.arange(1, 6, dtype=np.float32)), shape=(40,)),
    "normal_f16": lambda m, k: m.normal(k, (64,), np.float16),
    "permutation": lambda m, k: m.permutation(k, 20),
    "permutation_rows": lambda m, k: m.permutation(k, np.arange(12.).reshape(3, 4).astype(np.float32), axis=1),
    "permutation_independent": lambda m, k: m.permutation(k, np.arange(12).reshape(3, 4), 1, True),
    "permutation_two_rounds": lambda m, k: m.permutation(k, 2000),
    "choice": lambda m, k: m.choice(k, 10, (5,)),
    "choice_no_replace": lambda m, k: m.choice(k, np.arange(10.).astype(np.float32), (4,), replace=False),
    "choice_p": lambda m, k: m.choice(k, 5, (30,), p=np.float32([.1, .2, .3, .2, .2])),
    "choice_p_no_replace": lambda m, k: m.choice(k, 5, (3,), replace=False, p=np.float32([.1, .2, .3, .2, .2])),
    "categorical_no_replace": lambda m, k: m.categorical(k, np.log(np.float32([[1, 2, 3, 4], [4, 3, 2, 1]])),
                                                         shape=(3, 2), replace=False),
}
#: samplers that transform a uniform by log/log1p/erf_inv.
TRANSCENDENTAL = {
    "normal": lambda m, k: m.normal(k, (2, 300)),
    "truncated_normal": lambda m, k: m.truncated_normal(k, -2., 1.5, (300,)),
    "exponential": lambda m, k: m.exponential(k, (300,)),
    "gumbel": lambda m, k: m.gumbel(k, (300,)),
    "gumbel_high": lambda m, k: m.gumbel(k, (100,), mode="high"),
    "laplace": lambda m, k: m.laplace(k, (300,)),
    "logistic": lambda m, k: m.logistic(k, (300,)),
}
#: the default (CI) selection, one program per backend; MINIXLA_DEEP_FUZZ=1 runs every case.
FAST = ["uniform_bounds", "uniform_f16", "randint_u8_full", "fold_in", "categorical", "normal",
        "truncated_normal", "permutation_rows", "choice_p_no_replace"]
ALL = {n: f for n, f in {**EXACT, **TRANSCENDENTAL}.items()
       if os.environ.get("MINIXLA_DEEP_FUZZ") or n in FAST}
#: checked op by op as well (each eager op is its own XLA program: keep it short)
EAGER = ["uniform_bounds", "randint_u8_full", "fold_in", "normal"]


@pytest.fixture(scope="module")
def reference():
    key = jr.PRNGKey(SEED)
    return {name: _bits(fn(jr, key)) for name, fn in ALL.items()}


def _key():
    return np.asarray(mr.PRNGKey(SEED))


def test_prngkey_seeds_as_jax():
    for seed in (0, 42, -1, 2 ** 31 + 3, 2 ** 40 + 3):
        np.testing.assert_array_equal(mr.PRNGKey(seed), jr.PRNGKey(seed))
    np.testing.assert_array_equal(mr.PRNGKey(np.int32(-5)), jr.PRNGKey(np.int32(-5)))
    for backend in BACKENDS:
        got = minixla.jit(mr.PRNGKey, backend=backend)(np.int32(123))
        np.testing.assert_array_equal(got, jr.PRNGKey(123))


def test_prngkey_seeds_as_jax_x64(x64):
    for seed in (-1, 2 ** 40 + 3, 2 ** 63 - 1):
        np.testing.assert_array_equal(mr.PRNGKey(seed), jr.PRNGKey(seed))


def test_eager_bit_identical(reference):
    key = _key()
    for name in EAGER:
        np.testing.assert_array_equal(_bits(ALL[name](mr, key)), reference[name], err_msg=name)


@pytest.mark.parametrize("backend", BACKENDS)
def test_jit_bit_identical(backend, reference):
    names = list(ALL)
    outs = minixla.jit(lambda k: [ALL[n](mr, k) for n in names], backend=backend)(_key())
    for name, out in zip(names, outs):
        got, want = _bits(out), reference[name]
        # (the LLVM backend's float32 log/log1p/erf_inv are XLA's algorithms: bit-identical too)
        np.testing.assert_array_equal(got, want, err_msg=f"{name} on {backend}")


def test_typed_keys():
    k = mr.key(SEED)
    assert k.shape == () and str(k.dtype) == "key<fry>"
    np.testing.assert_array_equal(mr.key_data(k), jr.key_data(jr.key(SEED)))
    ks = mr.split(k, 3)
    assert isinstance(ks, mr.PRNGKeyArray) and ks.shape == (3,)
    np.testing.assert_array_equal(mr.key_data(ks), jr.key_data(jr.split(jr.key(SEED), 3)))
    k1, k2, k3 = ks                                     # iterating a key array, as in JAX
    np.testing.assert_array_equal(mr.bits(k2, (4,)), jr.bits(jr.split(jr.key(SEED), 3)[1], (4,)))
    wrapped = mr.wrap_key_data(mr.key_data(k))
    assert bool(wrapped == k)
    assert mr.key_impl(k) == "threefry2x32"
    # a typed key is a pytree: it goes through jit and vmap as its uint32 data
    f = minixla.jit(lambda key: mr.uniform(mr.fold_in(key, 3), (5,)))
    np.testing.assert_array_equal(f(k), jr.uniform(jr.fold_in(jr.key(SEED), 3), (5,)))


def test_jax_typed_keys_are_taken_everywhere():
    """What ``jax.random.key`` returns (an extended ``key<fry>`` dtype) goes into minixla.random
    eagerly, and into minixla.jit with either front end (was: "canonicalize_dtype called on
    extended dtype" eagerly, "Cannot interpret 'key<fry>' as a data type" in jit)."""
    jk = jr.key(SEED)
    with jax.disable_jit():
        want = np.asarray(jr.bits(jk, (3,)))
        want_split = np.asarray(jr.key_data(jr.split(jk)))
    np.testing.assert_array_equal(mr.bits(jk, (3,)), want)          # eager
    ks = mr.split(jk)                                                # a typed key in, typed keys out
    assert isinstance(ks, mr.PRNGKeyArray) and ks.shape == (2,)
    np.testing.assert_array_equal(mr.key_data(ks), want_split)
    f = minixla.jit(lambda k: mr.bits(k, (3,)))
    np.testing.assert_array_equal(f(jk), want)
    np.testing.assert_array_equal(f.lower(jk).compile()(jk), want)   # the Compiled, called with one
    assert minixla.make_jaxpr(lambda k: mr.bits(k, (3,)))(jk).in_avals[0].shape == (2,)
    jks = jr.split(jk, 3)  # vmap over JAX keys: mapped over the keys' axis, as jax.vmap
    np.testing.assert_array_equal(minixla.vmap(lambda k: mr.bits(k, (2,)))(jks),
                                  jax.vmap(lambda k: jr.bits(k, (2,)))(jks))
    # JAX code sees a JAX typed key again (frontend="jax", and the switch to JAX's tracer)
    jax_bits = lambda k: jr.bits(k, (3,))  # noqa: E731
    for backend in ("llvm", "jax"):
        np.testing.assert_array_equal(minixla.jit(jax_bits, frontend="jax", backend=backend)(jk), want)
    np.testing.assert_array_equal(minixla.jit(jax_bits)(jk), want)
    out = minixla.jit(jr.split, frontend="jax")(jk)                  # a typed key JAX returns
    assert isinstance(out, mr.PRNGKeyArray) and out.shape == (2,)
    np.testing.assert_array_equal(mr.key_data(out), want_split)
    # (rbg keys are taken too: tests/test_random_rbg.py; an implementation minixla lacks is refused)
    for fn in (lambda: mr.normal(jr.key(SEED, impl="philox4x32"), (3,)),
               lambda: minixla.jit(lambda k: mr.bits(k, (3,)))(jr.key(SEED, impl="philox4x32"))):
        with pytest.raises(NotImplementedError, match="unsafe_rbg keys, got a JAX key of impl='philox4x32'"):
            fn()


def test_vmap_over_split_keys():
    keys = mr.split(_key(), 3)
    got = minixla.vmap(lambda k: mr.uniform(k, (4,)))(keys)
    want = jax.vmap(lambda k: jr.uniform(k, (4,)))(jr.split(jr.PRNGKey(SEED), 3))
    np.testing.assert_array_equal(got, want)


def test_errors_as_jax():
    keys = mr.split(_key(), 2)
    with pytest.raises(ValueError, match="single key"):
        mr.uniform(keys, (2,))
    with pytest.raises(ValueError, match="float dtype"):
        mr.normal(_key(), (2,), np.int32)
    with pytest.raises(TypeError, match="integer dtypes"):
        mr.randint(_key(), (2,), 0, 3, np.float32)
    with pytest.raises(TypeError, match="scalar seed"):
        mr.PRNGKey(np.zeros(2, np.int32))
    with pytest.raises(TypeError):
        mr.uniform(np.zeros(3, np.float32))


def test_threefry2x32_is_the_hash():
    k1, k2 = np.uint32(0x13198A2E), np.uint32(0x03707344)
    x1 = np.arange(8, dtype=np.uint32)
    x2 = np.arange(8, 16, dtype=np.uint32)
    from jax._src.random.threefry2x32 import threefry2x32_p
    want = threefry2x32_p.bind(k1, k2, x1, x2)
    for backend in BACKENDS:
        got = minixla.jit(mr.threefry2x32, backend=backend)(k1, k2, x1, x2)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def test_fma_and_erf_inv_primitives():
    rng = np.random.RandomState(0)
    a, b, c = (rng.standard_normal(256).astype(np.float32) for _ in range(3))
    want = np.asarray(jax.jit(lambda a, b, c: a * b + c)(a, b, c))   # XLA contracts it
    exact = (a.astype(np.float64) * b + c).astype(np.float32)        # one rounding (almost always)
    assert (want == exact).mean() > 0.99
    x = np.concatenate([rng.uniform(-1, 1, 256).astype(np.float32),
                        np.float32([0., -0., 1., -1., 1 - 2 ** -24, 2., np.nan])])
    for backend in BACKENDS:
        f = minixla.jit(lambda a, b, c, x: (lax.fma(a, b, c), lax.erf_inv(x)), backend=backend)
        got_fma, got_erf_inv = f(a, b, c, x)
        np.testing.assert_array_equal(got_fma, want)
        ref = np.asarray(jax.lax.erf_inv(x))
        np.testing.assert_array_equal(_bits(got_erf_inv), _bits(ref))
    np.testing.assert_array_equal(lax.fma(a, b, c), want)       # eagerly
    g = minixla.grad(lambda x: mnp.sum(lax.erf_inv(x)))(np.float32([0.1, -0.5]))
    np.testing.assert_allclose(g, jax.grad(lambda x: jax.numpy.sum(jax.lax.erf_inv(x)))(np.float32([0.1, -0.5])),
                               rtol=1e-6)


def test_nextafter():
    x = np.float32([0., -0., 1., -1., 2., np.inf, -np.inf, np.nan, 1e-45, 3.])
    y = np.float32([1., -1., 2., 0., 2., 0., 0., 0., -1., np.nan])
    want = np.asarray(jax.lax.nextafter(x, y))
    got = lax.nextafter(x, y)
    np.testing.assert_array_equal(_bits(got), _bits(want))
    for backend in BACKENDS:
        got = minixla.jit(lax.nextafter, backend=backend)(x[:7], y[:7])
        np.testing.assert_array_equal(_bits(got), _bits(want[:7]))


def test_nn_initializers_as_jax():
    import jax.nn.initializers as ji
    import minixla.nn.initializers as mi
    key, jkey = _key(), jr.PRNGKey(SEED)
    cases = [(n, getattr(mi, n)(), getattr(ji, n)(), (6, 5)) for n in
             ("glorot_normal",)]
    cases += [("variance_scaling", mi.variance_scaling(0.7, "fan_geo_avg", "normal", in_axis=(0, 1), out_axis=2),
               ji.variance_scaling(0.7, "fan_geo_avg", "normal", in_axis=(0, 1), out_axis=2), (2, 3, 4)),
              ("uniform", mi.uniform(0.5), ji.uniform(0.5), (7,)),
              ("constant", mi.constant(3.), ji.constant(3.), (2,)), ("zeros", mi.zeros, ji.zeros, (2,))]
    for name, mine, theirs, shape in cases:
        np.testing.assert_array_equal(_bits(mine(key, shape)), _bits(theirs(jkey, shape)), err_msg=name)
    for backend in BACKENDS:  # (glorot_normal is a truncated normal: exact on the hand-off)
        got = minixla.jit(lambda k: mi.he_uniform()(k, (6, 5)), backend=backend)(key)
        np.testing.assert_array_equal(_bits(got), _bits(ji.he_uniform()(jkey, (6, 5))))
    with pytest.raises(ValueError, match="invalid mode"):
        mi.variance_scaling(1., "fan_bad", "normal")(key, (2, 2))


#: Poisson rates: 0, Knuth's range (below 10, NaN), the rejection range (10 and up)
POISSON_LAM = np.array([0., 0.01, 0.5, 1., 3., 7.5, 9.99, np.nan, 10., 12., 25., 100., 1e3, 1e4, 3e5, 2.],
                       np.float32)


def test_poisson_bit_identical():
    """``poisson`` (Knuth's loop below lam = 10 and for NaN, transformed rejection above; -1 at
    NaN, 0 at 0) gives ``jax.random.poisson``'s integers: eagerly (a ``jit`` of ``_poisson``
    as JAX's, compiled on LLVM) for two raw keys and a typed one, and on the hand-off
    (``MINIXLA_DEEP_FUZZ=1``: another ~4 s compile)."""
    lam = POISSON_LAM
    for seed in (SEED, 11):
        want = np.asarray(jr.poisson(jr.PRNGKey(seed), lam, (8, 16)))
        np.testing.assert_array_equal(mr.poisson(mr.PRNGKey(seed), lam, (8, 16)), want, err_msg=f"seed {seed}")
    assert mr.poisson(mr.key(SEED), lam, (8, 16)).dtype == want.dtype == np.int32
    np.testing.assert_array_equal(mr.poisson(mr.key(11), lam, (8, 16)), want)
    assert (want[:, 0] == 0).all() and (want[:, 7] == -1).all()
    if os.environ.get("MINIXLA_DEEP_FUZZ"):
        got = minixla.jit(lambda k, l: mr.poisson(k, l, (8, 16)), backend="jax")(mr.PRNGKey(11), lam)
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="int dtype"):
        mr.poisson(_key(), 3., dtype=np.float32)
    with pytest.raises(ValueError):
        mr.poisson(_key(), np.ones(3, np.float32), (2,))


def test_bad_keys_raise_jaxs_message_and_name_the_line():
    """A key that is not a key (``normal(3, ...)``: an int; a float array; the wrong key size; a
    batch of raw keys) raises JAX's class and text (computed here with jax.random) plus the
    user's line, for every sampler and for split/fold_in/bits, eagerly and under jit."""
    import warnings
    bad = [3, 1.5, np.ones(2, np.float32), np.ones(2, np.int32), np.ones(3, np.uint32),
           np.ones((2, 2), np.uint32)]
    calls = [lambda r, k: r.normal(k, (2,)), lambda r, k: r.uniform(k, (2,)),
             lambda r, k: r.randint(k, (2,), 0, 5), lambda r, k: r.bernoulli(k, 0.5, (2,)),
             lambda r, k: r.split(k), lambda r, k: r.fold_in(k, 1), lambda r, k: r.bits(k, (2,))]
    for call in calls:
        for key in bad:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with pytest.raises((TypeError, ValueError)) as jax_info:
                    call(jr, key)
            with pytest.raises(type(jax_info.value)) as info:
                call(mr, key)
            line = call.__code__.co_firstlineno  # (the user's line: the lambda's)
            want = str(jax_info.value).split(" for impl=")[0]  # (JAX prints its PRNGImpl's repr)
            assert str(info.value).startswith(want), (str(info.value), want)
            assert f"{__file__}:{line} " in str(info.value)
    with pytest.raises(TypeError, match="Got 3\n  at: "):
        minixla.jit(lambda: mr.normal(3, (2,)))()


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16"])
def test_narrow_uniform_follows_this_hosts_xla_contraction(dtype):
    # ``floats * span + minval`` is one fma in XLA only where the host computes f16 natively
    # (AVX512-FP16); on other hosts (AMD Zen 4) the product is rounded first. The LLVM
    # backend's fma asks XLA (lax.special.xla_contracts): it gave 949-1,009 of 4,096 values
    # 1 ulp off JAX's on a Zen 4 host before.
    from minixla.lax.special import xla_contracts
    dtype = np.dtype(dtype)
    assert isinstance(xla_contracts(dtype), bool)
    want = jr.uniform(jr.PRNGKey(3), (4096,), dtype, -2., 3.)
    for backend in BACKENDS:
        got = minixla.jit(lambda k: mr.uniform(k, (4096,), dtype, -2., 3.), backend=backend)(mr.PRNGKey(3))
        np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=backend)
