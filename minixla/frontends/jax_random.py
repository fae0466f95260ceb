"""Import rules for ``jax.random`` inside an imported function: JAX's PRNG primitives onto
``minixla.random``'s threefry2x32, rbg and unsafe_rbg, bit for bit.

A JAX 0.10 jaxpr that draws random numbers holds *typed keys* (``key<fry>[...]`` variables) and
the primitives that make and consume them: ``random_seed`` (``jax.random.key``/``PRNGKey``),
``random_wrap``/``random_unwrap`` (a raw ``uint32[..., 2]`` key in and out of the typed world),
``random_split``, ``random_fold_in``, ``random_bits``; sometimes ``threefry2x32`` and
``iota_2x32_shape`` themselves. Each is JAX's single-key ``PRNGImpl`` function vmapped over the
keys' shape; the rules here compute the same thing with ``minixla.random.threefry``'s hash on
broadcast key words (a vmap of a hash of independent elements is the hash of the broadcast
arrays), so the imported program is ordinary uint32 HLO on every backend.

Keys of the ``rbg`` and ``unsafe_rbg`` implementations (``key<rbg>``, ``key<urbg>``: ``uint32[4]``
data, bits from ``rng_bit_generator``) are imported as JAX lowers them: each primitive is the
implementation's single-key function (``minixla.random.rbg``) vmapped over the keys' dims, one
``vmap`` per dim (``iterated_vmap_unary`` in ``jax._src.random.prng``), since a vmapped
``rng_bit_generator`` draws every key's bits from the first key (JAX's batching rule): hashing
broadcast key words would give other bits.

A typed key is imported as a ``minixla.random.PRNGKeyArray`` around its ``uint32[*shape, 2]``
(``[*shape, 4]``) data and carrying its implementation. Between the random primitives the keys
move through structural primitives (``slice`` and ``squeeze`` of ``split``'s result,
``select_n``, ``concatenate``, ``dynamic_slice``, ``gather`` of ``keys[i]``, ...): ``key_rules``
holds, for those, the rule that applies the primitive to the key data with its trailing
dimension carried along (JAX's "physical" lowering of key arrays).

Two jitted helpers of ``jax.random``, ``_uniform`` and ``_truncated_normal`` (``xla_compiled``),
are imported with the rewrites XLA makes when it compiles them -- and so in every
``jax.random`` result: ``floats * (maxval - minval) + minval`` contracted into one ``fma``, and
``x / sqrt(2)`` a product by the reciprocal. minixla compiles a user's ``a * b + c`` and
divisions as written (JAX eager's semantics: each op on its own), so without this the draws
would differ from ``jax.random``'s in the last bit (``minixla.random`` writes the same rewrites
explicitly).
"""
from __future__ import annotations

import numpy as np
import jax

from minixla import lax
from minixla.core import errors
from minixla.core.avals import get_aval
from minixla.core.tracing import Tracer, current_jaxpr_trace
from minixla.frontends.jax_importer import _norm, import_rules, key_rules, xla_compiled
from minixla.random import rbg as _rbg
from minixla.random import threefry
from minixla.random.keys import PRNGKeyArray

_U32 = np.dtype("uint32")


def is_key_aval(aval) -> bool:
    """Whether a JAX aval is a typed PRNG key array (``key<...>`` dtype)."""
    dtype = getattr(aval, "dtype", None)
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


def _check_impl(impl, name):
    """minixla's ``PRNGImpl`` of a JAX ``PRNGImpl`` (a key dtype's ``_impl``, ``random_seed``'s
    ``impl``). Raises ``UnsupportedError`` for one minixla lacks (``philox4x32``...)."""
    impl_name = getattr(impl, "name", impl)
    if impl_name not in _rbg.IMPLS:
        raise errors.UnsupportedError(f"jax primitive '{name}' with the PRNG implementation {impl_name!r}: "
                                      "minixla implements threefry2x32 (JAX's default), rbg and unsafe_rbg keys")
    return _rbg.IMPLS[impl_name]


