"""The capture layer shared by ``fusegrad.compile`` and every ``fusegrad.func`` transform.

One snapshot trace (``CaptureTrace``), one set of guards and one cache of variants:

- ``CaptureTrace`` snapshots each captured tensor before the traced code touches it, so
  that in-place updates seen while tracing can be turned into write-backs (compile) or
  detected (transforms) and are undone afterwards; it collects the guards the traced code
  asked for (``tracer.live.guard``: module training flags, optimizer hyperparameters).
- ``capture`` opens such a trace on stand-ins for a call's argument leaves and guards the
  Python values the function names from outside (``referenced_values``): numbers and strings
  by value, anything else (a tensor, a module, a helper function) by identity, the tensors
  of a referenced module or container by identity too.
- ``Captured`` is what a capture produced, reusable while its captured tensors keep their
  shape, dtype and requires_grad and every guard still reads its value; ``Variants`` caches
  them per call signature, up to a limit."""
from __future__ import annotations

import contextlib
import dis
import functools
import os
import types
from collections import OrderedDict
from typing import Any, Callable, Iterator, Optional

import numpy as np

from ..ir.graph import Var
from .guards import const_guard, module_tensor_ids
from .live import guard, guards_hold, live_grad
from . import dynamic_float, python_random, side_effects
from .trace import GraphBreak, Trace, user_frame

_EMPTY = object()  # an empty closure cell's value
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # fusegrad/
_CONSTANT_TYPES = (bool, int, float, complex, str, type(None))
_NOT_USER = ("builtins", __name__.split(".")[0], "numpy")  # whose classes hold no user settings
_MAX_CONTAINER = 64  # containers of tensors up to this length are guarded element by element


class CaptureTrace(Trace):
    """A Trace that snapshots every captured tensor before the traced code touches it
    (``lift``, ``touch`` before ``.grad`` is reassigned, ``rebind``) and collects guards."""

    captures_state = True
    # a transform's closed graph (fusegrad.func.fused): a fallback inside it (a transform's
    # eager path, vmap's loop) aborts the capture with GraphBreak instead of being recorded
    strict = False

    def __init__(self):
        super().__init__()
        self.snaps: list = []  # (holder, _data, _grad, _grad_fn, _out_nr, _rg)
        self._snapped: set = set()
        self.guards: dict = {}  # key -> (read, value at trace time, identity)
        # ids of the stand-ins of arguments that require grad but are not leaves: an
        # in-place update of one is a graph break (the stand-in itself looks like a leaf)
        self.nonleaf_inputs: set = set()
        self.attribute_olds: dict = {}  # (module id, name) -> (store, name, was set, old value)
        # id of a leaf's .grad the traced code read -> (leaf, that grad): read and written
        # through the leaf at each call (``read_grad``), as another tensor may be there then
        self.grad_owners: dict = {}
        # ids of the stand-ins of arguments that hold a .grad: reading or accumulating into it
        # is a graph break (the stand-in has none; the caller's would be read or written)
        self.graded_inputs: set = set()
        self.argument_ids: set = set()  # the stand-ins of all tensor arguments
        self.arg_grads = False  # whether the traced code read or accumulated into one's .grad

    def touch(self, x) -> None:
        """Snapshot ``x`` (once) unless it is a value of this trace."""
        if id(x) not in self._snapped and not (type(x._data) is Var and x._data.trace is self):
            self._snapped.add(id(x))
            self.snaps.append((x, x._data, x._grad, x._grad_fn, x._out_nr, x._rg))

    def rebind(self, x, data) -> None:
        self.touch(x)
        x._data = data

    def read_grad(self, leaf) -> None:
        """The traced code reads ``leaf.grad`` (a concrete tensor without history, or None):
        the graph reads the leaf's gradient at each call and is guarded on there being one."""
        if type(leaf._data) is Var:
            self.check_graded_input(leaf, "reads")
            return
        g = leaf._grad
        if g is not None and not hasattr(g, "_data"):  # (a sparse gradient)
            self.graph_break(f"a sparse gradient (an embedding with sparse=True) is read at {user_frame()}")
            return
        if g is not None and type(g._data) is Var:  # (made by a backward in the trace: a value of it)
            return
        guard(("grad set", id(leaf)), lambda: leaf._grad is not None)
        if g is not None and id(g) not in self.grad_owners and type(g._data) is np.ndarray and not g._rg:
            self.grad_owners[id(g)] = (leaf, g)  # (lifted as read from the leaf when an op uses it)

    def check_graded_input(self, t, what: str) -> None:
        """A graph break where the traced code ``what`` (reads, accumulates into) the .grad of
        an argument that holds one (its stand-in ``t`` has none yet)."""
        if id(t) in self.argument_ids:
            self.arg_grads = True
        if id(t) in self.graded_inputs and t._grad is None:
            raise GraphBreak(f"the function {what} the .grad of a tensor argument ({list(t.shape)} {t.dtype}) "
                             "that holds one")

    def grad_owner(self, x):
        """The leaf whose gradient ``x`` is, read through ``read_grad``, else None."""
        owner = self.grad_owners.get(id(x))
        return owner[0] if owner is not None and owner[1] is x else None

    def _lift(self, x):
        from ..runtime.tensor import Tensor
        if isinstance(x, Tensor):  # (each holder of a captured array: an alias, .data's, may come first)
            self.touch(x)
            owner = self.grad_owner(x)
            if owner is not None and self.capture_key(x) not in self._captured:
                live_grad(owner, self)  # (x's array as read from the leaf: every later lift finds it)
        return super()._lift(x)

    def mutated(self) -> bool:
        """Whether the traced code assigned a captured tensor's data or ``.grad``."""
        return any(h._data is not d or h._grad is not g for h, d, g, *_ in self.snaps)

    def restore(self) -> None:
        for h, data, grad, fn, nr, rg in reversed(self.snaps):
            h._data, h._grad, h._grad_fn, h._out_nr, h._rg = data, grad, fn, nr, rg
        # module attributes set to traced values (nn.module._stored_traced): a compiled call
        # assigns what it computed, a trace that stopped early leaves none of its values behind
        for target, name, present, old in self.attribute_olds.values():
            if present:
                target[name] = old
            else:
                target.pop(name, None)


