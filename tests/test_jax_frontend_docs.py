"""docs/frontend.md (what the JAX front end imports, against jax.lax's primitive list) is current,
and every import rule is a real row: each primitive of the table that says "yes" has a rule."""
import os
import re

import jax
import pytest

from minixla.frontends import coverage, jax_importer

DOC = os.path.join(os.path.dirname(__file__), "..", "docs", "frontend.md")


def test_docs_frontend_is_current():
    with open(DOC) as fh:
        text = fh.read()
    version = re.search(r"for jax ([\w.]+)\)", text).group(1)
    if version != jax.__version__:
        pytest.skip(f"docs/frontend.md was generated for jax {version}, this is jax {jax.__version__}")
    assert text == coverage.markdown(), "run: python -m minixla.frontends.coverage > docs/frontend.md"


def test_the_count_is_the_table():
    done, total = coverage.counts()
    assert total == len(coverage.lax_primitives()) and 0 < done <= total
    assert done == sum(n in jax_importer.import_rules for n in coverage.lax_primitives())
    # a primitive is either imported or listed as missing, never both
    assert not set(jax_importer.import_rules) & set(jax_importer.UNSUPPORTED)


def test_readme_states_the_current_count_and_its_example_runs():
    readme = open(os.path.join(os.path.dirname(__file__), "..", "README.md")).read()
    section = readme.split("## The JAX front end")[1].split("\n## ")[0]
    m = re.search(r"(\d+) of the (\d+) `jax\.lax\.\*_p` import \(jax ([\w.]+)\)", section)
    assert m, "the README's JAX front end section states the count"
    if m.group(3) == jax.__version__:
        assert (int(m.group(1)), int(m.group(2))) == coverage.counts()
    code = section.split("```python\n")[1].split("```")[0]
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    lines = out.getvalue().splitlines()
    assert lines[0] == "True" and "tanh" in lines[1]
