"""Front ends: other ways than minixla's own tracer to get a jaxpr into the pipeline.

XLA takes HLO from several front ends (JAX, TensorFlow, PyTorch/XLA); minixla takes jaxprs from
two: its own tracer (``minixla.core.tracing``) and JAX's (``jax_importer``: a ``jax.make_jaxpr``
jaxpr imported primitive by primitive into minixla's jaxpr, then compiled by minixla's passes
and backends).
"""
from minixla.frontends.jax_importer import import_jaxpr, import_rules  # noqa: F401
# (the linear-algebra rules live in their own module; importing it registers them)
from minixla.frontends import jax_linalg  # noqa: E402,F401
