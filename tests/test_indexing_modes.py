"""Out-of-bounds and negative indices in every gather/scatter-based function, against JAX.

JAX's rules (jax/_src/numpy/indexing.py, jax/_src/lax/slicing.py), each checked here on both
backends: ``jnp.take`` and ``take_along_axis`` default to ``mode="fill"`` (NaN, or the dtype's
min/max/True); ``x[idx]`` and ``x.at[idx].get()`` default to ``"promise_in_bounds"`` (clamped in
practice); ``x.at[idx].set/add/...`` drop out-of-range updates unless ``mode="clip"``. Negative
indices count from the end, unsigned ones never do; integer-array indices are converted to int32
after that (so a uint32 index >= 2**31 is out of range at the low end), and a scalar index of a
rank-1 operand keeps its dtype (uint32 4e9 clamps to the last element).
"""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax

BACKENDS = ("llvm", "jax")
IDX_DTYPES = (np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32)
# In range, past either end, the ends of int8/uint8, and uint32 values past int32's range.
VALUES = [0, 4, 5, 9, -1, -5, -6, 127, -128, 200, 255, 4000000000, 2**32 - 1, 2**31]
X = np.arange(5.0, dtype=np.float32)
X2 = np.arange(12.0, dtype=np.float32).reshape(3, 4)


def _indices(dtype):
    with warnings.catch_warnings():  # (the wrap of out-of-range values is the point)
        warnings.simplefilter("ignore")
        return np.array(VALUES).astype(dtype)


