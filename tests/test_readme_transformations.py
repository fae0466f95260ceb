"""The README's "Transformations" example prints what the README shows."""
import contextlib
import io
import os
import re

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def test_readme_transformations_example_output():
    text = open(README).read()
    section = text.split("## Transformations", 1)[1].split("\n## ", 1)[0]
    code, out = re.findall(r"```(?:python)?\n(.*?)```", section, re.S)[:2]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(code, "README.md", "exec"), {})
    assert buf.getvalue() == out


def test_readme_custom_derivatives_example_output():
    text = open(README).read()
    section = text.split("## Transformations", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(?:python)?\n(.*?)```", section, re.S)
    setup, _, code, out = blocks[:4]
    buf = io.StringIO()
    namespace = {}
    with contextlib.redirect_stdout(buf):
        exec(compile(setup.split("\nw, x =")[0], "README.md", "exec"), namespace)  # the imports
        exec(compile(code, "README.md", "exec"), namespace)
    assert buf.getvalue() == out
