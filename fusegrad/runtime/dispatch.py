"""Binding a primitive: the one path every op takes, in every mode.

1. If an operand is traced (its payload is an IR Var), the innermost such trace records an
   equation; so does the innermost trace for a random op, or for any op inside compile's
   trace (``capturing``); otherwise, for an operand on a CUDA device the CUDA runtime
   runs it, for one on the meta device its shape rule does (``runtime.meta``), else the
   eager NumPy impl runs.
2. If grad mode is on and an operand requires grad, a grad_fn node records the op.
Errors from the impl come back naming the op, the operands' shapes and the user's line."""
from __future__ import annotations

import traceback
import weakref

import numpy as np

from ..cuda.driver import STATE as _CUDA
from ..cuda.driver import contiguous, is_device_array, track
from ..ir import dtypes as D
from ..ir.graph import Var
from ..ir.prims.complex import NO_COMPLEX_LOWERING
from ..ir.prims.elementwise import stop_gradient
from ..ir.primitive import install_dispatcher, install_node_classes
from ..tracer.trace import _STACK, capturing, escaped, user_frame
from . import device_views, devices, forward_state, meta, saved_hooks
from .grad_mode import STATE
from .meta import STATE as _META
from .nodes import node_class
from .tensor import Tensor, wrap


def _complex_values(args, params) -> bool:
    """Whether an op reads or makes complex values (which kernels cannot hold)."""
    if getattr(params.get("dtype"), "kind", None) == "c":  # (a cast to a complex dtype)
        return True
    return any(isinstance(a, Tensor) and a._data.dtype.kind == "c" for a in args)


def _traced_payload(prim, args, params):
    top = None
    for a in args:
        if isinstance(a, Tensor) and type(a._data) is Var:
            tr = a._data.trace
            if not tr.active:
                raise escaped(a._data)
            if top is None or tr.level > top.level:
                top = tr
    if top is None and (prim.effect or capturing()):
        # Random ops draw afresh per call. Under compile, an op on captured tensors alone
        # (a parameter's norm, a module buffer's transpose) is recorded too, not computed
        # once at trace time: those tensors are read at call time, as training changes them.
        top = _STACK.traces[-1]
    if top is None:
        return None
    # (under fullgraph=True it is recorded: a graph the backend cannot lower runs interpreted)
    if top.unlowered_breaks and not top.one_graph and (prim.no_lowering or _complex_values(args, params)):
        why = prim.no_lowering or NO_COMPLEX_LOWERING
        top.graph_break(f"{prim.name} has no kernel lowering: {why} (cpu backend) at {user_frame()}")
        return None  # (a segmented trace computed the operands at the break: computed eagerly)
    if top.rebound_leaves and STATE.enabled and not prim.nondiff and any(
            isinstance(a, Tensor) and id(a) in top.rebound_leaves and type(a._data) is Var and a._data.trace is top
            for a in args):
        # its gradient belongs to the leaf, but the graph would differentiate its new value
        # through the update, which carries none: the use runs on the leaf itself, after a break
        reason = (f"a leaf that requires grad, updated in place without gradient (under no_grad or through "
                  f".data), is used again at {user_frame()}")
        if top.rebound_use is None:
            top.graph_break(reason)
            return None
        top.rebound_use = top.rebound_use or reason
    out = top.emit(prim, args, params)
    if not STATE.enabled and top.stop_under_no_grad and not prim.nondiff and D.np_differentiable(out.dtype):
        # computed under no_grad: the graph must not differentiate through it either. Every user trace may be
        # differentiated: func transforms', compile's if an output requires grad (known only after tracing),
        # vmap's when its graph is replayed under autograd
        out = top.emit(stop_gradient, (wrap(out),), {})
    return out