def _scalar(v, dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.array(v).astype(dtype)[()]


def _check(f, jf, *args, backends=BACKENDS):
    """f under minixla.jit on each backend equals jf run by JAX eager (values, NaNs, dtypes);
    f and jf may return tuples (one compile checks many variants)."""
    _check_many(f, jf, [args], backends)


def _check_many(f, jf, arg_tuples, backends=BACKENDS):
    """``_check`` for each tuple of arguments, with one compile per backend (same avals)."""
    for backend in backends:
        g = minixla.jit(f, backend=backend)
        for args in arg_tuples:
            want = jax.tree_util.tree_leaves(jf(*[jnp.asarray(a) for a in args]))
            got = jax.tree_util.tree_leaves(g(*args))
            assert len(got) == len(want)
            for k, (a, b) in enumerate(zip(got, want)):
                _compare(np.asarray(a), np.asarray(b), f"backend={backend} output {k} args {args[1:]}")


def _compare(got, want, where):
    assert got.dtype == want.dtype and got.shape == want.shape, (where, got, want)
    if got.dtype == jnp.bfloat16:  # (NumPy's NaN-aware compare does not know bfloat16)
        got, want = got.astype(np.float32), want.astype(np.float32)
    np.testing.assert_array_equal(got, want, err_msg=where)


def _check_raises(f, jf, exc, *args):
    with pytest.raises(exc):
        jf(*[jnp.asarray(a) for a in args])
    for backend in BACKENDS:
        with pytest.raises(exc):
            minixla.jit(f, backend=backend)(*args)


# --- the reproducers of issue 11 ---------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_take_along_axis_fills_out_of_bounds(backend):
    f = minixla.jit(lambda x, i: mnp.take_along_axis(x, i, axis=0), backend=backend)
    np.testing.assert_array_equal(f(X, np.array([9, 3])), np.array([np.nan, 3.0], np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_scalar_uint32_index_clamps_to_the_end(backend):
    assert minixla.jit(lambda x: x[np.uint32(4e9)], backend=backend)(X) == 4.0
    assert minixla.jit(lambda x, i: x[i], backend=backend)(X, np.uint32(4e9)) == 4.0


# --- jnp.take ----------------------------------------------------------------------------------

TAKE_MODES = (None, "fill", "clip", "wrap")


# (each test below puts every index dtype in one program: one compile per backend, not six)
def test_take_modes():
    f = lambda np_: lambda x, *idx: [np_.take(x, i, mode=m) for i in idx for m in TAKE_MODES]  # noqa: E731
    _check(f(mnp), f(jnp), X, *[_indices(dt) for dt in IDX_DTYPES])
    g = lambda np_: lambda x: [np_.take(x, _indices(dt), mode=m) for dt in IDX_DTYPES  # noqa: E731
                               for m in TAKE_MODES]
    _check(g(mnp), g(jnp), X)  # static indices


def test_take_default_fill_per_dtype_and_fill_value():
    idx = np.array([1, 9, -1, -9], np.int32)
    fills = (None, -7, 2.7, 300, np.nan, 0)
    f = lambda np_: lambda i, *xs: [np_.take(x, i, fill_value=fv) for x in xs for fv in fills]  # noqa: E731
    xs = (X, np.arange(5, dtype=np.int32), np.arange(5, dtype=np.uint8), np.arange(5, dtype=np.int16),
          np.ones(5, bool), np.arange(5, dtype=jnp.bfloat16))
    with warnings.catch_warnings():  # (NaN and 300 do not fit the integer dtypes: cast as JAX)
        warnings.simplefilter("ignore")
        _check(f(mnp), f(jnp), idx, *xs)


def test_take_axes_and_shapes():
    idx = np.array([[0, 4], [-1, 9]], np.int32)
    f = lambda np_: lambda x, i: [np_.take(x, i, axis=a, mode=m) for a in (0, 1, -1, None)  # noqa: E731
                                  for m in TAKE_MODES]
    _check(f(mnp), f(jnp), X2, idx)
    g = lambda np_: lambda x, one, e0, i1, e: (  # noqa: E731
        [np_.take(x, 7, mode=m) for m in TAKE_MODES]  # a scalar index
        + [np_.take(one, i1, mode=m) for m in TAKE_MODES]  # a size-1 axis
        + [np_.take(x, e, mode=m) for m in TAKE_MODES]  # no indices
        + [np_.take(e0, e, mode=m) for m in TAKE_MODES])  # no indices, empty axis
    _check(g(mnp), g(jnp), X, np.ones(1, np.float32), np.zeros(0, np.float32),
           np.array([0, 1, -1, -2], np.int32), np.zeros((0,), np.int32))


def test_take_errors_as_jax():
    z = np.zeros(0, np.float32)
    _check_raises(lambda x: mnp.take(x, np.array([0])), lambda x: jnp.take(x, np.array([0])), IndexError, z)
    _check_raises(lambda x: mnp.take(x, np.array([1]), mode="bogus"),
                  lambda x: jnp.take(x, np.array([1]), mode="bogus"), ValueError, X)
    _check_raises(lambda x: mnp.take(x, np.array([1.0])), lambda x: jnp.take(x, np.array([1.0])), ValueError, X)
    _check_raises(lambda x: mnp.take(x, np.array([1]), mode="raise"),
                  lambda x: jnp.take(x, np.array([1]), mode="raise"), NotImplementedError, X)
    _check(lambda x: mnp.take(x, np.array([True, False])), lambda x: jnp.take(x, np.array([True, False])), X)


# --- take_along_axis ---------------------------------------------------------------------------

TAL_MODES = (None, "fill", "clip", "promise_in_bounds")


def test_take_along_axis_modes():
    f = lambda np_: lambda x, *idx: [np_.take_along_axis(x, i, axis=0, mode=m)  # noqa: E731
                                     for i in idx for m in TAL_MODES]
    _check(f(mnp), f(jnp), X, *[_indices(dt) for dt in IDX_DTYPES])


def test_take_along_axis_shapes():
    def f(np_):
        def g(x2, i2, ib, ia, iflat, one, i1, e0, e2, i23, ie):
            out = []
            for m in TAL_MODES:
                t = lambda a, i, axis, fv=None: np_.take_along_axis(a, i, axis=axis, mode=m, fill_value=fv)  # noqa: E731
                out += [t(x2, i2, 1), t(x2, i2, -1, 7.0),
                        t(x2, ib, 0),  # an index dim of 1 broadcasts
                        t(x2[:1], ia, 1),  # an array dim of 1 broadcasts
                        t(x2, iflat, None), t(one, i1, 0),  # size-1 axis
                        t(e0, i1, 0), t(e2, i23, 1),  # an empty axis: zeros
                        t(x2, ie, 1)]  # no indices
            return out
        return g
    _check(f(mnp), f(jnp), X2, np.array([[0, 5], [-1, -5], [3, 4]], np.int32),
           np.array([[0, 5, -1, 2]], np.int32), np.array([[0], [9], [-1]], np.int32),
           np.array([0, 11, 12, -1, -13], np.int32), np.ones(1, np.float32), np.array([0, 1, -1, -2], np.int32),
           np.zeros(0, np.float32), np.zeros((2, 0), np.float32), np.zeros((2, 3), np.int32),
           np.zeros((3, 0), np.int32))


def test_take_along_axis_errors_as_jax():
    _check_raises(lambda x: mnp.take_along_axis(x, np.array([True]), 0),
                  lambda x: jnp.take_along_axis(x, np.array([True]), 0), TypeError, X)
    _check_raises(lambda x: mnp.take_along_axis(x, np.array([1]), 0),
                  lambda x: jnp.take_along_axis(x, np.array([1]), 0), ValueError, X2)


def test_int64_numpy_indices_as_jax_without_x64():
    """A NumPy int64 index array: ``take``/``take_along_axis`` convert it to int32 first (2**40
    wraps to 0), ``x[idx]`` counts it from the end in int64 and converts after (2**32 - 1 is then
    -1, clamped to 0), as JAX does without x64."""
    i64 = np.array([2**40, 2**40 + 3, -1, 9, 2**32 - 1])
    f = lambda np_: lambda x: ([np_.take(x, i64, mode=m) for m in TAKE_MODES]  # noqa: E731
                               + [np_.take_along_axis(x, i64, 0, mode=m) for m in TAL_MODES]
                               + [x[i64], x.at[i64].get(mode="fill"), x.at[i64].set(7.0)])
    _check(f(mnp), f(jnp), X)


# --- x[idx] and x.at[idx].get ------------------------------------------------------------------

def test_getitem_array_indices():
    f = lambda x, x2, *idx: [o for i in idx  # noqa: E731
                             for o in (x[i], x2[1:, i[:4]], x2[i[:3], i[3:6]], x2[i[:2], None, i[2:4]])]
    _check(f, f, X, X2, *[_indices(dt) for dt in IDX_DTYPES])
    g = lambda x: [x[_indices(dt)] for dt in IDX_DTYPES]  # noqa: E731
    _check(g, g, X)  # static


def test_getitem_scalar_indices():
    # rank 1: the index keeps its dtype; rank 2: converted to int32 first; a step-2 slice: a gather
    f = lambda x, x2, *idx: [o for i in idx  # noqa: E731
                             for o in (x[i], x2[i], x2[i, 1], x2[None, ::-1, i], x2[i, ::2], x[..., i])]
    _check_many(f, f, [(X, X2, *[_scalar(v, dt) for dt in IDX_DTYPES]) for v in VALUES])
    scalars = [_scalar(v, dt) for dt in IDX_DTYPES for v in (5, -6, 255, 2**32 - 1, 2**31)]
    g = lambda x, x2: [(x[s], x2[s], x2[s, -9]) for s in scalars]  # noqa: E731
    _check(g, g, X, X2)  # static


@pytest.mark.parametrize("mode", TAL_MODES)
def test_at_get_modes(mode):
    def f(x, x2, *idx):
        out = [x.at[i].get(mode=mode) for i in idx]
        out += [x.at[i].get(mode=mode) for i in STATIC]
        for v in (7, -1, -6, 2):
            out += [x.at[v].get(mode=mode), x2.at[1, v].get(mode=mode), x2.at[v, :].get(mode=mode)]
        return out + [x2.at[:, [1, 5]].get(mode=mode, fill_value=3)]
    STATIC = [_indices(dt) for dt in (np.int8, np.uint32)]
    _check(f, f, X, X2, *[_indices(dt) for dt in IDX_DTYPES])


def test_getitem_size_0_and_1_axes():
    one = np.ones((1, 3), np.float32)
    f = lambda x, i: (x[np.array([3, -3])], x[i], x.at[np.array([3, 0])].get(mode="fill"))  # noqa: E731
    _check(f, f, one, np.uint32(4e9))
    empty = np.zeros((0, 3), np.float32)
    _check(lambda x: x[:, np.array([0, 2])], lambda x: x[:, np.array([0, 2])], empty)
    _check_raises(lambda x: x[0], lambda x: x[0], IndexError, empty)


# --- x.at[idx].set/add/multiply/min/max --------------------------------------------------------

@pytest.mark.parametrize("mode", [None, "drop", "clip", "promise_in_bounds"])
def test_at_update_modes(mode):
    def f(x, x2):
        out = []
        for op in ("set", "add", "multiply", "min", "max"):
            up = lambda a, i, v: getattr(a.at[i], op)(v, mode=mode)  # noqa: E731
            for dt in (np.int8, np.uint32):
                idx = _indices(dt)
                out += [up(x, idx, 100 + np.arange(idx.size, dtype=np.float32)),
                        up(x, _scalar(2**32 - 1, dt), 9.0)]
            out += [up(x2, v, 9.0) for v in (7, -6, -1)] + [up(x, slice(3, 9), 7.0)]
        return out
    _check(f, f, X, X2)


# --- lax.gather / lax.scatter modes, traced indices --------------------------------------------

GDN = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0, 1))
JGDN = jax.lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0, 1))
SDN = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                  scatter_dims_to_operand_dims=(0, 1))
JSDN = jax.lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                       scatter_dims_to_operand_dims=(0, 1))
GIDX = np.array([[0, 1], [2, 2], [2, 3], [-1, 0], [1, 4], [3, 0]])
GMODES = (None, "clip", "fill", "promise_in_bounds", lax.GatherScatterMode.FILL_OR_DROP)


