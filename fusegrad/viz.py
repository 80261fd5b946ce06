"""Graph pictures: ``make_dot`` draws an autograd graph as torchviz does, and ``ir_dot``
draws compiled IR (``compiled.lower(...).graph(stage)``), fused loop groups as clusters.

Both return a ``graphviz.Digraph`` (the optional ``viz`` extra: ``pip install fusegrad[viz]``).
``.source`` needs nothing else; ``.render(..., format="png")`` runs Graphviz's ``dot``
program, and says how to install it when it is missing."""
from __future__ import annotations

from typing import Optional

_INSTALL = ("Graphviz's `dot` program is needed to render graph pictures and was not found on PATH. "
            "Install Graphviz: `apt-get install graphviz` (Debian/Ubuntu), `brew install graphviz` (macOS), "
            "`conda install graphviz`, or see https://graphviz.org/download/. "
            "`.source` gives the DOT text without it.")


def _graphviz():
    try:
        import graphviz
    except ImportError:
        raise ImportError("fusegrad.viz needs the `graphviz` Python package: "
                          "pip install 'fusegrad[viz]' (or pip install graphviz)") from None
    return graphviz


def _digraph(**kwargs):
    """A ``graphviz.Digraph`` whose rendering explains how to install a missing ``dot``."""
    graphviz = _graphviz()

    class DotNotFound(graphviz.ExecutableNotFound):
        def __init__(self):
            RuntimeError.__init__(self, _INSTALL)

    class Digraph(graphviz.Digraph):
        def render(self, *args, **kw):
            try:
                return super().render(*args, **kw)
            except graphviz.ExecutableNotFound:
                raise DotNotFound() from None

        def pipe(self, *args, **kw):
            try:
                return super().pipe(*args, **kw)
            except graphviz.ExecutableNotFound:
                raise DotNotFound() from None
    return Digraph(**kwargs)


# ---------------------------------------------------------------- autograd graphs
_SAVED = "_saved_"


def _is_tensor(x) -> bool:
    from .runtime.tensor import Tensor
    return isinstance(x, Tensor)


def _fn_label(fn, show_attrs: bool, max_attr_chars: int) -> str:
    """The node's class name, with its saved attributes as a table when ``show_attrs``."""
    name = type(fn).__name__
    if not show_attrs:
        return name
    attrs = {}
    for attr in dir(fn):
        if attr.startswith(_SAVED):
            val = getattr(fn, attr)
            if _is_tensor(val):
                val = "[saved tensor]"
            elif isinstance(val, tuple) and any(_is_tensor(t) for t in val):
                val = "[saved tensors]"
            attrs[attr[len(_SAVED):]] = str(val)
    if not attrs:
        return name
    width = max(max_attr_chars, 3)
    kw = max(len(k) for k in attrs)
    vw = min(max(len(v) for v in attrs.values()), width)
    cut = lambda s: s[:vw - 3] + "..." if len(s) > vw else s  # noqa: E731
    rows = "\n".join(f"{k:<{kw}}: {cut(v):>{vw}}" for k, v in attrs.items())
    return f"{name}\n{'-' * max(kw + vw + 2, len(name))}\n{rows}"


