"""``minixla.random``: JAX's counter-based PRNG, bit for bit.

The same names, signatures and results as ``jax.random`` (JAX 0.10, threefry2x32 with
``jax_threefry_partitionable=True``, its default): for the same key, shape and dtype every
function returns JAX's bits, eagerly and under ``minixla.jit`` on both backends (the
samplers built on ``log``/``log1p``/``erf`` -- ``normal``, ``truncated_normal``, ``gumbel``,
``categorical``, ``exponential``, ``laplace``, ``logistic`` -- are bit-identical eagerly and on
the JAX hand-off; the LLVM backend's own ``log``/``log1p`` are within 1-2 ulp of XLA's, so
there a few percent of those values differ in the last bits).

- keys: ``key`` (typed, a ``PRNGKeyArray``), ``PRNGKey`` (raw ``uint32[2]``), ``split``,
  ``fold_in``, ``key_data``, ``wrap_key_data``, ``key_impl``
- samplers: ``bits``, ``uniform``, ``normal``, ``truncated_normal``, ``bernoulli``,
  ``randint``, ``categorical``, ``gumbel``, ``permutation``, ``choice``, ``exponential``,
  ``laplace``, ``logistic``, ``rademacher``; the gamma family (``minixla.random.gamma``):
  ``gamma``, ``loggamma``, ``beta``, ``dirichlet``, ``chisquare``, ``t`` (Marsaglia-Tsang
  rejection loops, the keys split as JAX splits them); ``poisson`` (``minixla.random.poisson``:
  Knuth's method below ``lam = 10``, transformed rejection above, ``while_loop`` s under jit)
- transforms of those draws (``minixla.random.transforms``): ``cauchy``, ``lognormal``,
  ``pareto``, ``rayleigh``, ``weibull_min``, ``maxwell``, ``double_sided_maxwell``,
  ``triangular``, ``wald``, ``f``, ``generalized_normal``, ``ball``, ``multivariate_normal``,
  ``orthogonal``; discrete ones (``minixla.random.discrete``): ``geometric``, ``binomial``
  (inversion below ``n p = 10``, BTRS rejection above), ``multinomial``; ``clone``, ``key_dtype``

Everything is built from ``minixla.lax`` ops (the hash is ``threefry.threefry2x32``), so it
traces, lowers, fuses and differentiates like any other code. ``key(seed, impl="rbg")`` and
``"unsafe_rbg"`` make JAX's rbg keys (``minixla.random.rbg``: bits from
``lax.rng_bit_generator``), as does ``jax.config.jax_default_prng_impl`` for raw keys.
"""
from minixla.core import errors
from minixla.random import keys, samplers, threefry, gamma as _gamma_module  # noqa: F401
from minixla.random.keys import (PRNGKey, PRNGKeyArray, fold_in, key, key_data, key_impl,  # noqa: F401
                                 split, wrap_key_data)
from minixla.random.samplers import (bernoulli, bits, categorical, exponential, gumbel,  # noqa: F401
                                     laplace, logistic, normal, permutation, choice, rademacher, randint,
                                     truncated_normal, uniform)
from minixla.random.threefry import threefry2x32, threefry_2x32  # noqa: F401
from minixla.random.gamma import beta, chisquare, dirichlet, gamma, loggamma, random_gamma_p, t  # noqa: F401
from minixla.random.poisson import poisson  # noqa: F401
from minixla.random.keys import clone, key_dtype  # noqa: F401
from minixla.random.transforms import (ball, cauchy, double_sided_maxwell, f, generalized_normal,  # noqa: F401
                                       lognormal, maxwell, multivariate_normal, orthogonal, pareto,
                                       rayleigh, triangular, wald, weibull_min)
from minixla.random.discrete import binomial, geometric, multinomial  # noqa: F401

__all__ = ["PRNGKey", "PRNGKeyArray", "key", "split", "fold_in", "key_data", "wrap_key_data",
           "key_impl", "bits", "uniform", "normal", "truncated_normal", "bernoulli", "randint",
           "categorical", "gumbel", "permutation", "choice", "exponential", "laplace", "logistic", "rademacher",
           "gamma", "loggamma", "beta", "dirichlet", "chisquare", "t", "poisson", "threefry2x32", "threefry_2x32",
           "clone", "key_dtype", "cauchy", "lognormal", "pareto", "rayleigh", "weibull_min", "maxwell",
           "double_sided_maxwell", "triangular", "wald", "f", "generalized_normal", "ball",
           "multivariate_normal", "orthogonal", "geometric", "binomial", "multinomial", "random_gamma_p"]
