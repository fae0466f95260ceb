"""The core: abstract values, the jaxpr language, primitives and the tracer (``jax/_src/core.py``)."""
from minixla.core.avals import ShapedArray, get_aval, promote_types, canonicalize_dtype
from minixla.core.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var
from minixla.core.primitive import Primitive, impl_rules, registry, shape_rules
from minixla.core.tracing import Tracer, make_jaxpr, trace_to_jaxpr
from minixla.core.errors import (MinixlaError, ShapeError, DTypeError, ConcretizationTypeError,
                                 TracerBoolConversionError, TracerIntegerConversionError,
                                 UnexpectedTracerError, UnsupportedError)
