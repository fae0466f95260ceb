"""The jax.numpy names added from the issue's list of common ones (triangles, diagonals, grids,
products, differences, convolution, covariance, membership, counting, pad modes, roll/rot90,
stacking, NaN-aware elementwise functions): each against JAX eager — values, dtype and shape —
eagerly, and a representative set under jit on both backends."""
import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla.core import errors
from minixla.testing import check_against_jax

rng = np.random.default_rng(0)
A = rng.standard_normal((3, 4)).astype(np.float32)
B = rng.standard_normal((2, 3, 3)).astype(np.float32)
V = np.arange(1, 5, dtype=np.float32)
I = np.arange(12, dtype=np.int32).reshape(3, 4)
SPECIAL = np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, 1e-30, 3e38], np.float32)
SPECIAL2 = np.array([1.0, -1.0, 0.0, np.nan, 2.0, np.inf, 0.0, -0.0, 3e38], np.float32)

#: (id, function name, array arguments, static keyword arguments)
CASES = [
    ("tril", "tril", (A,), {}), ("tril-k", "tril", (B,), dict(k=-1)), ("triu", "triu", (I,), dict(k=1)),
    ("diagonal", "diagonal", (A,), dict(offset=1)),
    ("diagonal-3d", "diagonal", (B,), dict(offset=-1, axis1=1, axis2=2)),
    ("diag-1d", "diag", (V,), dict(k=1)), ("diag-2d", "diag", (A,), dict(k=-1)),
    ("trace", "trace", (B,), dict(offset=1, axis1=1, axis2=2)), ("trace-int", "trace", (I,), {}),
    ("kron", "kron", (A[:2, :2], V[:3]), {}), ("cross3", "cross", (A[:, :3], B[0]), {}),
    ("cross2", "cross", (A[:, :2], A[:, 1:3]), {}), ("vander", "vander", (V,), dict(N=3)),
    ("matrix_transpose", "matrix_transpose", (B,), {}), ("vecdot", "vecdot", (B, B[0]), {}),
    ("diff", "diff", (A,), dict(n=2, axis=0)), ("diff-bool", "diff", (A > 0,), {}),
    ("ediff1d", "ediff1d", (A,), dict(to_begin=-1.0)), ("trapezoid", "trapezoid", (A, V), {}),
    ("cumulative_sum", "cumulative_sum", (I,), dict(axis=1, include_initial=True)),
    ("cumulative_prod", "cumulative_prod", (V,), {}),
    ("polyval", "polyval", (V, A), {}), ("convolve", "convolve", (V, A[0, :3]), {}),
    ("convolve-same", "convolve", (V[:2], V), dict(mode="same")),
    ("correlate", "correlate", (V, A[0, :3]), {}), ("correlate-full", "correlate", (V[:2], V), dict(mode="full")),
    ("cov", "cov", (A,), {}), ("cov-cols", "cov", (A,), dict(rowvar=False, bias=True)),
    ("cov-weights", "cov", (A, None, True, False, 2, np.array([1, 2, 1, 3]), np.array([0.5, 1, 2, 1.0])), {}),
    ("corrcoef", "corrcoef", (A,), {}), ("corrcoef-xy", "corrcoef", (V, A[0]), {}),
    ("isin", "isin", (I, np.array([1, 4, 7, 30])), {}), ("isin-invert", "isin", (A, A[0]), dict(invert=True)),
    ("bincount", "bincount", (np.array([0, 1, 1, 3, -2, 9]),), dict(length=5)),
    ("bincount-weights", "bincount", (np.array([0, 1, 1, 3]), V), dict(length=3)),
    ("pad-edge", "pad", (A, ((2, 7), (1, 0))), dict(mode="edge")),
    ("pad-wrap", "pad", (A, ((2, 7), (1, 0))), dict(mode="wrap")),
    ("pad-reflect", "pad", (A, ((2, 7), (1, 0))), dict(mode="reflect")),
    ("pad-symmetric", "pad", (A, ((2, 7), (1, 0))), dict(mode="symmetric")),
    ("pad-reflect-1", "pad", (V[:1], (2, 3)), dict(mode="reflect")),
    ("roll", "roll", (A, 2), {}), ("roll-axes", "roll", (A, (1, -2)), dict(axis=(0, 1))),
    ("rot90", "rot90", (A,), {}), ("rot90-3", "rot90", (B,), dict(k=3, axes=(2, 1))),
    ("append", "append", (A, V), {}), ("column_stack", "column_stack", ((V, V),), {}),
    ("dstack", "dstack", ((A, A),), {}), ("atleast_3d", "atleast_3d", (V,), {}),
    ("hypot", "hypot", (SPECIAL, SPECIAL2), {}), ("copysign", "copysign", (SPECIAL, SPECIAL2), {}),
    ("logaddexp2", "logaddexp2", (SPECIAL, SPECIAL2), {}), ("fmax", "fmax", (SPECIAL, SPECIAL2), {}),
    ("fmin", "fmin", (SPECIAL, SPECIAL2), {}), ("heaviside", "heaviside", (SPECIAL, SPECIAL2), {}),
    ("isclose", "isclose", (SPECIAL, SPECIAL2), {}), ("isclose-nan", "isclose", (SPECIAL, SPECIAL), dict(equal_nan=True)),
    ("sinc", "sinc", (SPECIAL,), {}), ("deg2rad", "deg2rad", (SPECIAL,), {}), ("rad2deg", "rad2deg", (I,), {}),
    ("isposinf", "isposinf", (SPECIAL,), {}), ("isneginf", "isneginf", (SPECIAL,), {}),
    ("angle", "angle", (SPECIAL,), {}), ("imag", "imag", (SPECIAL,), {}),
    ("allclose", "allclose", (A, A + 1e-7), {}), ("array_equal", "array_equal", (I, I), {}),
    ("array_equiv", "array_equiv", (I, I[:1]), {}),
]
JIT = {"tril-k", "triu", "diagonal-3d", "diag-1d", "trace", "kron", "cross3", "vecdot", "diff", "trapezoid",
       "cumulative_sum", "polyval", "convolve-same", "correlate", "cov-weights", "corrcoef", "isin",
       "bincount-weights", "pad-reflect", "pad-wrap", "roll-axes", "rot90-3", "hypot", "logaddexp2",
       "fmax", "sinc", "isclose"}


