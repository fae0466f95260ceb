"""docs/api.md — minixla's names next to JAX's, per module — is current."""
import importlib
import pathlib
import re

import jax
import pytest

from minixla import api_coverage

DOC = pathlib.Path(__file__).parent.parent / "docs" / "api.md"


def test_doc_lists_what_minixla_has():
    """The "present" lists match minixla as it is (whatever jax version made the table)."""
    text = DOC.read_text()
    for jax_name, ours_name, has, _ in api_coverage.rows():
        section = text.split(f"## `{jax_name}`\n", 1)[1].split("\n## ", 1)[0]
        listed = re.findall(r"`([^`]+)`", section.split("**Missing", 1)[0])
        theirs = set(api_coverage.public_names(importlib.import_module(jax_name)))
        assert set(listed) & theirs <= set(has), f"{ours_name} lost {sorted(set(listed) & theirs - set(has))}"
        assert set(has) <= set(listed), (
            f"{ours_name} gained {sorted(set(has) - set(listed))}: "
            "python -m minixla.api_coverage > docs/api.md")


def test_doc_is_current_for_the_jax_it_names():
    version = re.search(r"against jax (\S+);", DOC.read_text()).group(1)
    if version != jax.__version__:
        pytest.skip(f"docs/api.md was made with jax {version}, this is {jax.__version__}")
    assert DOC.read_text() == api_coverage.markdown(), "python -m minixla.api_coverage > docs/api.md"
