"""The differential fuzzer's random programs (``tests/test_fuzz.py`` and
``tests/test_fuzz_transforms.py`` drive them; hypothesis draws them).

A program is a list of op specs ``(op, argument ids, params)`` over 1-3 inputs, interpreted by
the same code (``interpret``) with ``np_ = jax.numpy`` (JAX eager: the reference) and with
``np_ = minixla.numpy`` (traced and compiled). ``build`` grows a valid program op by op,
evaluating each op with JAX eager and tracking, per value, whether it is *exact*
(bit-reproducible) and *nice* (small multiples of 1/4, so sums of them are exact in any order);
``classify`` decides which ops may read which values so that the comparison contract
(``compare``: exact values bit for bit, the others within ``INEXACT_RTOL``) stays checkable.
See ``tests/test_fuzz.py`` for the contract in full. Needs ``hypothesis`` (a dev dependency).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from hypothesis import strategies as st

import minixla
import minixla.numpy as mnp
from minixla import lax as mlax
from minixla.fuzz import families, loops

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(d) for d in (np.float32, np.float32, np.int32, np.int8, np.uint8, np.bool_, np.float16)] + [BF16]
INEXACT_RTOL = {np.dtype(np.float32): 2e-5, np.dtype(np.float16): 4e-3, BF16: 3e-2}


# ---------------------------------------------------------------------------------------
# The op table: name -> (kind, how to apply it with np_/lax_).

def _is_float(dt):
    return np.dtype(dt).kind == "f" or np.dtype(dt) == BF16


UNARY_EXACT = ["negative", "abs", "square", "sqrt", "floor", "ceil", "rint", "trunc", "sign", "isnan", "isinf",
               "isfinite", "logical_not", "invert", "nan_to_num", "signbit"]
UNARY_INEXACT = ["exp", "log", "tanh", "expm1", "log1p", "exp2", "sigmoid"]
BINARY_EXACT = ["add", "subtract", "multiply", "true_divide", "maximum", "minimum", "floor_divide", "remainder",
                "fmod", "equal", "not_equal", "less", "greater_equal", "bitwise_and", "bitwise_or", "bitwise_xor",
                "left_shift", "right_shift", "logical_and", "logical_or"]
#: ops whose result jumps when the input moves by an ulp: they only read exact values.
DISCONTINUOUS = {"floor", "ceil", "rint", "trunc", "sign", "isnan", "isinf", "isfinite", "logical_not",
                 "nan_to_num", "signbit", "floor_divide", "remainder", "fmod", "equal", "not_equal", "less",
                 "greater_equal", "logical_and", "logical_or", "astype", "argmax", "argmin", "where", "at_set",
                 "getitem_traced", "invert", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift",
                 "right_shift", "round"}


#: more ops (name -> fn(np_, lax_, args, params)) that other modes draw: ``transforms.py``'s
EXTRA_OPS: dict = {}


def apply(np_, lax_, op, args, p):
    """Run one op spec with ``np_`` (jax.numpy or minixla.numpy) and ``lax_``."""
    if op in loops.OPS:
        return loops.OPS[op](np_, lax_, args, p)
    if op in families.OPS:
        return families.OPS[op](np_, lax_, args, p)
    if op in EXTRA_OPS:
        return EXTRA_OPS[op](np_, lax_, args, p)
    if op in UNARY_EXACT or op in UNARY_INEXACT:
        if op == "sigmoid":
            return lax_.logistic(np_.astype(args[0], np.float32) if not _is_float(args[0].dtype) else args[0])
        return getattr(np_, op)(args[0])
    if op in BINARY_EXACT:
        return getattr(np_, op)(args[0], args[1])
    if op == "scalar_op":
        return getattr(np_, p["fn"])(args[0], p["value"]) if p["left"] else getattr(np_, p["fn"])(p["value"], args[0])
    if op == "astype":
        return args[0].astype(p["dtype"])
    if op == "where":
        return np_.where(args[0], args[1], args[2])
    if op == "clip":
        return np_.clip(args[0], p["lo"], p["hi"])
    if op == "reduce":
        kw = dict(axis=p["axis"], keepdims=p["keepdims"])
        if np_ is jnp and p["fn"] == "mean":
            return _as_jax_runs_it(jnp.mean, args[0], **kw)
        return getattr(np_, p["fn"])(args[0], **kw)
    if op in ("argmax", "argmin"):
        return getattr(np_, op)(args[0], axis=p["axis"])
    if op == "cumulative":
        return getattr(np_, p["fn"])(args[0], axis=p["axis"])
    if op == "transpose":
        return np_.transpose(args[0], p["perm"])
    if op == "flip":
        return np_.flip(args[0], p["axis"])
    if op == "reshape":
        return np_.reshape(args[0], p["shape"])
    if op == "getitem":
        return args[0][p["index"]]
    if op == "getitem_traced":
        return args[0][args[1]]
    if op == "pad":
        return np_.pad(args[0], p["width"], constant_values=p["value"])
    if op == "concatenate":
        return np_.concatenate([args[0], args[1]], axis=p["axis"])
    if op == "broadcast":
        return np_.broadcast_to(args[0], p["shape"])
    if op == "expand_dims":
        return np_.expand_dims(args[0], p["axis"])
    if op == "matmul":
        return np_.matmul(args[0], args[1])
    if op == "at_set":
        return getattr(args[0].at[p["index"]], p["fn"])(args[1] if p["traced"] else p["value"])
    if op == "lax_rev":
        return lax_.rev(args[0], p["dims"])
    if op == "lax_pad":
        return lax_.pad(args[0], np.asarray(p["value"]).astype(args[0].dtype)[()], p["config"])
    if op == "lax_dynamic_slice":
        return lax_.dynamic_slice(args[0], p["start"], p["sizes"])
    if op == "lax_select_n":
        return lax_.select_n(args[0], args[1], args[2])
    if op == "var":
        if np_ is jnp:
            return _as_jax_runs_it(jnp.var, args[0], axis=p["axis"])
        return np_.var(args[0], axis=p["axis"])
    raise AssertionError(op)


def _as_jax_runs_it(fn, *args, **kwargs):
    """``fn`` (a jitted ``jax.numpy`` function: ``mean``, ``var``) as a JAX user gets it, even
    inside the reference's ``jax.disable_jit()``: XLA folds its division by the count into a
    multiply by the reciprocal (a scalar mean too), which op by op it would not."""
    with jax.disable_jit(False):
        return fn(*args, **kwargs)


def interpret(np_, lax_, program, inputs, outputs):
    """Run ``program`` on ``inputs`` with ``np_``/``lax_``; returns the tuple of ``outputs``."""
    if np_ is jnp:  # (a NumPy input, which a transformation may pass through unmapped, indexes as NumPy)
        inputs = [jnp.asarray(x) for x in inputs]
    vals = list(inputs)
    for op, arg_ids, p in program:
        vals.append(apply(np_, lax_, op, [vals[i] for i in arg_ids], p))
    return tuple(vals[i] for i in outputs)


# ---------------------------------------------------------------------------------------
# Inputs.

def nice_floats(rng, n, special_rate=0.15):
    """Small multiples of 1/4 (exact sums in any order) mixed with NaN, ±inf, -0.0."""
    v = rng.integers(-64, 65, n).astype(np.float64) / 4
    special = rng.random(n) < special_rate
    v[special] = rng.choice([np.nan, np.inf, -np.inf, -0.0, 0.0], special.sum())
    return v


def make_input(rng, shape, dtype, special_rate=0.15):
    """A random ``dtype[shape]`` array: nice floats (``special_rate`` of them NaN, ±inf, ±0.0),
    small integers with the type's extremes, or bools."""
    n = int(np.prod(shape))
    dtype = np.dtype(dtype)
    if _is_float(dtype):
        return nice_floats(rng, n, special_rate).astype(dtype).reshape(shape)
    if dtype == np.bool_:
        return (rng.random(n) < 0.5).reshape(shape)
    info = np.iinfo(dtype)
    v = rng.integers(-9, 10, n)
    special = rng.random(n) < 0.2
    v[special] = rng.choice([info.min, info.max, 0, -1 if info.min < 0 else 1], special.sum())
    return v.astype(dtype).reshape(shape)


