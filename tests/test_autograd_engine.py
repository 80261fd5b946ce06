"""Autograd engine semantics: ordering, retain/create_graph, hooks, retain_grad, version
counters, views, grad modes, autograd.grad/backward options, custom Functions, gradcheck,
anomaly detection and the func transforms (against torch.func where installed)."""
from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.autograd import Function


def t(*vals, rg=True, dt=fg.float64):
    return fg.tensor(list(vals) if len(vals) != 1 else vals[0], dtype=dt, requires_grad=rg)


# ---------------------------------------------------------------- ordering and sharing
def test_diamond_gradient_summed_once():
    x = t(2.0)
    calls = []
    a = x * 3
    b = a.exp()  # shared by two branches
    b.register_hook(lambda g: calls.append(g.item()))
    c = b * 2 + b.sin()
    c.backward()
    bv = np.exp(6.0)
    assert len(calls) == 1  # the shared node ran once, with the summed gradient
    np.testing.assert_allclose(calls[0], 2 + np.cos(bv))
    np.testing.assert_allclose(x.grad.item(), (2 + np.cos(bv)) * bv * 3)


def test_deep_chain_and_wide_fanout():
    x = t(1.0, 2.0)
    y = x
    for _ in range(500):
        y = y * 1.001
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.001 ** 500] * 2)
    z = t(1.0, 2.0)
    s = sum(z * i for i in range(50))
    s.sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), [sum(range(50))] * 2)


def test_grad_accumulates_across_backwards():
    x = t(1.0, 2.0)
    (x * x).sum().backward()
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [5.0, 7.0])
    x.grad = None
    (x * 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


def test_same_tensor_used_twice_in_one_op():
    x = t(3.0)
    (x * x).backward()
    assert x.grad.item() == 6.0


# ---------------------------------------------------------------- retain_graph / create_graph
def test_retain_graph():
    x = t(1.0, 2.0)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    g1 = x.grad.clone()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * g1.numpy())
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_autograd_grad_frees_graph():
    x = t(1.0, 2.0)
    y = (x.sin() * x).sum()
    fg.autograd.grad(y, x)
    with pytest.raises(RuntimeError, match="second time"):
        fg.autograd.grad(y, x)


def test_create_graph_third_order():
    x = t(0.7)
    y = x ** 4 + x.sin()
    (g1,) = fg.autograd.grad(y, x, create_graph=True)
    (g2,) = fg.autograd.grad(g1, x, create_graph=True)
    (g3,) = fg.autograd.grad(g2, x, create_graph=True)
    (g4,) = fg.autograd.grad(g3, x)
    v = 0.7
    np.testing.assert_allclose([g1.item(), g2.item(), g3.item(), g4.item()],
                               [4 * v ** 3 + np.cos(v), 12 * v ** 2 - np.sin(v), 24 * v - np.cos(v), 24 + np.sin(v)])


def test_backward_create_graph_grad_has_graph():
    x = t(1.5)
    y = x ** 3
    y.backward(create_graph=True)
    assert x.grad.requires_grad
    (gg,) = fg.autograd.grad(x.grad, x)
    assert gg.item() == pytest.approx(6 * 1.5)


# ---------------------------------------------------------------- hooks and retain_grad
def test_hooks_on_leaf_and_nonleaf_modify_observe_remove():
    x = t(1.0, 2.0)
    seen = []
    h1 = x.register_hook(lambda g: seen.append(("leaf", g.numpy().tolist())))
    y = x * 2
    h2 = y.register_hook(lambda g: g * 10)  # replaces the gradient flowing on
    y.sum().backward()
    assert seen == [("leaf", [20.0, 20.0])]
    np.testing.assert_allclose(x.grad.numpy(), [20.0, 20.0])
    h1.remove()
    h2.remove()
    x.grad = None
    (x * 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])
    assert len(seen) == 1


def test_leaf_hook_changes_accumulated_grad_and_order():
    x = t(1.0)
    order = []
    x.register_hook(lambda g: order.append(1) or g + 1)
    x.register_hook(lambda g: order.append(2) or g * 3)
    (x * 2).backward()
    assert order == [1, 2] and x.grad.item() == 9.0


def test_hook_on_tensor_not_requiring_grad_raises():
    with pytest.raises(RuntimeError):
        fg.ones(2).register_hook(lambda g: g)


def test_grad_with_no_inputs_raises_as_torch():
    x = fg.ones(2, requires_grad=True)
    for empty in ([], ()):
        with pytest.raises(RuntimeError, match="cannot be empty"):
            fg.autograd.grad((x * 2).sum(), empty)


@pytest.mark.torch
def test_post_accumulate_grad_hook_vs_torch():
    """The hook runs once per backward, after the leaf's .grad holds the new sum (also when
    the leaf is used twice), as torch's; non-leaves and removed hooks as torch."""
    import torch

    def run(lib):
        x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        seen = []
        h = x.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.tolist()))
        (x * x + x).sum().backward()
        (x * 3).sum().backward()
        h.remove()
        (x * 3).sum().backward()
        with pytest.raises(RuntimeError, match="non-leaf"):
            (x * 2).register_post_accumulate_grad_hook(lambda p: None)
        return seen, x.grad.tolist()

    assert run(fg) == run(torch)



