"""PRNG keys: ``key``/``PRNGKey``, ``split``, ``fold_in``, ``key_data``, ``wrap_key_data``.

A *raw* key is what ``jax.random.PRNGKey`` returns: a ``uint32[2]`` array (``uint32[..., 2]``
for several). A *typed* key is what ``jax.random.key`` returns; JAX gives it an extended dtype
``key<fry>`` with scalar shape. minixla has no extended dtypes in its tracer, so a typed key
is a ``PRNGKeyArray``: a small pytree (registered with ``jax.tree_util``) around the raw
``uint32[..., 2]`` data, with the key's ``shape``/``ndim`` (the data's shape without the
trailing 2) and ``dtype`` (``key<fry>``). Being a pytree, it passes through ``minixla.jit``,
``vmap`` and ``grad`` as its data; every function of ``minixla.random`` accepts either kind
and returns the kind it was given, as JAX does.

Three implementations, as JAX's (``minixla.random.rbg``): ``threefry2x32`` (the default,
``uint32[..., 2]`` data), ``rbg`` and ``unsafe_rbg`` (``uint32[..., 4]``, bits from XLA's
``rng_bit_generator``). ``key(seed, impl=...)`` picks one; a typed key carries it in its
dtype (``key<fry>``, ``key<rbg>``, ``key<urbg>``); raw keys and ``impl=None`` use
``jax.config.jax_default_prng_impl``.
"""
from __future__ import annotations

import numpy as np
from jax import tree_util

from minixla import lax
from minixla.core import errors
from minixla.core.avals import canonicalize_dtype, get_aval
from minixla.core.tracing import Tracer
from minixla.random import rbg as _rbg

IMPL = "threefry2x32"


class KeyDType:
    """The dtype of a typed key (JAX's ``key<fry>``, ``key<rbg>``, ``key<urbg>``: a
    ``jax.dtypes.prng_key`` subdtype); ``impl`` is its implementation's name."""

    def __init__(self, impl=IMPL):
        self.impl = impl
        self.name = f"key<{_rbg.IMPLS[impl].tag}>"

    def __repr__(self):
        return self.name

    __str__ = __repr__

    def __eq__(self, other):
        return (isinstance(other, KeyDType) and other.impl == self.impl) or other == self.name

    def __hash__(self):
        return hash(self.name)


@tree_util.register_pytree_node_class
class PRNGKeyArray:
    """An array of typed keys (``jax.random.key``'s result): ``shape`` is the keys' shape,
    ``dtype`` is ``key<fry>`` (``key<rbg>``/``key<urbg>``); the ``uint32[*shape, 2]``
    (``[*shape, 4]`` for rbg) data is ``key_data``. ``impl``: a name or None (the default
    implementation if its key size fits the data, else the one of the data's size)."""

    def __init__(self, data, impl=None):
        aval = get_aval(data)
        impl = _impl_for_data(aval, impl)
        if aval.dtype != np.uint32 or not aval.shape or aval.shape[-1] != impl.key_size:
            raise errors.DTypeError(f"{impl.name} key data must be uint32[..., {impl.key_size}], got "
                                    f"{aval.dtype.name}{list(aval.shape)}")
        self._base = data
        self._impl = impl.name

    @property
    def dtype(self):
        return KeyDType(self._impl)

    @property
    def impl(self):
        return _rbg.IMPLS[self._impl]

    @property
    def shape(self):
        return tuple(get_aval(self._base).shape[:-1])

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __getitem__(self, idx):
        if not self.shape:
            raise IndexError("too many indices for a scalar key array")
        idx = idx if isinstance(idx, tuple) else (idx,)
        if any(i is Ellipsis for i in idx):
            raise errors.UnsupportedError("Ellipsis in a key array index is not supported")
        return PRNGKeyArray(self._base[idx + (slice(None),)], self._impl)

    def reshape(self, *shape):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return PRNGKeyArray(lax.reshape(self._base, (*shape, self.impl.key_size)), self._impl)

    def __eq__(self, other):
        if not isinstance(other, PRNGKeyArray):
            return NotImplemented
        import minixla.numpy as mnp
        return mnp.all(mnp.equal(self._base, other._base), axis=-1)

    def __repr__(self):
        if isinstance(self._base, Tracer):
            return f"PRNGKeyArray(shape={self.shape}, dtype={self.dtype}) traced"
        return f"Array({self.shape}, dtype={self.dtype}) overlaying:\n{np.asarray(self._base)}"

    def tree_flatten(self):
        return (self._base,), self._impl

    @classmethod
    def tree_unflatten(cls, aux, children):
        obj = object.__new__(cls)
        obj._base = children[0]
        obj._impl = aux if aux is not None else IMPL
        return obj