shapes = st.lists(st.sampled_from([0, 1, 1, 2, 3, 5]), min_size=0, max_size=3).map(tuple)


# ---------------------------------------------------------------------------------------
# The program generator.

class Value:
    """A program value: its JAX eager ``ref``, whether it is ``exact`` and ``nice``, and ``tol``:
    None, or ``(rtol, floor, derivative_rtol)`` of a result whose error bound comes from a
    condition number (``families.py``): compared within ``rtol * (|want| + max(max|want|,
    floor))``, its derivatives within ``derivative_rtol`` (relative to the largest)."""
    def __init__(self, ref, exact, nice, tol=None):
        self.ref, self.exact, self.nice, self.tol = ref, exact, nice, tol
        self.shape, self.dtype = tuple(ref.shape), np.dtype(ref.dtype)


#: the op families (``families.FAMILIES``) ``draw_op`` also draws, one op in ``FAMILY_ODDS``;
#: empty (no extra draw at all: each seed keeps the program it had before the families) unless a
#: caller sets it (``python -m minixla.fuzz --families``, ``tests/test_fuzz_families.py``)
FAMILIES: tuple = ()
FAMILY_ODDS = 5
#: the ops that may read a value carrying a ``tol`` (they move its entries; the result keeps it)
TOL_SAFE = {"transpose", "flip", "reshape", "getitem", "lax_rev", "expand_dims", "broadcast", "concatenate",
            "pad", "lax_pad", "lax_dynamic_slice", "negative", "where", "lax_select_n"}