def test_views_and_saved_values_as_pytorch_keeps_them():
    """``y * 3`` saves only 3 (y may change after it), ``y ** 2`` only y; ``diagonal`` of a
    contiguous tensor is a view; a view of an expanded tensor without overlap may be
    written; a 0-d mask indexes; a detached alias updated by a value that requires grad
    leaves its base's history alone; narrow/unflatten/movedim check their dims."""
    torch = pytest.importorskip("torch")

    def prog(lib):
        x = lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=lib.float64, requires_grad=True)
        y = x * 1
        z = y * 3
        y.add_(1)  # z's node reads 3, not y
        w = y ** 2
        w.add_(1)  # w's node reads y, not its result
        (z.sum() + w.sum()).backward()
        out = [x.grad * 1]
        x.grad = None
        a = x * 1
        a.diagonal().mul_(5)
        a.diagonal(1).add_(x[0, 0])
        e = x * 1
        e.expand(2, 2, 3)[1].mul_(2)
        (a * a).sum().backward()
        out += [a, e, x.grad * 1]
        x.grad = None
        y = x.sin() * 1
        d = y.detach()
        d.mul_(x.cos().mean() + 1.5)
        (y[:, ::2].sum() + d.sum()).backward()
        s = lib.tensor(0.5)
        out += [y, d, x.grad * 1, s[s > 0], s[s < 0], lib.nonzero(s)]
        return [o.detach().numpy() for o in out]

    for got, want in zip(prog(fg), prog(torch), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    x = fg.zeros(3, 5)
    for bad in (lambda: x.narrow(1, 4, 2), lambda: x.narrow(1, 6, 0), lambda: x.unflatten(2, (1, 5)),
                lambda: x.unflatten(1, (2, 2)), lambda: x.movedim(2, 0), lambda: x.expand(2, 3, 5).add_(1)):
        with pytest.raises((RuntimeError, IndexError)):
            bad()


def test_in_place_layout_changes_as_pytorch():
    """t_, transpose_, swapdims_, unsqueeze_, squeeze_, as_strided_: the tensor takes the new layout on
    the same memory (a view made before still sees writes); one that requires grad is
    refused, and a node that saved its values before raises at backward (its version is
    bumped) instead of reading them in the new layout; compiled code runs them eagerly."""
    torch = pytest.importorskip("torch")

    def prog(lib):
        z = lib.zeros(2, 3, dtype=lib.float64)
        row = z[0]
        z.transpose_(0, 1)
        row.add_(1)
        y = lib.arange(6.0, dtype=lib.float64).reshape(2, 3)
        y.t_()
        y.unsqueeze_(0)
        w = lib.zeros(1, 3, 1, dtype=lib.float64)
        w.squeeze_(2)
        w.swapdims_(0, 1)
        w.squeeze_()
        b = lib.arange(6.0, dtype=lib.float64)
        v = b[1:]
        v.as_strided_((2, 2), (1, 2), 1)
        v.mul_(10)
        return [z.numpy(), y.numpy(), np.array(w.shape), b.numpy(), v.numpy(), np.array(v.stride())]

    for got, want in zip(prog(fg), prog(torch), strict=True):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        fg.ones(2, 2, requires_grad=True).t_()
    with pytest.raises(RuntimeError, match="requires grad"):
        (fg.ones(2, 2, requires_grad=True) * 2).t_()
    x = fg.ones(2, 2, requires_grad=True)
    m = fg.tensor([[1.0, 2.0], [3.0, 4.0]])
    out = (x * m).sum()
    m.t_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()

    def f(x):
        h = x * 3
        with fg.no_grad():
            c = x * 1
            c.unsqueeze_(0)
        return (h * h).sum() + c.sum(), c.shape
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    out, shape = fg.compile(f)(x)
    out.backward()
    assert tuple(shape) == (1, 2)
    np.testing.assert_allclose(x.grad.numpy(), [18.0, 36.0])

def test_retain_grad():
    x = t(1.0, 2.0)
    y = x * 3
    y.retain_grad()
    assert y.retains_grad and not x.retains_grad
    z = (y * y).sum()
    z.backward()
    np.testing.assert_allclose(y.grad.numpy(), [6.0, 12.0])
    w = x * 2
    (w.sum()).backward()
    assert w.grad is None


def test_retain_grad_follows_in_place_updates_and_integer_index_views_write_through():
    """As in PyTorch: retain_grad's .grad is the gradient of the newest value after an in-place
    update of the tensor itself, through a view of it, or of its base (a hook registered
    before stays with the old value); ``y[0].mul_(5)`` updates y's memory."""
    torch = pytest.importorskip("torch")

    def prog(lib):
        x = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64, requires_grad=True)
        out = []
        for update in (lambda y: y.mul_(3), lambda y: y[0].mul_(5)):  # (y[0]: a 0-d view)
            y = x * 2
            y.retain_grad()
            update(y)
            (y * y).sum().backward()
            out += [y, y.grad, x.grad]
            x.grad = None
        y = x * 2
        v = y[1:]
        v.retain_grad()
        y.add_(1)
        (v * v).sum().backward()
        out += [v.grad, x.grad]
        x.grad = None
        y = x * 2
        seen = []
        y.register_hook(lambda g: seen.append(g * 1))
        y.retain_grad()
        y.exp_()
        y.sum().backward()
        out += [y.grad, x.grad, seen[0]]
        z = lib.tensor([1.0, 2.0, 3.0])
        z[1].add_(4)
        return [o.detach().numpy() for o in out] + [z.numpy()]

    for got, want in zip(prog(fg), prog(torch), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_grad_fn_node_hooks():
    x = t(1.0, 2.0)
    y = x.exp()
    got = {}
    y.grad_fn.register_hook(lambda gin, gout: got.update(h=(gin, gout)))
    y.sum().backward()
    gin, gout = got["h"]
    np.testing.assert_allclose(gin[0].numpy(), np.exp([1.0, 2.0]))
    z = t(1.0, 2.0).exp()
    z.grad_fn.register_hook(lambda gin, gout: (gin[0], gin[0]))  # PyTorch checks the count it returns
    with pytest.raises(RuntimeError, match="incorrect number of values"):
        z.sum().backward()


# ---------------------------------------------------------------- version counters and views
def test_modified_saved_tensor_raises():
    x = t(1.0, 2.0)
    y = x * 2
    z = y.exp()  # saves its output
    z.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()
    a = t(1.0, 2.0)
    b = a * 1
    c = b * b  # saves b
    b.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        c.sum().backward()


def test_inplace_on_leaf_requiring_grad_raises():
    x = t(1.0, 2.0)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x.add_(1)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x[0] = 3.0
    with fg.no_grad():
        x.add_(1)  # fine under no_grad
    np.testing.assert_allclose(x.detach().numpy(), [2.0, 3.0])


def test_inplace_ops_that_are_fine():
    x = t(1.0, 2.0)
    y = x * 2  # MulBackward saves x, not y
    y.add_(1)  # y not saved by anyone
    y.mul_(3)
    z = y.relu()
    z.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 6.0])
    a = t(1.0, -2.0)
    b = a + 0
    b.relu_()
    assert type(b.grad_fn).__name__ == "ReluBackward0"
    b.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [1.0, 0.0])


