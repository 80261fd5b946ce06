"""``nn.Module``: the base class of layers, with PyTorch's registration of parameters,
buffers and submodules, state dicts, train/eval modes and forward hooks."""
from __future__ import annotations

import functools
import itertools
import os
import sys
import warnings
import weakref
from collections import OrderedDict, namedtuple
from collections.abc import Mapping
from typing import Any, Callable, Dict, Iterator, Optional, Set, Tuple

from ..ir import dtypes as D
from ..runtime.grad_mode import no_grad
from ..runtime.sparse_bindings import is_tensor
from ..runtime.tensor import Tensor
from ..ir.graph import Var
from ..tracer.live import guard
from ..tracer.trace import capture_trace, capturing, user_frame, user_stacklevel
from .buffer import Buffer
from .parameter import Parameter, UninitializedParameter

class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """``load_state_dict``'s result, printed as PyTorch's."""
    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return f"_IncompatibleKeys(missing_keys={self.missing_keys}, unexpected_keys={self.unexpected_keys})"


def _typename(obj) -> str:
    if isinstance(obj, Tensor):
        return f"fusegrad.{type(obj).__name__}"
    t = type(obj)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _addindent(s: str, n: int) -> str:
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join(" " * n + line for line in lines[1:])


class RemovableHandle:
    """Returned by hook registration; ``remove()`` unregisters the hook."""
    _next_id = 0

    def __init__(self, hooks: "OrderedDict[int, Callable]", *extra: set):
        self._hooks = hooks
        self._extra = extra
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1

    def remove(self) -> None:
        self._hooks.pop(self.id, None)
        for s in self._extra:
            s.discard(self.id)

    def __enter__(self) -> "RemovableHandle":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def _side_effect(name: str, old, value) -> bool:
    """Whether the user's code setting a module's plain attribute ``name`` from ``old`` to
    ``value`` inside compile's trace is state the compiled graph would not replay (a step
    counter); fusegrad's own code sets none that matter, and the training mode is compared
    when the trace ends (tracer.side_effects)."""
    if old is value or name == "training" or isinstance(value, Tensor) or isinstance(old, Tensor) or \
            sys._getframe(2).f_code.co_filename.startswith(_PACKAGE):
        return False
    return not (type(value) is type(old) and (type(old) in _PLAIN or (
        isinstance(old, tuple) and all(type(v) in _PLAIN for v in old + value))) and old == value)


def _stored_traced(module: "Module", store: Optional[dict], old, value, name: str) -> bool:
    """Inside ``fusegrad.compile``'s trace, a traced tensor assigned to a module's attribute
    (``store``: its buffers, or None for a plain attribute). Over a tensor of the same shape
    and dtype that does not require grad (``self.running = self.running * 0.9 + ...``) the
    existing tensor takes the new value, written back after every call, and keeps standing
    for the attribute: True. Otherwise (a pruning or weight-norm pre-hook's
    ``module.weight = orig * mask``) compile's trace records the store, and the compiled call
    assigns the value it computed after each call; a segmented trace computes it at its next
    break; other traces (func transforms) break. False: assign as usual (also outside compile
    and for other values)."""
    if not (isinstance(value, Tensor) and type(value._data) is Var) or not capturing():
        return False
    tr = capture_trace()
    if isinstance(old, Tensor) and old.shape == value.shape and old.dtype == value.dtype and not value._rg:
        tr.rebind(old, value._data)
        return True
    if tr.attribute_stores is not None and value._data.trace is tr:
        tr.attribute_stores[(id(module), name)] = (module, store, name, value)
        # (what a trace that stops early puts back: compiled.restore_attributes)
        target = store if store is not None else module.__dict__
        tr.attribute_olds.setdefault((id(module), name), (target, name, name in target, target.get(name)))
    elif not tr.tracks:
        value._data.trace.graph_break(f"a traced tensor assigned to module attribute '{name}' at {user_frame()}")
    return False


class _WrappedHook:
    """A hook called with its module (held weakly) prepended to the arguments when
    ``module`` is given, as PyTorch's ``torch.nn.modules.module._WrappedHook``."""

    def __init__(self, hook: Callable, module: Optional["Module"] = None) -> None:
        self.hook = hook
        functools.update_wrapper(self, hook)
        self.with_module = False
        if module is not None:
            self.module = weakref.ref(module)
            self.with_module = True

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.with_module:
            module = self.module()
            if module is None:
                raise RuntimeError("You are trying to call the hook of a dead Module!")
            return self.hook(module, *args, **kwargs)
        return self.hook(*args, **kwargs)

    def __getstate__(self) -> dict:
        result = {"hook": self.hook, "with_module": self.with_module}
        if self.with_module:
            result["module"] = self.module()
        return result

    def __setstate__(self, state: dict) -> None:
        self.hook = state["hook"]
        self.with_module = state["with_module"]
        if self.with_module:
            if state["module"] is None:
                raise RuntimeError("You are trying to revive the hook of a dead Module!")
            self.module = weakref.ref(state["module"])


