"""The tracer and the jaxpr printer: exact text for small functions, as JAX prints them."""
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax
from minixla.core import errors

f32 = np.float32


def test_single_equation_prints_on_one_line():
    jaxpr = minixla.make_jaxpr(lambda a, b: a + b)(np.ones((8, 3), f32), np.ones((8, 3), f32))
    assert str(jaxpr) == "{ lambda ; a:f32[8,3] b:f32[8,3]. let c:f32[8,3] = add a b in (c,) }"


def test_python_scalar_is_a_weak_literal():
    assert str(minixla.make_jaxpr(lambda a: a * 2.0)(f32(1.0))) == \
        "{ lambda ; a:f32[]. let b:f32[] = mul a 2.0:f32[] in (b,) }"


def test_broadcasting_and_reduction_multiline():
    jaxpr = minixla.make_jaxpr(lambda a, b: mnp.sum(mnp.maximum(a + b, 0.0), axis=1))(
        np.ones((8, 3), f32), np.ones(3, f32))
    assert str(jaxpr) == (
        "{ lambda ; a:f32[8,3] b:f32[3]. let\n"
        "    c:f32[8,3] = broadcast_in_dim[shape=(8, 3) broadcast_dimensions=(1,)] b\n"
        "    d:f32[8,3] = add a c\n"
        "    e:f32[8,3] = max d 0.0:f32[]\n"
        "    f:f32[8] = reduce_sum[axes=(1,)] e\n"
        "  in (f,) }")


def test_closed_over_array_becomes_constvar():
    w = np.arange(3, dtype=f32)
    jaxpr = minixla.make_jaxpr(lambda x: x * w)(np.ones(3, f32))
    assert str(jaxpr) == "{ lambda a:f32[3]; b:f32[3]. let c:f32[3] = mul b a in (c,) }"
    np.testing.assert_array_equal(jaxpr.consts[0], w)


def test_pytree_inputs_and_outputs():
    jaxpr = minixla.make_jaxpr(lambda p: {"y": p["w"] @ p["x"]})({"w": np.ones((2, 3), f32),
                                                                "x": np.ones(3, f32)})
    assert [v.aval.str_short() for v in jaxpr.jaxpr.invars] == ["f32[2,3]", "f32[3]"]
    assert jaxpr.out_avals[0].shape == (2,)


def test_dtype_promotion_matches_jax():
    import jax.numpy as jnp
    cases = [(np.ones(3, np.int8), 1000), (np.ones(3, np.int32), 1.5), (np.ones(3, f32), 2),
             (np.ones(3, np.uint8), np.ones(3, np.int8)), (np.ones(3, np.bool_), 1)]
    for x, y in cases:
        ours = minixla.make_jaxpr(lambda a: mnp.add(a, y))(x).out_avals[0]
        theirs = jnp.add(x, y)
        assert ours.dtype == theirs.dtype, (x.dtype, y)
        assert ours.weak_type == theirs.weak_type, (x.dtype, y)


def test_int8_plus_1000_wraps_like_jax():
    out = minixla.jit(lambda a: a + 1000, backend="jax")(np.array([1], np.int8))
    assert out.dtype == np.int8 and out[0] == -23


def test_python_if_on_tracer_raises_bool_conversion_error():
    def f(x):
        if x > 0:  # noqa: the error under test
            return x
        return -x
    with pytest.raises(errors.TracerBoolConversionError) as e:
        minixla.make_jaxpr(f)(f32(1.0))
    msg = str(e.value)
    assert "where" in msg and "test_jaxpr.py" in msg
    assert isinstance(e.value, TypeError)


def test_shape_mismatch_names_op_shapes_and_line():
    with pytest.raises(errors.ShapeError) as e:
        minixla.make_jaxpr(lambda a, b: lax.add(a, b))(np.ones((2, 3), f32), np.ones((3, 2), f32))
    msg = str(e.value)
    assert msg.startswith("add:") and "f32[2,3]" in msg and "f32[3,2]" in msg and "test_jaxpr.py" in msg
    with pytest.raises(ValueError, match="cannot be broadcast"):
        minixla.make_jaxpr(lambda a, b: a + b)(np.ones((2, 3), f32), np.ones((4,), f32))
    with pytest.raises(errors.ShapeError, match="contracting"):
        minixla.make_jaxpr(lambda a, b: a @ b)(np.ones((2, 3), f32), np.ones((4, 2), f32))


def test_dtype_mismatch_in_lax_raises_type_error():
    with pytest.raises(TypeError, match="same dtypes"):
        minixla.make_jaxpr(lambda a, b: lax.add(a, b))(np.ones(3, f32), np.ones(3, np.int32))
    with pytest.raises(TypeError, match="exp does not accept dtype int32"):
        minixla.make_jaxpr(lax.exp)(np.ones(3, np.int32))


def test_unsupported_input_type():
    with pytest.raises(TypeError, match="not a valid minixla type"):
        minixla.make_jaxpr(lambda a: a)("hello")


def test_int_of_tracer_raises():
    with pytest.raises(errors.TracerIntegerConversionError):
        minixla.make_jaxpr(lambda a: range(a))(np.int32(3))


def test_eager_lax_runs_op_by_op():
    np.testing.assert_array_equal(lax.add(np.ones(3, f32), np.ones(3, f32)), np.full(3, 2, f32))


def test_leaked_tracer_is_an_unexpected_tracer_error():
    leak = []
    minixla.jit(lambda x: leak.append(x) or x)(np.ones(2, f32))
    with pytest.raises(errors.UnexpectedTracerError, match="unexpected tracer"):
        minixla.make_jaxpr(lambda y: y + leak[0])(np.ones(2, f32))
    with pytest.raises(TypeError):  # the second operand, not only the first, is checked
        minixla.make_jaxpr(lambda y: lax.add(y, leak[0]))(np.ones(2, f32))


def test_lax_shape_errors_are_type_errors_like_jax():
    with pytest.raises(TypeError):
        minixla.make_jaxpr(lambda a, b: lax.add(a, b))(np.ones(2, f32), np.ones(3, f32))
    with pytest.raises(TypeError):
        minixla.make_jaxpr(lambda a: mnp.reshape(a, (4,)))(np.ones(3, f32))


def test_user_line_found_in_a_file_whose_path_mentions_jax(tmp_path):
    src = tmp_path / "jax_experiments" / "demo.py"
    src.parent.mkdir()
    src.write_text("import minixla\nfrom minixla import lax\n"
                   "def f(a, b):\n    return lax.add(a, b)\n")
    import importlib.util
    spec = importlib.util.spec_from_file_location("demo_jax_path", src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(errors.ShapeError, match="demo.py:4"):
        minixla.make_jaxpr(mod.f)(np.ones(2, f32), np.ones(3, f32))
