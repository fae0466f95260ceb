"""Op families the differential fuzzer draws besides ``programs.py``'s elementwise, structural
and reduction ops: linear algebra (``lax.linalg`` and ``numpy.linalg``), ``random``
(threefry keys from drawn seeds or from program data) and sorting (``sort``, ``argsort``,
multi-operand ``lax.sort``, ``top_k``, the cumulative ``lax`` reductions) and windows
(``reduce_window`` pooling, ``conv_transpose``: ``windows.py``).

Every op reads exact values only (so JAX eager and minixla see the same operand) and builds,
inside the program -- on both sides, from any data -- an operand on which the result is
well-defined:

- A matrix block ``x[..., :n, :m]`` (``n, m <= 4``) is *sanitized*: converted to float32,
  non-finite entries replaced by 0, scaled by 1/16 (exact) and clipped to ``[-1, 1]``.
- ``lu``, ``det``, ``slogdet``, ``inv``, ``solve``, ``triangular_solve``: the block plus, on
  the diagonal, ``1 + its column sums of |a|`` -- strictly column diagonally dominant with a
  margin >= 1, so ``||M^-1||_1 <= 1``, ``cond_1(M) <= 2 (1 + n)``, and partial pivoting always
  picks the diagonal (the margin never shrinks under elimination): the pivots are the drawn row
  permutation's, not a near-tie's. ``unit_diagonal`` solves use the block scaled by 1/8 (off-
  diagonal column sums < 1).
- ``cholesky``: the symmetric part with the same diagonal (symmetric, dominant: SPD).
- ``eigh``: ``diag(2i - n) + sym(a) / 16`` (``||sym(a)/16||_2 <= 1/4``): eigenvalues at least 1.5
  apart, so eigenvectors (normalized to a positive diagonal, their dominant entry) and JAX's
  eigenvector derivative (``1 / (w_j - w_i)``) are well-defined.
- ``svd``: ``diag(2(k - i) + 1) + a / 16``: distinct singular values >= 0.5; thin factors,
  normalized to a positive diagonal. ``qr``: the dominant rectangular block (full rank), reduced,
  normalized to ``diag(R) > 0``.

The tolerance of each result comes from that condition bound ``C``: ``8 n C eps`` relative to the
array's largest magnitude (backward-stable algorithms err norm-wise), and ``8 n C^2 eps`` for
derivatives (``d inv = -inv dA inv``); it is carried by the result (``Value.tol``), which only
data-movement ops may read. Random bits, uniforms, integers, permutations and choices are exact
(bit-identical to ``jax.random``); the ``log``/``erf_inv``-based samplers are within a few ulp on
the LLVM backend (``minixla.random``'s docstring), so inexact.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st

import minixla
import minixla.random  # noqa: F401 (minixla.random as an attribute)
from minixla import lax as mlax
from minixla.fuzz import windows

F32 = np.dtype(np.float32)
EPS = float(np.finfo(np.float32).eps)
FAMILIES = ("linalg", "random", "sorting", "windows")


def _jax_side(np_):
    return np_ is jnp


def _linalg(np_):
    return jax.lax.linalg if _jax_side(np_) else mlax.linalg


def _random(np_):
    return jax.random if _jax_side(np_) else minixla.random


# ---------------------------------------------------------------------------------------
# Operands on which the linear-algebra results are well-defined (see the module docstring).

def _sanitize(np_, x, n, m):
    a = x[..., :n, :m].astype(np.float32)
    a = np_.where(np_.isfinite(a), a, np.float32(0))
    return np_.clip(a * np.float32(0.0625), np.float32(-1), np.float32(1))


def _dominant(np_, a):
    """``a[..., n, m]`` plus ``1 + sum_i |a_ij|`` on its leading diagonal."""
    n, m = a.shape[-2:]
    s = 1 + np_.sum(np_.abs(a), axis=-2)
    return a + s[..., None, :] * np_.eye(n, m, dtype=np.float32)


def _sym_dominant(np_, a):
    s = (a + np_.swapaxes(a, -1, -2)) * np.float32(0.5)
    return s + (1 + np_.sum(np_.abs(s), axis=-2))[..., None, :] * np_.eye(a.shape[-1], dtype=np.float32)


def _positive_columns(np_, q, d):
    """``q`` with column ``j`` times ``sign(d_j)`` (``d``: the entries fixing the signs)."""
    return q * np_.where(d < 0, np.float32(-1), np.float32(1))[..., None, :]


def _diag(np_, x):
    return np_.diagonal(x, axis1=-2, axis2=-1)


def _la(np_, lax_, args, p):
    fn, n, m = p["fn"], p["n"], p["m"]
    L, la = _linalg(np_), np_.linalg
    a = _sanitize(np_, args[0], n, m)
    if fn in ("lu", "det", "slogdet", "inv", "solve"):
        mat = _dominant(np_, a)[..., p["perm"], :]
        if fn == "lu":
            return L.lu(mat)[p["out"]]
        if fn == "det":
            return la.det(mat)
        if fn == "slogdet":
            return la.slogdet(mat)[p["out"]]
        if fn == "inv":
            return la.inv(mat)
        return la.solve(mat, a if p["matrix_rhs"] else a[..., 0])
    if fn == "triangular_solve":
        mat = a * np.float32(0.125) if p["unit_diagonal"] else _dominant(np_, a)
        return L.triangular_solve(mat, a, left_side=p["left_side"], lower=p["lower"],
                                  transpose_a=p["transpose_a"], unit_diagonal=p["unit_diagonal"])
    if fn == "cholesky":
        mat = _sym_dominant(np_, a)
        return la.cholesky(mat, upper=True) if p["upper"] else L.cholesky(mat)
    if fn == "qr":
        q, r = L.qr(_dominant(np_, a), full_matrices=False)
        d = _diag(np_, r)
        return _positive_columns(np_, q, d) if p["out"] == 0 else np_.swapaxes(
            _positive_columns(np_, np_.swapaxes(r, -1, -2), d), -1, -2)
    if fn in ("eigh", "eigvalsh"):
        k = a.shape[-1]
        sym = (a + np_.swapaxes(a, -1, -2)) * np.float32(0.03125)
        mat = sym + np_.eye(k, dtype=np.float32) * (2 * np.arange(k, dtype=np.float32) - k)
        if fn == "eigvalsh":
            return la.eigvalsh(mat)
        if p["jnp"]:
            w, v = la.eigh(mat, UPLO="L" if p["lower"] else "U", symmetrize_input=p["symmetrize"])
        else:
            v, w = L.eigh(mat, lower=p["lower"], symmetrize_input=p["symmetrize"])
        return w if p["out"] == 1 else _positive_columns(np_, v, _diag(np_, v))
    if fn in ("svd", "svdvals"):
        k = min(n, m)
        top = np.zeros((n, m), np.float32)
        top[np.arange(k), np.arange(k)] = 2 * (k - np.arange(k)) + 1
        mat = a * np.float32(0.0625) + top
        if fn == "svdvals":
            return la.svdvals(mat)
        if not p["compute_uv"]:
            return L.svd(mat, full_matrices=False, compute_uv=False)
        u, s, vh = L.svd(mat, full_matrices=False)
        if p["out"] == 0:
            return _positive_columns(np_, u, _diag(np_, u))
        if p["out"] == 1:
            return s
        return np_.swapaxes(_positive_columns(np_, np_.swapaxes(vh, -1, -2), _diag(np_, vh)), -1, -2)
    raise AssertionError(fn)


LA_SQUARE = ("lu", "det", "slogdet", "inv", "solve", "triangular_solve", "cholesky", "eigh", "eigvalsh")
LA_RECT = ("qr", "svd", "svdvals")


def _cond_bound(fn, n, m):
    """A bound on the condition number of the op's operand (see the module docstring)."""
    k = max(n, m, 1)
    if fn in ("eigh", "eigvalsh", "svd", "svdvals"):
        return 4.0  # (well-separated spectra: perturbation / gap <= 1/2, plus the spread)
    return 2.0 * (1 + k)


