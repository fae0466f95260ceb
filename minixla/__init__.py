"""minixla: an educational, working XLA-style compiler for array programs.

Pipeline: Python fn --trace--> jaxpr --lower--> HLO --passes--> optimized HLO --backend--> executable.
``minixla.make_jaxpr`` shows the jaxpr, ``minixla.jit(f).lower(*args).as_text()`` the HLO,
``.compile().as_text()`` the optimized HLO; ``minixla.jit(f)(*args)`` runs it.
"""
from minixla.core.tracing import make_jaxpr
from minixla.core.avals import ShapedArray
from minixla.core import errors
from minixla.config import config
from minixla.jit import jit, Lowered, Compiled
from minixla import lax, numpy
from minixla.interpreters.api import (jvp, linearize, vjp, grad, value_and_grad, jacfwd, jacrev, hessian,
                                      vmap, eval_shape, linear_transpose)
from minixla.interpreters.custom_derivatives import custom_jvp, custom_vjp
from minixla.interpreters.remat import checkpoint, remat, checkpoint_policies
from minixla.frontends import import_jaxpr
from minixla.sharding.api import device_put
from minixla import nn, random  # (as `import jax` gives jax.nn and jax.random)

__all__ = ["make_jaxpr", "jit", "config", "lax", "numpy", "errors", "ShapedArray", "Lowered", "Compiled",
           "jvp", "linearize", "vjp", "grad", "value_and_grad", "jacfwd", "jacrev", "hessian", "vmap",
           "eval_shape", "linear_transpose", "custom_jvp", "custom_vjp", "checkpoint", "remat",
           "checkpoint_policies", "import_jaxpr", "device_put", "nn", "random"]