def bind(prim, args, params):
    data = tracker = None
    if _STACK.traces:
        try:
            data = _traced_payload(prim, args, params)
        except (ValueError, IndexError) as e:  # a shape rule's complaint, reported as eagerly
            raise op_error(prim, args, e) from None
        if data is not None and data.trace.tracks:
            tracker = data.trace
    if data is None and (_CUDA.initialized or _META.in_use):  # a CUDA or meta tensor may be an operand
        data = _on_device(prim, args, params)
    if data is None:
        try:  # unrolled for the common arities: this is the per-op hot path
            n = len(args)
            if n == 2:
                a, b = args
                data = prim.impl(a._data if isinstance(a, Tensor) else a, b._data if isinstance(b, Tensor) else b,
                                 **params)
            elif n == 1:
                a = args[0]
                data = prim.impl(a._data if isinstance(a, Tensor) else a, **params)
            else:
                data = prim.impl(*[a._data if isinstance(a, Tensor) else a for a in args], **params)
        except (ValueError, IndexError, TypeError, RuntimeError, MemoryError) as e:
            _check_escaped(args)
            raise op_error(prim, args, e) from None
        if type(data) is not np.ndarray:  # NumPy returns scalars for 0-d operands
            if type(data) is Var:  # an identity impl passed an escaped traced value through
                _check_escaped(args)
            data = np.asarray(data)
        elif prim.contiguous and data.ndim > 1 and not data.flags.c_contiguous and not (
                prim.aliases and np.may_share_memory(data, args[0]._data)):  # (basic indexing: a view)
            data = np.ascontiguousarray(data)
    out = wrap(data)
    if tracker is not None:  # a segmented trace computes the tensors still alive at a break
        tracker.track(out)
    aliases = prim.aliases
    if aliases and (aliases is True or type(data) is not np.ndarray or np.may_share_memory(data, args[0]._data)):
        base = args[0]
        if base._vbox is None:
            base._vbox = [0]
        out._vbox = base._vbox
        out._base = base._base if base._base is not None else base
        out._inf = base._inf  # (a view is an inference tensor exactly when its base is)
        # how to rebuild this view from its base: replayed when the view is written in place
        out._view_fn = ((prim, params),) if base._base is None else \
            None if base._view_fn is None else base._view_fn + ((prim, params),)  # (None: a storage alias's)
        out._vver = out._vbox[0]
    if STATE.enabled and not prim.nondiff:
        for a in args:
            if isinstance(a, Tensor) and a._rg:
                record(prim, args, params, out)
                if tracker is not None:
                    tracker.recorded.append(_weakref(out._grad_fn))
                break
    fw = forward_state.STATE
    if fw.level is not None and not fw.busy:
        forward_state.propagate(prim, args, params, out)
    return out


def _on_device(prim, args, params):
    """``prim`` run by the CUDA runtime when an operand is a CUDA tensor, by its shape rule
    when one is a meta tensor (None when all are on the host). A CPU tensor beside it is
    PyTorch's mixed-device error, except a 0-d one, which PyTorch passes as a scalar. A
    primitive without tensor operands (a fill) runs on the default device
    (``devices.creating_on``: a VJP rule's fills during a CUDA or meta backward)."""
    dev = host = None
    tensors = False
    for a in args:
        if isinstance(a, Tensor):
            tensors = True
            d = a._data
            if type(d) is np.ndarray:
                if d.ndim:
                    host = a
            elif type(d) is meta.MetaArray:
                return _on_meta(prim, args, params)
            elif is_device_array(d):
                ad = devices.of(d)
                if dev is None:
                    dev = ad
                elif ad != dev:
                    raise devices.mixed_error(dev, ad)
    if dev is None:
        if tensors or devices.DEFAULT[-1].type == "cpu":
            return None
        dev = devices.DEFAULT[-1]
        if dev.type == "meta":
            return _on_meta(prim, args, params)
    if host is not None:
        raise devices.mixed_error(dev, devices.CPU)
    if prim.kind == "view":
        out = device_views.view(prim, args[0]._data, params)
        if out is not None:
            return out
    from . import cuda_ops
    # (strided views, broadcasts included, are passed C-contiguous: the kernels take them so)
    operands = tuple((contiguous(a._data) if is_device_array(a._data) else a._data[()].item())
                     if isinstance(a, Tensor) else a for a in args)
    try:
        out = cuda_ops.apply(prim, operands, params)
    except (ValueError, IndexError, TypeError, RuntimeError, MemoryError, NotImplementedError) as e:
        raise op_error(prim, args, e) from None
    return out if prim.kind == "view" else track(out, dev.index)


def _on_meta(prim, args, params) -> meta.MetaArray:
    """``prim``'s meta result (see ``meta.evaluate``); a shape rule's complaint is reported
    as an eager impl's."""
    try:
        return meta.evaluate(prim, args, params)
    except (ValueError, IndexError, TypeError) as e:
        raise op_error(prim, args, e) from None


def _check_escaped(args) -> None:
    """Raise for an operand traced by a trace that has ended (off the hot path: called when
    an eager impl fails on, or passes through, such a Var payload)."""
    for a in args:
        if isinstance(a, Tensor) and type(a._data) is Var:
            raise escaped(a._data) from None


INFERENCE_SAVED = ("Inference tensors cannot be saved for backward. Please do not use Tensors created in inference "
                   "mode in computation tracked by autograd. To work around this, you can make a clone to get a "
                   "normal tensor and use it in autograd, or use `torch.no_grad()` instead of "
                   "`torch.inference_mode()`.")