@contextlib.contextmanager
def capture(fn: Callable, leaves: list, keep_requires_grad: bool = False,
            breaks_on_print: bool = False, strict: bool = False, live_names: frozenset = frozenset()) -> Iterator[tuple]:
    """Trace a call of ``fn``: yields (trace, stand-in leaves) inside the open trace, with
    a traced input per tensor leaf (requiring grad as the leaf does when
    ``keep_requires_grad``) and ``fn``'s referenced values guarded. Every snapshot is
    restored on exit. ``breaks_on_print``: printing a traced tensor is a graph break
    (compile's trace) rather than a listing of its Var (the transforms'). ``strict``: see
    ``CaptureTrace.strict``. ``live_names``: the keys of globals and closure cells holding
    numbers that the graph reads at each call (compile's, once their values changed): the
    function sees DynamicFloats there while traced (tracer.dynamic_float), and the trace's
    ``numbers`` lists them."""
    from ..runtime.tensor import Tensor, wrap
    tr = CaptureTrace()
    tr.breaks_on_print = breaks_on_print
    tr.follows_requires_grad = keep_requires_grad
    tr.strict = strict
    tr.numbers = []
    held: list = []
    modes: tuple = ()
    generators: list = []
    bound: list = []  # (write, value) of each name bound to a DynamicFloat while traced
    try:
        with tr:
            tleaves = []
            for x in leaves:
                if isinstance(x, Tensor):
                    t = wrap(tr.new_input(x._data.shape, x._data.dtype))
                    if keep_requires_grad:
                        t._rg = x._rg
                        if x._rg and x._grad_fn is not None:
                            tr.nonleaf_inputs.add(id(t))
                    if x._grad is not None:
                        tr.graded_inputs.add(id(t))
                    tr.argument_ids.add(id(t))
                    tleaves.append(t)
                else:
                    tleaves.append(x)
            named, writers, names = [], {}, []
            # (what a function or module argument names too)
            given = [x for x in leaves if type(x) is types.FunctionType or hasattr(x, "named_parameters")]
            for key, read, identity in [r for f in (fn, *given) for r in referenced_values(f, writers=writers)]:
                if key in writers and key not in live_names:
                    names.append((read, writers[key]))
                if key in live_names and key in writers:
                    value = read()
                    guard(key + ("type",), lambda read=read: type(read()))
                    bound.append((writers[key], value))
                    writers[key](dynamic_float.name_proxy(tr, value, read))
                    continue
                named.append(read() if identity is None else guard(key, read, identity))
            # (the generators it names, is given or holds: ``self.rng``, ``gens["noise"]``)
            around = named + [x for x in leaves if not isinstance(x, Tensor)] + (
                [fn] if hasattr(fn, "named_parameters") else [])
            generators = python_random.snapshot(around + [v for o in around for v in members(o)])
            stuck = side_effects.unrestorable(around)
            if stuck:
                raise GraphBreak(f"{getattr(fn, '__name__', 'the function')} names an iterator ({stuck}): "
                                 "its next() must run at every call")
            held = side_effects.snapshot(around) + side_effects.hold_names(names)
            modes = side_effects.global_modes()
            with side_effects.printing_breaks(tr):
                yield tr, tleaves
            changed_mode = side_effects.restore_modes(modes)
            if changed_mode:
                raise GraphBreak(f"{getattr(fn, '__name__', 'the function')} sets {changed_mode} for the code after "
                                 "it, which a replayed graph would not")
            for write, value in bound:
                write(value)
            bound = []
            if dynamic_float.kept(tr.numbers):
                raise dynamic_float.FloatUsed("a number a global holds, kept after the call")
            drawn, generators = python_random.drawn_and_restored(generators), ()
            if drawn:
                raise GraphBreak(f"{getattr(fn, '__name__', 'the function')} draws Python or NumPy random "
                                 "numbers (random, numpy.random, a generator it names): replaying the traced "
                                 "graph would repeat the first call's")
            changed = side_effects.restore_changed(held)
            held = ()
            if changed:
                raise GraphBreak(f"{getattr(fn, '__name__', 'the function')} changes {changed} it names "
                                 "(a Python side effect: logging to a list, counting steps), which a replayed "
                                 "graph would not")
    finally:
        for write, value in bound:
            write(value)
        if held:  # (a trace that stopped early: its Python side effects and random draws are undone too)
            side_effects.restore_changed(held)
            side_effects.restore_modes(modes)
        if generators:
            python_random.drawn_and_restored(generators)
        tr.restore()