def draw_op(draw, vals):
    """One op spec over existing values (may be invalid: the caller then skips it)."""
    if FAMILIES and draw(st.integers(0, FAMILY_ODDS - 1)) == 0:
        return families.draw_family_op(draw, vals, FAMILIES)
    k = draw(st.integers(0, len(vals) - 1))
    x = vals[k]
    kind = draw(st.sampled_from(
        ["unary"] * 4 + ["inexact"] * 2 + ["binary"] * 6 + ["scalar_op"] * 2 + ["astype", "where", "clip",
         "reduce", "reduce", "argmax", "cumulative", "transpose", "flip", "reshape", "getitem", "getitem",
         "getitem_traced", "pad", "concatenate", "broadcast", "expand_dims", "matmul", "at_set", "lax_rev",
         "lax_pad", "lax_dynamic_slice", "lax_select_n", "var", "loop", "loop"]))
    nd = len(x.shape)
    same = [i for i, v in enumerate(vals) if v.shape == x.shape]
    if kind == "unary":
        return draw(st.sampled_from(UNARY_EXACT)), [k], {}
    if kind == "loop":
        return loops.draw_loop_op(draw, vals, k)
    if kind == "inexact":
        return draw(st.sampled_from(UNARY_INEXACT)), [k], {}
    if kind == "binary":
        other = draw(st.sampled_from(same + [i for i, v in enumerate(vals) if v.shape == ()]))
        return draw(st.sampled_from(BINARY_EXACT)), [k, other], {}
    if kind == "scalar_op":
        value = draw(st.sampled_from([0, 1, -1, 2, 3, 1000, 0.5, -2.5, 1.5, True]))
        fn = draw(st.sampled_from(["add", "subtract", "multiply", "maximum", "minimum", "floor_divide",
                                   "remainder", "less", "right_shift", "power"]))
        if fn == "power" and not (isinstance(value, int) and 0 <= value <= 3):
            value = 2
        return "scalar_op", [k], dict(fn=fn, value=value, left=draw(st.booleans()) or fn == "power")
    if kind == "astype":
        return "astype", [k], dict(dtype=draw(st.sampled_from(DTYPES)))
    if kind == "where":
        return "where", [k, draw(st.sampled_from(same)), draw(st.sampled_from(same))], {}
    if kind == "lax_select_n":
        pred = [i for i in same if vals[i].dtype == np.bool_]
        if not pred:
            return None
        a = draw(st.sampled_from(same))
        b = draw(st.sampled_from([i for i in same if vals[i].dtype == vals[a].dtype]))
        return "lax_select_n", [draw(st.sampled_from(pred)), a, b], {}
    if kind == "clip":
        return "clip", [k], dict(lo=draw(st.sampled_from([-1, 0, None])), hi=draw(st.sampled_from([2, 0.5, None])))
    axis_st = st.sampled_from([None] + list(range(-nd, nd))) if nd else st.just(None)
    if kind == "reduce":
        fn = draw(st.sampled_from(["sum", "prod", "max", "min", "mean", "any", "all"]))
        return "reduce", [k], dict(fn=fn, axis=draw(axis_st), keepdims=draw(st.booleans()))
    if kind == "var":
        return "var", [k], dict(axis=draw(axis_st))
    if kind == "argmax":
        return draw(st.sampled_from(["argmax", "argmin"])), [k], dict(axis=draw(axis_st))
    if kind == "cumulative":
        return "cumulative", [k], dict(fn=draw(st.sampled_from(["cumsum", "cumprod"])), axis=draw(axis_st))
    if kind == "transpose":
        return "transpose", [k], dict(perm=tuple(draw(st.permutations(range(nd)))))
    if kind in ("flip", "lax_rev"):
        dims = tuple(sorted(set(draw(st.lists(st.integers(0, max(nd - 1, 0)), max_size=nd)))))
        return ("flip", [k], dict(axis=dims)) if kind == "flip" else ("lax_rev", [k], dict(dims=dims if nd else ()))
    if kind == "reshape":
        size = int(np.prod(x.shape))
        options = [(size,), (-1,), (1, size), (size, 1)] + ([(x.shape[0], -1)] if nd else [])
        return "reshape", [k], dict(shape=draw(st.sampled_from(options)))
    if kind == "getitem":
        idx = []
        for d in x.shape:
            idx.append(draw(st.one_of(
                st.builds(slice, st.sampled_from([None, 0, 1, -1, -2]), st.sampled_from([None, 2, -1, 5]),
                          st.sampled_from([None, 1, 2, -1, -2])),
                st.integers(-d, d - 1) if d else st.just(slice(None)),
                st.just(None), st.just(Ellipsis),
                st.lists(st.integers(-d, d - 1), min_size=0, max_size=3).map(
                    lambda v: np.array(v, np.int32)) if d else st.just(slice(None)))))
        idx = [i for n, i in enumerate(idx) if not (i is Ellipsis and any(j is Ellipsis for j in idx[:n]))]
        return "getitem", [k], dict(index=tuple(idx))
    if kind == "getitem_traced":
        ints = [i for i, v in enumerate(vals) if v.dtype.kind in "iu" and len(v.shape) <= 2]
        if not ints or not nd:
            return None
        return "getitem_traced", [k, draw(st.sampled_from(ints))], {}
    if kind == "pad":
        width = draw(st.sampled_from([0, 1, (1, 2)]))
        return "pad", [k], dict(width=width, value=draw(st.sampled_from([0, 1.5, -1])))
    if kind == "lax_pad":
        config = [(draw(st.integers(-1, 2)), draw(st.integers(-1, 2)), draw(st.integers(0, 2))) for _ in x.shape]
        return "lax_pad", [k], dict(config=config, value=draw(st.sampled_from([0, 3, -1])))
    if kind == "lax_dynamic_slice":
        start = [draw(st.integers(-3, 6)) for _ in x.shape]
        sizes = [draw(st.integers(0, d)) for d in x.shape]
        return "lax_dynamic_slice", [k], dict(start=start, sizes=sizes)
    if kind == "concatenate":
        other = [i for i, v in enumerate(vals) if len(v.shape) == nd and nd]
        if not other:
            return None
        return "concatenate", [k, draw(st.sampled_from(other))], dict(axis=draw(st.integers(-nd, nd - 1)))
    if kind == "broadcast":
        return "broadcast", [k], dict(shape=(draw(st.sampled_from([0, 1, 2])),) + x.shape)
    if kind == "expand_dims":
        return "expand_dims", [k], dict(axis=draw(st.integers(-nd - 1, nd)))
    if kind == "matmul":
        other = [i for i, v in enumerate(vals) if v.shape and x.shape and v.shape[0] == x.shape[-1]]
        if not other:
            return None
        return "matmul", [k, draw(st.sampled_from(other))], {}
    if kind == "at_set":
        if not nd:
            return None
        fn = draw(st.sampled_from(["set", "add", "multiply", "min", "max"]))
        index = draw(st.sampled_from([0, -1, slice(None, None, 2), (Ellipsis, 0),
                                      np.array([0, 0, -1], np.int32), 7]))
        scalars = [i for i, v in enumerate(vals) if v.shape == ()]
        traced = bool(scalars) and draw(st.booleans())
        args = [k] + ([draw(st.sampled_from(scalars))] if traced else [])
        return "at_set", args, dict(fn=fn, index=index, value=draw(st.sampled_from([2, -1.5, 0])), traced=traced)
    return None


