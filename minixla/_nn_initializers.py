"""``minixla.nn.initializers``: weight initializers, as ``jax.nn.initializers`` defines them.

Each factory returns ``init(key, shape, dtype=...) -> array``; for the same key, shape and
dtype the values equal JAX's bit for bit (they are ``minixla.random`` samples times the same
constants, see ``minixla.random`` for the LLVM backend's few-ulp caveat on normal samples).
``variance_scaling`` scales a unit sample to variance ``scale / fan`` (``fan_in``,
``fan_out``, ``fan_avg``, ``fan_geo_avg`` of the shape's in/out/receptive-field sizes):
``truncated_normal`` (truncated to 2 standard deviations, then rescaled by the truncated
distribution's stddev 0.8796...), ``normal`` or ``uniform`` (in ``[-1, 1)`` times ``sqrt(3 var)``).
``orthogonal`` draws the same normal matrix as JAX and orthonormalizes it by minixla's Householder
QR: equal to JAX's to rounding (a few ulp times the QR's conditioning), not bit for bit.
Complex dtypes (JAX has them) are not supported.
"""
from __future__ import annotations

import math

import numpy as np

from minixla import numpy as jnp
from minixla import random
from minixla.core.avals import canonicalize_dtype, canonicalize_shape

__all__ = ["zeros", "ones", "constant", "uniform", "normal", "truncated_normal", "variance_scaling",
           "glorot_uniform", "glorot_normal", "xavier_uniform", "xavier_normal", "lecun_uniform",
           "lecun_normal", "he_uniform", "he_normal", "kaiming_uniform", "kaiming_normal", "orthogonal"]


def _dtype(dtype):
    return canonicalize_dtype(float if dtype is None else dtype)


def zeros(key, shape, dtype=None):
    """An array of zeros (``jax.nn.initializers.zeros``); ``key`` is ignored."""
    return jnp.zeros(shape, _dtype(dtype))


def ones(key, shape, dtype=None):
    """An array of ones (``jax.nn.initializers.ones``); ``key`` is ignored."""
    return jnp.ones(shape, _dtype(dtype))


def constant(value, dtype=None):
    """An initializer filling with ``value`` (``jax.nn.initializers.constant``)."""
    def init(key, shape, dtype=dtype):
        return jnp.full(shape, value, dtype=_dtype(dtype))
    return init


def uniform(scale=1e-2, dtype=None):
    """Uniform in ``[0, scale)`` (``jax.nn.initializers.uniform``)."""
    def init(key, shape, dtype=dtype):
        dtype = _dtype(dtype)
        return jnp.multiply(random.uniform(key, shape, dtype), np.asarray(scale, dtype))
    return init


def normal(stddev=1e-2, dtype=None):
    """Normal with standard deviation ``stddev`` (``jax.nn.initializers.normal``)."""
    def init(key, shape, dtype=dtype):
        dtype = _dtype(dtype)
        return jnp.multiply(random.normal(key, shape, dtype), np.asarray(stddev, dtype))
    return init


def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0):
    """A unit normal truncated to ``(lower, upper)``, times ``stddev``
    (``jax.nn.initializers.truncated_normal``)."""
    def init(key, shape, dtype=dtype):
        dtype = _dtype(dtype)
        return jnp.multiply(random.truncated_normal(key, lower, upper, shape, dtype),
                            np.asarray(stddev, dtype))
    return init


def _compute_fans(shape, in_axis=-2, out_axis=-1, batch_axis=()):
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ValueError(f"Can't compute input and output sizes of a {len(shape)}-dimensional weights "
                         "tensor with default in_axis. Must be at least 2D or specify in_axis explicitly.")

    def size(axes):
        return shape[axes] if isinstance(axes, int) else math.prod(shape[i] for i in axes)
    in_size, out_size, batch_size = size(in_axis), size(out_axis), size(batch_axis)
    receptive_field_size = math.prod(shape) / in_size / out_size / batch_size
    return in_size * receptive_field_size, out_size * receptive_field_size


