"""A NumPy HLO evaluator (XLA's ``xla/hlo/evaluator/hlo_evaluator.cc``).

``evaluate(module_or_computation, *args)`` runs an ``HloModule`` (its entry) or one
``HloComputation`` instruction by instruction on NumPy arrays. Each opcode has one row in
``evaluate_rules``: ``rule(instr, *operand_values) -> np.ndarray`` (a ``tuple`` for ``tuple``).

The values are XLA's operation semantics, i.e. what JAX eager and both minixla backends
compute, not NumPy's where the two differ:

- integer ``divide`` truncates toward zero; ``x / 0`` is -1 (all ones when unsigned) and
  ``INT_MIN / -1`` is ``INT_MIN``; ``remainder`` has the dividend's sign, ``x % 0 == x`` and
  ``INT_MIN % -1 == 0``; integer arithmetic wraps;
- float ``maximum``/``minimum`` propagate NaN and order ``-0.0 < +0.0``;
- ``sign`` keeps ``±0.0`` and NaN; ``convert`` float -> int truncates, saturates and maps NaN
  to 0; anything -> ``pred`` is ``x != 0`` (so NaN -> true);
- ``pred`` ``add``/``multiply`` are ``or``/``and``.

Subnormal floats are flushed to zero in arithmetic (``FLUSH_DENORMALS``), as the LLVM backend,
XLA:CPU and JAX eager do on x86; data movement, ``negate``, ``abs`` and ``convert`` keep them.

Documented differences remain, and constant folding stays away from them: a result that
rounds up to the smallest normal number may be flushed by the hardware but not here; and
transcendental functions (``exponential``, ``log``, ``tanh``, ``logistic``, ``rsqrt``) and the
accumulation order of ``dot``/``convolution``/float ``reduce`` differ from the backends' by a
few ulp. Evaluating those opcodes is for tests and debugging, not for rewriting programs.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from minixla.core.errors import UnsupportedError
from minixla.hlo.scan import runs_as_scan, scan_axis

#: HLO opcode -> rule(instr, *operand_values) -> value
evaluate_rules: dict = {}


def evaluate(module_or_computation, *args):
    """Evaluate an ``HloModule`` (its entry computation) or an ``HloComputation``.

    Args:
      module_or_computation: the program.
      *args: one array per parameter, in ``parameter_number`` order, with the parameter's shape
        (they are converted to the parameter's dtype).
    Returns:
      The root's value: an ``np.ndarray``, or a ``tuple`` of them for a ``tuple`` root.
    Raises:
      TypeError: wrong number of arguments. ValueError: an argument of the wrong shape.
      UnsupportedError: an opcode with no row in ``evaluate_rules``.
    """
    comp = getattr(module_or_computation, "entry", module_or_computation)
    params = comp.parameters
    if len(args) != len(params):
        raise TypeError(f"evaluate: %{comp.name} takes {len(params)} arguments, got {len(args)}")
    values = []
    for p, a in zip(params, args):
        a = np.asarray(a, dtype=p.shape.dtype)
        if a.shape != p.shape.dims:
            raise ValueError(f"evaluate: parameter {p.parameter_number} (%{p.name}) has shape "
                             f"{p.shape}, got an array of shape {a.shape}")
        values.append(a)
    return evaluate_computation(comp, values)


def evaluate_computation(comp, args, batched: bool = False):
    """Evaluate ``comp`` on ``args`` (already arrays of the parameters' dtypes).

    ``batched=True`` evaluates a scalar computation (a reducer region) on arrays of scalars
    at once: the values keep the arguments' shape instead of the instructions' shapes.
    """
    env = {}
    for instr in comp.instructions:
        if instr.opcode == "parameter":
            env[instr] = args[instr.parameter_number]
        else:
            env[instr] = evaluate_instruction(instr, [env[o] for o in instr.operands], batched)
    return env[comp.root]


#: Flush subnormal floats to zero (operands and results of arithmetic), as XLA:CPU, JAX eager
#: and minixla's LLVM backend do on x86 (MXCSR FTZ/DAZ; see ``backends/llvm/kernels.py``).
FLUSH_DENORMALS = True
#: opcodes that move, select or re-sign bits without floating-point arithmetic: never flushed
#: (x86 flushes only in arithmetic; ``negate``/``abs`` are sign-bit operations and ``convert``
#: between float types keeps subnormals, as JAX eager shows).
NON_ARITHMETIC = {
    "parameter", "constant", "tuple", "iota", "broadcast", "reshape", "transpose", "slice", "reverse",
    "concatenate", "pad", "dynamic-slice", "dynamic-update-slice", "gather", "scatter", "select",
    "negate", "abs", "convert", "bitcast-convert", "is-finite", "fusion", "copy",
    "while", "conditional", "get-tuple-element", "opt-barrier",
}
#: float types whose arithmetic runs on the SSE/AVX units in their own format or in f32 with
#: the same exponent range (float16 is computed in f32, where its subnormals are normal).
_FLUSHED_TYPES = {"float32", "float64", "bfloat16"}


def flush_denormals(x):
    """``x`` with subnormal elements replaced by zero of the same sign (float32/64, bfloat16)."""
    x = np.asarray(x)
    if x.dtype.name not in _FLUSHED_TYPES or x.size == 0:
        return x
    tiny = ml_dtypes.finfo(x.dtype).smallest_normal  # (np.finfo rejects bfloat16)
    wide = x.astype(np.float64)
    sub = (wide != 0) & (np.abs(wide) < float(tiny))
    if not sub.any():
        return x
    return np.where(sub, np.copysign(np.zeros((), x.dtype), x), x).astype(x.dtype)


def _one_element_reduce(instr) -> bool:
    """A reduce of one element per output is data movement (simplifier rule A14), not arithmetic."""
    return instr.opcode == "reduce" and all(instr.operands[0].shape.dims[d] == 1 for d in instr.attrs["dimensions"])


def evaluate_instruction(instr, operand_values, batched: bool = False):
    """The value of one instruction given its operands' values."""
    rule = evaluate_rules.get(instr.opcode)
    if rule is None:
        raise UnsupportedError(f"HLO evaluator: no rule for opcode '{instr.opcode}' (%{instr.name})")
    flush = FLUSH_DENORMALS and instr.opcode not in NON_ARITHMETIC and not _one_element_reduce(instr)
    if flush:
        operand_values = [flush_denormals(v) for v in operand_values]
    with np.errstate(all="ignore"):  # wraparound, inf and NaN are the intended results
        out = rule(instr, *operand_values)
    if isinstance(out, tuple):
        return out
    out = np.asarray(out, dtype=instr.shape.dtype)
    if flush:
        out = flush_denormals(out)
    return out if batched else out.reshape(instr.shape.dims)


# ---------------------------------------------------------------------------------------
# Scalar semantics shared with constant folding.

def is_float(dtype) -> bool:
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2")


def is_signed_int(dtype) -> bool:
    return np.dtype(dtype).kind == "i"


def _all_ones(dtype):
    dtype = np.dtype(dtype)
    return np.iinfo(dtype).max if dtype.kind == "u" else -1


def int_divide(a, b):
    """Truncating integer division with XLA's answers for ``x/0`` and ``INT_MIN/-1``."""
    dtype = a.dtype
    by_zero = b == 0
    safe = np.where(by_zero, np.ones_like(b), b)
    if is_signed_int(dtype):
        overflow = (a == np.iinfo(dtype).min) & (b == -1)
        safe = np.where(overflow, np.ones_like(b), safe)
    q = a // safe  # floors; fix up to truncate toward zero
    if is_signed_int(dtype):
        q = np.where((a % safe != 0) & ((a < 0) != (safe < 0)), q + 1, q)
    return np.where(by_zero, np.asarray(_all_ones(dtype), dtype), q).astype(dtype)


def int_remainder(a, b):
    """Integer remainder with the dividend's sign; ``x % 0 == x``, ``INT_MIN % -1 == 0``."""
    by_zero = b == 0
    safe = np.where(by_zero, np.ones_like(b), b)
    if is_signed_int(a.dtype):
        safe = np.where((a == np.iinfo(a.dtype).min) & (b == -1), np.ones_like(b), safe)
    r = np.fmod(a, safe)
    return np.where(by_zero, a, r).astype(a.dtype)


def _xla_nan_bits(a, b, r, is_max):
    """``r`` with XLA:CPU's NaN bits (as the LLVM backend's ``scalar_ops.xla_max_min``): a NaN
    ``a`` as it is; else a NaN ``b`` with its sign bit and-ed (max) / or-ed (min) with ``a``'s;
    bf16 NaNs then narrowed from f32 (the quiet NaN of their sign)."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    bits = np.dtype(f"u{a.dtype.itemsize}")
    ai, bi = a.view(bits), b.view(bits)
    sign = bits.type(1 << (8 * a.dtype.itemsize - 1))
    nan_b = (bi & (ai | ~sign)) if is_max else (bi | (ai & sign))
    nan_a, isnan_b = np.isnan(a.astype(np.float32)), np.isnan(b.astype(np.float32))
    out = np.where(nan_a, a, np.where(isnan_b, nan_b.view(a.dtype), r))
    if a.dtype.name == "bfloat16":  # computed in f32 and narrowed: a NaN loses its payload
        with np.errstate(invalid="ignore"):
            out = out.astype(np.float32).astype(a.dtype)
    return out


def float_max(a, b):
    """IEEE-754 2019 ``maximum``: NaN propagates (XLA:CPU's bits), ``-0.0 < +0.0``."""
    r = np.maximum(a, b)
    zeros = (a == 0) & (b == 0)
    return _xla_nan_bits(a, b, np.where(zeros, np.where(np.signbit(a), b, a), r), True)


def float_min(a, b):
    """IEEE-754 2019 ``minimum``: NaN propagates (XLA:CPU's bits), ``-0.0 < +0.0``."""
    r = np.minimum(a, b)
    zeros = (a == 0) & (b == 0)
    return _xla_nan_bits(a, b, np.where(zeros, np.where(np.signbit(a), a, b), r), False)


def convert(x, dst):
    """XLA ``convert``: float -> int truncates, saturates, NaN -> 0; x -> pred is ``x != 0``;
    int -> int wraps; float -> float rounds to nearest even."""
    dst = np.dtype(dst)
    x = np.asarray(x)
    if x.dtype == dst:
        return x
    if dst == np.bool_:
        return x != 0
    if is_float(x.dtype) and dst.kind in "iu":
        info = np.iinfo(dst)
        t = np.trunc(x.astype(np.float64))
        hi = float(info.max) + 1.0  # 2**k, exact in float64
        lo = float(info.min)
        too_big, too_small, nan = t >= hi, t < lo, np.isnan(t)
        inside = np.where(too_big | too_small | nan, 0.0, t).astype(dst)
        return np.where(too_big, info.max, np.where(too_small, info.min, inside)).astype(dst)
    return x.astype(dst)


# ---------------------------------------------------------------------------------------
# Rules.

def _binary(float_fn, int_fn=None, bool_fn=None):
    def rule(instr, a, b):
        if a.dtype == np.bool_ and bool_fn is not None:
            return bool_fn(a, b)
        if is_float(a.dtype):
            return float_fn(a, b)
        return (int_fn or float_fn)(a, b)
    return rule


evaluate_rules.update({
    "add": _binary(np.add, bool_fn=np.logical_or),
    "subtract": _binary(np.subtract),
    "multiply": _binary(np.multiply, bool_fn=np.logical_and),
    "divide": _binary(np.divide, int_divide),
    "remainder": _binary(np.fmod, int_remainder),
    "maximum": _binary(float_max, np.maximum),
    "minimum": _binary(float_min, np.minimum),
    "and": lambda instr, a, b: np.bitwise_and(a, b),
    "or": lambda instr, a, b: np.bitwise_or(a, b),
    "xor": lambda instr, a, b: np.bitwise_xor(a, b),
    "power": lambda instr, a, b: np.power(a, b),
    "atan2": lambda instr, a, b: np.arctan2(a, b),
})


def _sign(instr, x):
    if is_float(x.dtype):  # sign(±0.0) = ±0.0, sign(NaN) = NaN
        return np.where((x == 0) | np.isnan(x), x, np.sign(x))
    return np.sign(x)


def _logistic(instr, x):
    one = np.ones((), x.dtype)
    return one / (one + np.exp(-x))


evaluate_rules.update({
    "negate": lambda instr, x: np.negative(x),
    "abs": lambda instr, x: np.abs(x),
    "sign": _sign,
    "floor": lambda instr, x: np.floor(x),
    "ceil": lambda instr, x: np.ceil(x),
    "exponential": lambda instr, x: np.exp(x),
    "log": lambda instr, x: np.log(x),
    "tanh": lambda instr, x: np.tanh(x),
    "logistic": _logistic,
    "sqrt": lambda instr, x: np.sqrt(x),
    "rsqrt": lambda instr, x: np.ones((), x.dtype) / np.sqrt(x),
    "not": lambda instr, x: np.logical_not(x) if x.dtype == np.bool_ else np.invert(x),
    "convert": lambda instr, x: convert(x, instr.shape.dtype),
    "select": lambda instr, p, t, f: np.where(p, t, f),
    "tuple": lambda instr, *xs: tuple(xs),
    "constant": lambda instr: np.asarray(instr.literal, dtype=instr.shape.dtype),
})

_COMPARE = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
            "GT": np.greater, "GE": np.greater_equal}
evaluate_rules["compare"] = lambda instr, a, b: _COMPARE[instr.attrs["direction"]](a, b)


def _broadcast(instr, x):
    dims = tuple(instr.attrs["dimensions"])
    out_dims = instr.shape.dims
    # Put the operand's dims in output order, then insert the new (size-1) dims and expand.
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    x = np.transpose(x, order)
    kept = sorted(dims)
    shape = [out_dims[d] if d in kept else 1 for d in range(len(out_dims))]
    return np.broadcast_to(x.reshape(shape), out_dims)


def _slice(instr, x):
    return x[tuple(slice(s, l, st) for s, l, st in instr.attrs["slice"])]


def _iota(instr):
    dims, d = instr.shape.dims, instr.attrs["iota_dimension"]
    shape = [1] * len(dims)
    shape[d] = dims[d]
    return np.broadcast_to(np.arange(dims[d]).astype(instr.shape.dtype).reshape(shape), dims)


evaluate_rules.update({
    "broadcast": _broadcast,
    "reshape": lambda instr, x: np.reshape(x, instr.shape.dims),
    "transpose": lambda instr, x: np.transpose(x, instr.attrs["dimensions"]),
    "slice": _slice,
    "iota": _iota,
    "fusion": lambda instr, *xs: evaluate_computation(instr.fused_computation, list(xs)),
})

_UFUNC_REDUCERS = {"add": np.add, "multiply": np.multiply, "and": np.bitwise_and,
                   "or": np.bitwise_or, "maximum": np.maximum, "minimum": np.minimum}


def _reduce(instr, x, init):
    region = instr.called[0]
    axes = tuple(instr.attrs["dimensions"])
    keep = [d for d in range(x.ndim) if d not in axes]
    x = np.transpose(x, keep + list(axes)).reshape([x.shape[d] for d in keep] + [-1])
    if x.shape[-1] == 1:  # one element per output: XLA drops the init (simplifier rule A14)
        return x[..., 0]
    root = region.root
    simple = (root.opcode in _UFUNC_REDUCERS and len(region.instructions) == 3
              and all(o.opcode == "parameter" for o in root.operands))
    if x.dtype == np.bool_ and root.opcode in ("add", "or", "maximum"):
        return np.logical_or(init, np.any(x, axis=-1))
    if x.dtype == np.bool_ and root.opcode in ("multiply", "and", "minimum"):
        return np.logical_and(init, np.all(x, axis=-1))
    if simple and not (is_float(x.dtype) and root.opcode in ("maximum", "minimum")):
        ufunc = _UFUNC_REDUCERS[root.opcode]
        acc = np.broadcast_to(init, x.shape[:-1]).astype(x.dtype)
        return ufunc(acc, ufunc.reduce(x, axis=-1)) if x.shape[-1] else acc
    # Any other region: fold it over the reduced elements, vectorized over the kept dims.
    acc = np.broadcast_to(init, x.shape[:-1]).astype(x.dtype)
    for k in range(x.shape[-1]):
        acc = evaluate_computation(region, [acc, x[..., k]], batched=True)
    return acc


evaluate_rules["reduce"] = _reduce


def _dot(instr, a, b):
    at = instr.attrs
    lb, lc = list(at["lhs_batch_dims"]), list(at["lhs_contracting_dims"])
    rb, rc = list(at["rhs_batch_dims"]), list(at["rhs_contracting_dims"])
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    ls = [next(letters) for _ in range(a.ndim)]
    rs = [next(letters) for _ in range(b.ndim)]
    for i, j in zip(lb + lc, rb + rc):
        rs[j] = ls[i]
    out = ([ls[i] for i in lb] + [ls[i] for i in range(a.ndim) if i not in lb + lc]
           + [rs[j] for j in range(b.ndim) if j not in rb + rc])
    spec = f"{''.join(ls)},{''.join(rs)}->{''.join(out)}"
    if is_float(instr.shape.dtype):  # accumulate in float64, round once
        return np.einsum(spec, a.astype(np.float64), b.astype(np.float64))
    return np.einsum(spec, a, b)


evaluate_rules["dot"] = _dot


def _conv(instr, lhs, rhs):
    from minixla.hlo.lowering import parse_dim_labels
    dn = parse_dim_labels(instr.attrs["dim_labels"])
    w = instr.attrs["window"]
    groups = instr.attrs.get("feature_group_count", 1)
    acc_t = np.float64 if is_float(instr.shape.dtype) else instr.shape.dtype
    x = np.transpose(lhs, dn.lhs_spec).astype(acc_t)   # N, C, spatial...
    k = np.transpose(rhs, dn.rhs_spec).astype(acc_t)   # O, I, spatial...
    nsp = x.ndim - 2
    for d in range(nsp):  # lhs dilation: insert zeros between input elements
        s = w["lhs_dilate"][d]
        if s > 1 and x.shape[2 + d] > 0:
            shape = list(x.shape)
            shape[2 + d] = (x.shape[2 + d] - 1) * s + 1
            y = np.zeros(shape, acc_t)
            idx = [slice(None)] * x.ndim
            idx[2 + d] = slice(None, None, s)
            y[tuple(idx)] = x
            x = y
    for d, (lo, hi) in enumerate(w["pad"]):  # padding, negative padding crops
        pad = [(0, 0)] * x.ndim
        pad[2 + d] = (max(lo, 0), max(hi, 0))
        x = np.pad(x, pad)
        idx = [slice(None)] * x.ndim
        idx[2 + d] = slice(max(-lo, 0), x.shape[2 + d] - max(-hi, 0))
        x = x[tuple(idx)]
    n, c = x.shape[:2]
    o, ci = k.shape[:2]
    out_sp = []
    for d in range(nsp):
        span = (k.shape[2 + d] - 1) * w["rhs_dilate"][d] + 1
        out_sp.append(max((x.shape[2 + d] - span) // w["stride"][d] + 1, 0))
    out = np.zeros((n, o) + tuple(out_sp), acc_t)
    og = o // groups
    for g in range(groups):
        xg = x[:, g * ci:(g + 1) * ci]
        kg = k[g * og:(g + 1) * og]
        for pos in np.ndindex(*k.shape[2:]):
            idx = [slice(None), slice(None)]
            for d, p in enumerate(pos):
                start = p * w["rhs_dilate"][d]
                idx.append(slice(start, start + (out_sp[d] - 1) * w["stride"][d] + 1, w["stride"][d])
                           if out_sp[d] else slice(0, 0))
            window = xg[tuple(idx)]
            out[:, g * og:(g + 1) * og] += np.einsum("nc...,oc->no...", window,
                                                     kg[(slice(None), slice(None)) + pos])
    inverse = np.argsort(dn.out_spec)
    return np.transpose(out, inverse)


evaluate_rules["convolution"] = _conv


# ---------------------------------------------------------------------------------------
# Rows for the rest of the lax surface (issue 3).

def _via_f64(fn):
    """A float function computed in float64 (libm's accuracy) and rounded to the dtype."""
    def rule(instr, *xs):
        return np.asarray(fn(*[np.asarray(x, np.float64) for x in xs])).astype(instr.shape.dtype)
    return rule


_erf = np.vectorize(__import__("math").erf, otypes=[np.float64])
_erfc = np.vectorize(__import__("math").erfc, otypes=[np.float64])


def _round_afz(instr, x):
    a = np.abs(x)
    fl = np.floor(a)
    r = np.where(a - fl >= 0.5, fl + 1, fl)  # a - floor(a) is exact
    return np.copysign(r, x).astype(x.dtype)


def _shift(kind):
    def rule(instr, x, y):
        bits = 8 * x.dtype.itemsize
        unsigned = np.dtype(f"u{x.dtype.itemsize}")
        amount = y.astype(unsigned)
        ok = amount < bits
        safe = np.where(ok, amount, 0).astype(x.dtype)
        if kind == "left":
            return np.where(ok, np.left_shift(x, safe), 0).astype(x.dtype)
        if kind == "logical":
            r = np.right_shift(x.view(unsigned), safe.view(unsigned)).view(x.dtype)
            return np.where(ok, r, 0).astype(x.dtype)
        fill = np.where(x < 0, -1, 0) if x.dtype.kind == "i" else 0
        return np.where(ok, np.right_shift(x, safe), fill).astype(x.dtype)
    return rule


def _clamp(instr, lo, x, hi):
    if is_float(x.dtype):
        return float_min(float_max(lo, x), hi)  # XLA:CPU's operand order (its NaN bits)
    return np.minimum(np.maximum(x, lo), hi)


def _pad(instr, x, value):
    cfg = instr.attrs["padding_config"]
    out = np.full(instr.shape.dims, value, x.dtype)
    if x.size == 0:
        return out
    # Place x on the interior-dilated grid of a big enough buffer, then crop the negative pads.
    big = [lo_pos + n + (n - 1) * i + hi_pos for n, (lo, hi, i), lo_pos, hi_pos in
           zip(x.shape, cfg, [builtins_max(lo, 0) for lo, _, _ in cfg], [builtins_max(hi, 0) for _, hi, _ in cfg])]
    buf = np.full(big, value, x.dtype)
    buf[tuple(slice(builtins_max(lo, 0), builtins_max(lo, 0) + (n - 1) * (i + 1) + 1, i + 1)
              for n, (lo, _, i) in zip(x.shape, cfg))] = x
    crop = tuple(slice(builtins_max(-lo, 0), b - builtins_max(-hi, 0)) for b, (lo, hi, _) in zip(big, cfg))
    return buf[crop]


def builtins_max(a, b):
    return a if a > b else b


def _clamped_starts(idx, dims, sizes):
    return [int(np.clip(int(i), 0, d - s)) for i, d, s in zip(idx, dims, sizes)]


def _dynamic_slice(instr, x, *idx):
    sizes = instr.attrs["dynamic_slice_sizes"]
    st = _clamped_starts(idx, x.shape, sizes)
    return x[tuple(slice(s, s + n) for s, n in zip(st, sizes))]


def _dynamic_update_slice(instr, x, u, *idx):
    st = _clamped_starts(idx, x.shape, u.shape)
    out = x.copy()
    out[tuple(slice(s, s + n) for s, n in zip(st, u.shape))] = u
    return out


def _gather(instr, x, indices):
    a = instr.attrs
    offset_dims, collapsed = a["offset_dims"], a["collapsed_slice_dims"]
    start_map, sizes = a["start_index_map"], a["slice_sizes"]
    out = np.empty(instr.shape.dims, x.dtype)
    window_dims = [d for d in range(x.ndim) if d not in collapsed]
    for pos in np.ndindex(*instr.shape.dims):
        batch = [v for d, v in enumerate(pos) if d not in offset_dims]
        offs = [pos[d] for d in offset_dims]
        start = [0] * x.ndim
        for k, d in enumerate(start_map):
            start[d] = int(np.clip(int(indices[tuple(batch) + (k,)]), 0, x.shape[d] - sizes[d]))
        src = list(start)
        for d, o in zip(window_dims, offs):
            src[d] += o
        out[pos] = x[tuple(src)]
    return out


def _scatter(instr, x, indices, updates):
    a = instr.attrs
    uw, inserted, to_op = a["update_window_dims"], a["inserted_window_dims"], a["scatter_dims_to_operand_dims"]
    region = instr.called[0]
    out = x.copy()
    window_dims = [d for d in range(x.ndim) if d not in inserted]
    size = [1] * x.ndim
    for d, u in zip(window_dims, uw):
        size[d] = updates.shape[u]
    for pos in np.ndindex(*updates.shape):
        scat = [v for d, v in enumerate(pos) if d not in uw]
        start = [0] * x.ndim
        for k, d in enumerate(to_op):
            start[d] = int(indices[tuple(scat) + (k,)])
        if any(s < 0 or s > n - w for s, n, w in zip(start, x.shape, size)):
            continue  # the whole window is dropped
        dst = list(start)
        for d, u in zip(window_dims, uw):
            dst[d] += pos[u]
        dst = tuple(dst)
        out[dst] = evaluate_computation(region, [np.asarray(out[dst]), np.asarray(updates[pos])])
    return out


def _scan(instr, x, init, axis, reverse):
    """A prefix (suffix) reduce-window in O(n): the reducer applied in window order,
    ``((init . x0) . x1) . ...``, so the values are those of the window-by-window loop."""
    region = instr.called[0]
    x = np.flip(x, axis) if reverse else x
    root = region.root
    simple = (root.opcode in _UFUNC_REDUCERS and len(region.instructions) == 3
              and all(o.opcode == "parameter" for o in root.operands))
    out = None
    numeric = np.issubdtype(x.dtype, np.integer) or x.dtype in (np.float16, np.float32, np.float64)
    if simple and numeric and not (is_float(x.dtype) and root.opcode in ("maximum", "minimum")):
        # ufunc.accumulate is sequential; starting it at ``init`` keeps its first step.
        head = np.broadcast_to(np.asarray(init, x.dtype), x.shape[:axis] + (1,) + x.shape[axis + 1:])
        with np.errstate(all="ignore"):
            out = _UFUNC_REDUCERS[root.opcode].accumulate(np.concatenate([head, x], axis), axis=axis,
                                                          dtype=x.dtype)
        out = np.take(out, np.arange(1, x.shape[axis] + 1), axis=axis)
        if is_float(x.dtype) and x.dtype != np.float16 and FLUSH_DENORMALS:
            tiny = np.finfo(x.dtype).tiny
            if np.any((out != 0) & (np.abs(out) < tiny)) or np.any((x != 0) & (np.abs(x) < tiny)):
                out = None  # a subnormal partial result: each step must be flushed, as below
    if out is None:  # any other region (float max/min: NaN rules; bool): one batched step per position
        out = np.empty(x.shape, x.dtype)
        acc = np.broadcast_to(init, x.shape[:axis] + x.shape[axis + 1:]).astype(x.dtype)
        for k in range(x.shape[axis]):
            acc = evaluate_computation(region, [acc, np.take(x, k, axis=axis)], batched=True)
            out[(slice(None),) * axis + (k,)] = acc
    return np.flip(out, axis) if reverse else out


def _reduce_window(instr, x, init):
    if runs_as_scan(instr):
        return _scan(instr, x, init, *scan_axis(instr))
    # Window tap by tap over all outputs at once, in the window's row-major order (the order of
    # the window-by-window loop): a tap landing in the padding or in a hole of the base dilation
    # is skipped (the accumulator is kept), as XLA's loop skips it.
    w = instr.attrs["window"]
    region = instr.called[0]
    out_dims = tuple(instr.shape.dims)
    acc = np.broadcast_to(np.asarray(init, x.dtype), out_dims).copy()
    if acc.size == 0 or x.size == 0:
        return acc
    grids = np.meshgrid(*[np.arange(n) for n in out_dims], indexing="ij")
    for k in np.ndindex(*w["size"]):
        valid = np.ones(out_dims, bool)
        index = []
        for d, (g, n) in enumerate(zip(grids, x.shape)):
            p = g * w["stride"][d] + k[d] * w["rhs_dilate"][d] - w["pad"][d][0]  # in the dilated operand
            b = w["lhs_dilate"][d]
            valid &= (p >= 0) & (p <= (n - 1) * b) & (p % b == 0)
            index.append(np.clip(p // b, 0, n - 1))
        if valid.any():
            step = evaluate_computation(region, [acc, x[tuple(index)]], batched=True)
            acc = np.where(valid, step, acc).astype(x.dtype)
    return acc


def _bitcast_convert(instr, x):
    return np.ascontiguousarray(x).view(instr.shape.dtype)


evaluate_rules.update({
    "exponential-minus-one": _via_f64(np.expm1), "log-plus-one": _via_f64(np.log1p),
    "cbrt": _via_f64(np.cbrt), "sine": _via_f64(np.sin), "cosine": _via_f64(np.cos),
    "tan": _via_f64(np.tan), "erf": _via_f64(_erf), "erfc": _via_f64(_erfc),
    "is-finite": lambda instr, x: np.isfinite(x),
    "round-nearest-afz": _round_afz,
    "round-nearest-even": lambda instr, x: np.round(x),
    "shift-left": _shift("left"), "shift-right-logical": _shift("logical"),
    "shift-right-arithmetic": _shift("arithmetic"),
    "clamp": _clamp, "bitcast-convert": _bitcast_convert,
    "reverse": lambda instr, x: np.flip(x, tuple(instr.attrs["dimensions"])),
    "pad": _pad,
    "concatenate": lambda instr, *xs: np.concatenate(xs, instr.attrs["dimensions"][0]),
    "dynamic-slice": _dynamic_slice, "dynamic-update-slice": _dynamic_update_slice,
    "gather": _gather, "scatter": _scatter, "reduce-window": _reduce_window,
})


# ---------------------------------------------------------------------------------------
# minixla.random's ``fma`` (issue 14): one rounding. NumPy has no fused multiply-add; XLA's
# (through JAX) is the reference the primitive's eager implementation uses too.

_fma_jit = []


def _fma(instr, a, b, c):
    if not _fma_jit:
        import jax
        _fma_jit.append(jax.jit(lambda a, b, c: a * b + c))
    return np.asarray(_fma_jit[0](a, b, c)).astype(instr.shape.dtype)


evaluate_rules["fma"] = _fma


# ---------------------------------------------------------------------------------------
# sort (issue 14): a stable lexicographic sort by JAX's comparator (minixla.lax.sorting).

def sort_keys_as_uint(x: np.ndarray) -> np.ndarray:
    """Unsigned integers in the order JAX's sort comparator gives ``x``: floats with -0.0 = 0.0,
    every NaN one value above inf and (XLA:CPU reads denormals as zero) f32/f64/bf16
    denormals = 0; signed integers offset by 2**(bits-1). The LLVM sort kernel makes the same keys."""
    dt = x.dtype
    if dt == np.bool_:
        return x.astype(np.uint8)
    bits = 8 * dt.itemsize
    u = np.ascontiguousarray(x).view(np.dtype(f"u{dt.itemsize}"))
    sign = np.asarray(1 << (bits - 1), u.dtype)
    if dt.kind in "iu":
        return u ^ sign if dt.kind == "i" else u
    nexp = {2: 5 if dt == np.float16 else 8, 4: 8, 8: 11}[dt.itemsize]
    nmant = bits - 1 - nexp
    mag = u & np.asarray((1 << (bits - 1)) - 1, u.dtype)
    exp_all = np.asarray(((1 << nexp) - 1) << nmant, u.dtype)
    small = mag == 0 if dt == np.float16 else mag < np.asarray(1 << nmant, u.dtype)
    u = np.where(small, np.asarray(0, u.dtype), u)
    u = np.where(mag > exp_all, exp_all | np.asarray(1 << (nmant - 1), u.dtype), u)
    return np.where(u & sign, ~u, u | sign)


def _sort(instr, *xs):
    (d,), k, j = instr.attrs["dimensions"], instr.attrs["num_keys"], instr.attrs["result_index"]
    keys = [np.moveaxis(sort_keys_as_uint(np.asarray(x)), d, -1) for x in xs[:k]]
    perm = np.lexsort(keys[::-1], axis=-1)  # (np.lexsort's last key is the primary one)
    return np.ascontiguousarray(np.moveaxis(np.take_along_axis(np.moveaxis(np.asarray(xs[j]), d, -1), perm, -1), -1, d))


evaluate_rules["sort"] = _sort
NON_ARITHMETIC.add("sort")  # it moves bits (its comparator reads denormals as zero, the data keeps them)


# Control flow: tuples, ``while`` and ``conditional`` run their called computations.

def _get_tuple_element(instr, t):
    return t[instr.attrs["index"]]


def _while(instr, state):
    cond, body = instr.called
    while bool(evaluate_computation(cond, [state])):
        state = evaluate_computation(body, [state])
    return state


def _conditional(instr, index, *operands):
    """A ``pred`` index runs ``called[0]`` (true) or ``called[1]``; an ``s32`` index out of
    ``[0, n)`` runs the last branch (XLA's semantics)."""
    if index.dtype == np.bool_:
        k = 0 if bool(index) else 1
    else:
        k = int(index)
        k = k if 0 <= k < len(instr.called) else len(instr.called) - 1
    return evaluate_computation(instr.called[k], [operands[k]])


evaluate_rules["get-tuple-element"] = _get_tuple_element
evaluate_rules["while"] = _while
evaluate_rules["conditional"] = _conditional
evaluate_rules["opt-barrier"] = lambda instr, t: t  # (optimization_barrier: the values pass)


# ---------------------------------------------------------------------------------------
# SPMD: one per-device program on N virtual devices, in lockstep (the reference semantics of
# the collectives; the LLVM and hand-off executors must agree with it).

def _reduce_values(reducer, values):
    from functools import reduce as fold
    return fold(lambda a, b: evaluate_computation(reducer, [a, b], batched=True), values)


def _collective(instr, vals):
    """Values of collective ``instr`` on every device given each device's operand value."""
    n = len(vals)
    code = instr.opcode
    if code == "collective-permute":
        out = [np.zeros_like(v) for v in vals]
        for s, t in instr.attrs["source_target_pairs"]:
            out[t] = vals[s]
        return out
    out = [None] * n
    for g in instr.attrs["replica_groups"]:
        members = [vals[d] for d in g]
        if code == "all-reduce":
            r = np.asarray(_reduce_values(instr.called[0], members), instr.shape.dtype)
            res = [r] * len(g)
        elif code == "all-gather":
            res = [np.concatenate(members, axis=instr.attrs["dimensions"][0])] * len(g)
        elif code == "reduce-scatter":
            r = np.asarray(_reduce_values(instr.called[0], members), instr.shape.dtype)
            res = np.split(r, len(g), axis=instr.attrs["dimensions"][0])
        elif code == "all-to-all":
            dim = instr.attrs["dimensions"][0]
            chunks = [np.split(m, len(g), axis=dim) for m in members]
            res = [np.concatenate([chunks[src][k] for src in range(len(g))], axis=dim)
                   for k in range(len(g))]
        else:
            raise UnsupportedError(f"HLO evaluator: no rule for collective '{code}'")
        for d, r in zip(g, res):
            out[d] = np.asarray(r, instr.shape.dtype).reshape(instr.shape.dims)
    if any(v is None for v in out):
        missing = [d for d in range(n) if out[d] is None]
        raise ValueError(f"%{instr.name}: devices {missing} are in no replica group of {code}")
    return out


def evaluate_spmd(module, per_device_args, num_partitions: int | None = None) -> list:
    """Run an SPMD per-device ``module`` (the SPMD partitioner's output) on ``num_partitions``
    virtual devices, in lockstep: every instruction is evaluated on every device before the
    next, so a collective sees every device's operand.

    Args:
      module: a per-device ``HloModule`` (collectives, ``partition-id``).
      per_device_args: one list of arguments per device (the local shards).
      num_partitions: the number of devices (default ``len(per_device_args)``).
    Returns:
      One root value per device.
    Raises:
      ValueError: a wrong number of devices or argument shapes; UnsupportedError as ``evaluate``.
    """
    from minixla.hlo.collectives import COLLECTIVE_OPCODES
    n = num_partitions or len(per_device_args)
    if len(per_device_args) != n:
        raise ValueError(f"evaluate_spmd: {n} partitions but {len(per_device_args)} argument lists")
    comp = module.entry
    params = comp.parameters
    envs = []
    for d, args in enumerate(per_device_args):
        if len(args) != len(params):
            raise TypeError(f"evaluate_spmd: %{comp.name} takes {len(params)} arguments, "
                            f"device {d} got {len(args)}")
        env = {}
        for p, a in zip(params, args):
            a = np.asarray(a, dtype=p.shape.dtype)
            if a.shape != p.shape.dims:
                raise ValueError(f"evaluate_spmd: device {d} parameter {p.parameter_number} "
                                 f"(%{p.name}) has shape {p.shape}, got {a.shape}")
            env[p] = a
        envs.append(env)
    for instr in comp.instructions:
        if instr.opcode == "parameter":
            continue
        if instr.opcode in COLLECTIVE_OPCODES:
            outs = _collective(instr, [env[instr.operands[0]] for env in envs])
            for env, v in zip(envs, outs):
                env[instr] = v
        elif instr.opcode == "partition-id":
            for d, env in enumerate(envs):
                env[instr] = np.asarray(d, np.uint32)
        else:
            for env in envs:
                env[instr] = evaluate_instruction(instr, [env[o] for o in instr.operands])
    return [env[comp.root] for env in envs]


def _single_device_collective(instr, x):
    """A collective evaluated by ``evaluate`` (one device): legal only when every group is
    that one device; the multi-device semantics live in ``evaluate_spmd``."""
    pairs = instr.attrs.get("source_target_pairs")
    groups = instr.attrs.get("replica_groups", ((0,),))
    if pairs is not None:
        return x if (0, 0) in pairs else np.zeros_like(x)
    if any(len(g) != 1 for g in groups):
        raise UnsupportedError(f"HLO evaluator: %{instr.name} ({instr.opcode} over groups "
                               f"{groups}) needs several devices: use evaluate_spmd")
    return _collective(instr, [x])[0]


for _op in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute"):
    evaluate_rules[_op] = _single_device_collective
evaluate_rules["partition-id"] = lambda instr: np.asarray(0, np.uint32)
NON_ARITHMETIC |= {"all-gather", "all-to-all", "collective-permute", "partition-id"}
# A "Sharding" custom-call (issue 17) says how the value is laid out over devices: one
# evaluator holds the whole value, so it is the identity.
evaluate_rules["custom-call"] = lambda instr, x: x
NON_ARITHMETIC.add("custom-call")