def key_of(aval, data):
    """The ``PRNGKeyArray`` of key ``data`` for a JAX key aval (``key<rbg>[...]``...): its impl."""
    return PRNGKeyArray(data, _check_impl(aval.dtype._impl, "a typed key").name)


def _like(keys, data):
    """``data`` as keys of ``keys``'s implementation."""
    return PRNGKeyArray(data, keys._impl if isinstance(keys, PRNGKeyArray) else None)


def _impl(keys):
    return keys.impl if isinstance(keys, PRNGKeyArray) else _rbg.default_impl()


def _vmapped(ndim, f):
    """``f`` vmapped ``ndim`` times (JAX's ``iterated_vmap_unary``)."""
    from minixla import vmap
    for _ in range(ndim):
        f = vmap(f)
    return f


def import_key_const(x):
    """A JAX typed key array (a closed-over constant) as minixla's ``PRNGKeyArray``."""
    return key_of(x, np.asarray(jax.random.key_data(x)))


def _staged(x):
    """``x``, or, when it is a constant and a trace is recording, a tracer of it: random bits
    of a constant key (``jax.random.key(0)`` inside the function) are staged into the program,
    as JAX stages them, rather than computed op by op while tracing (each eager op is an XLA
    program of its own: hundreds of compiles for one threefry hash)."""
    trace = current_jaxpr_trace()
    if trace is None or isinstance(x, Tracer):
        return x
    return Tracer(trace, trace.to_atom(np.asarray(x)))


def _data(k):
    return _staged(k._base if isinstance(k, PRNGKeyArray) else k)


def _words(data):
    """The two ``uint32`` words of keys ``uint32[*shape, 2]``: two arrays of ``shape``."""
    shape = tuple(get_aval(data).shape)
    nd = len(shape) - 1
    lo, hi = [0] * len(shape), list(shape)
    words = []
    for w in (0, 1):
        lo[-1], hi[-1] = w, w + 1
        words.append(lax.reshape(lax.slice(data, tuple(lo), tuple(hi)), shape[:nd]))
    return words


def _to(x, shape):
    """``x`` (whose shape is a prefix of ``shape``) broadcast to ``shape``."""
    xs = tuple(get_aval(x).shape)
    if xs == tuple(shape):
        return x
    return lax.broadcast_in_dim(x, tuple(shape), tuple(range(len(xs))))


def _stack_words(a, b):
    nd = get_aval(a).ndim
    return lax.concatenate([lax.expand_dims(a, (nd,)), lax.expand_dims(b, (nd,))], nd)


def _hash_iota(keys, shape):
    """threefry2x32 of each key (``uint32[*batch, 2]``) on the 64-bit iota of ``shape``: the
    pair of ``uint32[*batch, *shape]`` words JAX's ``split``/``random_bits`` make per key."""
    batch = tuple(get_aval(keys).shape[:-1])
    shape = tuple(shape)
    full = batch + shape
    k1, k2 = (_to(k, full) for k in _words(keys))
    hi, lo = threefry.iota_2x32_shape(shape)
    hi, lo = (lax.broadcast_in_dim(c, full, tuple(range(len(batch), len(full)))) if batch else c
              for c in (hi, lo))
    return threefry.threefry2x32(k1, k2, hi, lo)


def random_seed(seeds, *, impl):
    """Keys ``[seed >> 32, seed & 0xFFFFFFFF]`` of integer seeds of any shape (``threefry_seed``,
    vmapped); rbg keys: that twice (``rbg_seed``, vmapped)."""
    impl = _check_impl(impl, "random_seed")
    seeds = _staged(seeds)
    aval = get_aval(seeds)
    if impl.name != "threefry2x32":
        return PRNGKeyArray(_vmapped(aval.ndim, impl.seed)(seeds), impl.name)
    if not aval.shape:
        return PRNGKeyArray(threefry.threefry_seed(seeds))
    hi = lax.convert_element_type(lax.shift_right_logical(seeds, np.asarray(32, aval.dtype)), _U32)
    lo = lax.convert_element_type(seeds, _U32)
    return PRNGKeyArray(_stack_words(hi, lo))


