"""The public op namespace against PyTorch's: ops are declared once (runtime/exports.py),
and fusegrad exposes each as a function, a Tensor method and an in-place variant exactly
where PyTorch does."""
from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.runtime.exports import EXPORTS

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

# Public fusegrad functions that are not tensor ops and have no torch.X counterpart.
NOT_OPS = {"make_ir"}


def _torch_function(name: str) -> bool:
    o = getattr(torch, name, None)
    return callable(o) and not isinstance(o, (type, torch.dtype))


def _public(obj) -> set:
    return {n for n in dir(obj) if not n.startswith("_") and callable(getattr(obj, n))
            and not isinstance(getattr(obj, n), (type, fg.dtype))}


def test_function_and_method_where_torch_has_both():
    """Every op that PyTorch has as both torch.X and Tensor.X, and that fusegrad has in
    either form, is in fusegrad in both forms (Tensor.swapdims once lacked fusegrad.swapdims)."""
    both = {n for n in _public(torch.Tensor) if _torch_function(n)}
    fns, methods = _public(fg), _public(fg.Tensor)
    assert sorted((fns & both) - methods) == []
    assert sorted((methods & both) - fns) == []


def test_no_function_or_method_that_torch_lacks():
    assert sorted(n for n in _public(fg) - NOT_OPS if not _torch_function(n)) == []
    assert sorted(n for n in _public(fg.Tensor) if not hasattr(torch.Tensor, n)) == []


def _declared(f):
    """The op under runtime/keywords.py's adapter, if it has one."""
    return f.__wrapped__ if getattr(f, "torch_keywords", False) else f


@pytest.mark.parametrize("name", sorted(EXPORTS))
def test_declaration_matches_torch_and_namespace(name):
    ex = EXPORTS[name]
    assert ex.function == _torch_function(name), f"fusegrad.{name}: declared function={ex.function}"
    # (where's method form takes its operands in another order: methods.py binds it)
    assert hasattr(fg.Tensor, name) == hasattr(torch.Tensor, name), f"Tensor.{name}: declared method={ex.method}"
    # the declaration is what is exported (wrapped, where needed, for PyTorch's keyword names)
    assert (_declared(getattr(fg, name, None)) is ex.fn) == ex.function
    if ex.method:
        assert _declared(getattr(fg.Tensor, name)) is ex.fn
    if ex.inplace:
        assert hasattr(torch.Tensor, name + "_") and callable(getattr(fg.Tensor, name + "_"))
        assert (ex.inplace == "both") == _torch_function(name + "_") == hasattr(fg, name + "_")


def test_new_spellings_match_torch():
    a = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    np.testing.assert_array_equal(fg.swapdims(fg.tensor(a), 0, 2).numpy(),
                                  torch.swapdims(torch.tensor(a), 0, 2).numpy())
    fx, tx = fg.tensor(a), torch.tensor(a)
    fg.exp_(fx)
    torch.exp_(tx)
    np.testing.assert_allclose(fx.numpy(), tx.numpy(), rtol=1e-6)
    assert fg.tensor(-a).absolute().equal(fg.tensor(np.abs(a)))
    fx = fg.tensor(a, requires_grad=True)
    assert not fg.detach(fx * 2).requires_grad
    z = fg.zeros(3)
    fg.index_put_(z, (fg.tensor([0, 2]),), fg.tensor([1.0, 5.0]))
    assert z.tolist() == [1.0, 0.0, 5.0]