def draw_linalg(draw, vals, k):
    x = vals[k]
    if len(x.shape) < 2 or x.dtype.kind == "c":
        return None
    fn = draw(st.sampled_from(LA_SQUARE + LA_RECT))
    n0, m0 = min(x.shape[-2], 4), min(x.shape[-1], 4)
    if fn in LA_SQUARE:
        n = m = min(n0, m0)
    else:
        n, m = n0, m0
    p = dict(fn=fn, n=n, m=m)
    if fn in ("lu", "det", "slogdet", "inv", "solve"):
        p["perm"] = np.asarray(draw(st.permutations(range(n))), np.int32)
    if fn == "lu":
        p["out"] = draw(st.integers(0, 2))
    if fn == "slogdet":
        p["out"] = draw(st.integers(0, 1))
    if fn == "solve":
        p["matrix_rhs"] = draw(st.booleans())
    if fn == "triangular_solve":
        p.update(left_side=draw(st.booleans()), lower=draw(st.booleans()), transpose_a=draw(st.booleans()),
                 unit_diagonal=draw(st.booleans()))
    if fn == "cholesky":
        p["upper"] = draw(st.booleans())
    if fn == "qr":
        p["out"] = draw(st.integers(0, 1))
    if fn == "eigh":
        p.update(jnp=draw(st.booleans()), lower=draw(st.booleans()), symmetrize=draw(st.booleans()),
                 out=draw(st.integers(0, 1)))
    if fn == "svd":
        p.update(compute_uv=draw(st.booleans()), out=draw(st.integers(0, 2)))
    return "fam_linalg", [k], p


