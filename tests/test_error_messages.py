"""Error messages name the op the user called, the operands' shapes and dtypes, and the user's
line; they keep the exception class JAX raises in the same situation.

Covers ``errors.api_boundary`` (every public ``minixla.numpy`` / ``lax`` / ``nn`` function),
JAX functions called on minixla's traced values (``errors.JaxFunctionError``), traced shapes,
unknown and complex dtypes, and arguments of ``jit`` that are not arrays.
"""
from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import errors, lax, nn

f32 = np.float32


def _raises(cls, fn, *args, jit=True):
    """The message of the ``cls`` that ``jit(fn)(*args)`` (or ``fn(*args)``) raises."""
    with pytest.raises(cls) as info:
        (minixla.jit(fn, frontend="minixla") if jit else fn)(*args)  # (no switch to JAX's tracer)
    return str(info.value)


def _at(fn) -> str:
    """``'file:line '`` of a one-line lambda: the user's line an error must name."""
    return f"{fn.__code__.co_filename}:{fn.__code__.co_firstlineno} "


def _jax_raises(cls, fn, *args):
    """JAX raises the same class (checked, so ours cannot drift from it)."""
    with pytest.raises(cls):
        jax.jit(fn)(*args)


# ---------------------------------------------------------------------------------------
# Item 11: the op, the shapes and the line.

def test_where_with_mismatched_shapes_names_where_the_shapes_and_the_line():
    f = lambda x, y: mnp.where(x > 0, x, y)  # noqa: E731
    x, y = np.ones((2, 3), f32), np.ones(4, f32)
    msg = _raises(ValueError, f, x, y)
    g = lambda x, y: jnp.where(x > 0, x, y)  # noqa: E731
    _jax_raises(ValueError, g, x, y)
    assert msg.startswith("where: shapes (2, 3), (2, 3), (4,) cannot be broadcast together")
    assert "operands: (bool[2,3], f32[2,3], f32[4])" in msg and _at(f) in msg


@pytest.mark.parametrize("op, fn", [("add", lambda a, b: a + b), ("subtract", lambda a, b: a - b),
                                    ("multiply", lambda a, b: b * a), ("less", lambda a, b: a < b),
                                    ("bitwise_and", lambda a, b: (a > 0) & (b > 0))])
def test_operator_broadcast_mismatch_on_tracers(op, fn):
    a, b = np.ones((2, 3), f32), np.ones((5,), f32)
    msg = _raises(ValueError, fn, a, b)
    _jax_raises(ValueError, fn, a, b)
    operands = msg.split("operands: ")[1].split("\n")[0]
    assert msg.startswith(f"{op}: ") and "[2,3]" in operands and "[5]" in operands and _at(fn) in msg


def test_eager_broadcast_mismatch_names_the_op_and_line():
    with pytest.raises(errors.ShapeError) as info:
        mnp.add(np.ones(2, f32), np.ones(3, f32))
    line = sys._getframe().f_lineno - 1
    msg = str(info.value)
    assert msg.startswith("add: ") and "operands: (f32[2], f32[3])" in msg
    assert f"{__file__}:{line} " in msg


def test_error_inside_a_user_helper_names_the_helpers_line():
    def helper(x):
        return mnp.concatenate([x, x.T], axis=0)  # the line the message must name
    line = helper.__code__.co_firstlineno + 1
    msg = _raises(errors.ShapeError, lambda x: helper(x) * 2, np.ones((2, 3), f32))
    assert msg.startswith("concatenate") and "f32[2,3], f32[3,2]" in msg
    assert f"{__file__}:{line} (helper)" in msg


@pytest.mark.parametrize("shape", [lambda n: n, lambda n: (n, 2), lambda n: [2, n]])
def test_traced_shape_is_a_concretization_error(shape):
    fn = lambda n: mnp.ones(shape(n))  # noqa: E731
    msg = _raises(errors.ConcretizationTypeError, fn, np.int32(3))
    _jax_raises(TypeError, lambda n: jnp.ones(shape(n)), np.int32(3))
    assert msg.startswith("ones: shapes must be sequences of concrete integers")
    assert "static_argnums" in msg and "i32[]" in msg and _at(fn) in msg


@pytest.mark.parametrize("make", [lambda n: mnp.zeros((n,)), lambda n: mnp.full((2, n), 1.0),
                                  lambda n: lax.full((n,), 0.0), lambda n: mnp.empty(n)])
def test_traced_shape_in_every_creation_function(make):
    with pytest.raises(errors.ConcretizationTypeError, match="concrete integers"):
        minixla.jit(make)(np.int32(2))


def test_non_integer_shape_is_a_type_error_as_jax():
    with pytest.raises(TypeError):
        jnp.ones(2.5)
    with pytest.raises(TypeError, match="ones: shapes must be sequences of integers, got 2.5"):
        mnp.ones(2.5)


