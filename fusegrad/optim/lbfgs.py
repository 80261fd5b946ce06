"""L-BFGS with an optional strong-Wolfe line search (PyTorch's algorithm, after minFunc).

The flat vectors (gradient, direction, curvature pairs) are NumPy arrays of the
parameters' dtype, so the arithmetic rounds as PyTorch's float32 tensors do; the state
keeps them as tensors, so ``state_dict`` saves like PyTorch's."""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

import numpy as np

from ..runtime.grad_mode import enable_grad, no_grad
from ..runtime.tensor import Tensor, wrap
from .optimizer import Optimizer, ParamsT


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimizer of the cubic through two points with their slopes, clamped to
    ``bounds`` (the bracket when none)."""
    xmin_bound, xmax_bound = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square >= 0:
        d2 = np.sqrt(d2_square)
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


def _strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """A step ``t`` along ``d`` meeting the strong Wolfe conditions: bracketing, then
    zooming in by cubic interpolation. Returns (loss, flat grad, t, evaluations)."""
    d_norm = np.abs(d).max()
    g = g.copy()
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = 1
    gtd_new = g_new.dot(d)
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    bracket: List[Any] = []
    bracket_f: List[Any] = []
    bracket_g: List[Any] = []
    bracket_gtd: List[Any] = []
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new.copy(), gtd_new
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]

    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1])
        # a point too near the bracket's ends makes no progress: move it inside
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                t = max(bracket) - eps if abs(t - max(bracket)) < abs(t - min(bracket)) else min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            bracket[high_pos], bracket_f[high_pos] = t, f_new
            bracket_g[high_pos], bracket_gtd[high_pos] = g_new.copy(), gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                bracket[high_pos], bracket_f[high_pos] = bracket[low_pos], bracket_f[low_pos]
                bracket_g[high_pos], bracket_gtd[high_pos] = bracket_g[low_pos], bracket_gtd[low_pos]
            bracket[low_pos], bracket_f[low_pos] = t, f_new
            bracket_g[low_pos], bracket_gtd[low_pos] = g_new.copy(), gtd_new
    return bracket_f[low_pos], bracket_g[low_pos], bracket[low_pos], ls_func_evals


def _arr(x: Any) -> Any:
    """A state value as NumPy (tensors and lists of them), other values as they are."""
    if isinstance(x, Tensor):
        return x._concrete("LBFGS")
    if isinstance(x, list):
        return [_arr(v) for v in x]
    return x


def _tensor(x: Any) -> Any:
    if isinstance(x, (np.ndarray, np.generic)):
        return wrap(np.array(x))
    if isinstance(x, list):
        return [_tensor(v) for v in x]
    return x


def _real_size(p: Tensor) -> int:
    return p.numel() * (2 if p.is_complex() else 1)


def _parts(a: np.ndarray) -> np.ndarray:
    """``a`` flat, a complex array as its (real, imaginary) pairs."""
    a = np.ascontiguousarray(a).reshape(-1)
    return a.view(a.real.dtype) if a.dtype.kind == "c" else a


class LBFGS(Optimizer):
    """PyTorch's L-BFGS: ``step(closure)`` runs up to ``max_iter`` iterations (and
    ``max_eval`` closure calls), each a two-loop recursion over the last ``history_size``
    curvature pairs, then a fixed step ``lr`` or, with ``line_search_fn="strong_wolfe"``,
    a strong-Wolfe line search. One parameter group only. A complex parameter is optimized as
    pairs of real numbers, as PyTorch's."""

    supports_complex = True

    def __init__(self, params: ParamsT, lr: float = 1, max_iter: int = 20, max_eval: Optional[int] = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: Optional[str] = None) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= float(lr):
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change, history_size=history_size,
                                      line_search_fn=line_search_fn))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def _gather_flat_grad(self) -> np.ndarray:
        """The gradients in one real vector (a complex one as its parts, as PyTorch's)."""
        return np.concatenate([np.zeros(_real_size(p), p.dtype.to_real().np) if p.grad is None
                               else _parts(p.grad._concrete("LBFGS")) for p in self._params])

    def _add_grad(self, step_size, update: np.ndarray) -> None:
        offset = 0
        for p in self._params:
            n = _real_size(p)
            chunk = update[offset:offset + n]
            if p.is_complex():
                chunk = np.ascontiguousarray(chunk).view(p._data.dtype)
            chunk = chunk.reshape(tuple(p.shape))
            p.add_(wrap(np.asarray(chunk * np.asarray(step_size, dtype=chunk.dtype), dtype=chunk.dtype)))
            offset += n

    def _clone_param(self) -> List[np.ndarray]:
        return [np.array(p._concrete("LBFGS"), copy=True) for p in self._params]

    def _set_param(self, params_data: List[np.ndarray]) -> None:
        for p, data in zip(self._params, params_data):
            p.copy_(wrap(data))

    def _directional_evaluate(self, closure, x, t, d) -> Tuple[float, np.ndarray]:
        self._add_grad(t, d)
        loss = float(closure())
        flat_grad = self._gather_flat_grad()
        self._set_param(x)
        return loss, flat_grad

    @no_grad()
    def step(self, closure: Callable[[], Any]) -> Any:  # type: ignore[override]
        """One optimization step; ``closure`` clears the gradients, computes the loss,
        calls ``backward()`` and returns the loss."""
        closure = enable_grad()(closure)
        group = self.param_groups[0]
        lr = float(group["lr"])
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]

        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if np.abs(flat_grad).max() <= tolerance_grad:
            return orig_loss

        d, t = _arr(state.get("d")), _arr(state.get("t"))
        old_dirs, old_stps, ro = _arr(state.get("old_dirs")), _arr(state.get("old_stps")), _arr(state.get("ro"))
        H_diag, prev_flat_grad = _arr(state.get("H_diag")), _arr(state.get("prev_flat_grad"))
        prev_loss = state.get("prev_loss")
        al = _arr(state.get("al"))
        one = flat_grad.dtype.type(1)
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = y.dot(s)
                if ys > 1e-10:  # update the memory, dropping the oldest pair when full
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(one / ys)
                    H_diag = ys / y.dot(y)
                num_old = len(old_dirs)
                if al is None:
                    al = [None] * history_size
                q = -flat_grad
                for i in range(num_old - 1, -1, -1):
                    al[i] = old_stps[i].dot(q) * ro[i]
                    q = q - old_dirs[i] * al[i]
                d = r = q * H_diag
                for i in range(num_old):
                    be_i = old_dirs[i].dot(r) * ro[i]
                    r += old_stps[i] * (al[i] - be_i)
            prev_flat_grad = flat_grad.copy()
            prev_loss = loss
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / np.abs(flat_grad).sum()) * lr
            else:
                t = lr
            gtd = flat_grad.dot(d)
            if gtd > -tolerance_change:
                break
            ls_func_evals = 0
            if line_search_fn is not None:
                if line_search_fn != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                x_init = self._clone_param()
                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    lambda x, t, d: self._directional_evaluate(closure, x, t, d), x_init, t, d, loss, flat_grad,
                    gtd, max_ls=max_eval - current_evals)
                self._add_grad(t, d)
                opt_cond = np.abs(flat_grad).max() <= tolerance_grad
            else:
                self._add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:  # re-evaluate, except after the last iteration
                    loss = float(closure())
                    flat_grad = self._gather_flat_grad()
                    opt_cond = np.abs(flat_grad).max() <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals
            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if np.abs(d * t).max() <= tolerance_change or abs(loss - prev_loss) < tolerance_change:
                break

        state.update(d=_tensor(d), t=t, old_dirs=_tensor(old_dirs), old_stps=_tensor(old_stps), ro=_tensor(ro),
                     H_diag=_tensor(H_diag), prev_flat_grad=_tensor(prev_flat_grad), prev_loss=prev_loss)
        if al is not None:
            state["al"] = _tensor(al)
        return orig_loss