# ------------------------------------------------------------ global module hooks (every module's call)
_global_backward_pre_hooks: "OrderedDict[int, Callable]" = OrderedDict()
_global_backward_hooks: "OrderedDict[int, Callable]" = OrderedDict()
_global_is_full_backward_hook: Optional[bool] = None
_global_forward_pre_hooks: "OrderedDict[int, Callable]" = OrderedDict()
_global_forward_hooks: "OrderedDict[int, Callable]" = OrderedDict()
_global_forward_hooks_always_called: Set[int] = set()
_global_forward_hooks_with_kwargs: Set[int] = set()

_EXTRA_STATE_KEY_SUFFIX = "_extra_state"
_ABSENT = object()  # an attribute not set before (Module.__setattr__)
_PLAIN = (bool, int, float, str, type(None))  # attribute values compared by value there
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # fusegrad/

#: the per-module hook dictionaries, filled in by ``__setstate__`` for modules pickled without them
_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
               "_state_dict_hooks", "_state_dict_pre_hooks", "_load_state_dict_pre_hooks",
               "_load_state_dict_post_hooks")
_NO_HOOKS: "OrderedDict[int, Callable]" = OrderedDict()  # read-only stand-in for an absent dictionary


def register_module_forward_pre_hook(hook: Callable[..., None]) -> RemovableHandle:
    """A forward pre-hook run before every module's own ones (``hook(module, args)``)."""
    handle = RemovableHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[handle.id] = hook
    return handle


def register_module_forward_hook(hook: Callable[..., None], *, with_kwargs: bool = False,
                                 always_call: bool = False) -> RemovableHandle:
    """A forward hook run before every module's own ones (``hook(module, args, output)``)."""
    handle = RemovableHandle(_global_forward_hooks, _global_forward_hooks_always_called,
                             _global_forward_hooks_with_kwargs)
    _global_forward_hooks[handle.id] = hook
    if with_kwargs:
        _global_forward_hooks_with_kwargs.add(handle.id)
    if always_call:
        _global_forward_hooks_always_called.add(handle.id)
    return handle


def register_module_backward_hook(hook: Callable) -> RemovableHandle:
    """The global form of the deprecated ``Module.register_backward_hook``."""
    return _register_global_backward_hook(hook, full=False)


def register_module_full_backward_pre_hook(hook: Callable) -> RemovableHandle:
    """A backward pre-hook (``hook(module, grad_output)``) for every module call."""
    handle = RemovableHandle(_global_backward_pre_hooks)
    _global_backward_pre_hooks[handle.id] = hook
    return handle


def register_module_full_backward_hook(hook: Callable) -> RemovableHandle:
    """A full backward hook (``hook(module, grad_input, grad_output)``) for every module
    call, run before the module's own ones."""
    return _register_global_backward_hook(hook, full=True)


def _register_global_backward_hook(hook: Callable, full: bool) -> RemovableHandle:
    """Add a global backward hook, full or not: the two kinds cannot be mixed, as in PyTorch."""
    global _global_is_full_backward_hook
    if _global_is_full_backward_hook is (not full):
        raise RuntimeError("Cannot use both regular backward hooks and full backward hooks as a "
                           "global Module hook. Please use only one of them.")
    _global_is_full_backward_hook = full
    handle = RemovableHandle(_global_backward_hooks)
    _global_backward_hooks[handle.id] = hook
    return handle