def linalg_flags(p):
    """(exact, nice, tol) of a linear-algebra result: sign of ``slogdet``, ``lu``'s pivots and
    permutation are exact; the rest carry the condition-number tolerance."""
    fn = p["fn"]
    if (fn == "slogdet" and p["out"] == 0) or (fn == "lu" and p["out"] > 0):
        return True, True
    k = max(p["n"], p["m"], 1)
    c = _cond_bound(fn, p["n"], p["m"])
    floor = 1.0 if fn == "slogdet" else 0.0  # (log|det|: an absolute error)
    return False, False, (8 * k * c * EPS, floor, 8 * k * c * c * EPS)


# ---------------------------------------------------------------------------------------
# jax.random: a key from a drawn seed or from program data, split / folded, then a sampler.

SAMPLERS = ["bits", "uniform", "uniform_values", "normal", "randint", "bernoulli", "bernoulli_values",
            "truncated_normal", "gumbel", "exponential", "categorical", "permutation", "choice", "rademacher",
            "key_data"]
#: samplers whose values go through log/log1p/erf_inv: a few ulp apart on the LLVM backend
INEXACT_SAMPLERS = {"normal", "truncated_normal", "gumbel", "exponential"}


def _key(np_, R, args, p):
    seed = args[p["seed_arg"]] if p["seed_arg"] is not None else np.int32(p["seed"])
    key = R.key(seed) if p["typed"] else R.PRNGKey(seed)
    for step in p["chain"]:
        if step[0] == "split":
            key = R.split(key, step[1])[step[2]]
        elif step[0] == "fold_in":
            key = R.fold_in(key, np.uint32(step[1]))
        else:
            key = R.fold_in(key, args[step[1]])
    return key


def _rand(np_, lax_, args, p):
    if _jax_side(np_):
        # jax.random's samplers are jitted functions, and XLA contracts their ``a * b + c`` into
        # an fma (minixla.random writes that fma): under jax.disable_jit (the fuzzer's eager
        # reference) they would round twice, so the reference runs them as JAX does by default
        with jax.disable_jit(False):
            return jax.jit(lambda *a: _sample(np_, a, p))(*args)
    return _sample(np_, args, p)


def _sample(np_, args, p):
    R = _random(np_)
    key = _key(np_, R, args, p)
    fn, shape = p["fn"], p["shape"]
    x = args[p["x_arg"]] if p["x_arg"] is not None else None
    if fn == "key_data":
        return R.key_data(key) if p["typed"] else key
    if fn == "bits":
        return R.bits(key, shape, p["dtype"])
    if fn == "uniform":
        return R.uniform(key, shape, p["dtype"], p["lo"], p["hi"])
    if fn == "uniform_values":  # bounds from program data (differentiable)
        return R.uniform(key, x.shape, x.dtype, x, x + np.float32(2))
    if fn == "normal":
        return R.normal(key, shape, p["dtype"])
    if fn == "randint":
        return R.randint(key, shape, p["lo"], p["hi"], p["dtype"])
    if fn == "bernoulli":
        return R.bernoulli(key, p["prob"], shape)
    if fn == "bernoulli_values":
        return R.bernoulli(key, x * np.float32(0.0625))
    if fn == "truncated_normal":
        return R.truncated_normal(key, p["lo"], p["hi"], shape, p["dtype"])
    if fn == "gumbel":
        return R.gumbel(key, shape, p["dtype"])
    if fn == "exponential":
        return R.exponential(key, shape, p["dtype"])
    if fn == "rademacher":
        return R.rademacher(key, shape, p["dtype"])
    if fn == "categorical":
        return R.categorical(key, x, axis=p["axis"])
    if fn == "permutation":
        return R.permutation(key, x if x is not None else p["n"], axis=p["axis"], independent=p["independent"])
    if fn == "choice":
        return R.choice(key, x if x is not None else p["n"], p["shape"], replace=p["replace"], axis=p["axis"])
    raise AssertionError(fn)


