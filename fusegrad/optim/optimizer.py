"""The Optimizer base class: parameter groups, per-parameter state and state dicts."""
from __future__ import annotations

import functools
import inspect
import warnings
from collections import defaultdict
from copy import deepcopy
from itertools import chain
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..ir.graph import Var
from ..runtime.factory import tensor, zeros_like
from ..runtime.grad_mode import enable_grad, set_grad_enabled
from ..runtime.nodes import RemovableHandle
from ..runtime.sparse_coo import SparseCOOTensor
from ..runtime.tensor import Tensor
from ..tracer.live import guard
from ..nn.module import _typename, _zero_grad
from ..tracer.live import live_number
from ..tracer.trace import capturing


class _RequiredParameter:
    """Marks a hyperparameter with no default (it must come with each group)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()

ParamsT = Union[Iterable[Tensor], Iterable[Dict[str, Any]], Iterable[tuple]]

#: hooks every optimizer's step runs (``register_optimizer_step_pre_hook``/``_post_hook``)
_GLOBAL_HOOKS: Dict[str, list] = {"step_pre": [], "step_post": []}


def register_optimizer_step_pre_hook(hook: Callable) -> RemovableHandle:
    """``hook(optimizer, args, kwargs) -> None or (args, kwargs)`` before every optimizer's step."""
    _GLOBAL_HOOKS["step_pre"].append(hook)
    return RemovableHandle(_GLOBAL_HOOKS["step_pre"], hook)


def register_optimizer_step_post_hook(hook: Callable) -> RemovableHandle:
    """``hook(optimizer, args, kwargs)`` after every optimizer's step."""
    _GLOBAL_HOOKS["step_post"].append(hook)
    return RemovableHandle(_GLOBAL_HOOKS["step_post"], hook)


def _use_grad_for_differentiable(step: Callable) -> Callable:
    """``step`` run with gradients recorded only when the optimizer was made with
    ``differentiable=True`` (PyTorch's decorator, which optimizers written after its own use)."""
    @functools.wraps(step)
    def run(self, *args, **kwargs):
        with set_grad_enabled(bool(self.defaults.get("differentiable", False))):
            return step(self, *args, **kwargs)
    return run


def _with_step_hooks(step: Callable) -> Callable:
    """``step`` running the global and the optimizer's step hooks around it (once, also when
    a subclass's step calls its base's)."""
    @functools.wraps(step)
    def hooked(self, *args, **kwargs):
        self.__dict__["_opt_called"] = True  # (a scheduler stepped before any optimizer step warns)
        own = self.__dict__.get("_hooks")
        if (own is None and not _GLOBAL_HOOKS["step_pre"] and not _GLOBAL_HOOKS["step_post"]) or \
                self.__dict__.get("_in_step"):
            return step(self, *args, **kwargs)
        own = own or {}
        args = (self,) + args  # (as PyTorch's hooks see them)
        for hook in _GLOBAL_HOOKS["step_pre"] + own.get("step_pre", []):
            r = hook(self, args, kwargs)
            if r is not None:
                if not (isinstance(r, tuple) and len(r) == 2):
                    raise RuntimeError(f"{hook} must return None or a tuple of (new_args, new_kwargs), but got {r}.")
                args, kwargs = r
        self.__dict__["_in_step"] = True
        try:
            out = step(*args, **kwargs)
        finally:
            del self.__dict__["_in_step"]
        for hook in own.get("step_post", []) + _GLOBAL_HOOKS["step_post"]:
            hook(self, args, kwargs)
        return out
    hooked._with_hooks = True
    return hooked


_PLAIN = (bool, int, float, str, type(None))


def guard_plain_hyperparameters(opt: "Optimizer") -> None:
    """Inside compile's trace, guard the compiled code on the plain values in the
    param_groups of an optimizer whose ``step`` is not fusegrad's: such a step (a custom
    optimizer's ``p.add_(buf, alpha=-group["lr"])``) reads them as numbers the trace bakes
    in, so a scheduler's change must retrace rather than replay the old value. fusegrad's
    optimizers read theirs at every call (``Optimizer._hyper``)."""
    if getattr(type(opt).step, "__module__", "").startswith("fusegrad."):
        return
    for g in opt.param_groups:
        for k, v in g.items():
            if k != "params" and (isinstance(v, _PLAIN) or (
                    type(v) is tuple and all(isinstance(x, _PLAIN) for x in v))):
                guard(("param group value", id(g), k), functools.partial(g.get, k))


