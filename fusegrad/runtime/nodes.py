"""Autograd graph nodes (``grad_fn``): one per recorded op, named as PyTorch names them.

A node holds what its backward needs and the edges ``(node, output_nr)`` to the nodes
of its inputs; ``next_functions`` shows them as PyTorch does."""
from __future__ import annotations

import traceback
import weakref

import numpy as np

from ..ir import prims as P
from . import tensor as _tensor  # module import: tolerates the tensor <-> nodes cycle
from . import forward_state
from .grad_mode import STATE
from .saved_hooks import Packed, PackedArgs

_FREED_MSG = ("Trying to backward through the graph a second time (or directly access saved tensors "
              "after they have already been freed). Saved intermediate values of the graph are freed "
              "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
              "backward through the graph a second time or if you need to access saved tensors after "
              "calling backward.")


class RemovableHandle:
    """Returned by hook registration; ``remove()`` unregisters the hook."""
    __slots__ = ("_list", "_hook")

    def __init__(self, lst: list, hook):
        self._list = lst
        self._hook = hook

    def remove(self) -> None:
        for i, h in enumerate(self._list):
            if h is self._hook:
                del self._list[i]
                return

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class Node:
    """Base of every grad_fn. Subclasses implement ``apply(grads) -> grads per edge``."""
    __slots__ = ("edges", "pre_hooks", "post_hooks", "stack", "_metadata", "__weakref__")
    n_outputs = 1

    def _init(self, edges):
        self.edges = edges
        self.pre_hooks = None
        self.post_hooks = None
        self.stack = traceback.format_stack()[:-3] if STATE.anomaly else None

    @property
    def metadata(self) -> dict:
        """A dict for the program's own notes about this node, as PyTorch's (made on first use:
        nodes are made on every recorded op)."""
        try:
            return self._metadata
        except AttributeError:
            self._metadata = {}
            return self._metadata

    def name(self) -> str:
        return type(self).__name__

    @property
    def next_functions(self) -> tuple:
        return tuple(e if e is not None else (None, 0) for e in self.edges)

    def register_hook(self, fn) -> RemovableHandle:
        """``fn(grad_inputs, grad_outputs)`` runs after this node's backward."""
        if self.post_hooks is None:
            self.post_hooks = []
        self.post_hooks.append(fn)
        return RemovableHandle(self.post_hooks, fn)

    def register_prehook(self, fn) -> RemovableHandle:
        """``fn(grad_outputs) -> tuple or None`` runs before this node's backward, with the
        tuple of its outputs' gradients, and may replace them."""
        def pre(gs):
            r = fn(tuple(gs))
            return gs if r is None else list(r)
        pre._per_output = True
        pre._node_hook = True  # (tensor hooks run before it, whenever registered, as in PyTorch)
        return self._add_prehook(pre)

    def _add_prehook(self, fn, before: tuple = ()) -> RemovableHandle:
        """A pre-hook as the engine runs it: ``fn(grad)`` on a one-output node's gradient
        (a tensor hook), or ``fn(grads) -> grads`` where ``fn._per_output`` is set; placed
        before the first hook that has one of the flags ``before`` (PyTorch's order: tensor
        hooks, then retain_grad's store, then the node's own pre-hooks)."""
        if self.pre_hooks is None:
            self.pre_hooks = []
        pos = next((i for i, h in enumerate(self.pre_hooks) if any(getattr(h, f, False) for f in before)),
                   len(self.pre_hooks))
        self.pre_hooks.insert(pos, fn)
        return RemovableHandle(self.pre_hooks, fn)

    def release(self) -> None:
        """Free saved values after a backward without retain_graph."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} object at {hex(id(self))}>"


def check_versions(saved, node_name: str) -> None:
    """PyTorch's error when a tensor of ``saved`` ((tensor, version it was saved at) pairs),
    which the backward of ``node_name`` reads, was modified in place since."""
    for t, v in saved:
        if t._version != v:
            raise RuntimeError(
                f"one of the variables needed for gradient computation has been modified by an inplace "
                f"operation: [{t.dtype} {list(t.shape)}], which is an input or output of {node_name}, "
                f"is at version {t._version}; expected version {v} instead. Hint: enable anomaly detection "
                f"to find the operation that failed to compute its gradient, with "
                f"torch.autograd.set_detect_anomaly(True).")


class PrimNode(Node):
    """Backward of one primitive application: runs the primitive's VJP rule."""
    __slots__ = ("prim", "params", "ins", "out_data", "out_box", "out_ver", "versions", "freed")

    def apply(self, grads):
        if self.freed and (self.prim.saves_in or self.prim.saves_out):
            raise RuntimeError(_FREED_MSG)
        self._check_versions()
        out = None
        if self.prim.saves_out:
            od = self.out_data
            if type(od) is Packed:  # through saved-tensor hooks
                out = od.unpack()
            else:
                out = _tensor.wrap(od)
                out._vbox = self.out_box
                if STATE.enabled:  # create_graph: the saved output stays connected to this node
                    out._rg, out._grad_fn = True, self
                    if forward_state.STATE.level is not None:
                        forward_state.saved_tangent(self, out)
        ins = self.ins
        if type(ins) is PackedArgs:
            ins = ins.unpacked()
        edges = self.edges
        if len(edges) == 2:  # the common arities without a generator: this runs once per node
            needs = (edges[0] is not None, edges[1] is not None)
        elif len(edges) == 1:
            needs = (edges[0] is not None,)
        else:
            needs = tuple(e is not None for e in edges)
        res = self.prim.vjp(grads[0], ins, out, needs, **self.params)
        if STATE.enabled and self.prim.mask_vjp:  # create_graph
            return _connected(res, ins, out, needs)
        return res

    def _check_versions(self):
        check_versions(self.versions, type(self).__name__)
        if self.out_box is not None and self.out_box[0] != self.out_ver:
            raise RuntimeError(
                f"one of the variables needed for gradient computation has been modified by an inplace "
                f"operation: output 0 of {type(self).__name__} is at version {self.out_box[0]}; expected "
                f"version {self.out_ver} instead. Hint: enable anomaly detection with "
                f"torch.autograd.set_detect_anomaly(True).")

    def __getattr__(self, name: str):  # only names the slots lack: grad_fn._saved_self and the like
        if not name.startswith(("_saved_", "_raw_saved_")):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        from .saved_attrs import saved_attribute
        return saved_attribute(self, name)

    def __dir__(self):
        from .saved_attrs import saved_names
        return sorted(set(super().__dir__()) | set(saved_names(self)))

    def release(self):
        if self.freed is None:  # pinned: a composite's node its gradient's graph also reaches (runtime.composite)
            return
        self.freed = True
        if self.prim.saves_in or self.prim.saves_out:  # apply() now raises; shape-only rules keep theirs
            self.out_data = self.out_box = self.ins = None
            self.versions = ()


