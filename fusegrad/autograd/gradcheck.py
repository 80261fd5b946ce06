"""Finite-difference checks of analytical gradients (float64 central differences), with
PyTorch's options: backward- and forward-mode Jacobians, reentrancy (``nondet_tol``), gradient
dtypes and sizes, undefined output gradients, and batched gradients through ``vmap``."""
from __future__ import annotations

import warnings
from typing import Callable, Optional, Sequence, Union

import numpy as np

from ..runtime.grad_mode import enable_grad, no_grad
from ..runtime.tensor import Tensor, wrap
from . import forward_ad as fwAD
from .function import Function

__all__ = ["GradcheckError", "gradcheck", "gradgradcheck"]

TensorOrTensors = Union[Tensor, Sequence[Tensor]]


class GradcheckError(RuntimeError):
    """Raised by gradcheck and gradgradcheck when a check fails."""


_FAILED_BATCHED_MSG = ("gradcheck or gradgradcheck failed while testing batched gradient computation.\n"
                       "Call gradcheck/gradgradcheck with `{flag}=False` to skip this check.")


def _as_tuple(x) -> tuple:
    return x if isinstance(x, tuple) else tuple(x) if isinstance(x, list) else (x,)


def _tensor_outputs(out) -> list:
    return [o for o in _as_tuple(out) if isinstance(o, Tensor)]


def _flat64(t: Tensor) -> np.ndarray:
    return t._data.astype(np.float64).reshape(-1)  # astype copies: safe against later in-place perturbation


def _check_inputs(inputs: tuple) -> list:
    """Indices of the inputs that require grad; warns and raises as PyTorch's gradcheck does."""
    diff_idx = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x._rg]
    for i in diff_idx:
        arr = inputs[i]._data
        if arr.dtype != np.float64:
            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating point or complex. "
                          "This check will likely fail if all the inputs are not of double precision floating "
                          "point or complex. ", UserWarning, stacklevel=3)
        # an empty array may have zero strides (numpy) yet has nothing that overlaps
        if arr.size and any(st == 0 and n > 1 for st, n in zip(arr.strides, arr.shape)):
            raise RuntimeError(f"The {i}th input has a dimension with stride 0. gradcheck only supports inputs that "
                               "are non-overlapping to be able to compute the numerical gradients correctly. You "
                               "should call .contiguous on the input before passing it to gradcheck.")
    if not diff_idx:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, "
                         "but none of them have requires_grad=True.")
    return diff_idx


def _numerical(fn: Callable, inputs: tuple, i: int, eps: float) -> list:
    """Central-difference Jacobian of each Tensor output of ``fn`` w.r.t. input ``i``: one
    ``[inputs[i].numel(), output.numel()]`` array per output."""
    arr = inputs[i]._data  # perturbed in place (np.ndindex, so strided views are written through)

    def evaluate():
        with no_grad():
            return [_flat64(o) for o in _tensor_outputs(fn(*inputs))]
    cols = []
    for k in np.ndindex(*arr.shape):
        orig = arr[k]
        try:
            arr[k] = orig + eps
            plus = evaluate()
            arr[k] = orig - eps
            minus = evaluate()
        finally:
            arr[k] = orig
        cols.append([(p - m) / (2 * eps) for p, m in zip(plus, minus)])
    if not cols:
        return [np.zeros((0, o.size)) for o in evaluate()]
    return [np.stack(c) for c in zip(*cols)]


def _backward_jacobians(output: Tensor, diff_inputs: list, check_grad_dtypes: bool) -> list:
    """Jacobian of ``output`` w.r.t. each of ``diff_inputs`` (``[input.numel(), output.numel()]``),
    one VJP per output element; raises on gradients of the wrong dtype (if checked) or size."""
    from .functions import grad
    jacs = [np.zeros((x.numel(), output.numel())) for x in diff_inputs]
    go = np.zeros(output._data.size, dtype=output._data.dtype)
    types_ok = sizes_ok = True
    for k in range(go.size):
        go[:] = 0
        go[k] = 1
        gs = grad([output], diff_inputs, [wrap(go.reshape(output._data.shape).copy())], retain_graph=True,
                  allow_unused=True)
        for jac, x, g in zip(jacs, diff_inputs, gs):
            if g is None:
                continue
            if tuple(g.shape) != tuple(x.shape):
                sizes_ok = False
                continue
            types_ok &= g.dtype == x.dtype
            jac[:, k] = _flat64(g)
    if not types_ok and check_grad_dtypes:
        raise GradcheckError("Gradient has dtype mismatch")
    if not sizes_ok:
        raise GradcheckError("Analytical gradient has incorrect size")
    return jacs