@functools.lru_cache(maxsize=None)
def _init_defaults(cls: type) -> Dict[str, Any]:
    """The defaults of ``cls.__init__``'s keyword parameters: what an option missing from an
    old checkpoint's group becomes (its value then, before the option existed)."""
    return {k: p.default for k, p in inspect.signature(cls.__init__).parameters.items()
            if p.default is not inspect.Parameter.empty}


class Optimizer:
    """Base class of optimizers. ``params`` is an iterable of tensors, of ``(name, tensor)``
    pairs, or of dicts (parameter groups with their own hyperparameters); ``defaults``
    fills the hyperparameters a group leaves out."""

    supports_complex = False  # whether its update handles complex parameters (``as_real``)
    # whether it takes sparse gradients (a sparse embedding's): read through ``dense_grad``
    supports_sparse = False
    sparse_refusal = "{} does not support sparse gradients"

    def __init__(self, params: ParamsT, defaults: Dict[str, Any]) -> None:
        if defaults.get("fused") and defaults.get("foreach"):
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
        self.defaults = defaults
        self.state: Dict[Tensor, Dict[str, Any]] = defaultdict(dict)
        self.param_groups: List[Dict[str, Any]] = []
        # counts the changes of which tensors it updates and holds (add_param_group,
        # load_state_dict): compiled code that ran step() is guarded on it
        self._structure = 0
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, but "
                            "got " + _typename(params))
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_with_hooks", False):
            cls.step = _with_step_hooks(step)

    def _hook(self, kind: str, hook: Callable, prepend: bool = False) -> RemovableHandle:
        hooks = self.__dict__.setdefault("_hooks", {}).setdefault(kind, [])
        hooks.insert(0 if prepend else len(hooks), hook)
        return RemovableHandle(hooks, hook)

    def register_step_pre_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(optimizer, args, kwargs) -> None or (args, kwargs)`` before each ``step``."""
        return self._hook("step_pre", hook)

    def register_step_post_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(optimizer, args, kwargs)`` after each ``step``."""
        return self._hook("step_post", hook)

    def register_state_dict_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """``hook(optimizer)`` before ``state_dict`` builds its dict."""
        return self._hook("state_dict_pre", hook, prepend)

    def register_state_dict_post_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """``hook(optimizer, state_dict) -> None or a dict to return instead``, after ``state_dict``."""
        return self._hook("state_dict_post", hook, prepend)

    def register_load_state_dict_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """``hook(optimizer, state_dict) -> None or a dict to load instead``, before ``load_state_dict``."""
        return self._hook("load_state_dict_pre", hook, prepend)

    def register_load_state_dict_post_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """``hook(optimizer)`` after ``load_state_dict``."""
        return self._hook("load_state_dict_post", hook, prepend)

    def _hooks_of(self, kind: str) -> list:
        return list(self.__dict__.get("_hooks", {}).get(kind, ()))

    def add_param_group(self, param_group: Dict[str, Any]) -> None:
        """Add a group of parameters with its own hyperparameters (defaults fill the rest)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering of "
                            "tensors in sets will change between runs. Please use a list instead.")
        else:
            params = list(params)
        names = [p[0] for p in params if isinstance(p, tuple)]
        if names:
            if len(names) != len(params):
                raise ValueError("all optimizer params should be with/without names. Some param names are missing")
            param_group["param_names"] = names
            params = [p[1] for p in params]
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is " + _typename(p))
            if not self.defaults.get("differentiable") and not (p.is_leaf or p.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        param_group["params"] = params
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            param_group.setdefault(name, default)
        ids = [id(p) for p in params]
        if len(set(ids)) != len(ids):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, this will "
                          "cause an error; see github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        taken = {id(p) for g in self.param_groups for p in g["params"]}
        if taken.intersection(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)
        self._structure += 1

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all optimized tensors (to None, or to zeros in place)."""
        for group in self.param_groups:
            for p in group["params"]:
                _zero_grad(p, set_to_none)

    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        """Update the parameters once; ``closure`` (re-evaluating the loss) runs first
        with grad enabled and its result is returned."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        guard(("optimizer structure", id(self)), self._layout)  # (inside compile: retraces on a change)
        self._update()
        return loss

    def _layout(self) -> tuple:
        """What a compiled step read of this optimizer by identity: its groups' parameter
        lists and its state's tensors (a reset ``opt.state.clear()``, a rebound
        ``group["params"]`` or state entry between calls makes it trace again)."""
        return (self._structure, id(self.state), len(self.state),
                tuple((id(g["params"]), len(g["params"])) for g in self.param_groups),
                tuple([id(v) for st in self.state.values() for v in st.values()
                       if type(v) is Tensor or isinstance(v, Tensor)]))

    step = _with_step_hooks(step)

    def _update(self) -> None:
        raise NotImplementedError

    @staticmethod
    def _count(step_t: Tensor) -> Any:
        """Add one to a step-count tensor and return the count: a float eagerly (PyTorch
        computes its bias corrections in Python floats), the tensor itself inside
        ``fusegrad.compile`` (so the compiled step reads the count at every call)."""
        step_t += 1
        return step_t if type(step_t._data) is Var else step_t.item()

    @staticmethod
    def _decayed_grad(p: Tensor, h: Dict[str, Any], maximize: bool, weight_decay: Any,
                      decoupled: bool = False) -> Tensor:
        """``p``'s gradient (negated with ``maximize``) with weight decay: added as
        ``weight_decay * p`` or, ``decoupled``, applied to ``p`` as ``p *= 1 - lr * wd``."""
        from ..runtime import ops as O
        g = Optimizer.dense_grad(p, weight_decay, "weight_decay option is not compatible with sparse gradients")
        g = O.neg(g) if maximize else g
        if weight_decay != 0:
            if decoupled:
                p.mul_(1 - h["lr"] * h["weight_decay"])
            else:
                g = O.muladd(p, h["weight_decay"], g)
        return g

    def _params_with_grad(self, group: Dict[str, Any]) -> List[Tensor]:
        ps = [p for p in group["params"] if p.grad is not None]
        if not self.supports_sparse and any(type(p._grad) is SparseCOOTensor for p in ps):
            raise RuntimeError(self.sparse_refusal.format(type(self).__name__))
        if group.get("capturable") and any(not p.is_cuda for p in ps):  # (CUDA graphs' option: as PyTorch)
            raise AssertionError("If capturable=True, params and state_steps must be on supported devices: "
                                 "['cuda', 'xpu', 'hpu', 'privateuseone', 'xla'].")
        if not self.supports_complex and any(p._data.dtype.kind == "c" for p in ps):
            raise RuntimeError(f"{type(self).__name__} does not support complex parameters in fusegrad yet "
                               "(Adam, AdamW, RMSprop, Adagrad, SGD and LBFGS do)")
        return ps

    @staticmethod
    def dense_grad(p: Tensor, weight_decay: Any, refusal: str) -> Tensor:
        """``p``'s gradient as a dense tensor: a sparse one (where the update of the rows it
        leaves out is zero, the dense update is the same) densified; ``refusal`` is
        PyTorch's error for a sparse gradient with weight decay."""
        g = p.grad
        if getattr(g, "is_sparse", False):
            if weight_decay != 0:
                raise RuntimeError(refusal)
            g = g.to_dense()
        return g

    @staticmethod
    def as_real(*tensors: Tensor) -> tuple:
        """Complex tensors as views of their parts (``view_as_real``), the rest as they are:
        an update written for real tensors then treats each part as a number of its own, as
        PyTorch's optimizers do for complex parameters (None stays None)."""
        from ..runtime.complex_ops import view_as_real
        return tuple(view_as_real(t) if t is not None and t._data.dtype.kind == "c" else t for t in tensors)

    def _params_and_hyper(self, group: Dict[str, Any],
                          names: Sequence[str]) -> Iterator[Tuple[Tensor, Dict[str, Any]]]:
        """Each parameter of ``group`` that has a gradient, with the group's hyperparameters
        ``names`` for its dtype (``_hyper``, cached for the group)."""
        cache: dict = {}
        for p in self._params_with_grad(group):
            yield p, self._hyper(group, names, p, cache)

    def _lazy_state(self, p: Tensor, buffers: Sequence[str], **scalars: float) -> Dict[str, Any]:
        """``p``'s state, created on its first step as PyTorch does: a zero ``step`` count,
        a 0-d tensor per entry of ``scalars``, and a zero tensor like ``p`` per name in ``buffers``."""
        state = self.state[p]
        if not state:
            state["step"] = tensor(0.0)
            for name, value in scalars.items():
                state[name] = tensor(value)
            for name in buffers:
                state[name] = zeros_like(p)
        return state

    @staticmethod
    def _hyper(group: Dict[str, Any], names: Sequence[str], p: Tensor, cache: dict) -> Dict[str, Any]:
        """The group's hyperparameters ``names`` ("beta1", "beta2": the entries of "betas")
        as floats; inside ``fusegrad.compile``, 0-d tensors of ``p``'s dtype (float32 for a
        half-precision one) that the compiled step reads from the group at every call, so
        that a learning-rate scheduler (or any change to the group) acts on compiled steps
        too. ``cache`` (one per group) keeps them per dtype."""
        if p.dtype in cache:
            return cache[p.dtype]
        live = capturing()
        out = cache[p.dtype] = {}
        # (a half-precision parameter's are float32, as PyTorch's scalars: bfloat16 rounds
        # 0.999 to 1, and Adam's 1 - beta2 to 0, which stopped its updates)
        dtype = np.dtype(np.float32) if p._data.dtype.itemsize == 2 else p.dtype.to_real().np  # (complex: its parts')
        for name in names:
            path = ("betas", int(name[-1]) - 1) if name.startswith("beta") else (name,)
            v = live_number(group, *path, dtype=dtype)
            out[name] = v if live else float(v)
        return out

    # ------------------------------------------------------------ state dict
    def state_dict(self) -> Dict[str, Any]:
        """``{"state": {index: state}, "param_groups": [group with "params" as indices]}``,
        parameters numbered in group order; state tensors are shared, not copied."""
        for hook in self._hooks_of("state_dict_pre"):
            hook(self)
        index: Dict[int, int] = {}
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            for p in g["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in g["params"]]
            groups.append(packed)
        state = {(index[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items()}
        out = {"state": state, "param_groups": groups}
        for hook in self._hooks_of("state_dict_post"):
            r = hook(self, out)
            out = out if r is None else r
        return out

    def __setstate__(self, state: Dict[str, Any]) -> None:
        """Take ``state`` (unpickling, deepcopy, and the end of ``load_state_dict``, as in
        PyTorch, where subclasses extend it): a group saved before one of this optimizer's
        options existed gets the option's default, and a step count saved as a number (older
        checkpoints) becomes a tensor."""
        self.__dict__.update(state)
        late = _init_defaults(type(self))
        for group in self.param_groups:
            for k, v in self.defaults.items():
                if k not in group:
                    group[k] = late.get(k, v)
        for st in self.state.values():
            if isinstance(st, dict) and "step" in st and not isinstance(st["step"], Tensor):
                st["step"] = tensor(float(st["step"]))

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Restore state and hyperparameters saved by ``state_dict`` (floating state is cast
        to its parameter's dtype; the step count is kept as saved)."""
        for hook in self._hooks_of("load_state_dict_pre"):
            r = hook(self, state_dict)
            state_dict = state_dict if r is None else r
        saved_groups = deepcopy(state_dict["param_groups"])
        groups = self.param_groups
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")
        id_map = dict(zip(chain.from_iterable(s["params"] for s in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))

        def cast(param: Tensor, value: Any, key: Any = None) -> Any:
            if isinstance(value, Tensor):
                if key != "step" and param.is_floating_point():
                    return value.to(param.dtype)
                return value
            if isinstance(value, dict):
                return {k: cast(param, v, k) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return type(value)(cast(param, v, key) for v in value)
            return value

        state: Dict[Any, Dict[str, Any]] = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                state[id_map[k]] = cast(id_map[k], v)
            else:
                state[k] = v
        for g, s in zip(groups, saved_groups):
            s["params"] = g["params"]
            if "param_names" in g and "param_names" not in s:
                s["param_names"] = g["param_names"]
        self.__setstate__({"state": state, "param_groups": saved_groups})
        self._structure += 1
        for hook in self._hooks_of("load_state_dict_post"):
            hook(self)

    def __repr__(self) -> str:
        s = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += f"\nParameter Group {i}\n"
            for key in sorted(group):
                if key != "params":
                    s += f"    {key}: {group[key]}\n"
        return s + ")"
