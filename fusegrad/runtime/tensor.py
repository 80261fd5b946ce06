"""The Tensor: a NumPy array (a CUDA device array, a meta array; while tracing, an IR Var)
plus autograd state.

Math methods are attached by ``runtime.ops`` (one function per op, shared by the
``fusegrad.*`` namespace); this module holds the object itself: attributes, autograd
bookkeeping, conversion and printing."""
from __future__ import annotations

import contextlib
import warnings
from typing import Optional

import numpy as np

from ..ir import dtypes as D
from ..cuda import driver
from ..ir.graph import Var
from ..tracer import speculate
from . import devices
from .meta import NO_DATA, MetaArray
from .devices import CPU, device  # noqa: F401  (fusegrad.runtime.tensor.device: the public name's home)
from . import nodes as _nodes  # module import: tolerates the tensor <-> nodes cycle
from .grad_mode import STATE


class Size(tuple):
    """A tensor's shape, as torch.Size."""

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n

    def __repr__(self) -> str:
        return f"fusegrad.Size({list(self)})"

    def __add__(self, other):  # (a Size extended is a Size, as torch.Size)
        return Size(tuple(self) + tuple(other)) if isinstance(other, tuple) else NotImplemented

    def __radd__(self, other):
        return Size(tuple(other) + tuple(self)) if isinstance(other, tuple) else NotImplemented

    def __mul__(self, n):
        return Size(tuple(self) * n)

    __rmul__ = __mul__


