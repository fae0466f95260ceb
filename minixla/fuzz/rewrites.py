"""The differential fuzzer's *rewrite* mode: the compositions XLA's whole-program optimizer
rewrites into something JAX eager never computes, at the inputs where the rewrite shows.

JAX eager compiles one op at a time, so XLA's algebraic simplifier never sees two of them
together; ``jax.jit`` (and the hand-off, which gives XLA the whole program) does. Public bug
reports (openxla/xla#45560, #49176, #49121; jax-ml/jax#38099, #37919, #40849;
tensorflow/tensorflow#123169, #117142) show the rewrites this mode builds, one *kind* each:

- ``inverse``: a function and its inverse, ``log(exp(x))`` (XLA: ``x``; eager: ``inf`` once
  ``exp`` overflows at 88.72 in float32), ``exp(log(x))``, ``atanh(tanh(x))``,
  ``sqrt(x*x)``/``sqrt(abs(x*x))`` (XLA: ``abs(x)``, past ``sqrt(max)``), ``sqrt(x)*sqrt(x)``,
  ``pow(exp(a), b)``, ... on values drawn around each pair's overflow and underflow bounds;
- ``exp_product``: ``exp(a)*exp(b)`` (XLA: ``exp(a+b)``, 1.0 where eager has ``inf*0 = NaN``),
  ``exp(a)/exp(b)``, ``a/exp(b)``, with ``a`` and ``b`` around ``±log(max)``;
- ``int_square``: integer products near wraparound, ``abs(x*x)``, ``x*x < 0``, ``sign(x*x)``,
  ``maximum(x*x, 0)``, ``where(x*x >= 0, ...)`` (XLA assumes ``x*x >= 0``; eager wraps);
- ``overlap_update``: ``dynamic_update_slice(base, slice_of(base), j)`` then a reshape, a
  transpose or nothing (XLA:CPU's in-place update read what it had just written);
- ``nested_slice``: ``dynamic_slice(dynamic_slice(x, i), j)`` and
  ``dynamic_update_slice(x, dynamic_update_slice(dynamic_slice(x, i), u, j), i)`` with starts
  out of range (XLA merged them without the clamps).

``cases()`` draws one case (kind, composition, dtype, inputs); ``run_case`` runs it with
``jax.numpy``/``jax.lax`` eagerly (``jax.disable_jit()``, the reference) and with
``minixla.numpy``/``minixla.lax`` under ``minixla.jit`` and compares as the semantics contract
says: bit for bit (NaN matches NaN; the sign of zero counts) unless a transcendental fed the
value, then within ``INEXACT_RTOL`` and with NaN, +inf and -inf in the same places (what the
rewrites change: ``inf`` against 89.0, NaN against 1.0). Not bit for bit there, because
XLA:CPU's ``exp`` fused into a loop with other ops on a 3-element array differs from the lone
``exp`` by up to 3 ulp near 88.72 (``exp(0)*exp(88.72282)`` is 3.4027717e38, eager's
3.4027726e38; ``jax.jit`` gives the same), a code-generation difference below the HLO that no
barrier stops. Its sibling is outside any tolerance: a fused ``log`` reads a negative subnormal
as -0.0 (``log(a) + log(-1.4e-45)`` is -inf, eager's lone ``log`` gives NaN; ``jax.jit`` too), so
a deep run reports those. ``tests/test_fuzz_rewrites.py``
runs a few cases in CI and many with ``MINIXLA_DEEP_FUZZ=1``; ``python -m minixla.fuzz --mode
rewrites --examples N`` keeps going past a mismatch and counts them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from hypothesis import strategies as st
from jax import lax as jlax

import minixla
import minixla.numpy as mnp
from minixla import lax as mlax
from minixla.fuzz.programs import BF16, compare
from minixla.testing import eager_reference, reference_device

KINDS = ("inverse", "exp_product", "int_square", "overlap_update", "nested_slice")
FLOATS = (np.dtype(np.float32), np.dtype(np.float32), np.dtype(np.float16), BF16)
INTS = (np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32), np.dtype(np.uint8))


def _finfo(dt):
    return ml_dtypes.finfo(dt)


def _log_max(dt):
    return float(np.log(np.float64(_finfo(dt).max)))


def _log_tiny(dt):
    return float(np.log(np.float64(_finfo(dt).tiny)))


# name -> (fn(np_, x), bounds(dtype) -> the values around which the rewrite shows)
INVERSE = {
    "log(exp(x))": (lambda np_, x: np_.log(np_.exp(x)), lambda dt: [_log_max(dt), _log_tiny(dt), -_log_max(dt)]),
    "exp(log(x))": (lambda np_, x: np_.exp(np_.log(x)), lambda dt: [0.0, float(_finfo(dt).tiny), -1.0]),
    "log1p(expm1(x))": (lambda np_, x: np_.log1p(np_.expm1(x)), lambda dt: [_log_max(dt), -20.0]),
    "expm1(log1p(x))": (lambda np_, x: np_.expm1(np_.log1p(x)), lambda dt: [-1.0, float(_finfo(dt).max)]),
    "atanh(tanh(x))": (lambda np_, x: np_.arctanh(np_.tanh(x)), lambda dt: [9.0, 4.5, -9.0]),
    "tanh(atanh(x))": (lambda np_, x: np_.tanh(np_.arctanh(x)), lambda dt: [1.0, -1.0]),
    "sin(arcsin(x))": (lambda np_, x: np_.sin(np_.arcsin(x)), lambda dt: [1.0, -1.0]),
    "sqrt(x*x)": (lambda np_, x: np_.sqrt(x * x), lambda dt: [float(np.sqrt(np.float64(_finfo(dt).max))),
                                                              float(np.sqrt(np.float64(_finfo(dt).tiny)))]),
    "sqrt(abs(x*x))": (lambda np_, x: np_.sqrt(np_.abs(x * x)),
                       lambda dt: [float(np.sqrt(np.float64(_finfo(dt).max))), -float(np.sqrt(np.float64(_finfo(dt).max)))]),
    "sqrt(square(x))": (lambda np_, x: np_.sqrt(np_.square(x)), lambda dt: [float(np.sqrt(np.float64(_finfo(dt).max)))]),
    "sqrt(x)*sqrt(x)": (lambda np_, x: np_.sqrt(x) * np_.sqrt(x), lambda dt: [0.0, -1.0, float(_finfo(dt).max)]),
    "square(sqrt(x))": (lambda np_, x: np_.square(np_.sqrt(x)), lambda dt: [0.0, -1.0, float(_finfo(dt).max)]),
    "rsqrt(x)*rsqrt(x)": (lambda np_, x: _rsqrt(np_, x) * _rsqrt(np_, x), lambda dt: [0.0, float(_finfo(dt).tiny)]),
    "cbrt(x*x*x)": (lambda np_, x: np_.cbrt(x * x * x), lambda dt: [float(np.cbrt(np.float64(_finfo(dt).max)))]),
    "log(sqrt(x))": (lambda np_, x: np_.log(np_.sqrt(x)), lambda dt: [0.0, -1.0, float(_finfo(dt).tiny)]),
    "abs(exp(x))": (lambda np_, x: np_.abs(np_.exp(x)), lambda dt: [_log_max(dt)]),
    "x - x": (lambda np_, x: x - x, lambda dt: [float(_finfo(dt).max)]),
    "x / x": (lambda np_, x: x / x, lambda dt: [0.0, float(_finfo(dt).max)]),
    "exp(x) - exp(x)": (lambda np_, x: np_.exp(x) - np_.exp(x), lambda dt: [_log_max(dt)]),
}

# name -> (fn(np_, a, b), bounds(dtype) for a, for b)
EXP_PRODUCT = {
    "exp(a)*exp(b)": lambda np_, a, b: np_.exp(a) * np_.exp(b),
    "exp(a)/exp(b)": lambda np_, a, b: np_.exp(a) / np_.exp(b),
    "a/exp(b)": lambda np_, a, b: a / np_.exp(b),
    "exp(a)*exp(b)*exp(a)": lambda np_, a, b: np_.exp(a) * np_.exp(b) * np_.exp(a),
    "pow(exp(a), b)": lambda np_, a, b: np_.power(np_.exp(a), b),
    "log(pow(a, b))": lambda np_, a, b: np_.log(np_.power(a, b)),
    "log(a*b)": lambda np_, a, b: np_.log(a * b),
    "log(a)+log(b)": lambda np_, a, b: np_.log(a) + np_.log(b),
}

INT_SQUARE = {
    "abs(x*x)": lambda np_, x: np_.abs(x * x),
    "x*x < 0": lambda np_, x: x * x < 0,
    "x*x >= 0": lambda np_, x: x * x >= 0,
    "sign(x*x)": lambda np_, x: np_.sign(x * x),
    "maximum(x*x, 0)": lambda np_, x: np_.maximum(x * x, 0),
    "where(x*x >= 0, x, -x)": lambda np_, x: np_.where(x * x >= 0, x, -x),
    "abs(square(x))": lambda np_, x: np_.abs(np_.square(x)),
    "abs(x)*abs(x) < 0": lambda np_, x: np_.abs(x) * np_.abs(x) < 0,
    "abs(abs(x))": lambda np_, x: np_.abs(np_.abs(x)),
    "abs(x) >= 0": lambda np_, x: np_.abs(x) >= 0,
    "abs(x*x) // 3": lambda np_, x: np_.abs(x * x) // 3,
}


def _rsqrt(np_, x):
    return (jlax if np_ is jnp else mlax).rsqrt(x)


@dataclass
class Case:
    """One composition: ``kind``, ``name`` (the composition), ``inputs`` (numpy arrays) and
    ``params`` (static shapes and starts of the slicing kinds)."""
    kind: str
    name: str
    inputs: list
    params: dict = field(default_factory=dict)

    def __str__(self):
        ins = ", ".join(f"{x.dtype}{list(x.shape)} {x.ravel()[:12].tolist()}" for x in self.inputs)
        return f"{self.kind} {self.name} {self.params} on ({ins})"


def _near(draw, dt, bounds, n):
    """``n`` values of float dtype ``dt``: each a bound moved by a few ulps, a special value
    (NaN, ±inf, ±0, the smallest subnormal, ±max) or a random value between ± twice the bounds."""
    fi = _finfo(dt)
    specials = [np.nan, np.inf, -np.inf, 0.0, -0.0, float(fi.smallest_subnormal), float(fi.max), -float(fi.max)]
    scale = float(np.float32(min(max([abs(b) for b in bounds] + [1.0]) * 2, float(np.finfo(np.float32).max))))
    out = []
    for _ in range(n):
        how = draw(st.sampled_from(("bound", "bound", "bound", "special", "random")))
        if how == "special":
            out.append(draw(st.sampled_from(specials)))
            continue
        if how == "random":
            out.append(draw(st.floats(-scale, scale, width=32)))
            continue
        v = np.asarray(draw(st.sampled_from(bounds)), dt)
        toward = np.asarray(np.inf if draw(st.booleans()) else -np.inf, dt)
        for _ in range(draw(st.integers(0, 3))):  # a few ulps either side
            v = np.nextafter(v, toward)
        out.append(float(v))
    with np.errstate(over="ignore"):
        return np.asarray(out, np.float64).astype(dt)


def _near_int(draw, dt, n):
    """``n`` values of integer dtype ``dt`` around ``±sqrt(max)`` (where ``x*x`` wraps), its
    extremes, 0 and ±1."""
    ii = np.iinfo(dt)
    root = int(np.sqrt(float(ii.max)))
    pool = [root - 1, root, root + 1, root + 2, -root - 1, -root, ii.min, ii.max, ii.min + 1, 0, 1, -1]
    pool = [v for v in pool if ii.min <= v <= ii.max]
    vals = [draw(st.sampled_from(pool)) if draw(st.integers(0, 3)) else draw(st.integers(int(ii.min), int(ii.max)))
            for _ in range(n)]
    return np.asarray(vals, dt)


def _shape(draw, max_rank=3, max_dim=5):
    return tuple(draw(st.lists(st.integers(1, max_dim), min_size=1, max_size=max_rank)))


def _data(draw, shape, dt):
    n = int(np.prod(shape))
    if dt.kind == "f" or dt == BF16:
        return _near(draw, dt, [1.0, 3.0], n).reshape(shape)
    return _near_int(draw, dt, n).reshape(shape)


@st.composite
def cases(draw, kinds=KINDS):
    """A ``Case`` of one of ``kinds`` (hypothesis strategy)."""
    kind = draw(st.sampled_from(kinds))
    n = draw(st.integers(1, 8))
    if kind == "inverse":
        name = draw(st.sampled_from(sorted(INVERSE)))
        dt = draw(st.sampled_from(FLOATS))
        return Case(kind, name, [_near(draw, dt, INVERSE[name][1](dt), n)])
    if kind == "exp_product":
        name = draw(st.sampled_from(sorted(EXP_PRODUCT)))
        dt = draw(st.sampled_from(FLOATS))
        lm = _log_max(dt)
        bounds = [lm, -lm, 2 * lm, -2 * lm, lm / 2, -lm / 2, 0.0, 1.0, -1.0]
        return Case(kind, name, [_near(draw, dt, bounds, n), _near(draw, dt, bounds, n)])
    if kind == "int_square":
        name = draw(st.sampled_from(sorted(INT_SQUARE)))
        dt = draw(st.sampled_from(INTS))
        return Case(kind, name, [_near_int(draw, dt, n)])
    dt = draw(st.sampled_from((np.dtype(np.int32), np.dtype(np.float32), np.dtype(np.int8), np.dtype(np.float16))))
    shape = _shape(draw)
    if kind == "overlap_update":
        sizes = tuple(draw(st.integers(1, d)) for d in shape)
        src = tuple(draw(st.integers(-d, 2 * d)) for d in shape)
        dst = tuple(draw(st.integers(-d, 2 * d)) for d in shape)
        params = dict(sizes=sizes, base=draw(st.sampled_from(("x", "x+y", "x+y", "x*y"))),
                      source=draw(st.sampled_from(("dynamic_slice", "slice", "shift"))),
                      shift=draw(st.integers(1, 3)),
                      starts=draw(st.sampled_from(("static", "traced"))),
                      after=draw(st.sampled_from(("none", "reshape", "reshape", "reshape_reversed", "transpose",
                                                   "add", "reverse"))))
        inputs = [_data(draw, shape, dt), _data(draw, shape, dt),
                  np.asarray(src, np.int32), np.asarray(dst, np.int32)]
        return Case(kind, "dynamic_update_slice(base, slice(base), j)", inputs, params)
    outer = tuple(draw(st.integers(1, d)) for d in shape)
    inner = tuple(draw(st.integers(1, d)) for d in outer)
    i = tuple(draw(st.integers(-2 * d, 3 * d)) for d in shape)
    j = tuple(draw(st.integers(-2 * d, 3 * d)) for d in shape)
    name = draw(st.sampled_from(("ds(ds(x, i), j)", "dus(x, dus(ds(x, i), u, j), i)")))
    inputs = [_data(draw, shape, dt), _data(draw, inner, dt), np.asarray(i, np.int32), np.asarray(j, np.int32)]
    return Case(kind, name, inputs, dict(outer=outer, inner=inner, starts=draw(st.sampled_from(("static", "traced")))))


def _starts(vec, static, traced):
    """Starts as Python ints (``static``: constants of the program) or scalars of the traced
    vector ``traced``."""
    return tuple(int(v) for v in vec) if static else tuple(traced[k] for k in range(len(vec)))


def function(case: Case, np_, lax_):
    """The case's composition as a function of its inputs, written with ``np_``/``lax_``."""
    if case.kind == "inverse":
        fn = INVERSE[case.name][0]
        return lambda x: fn(np_, x)
    if case.kind == "exp_product":
        fn = EXP_PRODUCT[case.name]
        return lambda a, b: fn(np_, a, b)
    if case.kind == "int_square":
        fn = INT_SQUARE[case.name]
        return lambda x: fn(np_, x)
    p = case.params
    static = p["starts"] == "static"
    src_vec, dst_vec = case.inputs[2], case.inputs[3]
    if case.kind == "overlap_update":
        def f(x, y, i, j):
            base = {"x": x, "x+y": x + y, "x*y": x * y}[p["base"]]
            src = _starts(src_vec, static, i)
            if p["source"] == "shift":  # base.at[k:].set(base[:-k]) along axis 0 (openxla/xla#49176)
                k = min(p["shift"], base.shape[0] - 1)
                if k < 1:
                    return base
                return _after(lax_.dynamic_update_slice(base, base[:base.shape[0] - k], (k,) + (0,) * (base.ndim - 1)),
                              base, p["after"])
            if p["source"] == "slice":  # a static slice: HLO's slice of the same buffer
                lo = [min(max(int(s) + (d if int(s) < 0 else 0), 0), d - n)
                      for s, d, n in zip(src_vec, base.shape, p["sizes"])]
                upd = base[tuple(slice(a, a + n) for a, n in zip(lo, p["sizes"]))]
            else:
                upd = lax_.dynamic_slice(base, src, p["sizes"])
            return _after(lax_.dynamic_update_slice(base, upd, _starts(dst_vec, static, j)), base, p["after"])
        return f

    def g(x, u, i, j):
        ii, jj = _starts(src_vec, static, i), _starts(dst_vec, static, j)
        if case.name == "ds(ds(x, i), j)":
            return lax_.dynamic_slice(lax_.dynamic_slice(x, ii, p["outer"]), jj, p["inner"])
        inner = lax_.dynamic_slice(x, ii, p["outer"])
        return lax_.dynamic_update_slice(x, lax_.dynamic_update_slice(inner, u, jj), ii)
    return g