_SHAPES = st.lists(st.sampled_from([0, 1, 2, 3, 5]), max_size=3).map(tuple)
_FLOATS = [np.dtype(np.float32), np.dtype(np.float32), np.dtype(np.float16)]


def draw_random(draw, vals, k):
    x = vals[k]
    ints = [i for i, v in enumerate(vals) if v.shape == () and v.dtype.kind in "iub" and v.exact]
    p = dict(seed=draw(st.sampled_from([0, 1, 42, 7, 2 ** 31 - 1, -1, 123456789])), seed_arg=None,
             typed=draw(st.booleans()), x_arg=None)
    if ints and draw(st.integers(0, 3)) == 0:
        p["seed_arg"] = 0  # (the seed is program data)
    chain = []
    for _ in range(draw(st.integers(0, 3))):
        how = draw(st.sampled_from(["split", "split", "fold_in", "fold_data"]))
        if how == "split":
            num = draw(st.integers(1, 3))
            chain.append(("split", num, draw(st.integers(0, num - 1))))
        elif how == "fold_in" or not ints:
            chain.append(("fold_in", draw(st.sampled_from([0, 1, 5, 2 ** 32 - 1]))))
        else:
            chain.append(("fold_data", None))
    fn = draw(st.sampled_from(SAMPLERS))
    args = []
    if p["seed_arg"] is not None:
        seeds = [i for i in ints if vals[i].dtype.kind != "b"]  # (a bool seed raises in JAX and minixla)
        if not seeds:
            return None
        args.append(draw(st.sampled_from(seeds)))
    for j, step in enumerate(chain):
        if step[0] == "fold_data":
            chain[j] = ("fold_data", len(args))
            args.append(draw(st.sampled_from(ints)))
    p.update(chain=tuple(chain), fn=fn, shape=draw(_SHAPES))
    if fn in ("uniform_values", "bernoulli_values", "categorical") or (
            fn in ("permutation", "choice") and draw(st.booleans())):
        if not x.exact or (fn != "permutation" and fn != "choice" and x.dtype != F32):
            return None
        p["x_arg"] = len(args)
        args.append(k)
    if fn in ("uniform", "normal", "truncated_normal", "gumbel", "exponential", "rademacher"):
        p["dtype"] = draw(st.sampled_from(_FLOATS + [np.dtype(np.int32)] * (fn == "rademacher")))
    if fn == "bits":
        p["dtype"] = draw(st.sampled_from([np.dtype(np.uint32), np.dtype(np.uint8), np.dtype(np.uint16)]))
    if fn == "uniform":
        p["lo"], p["hi"] = draw(st.sampled_from([(0.0, 1.0), (-2.5, 3.0), (1.0, 1.0), (0.5, -0.5)]))
    if fn == "truncated_normal":
        p["lo"], p["hi"] = draw(st.sampled_from([(-2.0, 2.0), (0.0, 1.5), (-1.0, np.inf)]))
    if fn == "randint":
        p["lo"], p["hi"] = draw(st.sampled_from([(0, 10), (-5, 5), (3, 3), (-2 ** 31, 2 ** 31 - 1), (0, 256)]))
        p["dtype"] = draw(st.sampled_from([np.dtype(np.int32), np.dtype(np.int8), np.dtype(np.uint8)]))
    if fn == "bernoulli":
        p["prob"] = draw(st.sampled_from([0.5, 0.0, 1.0, 0.25]))
    if fn == "categorical":
        if not x.shape:
            return None
        p["axis"] = draw(st.integers(-len(x.shape), len(x.shape) - 1))
    if fn in ("permutation", "choice"):
        nd = len(x.shape) if p["x_arg"] is not None else 1
        if not nd:
            return None
        p.update(axis=draw(st.integers(0, nd - 1)), n=draw(st.sampled_from([0, 1, 4, 7])),
                 independent=draw(st.booleans()), replace=draw(st.booleans()))
        if fn == "choice":
            p["shape"] = draw(st.sampled_from([(), (2,), (1, 2)]))
    return "fam_random", args, p