def in_strict_capture() -> bool:
    """Whether a strict capture (``CaptureTrace.strict``) is open at any depth."""
    from .trace import current_traces
    return any(getattr(t, "strict", False) for t in current_traces())


class Captured:
    """A captured graph and what its reuse depends on: its captured tensors' shape, dtype
    and requires_grad (and, for a graph that wrote ``.grad``s, whether each is set) and
    the guards recorded while tracing. ``seal()`` once the capture's snapshots are restored
    takes the captured tensors' state to compare with."""

    def __init__(self, graph, guards: Optional[dict] = None, with_grad: bool = False):
        self.graph = graph
        # (a list of numbers the traced code itself changed, a log it appends to, is no input)
        self.guard_map = {k: g for k, g in (guards or {}).items()
                          if not (type(k) is tuple and k[-1:] == (_CONTENTS,) and g[0]() != g[1])}
        self.guards = list(self.guard_map.values())  # (read, value, identity)
        self.with_grad = with_grad
        self.const_key = None

    def seal(self) -> "Captured":
        self.const_key = const_guard(self.graph.consts, self.with_grad)
        return self

    def holds(self) -> bool:
        consts = self.graph.consts  # (none, as most graphs: no tuple to build per call)
        return self.const_key == (const_guard(consts, self.with_grad) if consts else ()) and (
            not self.guards or guards_hold(self.guards))

    def reguard(self) -> None:
        """Record this capture's guards in the traces capturing now: reusing it inside an
        outer compile or transform, that outer graph depends on the same values."""
        from .trace import current_traces
        if self.guard_map:
            for t in current_traces():
                if t.captures_state:
                    for k, g in self.guard_map.items():
                        t.guards.setdefault(k, g)