def test_zero_and_fill_of_a_tracked_tensor_ignore_its_values():
    """zero_() and fill_() on a tensor that requires grad give the fill even where it held
    inf or nan (not 0 * inf = nan), and pass no gradient back; a tensor fill passes its own
    gradient (PyTorch's values and gradients)."""
    a = fg.tensor([np.inf, np.nan, 1.0], requires_grad=True)
    z = a * 1
    z.zero_()
    f = a * 1
    f.fill_(3.0)
    assert type(z.grad_fn).__name__ == "ZeroBackward0" and type(f.grad_fn).__name__ == "FillBackward0"
    np.testing.assert_array_equal(z.detach().numpy(), [0, 0, 0])
    np.testing.assert_array_equal(f.detach().numpy(), [3, 3, 3])
    (z + f).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [0, 0, 0])
    v = fg.tensor(2.0, requires_grad=True)
    g = fg.zeros(3)
    g.fill_(v)
    (g * fg.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_array_equal(g.detach().numpy(), [2, 2, 2])
    assert v.grad.item() == 6.0


def test_inplace_through_view_updates_base_grad():
    x = t(1.0, 2.0, 3.0)
    y = x * 1
    v = y[1:]
    v.mul_(10)
    assert y._version == v._version and y._version > 0
    np.testing.assert_allclose(y.detach().numpy(), [1.0, 20.0, 30.0])
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 10.0, 10.0])


def test_views_follow_in_place_updates_of_their_base_and_siblings():
    """A view made before its base (or a sibling view) is updated in place gets its
    grad_fn made again on its next use, as PyTorch regenerates it: gradients flow through
    the update. y = x*1; a = y[:2], b = y[1:]; y.mul_(3); a.mul_(2) (a sibling of b):
    b = [6*x1, 3*x2], so d/dx of (b*b).sum() is [0, 72*x1, 18*x2] (torch's values)."""
    x = t(1.0, 2.0, 3.0)
    y = x * 1
    a, b = y[:2], y[1:]
    y.mul_(3)
    a.mul_(2)
    (b * b).sum().backward()
    np.testing.assert_allclose(b.detach().numpy(), [12.0, 9.0])
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 144.0, 54.0])


def test_views_share_version_counter():
    base = fg.zeros(3, 4)
    v1 = base[1]
    v2 = base.t()
    v3 = v2.reshape(12) if False else base.view(12)
    v0 = base._version
    v1.fill_(1.0)
    assert base._version == v1._version == v2._version == v3._version == v0 + 1
    assert v2[:, 1].tolist() == [1.0, 1.0, 1.0, 1.0]
    with fg.no_grad():
        base += 1
    assert v3._version == v0 + 2