def random_split(keys, *, shape):
    impl, shape = _impl(keys), _norm(shape)
    if impl.name != "threefry2x32":
        data = _data(keys)
        return _like(keys, _vmapped(get_aval(data).ndim - 1, lambda k: impl.split(k, shape))(data))
    b1, b2 = _hash_iota(_data(keys), shape)
    return PRNGKeyArray(_stack_words(b1, b2))


def _fold_in_vmapped(impl, data, msgs):
    """rbg keys' ``fold_in``, vmapped as JAX's ``iterated_vmap_binary_bcast``: over each dim of
    the keys or the messages when the other is a scalar, else dim by dim, a size-1 dim of
    either side squeezed and not mapped."""
    from minixla import vmap
    kshape, mshape = tuple(get_aval(data).shape[:-1]), tuple(get_aval(msgs).shape)
    if not kshape or not mshape:
        if not kshape:
            return _vmapped(len(mshape), lambda m: impl.fold_in(data, m))(msgs)
        return _vmapped(len(kshape), lambda k: impl.fold_in(k, msgs))(data)
    if len(kshape) != len(mshape):
        raise errors.ShapeError(f"random_fold_in: keys{list(kshape)} and messages{list(mshape)} of different ranks")
    f = impl.fold_in
    for sk, sm in reversed(list(zip(kshape, mshape))):
        if sk == sm:
            f = vmap(f)
        elif sk == 1 or sm == 1:
            def f(k, m, f=f, left=sk == 1):
                if left:
                    return vmap(f, in_axes=(None, 0))(lax.squeeze(k, (0,)), m)
                return vmap(f, in_axes=(0, None))(k, lax.squeeze(m, (0,)))
        else:
            raise errors.ShapeError(f"random_fold_in: keys{list(kshape)} and messages{list(mshape)} do not broadcast")
    return f(data, msgs)


def random_fold_in(keys, msgs):
    """``fold_in`` of keys and ``uint32`` messages, broadcast against each other (JAX's shape
    rule: equal ranks, size-1 dims stretch): the key hashed on the counter pair ``(0, msg)``."""
    data = _data(keys)
    kshape, mshape = tuple(get_aval(data).shape[:-1]), tuple(get_aval(msgs).shape)
    msgs = lax.convert_element_type(msgs, _U32) if get_aval(msgs).dtype != _U32 else msgs
    if _impl(keys).name != "threefry2x32":
        return _like(keys, _fold_in_vmapped(_impl(keys), data, _staged(msgs)))
    out = tuple(np.broadcast_shapes(kshape, mshape))

    def bcast(x):
        s = tuple(get_aval(x).shape)
        if s == out:
            return x
        if len(s) == len(out):  # (size-1 dims: reshape them away, then broadcast)
            keep = tuple(i for i, d in enumerate(s) if d != 1)
            x = lax.reshape(x, tuple(s[i] for i in keep))
            return lax.broadcast_in_dim(x, out, keep)
        return lax.broadcast_in_dim(x, out, tuple(range(len(out) - len(s), len(out))))
    k1, k2 = (bcast(k) for k in _words(data))
    zero = lax.full(out, 0, _U32)
    y1, y2 = threefry.threefry2x32(k1, k2, zero, bcast(msgs))
    return PRNGKeyArray(_stack_words(y1, y2))


_UINT = {8: np.dtype("uint8"), 16: np.dtype("uint16"), 32: np.dtype("uint32"), 64: np.dtype("uint64")}


