"""Module backward hooks (``register_full_backward_hook``/``_pre_hook``), as PyTorch runs them.

A module call with such hooks passes its tensor inputs, and then its tensor outputs,
through an identity autograd function (``BackwardHookFunctionBackward``). In backward,
the outputs' node sees the gradients w.r.t. the outputs first: the pre-hooks may replace
them. The inputs' node then sees the gradients w.r.t. the inputs: the hooks get
``(module, grad_input, grad_output)`` and may replace ``grad_input``."""
from __future__ import annotations

import warnings

from ..autograd.function import Function
from ..runtime.grad_mode import is_grad_enabled
from ..runtime.tensor import Tensor


class BackwardHookFunction(Function):
    """Identity on tensors whose backward calls ``on_grads(grads) -> grads``."""

    @staticmethod
    def forward(ctx, on_grads, materialize, *tensors):
        ctx.on_grads = on_grads
        ctx.set_materialize_grads(materialize)
        for t in tensors:
            if not t.requires_grad:
                ctx.mark_non_differentiable(t)
        return tuple(tensors)

    @staticmethod
    def backward(ctx, *grads):
        return (None, None) + tuple(ctx.on_grads(grads))


def _pack_with_none(indices, values, size) -> tuple:
    res = [None] * size
    for i, v in zip(indices, values):
        res[i] = v
    return tuple(res)


class BackwardHook:
    """The backward hooks of one module call (see the module docstring)."""

    def __init__(self, module, hooks: list, pre_hooks: list):
        self.module = module
        self.hooks = hooks
        self.pre_hooks = pre_hooks
        self.grad_outputs = None
        self.n_inputs = self.n_outputs = 0
        self.input_index = self.output_index = None

    def _apply(self, on_grads, args: tuple, materialize: bool = True):
        idx = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        tensors = [args[i] for i in idx]
        if not (is_grad_enabled() and any(t.requires_grad for t in tensors)):
            return args, None
        new = BackwardHookFunction.apply(on_grads, materialize, *tensors)
        new = new if isinstance(new, tuple) else (new,)
        out = list(args)
        for i, t in zip(idx, new):
            out[i] = t
        return tuple(out), idx

    def setup_input_hook(self, args: tuple) -> tuple:
        def on_grads(grads):
            if self.grad_outputs is None:
                return grads
            res = _pack_with_none(self.input_index, grads, self.n_inputs)
            for hook in self.hooks:
                out = hook(self.module, res, self.grad_outputs)
                if out is None:
                    continue
                if len(out) != len(res):
                    raise RuntimeError(f"Backward hook returned an invalid number of grad_input, got {len(out)}, "
                                       f"but expected {len(res)}")
                res = out
            self.grad_outputs = None
            return tuple(res[i] for i in self.input_index)
        res, self.input_index = self._apply(on_grads, args)
        self.n_inputs = len(args)
        return res

    def setup_output_hook(self, result):
        def on_grads(grads):
            # an output that does not require grad gets no gradient (None), as in PyTorch
            grads = tuple(g if outs[i].requires_grad else None for i, g in zip(self.output_index, grads))
            self.grad_outputs = _pack_with_none(self.output_index, grads, self.n_outputs)
            for hook in self.pre_hooks:
                out = hook(self.module, self.grad_outputs)
                if out is None:
                    continue
                if len(out) != len(self.grad_outputs):
                    raise RuntimeError(f"Backward pre hook returned an invalid number of grad_output, got "
                                       f"{len(out)}, but expected {len(self.grad_outputs)}")
                self.grad_outputs = tuple(out)
            local = self.grad_outputs
            if self.input_index is None:  # no input requires grad: the hooks run now
                warnings.warn("Full backward hook is firing when gradients are computed with respect to module "
                              "outputs since no inputs require gradients. See "
                              "https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html"
                              "#torch.nn.Module.register_full_backward_hook for more details.", stacklevel=5)
                grad_inputs = (None,) * self.n_inputs
                for hook in self.hooks:
                    r = hook(self.module, grad_inputs, self.grad_outputs)
                    if r is not None and not (isinstance(r, tuple) and all(e is None for e in r)):
                        raise RuntimeError("Backward hook for Modules where no input requires gradient should "
                                           "always return None or None for all gradients.")
                self.grad_outputs = None
            return tuple(local[i] for i in self.output_index)
        single = not isinstance(result, tuple)
        outs = (result,) if single else result
        # (an output no gradient reaches shows as None to the hooks, as in PyTorch)
        res, self.output_index = self._apply(on_grads, outs, materialize=False)
        self.n_outputs = len(outs)
        return res[0] if single else res