def test_version_of_saved_input_via_view():
    x = t(1.0, 2.0)
    y = x * 1
    z = y.sin()  # saves y
    y[0] = 5.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


# ---------------------------------------------------------------- grad modes
def test_grad_modes_context_managers():
    x = t(1.0)
    with fg.no_grad():
        assert not fg.is_grad_enabled()
        y = x * 2
        with fg.enable_grad():
            z = x * 2
    assert not y.requires_grad and y.grad_fn is None and z.requires_grad
    with fg.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert fg.is_grad_enabled()
    fg.set_grad_enabled(False)
    assert not fg.is_grad_enabled()
    fg.set_grad_enabled(True)
    with fg.inference_mode():
        assert not (x * 2).requires_grad
    with fg.inference_mode(False):
        assert (x * 2).requires_grad


def test_grad_modes_as_decorators():
    x = t(1.0)

    @fg.no_grad()
    def f(a):
        return a * 2

    @fg.enable_grad()
    def g(a):
        return a * 2

    @fg.inference_mode()
    def h(a):
        return a * 2

    @fg.set_grad_enabled(False)
    def k(a):
        return a * 2

    assert not f(x).requires_grad and not h(x).requires_grad and not k(x).requires_grad
    with fg.no_grad():
        assert g(x).requires_grad
    assert fg.is_grad_enabled()
    # bare, without parentheses, as PyTorch allows
    bare = [fg.no_grad(lambda a: a * 2), fg.enable_grad(lambda a: a * 2), fg.inference_mode(lambda a: a * 2)]
    with fg.no_grad():
        assert [m(x).requires_grad for m in bare] == [False, True, False]
    assert fg.is_grad_enabled() and not fg.is_inference_mode_enabled()


def test_no_grad_exception_restores_mode():
    with pytest.raises(ValueError):
        with fg.no_grad():
            raise ValueError
    assert fg.is_grad_enabled()


# ---------------------------------------------------------------- autograd.grad and backward options
def test_autograd_grad_allow_unused_and_grad_outputs():
    x, y, u = t(1.0, 2.0), t(3.0, 4.0), t(5.0)
    out = x * y
    with pytest.raises(RuntimeError, match="not have been used"):
        fg.autograd.grad(out.sum(), [x, u], retain_graph=True)
    gx, gu = fg.autograd.grad(out.sum(), [x, u], allow_unused=True, retain_graph=True)
    assert gu is None
    np.testing.assert_allclose(gx.numpy(), [3.0, 4.0])
    gx, gy = fg.autograd.grad(out, [x, y], grad_outputs=fg.tensor([1.0, 10.0], dtype=fg.float64))
    np.testing.assert_allclose(gx.numpy(), [3.0, 40.0])
    np.testing.assert_allclose(gy.numpy(), [1.0, 20.0])
    assert x.grad is None  # grad() does not accumulate
    z = x * 2
    gz, = fg.autograd.grad([z.sum(), (z * z).sum()], [x])
    np.testing.assert_allclose(gz.numpy(), 2 + 8 * np.array([1.0, 2.0]))
    g, = fg.autograd.grad((x * 2).sum(), x, materialize_grads=True) if False else (None,)


def test_grad_wrt_nonleaf():
    x = t(1.0, 2.0)
    y = x * 2
    z = (y ** 2).sum()
    (gy,) = fg.autograd.grad(z, y)
    np.testing.assert_allclose(gy.numpy(), [4.0, 8.0])


def test_backward_inputs():
    x, y = t(1.0), t(2.0)
    z = x * y
    z.backward(inputs=[x])
    assert x.grad.item() == 2.0 and y.grad is None
    w = x * y
    fg.autograd.backward(w, inputs=[y])
    assert y.grad.item() == 1.0 and x.grad.item() == 2.0


def test_backward_gradient_argument():
    x = t(1.0, 2.0)
    (x * 3).backward(fg.tensor([1.0, 2.0], dtype=fg.float64))
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 6.0])


# ---------------------------------------------------------------- custom Function
class MulAdd(Function):
    @staticmethod
    def forward(ctx, a, b, k):
        ctx.save_for_backward(a, b)
        ctx.k = k
        return a * b + k, a - b

    @staticmethod
    def backward(ctx, g_prod, g_diff):
        a, b = ctx.saved_tensors
        ga = g_prod * b + g_diff if ctx.needs_input_grad[0] else None
        gb = g_prod * a - g_diff if ctx.needs_input_grad[1] else None
        return ga, gb, None


def test_custom_function_multiple_inputs_outputs():
    a, b = t(1.0, 2.0), t(3.0, 4.0)
    p, d = MulAdd.apply(a, b, 5.0)
    assert type(p.grad_fn).__name__ == "MulAddBackward"
    np.testing.assert_allclose(p.detach().numpy(), [8.0, 13.0])
    (p.sum() * 2 + d.sum()).backward()
    np.testing.assert_allclose(a.grad.numpy(), [7.0, 9.0])
    np.testing.assert_allclose(b.grad.numpy(), [1.0, 3.0])
    # only one output used: the other's gradient arrives as zeros
    a.grad = b.grad = None
    p, d = MulAdd.apply(a, b, 0.0)
    d.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [1.0, 1.0])


