"""``mean``/``var``/``std``/``nanmean`` (and f16 ``sum``/``cumsum``) against JAX eager, bit for bit
where JAX's rules fix the bits:

* ``mean`` is ``sum * (1/n)`` at every rank (XLA folds JAX's division by the constant ``n``);
  f16/bf16 accumulate in f32 only when ``dtype`` is None; an empty extent gives (positive) NaN.
* ``var``'s last division by ``n - ddof`` is exact (a run-time value in JAX's jitted ``_var``)
  and f16/bf16 are computed in f32. XLA:CPU's LLVM contracts the squares of the fused
  ``sum((a - mean)**2)`` into FMAs, which eager op-by-op and the hand-off (a run-time 1.0 per
  product) do not: there ``var`` is compared within 2 ulp, and bit for bit on integer-valued
  data whose squares and sums are exact (so only the final division can differ).
* ``nanmean`` sums and counts in ``dtype`` (f16 stays f16) and divides exactly.

Eagerly and on the hand-off these are JAX eager's bits; the LLVM backend's sums are
reassociated (README "Semantics"), compared within the tolerance ``test_numpy_api`` uses.
"""
from __future__ import annotations

import zlib

import jax.numpy as jnp
import numpy as np
import pytest

import minixla
import minixla.numpy as mnp

f32, f16, bf16 = np.float32, np.float16, jnp.bfloat16
RNG = np.random.default_rng(5)

#: (shape, axis, keepdims) cases: rank 0, size 1, size 0, int/None/tuple axes
CASES = [((), None, False), ((1,), None, True), ((1,), 0, False), ((5,), -1, False), ((5,), None, True),
         ((0,), None, False), ((0,), 0, True), ((2, 3), None, False), ((2, 3), 0, True),
         ((2, 3), -1, False), ((2, 0), 1, False), ((2, 0), 0, True), ((3, 4, 5), (0, 2), False),
         ((3, 4, 5), 1, True)]
#: var against JAX eager: XLA:CPU's FMAs in ``sum((a - mean)**2)`` (module docstring)
VAR_ULPS = 4
#: nanmean on the hand-off against JAX eager: XLA sums in another order there (module docstring)
NANMEAN_ULPS = 4


def _data(shape, dt, nans=False):
    """The input for ``shape`` and ``dt``, the same whichever tests run (so the same data eagerly
    and under jit)."""
    rng = np.random.default_rng(zlib.crc32(repr((shape, np.dtype(dt).name, nans)).encode()))
    x = (rng.standard_normal(shape) * 3 + 1).astype(dt)
    if nans and x.size > 2:
        x.reshape(-1)[1] = np.nan
    return x


def _bits(x):
    x = np.asarray(x)
    return x.dtype, x.shape, x.tobytes()