def _connected(grads, ins, out, needs):
    """Under create_graph, the gradients of a primitive whose VJP reads the primal values
    only through masks (``Primitive.mask_vjp``: relu's ``g * (out > 0)``, where's, a max's)
    made to depend on the input they flow to, with derivative zero, as PyTorch's backward
    functions do (``threshold_backward`` takes the input): a second derivative through them
    is zeros, not "does not require grad" or "not used in the graph" (a PINN's u_xx through
    a ReLU net)."""
    if out is not None and not out._rg:
        out = None
    linked = None
    for i, g in enumerate(grads):
        if not (needs[i] and type(g) is _tensor.Tensor):
            continue
        x = ins[i] if i < len(ins) else None
        anchor = x if isinstance(x, _tensor.Tensor) and x._rg else out
        if anchor is None or anchor.shape != g.shape or anchor.dtype != g.dtype:
            continue
        if linked is None:
            linked = list(grads)
        never = P.full(shape=tuple(g.shape), value=False, dtype=np.dtype(np.bool_))
        linked[i] = P.where(never, anchor, g)
    return grads if linked is None else tuple(linked)


class AccumulateGrad(Node):
    """Accumulates into a leaf's ``.grad``; its pre-hooks are the leaf's tensor hooks and
    ``post_acc_hooks`` run with the leaf once its ``.grad`` holds the new sum.

    ``grad_into(leaf, g)``, where set, may give the ndarray a new ``.grad`` is written into
    (DistributedDataParallel's bucket slot, so the gradient is copied once) instead of a
    copy of ``g`` of its own; None declines."""
    __slots__ = ("_var", "post_acc_hooks", "grad_into")

    def __init__(self, leaf):
        self._init(())
        self._var = weakref.ref(leaf)
        self.post_acc_hooks = None
        self.grad_into = None

    @property
    def variable(self):
        return self._var()

    def apply(self, grads):
        return ()


class FunctionNode(Node):
    """A node whose backward is a Python callable (custom Function, checkpoint, compiled
    backward): ``backward_fn(*grads) -> grads per edge``; ``n_outputs`` per instance."""
    __slots__ = ("backward_fn", "n_out", "out_meta", "ctx")

    @property
    def n_outputs(self):
        return self.n_out

    def apply(self, grads):
        if getattr(self.ctx, "materialize_grads", True):  # (ctx.set_materialize_grads(False): None stays)
            zeros_like_meta = _tensor.zeros_like_meta
            grads = [g if g is not None else zeros_like_meta(m) for g, m in zip(grads, self.out_meta)]
        res = self.backward_fn(*grads)
        if not isinstance(res, tuple):
            res = (res,)
        return res

    def release(self):
        ctx = self.ctx
        if ctx is not None and hasattr(ctx, "_release"):
            ctx._release()


_CLASSES: dict = {}


def node_class(name: str, base=PrimNode) -> type:
    """The Node subclass named ``name`` (PyTorch's grad_fn class names), made once."""
    cls = _CLASSES.get((name, base))
    if cls is None:
        cls = type(name, (base,), {"__slots__": ()})
        _CLASSES[(name, base)] = cls
    return cls