def test_astype_unknown_dtype_is_a_type_error_as_jax():
    fn = lambda x: x.astype("foo")  # noqa: E731
    x = np.ones((2, 3), f32)
    msg = _raises(errors.DTypeError, fn, x)
    _jax_raises(TypeError, fn, x)
    assert msg.startswith("astype: data type 'foo' not understood") and "f32[2,3]" in msg and _at(fn) in msg
    with pytest.raises(errors.DTypeError, match="zeros: data type 'bar' not understood"):
        mnp.zeros(3, "bar")
    with pytest.raises(errors.DTypeError, match="not a valid minixla"):
        mnp.zeros(3, str)


@pytest.mark.parametrize("op, fn", [
    ("astype", lambda x: x.astype(np.complex64)),
    ("add", lambda x: x + 1j),
    ("multiply", lambda x: x * np.complex64(2)),
    ("zeros", lambda x: x + mnp.zeros(3, np.complex64)),
    ("asarray", lambda x: mnp.asarray(x, "complex128")),
    ("convert_element_type", lambda x: lax.convert_element_type(x, np.complex64)),
])
def test_complex_dtypes_are_rejected_with_the_op_and_line(op, fn):
    msg = _raises(errors.UnsupportedError, fn, np.ones(3, f32))
    assert msg.startswith(f"{op}: minixla does not support complex dtypes") and _at(fn) in msg


@pytest.mark.parametrize("backend", ["llvm", "jax"])
def test_complex_argument_names_the_argument_and_the_call(backend):
    with pytest.raises(errors.UnsupportedError) as info:
        minixla.jit(lambda a, b: a + b, backend=backend)(np.ones(2, f32), {"z": np.ones(2, np.complex64)})
    line = sys._getframe().f_lineno - 1
    msg = str(info.value)
    assert msg.startswith("jit(<lambda>): argument b['z']: minixla does not support complex dtypes (complex64)")
    assert f"{__file__}:{line} " in msg
    with pytest.raises(errors.UnsupportedError, match=r"make_jaxpr\(<lambda>\): argument .*complex64"):
        minixla.make_jaxpr(lambda a: a)(np.complex64(1))


def test_inner_primitive_error_is_reported_as_the_op_called():
    # mnp.matmul fails inside lax.dot_general: the user called matmul, with these shapes
    fn = lambda a, b: mnp.matmul(a, b)  # noqa: E731
    msg = _raises(errors.ShapeError, fn, np.ones((2, 3), f32), np.ones((4, 5), f32))
    assert msg.startswith("matmul: ") and "operands: (f32[2,3], f32[4,5])" in msg and _at(fn) in msg
    assert msg.count("\n  at: ") == 1 and msg.count("\n  operands: ") == 1
    # a lax primitive called directly keeps its own single prefix
    g = lambda a: lax.pad(a, 0.0, [(0, 0, -1)])  # noqa: E731
    msg = _raises(errors.ShapeError, g, np.ones(3, f32))
    assert msg.startswith("pad: interior padding") and _at(g) in msg


def test_nn_and_indexing_errors_keep_their_class():
    fn = lambda x: nn.softmax(x, axis=5)  # noqa: E731
    msg = _raises(errors.ShapeError, fn, np.ones((2, 3), f32))
    assert msg.startswith("softmax: axis 5") and "f32[2,3]" in msg and _at(fn) in msg
    g = lambda x: x[0, 0, 0]  # noqa: E731
    msg = _raises(IndexError, g, np.ones((3, 2), f32))
    _jax_raises(IndexError, g, np.ones((3, 2), f32))
    assert msg.startswith("getitem: too many indices") and "f32[3,2]" in msg and _at(g) in msg
    h = lambda x, y: x.at[0].set(y)  # noqa: E731
    msg = _raises(errors.ShapeError, h, np.ones((3, 2), f32), np.ones(5, f32))
    assert msg.startswith("at[].set: ") and "f32[3,2], f32[5]" in msg and _at(h) in msg


def test_boundary_wrapping_keeps_the_functions_metadata():
    import inspect
    assert mnp.where.__name__ == "where" and mnp.where.__module__ == "minixla.numpy"
    assert "x" in inspect.signature(mnp.where).parameters or "condition" in inspect.signature(mnp.where).parameters
    assert lax.add.__wrapped__.__name__ == "add" and nn.relu.__doc__ == nn.relu.__wrapped__.__doc__


# ---------------------------------------------------------------------------------------
# Item 10: a JAX function on minixla's traced values.

@pytest.mark.parametrize("called, public, instead, fn", [
    ("jnp.sin", "jax.numpy.sin", "use minixla.numpy.sin instead", lambda x: jnp.sin(x)),
    ("jnp.sum", "jax.numpy.sum", "use minixla.numpy.sum instead", lambda x: 1 + jnp.sum(x, axis=0)),
    ("jax.lax.add", "jax.lax.add", "use minixla.lax.add instead", lambda x: jax.lax.add(x, 1.0)),
    ("jax.lax.exp", "jax.lax.exp", "use minixla.lax.exp instead", lambda x: jax.lax.exp(x)),
    ("jnp.asarray", "jax.numpy.asarray", "use minixla.numpy.asarray instead", lambda x: jnp.asarray(x)),
    ("jnp.reshape", "jax.numpy.reshape", "use minixla.numpy.reshape instead", lambda x: jnp.reshape(x, (6,))),
    ("jax.nn.relu", "jax.nn.relu", "use minixla.nn.relu instead", lambda x: jax.nn.relu(x)),
    ("jnp.linalg.norm", "jax.numpy.linalg.norm", "use minixla.numpy.linalg.norm instead",
     lambda x: jnp.linalg.norm(x)),  # (was: "no counterpart of jax.numpy.linalg yet")
])
def test_jax_function_on_a_tracer_names_it_and_the_minixla_counterpart(called, public, instead, fn):
    msg = _raises(errors.JaxFunctionError, fn, np.ones((2, 3), f32))
    head = f"{called} ({public})" if called != public else public
    assert msg.startswith(f"{head} is a JAX function: it cannot take minixla's traced values; {instead}")
    assert _at(fn) in msg