GATHER_DTYPES = (np.int8, np.int32, np.uint8, np.uint32)


def test_lax_gather_modes():
    def f(lax_):
        def g(x, *ies):
            out = []
            for i, e in zip(ies[::2], ies[1::2]):
                for m in GMODES:
                    m = getattr(m, "value", m) if lax_ is jax.lax else m
                    out += [lax_.gather(x, i, (GDN if lax_ is lax else JGDN), (1, 2), mode=m, fill_value=fv)
                            for fv in (None, -1.5)]
                    out += [lax_.gather(x, e, (GDN if lax_ is lax else JGDN), (1, 2), mode=m)]  # no indices
            return out
        return g
    _check(f(lax), f(jax.lax), X2, *[a for dt in GATHER_DTYPES for a in (GIDX.astype(dt), np.zeros((0, 2), dt))])


def test_lax_scatter_modes():
    def f(lax_):
        dn = SDN if lax_ is lax else JSDN
        return lambda x, u, *idx: [getattr(lax_, name)(x, i, u, dn, mode=m) for i in idx
                                   for name in ("scatter", "scatter_add", "scatter_mul", "scatter_min", "scatter_max")
                                   for m in (None, "clip", "drop", "promise_in_bounds")]
    upd = (10 + np.arange(12, dtype=np.float32)).reshape(6, 2)
    _check(f(lax), f(jax.lax), X2, upd, *[GIDX.astype(dt) for dt in (np.int8, np.int32, np.uint32)])