def record(prim, args, params, out) -> None:
    """Make ``out``'s grad_fn node for ``prim`` applied to ``args``.

    The hot path of eager autograd: plain loops, no generators, attributes set directly."""
    edges = []
    for a in args:
        if isinstance(a, Tensor) and a._rg:
            if a._base is not None and a._view_fn and a._vver != a._vbox[0]:
                rederive(a)
            fn = a._grad_fn
            edges.append((fn, a._out_nr) if fn is not None else (a._accumulator(), 0))
        else:
            edges.append(None)
    node = _new(prim.node_cls)
    node.edges = tuple(edges)
    node.pre_hooks = node.post_hooks = None
    node.stack = traceback.format_stack()[:-2] if STATE.anomaly else None
    node.prim = prim
    node.params = params
    node.ins = args
    node.freed = False
    reads = prim.reads(tuple(e is not None for e in edges)) if prim.reads is not None else None
    if prim.saves_in:
        versions = []
        checked = args[prim.checked] if reads is None else [a for a, r in zip(args, reads[0]) if r]
        for a in checked:
            if isinstance(a, Tensor):
                if a._inf:
                    raise RuntimeError(INFERENCE_SAVED)
                vb = a._vbox
                versions.append((a, vb[0] if vb is not None else 0))
        node.versions = versions
    else:
        node.versions = ()
    if prim.saves_out and reads is not None and not reads[1]:  # kept, never checked
        node.out_data = out._data
        node.out_box = None
        node.out_ver = 0
    elif prim.saves_out:
        vb = out._vbox
        if vb is None:
            vb = out._vbox = [0]
        node.out_data = out._data
        node.out_box = vb
        node.out_ver = vb[0]
    else:
        node.out_data = node.out_box = None
        node.out_ver = 0
    if saved_hooks.STATE.stack and (prim.saves_in or prim.saves_out):
        _pack_saved(node, prim, args, out)
    out._grad_fn = node
    out._rg = True


def replay_view(t: Tensor, chain) -> Tensor:
    """``t`` through ``chain``, a view's view primitives from its base (``Tensor._view_fn``):
    the view made again from (a new value of) its base."""
    for prim, params in chain:
        t = bind(prim, (t,), params)
    return t


def rederive(view: Tensor) -> None:
    """A view whose base was updated in place after the view's grad_fn was made: its
    grad_fn is made again from the base's, as PyTorch regenerates it, so that gradients
    flow through the update (the view's data is the base's memory already). Its nodes are
    eager autograd's: a concrete view met inside a trace is not recorded into it, and they
    hold a stand-in of the base (its value and autograd state now), not the base tensor,
    which traced code may rebind later."""
    traces = list(_STACK.traces)
    base = view._base
    if type(view._data) is not Var:
        _STACK.traces[:] = []
        t = wrap(base._data)
        t._rg, t._grad_fn, t._out_nr, t._vbox = base._rg, base._grad_fn, base._out_nr, base._vbox
        if base._rg and base._grad_fn is None:
            t._acc = base._accumulator()
    else:
        t = base
    try:
        t = replay_view(t, view._view_fn)
    finally:
        _STACK.traces[:] = traces
    if t._rg:
        view._regraft(t._grad_fn, t._out_nr)
    view._vver = view._vbox[0]


def _pack_saved(node, prim, args, out) -> None:
    """Pass what ``node`` saves through the active saved-tensor hooks (unpacked by ``apply``)."""
    if prim.saves_in:
        ins = list(args)
        for i in range(len(ins))[prim.checked]:
            if isinstance(ins[i], Tensor):
                ins[i] = saved_hooks.pack(ins[i])
        node.ins = saved_hooks.PackedArgs(ins)
    if prim.saves_out:
        node.out_data = saved_hooks.pack(wrap(out._data))


_new = object.__new__
_weakref = weakref.ref


def _edge(a):
    if isinstance(a, Tensor) and a._rg:
        if a._grad_fn is not None:
            return (a._grad_fn, a._out_nr)
        return (a._accumulator(), 0)
    return None


def op_error(prim, args, e: Exception) -> Exception:
    """``e``, raised by ``prim`` on ``args``, as the exception to raise: the op's name, the
    operands' shapes and dtypes and the user's source line in its message."""
    shapes = ", ".join(f"{list(a.shape)} {a.dtype.name}" if isinstance(a, Tensor) else repr(a) for a in args)
    msg = f"{prim.name}: {e} (operands: {shapes}) at {user_frame()}"
    if isinstance(e, IndexError):
        return IndexError(msg)
    if isinstance(e, MemoryError):
        return MemoryError(msg)
    if isinstance(e, TypeError):
        return TypeError(msg)
    if isinstance(e, RuntimeError):  # a subclass (linalg.LinAlgError) keeps its class
        return type(e)(msg)
    return RuntimeError(msg)


install_dispatcher(bind)
install_node_classes(node_class)