def classify(op, p, args):
    """(exact, nice) of an op's result from its arguments' flags; None if the op may not read them."""
    if op in loops.OPS:
        return loops.classify_loop(op, p, args)
    if op in families.OPS:
        return families.classify(op, p, args)
    exact = all(a.exact for a in args)
    nice = all(a.nice for a in args)
    floats = any(_is_float(a.dtype) for a in args)
    if op in DISCONTINUOUS or (op == "scalar_op" and p["fn"] in ("floor_divide", "remainder", "less",
                                                                  "right_shift")):
        if not exact:
            return None
    if op == "astype" and _is_float(p["dtype"]) and not exact:
        return None  # (float -> float is continuous, but keep it simple)
    if op in ("log", "log1p", "var") and not exact:
        # ill-conditioned: near 1 (resp. 0) an ulp of the input is any relative error of the
        # result (log(tanh(8)): XLA's tanh is 1.0, ours the correctly rounded 1 - 2^-22); the
        # variance of values an ulp apart (tanh(4.5), tanh(11.25)) is all rounding error
        return None
    if op in UNARY_INEXACT or op == "var":
        return False, False
    if op in ("reduce", "cumulative", "matmul") and floats:
        fn = p.get("fn")
        if fn in ("max", "min", "any", "all"):
            return exact, nice
        if not nice:
            return None
        if fn in ("prod", "cumprod"):
            shape = args[0].shape
            axis = p["axis"]
            n = int(np.prod(shape)) if axis is None else shape[axis]
            if n > 3:
                return None
        return exact, False
    data_movement = op in ("transpose", "flip", "reshape", "getitem", "getitem_traced", "pad", "lax_pad",
                           "concatenate", "broadcast", "expand_dims", "lax_rev", "lax_dynamic_slice", "where",
                           "lax_select_n", "negative", "abs", "maximum", "minimum", "clip", "argmax", "argmin",
                           "isnan", "isinf", "isfinite", "signbit", "sign", "logical_not")
    return exact, nice and data_movement


