"""torch.autograd.functional: jacobian, hessian, vjp, jvp over eager autograd."""
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
