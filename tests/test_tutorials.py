"""Every tutorial (a jupytext percent-format source) runs top to bottom as a notebook."""
import pathlib

import jupytext
import pytest
from nbclient import NotebookClient

TUTORIALS = sorted((pathlib.Path(__file__).parent.parent / "tutorials").glob("[0-9]*.py"))


@pytest.mark.parametrize("path", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_executes(path, tmp_path):
    nb = jupytext.read(path)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