class Tensor:
    """An n-dimensional array with PyTorch's autograd semantics."""
    # _vbox: the version counter, shared by a tensor and its views; _base, _view_fn: a view's
    # base and the view primitives that make it from there; _vver: the version at which a
    # view's grad_fn was made (an in-place update of its base since makes it again); _inf:
    # made inside inference_mode (an inference tensor)
    __slots__ = ("_data", "_rg", "_grad_fn", "_out_nr", "_grad", "_vbox", "_base", "_acc", "_retains",
                 "_view_fn", "_vver", "_inf", "__weakref__")
    __array_priority__ = 1000  # NumPy defers to our reflected operators

    def __init__(self, *args, dtype=None, requires_grad=False):
        """PyTorch's legacy constructor, in the default dtype: ``Tensor(2, 3)`` or
        ``Tensor(Size)`` an uninitialized tensor of that shape, ``Tensor(sequence or
        ndarray)`` a copy of the data, ``Tensor(tensor)`` an alias of it, ``Tensor()`` an
        empty one."""
        t = _legacy_new(args, dtype)
        for name in _STATE:  # the fresh state wrap() gives, on this object
            setattr(self, name, getattr(t, name))
        d = self._data
        if type(d) is Var and d.trace.tracks:  # a segmented trace computes this object at a break, not t
            d.trace.track(self)
        if requires_grad:
            self.requires_grad_(True)

    # ------------------------------------------------------------ attributes
    @property
    def shape(self) -> Size:
        return Size(self._data.shape)

    @property
    def dtype(self) -> D.dtype:
        return D.from_numpy_dtype(self._data.dtype)

    @property
    def device(self) -> device:
        d = self._data
        return CPU if type(d) is np.ndarray or type(d) is Var else devices.of(d)

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def is_cpu(self) -> bool:
        return self.device.type == "cpu"

    @property
    def is_meta(self) -> bool:
        """Whether this tensor is on the meta device (a shape and dtype, no data)."""
        return type(self._data) is MetaArray

    def get_device(self) -> int:
        """The CUDA device's index, -1 for a CPU tensor."""
        dev = self.device
        return -1 if dev.type == "cpu" else dev.index

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def requires_grad(self) -> bool:
        return self._rg

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        self.requires_grad_(flag)

    def _autograd_call(self, what: str, sees_uses: bool = False, changes_leaf: bool = False):
        """Where an autograd-API call (a hook, retain_grad, requires_grad_) on this tensor
        runs: on a value compile is tracing, a graph break, so that it takes effect on the
        concrete tensor as in eager (a compiled graph has no place for it); else here.
        ``sees_uses``: the call concerns the gradient from every use of the tensor, so one
        that compiled code already used inside a segment (whose backward is out of the
        call's reach) makes the call run eagerly from its start, or raises GraphBreak if it
        cannot start over (a break before it already ran on). ``changes_leaf``: the call
        changes this tensor's autograd state, which compiled code does not replay: inside
        compile's trace it runs eagerly, also on a tensor the trace has not read yet."""
        from ..tracer.trace import GraphBreak, capture_trace, current_traces, user_frame
        d = self._data
        tracing = type(d) is Var and d.trace.follows_requires_grad and d.trace.active
        if changes_leaf and not tracing:
            tr = capture_trace()
            if tr is not None and tr.active:
                return tr.eagerly(f"Tensor.{what} at {user_frame()}")
        if sees_uses and self._grad_fn is not None:
            trs = current_traces()
            from ..ir.prims import stop_gradient  # (a detach() is no use: no gradient comes back through it)
            used = (any(d in e.inputs for e in d.trace.graph.eqns if e.prim is not stop_gradient) if tracing else
                    bool(trs) and trs[-1].follows_requires_grad
                    and self._out_nr in getattr(getattr(self._grad_fn, "ctx", None), "used_inside", ()))
            if used:
                raise GraphBreak(f"Tensor.{what} at {user_frame()} on a tensor compiled code already used "
                                 "before a graph break (call it before the tensor's first use)")
        if tracing:
            return d.trace.eagerly(f"Tensor.{what} at {user_frame()}")
        return contextlib.nullcontext()

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        if self._grad_fn is None and self._rg != bool(requires_grad):
            with self._autograd_call("requires_grad_()", changes_leaf=True):
                return self._set_requires_grad(requires_grad)
        return self._set_requires_grad(requires_grad)

    def _set_requires_grad(self, requires_grad: bool) -> "Tensor":
        if self._grad_fn is not None:
            if not requires_grad:
                raise RuntimeError("you can only change requires_grad flags of leaf variables. If you want to use "
                                   "a computed variable in a subgraph that doesn't require differentiation use "
                                   "var_no_grad = var.detach().")
            return self
        if requires_grad and self._data.dtype.kind not in "fVc" and self.dtype.name != "bfloat16":
            raise RuntimeError("only Tensors of floating point and complex dtype can require gradients")
        if requires_grad and self._inf and not STATE.inference:
            raise RuntimeError("Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.")
        self._rg = bool(requires_grad)
        return self

    @property
    def grad_fn(self):
        return self._grad_fn

    @property
    def is_leaf(self) -> bool:
        return self._grad_fn is None

    def _is_view(self) -> bool:
        """Whether this tensor is a view of another (PyTorch's private query, which libraries use)."""
        return self._base is not None

    @property
    def grad(self) -> Optional["Tensor"]:
        trs = speculate.STACK.traces  # (the trace stack: read on every .grad, without an import)
        if trs and getattr(trs[-1], "grad_owners", None) is not None and not trs[-1].tracks:
            trs[-1].read_grad(self)  # (compile's capture: read at each call)
        if self._grad_fn is not None and not self._retains and self._grad is None:
            warnings.warn("The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
                          "attribute won't be populated during autograd.backward(). If you indeed want the .grad "
                          "field to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor.",
                          UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value: Optional["Tensor"]) -> None:
        if value is not None:
            if not (isinstance(value, Tensor) or getattr(value, "is_sparse", False)):  # (or a sparse COO tensor)
                raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type {type(value).__name__}")
            if tuple(value.shape) != tuple(self.shape):
                raise RuntimeError(f"assigned grad has data of a different size: {list(value.shape)} vs {list(self.shape)}")
            if value.dtype != self.dtype:
                from .ops import cpp_scalar_name
                given = cpp_scalar_name(value._values() if value.is_sparse else value)
                raise RuntimeError(f"attempting to assign a gradient with dtype '{given}' to a tensor with grad_dtype "
                                   f"'{D.SCALAR_NAMES[self.dtype.name]}'. The gradient must match the tensor's "
                                   "grad_dtype (defaults to the tensor's dtype).")
        from ..tracer.trace import current_traces
        trs = current_traces()
        if trs and trs[-1].captures_state:  # inside fusegrad.compile: undo this after tracing
            trs[-1].touch(self)
        self._grad = value

    @property
    def retains_grad(self) -> bool:
        return self._retains is not False

    @property
    def data(self) -> "Tensor":
        """The tensor's values without autograd: as ``detach()``, but with a version counter of
        its own, so in-place changes through it are not tracked (PyTorch's weight clipping and
        EMA idiom ``p.data.mul_(...)`` between a forward and its backward)."""
        t = self.detach()
        if type(self._data) is not Var:
            t._vbox = None
        return t

    @data.setter
    def data(self, value: "Tensor") -> None:
        d = value._data
        if type(d) is Var and d.trace.active and not (type(self._data) is Var and self._data.trace is d.trace):
            # compiled code sets a captured tensor's data (MoCo's momentum update): an update the
            # trace writes back after each call, without gradient (a leaf keeps its own)
            d.trace.rebind(self, d)
            if self._rg and self._grad_fn is None:
                d.trace.rebound_leaves[id(self)] = self
            return
        self._data = d

    @property
    def _version(self) -> int:
        return self._vbox[0] if self._vbox is not None else 0

    @property
    def T(self) -> "Tensor":
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self) -> "Tensor":
        return self.transpose(-2, -1)

    def _bump(self) -> None:
        if self._vbox is None:
            self._vbox = [0]
        self._vbox[0] += 1

    def _accumulator(self) -> "_nodes.AccumulateGrad":
        if self._acc is None:
            self._acc = _nodes.AccumulateGrad(self)
        return self._acc

    # ------------------------------------------------------------ sizes and conversion
    def size(self, dim: Optional[int] = None):
        if dim is None:
            return self.shape
        return self._data.shape[dim]

    def dim(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        return int(np.prod(self._data.shape, dtype=np.int64))

    nelement = numel

    def element_size(self) -> int:
        return self._data.dtype.itemsize

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def _concrete(self, what: str, host: bool = False) -> np.ndarray:
        """The NumPy value of this tensor for ``what``: a graph break while tracing; for a CUDA
        tensor a copy to the host when ``host`` (where PyTorch copies too: ``item()``,
        printing), else an error (an op with no device implementation, never a silent copy)."""
        d = self._data
        if type(d) is np.ndarray:
            if speculate.STACK.traces:
                speculate.read_captured(self, d)
            return d
        if type(d) is Var:
            from ..tracer.trace import escaped, user_frame
            if not d.trace.active:
                raise escaped(d)
            d.trace.graph_break(f"{what} needs a concrete value at {user_frame()}", data_dependent=True)
            if type(self._data) is Var:  # (a segmented trace computes every tensor it tracks)
                raise RuntimeError(f"{what}: a tensor the compiled code made was not computed at the graph "
                                   f"break at {user_frame()}")
            return self._concrete(what, host)
        if type(d) is MetaArray:
            raise NotImplementedError(NO_DATA)
        if driver.is_device_array(d):
            if host:
                if speculate.STACK.traces:
                    speculate.read_captured(self, d)
                return driver.to_host(d)
            raise RuntimeError(f"{what} is not implemented for {self.device} tensors (the operand of shape "
                               f"{list(d.shape)}): copy it to the CPU with .cpu() first")
        return d

    def _check_host(self) -> None:
        """PyTorch's TypeError for a CUDA or meta tensor where only host memory will do."""
        d = self._data
        if type(d) is not np.ndarray and (type(d) is MetaArray or driver.is_device_array(d)):
            raise TypeError(f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to copy the "
                            "tensor to host memory first.")

    def numpy(self, *, force: bool = False) -> np.ndarray:
        if not force:
            self._check_host()
            if self._rg and STATE.enabled:  # (under no_grad PyTorch allows it: a custom Function's forward)
                raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                                   "instead.")
        return self._concrete("Tensor.numpy()", host=force)

    def __array__(self, dtype=None, copy=None):
        self._check_host()
        a = self._concrete("converting a Tensor to a NumPy array")
        return a if dtype is None else a.astype(dtype)

    def tolist(self):
        return self._concrete("Tensor.tolist()", host=True).tolist()

    def item(self):
        v = speculate.traced(self)
        if v is not None:
            return speculate.item(v)
        return self._scalar("Tensor.item()")

    def _scalar(self, what: str):
        """The Python number of a one-element tensor, for ``what`` (never speculated: the
        caller needs the number itself)."""
        a = self._data if type(self._data) is MetaArray else self._concrete(what, host=True)
        if a.size != 1:
            raise RuntimeError(f"a Tensor with {a.size} elements cannot be converted to Scalar")
        if type(a) is MetaArray:
            raise RuntimeError("Tensor.item() cannot be called on meta tensors")
        return a.reshape(()).item()

    def __bool__(self) -> bool:
        v = speculate.traced(self)
        if v is not None:
            return speculate.truth(v)
        if type(self._data) is MetaArray:
            return bool(self._scalar("converting a Tensor to a Python bool"))
        a = self._concrete("converting a Tensor to a Python bool (data-dependent control flow)", host=True)
        if a.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(a.reshape(()))

    def __float__(self) -> float:
        return float(self._real_scalar("float(tensor)", "double"))

    def __int__(self) -> int:
        return int(self._real_scalar("int(tensor)", "int64_t"))

    def _real_scalar(self, what: str, cpp: str):
        v = self._python_scalar(what)
        if isinstance(v, complex):  # (PyTorch's message for a complex value)
            raise RuntimeError(f"value cannot be converted to type {cpp} without overflow")
        return v

    def _python_scalar(self, what: str):
        """``_scalar`` for Python's float(), int() and complex(), which raise ValueError (as
        PyTorch's) where the tensor has more or fewer elements than one."""
        if self.numel() != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return self._scalar(what)

    def __complex__(self) -> complex:
        return complex(self._python_scalar("complex(tensor)"))

    def __index__(self) -> int:
        if self._data.dtype.kind not in "iub" or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self._scalar("using a tensor as an index"))

    def __hash__(self):
        return id(self)

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def __reduce_ex__(self, proto):
        dev = self.device
        extra = (str(dev),) if dev.type != "cpu" else ()
        data = self._data if dev.type == "meta" else np.array(self._concrete("pickling", host=True))
        return (_rebuild, (data, self._rg) + extra)

    def __deepcopy__(self, memo):
        if self._grad_fn is not None:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                               "protocol at the moment.  If you were attempting to deepcopy a module, this may be "
                               "because of a torch.nn.utils.weight_norm usage, see "
                               "https://github.com/pytorch/pytorch/pull/103001")
        if id(self) in memo:
            return memo[id(self)]
        d = self._data
        t = wrap(np.array(self._concrete("deepcopy"), copy=True) if type(d) is np.ndarray or type(d) is Var
                 else devices.copy(d))  # (a CUDA or meta payload: copied on its device)
        t._rg = self._rg
        if self._grad is not None:
            t._grad = self._grad.__deepcopy__(memo)
        out = t if type(self) is Tensor else _retype(t, type(self))
        memo[id(self)] = out
        return out

    # ------------------------------------------------------------ autograd
    def detach(self) -> "Tensor":
        if type(self._data) is Var:  # traced: a stop_gradient keeps the IR's autodiff out too
            from ..ir.prims.elementwise import stop_gradient
            t = stop_gradient(self)
            t._base = self._base if self._base is not None else self  # an alias: in-place ops on it
            t._view_fn = self._view_fn or ()                           # update self (see ops.inplace)
            return t
        t = wrap(self._data)
        if self._vbox is None:
            self._vbox = [0]
        t._vbox = self._vbox
        t._base = self._base if self._base is not None else self
        t._inf = self._inf
        t._view_fn = self._view_fn or ()
        return t

    def detach_(self) -> "Tensor":
        if self._base is not None:
            raise RuntimeError("Can't detach views in-place. Use detach() instead. If you are using "
                               "DistributedDataParallel (DDP) for training, and gradient_as_bucket_view is set as "
                               "True, gradients are views of DDP buckets, and hence detach_() cannot be called on "
                               "these gradients. To fix this error, please refer to the Optimizer.zero_grad() "
                               "function in torch/optim/optimizer.py as the solution.")
        self._grad_fn = None
        self._rg = False
        return self

    def retain_grad(self) -> None:
        if self._grad_fn is not None and not self._retains:
            with self._autograd_call("retain_grad()", sees_uses=True):
                return self._retain_grad()
        return self._retain_grad()

    def _retain_grad(self) -> None:
        if self._grad_fn is None:
            if not self._rg:
                raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
            return
        if self._retains:
            return
        self._retains = True
        import weakref
        ref = weakref.ref(self)

        def store(g):
            t = ref()
            if t is not None:
                if t._grad is None:
                    t._grad = g.detach() if not STATE.enabled else g
                    if not STATE.enabled:
                        t._grad = wrap(np.array(g._data, copy=True))
                else:
                    t._grad = t._grad + g
        store._retain = True
        self._retains = _for_output(store, self._out_nr, self._grad_fn)
        self._grad_fn._add_prehook(self._retains, before=("_node_hook",))

    def _regraft(self, node, nr: int) -> None:
        """Make ``(node, nr)`` this tensor's grad_fn (an in-place update or a view's
        regeneration); retain_grad's hook moves with it, so ``.grad`` is the gradient of the
        newest value, as in PyTorch (other tensor hooks stay on the old node)."""
        old = self._grad_fn
        self._grad_fn, self._out_nr = node, nr
        h = self._retains
        if h is False or old is node or node is None:
            return
        if old is not None and old.pre_hooks and h in old.pre_hooks:
            old.pre_hooks.remove(h)
        self._retains = _for_output(getattr(h, "_hook", h), nr, node)
        node._add_prehook(self._retains, before=("_node_hook",))

    def register_hook(self, hook) -> "_nodes.RemovableHandle":
        """``hook(grad) -> Tensor or None`` runs when this tensor's gradient is computed."""
        with self._autograd_call("register_hook()", sees_uses=True):
            return self._register_hook(hook)

    def _register_hook(self, hook) -> "_nodes.RemovableHandle":
        if not self._rg:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._grad_fn is None:
            return self._accumulator()._add_prehook(hook)
        node = self._grad_fn
        h = _for_output(hook, self._out_nr, node)
        return node._add_prehook(h, before=("_retain", "_node_hook"))

    def register_post_accumulate_grad_hook(self, hook) -> "_nodes.RemovableHandle":
        """``hook(tensor) -> None`` runs after a backward has accumulated into this leaf's ``.grad``."""
        if not self._rg:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        acc = self._accumulator()
        if acc.post_acc_hooks is None:
            acc.post_acc_hooks = []
        acc.post_acc_hooks.append(hook)
        return _nodes.RemovableHandle(acc.post_acc_hooks, hook)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None) -> None:
        from ..autograd.functions import backward
        backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    # ------------------------------------------------------------ printing
    def __repr__(self) -> str:
        d = self._data
        if type(d) is Var and d.trace.breaks_on_print:  # print(t) in compiled code: a graph break
            d = self._concrete("printing a Tensor")
        if type(d) is MetaArray:
            from .printing import meta_repr
            return meta_repr(d.shape, self.dtype, self._grad_fn, self._rg)
        if type(d) is not Var:
            from .printing import tensor_repr
            return tensor_repr(self._concrete("printing", host=True), self.dtype, self._grad_fn, self._rg,
                               str(self.device))
        extra = ""
        if self._grad_fn is not None:
            extra += f", grad_fn=<{type(self._grad_fn).__name__}>"
        elif self._rg:
            extra += ", requires_grad=True"
        return f"tensor(traced {d!r}: {d.type_str()}{extra})"

    __str__ = __repr__

    def __format__(self, spec):
        d = self._data
        if type(d) is not Var and type(d) is not MetaArray and d.ndim == 0:
            return format(self.item(), spec)
        if spec:  # (PyTorch formats only 0-d tensors with a spec)
            raise TypeError("unsupported format string passed to Tensor.__format__")
        return repr(self)


