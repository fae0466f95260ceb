"""The samplers of ``minixla.random``, written with the same ops in the same order as
``jax.random`` (JAX 0.10) writes them, so that for the same key, shape and dtype the bits are
JAX's. Where XLA contracts JAX's ``a * b + c`` into one fma (``jax.random``'s samplers are
jitted), minixla writes the ``fma`` explicitly (``minixla.lax.fma``).

Floats are made from bits as JAX does: the top ``nmant`` random bits become the mantissa of a
number in ``[1, 2)`` (exponent bits of 1.0 or-ed in), minus 1 gives ``[0, 1)``, scaled by an fma
to ``[minval, maxval)``. ``normal`` is ``sqrt(2) erf_inv(u)`` for ``u`` uniform in
``(-1, 1)``; ``gumbel``, ``exponential``, ``laplace``, ``logistic`` transform a uniform by
``log``/``log1p``; ``randint`` takes two 32-bit draws per value and reduces them modulo the span.
"""
from __future__ import annotations

import math

import numpy as np
import jax.numpy as _jnp

from minixla import lax
from minixla import numpy as mnp
from minixla.core import errors
from minixla.core.avals import canonicalize_dtype, canonicalize_shape, get_aval
from minixla.core.tracing import Tracer
from minixla.random import threefry
from minixla.random.keys import _key_base, _rewrap  # noqa: F401

_UINT = {8: np.dtype("uint8"), 16: np.dtype("uint16"), 32: np.dtype("uint32"), 64: np.dtype("uint64")}


def _float_dtype(name, dtype):
    dtype = canonicalize_dtype(float if dtype is None else dtype)
    if not (dtype.kind == "f" or dtype.name == "bfloat16"):
        raise ValueError(f"dtype argument to `{name}` must be a float dtype, got {dtype}")
    return dtype


def _check_shape(name, shape, *param_shapes):
    if param_shapes:
        try:
            got = np.broadcast_shapes(shape, *param_shapes)
        except ValueError:  # JAX's ValueError text (a ShapeError: it names the caller's line)
            shapes = [tuple(int(d) for d in s) for s in (shape, *param_shapes)]
            raise errors.ShapeError(f"Incompatible shapes for broadcasting: shapes={shapes}\n"
                                    f"  at: {errors.user_source_line()}") from None
        if tuple(got) != tuple(shape):
            raise ValueError(f"{name} parameter shapes must be broadcast-compatible with shape "
                             f"argument, and the result of broadcasting the shapes must equal "
                             f"the shape argument, but got result {tuple(got)} for shape argument "
                             f"{tuple(shape)}.")


def _to_rank(x, rank):
    shape = get_aval(x).shape
    return lax.reshape(x, (1,) * (rank - len(shape)) + tuple(shape)) if len(shape) < rank else x


def _bcast(x, shape):
    return x if get_aval(x).shape == tuple(shape) else mnp.broadcast_to(x, shape)


def bits(key, shape=(), dtype=None):
    """Random unsigned integers of ``shape`` (``jax.random.bits``): ``dtype`` uint8/16/32/64
    (default uint32, uint64 under x64)."""
    base, _ = _key_base("bits", key)
    dtype = canonicalize_dtype(np.uint64 if dtype is None else dtype)
    if dtype.kind != "u":
        raise ValueError(f"dtype argument to `bits` must be an unsigned int dtype, got {dtype}")
    return threefry.threefry_random_bits(base, dtype.itemsize * 8, canonicalize_shape(shape))


def uniform(key, shape=(), dtype=None, minval=0., maxval=1.):
    """Uniform floats in ``[minval, maxval)`` (``jax.random.uniform``); ``minval``/``maxval``
    broadcast to ``shape``. Raises ``ValueError`` for a non-float dtype."""
    base, _ = _key_base("uniform", key)
    # (jax.random.uniform's bounds are arguments of its jitted _uniform: XLA folds nothing)
    return _uniform(base, minval, maxval, canonicalize_shape(shape), _float_dtype("uniform", dtype),
                    literal_bounds=False)


def _literal(x):
    """``x`` as a NumPy scalar if it is a concrete scalar (a literal of JAX's sampler), else None."""
    if isinstance(x, Tracer) or np.ndim(x):
        return None
    return np.asarray(x)