def make_dot(var, params: Optional[dict] = None, show_attrs: bool = False, show_saved: bool = False,
             max_attr_chars: int = 50):
    """The autograd graph that produced ``var`` (a tensor or a tuple of them), as torchviz draws it.

    Gray boxes are grad_fn nodes; light blue, the leaf tensors that require grad (named from
    ``params``, a dict name -> tensor); orange, saved tensors (``show_saved``); green, the
    outputs (dark green: the base of an output that is a view). ``show_attrs`` lists each
    node's saved non-tensor attributes."""
    param_map = {}
    if params is not None:
        if not all(_is_tensor(p) for p in params.values()):
            raise TypeError("make_dot: params must map names to tensors")
        param_map = {id(v): k for k, v in params.items()}
    dot = _digraph(node_attr=dict(style="filled", shape="box", align="left", fontsize="10", ranksep="0.1",
                                  height="0.2", fontname="monospace"), graph_attr=dict(size="12,12"))
    seen: set = set()

    def tensor_label(t, name=None) -> str:
        name = name or param_map.get(id(t), "")
        return f"{name}\n ({', '.join(str(int(s)) for s in t.shape)})"

    def saved_node(fn, t, name) -> None:
        seen.add(id(t))
        dot.edge(str(id(fn)), str(id(t)), dir="none")
        dot.node(str(id(t)), tensor_label(t, name), fillcolor="orange")

    def add_fn(fn) -> None:
        if id(fn) in seen:
            return
        seen.add(id(fn))
        if show_saved:
            for attr in dir(fn):
                if not attr.startswith(_SAVED):
                    continue
                val = getattr(fn, attr)
                name = attr[len(_SAVED):]
                if _is_tensor(val):
                    saved_node(fn, val, name)
                elif isinstance(val, tuple):
                    for i, t in enumerate(val):
                        if _is_tensor(t):
                            saved_node(fn, t, f"{name}[{i}]")
        leaf = getattr(fn, "variable", None)
        if leaf is not None:  # AccumulateGrad: draw the leaf tensor it accumulates into
            seen.add(id(leaf))
            dot.node(str(id(leaf)), tensor_label(leaf), fillcolor="lightblue")
            dot.edge(str(id(leaf)), str(id(fn)))
        dot.node(str(id(fn)), _fn_label(fn, show_attrs, max_attr_chars))
        for nxt, _ in getattr(fn, "next_functions", ()):
            if nxt is not None:
                dot.edge(str(id(nxt)), str(id(fn)))
                add_fn(nxt)
        ctx = getattr(fn, "ctx", None)  # a custom Function's saved tensors are always drawn
        for t in getattr(ctx, "saved_tensors", ()) if ctx is not None and not getattr(ctx, "_freed", True) else ():
            if _is_tensor(t):
                seen.add(id(t))
                dot.edge(str(id(t)), str(id(fn)), dir="none")
                dot.node(str(id(t)), tensor_label(t), fillcolor="orange")

    def add_output(t, color="darkolivegreen1") -> None:
        if id(t) in seen:
            return
        seen.add(id(t))
        dot.node(str(id(t)), tensor_label(t), fillcolor=color)
        if t.grad_fn is not None:
            add_fn(t.grad_fn)
            dot.edge(str(id(t.grad_fn)), str(id(t)))
        if t._base is not None:
            add_output(t._base, color="darkolivegreen3")
            dot.edge(str(id(t._base)), str(id(t)), style="dotted")

    for v in (var if isinstance(var, tuple) else (var,)):
        add_output(v)
    size = max(12, len(dot.body) * 0.15)  # grow the canvas with the graph, as torchviz
    dot.graph_attr.update(size=f"{size},{size}")
    return dot


# ---------------------------------------------------------------- compiled IR
def ir_dot(ir, name: str = "ir"):
    """Draw a traced or optimized ``Graph``, or a ``Fused`` program (its loop groups as
    clusters, library calls as their own boxes, views read as aliases dashed)."""
    from .ir.graph import Graph, Var, numbering
    from .passes.fusion import CallGroup, Fused, LoopGroup

    fused = ir if isinstance(ir, Fused) else None
    graph = ir.graph if fused is not None else ir
    if not isinstance(graph, Graph):
        raise TypeError(f"ir_dot: expected a Graph or Fused program, got {type(ir).__name__}")
    dot = _digraph(name=name, node_attr=dict(shape="box", fontname="monospace", fontsize="10", style="filled",
                                             fillcolor="white"))
    with numbering(graph.defined()):
        def vid(v) -> str:
            return f"v{v.id}"

        def eqn_node(g, e, **attrs) -> None:
            g.node(vid(e.out), repr(e), **attrs)  # the listing's line: "%4: f32[4,5] = mul(%3, 2.0)"

        for v in graph.inputs:
            dot.node(vid(v), f"{v!r}: {v.type_str()}\ninput", shape="ellipse", fillcolor="lightblue")
        for v, _ in graph.consts:
            dot.node(vid(v), f"{v!r}: {v.type_str()}\nconst", shape="ellipse", fillcolor="lightyellow")
        if fused is None:
            for e in graph.eqns:
                eqn_node(dot, e)
        else:
            for e in fused.aliases.values():
                eqn_node(dot, e, style="dashed,filled", fillcolor="whitesmoke")
            for gi, grp in enumerate(fused.groups):
                if isinstance(grp, LoopGroup):
                    with dot.subgraph(name=f"cluster_{gi}") as sub:
                        red = f", reduces axes {list(grp.red_axes)}" if grp.red_axes else ""
                        sub.attr(label=f"loop group {gi}: domain {list(grp.domain)}{red}"
                                       f"{', parallel' if grp.parallel else ''}",
                                 style="rounded,filled", fillcolor="aliceblue", fontname="monospace")
                        for e in grp.eqns:
                            eqn_node(sub, e)
                elif isinstance(grp, CallGroup):
                    eqn_node(dot, grp.eqn, fillcolor="lightgrey")
        eqns = list(graph.eqns) if fused is None else \
            list(fused.aliases.values()) + [e for grp in fused.groups
                                            for e in (grp.eqns if isinstance(grp, LoopGroup) else [grp.eqn])]
        drawn = {v.id for v in graph.arguments()} | {e.out.id for e in eqns}
        for e in eqns:
            for a in e.inputs:
                if isinstance(a, Var) and a.id in drawn:
                    dot.edge(vid(a), vid(e.out))
        for i, o in enumerate(fused.outputs if fused is not None else graph.outputs):
            dot.node(f"out{i}", f"output {i}", shape="ellipse", fillcolor="darkolivegreen1")
            if isinstance(o, Var) and o.id in drawn:
                dot.edge(vid(o), f"out{i}")
    return dot