def _forward_jacobians(fn: Callable, inputs: tuple, diff_idx: list, keep: list, out_sizes: list) -> list:
    """``jacs[j][o]``: Jacobian (``[input.numel(), output.numel()]``) of the ``o``-th kept output
    w.r.t. the ``j``-th input requiring grad, one forward-mode evaluation per input element
    (every other input requiring grad carries a zero tangent, as in PyTorch)."""
    jacs = [[np.zeros((inputs[j].numel(), n)) for n in out_sizes] for j in diff_idx]
    with fwAD.dual_level():
        for jac, j in zip(jacs, diff_idx):
            for k in range(inputs[j].numel()):
                args = list(inputs)
                for m in diff_idx:
                    t = np.zeros(inputs[m]._data.shape, dtype=inputs[m]._data.dtype)
                    if m == j:
                        t.reshape(-1)[k] = 1
                    args[m] = fwAD.make_dual(inputs[m].detach(), wrap(t))
                outs = [o for o, kept in zip(_tensor_outputs(fn(*args)), keep) if kept]
                for rows, o in zip(jac, outs):
                    tangent = fwAD.unpack_dual(o).tangent
                    if tangent is not None:  # None: a zero row
                        rows[k] = _flat64(tangent)
    return jacs


def _compare(analytical: np.ndarray, numerical: np.ndarray, rtol: float, atol: float, out_i: int, in_i: int,
             forward: bool) -> None:
    if analytical.shape != numerical.shape or not np.allclose(analytical, numerical, rtol=rtol, atol=atol):
        mode = "computed with forward mode " if forward else ""
        raise GradcheckError(f"Jacobian {mode}mismatch for output {out_i:d} with respect to input {in_i:d},\n"
                             f"numerical:{wrap(numerical)}\nanalytical:{wrap(analytical)}\n")


def _check_jacobians(func, inputs, diff_idx, func_out, eps, atol, rtol, nondet_tol, check_grad_dtypes,
                     check_forward_ad, check_backward_ad) -> None:
    """Compare the analytical Jacobians (backward mode, computed twice for reentrancy, and/or
    forward mode) with the numerical ones."""
    keep = [o._rg for o in _tensor_outputs(func_out)]
    every = [_numerical(func, inputs, i, eps) for i in diff_idx]  # of every output, differentiable or not
    if not any(keep):  # nothing differentiable: the function must be locally constant
        if any(np.any(jac != 0) for jacs in every for jac in jacs):
            raise GradcheckError("Numerical gradient for function expected to be zero")
        return
    numerical = [[jac for jac, kept in zip(jacs, keep) if kept] for jacs in every]
    diff_outputs = [o for o in _tensor_outputs(func_out) if o._rg]
    diff_inputs = [inputs[i] for i in diff_idx]
    if check_backward_ad:
        for o_i, o in enumerate(diff_outputs):
            first = _backward_jacobians(o, diff_inputs, check_grad_dtypes)
            second = _backward_jacobians(o, diff_inputs, check_grad_dtypes)
            if any(a.size and np.abs(a - b).max() > nondet_tol for a, b in zip(first, second)):
                raise GradcheckError("Backward is not reentrant, i.e., running backward with same input and "
                                     "grad_output multiple times gives different values, although analytical "
                                     "gradient matches numerical gradient."
                                     f"The tolerance for nondeterminism was {nondet_tol}.")
            for j, a in enumerate(first):
                _compare(a, numerical[j][o_i], rtol, atol, o_i, j, forward=False)
    if check_forward_ad:
        forward = _forward_jacobians(func, inputs, diff_idx, keep, [o.numel() for o in diff_outputs])
        for o_i in range(len(diff_outputs)):
            for j in range(len(diff_idx)):
                _compare(forward[j][o_i], numerical[j][o_i], rtol, atol, o_i, j, forward=True)