def _uniform(key, minval, maxval, shape, dtype, literal_bounds=True):
    """JAX's ``_uniform``. ``literal_bounds``: ``minval``/``maxval`` are literals of the jitted
    JAX sampler that calls it (not the arguments of ``jax.random.uniform``'s own jit), so XLA
    sees them as constants and simplifies with them (``_span_one_fold``)."""
    _check_shape("uniform", shape)
    lo_lit, hi_lit = (_literal(minval), _literal(maxval)) if literal_bounds else (None, None)
    minval = _to_rank(lax.convert_element_type(minval, dtype), len(shape))
    maxval = _to_rank(lax.convert_element_type(maxval, dtype), len(shape))
    finfo = _jnp.finfo(dtype)
    nbits, nmant = finfo.bits, finfo.nmant
    rng_bits = 8 if nmant < 8 else nbits
    b = threefry.threefry_random_bits(key, rng_bits, shape)
    uint = _UINT[nbits]
    if rng_bits != nbits:
        b = lax.convert_element_type(b, uint)
    float_bits = lax.bitwise_or(lax.shift_right_logical(b, np.asarray(rng_bits - nmant, uint)),
                                np.asarray(1.0, dtype).view(uint))
    floats = lax.bitcast_convert_type(float_bits, dtype)
    folded = _span_one_fold(lo_lit, hi_lit, dtype)
    if folded is not None:
        return mnp.maximum(minval, lax.reshape(lax.add(floats, folded), shape))
    floats = lax.sub(floats, np.asarray(1.0, dtype))
    span = mnp.subtract(maxval, minval)
    # (XLA:CPU contracts JAX's ``floats * span + minval``; for float16/bfloat16 only on a host
    # with native f16 arithmetic, which ``lax.fma`` follows: ``lax.special.xla_contracts``)
    out = lax.fma(floats, _bcast(span, shape), _bcast(minval, shape))
    return mnp.maximum(minval, lax.reshape(out, shape))


def _span_one_fold(lo, hi, dtype):
    """What XLA's algebraic simplifier makes of ``(bits - 1) * span + minval`` for constant
    bounds with ``span == 1`` (``gumbel``'s and ``logistic``'s ``[tiny, 1)``, as ``1 - tiny``
    rounds to 1): ``x * 1 -> x``, then ``(x + C1) + C2 -> x + (C1 + C2)``, so ``bits + (minval -
    1)`` rounded once -- in float16 ``tiny`` is kept in ``bits - 1 + tiny`` below 0.125, lost in
    ``bits + (-1 + tiny) = bits - 1``. The folded constant ``minval - 1`` (a NumPy scalar of
    ``dtype``), or None where XLA does not fold: bounds that are not literals, another span,
    and bfloat16 (XLA:CPU's bf16 normalization puts converts between the two adds)."""
    if lo is None or hi is None or np.dtype(dtype).name == "bfloat16":
        return None
    lo, hi = np.asarray(lo, dtype), np.asarray(hi, dtype)
    if np.asarray(hi - lo, dtype) != 1:
        return None
    return np.asarray(np.asarray(-1, dtype) + lo, dtype)


def normal(key, shape=(), dtype=None):
    """Standard normal floats (``jax.random.normal``): ``sqrt(2) erf_inv(u)``, ``u`` uniform in
    ``(-1, 1)``."""
    base, _ = _key_base("normal", key)
    return _normal(base, canonicalize_shape(shape), _float_dtype("normal", dtype))


def _nextafter_const(x, y, dtype):
    return np.asarray(_jnp.nextafter(np.asarray(x, dtype), np.asarray(y, dtype)))


def _normal(key, shape, dtype):
    lo = _nextafter_const(-1., 0., dtype)
    u = _uniform(key, lo, np.asarray(1., dtype), shape, dtype)
    return lax.mul(np.asarray(np.sqrt(2), dtype), lax.erf_inv(u))


