"""``minixla.numpy``: the NumPy-style API, built only from ``minixla.lax`` primitives (``jax.numpy``).

What this layer adds over ``lax``: JAX's dtype promotion (weak types included, via
``jax.dtypes``), NumPy broadcasting (made explicit with ``broadcast_in_dim``), ``axis``/``keepdims``/
``dtype`` arguments, indexing (basic and integer-array, as gathers) and ``x.at[idx]`` updates
(as scatters). Functions accept tracers, numpy arrays and Python scalars, with ``jax.numpy``'s
signatures; results, result dtypes and weak types equal ``jax.numpy``'s.

Where ``jax.numpy`` builds a function from several ``lax`` ops (``floor_divide``, ``remainder``,
``var``, ``power`` on integers, ...) we build it from the same ops in the same order, so the
roundings are the same and the results bit-identical.

The modules, each importing only from the ones before it (two cycles, ``asarray`` <-> ``_arr``
and ``asarray`` <-> ``stack``, are closed by an import at the end of ``promotion``/``creation``):

- ``promotion``: dtype names, promotion, casting, broadcasting, axis/index argument checks
- ``creation``: ``asarray``, ``zeros``/``ones``/``full`` (``*_like``), ``arange``, ``eye``, ...
- ``manipulation``: reshape, transpose, concatenate/stack, split, flip, pad, tile
- ``elementwise``: binary and unary functions, ``where``, ``clip``, ``select``
- ``reductions``: ``sum`` ... ``any``, ``mean``/``var``/``std``, ``argmax``, ``cumsum``
- ``contractions``: ``matmul``, ``dot``, ``tensordot``, ``einsum``
- ``indexing``: ``take``/``take_along_axis``/``repeat``, ``x[idx]``, ``x.at[idx]``
- ``misc``: ``shape``/``ndim``/``size``, ``result_type``, ``can_cast``, ``logaddexp``
- ``ufuncs``: ``hypot``, ``copysign``, ``logaddexp2``, ``fmax``, ``sinc``, ``isclose``, ...
- ``matrices``: ``tril``/``triu``, ``diag``/``diagonal``/``trace``, ``meshgrid``, ``kron``, ``cross``
- ``sequences``: ``diff``, ``convolve``/``correlate``, ``polyval``, ``cov``, ``isin``, ``bincount``
- ``sorting``: ``sort``/``argsort``/``lexsort``, ``partition``/``argpartition``
- ``quantiles``: ``quantile``/``percentile``/``median`` (+ ``nan*``), ``searchsorted``, ``digitize``,
  ``histogram``, ``interp``
- ``setops``: ``nonzero``/``argwhere``/``flatnonzero``, ``unique`` (+ ``unique_*``), ``partition``
- ``array_api``: the Array API's names (``isdtype``, ``permute_dims``, ``concat``, ``nextafter``,
  ``matvec``/``vecmat``, ...), ``issubdtype`` and NumPy's abstract scalar classes, ``fabs``, ``nancumsum``
- ``floatbits``: ``frexp``/``ldexp``, ``spacing``, ``modf``, ``gcd``/``lcm``, ``i0``, ``bitwise_count``
- ``editing``, ``index_tricks``, ``polys``, ``windows_fns``, ``functional``: see each module
  (``block``, ``insert``, ``mgrid``, ``polyint``, ``hanning``, ``apply_along_axis``, ...)

This module is the public face: it re-exports every module's names.
"""
from minixla.core import errors
from minixla.numpy import promotion, creation, manipulation, elementwise  # noqa: I001 (in layer order)
from minixla.numpy import reductions, contractions, indexing, misc, ufuncs, matrices, sequences
from minixla.numpy import sorting, quantiles, setops, array_api, floatbits, editing, index_tricks
from minixla.numpy import polys, windows_fns, functional, setpairs, vectorize, numeric
from minixla.numpy.promotion import *  # noqa: F401,F403
from minixla.numpy.promotion import _arr, _canon_axes, _canon_axis1, _promote_inexact  # noqa: F401 (for nn)
from minixla.numpy.creation import *  # noqa: F401,F403
from minixla.numpy.manipulation import *  # noqa: F401,F403
from minixla.numpy.elementwise import *  # noqa: F401,F403
from minixla.numpy.reductions import *  # noqa: F401,F403
from minixla.numpy.contractions import *  # noqa: F401,F403
from minixla.numpy.indexing import *  # noqa: F401,F403
# (Tracer's ``x[idx]`` and ``x.at`` reach these)
from minixla.numpy.indexing import _IndexUpdateHelper, _IndexUpdateRef, _getitem  # noqa: F401
from minixla.numpy.misc import *  # noqa: F401,F403
from minixla.numpy.ufuncs import *  # noqa: F401,F403
from minixla.numpy.matrices import *  # noqa: F401,F403
from minixla.numpy.sequences import *  # noqa: F401,F403
from minixla.numpy.sorting import sort, argsort, lexsort  # noqa: F401
from minixla.numpy.quantiles import *  # noqa: F401,F403
from minixla.numpy.setops import *  # noqa: F401,F403
from minixla.numpy.array_api import *  # noqa: F401,F403
from minixla.numpy.floatbits import *  # noqa: F401,F403
from minixla.numpy.editing import *  # noqa: F401,F403
from minixla.numpy.index_tricks import *  # noqa: F401,F403
from minixla.numpy.polys import *  # noqa: F401,F403
from minixla.numpy.windows_fns import *  # noqa: F401,F403
from minixla.numpy.functional import *  # noqa: F401,F403
from minixla.numpy.setpairs import *  # noqa: F401,F403
from minixla.numpy.vectorize import *  # noqa: F401,F403
from minixla.numpy.numeric import *  # noqa: F401,F403

# NumPy's dtype aliases, as jax.numpy's (the same objects as the sized names; no complex here).
double = float_ = float64  # noqa: F405
single = float32  # noqa: F405
int_ = int64  # noqa: F405
uint = uint64  # noqa: F405
bool = bool_  # noqa: A001,F405 (jnp.bool; shadows the builtin in this module only)

# ---------------------------------------------------------------------------------------
# Every public function is an API boundary: an error escaping it names the function, the
# shapes it was given and the user's line (``errors.api_boundary``). Keep this at the end.

def _at_operands(ref, *args, **kwargs):
    return (ref.array, *args), kwargs


errors.wrap_package_functions(globals(), [promotion, creation, manipulation, elementwise, reductions,
                                          contractions, indexing, misc, ufuncs, matrices, sequences,
                                          sorting, quantiles, setops, floatbits, editing, index_tricks, polys,
                                          windows_fns, functional, setpairs, vectorize, numeric], extra=[("_getitem", "getitem")])
for _name in ("get", "set", "add", "multiply", "mul", "min", "max"):
    setattr(_IndexUpdateRef, _name, errors.api_boundary(getattr(_IndexUpdateRef, _name), f"at[].{_name}",
                                                        _at_operands))
del _name

# ``minixla.numpy.linalg`` (``jnp.linalg``): a submodule, reachable as an attribute
from minixla.numpy import linalg  # noqa: E402,F401
