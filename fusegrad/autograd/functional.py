"""torch.autograd.functional: jacobian, hessian, vjp, jvp, hvp, vhp, over fusegrad.func's transforms.
Without ``create_graph`` their results are detached, as PyTorch's; ``strict`` checks that the
function's outputs are computed differentiably from its inputs."""
from __future__ import annotations

from ..runtime.tensor import Tensor


def _result(tree, func, inputs, create_graph: bool, strict: bool):
    """``tree`` (the transform's result) detached unless ``create_graph``, after the strict check."""
    from ..func.pytree import flatten, unflatten
    if strict:
        _check_strict(func, inputs)
    if create_graph:
        return tree
    leaves, spec = flatten(tree)
    return unflatten(spec, [x.detach() if isinstance(x, Tensor) else x for x in leaves])


def _graph_inputs(inputs, create_graph: bool):
    """``inputs`` as PyTorch's functionals differentiate them: with ``create_graph``, a float
    tensor that does not require grad becomes a detached one that does, so the result has a
    graph (its ``requires_grad`` set) whatever the caller's inputs."""
    if not create_graph:
        return inputs

    def prep(t):
        if isinstance(t, Tensor) and not t.requires_grad and t.is_floating_point():
            return t.detach().requires_grad_(True)
        return t
    return tuple(prep(t) for t in inputs) if isinstance(inputs, tuple) else prep(inputs)


def _check_strict(func, inputs) -> None:
    """PyTorch's strict mode: every output must require grad when the inputs do."""
    from ..func.pytree import flatten
    from ..runtime.grad_mode import enable_grad
    args = tuple(a.detach().requires_grad_(True) for a in (inputs if isinstance(inputs, tuple) else (inputs,)))
    with enable_grad():
        outs = [o for o in flatten(func(*args))[0] if isinstance(o, Tensor)]
    for i, o in enumerate(outs):
        if not o.requires_grad:
            raise RuntimeError(f"Output {i} of the user-provided function does not require gradients. The outputs "
                               "must be computed in a differentiable manner from the input when running in strict "
                               "mode.")


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    _check_strategy(strategy, vectorize)
    inputs = _graph_inputs(inputs, create_graph)
    from ..func import jacfwd, jacrev
    single = not isinstance(inputs, tuple)
    args = (inputs,) if single else inputs
    jac = jacfwd if strategy == "forward-mode" else jacrev
    return _result(jac(func, argnums=0 if single else tuple(range(len(args))))(*args), func, inputs,
                   create_graph, strict)


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    _check_strategy(outer_jacobian_strategy, vectorize, hint=False)
    inputs = _graph_inputs(inputs, create_graph)
    from ..func import hessian as h
    single = not isinstance(inputs, tuple)
    args = (inputs,) if single else inputs

    def scalar(*a):
        out = func(*a)
        if not isinstance(out, Tensor):
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.numel() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should contain a single element")
        return out
    return _result(h(scalar, argnums=0 if single else tuple(range(len(args))))(*args), func, inputs, create_graph,
                   strict)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    inputs = _graph_inputs(inputs, create_graph)
    from ..func import vjp as v_
    single = not isinstance(inputs, tuple)
    args = (inputs,) if single else inputs
    out, fn = v_(func, *args)
    if v is None:
        if not (isinstance(out, Tensor) and out.numel() == 1):
            raise RuntimeError("The vector v can only be None if the user-provided function returns a single Tensor "
                               "with a single element.")
        from ..runtime.factory import ones_like
        v = ones_like(out)
    g = fn(v)
    return _result((out, (g[0] if single else g)), func, inputs, create_graph, strict)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    inputs = _graph_inputs(inputs, create_graph)
    from ..func import jvp as j_
    single = not isinstance(inputs, tuple)
    args = (inputs,) if single else inputs
    if v is None:
        if not (single and args[0].numel() == 1):
            raise RuntimeError("The vector v can only be None if the input to the user-provided function is a "
                               "single Tensor with a single element.")
        from ..runtime.factory import ones_like
        v = tuple(ones_like(a) for a in args)
    vs = (v,) if single and not isinstance(v, tuple) else v
    return _result(j_(func, args, vs), func, inputs, create_graph, strict)


def _check_strategy(strategy: str, vectorize: bool, hint: bool = True) -> None:
    """PyTorch's checks of a Jacobian strategy: one of two names; forward mode only vectorized."""
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".' + (
            ' Hint: If your function has more outputs than inputs, "forward-mode" tends to be more performant. '
            'Otherwise, prefer to use "reverse-mode".' if hint else ""))
    if strategy == "forward-mode" and not vectorize:
        raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-reverse Hessian is"
                                  "only implemented for `vectorize=True`.")


def _hessian_product(func, inputs, v, left: bool):
    """``(func(inputs), H v)`` (``left``: ``v^T H``) for a function with a single-element output."""
    from ..func import grad, jvp as j_, vjp as v_
    single = not isinstance(inputs, tuple)
    args = (inputs,) if single else inputs
    out = func(*args)
    if out.numel() != 1:
        raise RuntimeError("The Tensor returned by the function given to hessian should contain a single element")
    if v is None:
        if not all(a.numel() == 1 for a in args):
            raise RuntimeError("The vector v can only be None if the input to the user-provided function is a "
                               "single Tensor with a single element.")
        from ..runtime.factory import ones_like
        v = tuple(ones_like(a) for a in args)
    vs = (v,) if single and not isinstance(v, tuple) else v
    g = grad(lambda *a: func(*a).reshape(()), argnums=tuple(range(len(args))))
    if left:
        _, fn = v_(g, *args)
        res = fn(vs)
    else:
        res = j_(g, args, vs)[1]
    return out.detach(), (res[0] if single else res)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), H @ v)``: the Hessian of a scalar function times ``v``."""
    inputs = _graph_inputs(inputs, create_graph)
    return _result(_hessian_product(func, inputs, v, left=False), func, inputs, create_graph, strict)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v @ H)``: ``v`` times the Hessian of a scalar function."""
    inputs = _graph_inputs(inputs, create_graph)
    return _result(_hessian_product(func, inputs, v, left=True), func, inputs, create_graph, strict)