@st.composite
def programs(draw, dtypes=DTYPES, max_ops=30, special_rate=0.15, shape_strategy=None):
    """(inputs, number of ops, a Random): 1-3 inputs of random shapes (often one shared shape;
    drawn by ``shape_strategy``, default ``shapes``) and dtypes drawn from ``dtypes``, and up to
    ``max_ops`` ops for ``build`` to grow."""
    shapes_ = shapes if shape_strategy is None else shape_strategy
    n_in = draw(st.integers(1, 3))
    base = draw(shapes_)
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    inputs = []
    for _ in range(n_in):
        shape = base if draw(st.booleans()) else draw(shapes_)
        inputs.append(make_input(rng, shape, draw(st.sampled_from(dtypes)), special_rate))
    return inputs, draw(st.integers(1, max_ops)), draw(st.randoms(use_true_random=False))


def build(draw_data, inputs, n_ops, classify_op=None, draw_op_fn=None):
    """Grow a valid program op by op, evaluating each with JAX eager to learn its result.
    ``classify_op`` (default ``classify``) says which values each op may read and the
    flags of its result; a stricter one keeps a transformation's contract checkable.
    ``draw_op_fn`` (default ``draw_op``) draws an op spec."""
    classify_op = classify_op or classify
    draw_op_fn = draw_op_fn or draw_op
    vals = [Value(jnp.asarray(x), True, True) for x in inputs]
    program = []
    attempts = 0
    while len(program) < n_ops and attempts < 4 * n_ops:
        attempts += 1
        spec = draw_op_fn(draw_data, vals)
        if spec is None:
            continue
        op, ids, p = spec
        tols = [vals[i].tol for i in ids if vals[i].tol]
        if tols and op not in TOL_SAFE:
            continue
        flags = classify_op(op, p, [vals[i] for i in ids])
        if flags is None:
            continue
        if len(flags) == 2 and tols:
            flags = (*flags, tuple(max(t) for t in zip(*tols)))
        try:
            with jax.disable_jit(), np.errstate(all="ignore"):
                ref = apply(jnp, jax.lax, op, [vals[i].ref for i in ids], p)
        except Exception:
            continue  # an invalid combination for JAX: not part of the program
        if int(np.prod(ref.shape)) > 4096:
            continue
        program.append((op, ids, p))
        vals.append(Value(jnp.asarray(ref), *flags))
    return program, vals


