"""The loader of the exercise tests: each ``test_chNN_name.py`` checks one tutorial exercise.

By default they import the reference solution (``tutorials/solutions/chNN_name.py``), so the
suite proves the tests pass on a right answer. ``MINIXLA_EXERCISES=student`` makes them import
the student's slot (``tutorials/exercises/chNN_name.py``) instead.
"""
import importlib
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

_PACKAGES = {"reference": "tutorials.solutions", "student": "tutorials.exercises"}


def exercise_module(name: str):
    """The module ``name`` of the solutions or of the student's slots (``MINIXLA_EXERCISES``)."""
    which = os.environ.get("MINIXLA_EXERCISES", "reference")
    if which not in _PACKAGES:
        raise ValueError(f"MINIXLA_EXERCISES must be one of {sorted(_PACKAGES)}, got {which!r}")
    return importlib.import_module(f"{_PACKAGES[which]}.{name}")
