"""Graph pictures: make_dot (torchviz's meaning) and compiled IR graphs, rendered to real PNGs."""
import re
import shutil

import pytest

import fusegrad as fg
import fusegrad.nn as nn
from fusegrad.viz import make_dot

graphviz = pytest.importorskip("graphviz")
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot program is not installed")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _labels(dot) -> list:
    """Node labels of a DOT source (the first line of each), in order."""
    out = []
    for m in re.finditer(r'^\s*(?:"[^"]*"|\w+) \[label=(?:"([^"]*)"|(\S+?))[ \]]', dot.source, re.M):
        out.append((m.group(1) if m.group(1) is not None else m.group(2)).split("\n")[0])
    return out


def _torch_names(torch_out) -> list:
    """grad_fn class names reachable from a PyTorch output: the oracle for the picture's nodes."""
    seen, stack, names = set(), [torch_out.grad_fn], []
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        names.append(type(fn).__name__)
        stack.extend(n for n, _ in fn.next_functions)
    return sorted(names)


@pytest.mark.torch
def test_make_dot_nodes_match_torch_autograd_graph():
    torch = pytest.importorskip("torch")

    def expr(L):
        a = L.tensor([2.0, 1.0], requires_grad=True)
        b = L.tensor([3.0, 0.5], requires_grad=True)
        return a, b, ((a * b + 1).log() * a.exp()).sum()
    a, b, y = expr(fg)
    dot = make_dot(y, params={"a": a, "b": b})
    assert isinstance(dot, graphviz.Digraph)
    labels = _labels(dot)
    fn_labels = sorted(lab for lab in labels if lab.endswith("Backward0") or lab.endswith("Backward1")
                       or lab == "AccumulateGrad")
    assert fn_labels == _torch_names(expr(torch)[2])
    # leaves named from params (light blue), the output green; one edge per next_functions entry
    assert 'label="a\n (2)" fillcolor=lightblue' in dot.source and 'label="b\n (2)" fillcolor=lightblue' in dot.source
    assert 'label="\n ()" fillcolor=darkolivegreen1' in dot.source
    n_edges = len(re.findall(r"->", dot.source))
    assert n_edges == 1 + 2 + len(fn_labels) - 1 + 1  # out<-fn, leaf->acc x2, next_functions, (a used twice)


def test_make_dot_saved_tensors_attrs_and_views():
    a = fg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    w = fg.tensor([[0.5], [0.25]], requires_grad=True)
    y = (a @ w).tanh().sum(1)
    plain = make_dot(y)
    assert "orange" not in plain.source and "----" not in plain.source
    saved = make_dot(y, show_saved=True)
    # MmBackward0 saves self and mat2, TanhBackward0 its result: three orange tensors
    assert saved.source.count("fillcolor=orange") == 3
    assert 'label="mat2\n (2, 1)" fillcolor=orange' in saved.source
    attrs = make_dot(y, show_attrs=True)
    assert re.search(r"SumBackward1\n-+\ndim +: +\(1,\)", attrs.source)
    assert "[saved tensor]" in attrs.source
    v = (a * 2).view(4)  # an output that is a view: its base drawn dark green, dotted to it
    assert "darkolivegreen3" in make_dot(v).source and "style=dotted" in make_dot(v).source


@needs_dot
def test_make_dot_renders_a_png(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    y = model(fg.randn(2, 3)).mean()
    path = make_dot(y, params=dict(model.named_parameters()), show_attrs=True, show_saved=True).render(
        str(tmp_path / "graph"), format="png")
    data = open(path, "rb").read()
    assert path.endswith("graph.png") and data.startswith(PNG_MAGIC) and len(data) > 2000


def test_render_without_dot_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot on PATH
    x = fg.ones(2, requires_grad=True)
    dot = make_dot((x * 2).sum())
    assert "MulBackward0" in dot.source  # .source needs nothing
    with pytest.raises(graphviz.ExecutableNotFound, match="apt-get install graphviz"):
        dot.render(str(tmp_path / "g"), format="png")


@needs_dot
def test_lowered_graph_draws_fused_groups_as_clusters(tmp_path):
    from fusegrad.passes.fusion import LoopGroup, fuse

    @fg.compile
    def f(x, w):
        return fg.softmax(fg.tanh(x @ w) * 2, 1).sum(0)
    x, w = fg.randn(4, 3), fg.randn(3, 5)
    lo = f.lower(x, w)
    g = lo.graph("fused")
    n_loops = sum(isinstance(grp, LoopGroup) for grp in fuse(lo._plan.stages["optimized"]).groups)
    assert n_loops >= 1 and g.source.count("subgraph cluster_") == n_loops
    assert "matmul(%0, %1)" in g.source and "reduce_max" in g.source and "output 0" in g.source
    traced = lo.graph("traced")
    assert "cluster" not in traced.source and traced.source.count(" = ") == len(lo._plan.stages["traced"].eqns)
    with pytest.raises(ValueError, match="unknown stage"):
        lo.graph("nope")
    path = g.render(str(tmp_path / "fused"), format="png")
    assert open(path, "rb").read().startswith(PNG_MAGIC)