def _ulps(a, b):
    """Largest distance in units in the last place between two same-dtype float arrays
    (NaNs must be NaN in both)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
    assert (np.isnan(a) == np.isnan(b)).all()
    it = {2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
    ia, ib = a.view(it).astype(np.int64), b.view(it).astype(np.int64)
    top = np.int64(1) << (8 * a.dtype.itemsize - 1)
    ia, ib = np.where(ia < 0, -(ia + top), ia), np.where(ib < 0, -(ib + top), ib)  # (ordered)
    ok = ~np.isnan(a)
    return int(np.max(np.abs(ia - ib)[ok], initial=0))


def _kwargs(fn, dt):
    if fn in ("var", "std"):
        return [{}, {"ddof": 1}, {"dtype": dt}]
    return [{}, {"dtype": dt}] + ([{"dtype": f32}] if dt != f32 else [])


def _programs(fn, shape, dt):
    """The calls of ``fn`` checked for one input: the cases of ``shape`` with each kwargs."""
    return [dict(axis=axis, keepdims=kd, **kw) for s, axis, kd in CASES if s == shape
            for kw in _kwargs(fn, dt)]


SHAPES = sorted({s for s, _, _ in CASES}, key=lambda s: (len(s), s))


def _check_eager(fn, dt):
    mism = []
    for shape in SHAPES:
        x = _data(shape, dt, nans=fn == "nanmean")
        for kw in _programs(fn, shape, dt):
            got, want = getattr(mnp, fn)(x, **kw), getattr(jnp, fn)(x, **kw)
            if _bits(got) != _bits(want):
                mism.append((shape, kw, _ulps(got, want)))
    if fn in ("mean", "nanmean") or not mism:
        assert not mism, mism
    else:  # (FMA contraction in XLA:CPU's fused var: see the module docstring)
        assert max(u for *_, u in mism) <= VAR_ULPS, mism


@pytest.mark.parametrize("fn,dt", [(fn, dt) for fn in ("mean", "var", "nanmean") for dt in (f32, f16, bf16)]
                         + [("std", f32)], ids=lambda v: v if isinstance(v, str) else np.dtype(v).name)
def test_eager_bits(fn, dt):
    _check_eager(fn, dt)


def _jit_all(fn, shape, dt, backend):
    x = _data(shape, dt, nans=fn == "nanmean")
    calls = _programs(fn, shape, dt)
    got = minixla.jit(lambda a: [getattr(mnp, fn)(a, **kw) for kw in calls], backend=backend)(x)
    want = [getattr(jnp, fn)(x, **kw) for kw in calls]
    return x, calls, got, want


JIT_SHAPES = [(), (1,), (0,), (2, 3), (2, 0), (3, 4, 5)]


@pytest.mark.parametrize("dt", [f32, f16, bf16], ids=["f32", "f16", "bf16"])
@pytest.mark.parametrize("fn", ["mean", "var", "nanmean"])
def test_handoff_bits(fn, dt):
    mism = []
    for shape in JIT_SHAPES:
        x, calls, got, want = _jit_all(fn, shape, dt, "jax")
        for kw, g, w in zip(calls, got, want):
            if fn == "var":  # (minixla's eager bits; JAX eager's within VAR_ULPS)
                assert _bits(g) == _bits(mnp.var(x, **kw)) and _ulps(g, w) <= VAR_ULPS, (shape, kw)
            elif _bits(g) != _bits(w):
                mism.append((shape, kw, _ulps(g, w)))
    if fn == "mean":
        assert not mism, mism
    else:  # nanmean: XLA fuses the whole program's two sums (see the module docstring)
        assert max((u for *_, u in mism), default=0) <= NANMEAN_ULPS, mism
    print(fn, dt, len(mism), mism)


#: LLVM backend (reassociated float sums): relative tolerance per dtype
_RTOL = {np.dtype(f32): 2e-6, np.dtype(f16): 2e-3, np.dtype(bf16): 1.6e-2}


@pytest.mark.parametrize("dt", [f32, f16], ids=["f32", "f16"])
@pytest.mark.parametrize("fn", ["mean", "var", "nanmean"])
def test_llvm_within_tolerance(fn, dt):
    for shape in JIT_SHAPES:
        _, calls, got, want = _jit_all(fn, shape, dt, "llvm")
        for kw, g, w in zip(calls, got, want):
            g, w = np.asarray(g), np.asarray(w)
            assert g.dtype == w.dtype and g.shape == w.shape, (shape, kw)
            tol = _RTOL[np.dtype(w.dtype)]
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=tol,
                                       atol=tol, equal_nan=True, err_msg=f"{shape} {kw}")


def _integer_valued(shape, axis):
    """Small integers summing to 0 along ``axis``: the mean (0), the centered values, their
    squares and sums are exact, so ``var`` can differ only in its last division."""
    x = RNG.integers(-4, 5, shape).astype(f32)
    x = np.moveaxis(x, axis, -1)
    x[..., -1] -= x.sum(-1)
    return np.ascontiguousarray(np.moveaxis(x, -1, axis))


@pytest.mark.parametrize("backend", [None, "jax"], ids=["eager", "handoff"])
def test_var_divides_exactly(backend):
    # n - ddof in (3, 6, 7, 5): x / c and x * (1/c) differ for some of these sums
    cases = [((4, 3), 1, 0), ((7, 6), 1, 0), ((2, 7), 1, 0), ((6, 2), 0, 1), ((3, 8), 1, 1)]
    xs = [_integer_valued(s, ax) for s, ax, _ in cases]
    def f(*xs):
        return [mnp.var(x, axis=ax, ddof=d) for x, (_, ax, d) in zip(xs, cases)]
    got = f(*xs) if backend is None else minixla.jit(f, backend=backend)(*xs)
    want = [jnp.var(x, axis=ax, ddof=d) for x, (_, ax, d) in zip(xs, cases)]
    folded = [np.sum((x - x.mean(ax, keepdims=True)) ** 2, ax) * (f32(1) / f32(x.shape[ax] - d))
              for x, (_, ax, d) in zip(xs, cases)]
    assert any(_bits(w) != _bits(fo) for w, fo in zip(want, folded))  # (the test can tell them apart)
    for g, w in zip(got, want):
        assert _bits(g) == _bits(w)


def test_mean_folds_at_rank_0():
    # a full mean is sum * (1/n) as JAX's: 3 elements whose sum / 3 and sum * (1/3) differ
    x = np.array([2.0, 2.0, 1.0], f32)
    s = x.sum(dtype=f32)
    assert s / f32(3) != s * (f32(1) / f32(3))
    for got in (mnp.mean(x), minixla.jit(mnp.mean, backend="jax")(x)):
        assert _bits(got) == _bits(jnp.mean(x))


@pytest.mark.parametrize("n", [10, 2000])
def test_f16_sum_and_cumsum_with_dtype(n):
    # dtype=float16 accumulates in float16 (JAX widens to f32 only for dtype=None); cumsum and
    # cumprod scan in f16
    x = RNG.uniform(0, 4, n).astype(f16)
    y = (1 + RNG.standard_normal(n) * 0.01).astype(f16)
    for got, want in ((mnp.sum(x, dtype=f16), jnp.sum(x, dtype=f16)), (mnp.sum(x), jnp.sum(x)),
                      (mnp.mean(x, dtype=f16), jnp.mean(x, dtype=f16)),
                      (mnp.cumsum(x), jnp.cumsum(x)), (mnp.cumprod(y), jnp.cumprod(y)),
                      (mnp.cumsum(x, dtype=f32), jnp.cumsum(x, dtype=f32))):
        assert _bits(got) == _bits(want)
    if n == 2000:  # (the test tells an f16 accumulation from an f32 one)
        assert _bits(jnp.sum(x, dtype=f16)) != _bits(jnp.sum(x))


def test_round_decimals_folds_at_rank_0():
    # jnp.round(x, decimals) divides by the constant 10**decimals: XLA folds it into a multiply
    # at rank 0 too (for a third of these scalars that is not the correctly rounded division)
    xs = (np.random.default_rng(3).standard_normal(12) * 100).astype(f32)
    for x in xs:
        assert _bits(mnp.round(x, 2)) == _bits(jnp.round(x, 2)), x
    assert any(_bits(jnp.round(x, 2)) != _bits(np.round(x * f32(100)) / f32(100)) for x in xs)
