"""torch.autograd.functional: jacobian, hessian, vjp, jvp, hvp, vhp, over fusegrad.func's transforms."""
from __future__ import annotations


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    from ..func import jacrev
    single = not isinstance(inputs, tuple)
    args = (inputs,) if single else inputs
    return jacrev(func, argnums=0 if single else tuple(range(len(args))))(*args)


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    from ..func import hessian as h
    single = not isinstance(inputs, tuple)
    args = (inputs,) if single else inputs
    return h(func, argnums=0 if single else tuple(range(len(args))))(*args)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    from ..func import vjp as v_
    single = not isinstance(inputs, tuple)
    args = (inputs,) if single else inputs
    out, fn = v_(func, *args)
    if v is None:
        from ..runtime.factory import ones_like
        v = ones_like(out)
    g = fn(v)
    return out, (g[0] if single else g)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    from ..func import jvp as j_
    single = not isinstance(inputs, tuple)
    args = (inputs,) if single else inputs
    if v is None:
        from ..runtime.factory import ones_like
        v = tuple(ones_like(a) for a in args)
    vs = (v,) if single and not isinstance(v, tuple) else v
    return j_(func, args, vs)


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
    return _hessian_product(func, inputs, v, left=False)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v @ H)``: ``v`` times the Hessian of a scalar function."""
    return _hessian_product(func, inputs, v, left=True)