class Variants:
    """Cached variants per call signature, each used while ``valid(entry)``; at most
    ``limit`` in all. When full, ``add`` evicts the least recently used (``evict``) or
    refuses."""

    def __init__(self, limit: int, valid: Callable[[Any], bool], evict: bool = False):
        self.limit = limit
        self.evict = evict
        self._valid = valid
        self._by_key: "OrderedDict[Any, list]" = OrderedDict()
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def has(self, key) -> bool:
        return key in self._by_key

    def variants(self, key) -> list:
        return list(self._by_key.get(key, ()))

    def find(self, key):
        """The first valid variant for ``key`` or None."""
        variants = self._by_key.get(key)
        if variants:
            for entry in variants:
                if self._valid(entry):
                    if self.evict:
                        self._by_key.move_to_end(key)
                    return entry
        return None

    def add(self, key, entry) -> bool:
        if self._n >= self.limit:
            if not self.evict:
                return False
            while self._n >= self.limit:
                k, old = next(iter(self._by_key.items()))
                old.pop(0)
                self._n -= 1
                if not old:
                    del self._by_key[k]
        self._by_key.setdefault(key, []).append(entry)
        self._n += 1
        return True

    def clear(self) -> None:
        self._by_key.clear()
        self._n = 0


# ------------------------------------------------------------------ referenced values
def _read_or_empty(read):
    try:
        return read()
    except ValueError:  # an empty closure cell
        return _EMPTY


def _constant(v) -> bool:
    return isinstance(v, _CONSTANT_TYPES) or (isinstance(v, tuple) and all(map(_constant, v)))


def _library(v) -> bool:
    """Imported modules, classes, builtins and fusegrad's own functions: never guarded."""
    if isinstance(v, (types.ModuleType, type, types.BuiltinFunctionType)):
        return True
    code = getattr(getattr(v, "__func__", v), "__code__", None)  # (functools.wraps copies __module__)
    return code is not None and code.co_filename.startswith(_PACKAGE)


_GLOBAL_OPS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL", "STORE_NAME"})


@functools.lru_cache(maxsize=2048)
def _code_names(code, globals_only: bool = False) -> tuple:
    """The names ``code`` and the code nested in it (lambdas, comprehensions) use, each once;
    they depend on the code object alone. ``globals_only``: the global names it reads or
    rebinds, not its attribute names (``torch.log`` reads no global ``log``: guarding the
    script's own ``log`` list as if it did made every call recompile)."""
    names = [i.argval for i in dis.get_instructions(code) if i.opname in _GLOBAL_OPS] if globals_only \
        else list(code.co_names)
    for c in code.co_consts:
        if hasattr(c, "co_names"):
            names += _code_names(c, globals_only)
    return tuple(dict.fromkeys(names))


def _references(fn) -> list:
    """(key, read, write) per value ``fn`` takes from outside: its closure cells, the globals
    its code names, its defaults, a partial's arguments and a bound method's ``self``;
    ``read()`` gives the current value, so a guard sees a rebinding; ``write(v)`` rebinds a
    global or a cell (None for the others)."""
    refs = []
    self_ = getattr(fn, "__self__", None)
    if self_ is not None and not isinstance(self_, types.ModuleType):
        refs.append((("self", id(fn)), lambda s=self_: s, None))
    f = getattr(fn, "__func__", fn)
    if isinstance(f, functools.partial):
        for i, a in enumerate(list(f.args) + list(f.keywords.values())):
            refs.append((("partial", id(f), i), lambda a=a: a, None))
        f = f.func
    if getattr(f, "__code__", None) is None and hasattr(f, "named_parameters"):  # a Module: its forward
        f = type(f).forward
    for c in getattr(f, "__closure__", None) or ():
        refs.append((("cell", id(c)), lambda c=c: c.cell_contents, lambda v, c=c: setattr(c, "cell_contents", v)))
    for i, d in enumerate(getattr(f, "__defaults__", None) or ()):
        refs.append((("default", id(f), i), lambda f=f, i=i: f.__defaults__[i], None))
    code, glb = getattr(f, "__code__", None), getattr(f, "__globals__", {})
    if code is not None:
        refs += [(("global", id(glb), n), lambda n=n: glb.get(n, _EMPTY), lambda v, n=n: glb.__setitem__(n, v))
                 for n in _code_names(code, globals_only=True) if n in glb]
    return refs