def truncated_normal(key, lower, upper, shape=None, dtype=None):
    """Normal floats truncated to ``(lower, upper)`` (``jax.random.truncated_normal``):
    ``sqrt(2) erf_inv(u)`` for ``u`` uniform between ``erf(lower/sqrt 2)`` and
    ``erf(upper/sqrt 2)``, clipped into the open interval. ``shape`` defaults to the bounds'."""
    base, _ = _key_base("truncated_normal", key)
    dtype = _float_dtype("truncated_normal", dtype)
    if shape is None:
        shape = tuple(np.broadcast_shapes(get_aval(lower).shape, get_aval(upper).shape))
    else:
        shape = canonicalize_shape(shape)
        _check_shape("truncated_normal", shape, get_aval(lower).shape, get_aval(upper).shape)
    sqrt2 = np.asarray(np.sqrt(2), dtype)
    lower = lax.convert_element_type(lower, dtype)
    upper = lax.convert_element_type(upper, dtype)
    # JAX writes ``erf(lower / sqrt2)``; XLA's algebraic simplifier turns a division by a
    # constant into a multiplication by its reciprocal, so that is what JAX's bits are made of.
    inv_sqrt2 = np.asarray(np.asarray(1, dtype) / sqrt2, dtype)
    a = lax.erf(lax.mul(lower, inv_sqrt2))
    b = lax.erf(lax.mul(upper, inv_sqrt2))
    u = _uniform(base, a, b, shape, dtype, literal_bounds=False)  # (JAX's are its jit's arguments)
    out = lax.mul(sqrt2, lax.erf_inv(u))
    return mnp.clip(out, lax.nextafter(lax.stop_gradient(lower), np.asarray(np.inf, dtype)),
                    lax.nextafter(lax.stop_gradient(upper), np.asarray(-np.inf, dtype)))


def bernoulli(key, p=0.5, shape=None, mode="low"):
    """Booleans, True with probability ``p`` (``jax.random.bernoulli``): ``uniform < p``
    (``mode='low'``) or with two uniforms for more resolution (``'high'``)."""
    if mode not in ("high", "low"):
        raise ValueError(f"got mode={mode!r}, expected 'high' or 'low'")
    base, _ = _key_base("bernoulli", key)
    dtype = canonicalize_dtype(get_aval(p).dtype)
    if not (dtype.kind == "f" or dtype.name == "bfloat16"):
        raise errors.DTypeError(f"bernoulli probability `p` must have a floating dtype, got {dtype}.")
    p = lax.convert_element_type(p, dtype)
    if shape is None:
        shape = get_aval(p).shape
    else:
        shape = canonicalize_shape(shape)
        _check_shape("bernoulli", shape, get_aval(p).shape)
    if mode == "high":
        u = _uniform(base, 0., 1., (2, *shape), dtype)
        u1, u2 = mnp.squeeze(u[:1], 0), mnp.squeeze(u[1:], 0)
        u2 = mnp.multiply(u2, np.asarray(2.0 ** -_jnp.finfo(dtype).nmant, dtype))
        return mnp.less(u2, mnp.subtract(p, u1))
    return mnp.less(_uniform(base, 0., 1., shape, dtype), p)


def _clip_convert(val, dtype):
    """``val`` (an integer array) clipped into ``dtype``'s range, then converted (JAX's
    ``_convert_and_clip_integer``)."""
    vd = get_aval(val).dtype
    lo = max(np.iinfo(dtype).min, np.iinfo(vd).min)
    hi = min(np.iinfo(dtype).max, np.iinfo(vd).max)
    return lax.convert_element_type(mnp.clip(val, np.asarray(lo, vd), np.asarray(hi, vd)), dtype)


def _int_arg(x):
    x = mnp.asarray(x)
    return x if get_aval(x).dtype.kind in "iu" else mnp.asarray(x).astype(int)


def randint(key, shape, minval, maxval, dtype=None):
    """Integers uniform in ``[minval, maxval)`` (``jax.random.randint``): two draws of the
    dtype's width per value, reduced modulo the span (biased by about ``span**2 / 2**(2*bits)``,
    as JAX's); values below 32 bits are drawn as int32. ``maxval <= minval`` gives ``minval``."""
    base, impl = _key_base("randint", key)
    dtype = canonicalize_dtype(int if dtype is None else dtype)
    if dtype.kind not in "iu":
        raise TypeError(f"randint only accepts integer dtypes, got {dtype}")
    shape = canonicalize_shape(shape)
    info = np.iinfo(dtype)
    sample_dtype = dtype
    if info.bits < 32:
        sample_dtype = np.dtype("int32")
        minval = mnp.clip(mnp.asarray(minval).astype("int32"), int(info.min), int(info.max))
        maxval = mnp.clip(mnp.asarray(maxval).astype("int32"), int(info.min), int(info.max) + 1)
    return mnp.asarray(_randint(base, minval, maxval, shape, sample_dtype, impl)).astype(dtype)


