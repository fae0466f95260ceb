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
from minixla.interpreters.custom_gradient import closure_convert, custom_gradient
from minixla.core.tracing import ensure_compile_time_eval
from minixla.debug_nans import debug_infs, debug_nans
from minixla.interpreters.remat import checkpoint, remat, checkpoint_policies
from minixla.sharding.api import device_put
from minixla.core.name_stack import named_scope, named_call
from minixla.runtime_api import (block_until_ready, device_get, devices, local_devices, device_count,
                                 local_device_count, default_backend, process_index, process_count,
                                 clear_caches, disable_jit)
from minixla.interpreters.api import jacobian, typeof, float0, ShapeDtypeStruct
from minixla import nn, random  # (as `import jax` gives jax.nn and jax.random)
from minixla import scipy  # (jax.scipy.special's functions the special primitives cover)
from minixla import tree, tree_util  # (JAX's pytree functions: one registry)

__all__ = ["make_jaxpr", "jit", "config", "lax", "numpy", "errors", "ShapedArray", "Lowered", "Compiled",
           "jvp", "linearize", "vjp", "grad", "value_and_grad", "jacfwd", "jacrev", "hessian", "vmap",
           "eval_shape", "linear_transpose", "custom_jvp", "custom_vjp", "checkpoint", "remat",
           "checkpoint_policies", "import_jaxpr", "device_put", "nn", "random", "scipy",
           "named_scope", "named_call", "block_until_ready", "device_get", "devices", "local_devices",
           "device_count", "local_device_count", "default_backend", "process_index", "process_count",
           "clear_caches", "disable_jit", "jacobian", "typeof", "float0", "ShapeDtypeStruct", "tree",
           "tree_util", "custom_gradient", "closure_convert", "ensure_compile_time_eval", "debug_nans",
           "debug_infs"]


# The objects alive once minixla is imported -- the modules, classes and functions of jax,
# numpy and minixla, ~300k, as long-lived as the process -- go to the garbage collector's
# permanent generation (``gc.freeze``, as pre-fork servers do), so a full collection no longer
# scans them all. The first full collection falls due soon after the imports: it landed in a
# program's first call and cost ~0.06 s on an idle 2-vCPU host (0.15-0.2 s loaded), half of
# a first call served by the persistent cache (``benchmarks/cold_start.py``), and every later
# full collection, e.g. while compiling a large program, scanned them again. Reference
# counting still frees these objects; only reference cycles among them are never collected.
# ``gc.unfreeze()`` undoes it.
import gc as _gc  # noqa: E402

_gc.freeze()


def __getattr__(name):
    # Imported when first used: the JAX front end imports ``jax.extend`` (~0.15 s), which a
    # program traced by minixla's own tracer never needs (``tests/test_import_time.py``).
    if name == "import_jaxpr":
        from minixla.frontends import import_jaxpr
        return import_jaxpr
    raise AttributeError(f"module 'minixla' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