def read_references(fn) -> list:
    """The current values of what ``fn`` names outside itself (see ``_references``)."""
    return [v for v in (_read_or_empty(read) for _, read, _ in _references(fn)) if v is not _EMPTY]


def _submodule_ids(m) -> tuple:
    """The identities of the modules under module ``m`` (see ``guards.module_tensor_ids``)."""
    ids, stack = [], [m]
    while stack:
        subs = [s for s in stack.pop()._modules.values() if s is not None]
        ids += map(id, subs)
        stack += subs
    return tuple(ids)


def _tensor_ids(v) -> Optional[Callable[[], tuple]]:
    """For a module or a container of tensors, a read of the identities of its tensors
    (a parameter replaced, a list element rebound); None for anything else."""
    from ..nn.module import Module
    from ..runtime.tensor import Tensor
    if isinstance(v, Module):
        return lambda: module_tensor_ids(v)
    if hasattr(v, "named_parameters") and hasattr(v, "named_buffers"):
        return lambda: tuple(id(p) for _, p in v.named_parameters()) + tuple(id(b) for _, b in v.named_buffers())
    if isinstance(v, (list, tuple)) and len(v) <= _MAX_CONTAINER and any(isinstance(x, Tensor) for x in v):
        return lambda: tuple(id(x) for x in v)
    if isinstance(v, dict) and len(v) <= _MAX_CONTAINER and any(isinstance(x, Tensor) for x in v.values()):
        return lambda: tuple((k, id(x)) for k, x in v.items())
    return None


_CONTENTS = "contents"  # the guard key's tag of a container guarded by value (see capture)


def _numbers(v) -> bool:
    """A short list or dict of Python numbers, strings, None (guarded by value)."""
    if isinstance(v, list):
        return len(v) <= _MAX_CONTAINER and all(map(_constant, v))
    if isinstance(v, dict):
        return len(v) <= _MAX_CONTAINER and all(_constant(k) and _constant(x) for k, x in v.items())
    return False


def _contents(v) -> tuple:
    return tuple(v.items()) if isinstance(v, dict) else tuple(v)


def _tensor_items(v) -> bool:
    """Whether a list or dict holds tensors (guarded by their identities apart: _tensor_ids)."""
    from ..runtime.tensor import Tensor
    return any(isinstance(x, Tensor) for x in (v.values() if isinstance(v, dict) else v))


def _identities(v) -> tuple:
    """A list's or dict's items: numbers and strings by value, anything else by identity
    (a function, a module or an optimizer swapped for another)."""
    items = v.items() if isinstance(v, dict) else enumerate(v)
    return tuple((k, x if _constant(x) else ("id", id(x))) for k, x in items)


def members(o) -> list:
    """The attribute values, dict values or items of ``o`` (one level down)."""
    if isinstance(o, dict):
        return list(o.values())
    if isinstance(o, (list, tuple)):
        return list(o)
    return list(vars(o).values()) if hasattr(o, "__dict__") and not isinstance(o, type) else []


def _code_of(f):
    """The code object behind function, method, partial or module ``f`` (None if none)."""
    f = getattr(f, "__func__", f)
    if isinstance(f, functools.partial):
        f = f.func
    if getattr(f, "__code__", None) is None and hasattr(f, "named_parameters"):
        # (a module's class; a wrapper passing attributes on to one, or a compiled module: its own)
        f = getattr(type(f), "forward", None) or getattr(f, "forward", None)
    return getattr(getattr(f, "__func__", f), "__code__", None)


def _plain(v) -> bool:
    """A user object whose attributes are settings or state (a config, argparse's
    Namespace, a trainer): not a module, tensor, function, class or container."""
    return (hasattr(v, "__dict__") and not isinstance(v, (type, types.ModuleType, types.FunctionType,
                                                          types.MethodType, functools.partial))
            and not hasattr(v, "named_parameters") and _user_class(type(v)))


def _user_class(cls: type) -> bool:
    """Whether no class behind ``cls`` comes from a library (fusegrad's optimizers,
    schedulers, loaders and tensors keep their state under guards of their own)."""
    return all(c is object or _package(c) not in _NOT_USER for c in cls.__mro__)


def _package(cls: type) -> str:
    """The top-level package a class comes from ("" when it says none)."""
    return (getattr(cls, "__module__", None) or "").split(".")[0]