def random_bits(keys, *, bit_width, shape):
    """``uint{bit_width}[*keys.shape, *shape]``: per key, the xor of the hash words (8/16/32
    bits, truncated below 32) or ``hi << 32 | lo`` (64), as JAX's ``threefry_random_bits``."""
    bit_width = int(bit_width)
    if bit_width not in _UINT:
        raise errors.DTypeError("random bits requires 8-, 16-, 32- or 64-bit field width")
    impl, shape = _impl(keys), _norm(shape)
    if impl.name != "threefry2x32":
        data = _data(keys)
        return _vmapped(get_aval(data).ndim - 1, lambda k: impl.random_bits(k, bit_width, shape))(data)
    b1, b2 = _hash_iota(_data(keys), shape)
    dtype = _UINT[bit_width]
    if bit_width == 64:
        hi64, lo64 = (lax.convert_element_type(b, dtype) for b in (b1, b2))
        return lax.bitwise_or(lax.shift_left(hi64, np.asarray(32, dtype)), lo64)
    bits = lax.bitwise_xor(b1, b2)
    return bits if bit_width == 32 else lax.convert_element_type(bits, dtype)


def random_wrap(data, *, impl):
    return PRNGKeyArray(data, _check_impl(impl, "random_wrap").name)


def random_unwrap(keys):
    return _data(keys)


def _threefry2x32(k1, k2, x1, x2):
    # JAX's rule: the four operands broadcast (equal ranks after numpy-style alignment)
    shape = tuple(np.broadcast_shapes(*(tuple(get_aval(a).shape) for a in (k1, k2, x1, x2))))

    def bcast(x):
        s = tuple(get_aval(x).shape)
        if s == shape:
            return x
        keep = tuple(i + len(shape) - len(s) for i, d in enumerate(s) if d != 1)
        x = lax.reshape(x, tuple(d for d in s if d != 1))
        return lax.broadcast_in_dim(x, shape, keep)
    return list(threefry.threefry2x32(*(bcast(a) for a in (k1, k2, x1, x2))))


def _iota_2x32_shape(*, shape):
    return list(threefry.iota_2x32_shape(_norm(shape)))


def random_gamma(keys, a, *, log_space):
    """``jax.random.gamma``/``loggamma``'s primitive: minixla's ``random_gamma`` on the key data
    (the same per-element keys and rejection loops, ``minixla.random.gamma``)."""
    from minixla.random.gamma import random_gamma_p
    impl = _impl(keys).name
    params = {} if impl == "threefry2x32" else {"impl": impl}
    return random_gamma_p.bind(_data(keys), a, log_space=bool(log_space), **params)


def _rng_bit_generator(key, *, shape, dtype, algorithm, out_sharding=None):
    """``jax.lax.rng_bit_generator``'s primitive: minixla's (``minixla.lax.rng``)."""
    from minixla.lax import rng
    return list(rng.rng_bit_generator(key, _norm(shape), dtype, algorithm))


import_rules.update({
    "rng_bit_generator": _rng_bit_generator,
    "random_gamma": random_gamma,
    "random_seed": random_seed, "random_split": random_split, "random_fold_in": random_fold_in,
    "random_bits": random_bits, "random_wrap": random_wrap, "random_unwrap": random_unwrap,
    "threefry2x32": _threefry2x32, "iota_2x32_shape": _iota_2x32_shape,
})


# ---------------------------------------------------------------------------------------
# Structural primitives on typed keys: the primitive on the key data, its trailing 2 carried.

def _words_dim(x):
    """The size of the key data's trailing dim (2 for threefry, 4 for rbg)."""
    return get_aval(_data(x)).shape[-1]


def _on_data(name, params_fn):
    def rule(*args, **params):
        data = [_data(a) for a in args]
        shape = tuple(get_aval(data[0]).shape)
        return _like(args[0], import_rules[name](*data, **params_fn(shape, **params)))
    return rule


def _slice_params(shape, *, start_indices, limit_indices, strides=None):
    strides = _norm(strides) if strides is not None else (1,) * (len(shape) - 1)
    return dict(start_indices=_norm(start_indices) + (0,), limit_indices=_norm(limit_indices) + (shape[-1],),
                strides=strides + (1,))