def _for_output(hook, nr: int, node):
    """A tensor hook on output ``nr`` of a node (multi-output nodes pass all grads)."""
    if node.n_outputs == 1:
        return hook

    def per_output(gs):
        gs = list(gs)
        if gs[nr] is not None:
            r = hook(gs[nr])
            if r is not None:
                gs[nr] = r
        return gs
    per_output._per_output = True
    per_output._hook = hook
    per_output._retain = getattr(hook, "_retain", False)
    return per_output


_new = object.__new__
_STATE = tuple(s for s in Tensor.__slots__ if s != "__weakref__")


def _legacy_new(args: tuple, dtype) -> Tensor:
    """The tensor ``Tensor(*args)`` stands for (see ``Tensor.__init__``)."""
    from .factory import empty, tensor
    dt = D.to_dtype(dtype) if dtype is not None else D.get_default_dtype()
    if not args:
        return empty(0, dtype=dt)
    first = args[0]
    sizes = all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args)
    if sizes or (len(args) == 1 and isinstance(first, Size)):
        return empty(*args, dtype=dt)
    if len(args) > 1:
        raise TypeError(f"new() received an invalid combination of arguments - got "
                        f"({', '.join(type(a).__name__ for a in args)}): expected sizes as ints, or one "
                        "sequence of data")
    if isinstance(first, Tensor):  # an alias, in the autograd graph too
        from . import ops
        return ops.view(first, tuple(first.shape))
    if hasattr(first, "_root"):  # a storage (torch.ByteTensor(torch.ByteStorage.from_buffer(b))): its memory, 1-d
        root = first._root.reshape(-1)
        return wrap(root if root.dtype == dt.np else root.view(np.uint8).view(dt.np))
    if isinstance(first, (float, bool, complex)) or isinstance(first, np.generic):
        raise TypeError(f"new(): data must be a sequence (got {type(first).__name__})")
    return tensor(first, dtype=dt)


def wrap(data, cls=Tensor) -> Tensor:
    """A new Tensor over ``data`` (an ndarray or Var) without copying."""
    t = _new(cls)
    t._data = data
    t._rg = False
    t._grad_fn = None
    t._out_nr = 0
    t._grad = None
    t._vbox = None
    t._base = None
    t._acc = None
    t._retains = False
    t._view_fn = None
    t._vver = 0
    t._inf = STATE.inference
    return t


def _retype(t: Tensor, cls) -> Tensor:
    out = wrap(t._data, cls)
    out._rg = t._rg
    out._grad = t._grad
    return out


def _rebuild(arr, rg, dev=None):
    t = wrap(arr if dev is None else devices.move(arr, devices.resolve(dev)))
    t._rg = rg
    return t


def zeros_like_meta(m) -> Tensor:
    """Zeros shaped like a (shape, numpy dtype) pair, on the default device (during a
    backward: the device its gradients flow on)."""
    dev = devices.resolve(None)
    if dev.type == "meta":
        return wrap(MetaArray(m[0], m[1]))
    z = np.zeros(m[0], dtype=m[1])
    return wrap(z if dev.type == "cpu" else devices.move(z, dev))