def _leaves(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def _assert_like_jax(got, want):
    got, want = _leaves(got), _leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_eager_matches_jax(case):
    _, name, args, kwargs = case
    _assert_like_jax(getattr(mnp, name)(*args, **kwargs), getattr(jnp, name)(*args, **kwargs))


def _split(args):
    """(traced array arguments, a function placing them back among the static ones)."""
    arrays = [a for a in args if isinstance(a, np.ndarray)]

    def rebuild(traced):
        it = iter(traced)
        return [next(it) if isinstance(a, np.ndarray) else a for a in args]
    return arrays, rebuild


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in JIT], ids=sorted(JIT, key=[c[0] for c in CASES].index))
def test_jit_matches_jax_on_both_backends(case):
    _, name, args, kwargs = case
    arrays, rebuild = _split(args)
    check_against_jax(lambda *t: getattr(mnp, name)(*rebuild(t), **kwargs),
                      lambda *t: getattr(jnp, name)(*rebuild(t), **kwargs), *arrays, rtol=2e-6, atol=1e-6)


def test_index_helpers_and_creation():
    for got, want in [(mnp.tril_indices(4, 1), jnp.tril_indices(4, 1)), (mnp.triu_indices(3, m=5), jnp.triu_indices(3, m=5)),
                      (mnp.triu_indices_from(A, 1), jnp.triu_indices_from(A, 1)), (mnp.diag_indices(3), jnp.diag_indices(3)),
                      (mnp.meshgrid(V, V[:3]), jnp.meshgrid(V, V[:3])),
                      (mnp.meshgrid(V, V[:3], indexing="ij", sparse=True), jnp.meshgrid(V, V[:3], indexing="ij", sparse=True)),
                      (mnp.indices((2, 3)), jnp.indices((2, 3))), (mnp.indices((2, 3), sparse=True), jnp.indices((2, 3), sparse=True)),
                      (mnp.logspace(0, 2, 5), jnp.logspace(0, 2, 5)), (mnp.geomspace(1, 100, 4), jnp.geomspace(1, 100, 4)),
                      (mnp.empty_like(I), jnp.empty_like(I)), (mnp.unstack(A, axis=1), jnp.unstack(A, axis=1)),
                      (mnp.fill_diagonal(A, np.array([1.0, 2.0]), inplace=False),
                       jnp.fill_diagonal(A, np.array([1.0, 2.0]), inplace=False)),
                      (mnp.atleast_1d(V, 2.0), jnp.atleast_1d(V, 2.0)), (mnp.bincount(np.array([0, 1, 1, 3])),
                                                                           jnp.bincount(np.array([0, 1, 1, 3])))]:
        _assert_like_jax(got, want)
    assert mnp.isscalar(2.0) and mnp.isscalar(np.zeros(())) and not mnp.isscalar(V)


def test_traced_roll_shift():
    f = minixla.jit(lambda x, s: mnp.roll(x, s, axis=1))
    for s in (3, -5, 0):
        np.testing.assert_array_equal(f(A, np.int32(s)), jnp.roll(A, s, axis=1))


def test_errors_like_jax():
    with pytest.raises(ValueError, match="at least 2D"):
        mnp.tril(V)
    with pytest.raises(ValueError, match="can't extend empty axis 0"):
        mnp.pad(np.zeros((0, 2), np.float32), 1, mode="edge")
    with pytest.raises(errors.UnsupportedError, match="pad mode 'median'"):
        mnp.pad(A, 1, mode="median")
    with pytest.raises(ValueError, match="Dimension must be either 2 or 3"):
        mnp.cross(A, A)
    with pytest.raises(ValueError, match="mode must be one of"):
        mnp.convolve(V, V, mode="middle")
    with pytest.raises(TypeError, match="integer type"):
        mnp.bincount(V)
    with pytest.raises(errors.ConcretizationTypeError, match="static `length`"):
        minixla.jit(mnp.bincount)(np.array([1, 2]))
    with pytest.raises(ValueError, match="ndim at least two"):
        mnp.rot90(V)