class Module:
    """Base class for all neural network modules."""

    training: bool
    _version: int = 1  # saved in ``state_dict()._metadata``, as PyTorch's

    def __init__(self, *args, **kwargs) -> None:
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got an unexpected argument")
        setattr_ = object.__setattr__
        setattr_(self, "training", True)
        setattr_(self, "_parameters", OrderedDict())
        setattr_(self, "_buffers", OrderedDict())
        setattr_(self, "_non_persistent_buffers_set", set())
        setattr_(self, "_modules", OrderedDict())
        setattr_(self, "_forward_hooks", OrderedDict())
        setattr_(self, "_forward_hooks_with_kwargs", set())
        setattr_(self, "_forward_hooks_always_called", set())
        setattr_(self, "_forward_pre_hooks", OrderedDict())
        setattr_(self, "_forward_pre_hooks_with_kwargs", set())
        setattr_(self, "_backward_hooks", OrderedDict())
        setattr_(self, "_backward_pre_hooks", OrderedDict())
        setattr_(self, "_is_full_backward_hook", None)
        setattr_(self, "_state_dict_hooks", OrderedDict())
        setattr_(self, "_state_dict_pre_hooks", OrderedDict())
        setattr_(self, "_load_state_dict_pre_hooks", OrderedDict())
        setattr_(self, "_load_state_dict_post_hooks", OrderedDict())
        setattr_(self, "_compiled_call_impl", None)

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        d = self.__dict__
        for name in _HOOK_DICTS:
            d.setdefault(name, OrderedDict())
        for name in ("_forward_hooks_with_kwargs", "_forward_hooks_always_called", "_forward_pre_hooks_with_kwargs"):
            d.setdefault(name, set())
        d.setdefault("_is_full_backward_hook", None)
        d.setdefault("_compiled_call_impl", None)

    def _hook_dict(self, name: str) -> "OrderedDict[int, Callable]":
        """The hook dictionary ``name``, made when this module lacks it (built without it)."""
        d = self.__dict__.get(name)
        if d is None:
            d = self.__dict__[name] = OrderedDict()
        return d

    def forward(self, *args, **kwargs) -> Any:
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    # ------------------------------------------------------------ registration
    def register_buffer(self, name: str, tensor: Optional[Tensor], persistent: bool = True) -> None:
        """Add a tensor that is state but not a parameter (e.g. running statistics)."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:  # (a parameter or submodule too)
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not is_tensor(tensor):
            raise TypeError(f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                            "(torch Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name: str, param: Optional[Parameter]) -> None:
        """Add a parameter (or ``None``, a declared but absent parameter)."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None:
            if not isinstance(param, Parameter):
                raise TypeError(f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                                "(torch.nn.Parameter or None required)")
            if param.grad_fn is not None:
                raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be "
                                 f"created explicitly. To express '{name}' as a function of another Tensor, compute "
                                 "the value in the forward() method.")
        self._parameters[name] = param

    def add_module(self, name: str, module: Optional["Module"]) -> None:
        """Add a child module, reachable as attribute ``name``."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        self._check_name(name, "module")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    @staticmethod
    def _check_name(name, what: str) -> None:
        if not isinstance(name, str):
            raise TypeError(f"{what} name should be a string. Got {_typename(name)}")
        if "." in name:
            raise KeyError(f'{what} name can\'t contain "."')
        if name == "":
            raise KeyError(f'{what} name can\'t be empty string ""')

    def __setattr__(self, name: str, value: Any) -> None:
        def remove_from(*containers):
            for c in containers:
                if name in c:
                    if isinstance(c, dict):
                        del c[name]
                    else:
                        c.discard(name)

        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(d, self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter '{name}' "
                                "(torch.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        elif isinstance(value, Buffer):  # (nn.Buffer: registered, unless the name is a parameter's)
            if d.get("_buffers") is None:
                raise AttributeError("cannot assign buffer before Module.__init__() call")
            remove_from(d, self._modules)
            self.register_buffer(name, value, value.persistent)
        else:
            modules = d.get("_modules")
            if isinstance(value, Module):
                if modules is None:
                    raise AttributeError("cannot assign module before Module.__init__() call")
                remove_from(d, self._parameters, self._buffers, self._non_persistent_buffers_set)
                modules[name] = value
            elif modules is not None and name in modules:
                if value is not None:
                    raise TypeError(f"cannot assign '{_typename(value)}' as child module '{name}' "
                                    "(torch.nn.Module or None expected)")
                modules[name] = value
            else:
                buffers = d.get("_buffers")
                if buffers is not None and name in buffers:
                    if value is not None and not isinstance(value, Tensor):
                        raise TypeError(f"cannot assign '{_typename(value)}' as buffer '{name}' "
                                        "(torch.Tensor or None expected)")
                    if not _stored_traced(self, buffers, buffers[name], value, name):
                        buffers[name] = value
                elif not _stored_traced(self, None, d.get(name), value, name):
                    old = d.get(name, _ABSENT)
                    if capturing() and _side_effect(name, old, value):
                        capture_trace().graph_break(f"{type(self).__name__}.{name} set at {user_frame()} "
                                                    "(a Python side effect, which a replayed graph would not have)")
                    object.__setattr__(self, name, value)
                    # compiled code that called this module retraces (_call_impl) once a plain
                    # attribute is set to another value from outside (training: guarded by value)
                    if name != "training" and old is not value and not capturing() and not (
                            type(old) in _PLAIN and type(value) is type(old) and old == value):
                        d["_attr_version"] = d.get("_attr_version", 0) + 1

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            s = d.get(store)
            if s is not None and name in s:
                return s[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)
            if not capturing():  # (compiled code that called this module retraces, as after a set)
                self.__dict__["_attr_version"] = self.__dict__.get("_attr_version", 0) + 1

    def __dir__(self):
        keys = itertools.chain(super().__dir__(), self._parameters, self._buffers, self._modules)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    # ------------------------------------------------------------ lookup by dotted name
    def get_submodule(self, target: str) -> "Module":
        """The submodule at dotted path ``target`` ("" is this module)."""
        mod = self
        if target == "":
            return mod
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def set_submodule(self, target: str, module: "Module", strict: bool = False) -> None:
        """Set the submodule at dotted path ``target`` (its parent must exist; with
        ``strict`` the submodule itself too)."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        atoms = target.split(".")
        if not isinstance(module, Module):
            raise ValueError("`" + "module" + f"` is not an nn.Module, found {type(module)}")
        parent = self if len(atoms) == 1 else self.get_submodule(".".join(atoms[:-1]))
        if strict and not hasattr(parent, atoms[-1]):
            raise AttributeError(parent._get_name() + " has no attribute `" + atoms[-1] + "`")
        if hasattr(parent, atoms[-1]):
            mod = getattr(parent, atoms[-1])
            if not isinstance(mod, Module):
                raise AttributeError("`" + atoms[-1] + "` is not an nn.Module")
        setattr(parent, atoms[-1], module)

    def get_parameter(self, target: str) -> Parameter:
        mod, name = self._locate(target)
        if name not in mod._parameters:
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return mod._parameters[name]

    def get_buffer(self, target: str) -> Tensor:
        mod, name = self._locate(target)
        if name not in mod._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return mod._buffers[name]

    def _locate(self, dotted_name: str) -> Tuple["Module", str]:
        """The module owning ``dotted_name`` and the attribute's name within it."""
        path, _, name = dotted_name.rpartition(".")
        mod = self.get_submodule(path)
        if not hasattr(mod, name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        return mod, name

    def _swap(self, attr_name: str, value: Any) -> Any:
        """Set parameter or buffer ``attr_name`` to ``value`` (any tensor, not only a
        Parameter) and return what was there; used by ``func.functional_call``."""
        for store in (self._parameters, self._buffers):
            if attr_name in store:
                old = store[attr_name]
                store[attr_name] = value
                return old
        old = getattr(self, attr_name)
        object.__setattr__(self, attr_name, value)
        return old

    # ------------------------------------------------------------ iteration
    def _named_members(self, get_members, prefix: str = "", recurse: bool = True,
                       remove_duplicate: bool = True) -> Iterator[Tuple[str, Any]]:
        memo = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for module_prefix, module in modules:
            for k, v in get_members(module):
                if v is None or id(v) in memo:
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (module_prefix + ("." if module_prefix else "") + k, v)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """This module's parameters (and its submodules' with ``recurse``), each once."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[Tuple[str, Parameter]]:
        """``(dotted name, parameter)`` pairs in registration order."""
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[Tuple[str, Tensor]]:
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def children(self) -> Iterator["Module"]:
        for _, m in self.named_children():
            yield m

    def named_children(self) -> Iterator[Tuple[str, "Module"]]:
        memo = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in memo:
                memo.add(id(m))
                yield name, m

    def modules(self) -> Iterator["Module"]:
        for _, m in self.named_modules():
            yield m

    def named_modules(self, memo: Optional[Set[int]] = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[Tuple[str, "Module"]]:
        """This module and all below it, depth first, as ``(dotted name, module)``."""
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    # ------------------------------------------------------------ modes and gradients
    def train(self, mode: bool = True) -> "Module":
        """Set training mode (dropout active) on this module and all below it."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        if capturing():  # compiled code holds for the mode it found, not the one it sets (eval() ... train())
            guard((id(self), "training"), lambda: self.training)
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self) -> "Module":
        """Set evaluation mode: ``train(False)``."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the parameters' gradients (to None, or to zeros in place)."""
        for p in self.parameters():
            _zero_grad(p, set_to_none)

    def apply(self, fn: Callable[["Module"], None]) -> "Module":
        """Call ``fn`` on every submodule (children first) and on this module."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------ dtype conversion
    def _apply(self, fn: Callable[[Tensor], Tensor], recurse: bool = True) -> "Module":
        if recurse:
            for m in self.children():
                m._apply(fn)
        with no_grad():
            for p in self._parameters.values():
                if p is None:
                    continue
                p.data = fn(p)
                if p._grad is not None:
                    p._grad.data = fn(p._grad)
            for k, b in self._buffers.items():
                if b is not None:
                    self._buffers[k] = fn(b)
        return self

    def to(self, *args, **kwargs) -> "Module":
        """Move and/or cast parameters and buffers in place: ``to(device)``, ``to(dtype)``
        (floating-point and complex ones only), ``to(device, dtype)``, ``to(tensor)``, and lay the 4-d and
        5-d ones out in ``memory_format`` (``to(memory_format=torch.channels_last)``)."""
        from ..runtime.devices import resolve
        dtype, device = kwargs.get("dtype"), kwargs.get("device")
        fmt = kwargs.get("memory_format")
        for a in args:
            if isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            elif isinstance(a, D.dtype):
                dtype = a
            else:
                device = a
        dev = resolve(device) if device is not None else None
        if dtype is not None:
            dtype = D.to_dtype(dtype)
            if not dtype.is_floating_point and not dtype.is_complex:
                raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but got desired "
                                f"dtype={dtype}")
            if dtype.is_complex:
                warnings.warn("Complex modules are a new feature under active development whose design may change, "
                              "and some modules might not work as expected when using complex tensors as parameters "
                              "or buffers. Please file an issue at https://github.com/pytorch/pytorch/issues/new?"
                              "template=bug-report.yml if a complex module does not work as expected.",
                              UserWarning, stacklevel=user_stacklevel())
        if fmt is not None:
            self._apply(lambda t: t.to(memory_format=fmt) if t.ndim in (4, 5) else t)
        if dtype is None and dev is None:
            return self
        # (complex tensors too: a complex buffer cast to a real dtype keeps its real part, as PyTorch)
        return self._apply(lambda t: t.to(device=dev, dtype=dtype if t.is_floating_point() or t.is_complex()
                                          else None))

    def to_empty(self, *, device=None, recurse: bool = True) -> "Module":
        """Replace parameters and buffers by uninitialized tensors of the same shapes (and
        dtypes) on ``device`` (where they are when None), in place."""
        from ..runtime.devices import resolve
        from .. import empty_like
        dev = resolve(device) if device is not None else None
        return self._apply(lambda t: empty_like(t, device=dev), recurse=recurse)

    def cpu(self) -> "Module":
        return self.to("cpu")

    def cuda(self, device=None) -> "Module":
        """Move parameters and buffers to a CUDA device (the current one by default)."""
        from ..runtime.devices import resolve
        return self.to(resolve(device if device is not None else "cuda"))

    def float(self) -> "Module":
        return self._apply(lambda t: t.float() if t.is_floating_point() else t)

    def type(self, dst_type) -> "Module":  # noqa: A003 - PyTorch's name
        """Every parameter and buffer cast to ``dst_type`` (a dtype), as PyTorch's."""
        return self._apply(lambda t: t.type(dst_type))

    def double(self) -> "Module":
        return self._apply(lambda t: t.double() if t.is_floating_point() else t)

    def half(self) -> "Module":
        return self._apply(lambda t: t.half() if t.is_floating_point() else t)

    def bfloat16(self) -> "Module":
        return self._apply(lambda t: t.bfloat16() if t.is_floating_point() else t)

    # ------------------------------------------------------------ state dict
    def _save_to_state_dict(self, destination: Dict[str, Tensor], prefix: str, keep_vars: bool) -> None:
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        if getattr(type(self), "get_extra_state", Module.get_extra_state) is not Module.get_extra_state:
            destination[prefix + _EXTRA_STATE_KEY_SUFFIX] = self.get_extra_state()

    def state_dict(self, *args, destination: Optional[Dict[str, Tensor]] = None, prefix: str = "",
                   keep_vars: bool = False) -> Dict[str, Tensor]:
        """Parameters and persistent buffers by dotted name (detached, sharing memory), and
        ``_extra_state`` of modules that define ``get_extra_state``; ``_metadata`` holds
        each module's version. Runs the state-dict pre- and post-hooks, as PyTorch does."""
        if len(args) > 0:
            warnings.warn("Positional args are being deprecated, use kwargs instead. Refer to "
                          "https://pytorch.org/docs/main/generated/torch.nn.Module.html#torch.nn.Module.state_dict"
                          " for details.", FutureWarning, stacklevel=2)
            if destination is None:
                destination = args[0]
            if len(args) > 1 and prefix == "":
                prefix = args[1]
            if len(args) > 2 and keep_vars is False:
                keep_vars = args[2]
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        local_metadata = dict(version=self._version)
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in self.__dict__.get("_state_dict_pre_hooks", _NO_HOOKS).values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in self.__dict__.get("_state_dict_hooks", _NO_HOOKS).values():
            hook_result = hook(self, destination, prefix, local_metadata)
            if not getattr(hook, "_from_public_api", False):
                if hook_result is not None:
                    destination = hook_result
            elif hook_result is not None:
                raise RuntimeError("state_dict post-hook must return None")
        return destination

    def get_extra_state(self) -> Any:
        """Extra state for ``state_dict`` (saved as ``_extra_state``) when a subclass defines it."""
        raise RuntimeError(
            "Reached a code path in Module.get_extra_state() that should never be called. "
            "Please file an issue at https://github.com/pytorch/pytorch/issues/new?template=bug-report.yml "
            "to report this bug.")

    def set_extra_state(self, state: Any) -> None:
        """Restore what ``get_extra_state`` returned (``load_state_dict``), when a subclass defines it."""
        raise RuntimeError(
            "Reached a code path in Module.set_extra_state() that should never be called. "
            "Please file an issue at https://github.com/pytorch/pytorch/issues/new?template=bug-report.yml "
            "to report this bug.")

    def _load_from_state_dict(self, state_dict: Mapping, prefix: str, local_metadata: dict, strict: bool,
                              missing_keys: list, unexpected_keys: list, error_msgs: list,
                              assign: bool = False) -> None:
        for hook in self.__dict__.get("_load_state_dict_pre_hooks", _NO_HOOKS).values():
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        persistent = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local_state = {k: v for k, v in itertools.chain(self._parameters.items(), persistent.items())
                       if v is not None}
        assign = assign or local_metadata.get("assign_to_params_buffers", False)
        for name, param in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            value = state_dict[key]
            if not is_tensor(value):
                error_msgs.append(f'While copying the parameter named "{key}", expected torch.Tensor or '
                                  f"Tensor-like object from checkpoint but received {type(value)}")
                continue
            lazy = isinstance(param, UninitializedParameter)
            if not lazy and len(param.shape) == 0 and len(value.shape) == 1 and value.shape[0] == 1:
                value = value[0]  # PyTorch's compatibility with 0.3's one-element tensors
            if not lazy and tuple(value.shape) != tuple(param.shape):
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {value.shape} from "
                                  f"checkpoint, the shape in current model is {param.shape}.")
                continue
            try:
                with no_grad():
                    if assign:
                        if isinstance(param, Parameter):
                            if not isinstance(value, Parameter):
                                value = Parameter(value, requires_grad=param.requires_grad)
                            else:
                                value.requires_grad_(param.requires_grad)
                        setattr(self, name, value)
                    else:
                        param.copy_(value)
            except Exception as ex:  # noqa: BLE001  (reported with the key, as PyTorch does)
                error_msgs.append(f'While copying the parameter named "{key}", whose dimensions in the model are '
                                  f"{param.shape} and whose dimensions in the checkpoint are {value.shape}, an "
                                  f"exception occurred : {ex.args}.")
        extra_state_key = prefix + _EXTRA_STATE_KEY_SUFFIX
        if getattr(type(self), "set_extra_state", Module.set_extra_state) is not Module.set_extra_state:
            if extra_state_key in state_dict:
                self.set_extra_state(state_dict[extra_state_key])
            elif strict:
                missing_keys.append(extra_state_key)
        elif strict and extra_state_key in state_dict:
            unexpected_keys.append(extra_state_key)
        if strict:
            for key in state_dict:
                if not key.startswith(prefix) or key == extra_state_key:
                    continue
                head, dot, _ = key[len(prefix):].partition(".")
                if (dot and head not in self._modules) or (not dot and head not in local_state):
                    unexpected_keys.append(key)

    def load_state_dict(self, state_dict: Mapping[str, Tensor], strict: bool = True,
                        assign: bool = False) -> _IncompatibleKeys:
        """Copy parameters and buffers from ``state_dict``; returns the missing and
        unexpected keys (and raises RuntimeError on any with ``strict``). Runs the
        load-state-dict pre-hooks (in ``_load_from_state_dict``) and, after each module's
        subtree, its post-hooks, which may edit the key lists in place."""
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing, unexpected, errors = [], [], []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)
        if metadata is not None:
            state_dict._metadata = metadata

        def load(module: Module, local_state_dict: Mapping, prefix: str = "") -> None:
            local_metadata = {} if metadata is None else metadata.get(prefix[:-1], {})
            if assign:
                local_metadata["assign_to_params_buffers"] = assign
            module._load_from_state_dict(local_state_dict, prefix, local_metadata, True, missing, unexpected,
                                         errors)
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    child_state_dict = {k: v for k, v in local_state_dict.items() if k.startswith(child_prefix)}
                    load(child, child_state_dict, child_prefix)
            incompatible_keys = _IncompatibleKeys(missing, unexpected)
            for hook in module.__dict__.get("_load_state_dict_post_hooks", _NO_HOOKS).values():
                out = hook(module, incompatible_keys)
                if out is not None:
                    raise AssertionError(
                        "Hooks registered with ``register_load_state_dict_post_hook`` are not "
                        "expected to return new values, if incompatible_keys need to be modified, "
                        "it should be done inplace.")

        load(self, state_dict)
        del load
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)

    def register_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, prefix, keep_vars)`` runs before ``state_dict`` saves this module."""
        hooks = self._hook_dict("_state_dict_pre_hooks")
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        return handle

    def _register_state_dict_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, state_dict, prefix, local_metadata)`` runs after ``state_dict``
        saved this module's subtree; a state dict it returns replaces the root's result."""
        if getattr(hook, "_from_public_api", False):
            raise RuntimeError("Cannot register the same function as the state dict post hook that was "
                               "previously registered via register_state_dict_post_hook")
        hooks = self._hook_dict("_state_dict_hooks")
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        return handle

    def register_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, state_dict, prefix, local_metadata) -> None`` runs after
        ``state_dict`` saved this module's subtree; it may edit ``state_dict`` in place."""
        hook._from_public_api = True
        hooks = self._hook_dict("_state_dict_hooks")
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        return handle

    def _register_load_state_dict_pre_hook(self, hook: Callable, with_module: bool = False) -> RemovableHandle:
        """``hook([module,] state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)`` runs before this module loads its part of a state dict."""
        hooks = self._hook_dict("_load_state_dict_pre_hooks")
        handle = RemovableHandle(hooks)
        hooks[handle.id] = _WrappedHook(hook, self if with_module else None)
        return handle

    def register_load_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)`` runs before this module loads its part of a state dict."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def register_load_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, incompatible_keys) -> None`` runs after ``load_state_dict`` loaded
        this module's subtree; it may edit the missing/unexpected key lists in place."""
        hooks = self._hook_dict("_load_state_dict_post_hooks")
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        return handle

    # ------------------------------------------------------------ calling and hooks
    def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """``hook(module, args)`` (or ``(module, args, kwargs)``) runs before forward and
        may return replacement args (or ``(args, kwargs)``)."""
        handle = RemovableHandle(self._forward_pre_hooks, self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs.add(handle.id)
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(self, hook: Callable, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        """``hook(module, args, output)`` (or ``(module, args, kwargs, output)``) runs
        after forward and may return a replacement output; with ``always_call`` also when
        forward raises (with output None; its own exception is then a warning)."""
        always = self.__dict__.setdefault("_forward_hooks_always_called", set())
        handle = RemovableHandle(self._forward_hooks, self._forward_hooks_with_kwargs, always)
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs.add(handle.id)
        if always_call:
            always.add(handle.id)
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """``hook(module, grad_output)`` runs when the gradients w.r.t. the module's outputs
        are computed and may return replacement ``grad_output``."""
        return self._add_backward_hook(self._hook_dict("_backward_pre_hooks"), hook, prepend)

    def register_full_backward_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """``hook(module, grad_input, grad_output)`` runs when the gradients w.r.t. the
        module's inputs are computed and may return replacement ``grad_input``."""
        if self.__dict__.get("_is_full_backward_hook") is False:
            raise RuntimeError("Cannot use both regular backward hooks and full backward hooks on a "
                               "single Module. Please use only one of them.")
        self.__dict__["_is_full_backward_hook"] = True
        return self._add_backward_hook(self._hook_dict("_backward_hooks"), hook, prepend)

    def register_backward_hook(self, hook: Callable) -> RemovableHandle:
        """Deprecated (use ``register_full_backward_hook``): ``hook(module, grad_input,
        grad_output)`` is registered on the autograd node of the module's output, so that
        ``grad_input`` are that node's input gradients, as in PyTorch; a value the hook
        returns is ignored here."""
        if self.__dict__.get("_is_full_backward_hook") is True:
            raise RuntimeError("Cannot use both regular backward hooks and full backward hooks on a "
                               "single Module. Please use only one of them.")
        self.__dict__["_is_full_backward_hook"] = False
        return self._add_backward_hook(self._hook_dict("_backward_hooks"), hook, False)

    def _add_backward_hook(self, hooks: OrderedDict, hook: Callable, prepend: bool) -> RemovableHandle:
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def _get_backward_hooks(self) -> Tuple[list, list]:
        """(full backward hooks, non-full ones), the global ones first."""
        full, non_full = [], []
        own = self.__dict__.get("_backward_hooks", _NO_HOOKS)
        is_full = self.__dict__.get("_is_full_backward_hook")
        if _global_is_full_backward_hook is True:
            full += _global_backward_hooks.values()
        if is_full is True or (is_full is None and own):  # (a module pickled before the flag: full)
            full += own.values()
        if _global_is_full_backward_hook is False:
            non_full += _global_backward_hooks.values()
        if is_full is False:
            non_full += own.values()
        return full, non_full

    def _maybe_warn_non_full_backward_hook(self, inputs, result, grad_fn) -> None:
        if not isinstance(result, Tensor):
            if not (isinstance(result, tuple) and all(isinstance(r, Tensor) for r in result)):
                warnings.warn("Using non-full backward hooks on a Module that does not return a "
                              "single Tensor or a tuple of Tensors is deprecated and will be removed "
                              "in future versions. This hook will be missing some of the grad_output. "
                              "Please use register_full_backward_hook to get the documented behavior.",
                              FutureWarning, stacklevel=2)
                return
        else:
            result = (result,)
        if not isinstance(inputs, Tensor):
            if not (isinstance(inputs, tuple) and all(isinstance(i, Tensor) for i in inputs)):
                warnings.warn("Using non-full backward hooks on a Module that does not take as input a "
                              "single Tensor or a tuple of Tensors is deprecated and will be removed "
                              "in future versions. This hook will be missing some of the grad_input. "
                              "Please use register_full_backward_hook to get the documented behavior.",
                              FutureWarning, stacklevel=2)
                return
        else:
            inputs = (inputs,)
        out_grad_fn = {r.grad_fn for r in result if r.grad_fn is not None}
        if len(out_grad_fn) == 0 or (len(out_grad_fn) == 1 and grad_fn not in out_grad_fn):
            warnings.warn("Using a non-full backward hook when outputs are nested in python data structure "
                          "is deprecated and will be removed in future versions. This hook will be missing "
                          "some grad_output.", FutureWarning, stacklevel=2)
        elif len(out_grad_fn) > 1:
            warnings.warn("Using a non-full backward hook when outputs are generated by different autograd Nodes "
                          "is deprecated and will be removed in future versions. This hook will be missing "
                          "some grad_output. Please use register_full_backward_hook to get the documented "
                          "behavior.", FutureWarning, stacklevel=2)
        else:
            inputs_grad_fn = {i.grad_fn for i in inputs if i.grad_fn is not None}
            next_functions = {n[0] for n in grad_fn.next_functions}
            if inputs_grad_fn != next_functions:
                warnings.warn("Using a non-full backward hook when the forward contains multiple autograd Nodes "
                              "is deprecated and will be removed in future versions. This hook will be missing "
                              "some grad_input. Please use register_full_backward_hook to get the documented "
                              "behavior.", FutureWarning, stacklevel=2)

    def compile(self, *args, **kwargs) -> None:
        """Compile this module's calls with ``fusegrad.compile`` (arguments passed as they
        are), in place: later calls run the compiled ``_call_impl``, hooks included."""
        from ..runtime.compiled import compile as compile_
        # (a partial, not the bound method: compile guards on what a partial's arguments hold, here
        # this module's parameters and buffers, and not on what fusegrad's own functions name)
        self.__dict__["_compiled_call_impl"] = compile_(functools.partial(type(self)._call_impl, self),
                                                        *args, **kwargs)

    def _hook_ids(self) -> tuple:
        """The handles of the forward and backward hooks a call of this module runs (its own
        and the global ones): compiled code that traced a call is guarded on them."""
        d = self.__dict__
        return tuple(tuple(d.get(name) or ()) for name in _HOOK_DICTS[:4]) + (
            tuple(_global_forward_pre_hooks), tuple(_global_forward_hooks), tuple(_global_backward_hooks),
            tuple(_global_backward_pre_hooks))

    def _wrapped_call_impl(self, *args, **kwargs) -> Any:
        compiled = self.__dict__.get("_compiled_call_impl")
        if compiled is not None:
            return compiled(*args, **kwargs)
        return self._call_impl(*args, **kwargs)

    __call__ = _wrapped_call_impl

    def _call_impl(self, *args, **kwargs) -> Any:
        if capturing():  # compiled code that calls a module holds for its mode (dropout, batch norm),
            guard((id(self), "training"), lambda: self.training)
            d = self.__dict__  # its plain attributes (a temperature, a flag: set from outside since)
            guard((id(self), "attributes"), lambda: d.get("_attr_version", 0))
            cls = type(self)  # and its class's forward (patched on the class since: the new one runs)
            guard((id(self), "class forward"), lambda: cls.forward, identity=True)
            guard((id(self), "hooks"), self._hook_ids)  # and for its hooks (one added later runs)
            from ..tracer.capture import hook_guards  # (capture imports func, which imports nn)
            hook_guards([*d.get("_forward_pre_hooks", {}).values(), *d.get("_forward_hooks", {}).values()])
        d = self.__dict__
        forward_pre_hooks = d.get("_forward_pre_hooks")
        forward_hooks = d.get("_forward_hooks")
        backward_hooks = d.get("_backward_hooks")
        backward_pre_hooks = d.get("_backward_pre_hooks")
        if not (forward_pre_hooks or forward_hooks or backward_hooks or backward_pre_hooks
                or _global_forward_pre_hooks or _global_forward_hooks or _global_backward_hooks
                or _global_backward_pre_hooks):
            return self.forward(*args, **kwargs)
        forward_pre_hooks = forward_pre_hooks or _NO_HOOKS
        forward_hooks = forward_hooks or _NO_HOOKS
        pre_with_kwargs = d.get("_forward_pre_hooks_with_kwargs", ())
        with_kwargs = d.get("_forward_hooks_with_kwargs", ())
        always = d.get("_forward_hooks_always_called", ())
        result = None
        called_always = set()

        def inner():
            nonlocal result, args, kwargs
            full_backward_hooks, non_full_backward_hooks = [], []
            bw_pre_hooks = []
            if backward_pre_hooks or _global_backward_pre_hooks:
                bw_pre_hooks = [*_global_backward_pre_hooks.values(), *(backward_pre_hooks or _NO_HOOKS).values()]
            if backward_hooks or _global_backward_hooks:
                full_backward_hooks, non_full_backward_hooks = self._get_backward_hooks()
            for hid, hook in (*_global_forward_pre_hooks.items(), *forward_pre_hooks.items()):
                if hid in pre_with_kwargs:
                    res = hook(self, args, kwargs)
                    if res is not None:
                        if not (isinstance(res, tuple) and len(res) == 2):
                            raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, "
                                               f"new_kwargs), but got {res}.")
                        args, kwargs = res
                else:
                    res = hook(self, args)
                    if res is not None:
                        args = res if isinstance(res, tuple) else (res,)
            bw = None
            if full_backward_hooks or bw_pre_hooks:
                from .backward_hooks import BackwardHook
                bw = BackwardHook(self, full_backward_hooks, bw_pre_hooks)
                args = bw.setup_input_hook(args)
            result = self.forward(*args, **kwargs)
            for hid, hook in (*_global_forward_hooks.items(), *forward_hooks.items()):
                if hid in always or hid in _global_forward_hooks_always_called:
                    called_always.add(hid)
                if hid in with_kwargs or hid in _global_forward_hooks_with_kwargs:
                    res = hook(self, args, kwargs, result)
                else:
                    res = hook(self, args, result)
                if res is not None:
                    result = res
            if bw is not None:
                if not isinstance(result, (Tensor, tuple)):
                    warnings.warn("For backward hooks to be called, module output should be a Tensor or a tuple "
                                  f"of Tensors but received {type(result)}", stacklevel=2)
                result = bw.setup_output_hook(result)
            if non_full_backward_hooks:
                var = result
                while not isinstance(var, Tensor):
                    if isinstance(var, dict):
                        var = next(v for v in var.values() if isinstance(v, Tensor))
                    else:
                        var = var[0]
                grad_fn = var.grad_fn
                if grad_fn is not None:
                    for hook in non_full_backward_hooks:
                        grad_fn.register_hook(_WrappedHook(hook, self))
                    self._maybe_warn_non_full_backward_hook(args, result, grad_fn)
            return result

        if capturing():
            return inner()
        try:
            return inner()
        except Exception:
            # the forward hooks registered with ``always_call`` that have not run yet
            for hid, hook in list(_global_forward_hooks.items()):
                if hid in _global_forward_hooks_always_called and hid not in called_always:
                    try:
                        res = hook(self, args, result)
                        if res is not None:
                            result = res
                    except Exception as e:
                        warnings.warn("global module forward hook with ``always_call=True`` raised an exception "
                                      f"that was silenced as another error was raised in forward: {str(e)}",
                                      stacklevel=2)
            for hid, hook in list(forward_hooks.items()):
                if hid in always and hid not in called_always:
                    try:
                        if hid in with_kwargs:
                            res = hook(self, args, kwargs, result)
                        else:
                            res = hook(self, args, result)
                        if res is not None:
                            result = res
                    except Exception as e:
                        warnings.warn("module forward hook with ``always_call=True`` raised an exception that was "
                                      f"silenced as another error was raised in forward: {str(e)}", stacklevel=2)
            raise

    # ------------------------------------------------------------ printing
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """Module-specific text shown inside the parentheses of ``repr``."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({k}): " + _addindent(repr(m), 2) for k, m in self._modules.items()]
        lines = extra_lines + child_lines
        body = ""
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                body = extra_lines[0]
            else:
                body = "\n  " + "\n  ".join(lines) + "\n"
        return f"{self._get_name()}({body})"


def _zero_grad(p: Tensor, set_to_none: bool) -> None:
    g = p.grad
    if g is None:
        return
    if set_to_none:
        p.grad = None
        return
    if g.grad_fn is not None:
        g.detach_()
    else:
        g.requires_grad_(False)
    g.zero_()