def test_custom_function_needs_input_grad():
    seen = {}

    class F(Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            seen["needs"] = tuple(ctx.needs_input_grad)
            return g, None

    a = t(1.0)
    b = t(2.0, rg=False)
    F.apply(a, b).backward()
    assert seen["needs"] == (True, False)


def test_custom_function_mark_non_differentiable():
    class SortIdx(Function):
        @staticmethod
        def forward(ctx, x):
            idx = fg.tensor(np.argsort(x.detach().numpy()))
            vals = x * 1
            ctx.mark_non_differentiable(idx)
            return vals, idx

        @staticmethod
        def backward(ctx, gv, gi):
            return gv

    x = t(3.0, 1.0)
    v, i = SortIdx.apply(x)
    assert v.requires_grad and not i.requires_grad
    v.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 1.0])


@pytest.mark.parametrize("materialize", [True, False])
def test_custom_function_materialize_grads(materialize):
    """An output that gets no gradient reaches backward as zeros, or as None after
    ``ctx.set_materialize_grads(False)`` (torch's result recorded for both)."""
    seen = {}

    class Two(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(materialize)
            return x.clone(), x.clone()

        @staticmethod
        def backward(ctx, g1, g2):
            seen["g2"] = None if g2 is None else g2.tolist()
            return g1

    x = t(1.0, 2.0)
    a, _ = Two.apply(x)
    a.sum().backward()
    assert seen["g2"] == ([0.0, 0.0] if materialize else None)
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 1.0])


