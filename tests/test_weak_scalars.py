"""Weak Python scalars meeting arrays (issue 11, items 1 and 3), against JAX.

The order JAX follows, and so minixla: the result dtype is promoted first (a Python scalar is
weak, so ``uint8_array + 300`` stays uint8); then the Python value becomes that dtype, an int
first becoming the default int (int32, int64 under x64; ``OverflowError`` when it does not fit,
never a silent wrap) and a float the default float; only then any rewrite (``x / c`` ->
``x * (1 / c)``), on the converted value. The reference is JAX as users run it (each ``jnp``
function jitted, so ``i32 + 2**40`` raises and a float literal rounds through float32 before
float16), which is also what ``jax.jit`` gives; ``jax.disable_jit()`` differs on some of these.
"""
import re

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax
from minixla.core import errors
from minixla.core.avals import WeakArray
from conftest import BACKENDS

bf16 = ml_dtypes.bfloat16
INTS = (np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32)
INTS64 = (np.int64, np.uint64)
# Per bit width, Python ints that do not fit the dtype but fit the default int: they wrap (as
# JAX); -1 for the unsigned ones.
SCALARS = {8: (300, -129, -1), 16: (70000, -32769, -1), 32: (2**31 - 1, -2**31, -1),
           64: (2**63 - 1, -2**63, -1)}
BINARY_OPS = ("add", "subtract", "multiply", "true_divide", "floor_divide", "remainder", "fmod",
              "power", "float_power", "maximum", "minimum", "equal", "less", "greater_equal",
              "bitwise_and", "bitwise_xor", "left_shift", "right_shift", "arctan2", "logaddexp")
# atan2/exp/log1p are minixla's own approximations on the LLVM backend (a few ulp, tested in
# test_llvm_math); everything else must be bit-identical.
APPROX = {"arctan2": 4e-7, "logaddexp": 4e-7, "float_power": 1e-6}


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param



def _values(dtype):
    info = np.iinfo(dtype)
    return np.array([0, 1, 2, 7, 100, info.max, info.min, info.max - 1], dtype=object).astype(dtype)


def _assert_same(got, want, what, rtol=0.0):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: minixla {got.dtype}, JAX {want.dtype}"
    if rtol and got.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=rtol, atol=0, err_msg=what)
    else:  # bit for bit (NaN == NaN, -0.0 != 0.0)
        assert got.tobytes() == want.tobytes(), f"{what}: minixla {got.tolist()}, JAX {want.tolist()}"


def _all_ops(N, x):
    """Every binary op with every scalar on either side: one program, so one compile."""
    return [getattr(N, op)(*args) for op, args in _pairs(x)]


def _pairs(x):
    # (an integer to a negative Python int power is an error, in JAX too)
    return [(op, a) for op in BINARY_OPS for s in SCALARS[np.dtype(x.dtype).itemsize * 8]
            for a in ((x, s), (s, x)) if not (op == "power" and a[1] is s and s < 0)]


def _labels(x):
    return [f"{op}({'x, s' if a[0] is x else 's, x'}) s={a[1] if a[0] is x else a[0]}" for op, a in _pairs(x)]


def _check_all_ops(dtype, backend):
    x = _values(dtype)
    # The reference is one jax.jit of all the ops (each output is one jnp function of x and a
    # constant, so nothing spans ops for XLA to rewrite; it is what jnp's per-op jit gives, in one
    # compile instead of ~200).
    want = jax.jit(lambda a: _all_ops(jnp, a))(x)
    runs = {backend: minixla.jit(lambda a: _all_ops(mnp, a), backend=backend)(x)}
    if backend == "llvm" and dtype in (np.uint8, np.int32):
        runs["eager"] = _all_ops(mnp, x)
    for where, got in runs.items():
        for label, g, w in zip(_labels(x), got, want):
            _assert_same(g, w, f"{label} {np.dtype(dtype).name} [{where}]", APPROX.get(label.split("(")[0], 0))


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_every_binary_op_with_out_of_range_python_ints(dtype, backend):
    # uint8 / 256 was [nan inf inf inf] (256 became uint8(0) before its reciprocal), int8 / 128
    # flipped the sign, uint8 / 1000 divided by 232, arctan2/logaddexp(uint8, 300) used 44.
    _check_all_ops(dtype, backend)


@pytest.mark.parametrize("dtype", INTS64, ids=lambda d: np.dtype(d).name)
def test_every_binary_op_with_python_ints_x64(x64, dtype, backend):
    _check_all_ops(dtype, backend)


