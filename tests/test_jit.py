"""minixla.jit: caching, staged API, static arguments."""
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp

f32 = np.float32


def test_cache_keys_on_shape_dtype_and_weak_type():
    traces = []

    def f(x, y):
        traces.append(1)
        return x * y
    jf = minixla.jit(f)
    jf(np.ones(3, f32), 2.0)
    jf(np.ones(3, f32), 3.0)          # same avals: cached
    assert len(traces) == 1
    jf(np.ones(4, f32), 2.0)          # new shape
    jf(np.ones(3, f32), f32(2.0))     # strong f32 scalar instead of weak Python float
    assert len(traces) == 3


def test_staged_api_text_before_and_after_passes():
    lowered = minixla.jit(lambda a: mnp.exp(a) * 2.0 + 1.0).lower(np.ones((4, 4), f32))
    assert "exponential" in lowered.as_text() and "fusion" not in lowered.as_text()
    compiled = lowered.compile()
    assert "kind=kLoop" in compiled.as_text()
    np.testing.assert_allclose(compiled(np.zeros((4, 4), f32)), np.full((4, 4), 3, f32))
    with pytest.raises(TypeError, match="compiled for f32\\[4,4\\]"):
        compiled(np.zeros((4, 5), f32))


@pytest.mark.parametrize("backend", ["llvm", "jax"])
def test_static_argnums_and_argnames(backend):
    traces = []

    def f(x, n, *, axis):
        traces.append((n, axis))
        return mnp.sum(x * n, axis=axis)
    jf = minixla.jit(f, backend=backend, static_argnums=1, static_argnames="axis")
    x = np.arange(6, dtype=f32).reshape(2, 3)
    np.testing.assert_allclose(jf(x, 2, axis=0), (x * 2).sum(0))
    np.testing.assert_allclose(jf(x, 2, axis=0), (x * 2).sum(0))
    np.testing.assert_allclose(jf(x, 3, axis=1), (x * 3).sum(1))
    assert traces == [(2, 0), (3, 1)]
    compiled = jf.lower(x, 5, axis=1).compile()
    np.testing.assert_allclose(compiled(x), (x * 5).sum(1))


def test_static_arg_controls_python_control_flow():
    f = minixla.jit(lambda x, relu: mnp.maximum(x, 0.0) if relu else x, static_argnums=1)
    x = np.array([-1.0, 2.0], f32)
    np.testing.assert_array_equal(f(x, True), [0.0, 2.0])
    np.testing.assert_array_equal(f(x, False), x)


def test_non_hashable_static_arg_is_an_error():
    f = minixla.jit(lambda x, shape: mnp.reshape(x, shape), static_argnums=1)
    with pytest.raises(ValueError, match="Non-hashable"):
        f(np.ones(4, f32), [2, 2])
    np.testing.assert_array_equal(f(np.ones(4, f32), (2, 2)), np.ones((2, 2), f32))


def test_static_and_donated_together():
    f = minixla.jit(lambda n, x: x * n, static_argnums=0, donate_argnums=1)
    np.testing.assert_array_equal(f(3, np.ones(4, f32)), np.full(4, 3, f32))
    with pytest.raises(ValueError, match="both static and donated"):
        minixla.jit(lambda n, x: x * n, static_argnums=0, donate_argnums=0)(3, np.ones(4, f32))



@pytest.mark.parametrize("backend", ["llvm", "jax"])
def test_donate_argnames_and_donated_keyword_arguments_as_jax(backend):
    # jax.jit's donate_argnames (was a TypeError), each of donate_argnums/donate_argnames
    # implying the other, so an argument is donated whether passed by position or by keyword
    import jax
    def f(x, y, *, z):
        return x * 2 + y - z
    x, y = np.arange(4, dtype=f32), np.full(4, 0.5, f32)
    want = np.asarray(jax.jit(f)(x, y, z=y))  # (donation is a hint: JAX on CPU warns and copies)
    for kw in (dict(donate_argnames=("x", "z")), dict(donate_argnums=0, donate_argnames="z")):
        g = minixla.jit(f, backend=backend, **kw)
        np.testing.assert_array_equal(g(x.copy(), y, z=y.copy()), want)
        np.testing.assert_array_equal(g(x=x.copy(), y=y, z=y.copy()), want)
        assert g.lower(x, y, z=y).donated == (0, 2)
        assert g.lower(y=y, z=y, x=x).donated == (0, 2)  # leaves: (), then x, y, z by name
    with pytest.raises(ValueError, match=r"donate_argnums=\(5,\), but only accepts 2 positional"):
        minixla.jit(lambda a, b: a + b, donate_argnums=5)

def test_static_argnum_passed_by_keyword_and_argname_passed_by_position():
    def f(x, n):
        return x * n if n > 1 else x
    a = np.ones(3, f32)
    np.testing.assert_array_equal(minixla.jit(f, static_argnums=1)(a, n=3), a * 3)
    np.testing.assert_array_equal(minixla.jit(f, static_argnames="n")(a, 3), a * 3)
    np.testing.assert_array_equal(minixla.jit(f, static_argnums=-1)(a, 1), a)