def test_jax_random_on_a_tracer_names_minixla_random():
    fn = lambda key: jax.random.normal(key, (3,))  # noqa: E731
    msg = _raises(TypeError, fn, np.zeros(2, np.uint32))  # (was: "minixla has no random module yet")
    assert msg.startswith("jax.random.normal is a JAX function: it cannot take minixla's traced values; "
                          "use minixla.random.normal instead") and _at(fn) in msg
    # a minixla typed key reaching jax.random is the same error (JAX names the key's class)
    msg = _raises(TypeError, fn, minixla.random.key(0))
    assert msg.startswith("jax.random.normal is a JAX function") and _at(fn) in msg


def test_jax_function_through_an_alias_and_a_helper():
    cos = jnp.cos

    def helper(x):
        return cos(x) + 1  # the line the message must name
    msg = _raises(errors.JaxFunctionError, helper, np.ones(3, f32))
    assert msg.startswith("cos (jax.numpy.cos) is a JAX function") and "minixla.numpy.cos" in msg
    assert f"{__file__}:{helper.__code__.co_firstlineno + 1} (helper)" in msg
    with pytest.raises(errors.JaxFunctionError, match="jnp.tanh"):
        minixla.make_jaxpr(lambda x: jnp.tanh(x))(np.ones(2, f32))


def test_jax_function_error_without_jax_traceback_filtering():
    old = jax.config.jax_traceback_filtering
    jax.config.update("jax_traceback_filtering", "off")
    try:
        fn = lambda x: jnp.exp(x)  # noqa: E731
        msg = _raises(errors.JaxFunctionError, fn, np.ones(3, f32))
        assert msg.startswith("jnp.exp (jax.numpy.exp) is a JAX function") and _at(fn) in msg
    finally:
        jax.config.update("jax_traceback_filtering", old)


def test_other_type_errors_in_user_code_are_left_alone():
    def fn(x):
        raise TypeError("my own error")
    assert _raises(TypeError, fn, np.ones(2, f32)) == "my own error"
    # numpy (not JAX) converting a tracer is the concretization error it always was
    with pytest.raises(errors.ConcretizationTypeError, match="Conversion to a numpy array"):
        minixla.jit(lambda x: np.sin(x))(np.ones(2, f32))


def test_len_and_iteration_of_a_traced_scalar_name_the_line():
    for fn, what in ((lambda x: len(x), "len() of unsized object"),
                     (lambda x: list(x), "iteration over a 0-d array")):
        with pytest.raises(TypeError, match=what.replace("(", r"\(").replace(")", r"\)")):
            jax.jit(fn)(np.float32(1))
        msg = _raises(errors.ShapeError, fn, np.float32(1))
        assert msg.startswith(f"{what} (a traced f32[])") and _at(fn) in msg


def test_eager_primitives_run_their_shape_rule_first():
    """Eagerly (outside jit) a bad operand is minixla's error naming the op, the shapes and the
    user's line, as under jit, not JAX's MLIR verifier text: ``bind`` runs the shape rule before
    the eager implementation, for every primitive."""
    x, m = np.ones(6, f32), np.ones((2, 3), f32)
    cases = [
        ("reshape", lambda: mnp.reshape(mnp.ones(6), (4,))),
        ("reshape", lambda: lax.reshape(x, (4,))),
        ("broadcast_in_dim", lambda: lax.broadcast_in_dim(x, (5,), (0,))),
        ("dot_general", lambda: lax.dot_general(m, np.ones((4, 2), f32), (((1,), (0,)), ((), ())))),
        ("concatenate", lambda: lax.concatenate([m, np.ones((2, 4, 1), f32)], 0)),
        ("slice", lambda: lax.slice(x, (0,), (9,))),
        ("transpose", lambda: lax.transpose(m, (0, 0))),
        ("dynamic_slice", lambda: lax.dynamic_slice(x, (0,), (9,))),
        ("pad", lambda: lax.pad(x, 0.0, [(0, 0, 0), (1, 1, 0)])),
        ("reduce_sum", lambda: lax.reduce_sum(x, (1,))),
    ]
    for op, fn in cases:
        with pytest.raises(errors.ShapeError) as info:
            fn()
        msg = str(info.value)
        assert msg.startswith(op) and _at(fn) in msg and "loc(" not in msg, msg
        assert "operands: (" in msg
