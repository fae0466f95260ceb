"""HLO passes, one module each (``xla/hlo/transforms``, ``xla/service``)."""