def random_flags(p, args):
    if not all(a.exact for a in args):
        return None
    if p["fn"] in INEXACT_SAMPLERS:
        return False, False
    nice = p["fn"] in ("permutation", "choice") and all(a.nice for a in args)
    return True, nice


# ---------------------------------------------------------------------------------------
# Sorting and the cumulative lax reductions.

def _sort(np_, lax_, args, p):
    fn = p["fn"]
    if fn == "sort":
        return np_.sort(args[0], axis=p["axis"], descending=p["descending"])
    if fn == "argsort":
        return np_.argsort(args[0], axis=p["axis"], stable=True, descending=p["descending"])
    if fn == "lax_sort":
        return lax_.sort(tuple(args), dimension=p["axis"], is_stable=True, num_keys=p["num_keys"])[p["out"]]
    if fn == "top_k":
        return lax_.top_k(args[0], p["k"])[p["out"]]
    return getattr(lax_, fn)(args[0], axis=p["axis"], reverse=p["reverse"])


def draw_sorting(draw, vals, k):
    x = vals[k]
    nd = len(x.shape)
    if not nd:
        return None
    fn = draw(st.sampled_from(["sort", "argsort", "lax_sort", "top_k", "cumsum", "cumprod", "cumlogsumexp",
                               "cummax", "cummin"]))
    axis = draw(st.integers(-nd, nd - 1))
    if fn in ("sort", "argsort"):
        return "fam_sorting", [k], dict(fn=fn, axis=axis, descending=draw(st.booleans()))
    if fn == "lax_sort":
        same = [i for i, v in enumerate(vals) if v.shape == x.shape]
        ids = [k] + draw(st.lists(st.sampled_from(same), max_size=2))
        return "fam_sorting", ids, dict(fn=fn, axis=axis, num_keys=draw(st.integers(1, len(ids))),
                                        out=draw(st.integers(0, len(ids) - 1)))
    if fn == "top_k":
        return "fam_sorting", [k], dict(fn=fn, k=draw(st.integers(0, x.shape[-1])), out=draw(st.integers(0, 1)))
    if fn == "cumlogsumexp" and not (x.dtype.kind == "f" or x.dtype == np.dtype("bfloat16")):
        return None
    return "fam_sorting", [k], dict(fn=fn, axis=axis % nd, reverse=draw(st.booleans()))


def sorting_flags(p, args):
    exact = all(a.exact for a in args)
    nice = all(a.nice for a in args)
    fn = p["fn"]
    floats = any(a.dtype.kind == "f" or a.dtype == np.dtype("bfloat16") for a in args)
    if fn == "cumlogsumexp":
        # log of a sum: an absolute error of a few ulp of the larger terms (a result near 0 cancels)
        return (False, False, (2e-5 if args[0].dtype == F32 else 4e-3 if args[0].dtype == np.float16 else 3e-2,
                               1.0, 1e-4)) if exact else None
    if not exact:
        return None  # (an order or a tie decided by the last bit)
    if fn in ("cumsum", "cumprod") and floats:
        if not nice:
            return None
        if fn == "cumprod" and args[0].shape[p["axis"]] > 3:
            return None
        return True, False
    return True, nice and fn not in ("cumsum", "cumprod")


# ---------------------------------------------------------------------------------------

OPS = {"fam_linalg": _la, "fam_random": _rand, "fam_sorting": _sort, **windows.OPS}
DRAW = {"linalg": draw_linalg, "random": draw_random, "sorting": draw_sorting, "windows": windows.draw_windows}


def draw_family_op(draw, vals, families):
    """An op spec of one of ``families`` reading a random value (None when it does not fit)."""
    k = draw(st.integers(0, len(vals) - 1))
    return DRAW[draw(st.sampled_from(sorted(families)))](draw, vals, k)


def classify(op, p, args):
    """(exact, nice[, tol]) of a family op's result; None if it may not read ``args``."""
    if op == "fam_linalg":
        return linalg_flags(p) if all(a.exact for a in args) else None
    if op == "fam_random":
        return random_flags(p, args)
    if op == "fam_windows":
        return windows.windows_flags(p, args)
    return sorting_flags(p, args)