@pytest.mark.parametrize("backend", ["llvm", "jax"])
def test_concurrent_first_calls_compile_once(backend):
    # Eight threads making the first call of one signature: one traces and compiles, the others
    # wait for it (they used to compile it eight times). A new signature still compiles.
    import threading
    import time
    traces = []

    def f(x):
        traces.append(x.shape)
        time.sleep(0.2)  # (a slow trace: the threads really overlap)
        return x * 2.0 + 1.0
    g = minixla.jit(f, backend=backend)
    x = np.arange(8, dtype=np.float32)
    start, results = threading.Barrier(8), [None] * 8

    def call(i):
        start.wait()
        results[i] = g(x)
    threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert traces == [(8,)]
    for r in results:
        np.testing.assert_array_equal(r, x * 2.0 + 1.0)
    g(np.ones(3, np.float32))
    assert traces == [(8,), (3,)]


def test_trace_stack_is_per_thread():
    """While one thread traces, a jitted call in another thread compiles and runs on its own
    (the trace stack is thread-local, as JAX's trace state): it is neither inlined into the
    other thread's trace nor does it leak its equations there."""
    import threading
    import minixla.numpy as mnp
    started, release = threading.Event(), threading.Event()

    def slow(x):
        y = mnp.sin(x)
        started.set()
        release.wait(10)
        return y * 2

    g = minixla.jit(lambda x: mnp.cos(x) + mnp.arange(8, dtype=np.float32))
    x = np.linspace(-1, 1, 8).astype(np.float32)
    box = {}
    t = threading.Thread(target=lambda: box.update(jaxpr=minixla.make_jaxpr(slow)(x)))
    t.start()
    assert started.wait(10)
    try:
        out = g(x)  # another thread is inside a trace right now
    finally:
        release.set()
        t.join()
    np.testing.assert_allclose(out, np.cos(x) + np.arange(8), rtol=1e-6)
    assert [e.primitive.name for e in box["jaxpr"].jaxpr.eqns] == ["sin", "mul"]


def test_numpy_arrays_of_a_wider_dtype_are_converted_on_every_call():
    """Regression (the dispatch fast path): an int64/float64 numpy array under x32 is keyed by its
    own dtype but must still be converted to the compiled int32/float32 on each call, not read as
    raw bytes (isin/take_along_axis of int64 indices returned garbage)."""
    import jax.numpy as jnp
    i64 = np.array([5, 2, 0], np.int64)
    x = np.array([1.0, 2.0, 3.0], np.float64)
    f = minixla.jit(lambda x, i: mnp.take_along_axis(x, i, axis=0))
    for _ in range(2):  # the first call compiles, the second takes the cached fast path
        np.testing.assert_array_equal(f(x, i64), jnp.take_along_axis(x, i64, axis=0))


def test_argnames_the_function_does_not_take_are_jaxs_error_at_decoration():
    import jax
    for what in ("static_argnames", "donate_argnames"):
        with pytest.raises(ValueError) as want:
            jax.jit(lambda x: x, **{what: "y"})
        with pytest.raises(ValueError) as got:
            minixla.jit(lambda x: x, **{what: "y"})
        assert str(got.value).startswith(str(want.value))
    # keyword-only names are taken, and anything by a function with **kwargs
    a = np.ones(3, f32)
    np.testing.assert_array_equal(minixla.jit(lambda x, *, k: x * k, static_argnames="k")(a, k=2), a * 2)
    np.testing.assert_array_equal(minixla.jit(lambda x, **kw: x * kw["k"], static_argnames="k")(a, k=2), a * 2)


def test_make_jaxpr_names_a_bad_argument_by_its_parameter():
    with pytest.raises(TypeError, match=r"make_jaxpr\(f\): argument s\['b'\]: Value 's'"):
        def f(x, s):
            return x
        minixla.make_jaxpr(f)(np.ones(2, f32), {"a": 1.0, "b": "s"})


@pytest.mark.parametrize("backend", ["llvm", "jax"])
def test_tree_util_is_jaxs_so_registered_types_are_pytrees(backend):
    # code ported with jax -> minixla finds minixla.tree_util / minixla.tree (AttributeError
    # before); a register_dataclass type is a pytree to minixla.jit and grad, as to jax's
    import dataclasses
    import functools
    import jax
    import jax.numpy as jnp

    @functools.partial(jax.tree_util.register_dataclass, data_fields=["w"], meta_fields=["scale"])
    @dataclasses.dataclass
    class P:
        w: object
        scale: float

    def step(M, np_, p, x):
        g = M.grad(lambda p: np_.sum(np_.tanh(x @ p.w) * p.scale))(p)
        return M.tree_util.tree_map(lambda a, b: a - 0.5 * b, p, g), M.tree.leaves(g)
    p, x = P(np.full((3, 2), 0.25, f32), 2.0), np.ones((4, 3), f32)
    want = step(jax, jnp, p, x)
    got = minixla.jit(lambda p, x: step(minixla, mnp, p, x), backend=backend)(p, x)
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(g, w, rtol=1e-6)