def _split(key, impl):
    """``split(key, 2)``'s data by the key's implementation (a typed key's, else the default)."""
    from minixla.random import rbg
    return (impl or rbg.default_impl()).split(key, (2,))


def _two_keys(keys):
    """The two keys of ``split(key, 2)``'s data (``uint32[2, n]``: n = 2, or 4 for rbg)."""
    n = get_aval(keys).shape[-1]
    return lax.reshape(lax.slice(keys, (0, 0), (1, n)), (n,)), lax.reshape(lax.slice(keys, (1, 0), (2, n)), (n,))


def _randint(key, minval, maxval, shape, dtype, impl=None):
    _check_shape("randint", shape, get_aval(minval).shape, get_aval(maxval).shape)
    minval, maxval = _int_arg(minval), _int_arg(maxval)
    maxval_out_of_range = mnp.greater(
        maxval, _clip_convert(np.asarray(np.iinfo(dtype).max, dtype), get_aval(maxval).dtype))
    minval = _clip_convert(minval, dtype)
    maxval = _clip_convert(maxval, dtype)
    minval, maxval = _to_rank(minval, len(shape)), _to_rank(maxval, len(shape))
    nbits = np.iinfo(dtype).bits
    k1, k2 = _two_keys(_split(key, impl))
    higher = threefry.threefry_random_bits(k1, nbits, shape)
    lower = threefry.threefry_random_bits(k2, nbits, shape)
    unsigned = _UINT[nbits]
    span = lax.convert_element_type(mnp.subtract(maxval, minval), unsigned)
    # span = 1 when maxval <= minval (minval is returned); one more when maxval is past the
    # dtype's top (it wraps to 0 at the full range: the remainders below then keep every value)
    span = mnp.where(mnp.less_equal(maxval, minval), np.asarray(1, unsigned), span)
    span = mnp.where(mnp.logical_and(maxval_out_of_range, mnp.greater(maxval, minval)),
                     mnp.add(span, np.asarray(1, unsigned)), span)
    span = _bcast(span, shape)
    # (a * b) % n = ((a % n) * (b % n)) % n, with the multiplier 2**nbits % span
    multiplier = lax.rem(_bcast(np.asarray(2 ** (nbits // 2), unsigned), shape), span) if shape else \
        lax.rem(np.asarray(2 ** (nbits // 2), unsigned), span)
    multiplier = lax.rem(lax.mul(multiplier, multiplier), span)
    offset = lax.add(lax.mul(lax.rem(higher, span), multiplier), lax.rem(lower, span))
    offset = lax.rem(offset, span)
    return mnp.add(minval, lax.convert_element_type(offset, dtype))


def exponential(key, shape=(), dtype=None):
    """Exponential(1) floats (``jax.random.exponential``): ``-log1p(-u)``."""
    base, _ = _key_base("exponential", key)
    dtype = _float_dtype("exponential", dtype)
    u = _uniform(base, 0., 1., canonicalize_shape(shape), dtype)
    return lax.neg(lax.log1p(lax.neg(u)))


def gumbel(key, shape=(), dtype=None, mode=None):
    """Standard Gumbel floats (``jax.random.gumbel``): ``-log(-log(u))`` for ``u`` uniform in
    ``[tiny, 1)`` (``mode='low'``, the default), or from two uniforms (``'high'``).
    ``mode='highest'`` is not supported (it needs ``lax.clz``)."""
    base, _ = _key_base("gumbel", key)
    dtype = _float_dtype("gumbel", dtype)
    shape = canonicalize_shape(shape)
    mode = "low" if mode is None else mode
    if mode not in ("highest", "high", "low"):
        raise ValueError(f"Must provide valid mode for gumbel got: {mode}")
    return _gumbel(base, shape, dtype, mode)


def _gumbel(key, shape, dtype, mode):
    info = _jnp.finfo(dtype)
    if mode == "highest":
        raise errors.UnsupportedError("gumbel(mode='highest') is not supported by minixla.random")
    if mode == "high":
        u = _uniform(key, 0., 1., (2, *shape), dtype)
        high, low = mnp.squeeze(u[:1], 0), mnp.squeeze(u[1:], 0)
        # (2**-nmant * low is exact: XLA's contraction of the add changes nothing)
        x = mnp.where(mnp.greater_equal(high, np.asarray(0.5, dtype)), high,
                      mnp.add(mnp.add(high, mnp.multiply(np.asarray(2.0 ** -info.nmant, dtype), low)),
                              np.asarray(info.tiny, dtype)))
        return mnp.negative(mnp.log(mnp.negative(mnp.log1p(mnp.negative(x)))))
    u = _uniform(key, np.asarray(info.tiny, dtype), 1., shape, dtype)
    return mnp.negative(mnp.log(mnp.negative(mnp.log(u))))


def categorical(key, logits, axis=-1, shape=None, replace=True, mode=None):
    """Indices sampled from ``softmax(logits)`` along ``axis`` (``jax.random.categorical``): the
    argmax of ``logits + gumbel`` (with replacement), or its top ``k`` (without)."""
    base, _ = _key_base("categorical", key)
    logits = mnp.asarray(logits)
    lshape = get_aval(logits).shape
    batch_shape = tuple(np.delete(np.asarray(lshape, dtype=np.int64), axis)) if lshape else ()
    batch_shape = tuple(int(d) for d in batch_shape)
    if shape is None:
        shape = batch_shape
    else:
        shape = canonicalize_shape(shape)
        _check_shape("categorical", shape, batch_shape)
    dtype = get_aval(logits).dtype
    prefix = shape[:len(shape) - len(batch_shape)]
    if replace:
        if axis >= 0:
            axis -= len(lshape)
        lg_shape = list(shape[len(shape) - len(batch_shape):])
        lg_shape.insert(axis % len(lshape), lshape[axis])
        g = _gumbel(base, (*prefix, *lg_shape), dtype, "low" if mode is None else mode)
        return mnp.argmax(mnp.add(g, lax.expand_dims(logits, tuple(range(len(prefix))))), axis=axis)
    logits = mnp.add(logits, _gumbel(base, lshape, dtype, "low" if mode is None else mode))
    k = math.prod(prefix)
    if k > lshape[axis]:
        raise ValueError(f"Number of samples without replacement ({k}) cannot exceed number of "
                         f"categories ({lshape[axis]}).")
    _, indices = lax.top_k(mnp.moveaxis(logits, axis, -1), k)
    nd = len(get_aval(indices).shape)
    return lax.reshape(lax.transpose(indices, (nd - 1, *range(nd - 1))), shape)


def laplace(key, shape=(), dtype=None):
    """Laplace(0, 1) floats (``jax.random.laplace``): ``sign(u) log1p(-|u|)``, ``u`` uniform
    in ``(-1, 1)``."""
    base, _ = _key_base("laplace", key)
    dtype = _float_dtype("laplace", dtype)
    u = _uniform(base, -1. + float(_jnp.finfo(dtype).epsneg), 1., canonicalize_shape(shape), dtype)
    return lax.mul(lax.sign(u), lax.log1p(lax.neg(lax.abs(u))))


def logistic(key, shape=(), dtype=None):
    """Standard logistic floats (``jax.random.logistic``): ``log(u) - log1p(-u)``."""
    base, _ = _key_base("logistic", key)
    dtype = _float_dtype("logistic", dtype)
    x = _uniform(base, np.asarray(_jnp.finfo(dtype).tiny, dtype), 1., canonicalize_shape(shape), dtype)
    return lax.sub(lax.log(x), lax.log1p(lax.neg(x)))


def rademacher(key, shape=(), dtype=None):
    """-1 or +1 with equal probability (``jax.random.rademacher``), default int dtype."""
    _key_base("rademacher", key)
    dtype = canonicalize_dtype(int if dtype is None else dtype)
    b = mnp.asarray(bernoulli(key, 0.5, canonicalize_shape(shape))).astype(dtype)
    return mnp.asarray(mnp.subtract(mnp.multiply(2, b), 1)).astype(dtype)


def _shuffle(key, x, axis, impl=None):
    """JAX's shuffle: sort by fresh 32-bit random keys, ``ceil(3 ln(n) / ln(2**32 - 1))``
    rounds (one below ~1600 elements), so collisions of the sort keys bias it negligibly."""
    size = get_aval(x).size
    rounds = int(np.ceil(3 * np.log(max(1, size)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(rounds):
        key, subkey = _two_keys(_split(key, impl))
        sort_keys = threefry.threefry_random_bits(subkey, 32, get_aval(x).shape)
        _, x = lax.sort_key_val(sort_keys, x, axis)
    return x


def permutation(key, x, axis=0, independent=False):
    """A random permutation of ``range(x)`` (an int), or of ``x`` along ``axis``
    (``jax.random.permutation``); ``independent=True`` shuffles each slice on its own."""
    base, impl = _key_base("permutation", key)
    if not isinstance(x, (int, np.integer)) and get_aval(x).ndim:
        x = mnp.asarray(x)
        nd = get_aval(x).ndim
        axis = axis % nd
        if independent or nd == 1:
            return _shuffle(base, x, axis, impl)
        ind = _shuffle(base, mnp.arange(get_aval(x).shape[axis]), 0, impl)
        return mnp.take(x, ind, axis, unique_indices=True)
    if not isinstance(x, (int, np.integer)):
        if get_aval(x).dtype.kind not in "iu":
            raise TypeError("x must be an integer or at least 1-dimensional")
        x = int(np.asarray(x))  # (raises ConcretizationTypeError for a traced value)
    return _shuffle(base, mnp.arange(int(x)), 0, impl)


def choice(key, a, shape=(), replace=True, p=None, axis=0, mode=None):
    """Random samples of ``range(a)`` (an int) or of ``a`` along ``axis`` (``jax.random.choice``):
    ``randint`` indices with replacement, a ``permutation``'s prefix without; with
    probabilities ``p``, inverse-CDF sampling (with) or the Gumbel top-k trick (without)."""
    base, _ = _key_base("choice", key)
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"shape argument of jax.random.choice must be a sequence, got {shape}")
    shape = tuple(shape)
    arr = mnp.asarray(a)
    aval = get_aval(arr)
    if aval.ndim == 0:
        n_inputs = int(np.asarray(a))
    else:
        axis = axis % aval.ndim
        n_inputs = aval.shape[axis]
    n_draws = math.prod(shape)
    if n_draws == 0:
        return mnp.zeros(shape, dtype=aval.dtype)
    if n_inputs <= 0:
        raise ValueError("a must be greater than 0 unless no samples are taken")
    if not replace and n_draws > n_inputs:
        raise ValueError(f"Cannot take a larger sample (size {n_draws}) than population (size "
                         f"{n_inputs}) when 'replace=False'")
    if p is None:
        if replace:
            ind = randint(key, shape, 0, n_inputs)
            result = ind if aval.ndim == 0 else mnp.take(arr, ind, axis)
        else:
            perm = permutation(key, n_inputs if aval.ndim == 0 else arr, axis)
            start = [0] * get_aval(perm).ndim
            limit = list(get_aval(perm).shape)
            limit[axis if aval.ndim else 0] = n_draws
            result = lax.slice(perm, start, limit)
    else:
        p_arr = mnp.asarray(p)
        if get_aval(p_arr).dtype.kind not in "f" and get_aval(p_arr).dtype.name != "bfloat16":
            p_arr = p_arr.astype(canonicalize_dtype(float))
        if get_aval(p_arr).shape != (n_inputs,):
            raise ValueError("p must be None or a 1D vector with the same size as a.shape[axis]. "
                             f"p has shape {get_aval(p_arr).shape} and a.shape[axis] is {n_inputs}.")
        pdt = get_aval(p_arr).dtype
        if replace:
            p_cuml = mnp.cumsum(p_arr)
            total = lax.reshape(lax.slice(p_cuml, (n_inputs - 1,), (n_inputs,)), ())
            r = mnp.multiply(total, mnp.subtract(np.asarray(1, pdt), _uniform(base, 0., 1., shape, pdt)))
            # searchsorted(p_cuml, r) (side='left'): how many cumulative sums are below r
            below = mnp.less(p_cuml, mnp.expand_dims(r, -1))
            ind = mnp.sum(below, axis=-1).astype(canonicalize_dtype(int))
        else:
            g = mnp.add(_gumbel(base, (n_inputs,), pdt, "low" if mode is None else mode), mnp.log(p_arr))
            ind = lax.top_k(g, n_draws)[1].astype(canonicalize_dtype(int))
        result = ind if aval.ndim == 0 else mnp.take(arr, ind, axis)
    return mnp.reshape(result, shape if aval.ndim == 0 else
                       aval.shape[:axis] + shape + aval.shape[axis + 1:])
