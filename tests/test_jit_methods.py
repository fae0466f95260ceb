"""``jit`` on methods (``Jitted.__get__``) and ``minixla.jit.optimization_pipeline()``.

JAX's idiom ``@functools.partial(jax.jit, static_argnums=0)`` on a method binds ``self`` as
the first argument; ``static_argnums=0`` then makes ``self`` a static (hashed) argument.
Every value is checked against the same class jitted with ``jax.jit``.
"""
from __future__ import annotations

import functools
import sys

import jax
import numpy as np
import pytest
from jax import tree_util

import minixla
import minixla.numpy as mnp
from minixla import errors

f32 = np.float32


def _scaler(jit, np_):
    class Scaler:
        """``self`` static: a plain object, hashed by identity."""

        def __init__(self, k):
            self.k = k

        @functools.partial(jit, static_argnums=0)
        def apply(self, x):
            return np_.maximum(x, 0.0) * self.k + 1.0

    return Scaler


def test_static_self_method_matches_jax():
    x = np.linspace(-2, 2, 12, dtype=f32).reshape(3, 4)
    Ours, Theirs = _scaler(minixla.jit, mnp), _scaler(jax.jit, jax.numpy)
    for k in (2.0, -0.5):
        with jax.disable_jit():  # the reference: JAX eager, op by op
            want = np.asarray(Theirs(k).apply(x))
        np.testing.assert_array_equal(Ours(k).apply(x), want)


def test_static_self_compiles_once_per_instance():
    Scaler = _scaler(minixla.jit, mnp)
    a, b = Scaler(2.0), Scaler(3.0)
    x = np.ones(4, f32)
    np.testing.assert_array_equal(a.apply(x), a.apply(x))
    assert len(Scaler.apply._cache) == 1
    np.testing.assert_array_equal(b.apply(x), np.full(4, 4.0, f32))
    assert len(Scaler.apply._cache) == 2  # a new static value (another instance): compiled again


def _keyed(jit, np_):
    class Keyed:
        """``self`` static with value equality: equal instances share compiled code."""

        def __init__(self, k):
            self.k = k

        def __eq__(self, other):
            return isinstance(other, Keyed) and self.k == other.k

        def __hash__(self):
            return hash(self.k)

        @functools.partial(jit, static_argnums=0)
        def apply(self, x):
            return x * self.k

    return Keyed


def test_static_self_with_hash_and_eq_shares_the_cache_entry():
    Ours, Theirs = _keyed(minixla.jit, mnp), _keyed(jax.jit, jax.numpy)
    x = np.arange(5, dtype=f32)
    for k in (2.0, 2.0, 3.0):
        np.testing.assert_array_equal(Ours(k).apply(x), np.asarray(Theirs(k).apply(x)))
    assert len(Ours.apply._cache) == 2  # Keyed(2.0) twice: one entry


def test_unhashable_static_self_raises_value_error_as_jax():
    class Unhashable:
        __hash__ = None

        @functools.partial(minixla.jit, static_argnums=0)
        def apply(self, x):
            return x + 1

    class UnhashableJax:
        __hash__ = None

        @functools.partial(jax.jit, static_argnums=0)
        def apply(self, x):
            return x + 1

    with pytest.raises(ValueError):
        UnhashableJax().apply(np.ones(2, f32))
    with pytest.raises(ValueError, match="Non-hashable static arguments"):
        Unhashable().apply(np.ones(2, f32))


def _dense(jit, np_):
    @tree_util.register_pytree_node_class
    class Dense:
        """``self`` dynamic: a pytree of arrays, traced like any argument."""

        def __init__(self, w, b):
            self.w, self.b = w, b

        def tree_flatten(self):
            return (self.w, self.b), None

        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(*children)

        @jit
        def __call__(self, x):
            return np_.maximum(x @ self.w + self.b, 0.0)

    return Dense


def test_pytree_self_is_traced_and_matches_jax():
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((4, 3)).astype(f32), rng.standard_normal(3).astype(f32)
    x = rng.standard_normal((2, 4)).astype(f32)
    ours, theirs = _dense(minixla.jit, mnp)(w, b), _dense(jax.jit, jax.numpy)(w, b)
    np.testing.assert_allclose(ours(x), np.asarray(theirs(x)), rtol=1e-6, atol=1e-6)
    # self's arrays are arguments, not constants: new weights reuse the compiled code
    Dense = type(ours)
    np.testing.assert_allclose(Dense(w * 2, b)(x), np.asarray(type(theirs)(w * 2, b)(x)), rtol=1e-6, atol=1e-6)
    assert len(Dense.__call__._cache) == 1


def test_non_static_self_that_is_not_an_array_names_the_argument():
    class Model:
        @minixla.jit
        def apply(self, x):
            return x + 1

    with pytest.raises(TypeError) as info:
        Model().apply(np.ones(2, f32))  # the line the message must name
    line = sys._getframe().f_lineno - 1
    assert isinstance(info.value, errors.DTypeError)
    msg = str(info.value)
    assert msg.startswith("jit(Model.apply): argument self: ")
    assert "static_argnums" in msg and f"{__file__}:{line} " in msg


def test_bound_method_lower_binds_self_and_the_class_attribute_is_the_jitted():
    Scaler = _scaler(minixla.jit, mnp)
    s = Scaler(2.0)
    x = np.ones((2, 2), f32)
    compiled = s.apply.lower(x).compile()  # self is bound (and static): only x remains
    np.testing.assert_array_equal(compiled(x), s.apply(x))
    assert "maximum" in s.apply.lower(x).as_text()
    assert isinstance(Scaler.apply, minixla.jit(lambda v: v).__class__)
    np.testing.assert_array_equal(Scaler.apply(s, x), s.apply(x))  # unbound: self passed explicitly


def test_bound_method_identity_as_python_methods():
    Scaler = _scaler(minixla.jit, mnp)
    a, b = Scaler(1.0), Scaler(1.0)
    assert a.apply == a.apply and hash(a.apply) == hash(a.apply)
    assert a.apply != b.apply
    assert a.apply.__self__ is a and a.apply.__func__ is Scaler.apply
    assert a.apply.__name__ == "apply" and a.apply.backend == "llvm"


def test_static_self_by_name():
    class Offset:
        def __init__(self, c):
            self.c = c

        @functools.partial(minixla.jit, static_argnames="self")
        def apply(self, x):
            return x + self.c

    np.testing.assert_array_equal(Offset(3).apply(np.ones(2, np.int32)), np.full(2, 4, np.int32))


# ---------------------------------------------------------------------------------------
# minixla.jit.optimization_pipeline(), as the README writes it.

def test_readme_optimization_pipeline_call_works():
    import pathlib
    readme = (pathlib.Path(__file__).parent.parent / "README.md").read_text()
    assert "`print(minixla.jit.optimization_pipeline())`" in readme
    pipeline = minixla.jit.optimization_pipeline()
    # the README shows exactly what print() gives
    assert "```\n" + str(pipeline) + "\n```" in readme
    assert [p.name for p in pipeline.passes] == ["fixed-point(simplify)", "transpose-folding",
                                                  "conv-canonicalization", "dce", "dot-lhs-row-major",
                                                  "fusion", "dce",
                                                  "memory-scheduler"]
    assert minixla.jit.optimization_pipeline is sys.modules["minixla.jit"].optimization_pipeline
