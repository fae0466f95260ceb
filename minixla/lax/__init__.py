from minixla.lax.elementwise import *  # noqa: F401,F403
from minixla.lax.elementwise import _convert_weak  # noqa: F401
for _v in list(globals().values()):  # (intermediate step of the split: the public module name)
    if callable(_v) and getattr(_v, "__module__", "") == "minixla.lax.elementwise" and hasattr(_v, "__wrapped__"):
        _v.__module__ = "minixla.lax"