def _after(out, base, after):
    """What reads the updated array: a reshape (which XLA's simplifier moves across the update),
    a transpose, an add of the base, a reverse, or nothing."""
    if after == "reshape":
        return out.reshape((1,) + out.shape)
    if after == "reshape_reversed":
        return out.reshape(out.shape[::-1])
    if after == "transpose":
        return out.T
    if after == "add":
        return out + base
    if after == "reverse":
        return out[::-1]
    return out


def _transcendental(case):
    """Whether a transcendental function feeds the result (then it is compared within
    ``INEXACT_RTOL``, as the semantics contract says)."""
    if case.kind == "inverse":
        return any(f in case.name for f in ("exp", "log", "tanh", "sin", "cbrt", "rsqrt"))
    return case.kind == "exp_product"


def run_case(case: Case, backends=("jax", "llvm")):
    """Run ``case`` on ``backends`` and compare with JAX eager; raises ``AssertionError``
    naming the case, the backend and the first difference."""
    for backend in backends:
        with np.errstate(all="ignore"):
            # (jax arrays: a NumPy operand would make `x * y` NumPy's multiply, which keeps
            # the subnormals XLA:CPU flushes)
            ref_inputs = [jax.device_put(x, reference_device(backend)) for x in case.inputs]
            want = np.asarray(eager_reference(function(case, jnp, jlax), *ref_inputs, backend=backend))
            got = np.asarray(minixla.jit(function(case, mnp, mlax), backend=backend)(*case.inputs))
        try:
            compare(f"[{backend}]", got, want, not _transcendental(case), signed_zeros=True)
            if got.dtype.kind == "f" or got.dtype == BF16:  # (a tolerance passes 89 for inf)
                for what, where in (("NaN", np.isnan), ("+inf", np.isposinf), ("-inf", np.isneginf)):
                    g, w = where(got.astype(np.float32)), where(want.astype(np.float32))
                    if (g != w).any():
                        i = tuple(np.argwhere(g != w)[0])
                        raise AssertionError(f"[{backend}]: {what} positions differ; first at {i}: "
                                             f"minixla {got[i]!r} vs JAX {want[i]!r}")
        except AssertionError as e:
            raise AssertionError(f"{case}: {e}") from None
