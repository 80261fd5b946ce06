"""A compiled backward run in stages (runtime.staged_backward, used by DistributedDataParallel
for its gradient buckets): the same gradients as eager autograd, each group's gradients
accumulated (and their hooks run) before the stages of later groups compute anything."""
from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
from fusegrad import nn
from fusegrad.ir.graph import Graph
from fusegrad.passes.stages import split_outputs


class Net(nn.Module):
    """Not a Sequential: a residual path and a skip layer that reads the input."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c, self.skip = nn.Linear(5, 8), nn.Linear(8, 8), nn.Linear(8, 3), nn.Linear(5, 3)

    def forward(self, x):
        h = self.a(x).tanh()
        return self.c(self.b(h).relu() + h) + self.skip(x)


def test_staged_backward_matches_eager_and_hands_over_groups_in_order():
    fg.manual_seed(0)
    m, ref = Net().double(), Net().double()
    ref.load_state_dict(m.state_dict())
    cm = fg.compile(m)
    groups = [[m.c.weight, m.c.bias, m.skip.weight, m.skip.bias], [m.b.weight, m.b.bias], [m.a.weight, m.a.bias]]
    cm._set_gradient_groups(groups)
    seen = []  # per hook: (its group, whether the last group's gradients were computed yet)
    for k, g in enumerate(groups):
        for p in g:
            p.register_post_accumulate_grad_hook(
                lambda p, k=k: seen.append((k, all(q.grad is not None for q in groups[-1]))))
    x = fg.randn(4, 5, dtype=fg.float64, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    for _ in range(2):  # the second call reuses the compiled stages
        seen.clear()
        for p in list(m.parameters()) + list(ref.parameters()) + [x, x2]:
            p.grad = None
        (cm(x) ** 2).sum().backward()
        (ref(x2) ** 2).sum().backward()
        for p, q in zip(m.parameters(), ref.parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), rtol=1e-12, atol=1e-14)  # in no group
        assert [k for k, _ in seen] == [0, 0, 0, 0, 1, 1, 2, 2], seen
        assert not any(done for k, done in seen if k < 2), seen  # earlier groups went first
    assert cm.cache_info()["compiles"] == 1 and type(cm(x).grad_fn).__name__ == "CompiledFunctionBackward"

    # create_graph runs the backward whole (on tensors), then hands each stage its gradients
    gx = fg.autograd.grad((cm(x) ** 2).sum(), [x, m.a.weight], create_graph=True)
    rx = fg.autograd.grad((ref(x2) ** 2).sum(), [x2, ref.a.weight], create_graph=True)
    for a, b in zip(gx, rx):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-14)
    (gx[0] ** 2).sum().backward()  # differentiable: a second derivative exists
    assert m.a.weight.grad is not None

    # retain_graph: a second backward through the same stages accumulates again
    for p in m.parameters():
        p.grad = None
    y = (cm(x) ** 2).sum()
    y.backward(retain_graph=True)
    first = m.a.weight.grad.numpy().copy()
    y.backward()
    np.testing.assert_allclose(m.a.weight.grad.numpy(), 2 * first, rtol=1e-12)
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_split_outputs_needs_each_output_once():
    g = Graph()
    g.outputs = [None, None]
    with pytest.raises(ValueError, match="cover the 2 outputs exactly once"):
        split_outputs(g, [[0], [0]])