def _impl_for_data(aval, impl):
    if impl is not None:
        return _rbg.resolve(impl)
    default = _rbg.default_impl()
    size = aval.shape[-1] if aval.shape else None
    if size == default.key_size:
        return default
    return _rbg.IMPLS["rbg"] if size == 4 else _rbg.IMPLS[IMPL]


def _check_impl(impl):
    """The ``PRNGImpl`` named by ``impl`` (None: ``jax.config.jax_default_prng_impl``)."""
    return _rbg.resolve(impl)


def _seed_array(seed, ctor):
    """A scalar integer seed as JAX takes it: a Python int becomes int64, then the default int
    (so in 32-bit mode it wraps to int32, as ``jax.random.PRNGKey(2**40 + 3)`` keeps 3)."""
    if isinstance(seed, PRNGKeyArray):
        raise TypeError(f"{ctor} accepts a scalar seed, but was given a PRNG key.")
    if isinstance(seed, bool):
        seed = int(seed)
    if isinstance(seed, int):
        seed = np.int64(seed)
        return seed.astype(canonicalize_dtype(np.int64))
    aval = get_aval(seed)
    if aval.shape:
        raise TypeError(f"{ctor} accepts a scalar seed, but was given an array of shape "
                        f"{aval.shape} != (). Use jax.vmap for batching")
    if aval.dtype.kind not in "iu":
        raise errors.DTypeError(f"PRNG key seed must be an integer; got {aval.dtype.name}")
    return seed


def PRNGKey(seed, *, impl=None):
    """A raw key, ``uint32[2]`` (``jax.random.PRNGKey``): ``[seed >> 32, seed & 0xFFFFFFFF]``.

    ``seed``: a Python int or an integer scalar (traced or not). Raises ``TypeError`` for an
    array seed or a key."""
    return _check_impl(impl).seed(_seed_array(seed, "PRNGKey"))


def key(seed, *, impl=None, dtype=None):
    """A typed scalar key (``jax.random.key``): a ``PRNGKeyArray`` of shape ``()`` whose data
    is ``PRNGKey(seed)``."""
    impl = _check_impl(impl if impl is not None else dtype)
    return PRNGKeyArray(impl.seed(_seed_array(seed, "key")), impl.name)


def key_impl(keys):
    """The keys' implementation (``jax.random.key_impl``): ``'threefry2x32'``, ``'rbg'`` or
    ``'unsafe_rbg'`` (a raw key: the default one)."""
    _, impl = _key_base("key_impl", keys, allow_batched=True)
    return (impl or _rbg.default_impl()).name


def is_jax_key(x) -> bool:
    """Whether ``x`` is a concrete JAX typed key array (``jax.random.key``'s result: a
    ``jax.Array`` of an extended ``key<...>`` dtype)."""
    import jax
    return (isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer)
            and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key))


def from_jax_key(x, name="minixla.random"):
    """A JAX typed key array as the ``PRNGKeyArray`` of the same threefry2x32 key data
    (``jax.random.key_data``), so ``minixla.random`` and ``minixla.jit`` take what
    ``jax.random.key`` returns; anything else is returned unchanged. Raises
    ``UnsupportedError`` for a key of an implementation minixla lacks (``philox4x32``...)."""
    if not is_jax_key(x):
        return x
    import jax
    impl = str(jax.random.key_impl(x))
    if impl not in _rbg.IMPLS:
        raise errors.UnsupportedError(
            f"{name}: minixla.random implements threefry2x32, rbg and unsafe_rbg keys, got a JAX key of "
            f"impl={impl!r}\n  at: {errors.user_source_line()}")
    return PRNGKeyArray(np.asarray(jax.random.key_data(x)), impl)


def jax_keys_to_minixla(tree, name="minixla"):
    """``tree`` with every JAX typed key replaced by its ``PRNGKeyArray`` (``from_jax_key``), for
    the entry points that take pytrees of arrays (``jit``, ``make_jaxpr``, ``vmap``): the key
    then flattens to its ``uint32[..., 2]`` data. The same object when there is none."""
    if not any(is_jax_key(leaf) for leaf in tree_util.tree_leaves(tree)):
        return tree
    return tree_util.tree_map(lambda x: from_jax_key(x, name), tree)