def _attributes(o, names: frozenset, depth: int = 1, plain_only: bool = False) -> tuple:
    """The attributes of ``o`` the code reads (whose names are among ``names``), guarded by
    value as torch.compile guards them: numbers, strings and the like as they are, short
    lists and dicts of them by their contents, a plain object's own such attributes
    ``depth`` levels down (``args.cfg.beta``); with ``plain_only``, no number itself (a
    module's are guarded apart)."""
    d = o.__dict__
    out = []
    for n in names & d.keys():
        x = d[n]
        if _constant(x) and not plain_only:
            out.append((n, x))
        elif _numbers(x):  # a short list or dict of numbers read by index (m.w[1], cfg.d["t"])
            out.append((n, _CONTENTS, _contents(x)))
        elif isinstance(x, (dict, list)) and len(x) <= _MAX_CONTAINER and not _tensor_items(x):
            out.append((n, _CONTENTS, _identities(x)))  # (self.cfg = {"act": F.gelu, "scale": 2.0})
        elif depth and _plain(x):
            out.append((n, id(x), _attributes(x, names, depth - 1)))
        elif not plain_only:  # a tensor, a module, a function: rebound?
            out.append((n, "identity", id(x)))
    return tuple(sorted(out, key=lambda a: a[0]))


def _module_guards(key: tuple, m, names: frozenset) -> list:
    """Guards on what module ``m``'s forward (whose code mentions ``names``) reads beyond its
    own numbers (guarded apart): its settings objects (``self.cfg.k``) and lists of numbers,
    and the constants of its class when the class is the user's (``Net.SCALE`` read as
    ``self.SCALE``)."""
    out = [(key + ("attributes",), lambda: _attributes(m, names, plain_only=True), False)]
    if _package(type(m)) not in _NOT_USER:
        out.append((key + ("class attributes",), lambda c=type(m): _attributes(c, names), False))
    return out


def _with_methods(o, names: frozenset) -> frozenset:
    """``names`` and the names the methods of ``o``'s class that ``names`` mentions read in
    turn (a schedule's ``self.beta()``)."""
    more = [m for n in names for code in [_code_of(getattr(type(o), n, None))] if code is not None
            for m in _code_names(code)]
    return names | frozenset(more)


def _global_hooks() -> list:
    """The hooks fusegrad's own code runs for every module and optimizer: what they name is
    guarded and watched for side effects as what the traced function names."""
    from ..nn import module
    from ..optim.optimizer import _GLOBAL_HOOKS
    return [*_GLOBAL_HOOKS["step_pre"], *_GLOBAL_HOOKS["step_post"], *module._global_forward_pre_hooks.values(),
            *module._global_forward_hooks.values()]


def _step_hooks(o) -> list:
    """An optimizer's own step hooks (its ``step`` runs them)."""
    from ..optim.optimizer import Optimizer
    if not isinstance(o, Optimizer):
        return []
    own = o.__dict__.get("_hooks") or {}
    return [*own.get("step_pre", []), *own.get("step_post", [])]


def _accumulate_hooks(m) -> list:
    """The post-accumulate-grad hooks of module ``m``'s own parameters."""
    return [h for p in m._parameters.values() if p is not None and p._acc is not None
            for h in p._acc.post_acc_hooks or ()]


