"""lax.stop_gradient is a primitive (JAX's jaxpr, its rows in every table), and a minixla.jit
function called while tracing is one `jit` equation printed as jax 0.10.2 prints it."""
import jax
import jax.numpy as jnp
import numpy as np

import minixla
import minixla.numpy as mnp
from minixla import lax


def test_stop_gradient_jaxpr_is_jax_s():
    for x in (1., np.ones(3, np.int32), np.ones((2, 2), np.float32)):
        assert str(minixla.make_jaxpr(lax.stop_gradient)(x)) == str(jax.make_jaxpr(jax.lax.stop_gradient)(x))
    got = str(minixla.make_jaxpr(minixla.grad(lambda x: lax.stop_gradient(x) * x))(1.))
    want = str(jax.make_jaxpr(jax.grad(lambda x: jax.lax.stop_gradient(x) * x))(1.))
    assert got == want  # (an unread output prints as ``_``, as JAX prints it)


def test_stop_gradient_at_every_level_and_under_vmap():
    ours = lambda x: x * lax.stop_gradient(mnp.sin(x) * x)  # noqa: E731
    theirs = lambda x: x * jax.lax.stop_gradient(jnp.sin(x) * x)  # noqa: E731
    xs = np.linspace(-1, 1, 3, dtype=np.float32)
    np.testing.assert_allclose(minixla.vmap(minixla.grad(minixla.grad(ours)))(xs),
                               jax.jit(jax.vmap(jax.grad(jax.grad(theirs))))(xs), rtol=1e-6)
    np.testing.assert_allclose(minixla.jit(minixla.vmap(minixla.grad(ours)))(xs),
                               jax.jit(jax.vmap(jax.grad(theirs)))(xs), rtol=1e-6)
    pytree = {"a": np.float32(1.), "b": (np.ones(2, np.float32),)}
    assert jax.tree_util.tree_structure(lax.stop_gradient(pytree)) == jax.tree_util.tree_structure(pytree)


def test_nested_jit_is_one_equation_printed_as_jax_prints_it():
    def g_of(J, np_):
        def k(x):
            return J.jit(np_.cos)(x) * x
        return k
    assert str(minixla.make_jaxpr(minixla.jit(g_of(minixla, mnp)))(1.)) == str(
        jax.make_jaxpr(jax.jit(g_of(jax, jnp)))(1.))
    ours = lambda x: minixla.jit(lambda y: mnp.sin(y) * 2)(x) + 1  # noqa: E731
    theirs = lambda x: jax.jit(lambda y: jnp.sin(y) * 2)(x) + 1  # noqa: E731
    xs = np.ones(3, np.float32)
    assert str(minixla.make_jaxpr(ours)(1.)) == str(jax.make_jaxpr(theirs)(1.))
    assert str(minixla.make_jaxpr(minixla.vmap(ours))(xs)) == str(jax.make_jaxpr(jax.vmap(theirs))(xs))
    # values: the equation is inlined into one HLO module; grad and vmap go through it
    np.testing.assert_allclose(minixla.jit(minixla.vmap(minixla.grad(ours)))(xs),
                               jax.jit(jax.vmap(jax.grad(theirs)))(xs), rtol=1e-6)
    lowered = minixla.jit(ours).lower(np.float32(1.))
    assert [e.primitive.name for e in lowered.jaxpr.eqns] == ["jit", "add"]
    assert lowered.as_text().count("sine(") == 1
    t = minixla.linear_transpose(lambda x: minixla.jit(lambda y: 2. * y)(x), np.float32(1.))(np.float32(3.))
    assert float(t[0]) == 6.
