"""Misused transformations and JAX functions inside them: minixla errors (subclasses of the
builtin JAX raises) with JAX's message and the user's line (fresh-user findings)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
from minixla import errors

A = np.ones(3, np.float32)


@pytest.mark.parametrize("call", [
    lambda: minixla.grad(lambda x: jnp.sum(x))(A),
    lambda: minixla.jit(minixla.grad(lambda x: jnp.sum(x)))(A),
    lambda: minixla.vmap(lambda x: jnp.sin(x))(A),
    lambda: minixla.jvp(lambda x: jnp.cos(x), (A,), (A,)),
], ids=["grad", "jit-grad", "vmap", "jvp"])
def test_jax_function_inside_a_transformation_says_so(call):
    with pytest.raises(errors.JaxFunctionError) as e:
        call()
    msg = str(e.value)
    assert "minixla.numpy." in msg and f"{__file__}:" in msg


@pytest.mark.parametrize("call,cls", [
    (lambda: minixla.grad(lambda x: x * 2)(A), TypeError),
    (lambda: minixla.grad(lambda x: x)(np.int32(3)), TypeError),
    (lambda: minixla.grad(lambda x: (x, 1, 2), has_aux=True)(1.0), TypeError),
    (lambda: minixla.vmap(lambda x, y: x + y)(np.ones((3, 2)), np.ones((4, 2))), ValueError),
    (lambda: minixla.vmap(lambda x: x, in_axes=2)(A), ValueError),
], ids=["non-scalar", "int-input", "has-aux", "vmap-sizes", "vmap-axis"])
def test_transformation_errors_name_the_users_line(call, cls):
    with pytest.raises(cls) as e:
        call()
    assert isinstance(e.value, errors.MinixlaError)
    assert f"at: {__file__}:" in str(e.value)


def test_static_argnums_out_of_range_is_an_error_as_in_jax():
    import jax
    with pytest.raises(ValueError) as want:
        jax.jit(lambda x: x, static_argnums=3)
    with pytest.raises(errors.StaticArgumentError) as got:
        minixla.jit(lambda x: x, static_argnums=3)
    assert str(got.value).split("\n")[0] == str(want.value)
    minixla.jit(lambda *a: a, static_argnums=3)  # *args can take it, as in JAX


def test_vmap_of_a_mapped_non_array_is_jaxs_type_error_and_an_unmapped_one_passes():
    import jax
    a = np.ones(3, np.float32)
    with pytest.raises(TypeError) as want:
        jax.vmap(lambda x, s: x)(a, "s")
    with pytest.raises(TypeError) as got:
        minixla.vmap(lambda x, s: x)(a, "s")
    assert str(got.value).startswith(str(want.value)) and "test_transform_errors.py" in str(got.value)
    np.testing.assert_array_equal(minixla.vmap(lambda x, s: x * len(s), in_axes=(0, None))(a, "ss"), a * 2)


def test_checkpoint_of_a_non_array_argument_raises_jaxs_type_error_eagerly_too():
    # (a new user: eager checkpoint ran silently; JAX raises TypeError outside jit too)
    x = np.ones(2, np.float32)
    with pytest.raises(TypeError) as want:
        jax.checkpoint(lambda a, s: a * 2)(x, "s")
    with pytest.raises(TypeError) as got:
        minixla.checkpoint(lambda a, s: a * 2)(x, "s")
    assert str(want.value) in str(got.value)
    np.testing.assert_array_equal(minixla.checkpoint(lambda a, s: a * len(s), static_argnums=1)(x, "ss"), x * 2)
