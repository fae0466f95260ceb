from minixla.numpy.elementwise import *  # noqa: F401,F403
from minixla.numpy.elementwise import _IndexUpdateHelper, _arr, _canon_axes, _canon_axis1, _getitem, _promote_inexact  # noqa: F401
for _v in list(globals().values()):  # (intermediate step of the split: the public module name)
    if callable(_v) and getattr(_v, "__module__", "") == "minixla.numpy.elementwise" and hasattr(_v, "__wrapped__"):
        _v.__module__ = "minixla.numpy"
