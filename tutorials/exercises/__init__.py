"""The student's slots, one module per tutorial exercise (``chNN_name.py``).

Each function here raises ``NotImplementedError`` until you write it. Check your code with
``MINIXLA_EXERCISES=student python -m pytest tests/exercises/test_chNN_name.py``; without the
variable the same tests run against the reference solutions in ``tutorials/solutions/``.
"""