def test_array_api_names_match_jax():
    """``isdtype``/``issubdtype`` on JAX's lattice (bfloat16, float8, int4 included) and JAX's
    errors; ``permute_dims``, ``concat``, the bitwise shifts, ``nextafter``, ``fabs``,
    ``matvec``/``vecmat`` and ``nancumsum``/``nancumprod`` bit-identical to jax.numpy eagerly and
    under jit on both backends (values, dtypes); a gradient through ``matvec`` and ``fabs``."""
    import jax
    dts = ["bool", "int8", "uint16", "int32", "float16", "bfloat16", "float32", "float8_e4m3fn", "int4", "uint4"]
    kinds = ["bool", "signed integer", "unsigned integer", "integral", "real floating", "complex floating",
             "numeric", ("bool", "integral"), "float32", jnp.int32]
    classes = [np.generic, np.number, np.inexact, np.floating, np.integer, np.signedinteger,
               np.unsignedinteger, np.complexfloating, np.bool_, "float32", jnp.bfloat16]
    for d in dts:
        assert [mnp.isdtype(d, k) for k in kinds] == [jnp.isdtype(d, k) for k in kinds], d
        assert [mnp.issubdtype(d, t) for t in classes] == [jnp.issubdtype(d, t) for t in classes], d
    for bad in ("foo", 3):
        with pytest.raises(Exception) as want:
            jnp.isdtype("float32", bad)
        with pytest.raises(want.type, match="Unrecognized kind|Expected kind") as got:
            mnp.isdtype("float32", bad)
        assert str(got.value) == str(want.value)
    assert mnp.floating is jnp.floating and mnp.euler_gamma == jnp.euler_gamma
    assert mnp.__array_api_version__ == jnp.__array_api_version__
    assert (mnp.iscomplexobj(1j), mnp.iscomplexobj(np.ones(2)), mnp.isrealobj(None)) == (True, False, True)

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    v = np.arange(3, dtype=np.float32)
    w = np.array([[1., np.nan, 2], [np.nan, 3, np.nan]], np.float32)
    edge = np.array([-1e-45, 1e-45, -3e-45, -0.0, 0.0, -1.2e-38], np.float32)
    cases = [lambda np_: np_.permute_dims(x, (1, 0)), lambda np_: np_.concat([x, x], axis=1),
             lambda np_: np_.concat([x, v[None]], axis=None),
             lambda np_: np_.bitwise_left_shift(np.int32(3), np.arange(4, dtype=np.int32)),
             lambda np_: np_.bitwise_right_shift(np.uint8(200), np.arange(4, dtype=np.uint8)),
             lambda np_: np_.nextafter(x, np.float32(np.inf)), lambda np_: np_.nextafter(np.array([1, 2]), 0),
             lambda np_: np_.fabs(np.array([-3, 2, 0])), lambda np_: np_.fabs(np.array([-0.0, -2.5], np.float32)),
             lambda np_: np_.matvec(np.stack([x, x]), v), lambda np_: np_.vecmat(np.stack([v, v]), x.T),
             lambda np_: np_.nancumsum(w), lambda np_: np_.nancumprod(w, axis=1),
             lambda np_: np_.nancumsum(np.array([1, 2], np.int8)), lambda np_: np_.nancumprod(np.array([True, False])),
             # negative denormals step towards zero (XLA:CPU's compare reads them as -0)
             lambda np_: np_.nextafter(edge, np.float32(1)), lambda np_: np_.nextafter(edge, np.float32(-1)),
             lambda np_: np_.nextafter(edge.astype(jnp.bfloat16), edge[::-1].astype(jnp.bfloat16))]
    want = [c(jnp) for c in cases]
    runs = {"eager": [c(mnp) for c in cases]}
    for b in ("llvm", "jax"):
        runs[b] = minixla.jit(lambda: [c(mnp) for c in cases], backend=b)()
    for mode, got in runs.items():
        for i, (g, e) in enumerate(zip(got, want)):
            g = np.asarray(g)
            assert g.dtype == e.dtype and g.shape == e.shape, (mode, i, g.dtype, e.dtype)
            np.testing.assert_array_equal(g, np.asarray(e), err_msg=f"{mode} case {i}")
            if g.dtype.kind == "f" or g.dtype == jnp.bfloat16:  # -0.0 is not 0.0 here
                np.testing.assert_array_equal(np.signbit(g), np.signbit(np.asarray(e)), f"{mode} case {i}")
    with pytest.raises(errors.ShapeError, match="matvec"):
        mnp.matvec(x, np.ones(2, np.float32))
    g = minixla.grad(lambda a: mnp.sum(mnp.matvec(a, v) * mnp.fabs(a[:, 0])))(x)
    gj = jax.grad(lambda a: jnp.sum(jnp.matvec(a, v) * jnp.fabs(a[:, 0])))(x)
    np.testing.assert_allclose(np.asarray(g), np.asarray(gj), rtol=1e-6)
