"""Finite-difference checks of analytical gradients (float64 central differences)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..runtime.grad_mode import enable_grad, no_grad
from ..runtime.tensor import Tensor, wrap


class GradcheckError(RuntimeError):
    pass


def _outputs(fn, inputs):
    out = fn(*inputs)
    return [out] if isinstance(out, Tensor) else [o for o in out if isinstance(o, Tensor)]


def _numerical(fn, inputs, i, eps):
    x = inputs[i]
    arr = x._data  # perturbed in place (np.ndindex, so strided views are written through)
    cols = []
    for k in np.ndindex(*arr.shape):
        orig = arr[k]
        with no_grad():
            arr[k] = orig + eps
            plus = [o._data.astype(np.float64).reshape(-1).copy() for o in _outputs(fn, inputs)]
            arr[k] = orig - eps
            minus = [o._data.astype(np.float64).reshape(-1).copy() for o in _outputs(fn, inputs)]
            arr[k] = orig
        cols.append(np.concatenate([(p - m) / (2 * eps) for p, m in zip(plus, minus)]))
    if not cols:
        with no_grad():
            n_out = sum(o._data.size for o in _outputs(fn, inputs))
        return np.zeros((0, n_out))
    return np.stack(cols, axis=0)  # [n_in, n_out]


def _analytical(fn, inputs, diff_idx):
    from .functions import grad
    outs = _outputs(fn, inputs)
    n_out = sum(o.numel() for o in outs)
    jac = {i: np.zeros((inputs[i].numel(), n_out)) for i in diff_idx}
    col = 0
    for o in outs:
        for k in range(o.numel()):
            if not o._rg:
                col += 1
                continue
            go = np.zeros(o._data.size, dtype=o._data.dtype)
            go[k] = 1
            gs = grad([o], [inputs[i] for i in diff_idx], [wrap(go.reshape(o._data.shape))], retain_graph=True,
                      allow_unused=True)
            for i, g in zip(diff_idx, gs):
                if g is not None:
                    jac[i][:, col] = g._data.astype(np.float64).reshape(-1)
            col += 1
    return jac


def gradcheck(func: Callable, inputs, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, **kwargs) -> bool:
    """Compare ``func``'s gradients with central finite differences."""
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    diff_idx = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x._rg]
    for i in diff_idx:
        if inputs[i]._data.dtype != np.float64:
            import warnings
            warnings.warn("Input #%d requires gradient and is not a double precision floating point. "
                          "gradcheck may fail." % i, UserWarning)
    ana = _analytical(func, inputs, diff_idx)
    for i in diff_idx:
        num = _numerical(func, inputs, i, eps)
        a = ana[i]
        if num.shape != a.shape or not np.allclose(a, num, rtol=rtol, atol=atol):
            if raise_exception:
                raise GradcheckError(f"Jacobian mismatch for output 0 with respect to input {i},\n"
                                     f"numerical:{num}\nanalytical:{a}\n")
            return False
    return True


def gradgradcheck(func: Callable, inputs, grad_outputs=None, *, eps: float = 1e-6, atol: float = 1e-5,
                  rtol: float = 1e-3, raise_exception: bool = True, **kwargs) -> bool:
    """gradcheck of the first derivative (checks second derivatives)."""
    from .functions import grad
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    diff_idx = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x._rg]
    outs = _outputs(func, inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = [wrap(rng.standard_normal(o._data.shape).astype(o._data.dtype)) for o in outs]
    grad_outputs = [g.detach().requires_grad_(True) for g in grad_outputs]

    def first(*args):
        xs, gos = args[:len(inputs)], args[len(inputs):]
        with enable_grad():  # also when gradcheck evaluates it numerically under no_grad
            os_ = _outputs(func, xs)
            gs = grad(os_, [xs[i] for i in diff_idx], list(gos), create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)
    return gradcheck(first, tuple(inputs) + tuple(grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
