"""``lax.rng_bit_generator`` (issue 14) against ``jax.lax.rng_bit_generator`` on CPU, bit for bit:
Philox4x32 (``RNG_DEFAULT`` on CPU, ``RNG_PHILOX``) and Threefry2x32, uint8/16/32, odd sizes and
size 0, the new key too; eagerly, in the HLO evaluator, and compiled (one program per backend:
the LLVM backend runs minixla's expansion, the hand-off XLA's)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.lax as ml
from minixla.hlo.evaluator import evaluate
from minixla.passes.rng_bit_generator_expander import RngBitGeneratorExpander

D, T, P = ml.RandomAlgorithm.RNG_DEFAULT, ml.RandomAlgorithm.RNG_THREE_FRY, ml.RandomAlgorithm.RNG_PHILOX
SPECS = [(D, np.uint32, (7, 3)), (D, np.uint8, (5,)), (P, np.uint16, (3, 5, 1)), (P, np.uint32, (0,)),
         (T, np.uint32, (7, 3)), (T, np.uint8, (5,)), (T, np.uint16, (4, 1, 6)), (T, np.uint32, ())]
# a key whose counter words carry (s1 + i wraps the low 64 bits into s0 for Philox)
KEYS = [np.array([1, 2, 3, 4], np.uint32), np.array([7, 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFF], np.uint32)]


def _all(lax, specs=SPECS):
    return lambda k: [lax.rng_bit_generator(k, shape, dtype=dt, algorithm=alg) for alg, dt, shape in specs]


def _check(got, want, what, specs=SPECS):
    for n, (g, w) in enumerate(zip(jax.tree.leaves(got), jax.tree.leaves(want))):
        assert np.asarray(g).dtype == np.asarray(w).dtype and np.shape(g) == np.shape(w), (what, n)
        np.testing.assert_array_equal(g, w, err_msg=f"{what}: {specs[n // 2]}, {'bits' if n % 2 else 'new key'}")


def test_rng_bit_generator_bits_and_new_key_match_jax():
    f = minixla.jit(_all(ml), backend="jax")
    for key in KEYS:
        want = _all(jax.lax)(jnp.asarray(key))
        _check(f(key), want, "hand-off")
        _check(_all(ml)(key), want, "eager")
        module = f.lower(key).hlo_module
        _check(evaluate(module, key), want, "evaluator")  # (its NumPy model of XLA's generators)
        # the LLVM backend's expansion (minixla.lax.rng), run by the evaluator: every spec, no codegen
        expanded = module.clone()
        assert RngBitGeneratorExpander().run(expanded)
        assert "rng-bit-generator" not in expanded.to_string()
        _check(evaluate(expanded, key), want, "expansion")
    # compiled by the LLVM backend (fewer specs: each expansion is ~10-20 kernels to generate)
    few = [SPECS[0], SPECS[5], SPECS[6]]
    g = minixla.jit(_all(ml, few), backend="llvm")
    for key in KEYS:
        _check(g(key), _all(jax.lax, few)(jnp.asarray(key)), "llvm", few)


def test_rng_bit_generator_vmap_frontend_and_errors():
    keys = np.stack(KEYS + [KEYS[0] + 5])
    one = lambda lax: lambda k: lax.rng_bit_generator(k, (2, 3), np.uint16, algorithm=T)  # noqa: E731
    # JAX's batching rule: the first key makes the whole batch's bits, the others are returned as they are
    _check(minixla.vmap(one(ml))(keys), jax.vmap(one(jax.lax))(keys), "vmap")
    # jax.lax.rng_bit_generator inside an imported JAX function
    _check(minixla.jit(one(jax.lax), frontend="jax", backend="jax")(KEYS[1]), one(jax.lax)(KEYS[1]), "import")
    with pytest.raises(TypeError, match="unsupported dtype int32"):
        ml.rng_bit_generator(KEYS[0], (3,), np.int32)
    with pytest.raises(TypeError, match="key must be uint32"):
        ml.rng_bit_generator(KEYS[0][:2], (3,))
    with pytest.raises(TypeError, match="Shapes must be 1D sequences"):
        ml.rng_bit_generator(KEYS[0], (2.0,))


def test_rng_bit_generator_on_the_virtual_mesh():
    """A sharded program with ``rng_bit_generator`` (raw, and through an rbg key's ``uniform``)
    on minixla's SPMD partitioner: the virtual LLVM mesh expands it as the one-device LLVM
    backend does (``RngBitGeneratorExpander``) and gives ``jax.jit``'s bits, as the HLO
    evaluator's mesh does (the partitioner replicates the generator and slices each shard)."""
    import minixla.random as mr
    from jax.sharding import PartitionSpec as P

    def f(R, key, x):
        k2, bits = R.rng_bit_generator(key, (8, 4), dtype=np.uint32)
        return k2, bits, x * R_uniform(R, key)

    def R_uniform(R, key):
        if R is ml:
            return mr.uniform(mr.wrap_key_data(key, impl="rbg"), (8, 4))
        return jax.random.uniform(jax.random.wrap_key_data(key, impl="rbg"), (8, 4))
    key = np.array([1, 2, 3, 4], np.uint32)
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    want = jax.jit(lambda k, x: f(jax.lax, k, x))(key, x)
    mesh = jax.sharding.AbstractMesh((4,), ("d",))
    for backend in ("llvm", "evaluator"):
        g = minixla.jit(lambda k, x: f(ml, k, x), mesh=mesh, spmd_partitioner="minixla", backend=backend,
                        in_shardings=(P(), P("d")), out_shardings=(P(), P("d"), P("d")))
        for n, (a, b) in enumerate(zip(g(key, x), want)):
            np.testing.assert_array_equal(a, b, err_msg=f"{backend} #{n}")