def referenced_values(fn, depth: int = 1, writers: Optional[dict] = None) -> list:
    """(key, read, identity) guards on what ``fn`` names outside itself, as torch.compile's
    guards: Python numbers, strings, None and tuples of them are traced as literals, so a
    global ``scale = 3.0`` set between calls retraces; anything else (a global tensor or
    module, a helper function) is guarded on identity, so rebinding the name retraces; the
    tensors of a named module, list or dict on identity; and, ``depth`` levels down, what a
    named helper function names in turn. ``writers`` (when given) gets key -> write for
    each global or cell. What only forward hooks name comes with identity None: held, not
    guarded (``hook_guards``)."""
    while _library(getattr(fn, "__func__", fn)) and hasattr(fn, "__wrapped__"):  # (no_grad's wrapper: its function)
        fn = fn.__wrapped__
    if _library(getattr(fn, "__func__", fn)):  # a transform's wrapper: its guards come from its own capture
        return []
    out, seen = [], set()

    def visit(f, level: int) -> None:
        code = _code_of(f)
        names = frozenset(_code_names(code)) if code is not None else frozenset()
        if hasattr(f, "named_parameters") and names:
            out.extend(_module_guards(("module", id(f)), f, names))
        for key, read, write in _references(f):
            v = _read_or_empty(read)
            if isinstance(v, type) and names and key not in seen and _user_class(v):
                seen.add(key)  # a class's constants the code reads (Config.temperature)
                out.append((key + ("attributes",), lambda v=v: _attributes(v, names), False))
                continue
            if v is _EMPTY or _library(v) or key in seen:
                continue
            seen.add(key)
            if writers is not None and write is not None:
                writers[key] = write
            out.append((key, lambda read=read: _read_or_empty(read), not _constant(v)))
            ids = _tensor_ids(v)
            if ids is not None:
                out.append((key + ("tensors",), ids, False))
                code = _code_of(v) if hasattr(v, "named_parameters") else None
                if code is not None:
                    out.extend(_module_guards(key, v, frozenset(_code_names(code))))
            elif _numbers(v):  # (a list of counts or scales read by index: cnt[0])
                out.append((key + (_CONTENTS,), lambda v=v: _contents(v), False))
            elif isinstance(v, (dict, list)) and len(v) <= _MAX_CONTAINER:
                # (a config or a registry: {"act": F.gelu, "scale": 2.0}, {"opt": adam}, models)
                out.append((key + (_CONTENTS,), lambda v=v: _identities(v), False))
            elif isinstance(v, np.ndarray) and v.size <= _MAX_CONTAINER:  # (torch.tensor(W) copies it when traced)
                out.append((key + ("array",), lambda v=v: (v.dtype.str, v.shape, v.tobytes()), False))
            elif _plain(v) and names:  # a config, argparse's Namespace, a trainer: what the code reads of it
                out.append((key + ("attributes",), lambda v=v, n=_with_methods(v, names): _attributes(v, n), False))
            elif level > 0 and callable(v) and getattr(getattr(v, "__func__", v), "__code__", None) is not None:
                visit(v, level - 1)
            if level > 0 and hasattr(v, "named_parameters") and hasattr(v, "modules"):
                inside(v, itself=True)
            for hook in _step_hooks(v):  # (what they name changes as the module hooks' would)
                visit(hook, 0)

    def inside(module, itself: bool = False) -> None:
        """What the forwards of ``module``'s submodules (``itself``: and its own) and their
        hooks name (a log a layer appends to, a dict a hook stores activations in), as one
        level down. Forward hooks are visited last (``call_hooks``)."""
        for m in module.modules():
            if id(m) in modules_seen:
                continue
            modules_seen.add(id(m))
            call_hooks.extend([*m._forward_pre_hooks.values(), *m._forward_hooks.values()])
            for hook in _accumulate_hooks(m):
                visit(hook, 0)
            if (itself or m is not module) and not _library(type(m).forward):  # (fusegrad's layers name nothing of the user's)
                visit(m, 0)

    modules_seen: set = set()
    call_hooks: list = []
    visit(fn, depth)
    for hook in _global_hooks():
        visit(hook, 0)
    if hasattr(fn, "named_parameters") and hasattr(fn, "modules"):
        inside(fn)
        if hasattr(fn, "_modules"):  # a submodule swapped for one without parameters (model.act = Tanh())
            out.append((("module", id(fn), "modules"), lambda: _submodule_ids(fn), False))
    # what a module's forward hooks name is held (their side effects seen) but not guarded
    # here: a module the trace calls guards its hooks' values then (hook_guards), so a
    # counter that a hook of a layer the function never calls keeps does not retrace it
    guarded = len(out)
    for hook in call_hooks:
        visit(hook, 0)
    out[guarded:] = [(key, read, None) for key, read, _ in out[guarded:]]
    return out


def hook_guards(hooks) -> None:
    """Guard what ``hooks`` (a module's forward hooks, run by a traced call) name, as
    ``referenced_values`` guards a compiled function's own references."""
    for hook in hooks:
        for key, read, identity in referenced_values(hook, depth=0):
            if identity is not None:
                guard(key, read, identity)