def _test_undefined_forward_mode(func, inputs: tuple, diff_idx: list) -> None:
    """A zero tangent given explicitly and no tangent at all must give the same output tangents."""
    rng = np.random.default_rng(0)
    with fwAD.dual_level():
        duals = list(inputs)
        for i in diff_idx:
            duals[i] = fwAD.make_dual(inputs[i].detach(), wrap(rng.standard_normal(inputs[i]._data.shape)
                                                                .astype(inputs[i]._data.dtype)))
        for i in diff_idx:
            args = list(duals)
            args[i] = fwAD.make_dual(inputs[i].detach(), wrap(np.zeros_like(inputs[i]._data)))
            zero = _tensor_outputs(func(*args))
            args[i] = inputs[i].detach()
            undefined = _tensor_outputs(func(*args))
            for o_i, (a, b) in enumerate(zip(zero, undefined)):
                ta, tb = fwAD.unpack_dual(a).tangent, fwAD.unpack_dual(b).tangent
                if ta is not None and tb is not None and not np.allclose(ta._data, tb._data):
                    raise GradcheckError(f"Mismatch in tangent values for output with index: {o_i} when input: "
                                         f"{inputs[i]} has an undefined tangent value. Got: {ta} but expected: {tb}")


class _UndefinedGrad(Function):
    """Identity whose backward hands an undefined (None) gradient on, as PyTorch's UndefinedGrad."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        return None


_UNDEFINED_NOTE = 'Please look at "Notes about undefined output gradients" in "tools/autograd/derivatives.yaml"'


def _undefined_grad_error(msg: str) -> GradcheckError:
    warnings.warn("Backwards compatibility: New undefined gradient support checking feature is enabled by default, "
                  "but it may break existing callers of this function. If this is true for you, you can call this "
                  'function with "check_undefined_grad=False" to disable the feature', UserWarning, stacklevel=4)
    return GradcheckError(msg)


def _test_undefined_backward_mode(func, inputs: tuple, diff_idx: list, n_outputs: int) -> None:
    """Backward must treat undefined output gradients as zeros: all at once, then one at a time."""
    from .functions import grad
    diff_inputs = [inputs[i] for i in diff_idx]

    def outputs_with_undefined(which):
        return [_UndefinedGrad.apply(o) if k in which else o
                for k, o in enumerate(o for o in _tensor_outputs(func(*inputs)) if o._rg)]
    cases = [range(n_outputs)] + ([[k] for k in range(n_outputs)] if n_outputs > 1 else [])
    for which in cases:
        outs = outputs_with_undefined(set(which))
        try:
            gs = grad(outs, diff_inputs, [wrap(np.zeros_like(o._data)) for o in outs], allow_unused=True)
        except RuntimeError as e:
            raise _undefined_grad_error(f"Expected backward function to handle undefined output grads. "
                                        f"{_UNDEFINED_NOTE}") from e
        if any(g is not None and np.any(g._data != 0) for g in gs):
            raise _undefined_grad_error("Expected all input grads to be undefined or zero when all output grads "
                                        f"are undefined or zero. {_UNDEFINED_NOTE}")


def _test_backward_mul_by_grad_output(outputs: list, inputs: tuple, diff_idx: list) -> None:
    """Zero output gradients must give zero input gradients of the inputs' dtype, device and size."""
    from .functions import grad
    diff_inputs = [inputs[i] for i in diff_idx]
    gs = grad(outputs, diff_inputs, [wrap(np.zeros_like(o._data)) for o in outputs], allow_unused=True)
    for g, x in zip(gs, diff_inputs):
        if g is None:
            continue
        if np.any(g._data != 0):
            raise GradcheckError("backward not multiplied by grad_output")
        if g.dtype != x.dtype:
            raise GradcheckError("grad is incorrect type")
        if g.device != x.device:
            raise GradcheckError("grad is incorrect device")
        if tuple(g.shape) != tuple(x.shape):
            raise GradcheckError("grad is incorrect size")