def variance_scaling(scale, mode, distribution, in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    """Samples of variance ``scale / fan`` (``jax.nn.initializers.variance_scaling``): ``mode``
    is ``fan_in``/``fan_out``/``fan_avg``/``fan_geo_avg``, ``distribution`` is
    ``truncated_normal``/``normal``/``uniform``. Raises ``ValueError`` for another mode or
    distribution, ``UnsupportedError`` for a complex dtype."""
    def init(key, shape, dtype=dtype):
        shape = canonicalize_shape(shape)
        dtype = _dtype(dtype)
        fan_in, fan_out = _compute_fans(shape, in_axis, out_axis, batch_axis)
        denominator = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2,
                       "fan_geo_avg": (fan_in * fan_out) ** 0.5}.get(mode)
        if denominator is None:
            raise ValueError(f"invalid mode for variance scaling initializer: {mode}")
        variance = np.asarray(scale / denominator, dtype)
        if distribution == "truncated_normal":
            # the stddev of a unit normal truncated to (-2, 2)
            stddev = np.asarray(np.sqrt(variance) / np.asarray(.87962566103423978, dtype), dtype)
            return jnp.multiply(random.truncated_normal(key, -2, 2, shape, dtype), stddev)
        if distribution == "normal":
            return jnp.multiply(random.normal(key, shape, dtype), np.asarray(np.sqrt(variance), dtype))
        if distribution == "uniform":
            return jnp.multiply(random.uniform(key, shape, dtype, -1),
                                np.asarray(np.sqrt(np.asarray(3 * variance, dtype)), dtype))
        raise ValueError(f"invalid distribution for variance scaling initializer: {distribution}")
    return init


def _family(scale, mode, distribution, doc):
    def factory(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
        return variance_scaling(scale, mode, distribution, in_axis=in_axis, out_axis=out_axis,
                                batch_axis=batch_axis, dtype=dtype)
    factory.__doc__ = doc
    return factory


glorot_uniform = _family(1.0, "fan_avg", "uniform", "``variance_scaling(1, 'fan_avg', 'uniform')`` "
                         "(``jax.nn.initializers.glorot_uniform``).")
glorot_normal = _family(1.0, "fan_avg", "truncated_normal", "``variance_scaling(1, 'fan_avg', "
                        "'truncated_normal')`` (``jax.nn.initializers.glorot_normal``).")
lecun_uniform = _family(1.0, "fan_in", "uniform", "``variance_scaling(1, 'fan_in', 'uniform')`` "
                        "(``jax.nn.initializers.lecun_uniform``).")
lecun_normal = _family(1.0, "fan_in", "truncated_normal", "``variance_scaling(1, 'fan_in', "
                       "'truncated_normal')`` (``jax.nn.initializers.lecun_normal``).")
he_uniform = _family(2.0, "fan_in", "uniform", "``variance_scaling(2, 'fan_in', 'uniform')`` "
                     "(``jax.nn.initializers.he_uniform``).")
he_normal = _family(2.0, "fan_in", "truncated_normal", "``variance_scaling(2, 'fan_in', "
                    "'truncated_normal')`` (``jax.nn.initializers.he_normal``).")
xavier_uniform, xavier_normal = glorot_uniform, glorot_normal
kaiming_uniform, kaiming_normal = he_uniform, he_normal


def orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """An (semi-)orthogonal matrix times ``scale`` (``jax.nn.initializers.orthogonal``): the
    ``shape[column_axis]`` columns against the product of the other axes as rows, orthonormal
    along the shorter side; from the Q of the QR of a ``normal`` sample, with columns' signs
    fixed by ``sign(diag(R))`` (as ``jax.random.orthogonal``). Raises ValueError for a shape of
    rank < 2; a shape with a zero dimension gives zeros."""
    def init(key, shape, dtype=dtype):
        shape = canonicalize_shape(shape)
        dtype = _dtype(dtype)
        if len(shape) < 2:
            raise ValueError("orthogonal initializer requires at least a 2D shape")
        if any(d == 0 for d in shape):
            return jnp.zeros(shape, dtype)
        n_cols = shape[column_axis]
        n_rows = math.prod(shape) // n_cols
        z = random.normal(key, (max(n_rows, n_cols), min(n_rows, n_cols)), dtype)
        q, r = jnp.linalg.qr(z)
        q = jnp.multiply(q, jnp.expand_dims(jnp.sign(jnp.diagonal(r)), -2))
        if n_rows < n_cols:
            q = jnp.transpose(q)
        q = jnp.reshape(q, tuple(np.delete(np.asarray(shape), column_axis)) + (n_cols,))
        q = jnp.moveaxis(q, -1, column_axis)
        return jnp.multiply(np.asarray(scale, dtype), q)
    return init