def test_custom_function_double_backward_and_gradcheck():
    class Cube(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x ** 2

    x = t(0.5, -1.5)
    assert fg.autograd.gradcheck(Cube.apply, (x,))
    assert fg.autograd.gradgradcheck(Cube.apply, (x,))


def test_custom_function_saved_tensors_freed():
    x = t(1.0, 2.0)
    y = MulAdd.apply(x, x * 1, 0.0)[0].sum()
    y.backward()
    with pytest.raises(RuntimeError):
        y.backward()


# ---------------------------------------------------------------- gradcheck
def test_gradcheck_pass_and_fail():
    x = t(0.3, 0.7, 1.1)
    assert fg.autograd.gradcheck(lambda a: (a.sin() * a).sum(), (x,))
    assert fg.autograd.gradgradcheck(lambda a: a.exp() * a, (x,))

    class Wrong(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 3

    with pytest.raises(RuntimeError, match="Jacobian mismatch"):
        fg.autograd.gradcheck(Wrong.apply, (x,))
    assert fg.autograd.gradcheck(Wrong.apply, (x,), raise_exception=False) is False

    class WrongSecond(Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a ** 2

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return g * 2 * a.detach()  # detached: second derivative lost

    assert fg.autograd.gradcheck(WrongSecond.apply, (x,))
    assert fg.autograd.gradgradcheck(WrongSecond.apply, (x,), raise_exception=False) is False


# ---------------------------------------------------------------- anomaly detection
def test_detect_anomaly_names_forward_op():
    x = t(0.0, 1.0)
    with fg.autograd.detect_anomaly():
        y = x.sqrt()  # backward at 0: inf
        z = (y * 0).sum()  # inf * 0 = nan in backward of sqrt's input
        with pytest.raises(RuntimeError, match="SqrtBackward0") as ei, \
                pytest.warns(UserWarning, match="Error detected in SqrtBackward0") as w:
            z.backward()
    assert str(ei.value) == "Function 'SqrtBackward0' returned nan values in its 0th output."  # torch's text
    shown = [str(m.message) for m in w if "Error detected" in str(m.message)]
    assert "test_autograd_engine.py" in shown[0]  # the forward line, in the warning as in torch
    assert not fg.autograd.is_anomaly_enabled()
    # without anomaly mode the NaN just propagates
    x.grad = None
    (x.sqrt() * 0).sum().backward()
    assert np.isnan(x.grad.numpy()[0])


def test_set_detect_anomaly():
    fg.autograd.set_detect_anomaly(True)
    try:
        assert fg.autograd.is_anomaly_enabled()
    finally:
        fg.autograd.set_detect_anomaly(False)
    assert not fg.autograd.is_anomaly_enabled()


# ---------------------------------------------------------------- func transforms vs torch.func
torch = None


def _torch():
    return pytest.importorskip("torch")


def _fg_and_torch(arr):
    tch = _torch()
    return fg.tensor(arr), tch.tensor(arr)


def _close(a, b, tol=1e-6):
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y, tol)
        return
    if isinstance(a, dict):
        for k in a:
            _close(a[k], b[k], tol)
        return
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


def f_scalar(m):
    return lambda x: (m.sin(x) * x ** 2).sum()


def f_vec(m):
    return lambda x: m.tanh(x) * x.sum() + x.exp()


@pytest.mark.torch
def test_func_grad_family_vs_torch():
    tch = _torch()
    F, TF = fg.func, tch.func
    a = np.array([0.3, -0.8, 1.2])
    fx, tx = _fg_and_torch(a)
    _close(F.grad(f_scalar(fg))(fx), TF.grad(f_scalar(tch))(tx))
    _close(F.grad_and_value(f_scalar(fg))(fx), TF.grad_and_value(f_scalar(tch))(tx))
    _close(F.grad(F.grad(lambda x: (x ** 3).sum()))(fx) if False else F.grad(lambda x: F.grad(lambda y: (y ** 3).sum())(x).sum())(fx),
           TF.grad(lambda x: TF.grad(lambda y: (y ** 3).sum())(x).sum())(tx))
    _close(F.jacrev(f_vec(fg))(fx), TF.jacrev(f_vec(tch))(tx))
    _close(F.jacfwd(f_vec(fg))(fx), TF.jacfwd(f_vec(tch))(tx))
    _close(F.hessian(f_scalar(fg))(fx), TF.hessian(f_scalar(tch))(tx))
    _close(F.jacfwd(F.jacrev(f_scalar(fg)))(fx), TF.jacfwd(TF.jacrev(f_scalar(tch)))(tx))
    v = np.array([1.0, 2.0, -1.0])
    fo, fvjp = F.vjp(f_vec(fg), fx)
    to, tvjp = TF.vjp(f_vec(tch), tx)
    _close(fo, to)
    _close(fvjp(fg.tensor(v)), tvjp(tch.tensor(v)))
    _close(F.jvp(f_vec(fg), (fx,), (fg.tensor(v),)), TF.jvp(f_vec(tch), (tx,), (tch.tensor(v),)))


@pytest.mark.torch
def test_func_argnums_has_aux_pytrees_vs_torch():
    tch = _torch()
    F, TF = fg.func, tch.func
    a, b = np.array([0.5, 1.5]), np.array([[1.0, -2.0], [0.3, 0.4]])

    def g(m):
        def f(x, y):
            out = (m.matmul(y, x) * x).sum()
            return out, {"aux": out.detach() * 2}
        return f

    fa, ta = _fg_and_torch(a)
    fb, tb = _fg_and_torch(b)
    (fg_g, fg_aux) = F.grad(g(fg), argnums=(0, 1), has_aux=True)(fa, fb)
    (t_g, t_aux) = TF.grad(g(tch), argnums=(0, 1), has_aux=True)(ta, tb)
    _close(fg_g, t_g)
    _close(fg_aux, t_aux)

    def tree(m):
        return lambda p: (p["w"] * p["b"][0]).sum() + (p["b"][1] ** 2).sum()

    fp = {"w": fg.tensor(a), "b": (fg.tensor(a * 2), fg.tensor(a * 3))}
    tp = {"w": tch.tensor(a), "b": (tch.tensor(a * 2), tch.tensor(a * 3))}
    fgg, tgg = F.grad(tree(fg))(fp), TF.grad(tree(tch))(tp)
    _close(fgg["w"], tgg["w"])
    _close(list(fgg["b"]), list(tgg["b"]))
    _close(F.jacrev(lambda x, y: m_(fg)(x, y), argnums=1)(fa, fb), TF.jacrev(lambda x, y: m_(tch)(x, y), argnums=1)(ta, tb))


def m_(m):
    return lambda x, y: m.matmul(y, x).exp()


@pytest.mark.torch
def test_vmap_in_out_dims_vs_torch():
    tch = _torch()
    F, TF = fg.func, tch.func
    x = np.arange(12.0).reshape(3, 4) / 10
    y = np.arange(4.0) / 3
    fx, tx = _fg_and_torch(x)
    fy, ty = _fg_and_torch(y)
    dot = lambda m: (lambda a, b: (a * b).sum())  # noqa: E731
    _close(F.vmap(dot(fg))(fx, fx), TF.vmap(dot(tch))(tx, tx))
    _close(F.vmap(dot(fg), in_dims=(0, None))(fx, fy), TF.vmap(dot(tch), in_dims=(0, None))(tx, ty))
    _close(F.vmap(dot(fg), in_dims=(1, None))(fx[:3].t(), fy) if False else F.vmap(lambda a: a * 2, in_dims=1)(fx),
           TF.vmap(lambda a: a * 2, in_dims=1)(tx))
    _close(F.vmap(lambda a: a * 2, in_dims=1, out_dims=1)(fx), TF.vmap(lambda a: a * 2, in_dims=1, out_dims=1)(tx))
    _close(F.vmap(lambda a: (a.sum(), a * 2))(fx), TF.vmap(lambda a: (a.sum(), a * 2))(tx))
    # vmap(grad): per-example gradients
    _close(F.vmap(F.grad(lambda w, xi: (w * xi).sin().sum()), in_dims=(None, 0))(fy, fx),
           TF.vmap(TF.grad(lambda w, xi: (w * xi).sin().sum()), in_dims=(None, 0))(ty, tx))


@pytest.mark.torch
def test_func_on_tensors_requiring_grad_composes_with_backward():
    x = t(0.5, 1.0)
    g = fg.func.grad(lambda a: (a ** 3).sum())(x)
    g.sum().backward()  # d/dx sum(3x^2) = 6x
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 6.0])