def _check_batched(per_example: Callable, vectors: list, flag: str, what: str, out_i: Optional[int]) -> None:
    """``vmap(per_example)`` over the stacked ``vectors`` must match a loop over them."""
    from ..func import vmap
    from ..runtime.ops import stack
    expected = [stack(list(shards)) for shards in zip(*[per_example(v) for v in vectors])]
    try:
        result = vmap(per_example)(stack(vectors))
    except RuntimeError as ex:
        raise GradcheckError(f"While computing batched gradients, got: {ex}\n\n"
                             f"{_FAILED_BATCHED_MSG.format(flag=flag)}") from ex
    for idx, (res, exp) in enumerate(zip(result, expected)):
        if not np.allclose(res._data, exp._data):
            where = f"output {out_i} and input {idx}" if out_i is not None else f"{what} {idx}"
            raise GradcheckError(f"For {where}:\n\n{_FAILED_BATCHED_MSG.format(flag=flag)}\n\n"
                                 f"Got:\n{res}\n\nExpected:\n{exp}")


def _test_batched_grad(output: Tensor, out_i: int, inputs: tuple, diff_idx: list, rng) -> None:
    """Batched VJPs of ``output`` (vmap over grad_outputs) against one VJP per grad_output."""
    from .functions import grad
    diff_inputs = [inputs[i] for i in diff_idx]

    def vjp(v):
        gs = grad([output], diff_inputs, [v], retain_graph=True, allow_unused=True)
        return tuple(g if g is not None else wrap(np.zeros_like(x._data)) for g, x in zip(gs, diff_inputs))
    vectors = [wrap(rng.standard_normal(output._data.shape).astype(output._data.dtype)) for _ in range(2)]
    _check_batched(vjp, vectors, "check_batched_grad", "input", out_i)


def _test_batched_forward_grad(func, inputs: tuple, diff_idx: list, rng) -> None:
    """Batched JVPs (vmap over tangents) against one JVP per tangent, input by input."""
    for i in diff_idx:
        def jvp(tangent, i=i):
            with fwAD.dual_level():
                args = [x.detach() if isinstance(x, Tensor) else x for x in inputs]
                args[i] = fwAD.make_dual(inputs[i].detach(), tangent)
                res = []
                for o in _tensor_outputs(func(*args)):
                    t = fwAD.unpack_dual(o).tangent
                    res.append(t if t is not None else wrap(np.zeros(o._data.shape, dtype=o._data.dtype)))
                return tuple(res)
        vectors = [wrap(rng.standard_normal(inputs[i]._data.shape).astype(inputs[i]._data.dtype)) for _ in range(2)]
        _check_batched(jvp, vectors, "check_batched_forward_grad", "output", None)


def gradcheck(func: Callable[..., TensorOrTensors], inputs: TensorOrTensors, *, eps: float = 1e-6,
              atol: float = 1e-5, rtol: float = 1e-3, raise_exception: bool = True, nondet_tol: float = 0.0,
              check_undefined_grad: bool = True, check_grad_dtypes: bool = False, check_batched_grad: bool = False,
              check_batched_forward_grad: bool = False, check_forward_ad: bool = False,
              check_backward_ad: bool = True, fast_mode: bool = False, masked: Optional[bool] = None) -> bool:
    """Compare ``func``'s analytical gradients w.r.t. the ``inputs`` that require grad with central
    finite differences (``eps``), elementwise within ``atol + rtol * |numerical|``, as PyTorch's.

    ``check_backward_ad``/``check_forward_ad`` select the backward- and forward-mode Jacobians
    checked; backward mode is computed twice and must agree within ``nondet_tol``.
    ``check_grad_dtypes`` also requires gradients of the inputs' dtypes; ``check_undefined_grad``
    checks that undefined output gradients act as zeros; ``check_batched_grad`` and
    ``check_batched_forward_grad`` compare vmapped VJPs/JVPs with a loop. ``fast_mode`` runs the
    exact (slow) check, whose verdict is the one the fast mode estimates; ``masked`` only concerns
    sparse tensors, which fusegrad has not. Returns True, or on a failed check raises
    :class:`GradcheckError` (returns False when ``raise_exception`` is False)."""
    if not (check_forward_ad or check_backward_ad):
        raise AssertionError("Expected at least one of check_forward_ad or check_backward_ad to be True")
    if check_batched_grad and not check_backward_ad:
        raise AssertionError("Setting check_batched_grad=True requires check_backward_ad to be True")
    if check_batched_forward_grad and not check_forward_ad:
        raise AssertionError("Setting check_batched_forward_grad=True requires check_forward_ad to be True")
    inputs = _as_tuple(inputs)
    diff_idx = _check_inputs(inputs)
    try:
        func_out = func(*inputs)
        _check_jacobians(func, inputs, diff_idx, func_out, eps, atol, rtol, nondet_tol, check_grad_dtypes,
                         check_forward_ad, check_backward_ad)
        outputs = [o for o in _tensor_outputs(func_out) if o._rg]
        if check_forward_ad and check_undefined_grad and outputs:
            _test_undefined_forward_mode(func, inputs, diff_idx)
        rng = np.random.default_rng(0)
        if check_batched_forward_grad:
            _test_batched_forward_grad(func, inputs, diff_idx, rng)
        if check_backward_ad:
            if check_batched_grad:
                for o_i, o in enumerate(outputs):
                    _test_batched_grad(o, o_i, inputs, diff_idx, rng)
            _test_backward_mul_by_grad_output(outputs, inputs, diff_idx)
            if check_undefined_grad:
                _test_undefined_backward_mode(func, inputs, diff_idx, len(outputs))
    except GradcheckError:
        if raise_exception:
            raise
        return False
    return True