def _key_broadcast_in_dim(x, *dyn, shape, broadcast_dimensions, sharding=None):
    out = _norm(shape)
    return _like(x, import_rules["broadcast_in_dim"](
        _data(x), *dyn, shape=out + (_words_dim(x),), broadcast_dimensions=_norm(broadcast_dimensions) + (len(out),)))


def _key_reshape(x, *dyn, new_sizes, dimensions=None, **rest):
    if dimensions is not None:  # the key words' dim stays last
        dimensions = _norm(dimensions) + (len(dimensions),)
    return _like(x, import_rules["reshape"](_data(x), *dyn, new_sizes=_norm(new_sizes) + (_words_dim(x),),
                                            dimensions=dimensions, **rest))


def _key_transpose(x, *, permutation):
    perm = _norm(permutation)
    return _like(x, import_rules["transpose"](_data(x), permutation=perm + (len(perm),)))


def _first_key(xs):
    return next(x for x in xs if isinstance(x, PRNGKeyArray))


def _key_select_n(pred, *cases):
    data = [_data(c) for c in cases]
    shape = tuple(get_aval(data[0]).shape)
    if get_aval(pred).shape:  # (the predicate has the keys' shape: stretch it over the words)
        pred = lax.broadcast_in_dim(pred, shape, tuple(range(len(shape) - 1)))
    return _like(_first_key(cases), import_rules["select_n"](pred, *data))


def _key_concatenate(*xs, dimension):
    return _like(_first_key(xs), import_rules["concatenate"](*[_data(x) for x in xs], dimension=dimension))


def _key_dynamic_slice(x, *idx, slice_sizes):
    zero = np.zeros((), get_aval(idx[0]).dtype) if idx else np.int32(0)
    return _like(x, import_rules["dynamic_slice"](_data(x), *idx, zero,
                                                  slice_sizes=_norm(slice_sizes) + (_words_dim(x),)))


def _key_dynamic_update_slice(x, update, *idx):
    zero = np.zeros((), get_aval(idx[0]).dtype) if idx else np.int32(0)
    return _like(_first_key((x, update)), import_rules["dynamic_update_slice"](_data(x), _data(update), *idx, zero))


def _key_gather(operand, indices, *, dimension_numbers, slice_sizes, **params):
    # the key words are one more offset dim, the output's last
    dn = dimension_numbers
    out_rank = len(dn.offset_dims) + get_aval(indices).ndim - 1
    dn = dn._replace(offset_dims=_norm(dn.offset_dims) + (out_rank,))
    return _like(operand, import_rules["gather"](_data(operand), indices, dimension_numbers=dn,
                                                 slice_sizes=_norm(slice_sizes) + (_words_dim(operand),), **params))


def _key_rev(x, *, dimensions):
    return _like(x, import_rules["rev"](_data(x), dimensions=dimensions))


def _key_squeeze(x, *, dimensions):
    return _like(x, import_rules["squeeze"](_data(x), dimensions=dimensions))


def _key_identity(x, **_):
    return x


key_rules.update({
    "slice": _on_data("slice", _slice_params),
    "squeeze": _key_squeeze,
    "reshape": _key_reshape,
    "broadcast_in_dim": _key_broadcast_in_dim,
    "transpose": _key_transpose,
    "select_n": _key_select_n,
    "concatenate": _key_concatenate,
    "dynamic_slice": _key_dynamic_slice,
    "dynamic_update_slice": _key_dynamic_update_slice,
    "gather": _key_gather,
    "rev": _key_rev,
    "copy": _key_identity, "copy_p": _key_identity, "device_put": lambda *xs, **_: list(xs),
    "optimization_barrier": lambda *xs: list(xs),
    "sharding_constraint": _key_identity, "stop_gradient": _key_identity,
})


# jax.random's jitted helpers whose arithmetic XLA rewrites (see the module docstring)
xla_compiled.update({"_uniform", "_truncated_normal"})