def test_matmul_gradient_takes_its_operands_memory_order():
    """``x @ w.t()`` (Linear) gives w a C-ordered gradient, PyTorch's layout rule, computed as
    such rather than copied from a transposed product; ``a.t() @ b`` likewise gives a one.
    Values as PyTorch's."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((5, 4), (3, 4), (5, 3)))
    fx, fw, fb = (fg.tensor(v, requires_grad=True) for v in (x, w, b))
    tx, tw, tb = (torch.tensor(v, requires_grad=True) for v in (x, w, b))
    ((fx @ fw.t()) * fb).sum().backward()
    ((tx @ tw.t()) * tb).sum().backward()
    fa = fg.tensor(x, requires_grad=True)
    ta = torch.tensor(x, requires_grad=True)
    (fa.t() @ fb).pow(2).sum().backward()
    (ta.t() @ tb).pow(2).sum().backward()
    for f, t in ((fw, tw), (fx, tx), (fa, ta)):
        assert f.grad._data.flags.c_contiguous
        np.testing.assert_allclose(f.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)
    # the transposed product itself: the gradient reaching w.t() is w's transposed view
    seen = []
    wt = fw.detach().requires_grad_().t()
    wt.register_hook(lambda g: seen.append(g._data.flags.f_contiguous and not g._data.flags.c_contiguous))
    (fx.detach() @ wt).sum().backward()
    assert seen == [True]


def test_mark_dirty_returns_the_input_itself_with_its_history_continued():
    """A custom Function that updates its input in place and marks it dirty returns that
    very tensor, whose history now runs through the Function (the double-backward and
    extending-autograd tutorials' in-place Functions); a leaf that requires grad refuses."""
    torch = pytest.importorskip("torch")

    def run(m):
        class TripleInplace(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x.mul_(3)
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, g):
                return 3 * g
        a = m.tensor([1., 2.], requires_grad=True)
        b = a.clone()
        c = TripleInplace.apply(b)
        (b * b).sum().backward()
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad has been used in an in-place"):
            TripleInplace.apply(m.tensor([1.], requires_grad=True))
        return c is b, type(b.grad_fn).__name__, b.detach().numpy().tolist(), a.grad.numpy().tolist()
    assert run(fg) == run(torch)


def test_logspace_matches_pytorch():
    torch = pytest.importorskip("torch")
    for args, kw in (((0, 2, 3), {}), ((-1, 1, 4), {"base": 2}), ((0, 3, 4), {"dtype": "float64"}),
                     ((0, 2, 3), {"dtype": "int64"}), ((0, 1, 0), {})):
        k = {n: (getattr(fg, v) if n == "dtype" else v) for n, v in kw.items()}
        kt = {n: (getattr(torch, v) if n == "dtype" else v) for n, v in kw.items()}
        got, want = fg.logspace(*args, **k), torch.logspace(*args, **kt)
        assert got.dtype.name == str(want.dtype).split(".")[1]
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_node_prehook_and_multi_grad_hooks_match_torch():
    """grad_fn.register_prehook gets the tuple of output gradients and may replace it;
    autograd.graph.register_multi_grad_hook in modes "all" and "any", over backwards that
    reach all, some or none of its tensors, and after its handle is removed."""
    import torch

    def run(lib):
        seen = []
        a = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        b = lib.tensor([3.0, 4.0], dtype=lib.float64, requires_grad=True)
        y = a * a
        y.grad_fn.register_prehook(lambda go: seen.append(("pre", type(go).__name__, len(go))) or (go[0] * 2,))
        (y * 3).sum().backward()
        seen.append(("a.grad", a.grad.tolist()))
        h = lib.autograd.graph.register_multi_grad_hook(
            (a, b), lambda gs: seen.append(("all", [None if g is None else g.tolist() for g in gs])))
        lib.autograd.graph.register_multi_grad_hook((a, b), lambda g: seen.append(("any", g.tolist())), mode="any")
        (a * b).sum().backward()
        (a * 5).sum().backward()
        h.remove()
        (a * b).sum().backward()
        return seen

    assert run(fg) == run(torch)


def test_numpy_of_a_tensor_requiring_grad_under_no_grad():
    """As in torch: allowed with grad mode off (a custom Function's forward calls it on its
    inputs: the docs' NumpySort), refused with it on."""
    class NumpyExp(Function):
        @staticmethod
        def forward(ctx, x):
            y = fg.tensor(np.exp(x.numpy()))
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    x = fg.tensor([0.5, -1.0], dtype=fg.float64, requires_grad=True)
    NumpyExp.apply(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp([0.5, -1.0]), rtol=1e-15)
    with fg.no_grad():
        np.testing.assert_array_equal(x.numpy(), [0.5, -1.0])
    with pytest.raises(RuntimeError, match="requires grad"):
        x.numpy()


def test_grad_modes_on_generators_inference_flag_and_custom_gradient_shapes_match_torch():
    """@no_grad()/@inference_mode() on a generator hold inside its body (between yields
    too); is_inference_mode_enabled and autograd.grad_mode; a custom Function's gradient
    that broadcasts to its input is summed to it, one that does not is an error naming the
    Function (as torch's validate_outputs)."""
    import torch

    def run(lib):
        x = lib.ones(2, requires_grad=True)

        @lib.no_grad()
        def gen():
            for _ in range(2):
                yield [lib.is_grad_enabled(), (x * 2).requires_grad]

        @lib.inference_mode()
        def gen2():
            yield [lib.is_grad_enabled(), lib.is_inference_mode_enabled()]

        out = list(gen()) + list(gen2()) + [lib.is_grad_enabled(), lib.is_inference_mode_enabled()]
        with lib.autograd.grad_mode.inference_mode():
            out.append(lib.is_inference_mode_enabled())

        class Bcast(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.sum()

            @staticmethod
            def backward(ctx, g):
                return g * lib.ones(3, 1, 2)

        class Wrong(Bcast):
            @staticmethod
            def backward(ctx, g):
                return g * lib.ones(3)

        Bcast.apply(x).backward()
        out.append(x.grad.tolist())
        with pytest.raises(RuntimeError) as e:
            Wrong.apply(x).backward()
        return out + [str(e.value)]

    assert run(fg) == run(torch)


def test_backward_inputs_accumulate_into_a_non_leaf():
    import torch

    def run(lib):
        x = lib.ones(2, requires_grad=True)
        y = x * 2
        z = (y * y).sum()
        z.backward(inputs=[y], retain_graph=True)
        z.backward(inputs=[y, x])
        return [y.grad.tolist(), x.grad.tolist()]

    assert run(fg) == run(torch)


def test_hook_order_tensor_hooks_then_retain_grad_then_node_prehooks():
    """As PyTorch's autograd notes: a tensor's hooks run before its grad_fn's pre-hooks,
    whatever the registration order, and retain_grad stores the gradient between them."""
    import torch

    def run(lib):
        log = []
        x = lib.ones(2, requires_grad=True)
        y = x * 2
        y.register_hook(lambda g: log.append("tensor 1"))
        y.grad_fn.register_prehook(lambda go: (log.append("node pre"), (go[0] * 10,))[1])
        y.grad_fn.register_hook(lambda gi, go: log.append("node post"))
        y.retain_grad()
        y.register_hook(lambda g: (log.append("tensor 2"), g * 3)[1])
        y.sum().backward()
        return log, y.grad.tolist(), x.grad.tolist()

    assert run(fg) == run(torch)


def test_backward_inputs_of_a_non_leaf_that_retains_its_grad_counts_it_once():
    """backward(inputs=[h]) for a non-leaf h that called retain_grad(): its .grad got the
    gradient from the retain hook and again from inputs= (twice torch's); once and with a
    second backward, with and without retain_grad, against torch."""
    import torch
    got = []
    for lib in (fg, torch):
        out = []
        for retain in (True, False):
            w = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
            h = w * 2.0
            if retain:
                h.retain_grad()
            loss = (h * lib.tensor([1.0, 10.0, 100.0])).sum()
            loss.backward(inputs=[h], retain_graph=True)
            out.append(h.grad.tolist())
            loss.backward(inputs=[h])
            out += [h.grad.tolist(), w.grad]
        got.append(out)
    assert got[0] == got[1]


def test_slice_gradients_add_into_their_input_gradient_in_place(monkeypatch):
    """The gradients of slices (unbind, select, narrow, chunk, basic indexing with steps) are
    added into their input's gradient where the engine owns that sum, instead of each
    becoming a zero-embedded copy of the whole input (a sequence loop's backward was
    quadratic); values as PyTorch's, with another gradient reaching the input, hooks on the
    slices, half precision and retain_graph."""
    torch = pytest.importorskip("torch")
    from fusegrad.ir.prims import layout
    x_np = np.random.default_rng(0).standard_normal((6, 3, 4)).astype(np.float32)

    def run(m, dtype):
        x = m.tensor(x_np, dtype=dtype, requires_grad=True)
        steps = m.unbind(x * 2, 0)
        h = m.zeros(3, 4, dtype=dtype)
        for t in (0, 2, 5, 2):
            h = m.tanh(h + steps[t])
        y = x * 2
        extra = y[1:5, ::2].sum() + y.narrow(2, 1, 2).pow(2).sum() + sum(c.sum() for c in y.chunk(3, 1))
        rev = y[5]
        rev.register_hook(lambda g: g * 3)
        loss = h.sum() + extra + rev.sum() + y.select(1, 2).mean()
        loss.backward(retain_graph=True)
        first = x.grad.float().numpy().copy()
        loss.backward()
        return first, x.grad.float().numpy()

    calls = []
    real = layout.embed.impl
    monkeypatch.setattr(layout.embed, "impl", lambda *a, **k: calls.append(1) or real(*a, **k))
    for dtype in ("float32", "float16"):
        ours = run(fg, getattr(fg, dtype))
        theirs = run(torch, getattr(torch, dtype))
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b, rtol=1e-2 if dtype == "float16" else 1e-6, atol=1e-3)
    assert not calls  # no slice gradient was zero-embedded