def test_issue_reproducers(backend):
    u8 = np.array([0, 1, 128, 255], np.uint8)
    i8 = np.array([-128, -1, 0, 1, 127], np.int8)
    for f, x in ((lambda x: x / 256, u8), (lambda x: 256 / x, u8), (lambda x: x / 1000, u8),
                 (lambda x: x / 128, i8), (lambda x: x // 256, u8), (lambda x: x % 1000, u8),
                 (lambda x: x ** 2, u8), (lambda x: x < 300, u8), (lambda x: x < -1, u8),
                 (lambda x: x * 200, i8), (lambda x: x + (-1), u8)):
        _assert_same(minixla.jit(f, backend=backend)(x), f(jnp.asarray(x)), "reproducer")
    np.testing.assert_array_equal(minixla.jit(lambda x: x / 256, backend=backend)(u8),
                                  np.array([0, 1, 128, 255], np.float32) * np.float32(1 / 256))


def test_jaxpr_divides_by_the_value_in_the_result_dtype():
    text = str(minixla.make_jaxpr(lambda x: x / 256)(np.ones(3, np.uint8)))
    assert "mul b 0.00390625:f32[]" in text and "inf" not in text, text


BIG = (2**31, -2**31 - 1, 2**40, 2**63, -2**63 - 1, 2**64)


def _raisers(N, L):
    """Every way a Python int reaches an op: operators, functions, where/clip, x.at[].set."""
    return {
        "x + s": lambda x, s: x + s, "s - x": lambda x, s: s - x, "x * s": lambda x, s: x * s,
        "x / s": lambda x, s: x / s, "x // s": lambda x, s: x // s, "x % s": lambda x, s: x % s,
        "x < s": lambda x, s: x < s, "x == s": lambda x, s: x == s, "x & s": lambda x, s: x & s,
        "x << s": lambda x, s: x << s, "maximum": lambda x, s: N.maximum(x, s),
        "power(s, x)": lambda x, s: N.power(s, x), "arctan2": lambda x, s: N.arctan2(x, s),
        "where": lambda x, s: N.where(x > 0, x, s), "clip": lambda x, s: N.clip(x, 0, s),
        "at.set": lambda x, s: x.at[0].set(s), "sum + s": lambda x, s: N.sum(x) + s,
    }


@pytest.mark.parametrize("dtype", (np.int32, np.uint8, np.uint32, np.float32, np.float16),
                         ids=lambda d: np.dtype(d).name)
def test_python_int_beyond_int32_raises_overflow_error(dtype, backend):
    # int32_array + 2**40 gave [1 1 1]; JAX raises OverflowError (the int becomes int32 first).
    x = np.ones(3, dtype)
    jax_fs = _raisers(jnp, jax.lax)
    for name, f in _raisers(mnp, lax).items():
        for s in BIG:
            if name == "at.set" and dtype == np.uint32 and s == 2**31:
                continue  # (fits uint32: JAX sets it exactly, see test_creation_fill_values...)
            with pytest.raises(OverflowError):  # JAX's own behaviour, so the test can fail
                jax_fs[name](jnp.asarray(x), s)
            with pytest.raises(errors.ScalarOverflowError, match=re.escape(f"Python int {s} too large to "
                                                                           "convert to int32")) as e:
                minixla.jit(lambda a: f(a, s), backend=backend)(x)
            assert "test_weak_scalars.py" in str(e.value), (name, str(e.value))  # the user's line


def test_overflow_message_names_the_op_and_line():
    with pytest.raises(OverflowError) as e:
        minixla.jit(lambda a: a + 2**40)(np.ones(3, np.int32))
    msg = str(e.value)
    assert "minixla.numpy.add" in msg and "int32" in msg and "test_weak_scalars.py" in msg, msg
    with pytest.raises(OverflowError, match="minixla.numpy.remainder"):
        mnp.remainder(np.ones(3, np.int32), -2**40)  # eager too


def test_python_ints_x64(x64, backend):
    # Under x64 the Python int becomes int64 first: 2**40 fits (and wraps into int32, as JAX),
    # 2**63 does not, even for a uint64 array.
    for dtype in (np.int8, np.int32, np.uint32, np.int64, np.uint64, np.float32):
        x = np.ones(3, dtype)
        for s in (2**40, -2**63, 2**63 - 1):
            _assert_same(minixla.jit(lambda a: a + s, backend=backend)(x), jnp.asarray(x) + s, f"{dtype} + {s}")
        for s in (2**63, -2**63 - 1, 2**64 - 1):
            with pytest.raises(OverflowError):
                jnp.asarray(x) + s
            with pytest.raises(errors.ScalarOverflowError, match="too large to convert to int64"):
                minixla.jit(lambda a: a + s, backend=backend)(x)


def test_static_arguments_become_checked_constants(backend):
    f = minixla.jit(lambda a, k: a + k, static_argnums=1, backend=backend)
    jf = jax.jit(lambda a, k: a + k, static_argnums=1)
    i8 = np.array([-128, -1, 0, 1, 127], np.int8)
    _assert_same(f(i8, 200), jf(i8, 200), "int8 + static 200")
    with pytest.raises(OverflowError):
        jf(np.ones(3, np.int32), 2**40)
    with pytest.raises(errors.ScalarOverflowError, match="1099511627776"):
        f(np.ones(3, np.int32), 2**40)


def test_lax_level_python_ints():
    i32, u8 = np.ones(3, np.int32), np.array([0, 1, 255], np.uint8)
    with pytest.raises(OverflowError, match="too large to convert to int32"):
        jax.lax.add(jnp.asarray(i32), 2**40)
    for fn in (lambda: lax.add(i32, 2**40), lambda: minixla.jit(lambda a: lax.max(a, -2**31 - 1))(i32)):
        with pytest.raises(errors.ScalarOverflowError, match="too large to convert to int32"):
            fn()
    # jax.lax does not promote: lax.add(uint8_array, 300) is a TypeError there; minixla accepts
    # an int that fits the dtype but never wraps one that does not.
    with pytest.raises(TypeError):
        jax.lax.add(jnp.asarray(u8), 300)
    with pytest.raises(errors.DTypeError, match="300"):
        minixla.jit(lambda a: lax.add(a, 300))(u8)
    _assert_same(minixla.jit(lambda a: lax.add(a, 1))(i32), jax.lax.add(jnp.asarray(i32), 1), "lax.add(i32, 1)")


def test_python_floats_round_to_inf_and_through_the_default_float(backend):
    f16, f32, b16 = (np.array([1.0, -2.5, 0.0], d) for d in (np.float16, np.float32, bf16))
    v = 1 + 2**-11 + 2**-30  # float32(v) = 1 + 2**-11, an f16 tie: JAX rounds it to 1.0
    cases = [(f32, lambda x: x + 1e40), (f16, lambda x: x * 1e10), (b16, lambda x: x + 1e40),
             (f32, lambda x: 1e40 / x), (f16, lambda x: x / 1e-10), (f16, lambda x: x / 70000),
             (f16, lambda x: x + 70000), (f16, lambda x: x * v), (f16, lambda x: x < v),
             (f16, lambda x: mnp.where(x > 0, x, v) if isinstance(x, minixla.core.tracing.Tracer)
              else jnp.where(x > 0, x, v)),
             (np.ones(3, np.int32), lambda x: x * 1e40)]
    for x, f in cases:
        _assert_same(minixla.jit(f, backend=backend)(x), f(jnp.asarray(x)), f"float scalar on {x.dtype}")


def test_creation_fill_values_wrap_as_jax(backend):
    u8, i32, i8 = np.array([1, 2], np.uint8), np.ones(2, np.int32), np.array([-128, 127], np.int8)
    cases = [(lambda N, x: N.full_like(x, 300), u8), (lambda N, x: N.full_like(x, -1), u8),
             (lambda N, x: N.full_like(x, 2**40), i32), (lambda N, x: N.full(2, 300, N.uint8) + x, u8),
             (lambda N, x: N.full(2, 2**40) + x, i32), (lambda N, x: N.full(2, 2**40, N.float32) + x, i32),
             (lambda N, x: N.full(2, 1) + x, i8),  # full(2, 1) is weak: the sum stays int8
             (lambda N, x: N.arange(250, 260, dtype=N.uint8)[:2] + x, u8),
             (lambda N, x: N.arange(2**40, 2**40 + 2) + x, i32),
             (lambda N, x: x.at[0].set(300), u8), (lambda N, x: x.at[1].add(300), u8),
             (lambda N, x: x.at[0].set(2**31), np.ones(2, np.uint32))]
    for f, x in cases:
        _assert_same(minixla.jit(lambda a: f(mnp, a), backend=backend)(x), f(jnp, jnp.asarray(x)), "fill")


def test_fmod_zero_test_happens_before_promotion(backend):
    # jnp.fmod replaces a zero divisor by 1 in the divisor's own dtype: 256 is not 0 there, so
    # fmod(int8, 256) is rem(x, 0) = x; bools are not replaced either.
    i8 = np.array([5, -3, 0, 127], np.int8)
    b = np.array([True, False])
    for f, x in ((lambda N, x: N.fmod(x, 256), i8), (lambda N, x: N.fmod(x, 0), i8),
                 (lambda N, x: N.fmod(x, N.zeros_like(x)), i8), (lambda N, x: N.fmod(x, False), b),
                 (lambda N, x: N.fmod(x, N.logical_not(x)), b)):
        _assert_same(minixla.jit(lambda a: f(mnp, a), backend=backend)(x), f(jnp, jnp.asarray(x)), "fmod")
        _assert_same(f(mnp, x), f(jnp, jnp.asarray(x)), "fmod eager")


def test_integers_become_float32_under_x64_as_jax(x64, backend):
    # jax's to_inexact_dtype: integers up to 32 bits -> float32 even with x64; int64 -> float64.
    for dtype in (np.uint8, np.int16, np.int32, np.int64, np.bool_):
        x = np.array([0, 1, 1], dtype)
        for name, f in (("/", lambda N, a: N.true_divide(a, 3)), ("sqrt", lambda N, a: N.sqrt(a)),
                        ("float_power", lambda N, a: N.float_power(a, 2)),
                        ("logaddexp", lambda N, a: N.logaddexp(a, 300))):
            got = minixla.jit(lambda a: f(mnp, a), backend=backend)(x)
            _assert_same(got, f(jnp, jnp.asarray(x)), f"{name} {np.dtype(dtype).name}", 4e-7)


# ---------------------------------------------------------------------------------------
# Eager (op-by-op) results keep JAX's weak types (issue 14's fresh-user findings): each
# expression's dtype and weak type, eagerly and under make_jaxpr, equals jax.eval_shape's of the
# same expression written with jax.numpy / jax.lax (JAX's abstract evaluation: eager's types).

_WEAK_CASES = [
    ("bid + f16", lambda n, l, x: l.broadcast_in_dim(1.0, (3,), ()) + x),
    ("f16 + bid", lambda n, l, x: x + l.broadcast_in_dim(1.0, (3,), ())),
    ("add(bid, f16)", lambda n, l, x: n.add(l.broadcast_in_dim(1.0, (3,), ()), x)),
    ("reshape(bid)", lambda n, l, x: l.reshape(l.broadcast_in_dim(1.0, (3,), ()), (3, 1))[:, 0] + x),
    ("asarray(1.)", lambda n, l, x: n.asarray(1.0) + x),
    ("asarray(weak)", lambda n, l, x: n.asarray(n.asarray(1.0)) + x),
    ("asarray(weak, f32)", lambda n, l, x: n.asarray(n.asarray(1.0), np.float32) + x),
    ("asarray(1)", lambda n, l, x: n.asarray(1) + x.astype(np.int8)),
    ("asarray(1) + 1.", lambda n, l, x: n.asarray(1) + 1.0),
    ("full", lambda n, l, x: n.full((3,), 1.0) + x),
    ("full int", lambda n, l, x: n.full(3, 1) + x.astype(np.int8)),
    ("lax.full", lambda n, l, x: l.full((3,), 1.0) + x),
    ("zeros_like(weak)", lambda n, l, x: n.zeros_like(n.asarray(1.0)) + x),
    ("full_like(weak, 2)", lambda n, l, x: n.full_like(n.asarray(1.0), 2) + x),
    ("ones_like(weak, f32)", lambda n, l, x: n.ones_like(n.asarray(1.0), dtype=np.float32) + x),
    ("neg(1.)", lambda n, l, x: l.neg(1.0) + x),
    ("lax.add(1., 1.)", lambda n, l, x: l.add(1.0, 1.0) + x),
    ("abs(1.)", lambda n, l, x: n.abs(1.0) + x),
    ("exp(weak)", lambda n, l, x: n.exp(n.asarray(1.0)) + x),
    ("weak * 2", lambda n, l, x: (n.asarray(1.0) * 2) + x),
    ("where(T, weak, 2.)", lambda n, l, x: n.where(True, n.asarray(1.0), 2.0) + x),
    ("clip(weak)", lambda n, l, x: n.clip(n.asarray(1.0), 0, 1) + x),
    ("stack", lambda n, l, x: n.stack([n.asarray(1.0)] * 3) + x),
    ("concatenate", lambda n, l, x: n.concatenate([n.asarray(1.0)[None]] * 3) + x),
    ("broadcast_to(weak)[0]", lambda n, l, x: n.broadcast_to(n.asarray(1.0), (3,))[0] + x),
    ("transpose", lambda n, l, x: n.transpose(n.broadcast_to(n.asarray(1.0), (3, 1)))[0] + x),
    ("sum(weak)", lambda n, l, x: n.sum(n.broadcast_to(n.asarray(1.0), (3,))) + x),
    ("max(weak)", lambda n, l, x: n.max(n.broadcast_to(n.asarray(1.0), (3,))) + x),
    ("convert(weak, f32)", lambda n, l, x: l.convert_element_type(n.asarray(1.0), np.float32) + x),
    ("weak.astype(f32)", lambda n, l, x: n.asarray(1.0).astype(np.float32) + x),
    ("dot(weak, weak)", lambda n, l, x: n.dot(n.asarray(1.0), n.asarray(1.0)) + x),
    ("weak < 1.", lambda n, l, x: n.asarray(1.0) < 1.0),
]


def test_eager_results_keep_jaxs_weak_types():
    """``lax.broadcast_in_dim(1.0, (3,), ()) + float16_array`` is float16 (it was float32
    eagerly): the class is every eager result whose shape rule keeps a weak type (broadcasts,
    reshapes, elementwise ops on Python scalars, creation from Python scalars, ``*_like`` of a
    weak array), and the operators of such a result (``WeakArray``), which follow JAX's promotion."""
    x16 = np.ones(3, np.float16)
    spec = jax.ShapeDtypeStruct((3,), np.float16)
    for name, fn in _WEAK_CASES:
        ref = jax.eval_shape(lambda x: fn(jnp, jax.lax, x), spec)
        want = (np.dtype(ref.dtype), ref.weak_type)
        eager = fn(mnp, lax, x16)
        aval = minixla.make_jaxpr(lambda x: fn(mnp, lax, x))(x16).jaxpr.outvars[0].aval
        assert (eager.dtype, getattr(eager, "weak_type", False)) == want, name
        assert (aval.dtype, aval.weak_type) == want, name
    w = lax.broadcast_in_dim(1.0, (3,), ())
    assert repr(w) == "array([1., 1., 1.], dtype=float32, weak_type=True)"
    # NumPy's own functions see a plain array (no weak types in NumPy)
    assert type(np.add(w, x16)) is np.ndarray and np.add(w, x16).dtype == np.float32
    assert type(np.concatenate([w, w])) is np.ndarray


# ---------------------------------------------------------------------------------------
# jit results keep JAX's weak types (issues 12/14): an output whose out aval is weak comes back
# as a ``WeakArray``, exactly where ``jax.jit`` returns ``weak_type=True`` (so ``out + f16`` is
# float16, not float32); a Python scalar argument is a weak input, keyed apart from a strong one.

_I32, _F32 = np.arange(3, dtype=np.int32), np.ones(3, np.float32)
_JIT_WEAK_CASES = [  # (name, fn(numpy module, lax module, *args), args)
    ("const 1.0", lambda n, l: 1.0, ()),
    ("const 1", lambda n, l: 1, ()),
    ("const True", lambda n, l: True, ()),
    ("int x * 0 + 2.", lambda n, l, x: x * 0 + 2.0, (_I32,)),
    ("int x * 0 + 2", lambda n, l, x: x * 0 + 2, (_I32,)),
    ("float arg * 2", lambda n, l, x: x * 2, (1.0,)),
    ("int arg + 1", lambda n, l, x: x + 1, (3,)),
    ("bool arg", lambda n, l, x: x, (True,)),
    ("np.float32 arg", lambda n, l, x: x * 2, (np.float32(1),)),
    ("float arg + f32", lambda n, l, x, y: x + y, (1.0, _F32)),
    ("weak array arg", lambda n, l, x: x * 2, ("weak",)),
    ("asarray(1.)", lambda n, l: n.asarray(1.0), ()),
    ("asarray(1., f32)", lambda n, l: n.asarray(1.0, np.float32), ()),
    ("where(c, 1., 2.)", lambda n, l, x: n.where(x > 0, 1.0, 2.0), (_F32,)),
    ("where(c, x, 2.)", lambda n, l, x: n.where(x > 0, x, 2.0), (_F32,)),
    ("select_n(full)", lambda n, l, x: l.select_n(x > 0, l.full((3,), 1.0), l.full((3,), 2.0)), (_F32,)),
    ("sum(full 1.)", lambda n, l: n.sum(n.full((3,), 1.0)), ()),
    ("sum(float arg)", lambda n, l, x: n.sum(x), (2.0,)),
    ("full_like(f32, 1.)", lambda n, l, x: n.full_like(x, 1.0), (_F32,)),
    ("full_like(float arg, 2)", lambda n, l, x: n.full_like(x, 2), (1.0,)),
    ("full((3,), 1.)", lambda n, l: n.full((3,), 1.0), ()),
    ("zeros(3)", lambda n, l: n.zeros(3), ()),
    ("arange(3)", lambda n, l: n.arange(3), ()),
    ("exp(float arg)", lambda n, l, x: n.exp(x), (1.0,)),
    ("float arg < 1.", lambda n, l, x: x < 1.0, (1.0,)),
    ("astype(f32)", lambda n, l, x: x.astype(np.float32), (1.0,)),
    ("broadcast_to(float arg)", lambda n, l, x: n.broadcast_to(x, (3,)), (1.0,)),
    ("pytree", lambda n, l, x: {"a": x * 2.0, "b": (x, 1.0, n.zeros(2))}, (1.0,)),
]


def _weak_and_dtypes(x, add):
    """``(dtype, weak_type, dtype of x + f16, dtype of add(x, f16))`` of one result leaf."""
    f16 = np.float16(1)
    return (np.dtype(x.dtype), bool(getattr(x, "weak_type", False)),
            np.dtype((x + f16).dtype) if getattr(x, "weak_type", False) else None, np.dtype(add(x, f16).dtype))


def test_jit_results_keep_jaxs_weak_types(backend):
    """``minixla.jit(lambda: 1.0)()`` is weak, as ``jax.jit``'s: the class is every jitted output
    whose out aval is weak (Python-scalar constants and arguments, creation from Python scalars,
    where/select of them, pytrees of them), on the dispatch path, ``Lowered.compile()(...)``,
    nested jit and vmap of jit, with donated arguments; strong outputs stay plain arrays."""
    weak_of = {"weak": (lambda: lax.broadcast_in_dim(1.0, (3,), ()), lambda: jax.lax.broadcast_in_dim(1.0, (3,), ()))}
    for name, fn, args in _JIT_WEAK_CASES:
        margs = [weak_of[a][0]() if isinstance(a, str) else a for a in args]
        jargs = [weak_of[a][1]() if isinstance(a, str) else a for a in args]
        ref = jax.jit(lambda *a: fn(jnp, jax.lax, *a))(*jargs)
        got = minixla.jit(lambda *a: fn(mnp, lax, *a), backend=backend)(*margs)
        assert jax.tree.structure(got) == jax.tree.structure(ref), name
        for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref)):
            assert _weak_and_dtypes(g, mnp.add) == _weak_and_dtypes(r, jnp.add), name
            assert type(g) is (WeakArray if r.weak_type else np.ndarray), name
    # one function, weak and strong calls: two compiled programs with their own output types
    f = minixla.jit(lambda x: x * 2, backend=backend)
    assert f(1.0).weak_type and not hasattr(f(np.float32(1.0)), "weak_type") and f(2.0).weak_type
    assert f._cache_size() == 2
    assert f.lower(1.0).compile()(1.0).weak_type
    assert type(f.lower(np.float32(1)).compile()(np.float32(1))) is np.ndarray
    g = minixla.jit(lambda x, y: (x + 1.0, y * 2), donate_argnums=0, backend=backend)
    a, b = g(np.ones(3, np.float32), 2.0)
    assert type(a) is np.ndarray and b.weak_type
    h = minixla.jit(lambda x: x * 2.0, backend=backend)
    assert minixla.jit(lambda x: h(x) + 1.0, backend=backend)(1.0).weak_type  # nested jit
    assert minixla.vmap(h)(lax.broadcast_in_dim(1.0, (2,), ())).weak_type
    assert type(minixla.vmap(h)(np.ones(2, np.float32))) is np.ndarray
    if backend == "llvm":  # minixla's SPMD partitioner on virtual devices: weak keys and outputs too
        from jax.sharding import PartitionSpec as P
        s = minixla.jit(lambda x, c: (x * c, c * 2.0), spmd_partitioner="minixla", mesh={"x": 2},
                        in_shardings=(P("x"), P()))
        (a, b), (_, c) = s(_F32, 3.0), s(_F32, np.float32(3))
        assert type(a) is np.ndarray and b.weak_type and type(c) is np.ndarray