def gradgradcheck(func: Callable[..., TensorOrTensors], inputs: TensorOrTensors,
                  grad_outputs: Optional[Union[Tensor, Sequence[Optional[Tensor]]]] = None, *, eps: float = 1e-6,
                  atol: float = 1e-5, rtol: float = 1e-3, gen_non_contig_grad_outputs: bool = False,
                  raise_exception: bool = True, nondet_tol: float = 0.0, check_undefined_grad: bool = True,
                  check_grad_dtypes: bool = False, check_batched_grad: bool = False,
                  check_fwd_over_rev: bool = False, check_rev_over_rev: bool = True, fast_mode: bool = False,
                  masked: bool = False) -> bool:
    """:func:`gradcheck` of ``func``'s first derivative, as a function of the inputs and of the
    ``grad_outputs`` that require grad (random in [-1, 1) by default), so checking second derivatives:
    ``check_rev_over_rev`` by backward mode, ``check_fwd_over_rev`` by forward mode over the backward.
    ``gen_non_contig_grad_outputs`` only concerns memory layout, which does not change the check."""
    if not (check_fwd_over_rev or check_rev_over_rev):
        raise AssertionError("Expected at least one of check_fwd_over_rev or check_rev_over_rev to be True")
    if check_undefined_grad and not check_rev_over_rev:
        raise AssertionError("Setting check_undefined_grad=True requires check_rev_over_rev to be True")
    if check_batched_grad and not check_rev_over_rev:
        raise AssertionError("Setting check_batched_grad=True requires check_rev_over_rev to be True")
    from .functions import grad
    inputs = _as_tuple(inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        outs = [o for o in _tensor_outputs(func(*inputs)) if o._rg]
        grad_outputs = tuple(wrap(rng.uniform(-1, 1, o._data.shape).astype(o._data.dtype)).requires_grad_(True)
                             for o in outs)
    else:
        grad_outputs = _as_tuple(grad_outputs)
    n_in = len(inputs)
    diff_idx = [i for i, x in enumerate(inputs + grad_outputs) if isinstance(x, Tensor) and x._rg]

    def first_derivative(*args):
        # gradcheck's forward mode passes detached duals: they must require grad again to be differentiated
        args = [x.requires_grad_() if i in diff_idx else x for i, x in enumerate(args)]
        xs, gos = args[:n_in], args[n_in:]
        with enable_grad():  # also when gradcheck evaluates it numerically under no_grad
            outs = [o for o in _tensor_outputs(func(*xs)) if o._rg]
            gs = grad(outs, [xs[i] for i in diff_idx if i < n_in], gos, create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)
    return gradcheck(first_derivative, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol, check_undefined_grad=check_undefined_grad,
                     check_grad_dtypes=check_grad_dtypes, check_batched_grad=check_batched_grad, fast_mode=fast_mode,
                     check_forward_ad=check_fwd_over_rev, check_backward_ad=check_rev_over_rev, masked=masked)