def _key_base(name, k, allow_batched=False):
    """``(uint32[..., 2] data, was_typed)`` of a typed or raw key; checks its type and shape.
    A JAX typed key (``jax.random.key``) is taken as the typed key of its data. ``was_typed`` is
    the typed key's ``PRNGImpl`` (truthy) or False; a raw key's size must be the default
    implementation's."""
    k = from_jax_key(k, name)
    if isinstance(k, PRNGKeyArray):
        base, typed, kshape = k._base, k.impl, k.shape
    else:
        # JAX's messages (jax._src.prng's checks of raw key data), with the user's line
        at = f"\n  at: {errors.user_source_line()}"
        if not all(hasattr(k, a) for a in ("ndim", "shape", "dtype")):
            raise errors.DTypeError("JAX encountered invalid PRNG key data: expected key_data to "
                                    f"have ndim, shape, and dtype attributes. Got {k!r}{at}")
        aval = get_aval(k)
        impl = _rbg.default_impl()
        if aval.dtype != np.uint32:
            raise errors.DTypeError("JAX encountered invalid PRNG key data: expected "
                                    f"key_data.dtype = uint32; got dtype={aval.dtype.name}{at}")
        if not aval.shape or aval.shape[-1] != impl.key_size:
            raise errors.DTypeError(
                "JAX encountered invalid PRNG key data: expected key_data.shape to end with "
                f"({impl.key_size},); got shape={tuple(aval.shape)} for impl={impl.name}{at}")
        base, typed, kshape = k, False, tuple(aval.shape[:-1])
    if not allow_batched and kshape:
        # (JAX names a raw key's data shape, a typed key's own shape)
        shown = kshape if typed else tuple(get_aval(base).shape)
        raise errors.ShapeError(f"{name} accepts a single key, but was given a key array of shape "
                                f"{shown} != (). Use jax.vmap for batching.\n"
                                f"  at: {errors.user_source_line()}")
    return base, typed


def _rewrap(typed, base):
    return PRNGKeyArray(base, typed.name if typed is not True else None) if typed else base


def split(key, num=2):
    """``num`` new keys (an int, or a tuple: the keys' shape) from one key (``jax.random.split``).
    Returns ``uint32[*num, 2]`` for a raw key, a ``PRNGKeyArray`` of shape ``num`` for a typed one.
    Raises ``ValueError`` for a batched key (use ``vmap``)."""
    base, typed = _key_base("split", key)
    shape = tuple(num) if isinstance(num, (tuple, list)) else (int(num),)
    return _rewrap(typed, (typed or _rbg.default_impl()).split(base, shape))


def fold_in(key, data):
    """A new key from ``key`` and the integer scalar ``data`` (taken as uint32, wrapping), as
    ``jax.random.fold_in``."""
    base, typed = _key_base("fold_in", key)
    if np.ndim(data) if not isinstance(data, Tracer) else get_aval(data).ndim:
        raise TypeError("fold_in accepts a scalar, but was given an array of"
                        f"shape {get_aval(data).shape} != (). Use jax.vmap for batching.")
    if isinstance(data, int) and not isinstance(data, bool):
        data = np.asarray(data).astype(np.uint32)  # (jnp.asarray(data, 'uint32') wraps)
    return _rewrap(typed, (typed or _rbg.default_impl()).fold_in(base, data))


def key_data(keys):
    """The ``uint32[..., 2]`` data of typed or raw keys (``jax.random.key_data``)."""
    base, _ = _key_base("key_data", keys, allow_batched=True)
    return base


def wrap_key_data(key_bits_array, *, impl=None, dtype=None):
    """Typed keys from their ``uint32[..., 2]`` (rbg: ``[..., 4]``) data
    (``jax.random.wrap_key_data``); ``impl=None``: the default implementation."""
    impl = _check_impl(impl if impl is not None else dtype)
    if isinstance(key_bits_array, PRNGKeyArray):
        raise TypeError("wrap_key_data takes raw key data, got a typed key array")
    return PRNGKeyArray(key_bits_array, impl.name)


def key_dtype(impl_spec=None):
    """The dtype of typed keys of an implementation (``jax.random.key_dtype``): ``key<fry>``
    (default), ``key<rbg>``, ``key<urbg>``. Raises ``UnsupportedError`` for another one."""
    return KeyDType(_check_impl(impl_spec).name)


def clone(key):
    """The same key, for reuse (``jax.random.clone``: outside JAX's key-reuse checking, which
    minixla does not have, the identity)."""
    return key
