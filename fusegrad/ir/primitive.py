"""The primitive: one definition per op, serving eager, tracing, autodiff and codegen.

A primitive bundles
- ``impl``: the eager NumPy implementation (arrays and weak Python scalars in, array out),
- ``abstract``: the shape/dtype rule, ``(avals, params) -> (shape, numpy dtype)``,
- ``vjp``: ``(g, ins, out, **params) -> grads per input`` written with Tensor ops, so it
  runs eagerly, records a graph under ``create_graph`` and traces into IR,
- ``jvp``: ``(tangents, ins, out, **params) -> tangent of out`` (None for a zero tangent),
- ``saves``: which of ``"in"``/``"out"`` the VJP reads (for freeing and version checks);
  ``checked`` narrows the version check to the inputs whose values the VJP reads, and
  ``reads``, ``needs -> (inputs read, whether the output is)``, to those it reads for the
  gradients a call needs (``x * 2``'s node reads not x, as PyTorch's saves only 2),
- ``kind`` and ``scalar``: how codegen lowers it: an elementwise primitive's ``scalar`` names
  its per-element operation (one of ``fusegrad.ir.scalar_ops.OPS``, checked here), a
  reduction's the operation folding an element in; ``no_lowering`` instead says why a
  primitive has no kernel lowering (its graphs then run eagerly, with that reason),
- ``batch``: the batching rule of vmap (see ``prims/batchdims.py``); primitives of kind
  ``"elementwise"`` share one, and without a rule vmap loops over the batch.
Passes and backends recognise a primitive by the object (``e.prim is P.neg``) or by these
attributes, never by its name; the name is for printing and PyTorch's node names.
Calling a primitive binds it through the dispatcher that the runtime installs."""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from .scalar_ops import check_lowering

PRIMS: dict[str, "Primitive"] = {}


class Primitive:
    __slots__ = ("name", "impl", "abstract", "vjp", "jvp", "saves_in", "saves_out", "kind",
                 "scalar", "no_lowering", "node_name", "nondiff", "effect", "node_cls", "checked", "reads", "batch", "aliases",
                 "contiguous", "mask_vjp")

    def __init__(self, name: str, impl: Callable, *, abstract: Optional[Callable] = None,
                 vjp: Optional[Callable] = None, jvp: Optional[Callable] = None, saves: str = "",
                 kind: str = "opaque", scalar: Optional[str] = None, node_name: Optional[str] = None,
                 nondiff: bool = False, effect: bool = False, checked: slice = slice(None),
                 reads: Optional[Callable] = None, batch: Optional[Callable] = None,
                 no_lowering: Optional[str] = None, mask_vjp: bool = False):
        check_lowering(name, kind, scalar, no_lowering)
        self.name = name
        self.impl = impl
        self.abstract = abstract or _abstract_by_eval(impl)
        self.vjp = vjp
        self.jvp = jvp
        self.saves_in = "in" in saves
        self.saves_out = "out" in saves
        self.kind = kind
        self.scalar = scalar
        self.no_lowering = no_lowering
        self.node_name = node_name or (name.capitalize() + "Backward0")
        self.nondiff = nondiff
        self.effect = effect
        self.node_cls = _NODE_CLASS[0](self.node_name) if _NODE_CLASS[0] else None  # autograd node class
        self.checked = checked
        self.reads = reads
        self.batch = batch
        # whether its eager result shares its input's memory (a view to autograd): True,
        # "maybe" (NumPy copies where it cannot view: reshape) or False
        self.aliases = False
        # whether its eager result is C-contiguous whatever its operands' layout, as PyTorch's
        # reductions, scans, gathers and concatenations are (an elementwise result keeps its
        # operands' layout, a view theirs; a matmul's follows its operands' memory order, as
        # the gradient layout contract wants): x.transpose(0, 1).sum(-1).view(-1) works
        self.contiguous = kind in ("reduce", "scan", "gather", "layout")
        # whether its VJP reads the primal values only through masks (relu's out > 0, a max's
        # winner): under create_graph its gradients stay connected to the input with
        # derivative zero, as PyTorch's backward functions that take the input (runtime.nodes)
        self.mask_vjp = mask_vjp
        if name in PRIMS:
            raise ValueError(f"primitive {name!r} is defined twice")
        PRIMS[name] = self

    def __call__(self, *args, **params):
        return _DISPATCH[0](self, args, params)

    def __repr__(self) -> str:
        return f"<primitive {self.name}>"


# The runtime installs its dispatcher and its autograd node classes here at import (ir
# stays free of runtime imports); primitives defined later get theirs when defined.
_DISPATCH: list = [None]
_NODE_CLASS: list = [None]


def install_dispatcher(fn: Callable) -> None:
    _DISPATCH[0] = fn


def install_node_classes(node_class: Callable[[str], type]) -> None:
    """Give every primitive, present and future, ``node_class(prim.node_name)``."""
    _NODE_CLASS[0] = node_class
    for p in PRIMS.values():
        if p.node_cls is None:
            p.node_cls = node_class(p.node_name)


_COMPLEX_NAMES = {"complex64": "ComplexFloat", "complex128": "ComplexDouble"}


def refuse_complex(prim: "Primitive", error: Callable[[str], Exception]) -> "Primitive":
    """Make ``prim`` raise ``error(PyTorch's name of the dtype)`` for a complex operand, eagerly
    and when traced: PyTorch has no such kernel (an order of complex numbers, a rounding),
    and NumPy's would answer silently."""
    impl, abstract = prim.impl, prim.abstract

    def refuse(dt):
        raise error(_COMPLEX_NAMES.get(np.dtype(dt).name, str(dt)))

    def checked_impl(x, *rest, **params):  # (the eager hot path: as few steps as can be)
        if type(x) is np.ndarray and x.dtype.kind == "c":
            refuse(x.dtype)
        if rest:
            for a in rest:
                if type(a) is np.ndarray and a.dtype.kind == "c":
                    refuse(a.dtype)
            return impl(x, *rest, **params)
        return impl(x, **params)

    def checked_abstract(avals, params):
        for a in avals:
            if isinstance(a, tuple) and np.dtype(a[1]).kind == "c":
                refuse(a[1])
        return abstract(avals, params)
    prim.impl, prim.abstract = checked_impl, checked_abstract
    return prim


def _abstract_by_eval(impl: Callable) -> Callable:
    """Shape rule by running ``impl`` on zero-strided stand-ins: exact for any NumPy impl,
    and cheap for the layout and indexing ops that use it."""
    def rule(avals, params):
        args = [np.lib.stride_tricks.as_strided(np.zeros(1, a[1]), a[0], [0] * len(a[0]))
                if isinstance(a, tuple) else a for a in avals]
        out = impl(*args, **params)
        return out.shape, out.dtype
    return rule
