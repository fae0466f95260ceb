"""The course's static site (``python -m tutorials.build``): every chapter becomes a page with
its outputs and pictures, and the contents page links them in chapter order."""
import pathlib
import re
import shutil
import subprocess

import nbformat
import pytest

from tutorials import build

ROOT = pathlib.Path(__file__).parent.parent


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    build.build(out)
    return out


def _pictures(nb):
    return sum("image/png" in o.get("data", {}) or "image/svg+xml" in o.get("data", {})
               for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def test_every_chapter_is_a_linked_page_with_its_pictures(site):
    index = (site / "index.html").read_text()
    notebooks = build.chapters()
    assert len(notebooks) >= 8
    links = re.findall(r'<li value="(\d+)"><a href="([^"]+)">', index)
    assert [name for _, name in links] == [p.stem + ".html" for p in notebooks]
    assert [int(n) for n, _ in links] == [int(p.stem[:2]) for p in notebooks]
    for path in notebooks:
        page = (site / (path.stem + ".html")).read_text()
        nb = nbformat.read(path, as_version=4)
        embedded = len(re.findall(r'<img[^>]+src="data:image/(?:png|svg\+xml)', page))
        assert embedded == _pictures(nb), path.name
        # the outputs are there, not only the code
        first_output = next(o for c in nb.cells if c.cell_type == "code"
                            for o in c.get("outputs", []) if o.get("output_type") == "stream")
        assert first_output["text"].splitlines()[0].strip()[:40] in page.replace("&quot;", '"') \
            .replace("&lt;", "<").replace("&gt;", ">").replace("&#39;", "'").replace("&amp;", "&")
    assert "Quickstart" in (site / "readme.html").read_text()


def test_build_without_notebooks_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no NN_name.ipynb"):
        build.build(tmp_path / "out", directory=tmp_path)


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
def test_pages_render_in_headless_chromium(site, tmp_path):
    """Open a chapter with a picture in headless Chromium; the screenshot is not blank."""
    page = next(site / (p.stem + ".html") for p in build.chapters()
                if _pictures(nbformat.read(p, as_version=4)))
    shot = tmp_path / "shot.png"
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                    "--window-size=1000,1400", f"--screenshot={shot}", page.as_uri()],
                   check=True, capture_output=True, timeout=120)
    matplotlib = pytest.importorskip("matplotlib.image")
    pixels = matplotlib.imread(shot)
    assert pixels.shape[0] == 1400 and pixels[..., :3].std() > 0.05