def test_mode_shows_in_the_jaxpr_and_fill_lowers_to_a_select():
    jaxpr = str(minixla.make_jaxpr(lambda x, i: mnp.take(x, i))(X, np.array([1], np.int32)))
    assert "mode=GatherScatterMode.FILL_OR_DROP" in jaxpr and "fill_value=nan" in jaxpr
    hlo = minixla.jit(lambda x, i: mnp.take(x, i)).lower(X, np.array([1], np.int32)).as_text()
    assert "gather(" in hlo and "select(" in hlo and "compare(" in hlo
    with pytest.raises(ValueError):
        lax.gather(X2, GIDX, GDN, (1, 2), mode="bogus")


def test_uint64_indices_clamp_unsigned_with_x64(x64):
    """A uint64 start index >= 2**63 is large, not negative (the LLVM emitter compares unsigned)."""
    # (in process under the x64 fixture: a subprocess cost a second jax import; the index is
    # traced, so each program compiles once per backend for the three values)
    x = np.arange(5.0)
    for backend in ("llvm", "jax"):
        get = minixla.jit(lambda x, i: x[i], backend=backend)
        dslice = minixla.jit(lambda x, i: lax.dynamic_slice(x, [i], [2]), backend=backend)
        dupdate = minixla.jit(lambda x, i: lax.dynamic_update_slice(x, np.ones(2), [i]), backend=backend)
        take = minixla.jit(lambda x, i: mnp.take(x, i, mode="clip"), backend=backend)
        for v in (2**63, 2**64 - 1, 3):
            i = np.uint64(v)
            assert get(x, i) == jnp.asarray(x)[i]
            np.testing.assert_array_equal(dslice(x, i), jax.lax.dynamic_slice(x, [i], [2]))
            np.testing.assert_array_equal(dupdate(x, i), jax.lax.dynamic_update_slice(x, np.ones(2), [i]))
            np.testing.assert_array_equal(take(x, np.array([i])), jnp.take(x, np.array([i]), mode="clip"))
