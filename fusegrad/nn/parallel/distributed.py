"""``DistributedDataParallel``: replicate a module on every rank, average gradients with
bucketed all-reduces that overlap the backward (see ``reducer``)."""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, List, Optional


from ... import distributed as dist
from ...distributed.collectives import check_same
from ...runtime.grad_mode import is_grad_enabled
from ...runtime.nodes import AccumulateGrad
from ...runtime.tensor import Tensor
from ...tracer.trace import GraphBreak, capturing, user_frame
from ..module import Module
from ..optimized_module import OptimizedModule
from .reducer import Reducer, plan_buckets


def _compiled_parts(module):
    """(the Module, the compiled wrapper or None) of ``module`` (``fusegrad.compile(m)``
    returns an OptimizedModule; a compiled function whose ``fn`` is a Module also serves)."""
    if isinstance(module, OptimizedModule):
        return module, module._compiled
    if isinstance(module, Module):
        return module, None
    fn = getattr(module, "fn", None)
    if isinstance(fn, Module) and callable(module):
        return fn, module
    raise TypeError(f"DistributedDataParallel expects an nn.Module or a compiled module, got {type(module).__name__}")


class DistributedDataParallel(Module):
    """Data parallelism across the ranks of ``process_group``, as ``torch.nn.parallel.DistributedDataParallel``.

    Each rank runs the module on its own batch; during ``backward`` each gradient bucket
    (``bucket_cap_mb``, filled in reverse registration order) is all-reduced as soon as its
    gradients are accumulated, and the gradients end up averaged over the ranks.

    A compiled module (``DistributedDataParallel(fusegrad.compile(model))``, any module, its
    forward possibly computing the loss) is supported: its forward stays one compiled graph, and
    its compiled backward runs in stages, one per bucket (``runtime.staged_backward``), each
    handing its bucket's gradients to the hooks before the next stage runs."""

    def __init__(self, module, device_ids=None, output_device=None, dim: int = 0, broadcast_buffers: bool = True,
                 process_group=None, bucket_cap_mb: Optional[float] = None, find_unused_parameters: bool = False,
                 check_reduction: bool = False, gradient_as_bucket_view: bool = False,
                 static_graph: bool = False, delay_all_reduce_named_params=None, param_to_hook_all_reduce=None,
                 mixed_precision=None, device_mesh=None) -> None:
        super().__init__()
        unsupported = {"mixed_precision": mixed_precision, "device_mesh": device_mesh,
                       "delay_all_reduce_named_params": delay_all_reduce_named_params,
                       "param_to_hook_all_reduce": param_to_hook_all_reduce}
        for name, value in unsupported.items():
            if value is not None:
                raise NotImplementedError(f"DistributedDataParallel: {name} is not supported by fusegrad")
        if not dist.is_initialized():
            raise RuntimeError("Default process group has not been initialized, please make sure to call "
                               "init_process_group.")
        inner, compiled = _compiled_parts(module)
        self.module = inner
        self.process_group = dist.process_group.resolve(process_group)
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        self.bucket_cap_mb = 25.0 if bucket_cap_mb is None else float(bucket_cap_mb)
        named = [(n, p) for n, p in inner.named_parameters() if p.requires_grad]
        if not named:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't have any parameter "
                               "that requires a gradient.")
        self._verify_same_parameters(named)
        self._sync_from_rank0()
        cap = int(self.bucket_cap_mb * 1024 * 1024)
        groups = plan_buckets([p for _, p in named], cap)
        if compiled is not None:
            compiled._set_gradient_groups(groups)
        self.__dict__["_forward_fn"] = compiled or inner  # not a submodule: state_dict holds module.* only
        self.reducer = Reducer(groups, {id(p): n for n, p in named}, self.process_group)
        self.reducer.find_unused = find_unused_parameters
        self.reducer.grads_as_views = gradient_as_bucket_view
        self.gradient_as_bucket_view = gradient_as_bucket_view

    # -------------------------------------------------------------- setup
    def _verify_same_parameters(self, named) -> None:
        check_same(self.process_group, "DistributedDataParallel", [p._data for _, p in named], "parameter")

    def _sync_from_rank0(self) -> None:
        """Every rank starts from rank 0's parameters and buffers."""
        root = self.process_group.ranks[0]
        for t in list(self.module.parameters()) + list(self.module.buffers()):
            dist.broadcast(t, src=root, group=self.process_group)

    # -------------------------------------------------------------- forward
    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        if capturing():  # its hooks and collectives must run on every call: compile the module inside
            raise GraphBreak(f"DistributedDataParallel called inside a compiled function at {user_frame()} "
                             "(compile the module it wraps: DistributedDataParallel(fusegrad.compile(model)))")
        sync = is_grad_enabled() and self.require_backward_grad_sync
        if self.broadcast_buffers and self.training:
            root = self.process_group.ranks[0]
            for b in self.module.buffers():
                dist.broadcast(b, src=root, group=self.process_group)
        out = self._forward_fn(*inputs, **kwargs)
        nodes = _graph(out) if sync else []
        for n in nodes:  # MPICH advances the buckets in flight only inside MPI calls: poke it per node
            if type(n) is not AccumulateGrad:  # (the leaves' nodes live on: hooks would pile up)
                n.register_hook(self.reducer.poke)
        unused = self._unused(nodes) if self.find_unused_parameters else ()
        self.reducer.prepare(sync, unused)
        return out

    def _unused(self, nodes: list) -> list:
        """Parameters the autograd graph does not reach (they are reduced as zeros)."""
        reached = {id(n.variable) for n in nodes if getattr(n, "variable", None) is not None}
        return [p for p in self.reducer.params if id(p) not in reached]

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backwards of forwards run inside accumulate gradients locally, without communication."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    # -------------------------------------------------------------- introspection
    @property
    def last_backward_wait_s(self) -> float:
        """Seconds the last synchronized backward waited for all-reduces after its last gradient."""
        return self.reducer.comm_wait_s

    @property
    def bucket_sizes(self) -> List[int]:
        """Elements per gradient bucket, in all-reduce order."""
        return [b.size for b in self.reducer.buckets]

    def extra_repr(self) -> str:
        return f"world_size={self.process_group.size()}, buckets={len(self.reducer.buckets)}"


def _graph(out) -> list:
    """The autograd nodes reachable from the tensors in ``out``."""
    stack = [t._grad_fn if t._grad_fn is not None else (t._acc if t._rg else None) for t in _tensors(out)]
    seen: set = set()
    nodes = []
    while stack:
        n = stack.pop()
        if n is None or n in seen:
            continue
        seen.add(n)
        nodes.append(n)
        stack.extend(e[0] for e in n.edges if e is not None)
    return nodes


def _tensors(out) -> list:
    if isinstance(out, Tensor):
        return [out]
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _tensors(o)]
    return []