def compare(name, got, want, exact, signed_zeros=True, rtol=None, atol=0.0):
    """Assert minixla's ``got`` equals JAX's ``want``: same dtype and shape; integers and bools
    equal; floats bit for bit where ``exact`` (the sign of zero too if ``signed_zeros``), else
    within ``rtol`` (default ``INEXACT_RTOL[dtype]``) relative plus ``atol`` and the dtype's
    smallest normal; NaN matches NaN. Raises ``AssertionError`` naming the first difference."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, \
        f"{name}: minixla {got.dtype}{got.shape} vs JAX {want.dtype}{want.shape}"
    if got.size == 0:
        return
    if not _is_float(got.dtype):
        bad = got != want
    else:
        g, w = got.astype(np.float64), want.astype(np.float64)
        nan = np.isnan(g) & np.isnan(w)
        if exact:
            bad = ~nan & ((g != w) | ((np.signbit(g) != np.signbit(w)) & signed_zeros))
        else:
            # Relative, plus the smallest normal number: XLA computes f16 logistic with f16
            # intermediates (sigmoid(-12) = 0 there, a subnormal 6e-6 here), and FTZ may differ.
            rtol = INEXACT_RTOL[got.dtype] if rtol is None else rtol
            tiny = float(ml_dtypes.finfo(got.dtype).tiny) + atol
            with np.errstate(invalid="ignore"):
                bad = ~nan & ~((g == w) | (np.abs(g - w) <= rtol * np.abs(w) + tiny))
    if bad.any():
        i = tuple(np.argwhere(bad)[0])
        raise AssertionError(f"{name}: {int(bad.sum())} of {got.size} differ; first at {i}: "
                             f"minixla {got[i]!r} vs JAX {want[i]!r} (exact={exact})")


def compare_value(name, got, want, value, backend):
    """``compare`` under ``value``'s contract (``Value.exact``, ``Value.tol``) on ``backend``
    (the JAX hand-off ignores the sign of zero: see ``tests/test_fuzz.py``)."""
    if value.tol is None or value.exact:
        compare(name, got, want, value.exact, signed_zeros=backend == "llvm")
        return
    rtol, floor, _ = value.tol
    w = np.abs(np.asarray(want, np.float64))
    w = w[np.isfinite(w)]
    compare(name, got, want, False, rtol=rtol, atol=rtol * max(float(w.max()) if w.size else 0.0, floor))


def describe(inputs, program, outputs=None) -> str:
    """A program as its op list (what a failing example prints)."""
    def show(p):  # (constant operands on one line)
        return {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in p.items()}
    note = "\n".join(f"  v{len(inputs) + j} = {op}{tuple(ids)} {show(p)}" for j, (op, ids, p) in enumerate(program))
    return (f"program over inputs {[(x.dtype.name, x.shape) for x in inputs]}:\n{note}"
            + (f"\noutputs {outputs}" if outputs is not None else ""))


def run_program(inputs, program, outputs, vals):
    """Compile the program with ``minixla.jit`` on both backends and ``compare`` each output
    with the JAX eager value ``build`` recorded."""
    def f(*xs):
        return interpret(mnp, mlax, program, xs, outputs)
    for backend in ("llvm", "jax"):
        got = minixla.jit(f, backend=backend)(*inputs)
        for j, (g, o) in enumerate(zip(got, outputs)):
            compare_value(f"[{backend}] output {j} (value {o})", g, vals[o].ref, vals[o], backend)
