"""HLO graphs as DOT, with fusions as clusters; rendering when Graphviz's ``dot`` exists."""
import re
import shutil

import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla.hlo import graphviz
from minixla.hlo.graphviz import hlo_graph

f32 = np.float32


def softmax(x):
    # over the columns (axis 0): not a row fusion (fusion rule 8), so the graph keeps several
    # fusions and temporaries
    e = mnp.exp(x - mnp.max(x, axis=0, keepdims=True))
    return e / mnp.sum(e, axis=0, keepdims=True)


@pytest.fixture(scope="module")
def compiled():
    return minixla.jit(softmax, backend="jax").lower(np.ones((4, 8), f32)).compile()


def _nodes_and_edges(source):
    nodes = set(re.findall(r'^\s*"([^"]+)" \[label=', source, re.M))
    edges = re.findall(r'^\s*"([^"]+)" -> "([^"]+)";', source, re.M)
    return nodes, edges


def test_fusions_are_clusters_with_their_kind(compiled):
    src = compiled.graph().source
    fusions = [i for i in compiled.hlo_module.entry.instructions if i.opcode == "fusion"]
    assert src.startswith('digraph "jit_softmax" {') and src.rstrip().endswith("}")
    assert src.count("subgraph \"cluster_") == len(fusions) == 2
    for f in fusions:
        assert f'subgraph "cluster_{f.name}"' in src
        assert f'%{f.name} (fusion, {f.attrs["kind"]})' in src


def test_every_instruction_is_a_node_and_every_use_an_edge(compiled):
    src = compiled.graph().source
    nodes, edges = _nodes_and_edges(src)
    entry = compiled.hlo_module.entry
    expected_nodes, expected_edges = set(), 0
    for i in entry.instructions:
        if i.opcode == "fusion":
            inner = [j for j in i.fused_computation.instructions if j.opcode != "parameter"]
            expected_nodes |= {j.name for j in inner}
            expected_edges += sum(len(j.operands) for j in inner)
        else:
            expected_nodes.add(i.name)
            expected_edges += len(i.operands)
    assert nodes == expected_nodes
    assert len(edges) == expected_edges
    assert all(a in nodes and b in nodes for a, b in edges)
    # the fusion's parameters are replaced by edges from the values outside: p0 feeds both fusions
    assert sum(1 for a, _ in edges if a == "p0") == 3


def test_buffer_annotations_and_unfused_graph(compiled):
    src = compiled.graph().source
    assert "temp @" in src and "output 0" in src
    before = compiled.graph(fused=False).source
    assert "cluster_" not in before and "exponential" in before
    assert len(_nodes_and_edges(before)[0]) == len(compiled.lowered.hlo_module.entry.instructions)


def test_labels_are_escaped():
    m = minixla.jit(lambda x: x + 1.0).lower(np.ones(2, f32)).hlo_module
    m.entry.root.name = 'odd"name'
    src = hlo_graph(m).source
    assert '"odd\\"name"' in src


def test_without_dot_the_notebook_gets_dot_text(compiled, monkeypatch, tmp_path):
    monkeypatch.setattr(graphviz.shutil, "which", lambda name: None)
    g = compiled.graph()
    assert not graphviz.dot_available()
    assert g._repr_mimebundle_() == {"text/plain": g.source}
    assert g._repr_svg_() is None
    with pytest.raises(RuntimeError, match="not installed"):
        g.svg()
    path = g.render(str(tmp_path / "g.dot"))
    assert open(path).read() == g.source


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_renders_svg_and_png_with_dot(compiled, tmp_path):
    g = compiled.graph()
    svg = g.svg()
    assert "<svg" in svg and "fusion" in svg
    assert "image/svg+xml" in g._repr_mimebundle_()
    png = g.render(str(tmp_path / "g.png"))
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
