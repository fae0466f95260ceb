"""Backends: turn an optimized ``HloModule`` into something callable."""
