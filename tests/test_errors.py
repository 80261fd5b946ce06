"""Bad input gets a clear exception (the type PyTorch raises, and a message naming what
is wrong), never a crash or a silent wrong answer."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import fusegrad as fg


def rg(*shape):
    return fg.randn(*shape, requires_grad=True)


# ---------------------------------------------------------------- shapes
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "maximum", "atan2", "pow"])
def test_binary_shape_mismatch_names_op_and_shapes(op):
    a, b = fg.ones(2, 3), fg.ones(4, 3)
    with pytest.raises(RuntimeError) as ei:
        getattr(fg, op)(a, b)
    msg = str(ei.value)
    assert op in msg or {"pow": "pow", "atan2": "atan2"}.get(op, op) in msg
    assert "[2, 3]" in msg and "[4, 3]" in msg


def test_operator_shape_mismatch():
    with pytest.raises(RuntimeError, match=r"\[3\].*\[4\]"):
        fg.ones(3) + fg.ones(4)
    with pytest.raises(RuntimeError, match=r"\[2, 3\].*\[3, 2\]"):
        fg.ones(2, 3) * fg.ones(3, 2)


@pytest.mark.parametrize("fn,sa,sb", [
    ("matmul", (2, 3), (4, 5)), ("mm", (2, 3), (4, 5)), ("bmm", (2, 2, 3), (2, 4, 5)),
    ("matmul", (3,), (4,)), ("matmul", (2, 3), (4,)), ("matmul", (5, 2, 3), (5, 4, 2)),
], ids=str)
def test_matmul_shape_mismatch_names_both_shapes(fn, sa, sb):
    with pytest.raises(RuntimeError) as ei:
        getattr(fg, fn)(fg.ones(*sa), fg.ones(*sb))
    msg = str(ei.value)
    nums = [int(n) for n in re.findall(r"\d+", msg)]
    assert sa[-1] in nums and sb[-2 if len(sb) > 1 else -1] in nums, msg


def test_matmul_operator_and_zero_dim():
    with pytest.raises(RuntimeError, match="2x3.*4x5|\\[2, 3\\].*\\[4, 5\\]"):
        fg.ones(2, 3) @ fg.ones(4, 5)
    with pytest.raises(RuntimeError, match="1D"):
        fg.matmul(fg.tensor(1.0), fg.ones(3))
    with pytest.raises(RuntimeError):
        fg.bmm(fg.ones(2, 3), fg.ones(3, 2))


@pytest.mark.parametrize("shape", [(5,), (4, 2), (-1, 5), (-1, -1), (2, -2)], ids=str)
def test_bad_reshape_sizes(shape):
    x = fg.ones(2, 3)
    with pytest.raises(RuntimeError):
        x.reshape(*shape)
    with pytest.raises(RuntimeError):
        x.view(*shape)


@pytest.mark.parametrize("what", ["cat", "stack"])
def test_cat_stack_mismatched_shapes(what):
    with pytest.raises(RuntimeError, match=r"[Ss]izes|size|shape"):
        getattr(fg, what)([fg.ones(2, 3), fg.ones(2, 4)], 0)
    with pytest.raises((RuntimeError, ValueError)):
        getattr(fg, what)([], 0)


def test_cat_mismatched_rank():
    with pytest.raises(RuntimeError):
        fg.cat([fg.ones(2, 3), fg.ones(3)])


def test_expand_bad_size():
    with pytest.raises(RuntimeError, match="expanded size"):
        fg.ones(2, 3).expand(4, 3)


# ---------------------------------------------------------------- dims
@pytest.mark.parametrize("call", [
    lambda x: x.sum(3), lambda x: x.sum(-4), lambda x: x.mean(dim=(0, 5)), lambda x: x.softmax(3),
    lambda x: x.transpose(0, 3), lambda x: x.permute(0, 1, 3), lambda x: x.unsqueeze(4), lambda x: x.unsqueeze(-5),
    lambda x: x.squeeze(3), lambda x: fg.cat([x, x], 3), lambda x: fg.stack([x, x], 4), lambda x: x.max(3),
    lambda x: x.argmax(-4), lambda x: x.cumsum(3), lambda x: x.flatten(0, 3), lambda x: x.select(3, 0),
    lambda x: x.narrow(-4, 0, 1), lambda x: x.gather(3, fg.zeros(2, 3, 4, dtype=fg.int64)),
    lambda x: x.index_select(3, fg.tensor([0])), lambda x: x.split(1, 3), lambda x: x.var(3), lambda x: x.logsumexp(3),
], ids=lambda f: "")
def test_dim_out_of_range(call):
    x = fg.ones(2, 3, 4)
    with pytest.raises(IndexError, match="[Dd]imension out of range"):
        call(x)


# ---------------------------------------------------------------- indexing
@pytest.mark.parametrize("key", [5, -6, (0, 4), (slice(None), 3), (0, 0, 0), (None, 0, 9)], ids=str)
def test_basic_index_out_of_range(key):
    x = fg.ones(5, 3)
    with pytest.raises(IndexError):
        x[key]
    with pytest.raises(IndexError):
        x[key] = 1.0


@pytest.mark.parametrize("key", [lambda: fg.tensor([0, 5]), lambda: [0, -6], lambda: fg.tensor([[1], [7]]),
                                 lambda: (slice(None), fg.tensor([3])), lambda: fg.tensor([True, False]),
                                 lambda: (fg.tensor([0]), fg.tensor([3]))], ids=str)
def test_advanced_index_out_of_range(key):
    x = fg.ones(5, 3)
    with pytest.raises(IndexError):
        x[key()]
    with pytest.raises(IndexError):
        x[key()] = 1.0


def test_index_with_float_tensor_raises():
    with pytest.raises(IndexError):
        fg.ones(3)[fg.tensor([0.0, 1.0])]


def test_gather_scatter_index_select_out_of_range():
    x = rg(3, 4)  # (the exception types PyTorch raises: RuntimeError for gather and scatter)
    with pytest.raises(RuntimeError, match="out of bounds"):
        x.gather(1, fg.tensor([[0, 4]]))
    with pytest.raises(RuntimeError):
        x.gather(1, fg.tensor([[-5]]))
    with pytest.raises(RuntimeError):
        fg.zeros(3, 4).scatter_add(0, fg.tensor([[3]]), fg.ones(1, 1))
    with pytest.raises(IndexError):
        x.index_select(0, fg.tensor([3]))
    with pytest.raises(RuntimeError):
        x.gather(1, fg.tensor([0, 1]))  # wrong rank
    with pytest.raises(RuntimeError):
        x.gather(1, fg.tensor([[0.0]]))  # float index


def test_embedding_like_lookup_out_of_range():
    w = rg(4, 2)
    with pytest.raises(IndexError):
        w[fg.tensor([[0, 1], [2, 4]])]


# ---------------------------------------------------------------- autograd misuse
def test_backward_on_nonscalar_without_gradient():
    y = rg(3) * 2
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        y.backward()
    with pytest.raises(RuntimeError, match="scalar"):
        fg.autograd.grad(y, [y])


def test_backward_gradient_shape_mismatch():
    y = rg(3) * 2
    with pytest.raises(RuntimeError, match="[Mm]ismatch in shape"):
        y.backward(fg.ones(4))


def test_backward_on_tensor_without_grad():
    with pytest.raises(RuntimeError, match="does not require grad"):
        fg.ones(2).sum().backward()


@pytest.mark.parametrize("dt", ["int64", "int32", "bool", "uint8"])
def test_requires_grad_on_integer_tensor(dt):
    d = getattr(fg, dt)
    with pytest.raises(RuntimeError, match="floating point"):
        fg.zeros(2, dtype=d).requires_grad_()
    with pytest.raises(RuntimeError, match="floating point"):
        fg.tensor([1, 2], dtype=d, requires_grad=True)
    with pytest.raises(RuntimeError, match="floating point"):
        fg.ones(2, dtype=d, requires_grad=True)
    x = fg.zeros(2, dtype=d)
    with pytest.raises(RuntimeError, match="floating point"):
        x.requires_grad = True


def test_second_backward_through_freed_graph():
    x = rg(3)
    y = (x.exp() * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.backward()


def test_inplace_on_leaf_requiring_grad():
    x = rg(3)
    for f in (lambda: x.add_(1), lambda: x.mul_(2), lambda: x.zero_(), lambda: x.fill_(1.0),
              lambda: x.copy_(fg.ones(3)), lambda: x.clamp_(0, 1), lambda: x.relu_(), lambda: x.__iadd__(1)):
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
            f()
    v = x[1:]
    with pytest.raises(RuntimeError, match="leaf"):
        v.mul_(2)


def test_modified_saved_tensor():
    x = rg(3)
    y = x.sigmoid()  # saves its output
    y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*version 1; expected version 0"):
        y.sum().backward()


def test_requires_grad_false_on_nonleaf():
    y = rg(2) * 2
    with pytest.raises(RuntimeError, match="leaf"):
        y.requires_grad_(False)


def test_numpy_on_tensor_requiring_grad():
    with pytest.raises(RuntimeError, match="detach"):
        rg(2).numpy()


def test_item_on_multi_element():
    with pytest.raises(RuntimeError, match="2 elements cannot be converted to Scalar"):
        fg.ones(2).item()


def test_python_numbers_of_multi_element_tensors_raise_value_error_as_torch():
    """float(), int() and complex() raise ValueError (an ``except ValueError`` catches them in
    PyTorch), a list index of a vector TypeError; item() keeps its RuntimeError."""
    for conv in (float, int, complex):
        for t in (fg.ones(2), fg.ones(0)):
            with pytest.raises(ValueError, match="only one element tensors can be converted to Python scalars"):
                conv(t)
    with pytest.raises(TypeError, match="only integer tensors of a single element"):
        [1, 2, 3][fg.tensor([1, 2])]
    assert float(fg.ones(1, 1)) == 1.0 and [1, 2, 3][fg.tensor([2])] == 3


def test_tensor_of_strings_and_unknown_objects_raises_as_torch():
    """A string first in a list reads as one more dimension (ValueError), elsewhere an invalid
    data type (TypeError); None or another object: RuntimeError."""
    cases = [("the", TypeError), (["the", "cat"], ValueError), ([["a"]], ValueError), ([1, "a"], TypeError),
             ([None], RuntimeError), (object(), RuntimeError), ({1: 2}, RuntimeError)]
    for data, kind in cases:
        with pytest.raises(kind):
            fg.tensor(data)


def test_autograd_grad_on_input_not_requiring_grad():
    x = rg(2)
    with pytest.raises(RuntimeError, match="does not require grad"):
        fg.autograd.grad((x * 2).sum(), [fg.ones(2)])


# ---------------------------------------------------------------- factories and dtypes
def test_bad_factory_args():
    with pytest.raises(RuntimeError):
        fg.zeros(-1)
    with pytest.raises(TypeError):
        fg.tensor([1, "a"])
    with pytest.raises((ValueError, RuntimeError)):
        fg.tensor([[1, 2], [3]])
    with pytest.raises(TypeError):
        fg.set_default_dtype(fg.int32)


def test_bool_subtraction_and_neg_rejected_like_torch():
    b = fg.tensor([True, False])
    with pytest.raises(RuntimeError, match="bool"):
        b - b
    with pytest.raises(RuntimeError, match="bool"):
        -b


def test_error_is_not_a_crash_for_empty_reductions():
    with pytest.raises((RuntimeError, IndexError)):
        fg.ones(0, 3).max()
    with pytest.raises((RuntimeError, IndexError)):
        fg.ones(0, 3).argmax(0)
    assert fg.ones(0, 3).sum().item() == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.isnan(fg.ones(0, 3).mean().item())


def test_view_of_non_contiguous_raises_like_torch():
    x = fg.arange(6.0).reshape(2, 3).t()
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        x.view(6)
    assert tuple(x.view(3, 2, 1).shape) == (3, 2, 1)  # splitting a dimension is still a view
    assert tuple(x.reshape(6).shape) == (6,)  # reshape copies instead


def test_traced_tensor_stored_outside_a_compiled_function_fails_clearly():
    """A tensor traced inside a compiled (or transformed) function and kept in a list
    outside it names the mistake when used later, instead of a NumPy error about a Var."""
    class Outside:  # (a class's own list: a list the function names is a side effect, run at every call)
        kept: list = []
    kept = Outside.kept

    def f(x):
        y = x * 2
        Outside.kept.append(y)
        return y + 1
    for wrapped in (fg.compile(f), fg.func.grad(lambda x: f(x).sum())):
        kept.clear()
        wrapped(fg.tensor([1.0, 2.0]))
        for use in (lambda: kept[0] + 1, lambda: fg.exp(kept[0]), lambda: kept[0].detach().numpy()):
            with pytest.raises(RuntimeError, match="used after the trace ended .* return it instead"):
                use()


def test_empty_reductions_raise_torchs_exception_types_and_grad_fn_names():
    """The exception types torch raises for empty reductions (code catches them by type), and
    torch's grad_fn names of split, chunk, unbind, repeat, norm and 1/x."""
    torch = pytest.importorskip("torch")

    def run(lib):
        out = []
        for f in (lambda: lib.zeros(0).max(), lambda: lib.zeros(0).argmax(), lambda: lib.zeros(0, 3).amax(1),
                  lambda: lib.zeros(0, 3).max(0)):
            try:
                out.append(tuple(f().shape) if not isinstance(f(), tuple) else "tuple")
            except (RuntimeError, IndexError) as e:
                out.append(type(e).__name__)
        x = lib.ones(4, 3, requires_grad=True)
        out += [type(y.grad_fn).__name__ for y in (x.split(2)[0], x.chunk(2)[1], x.unbind(0)[0], x.repeat(2, 1),
                                                    x.norm(), x.norm(dim=0), 1 / x)]
        return out

    assert run(fg) == run(torch)
