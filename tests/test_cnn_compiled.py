"""A LeNet-style CNN training step (conv, in-place ReLU, batch norm, max pool, linear,
cross-entropy, SGD with momentum) compiles into one graph (``fullgraph=True``) and matches eager for 10 steps,
batch norm's running statistics included."""
import numpy as np

import fusegrad as fg
import fusegrad.nn as nn
import fusegrad.nn.functional as F


def _lenet() -> nn.Module:
    fg.manual_seed(0)
    # one layer of each kind keeps the Numba compile short; in-place ReLUs on a convolution's
    # and a pool's results (tensors of their own, as in PyTorch: no graph break)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(inplace=True), nn.BatchNorm2d(4), nn.MaxPool2d(2),
                         nn.ReLU(inplace=True), nn.Flatten(), nn.Linear(4 * 6 * 6, 10))


def _train(compiled: bool, xs, ys):
    model = _lenet()
    opt = fg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    fn = fg.compile(step, fullgraph=True) if compiled else step
    losses = [float(fn(x, y)) for x, y in zip(xs, ys)]
    return losses, model, fn


def test_lenet_training_step_compiles_to_one_graph_and_matches_eager():
    rng = np.random.default_rng(0)
    # one batch seen 10 times (in new tensors): the loss must go down
    x, y = rng.standard_normal((8, 1, 12, 12)).astype(np.float32), rng.integers(0, 10, 8)
    xs, ys = [fg.tensor(x) for _ in range(10)], [fg.tensor(y) for _ in range(10)]
    ref_losses, ref, _ = _train(False, xs, ys)
    losses, model, fn = _train(True, xs, ys)
    info = fn.cache_info()
    assert info["graph_breaks"] == [] and info["fallbacks"] == 0 and info["entries"] == 1
    np.testing.assert_allclose(losses, ref_losses, rtol=2e-5, atol=2e-6)
    assert ref_losses[-1] < ref_losses[0]
    for (name, a), (_, b) in zip(model.state_dict().items(), ref.state_dict().items()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=2e-4, atol=2e-5, err_msg=name)
    assert int(model[2].num_batches_tracked) == 10
    # eval mode is a guard: the compiled step retraces, normalizing with the running statistics
    model.eval(), ref.eval()
    with fg.no_grad():
        np.testing.assert_allclose(fg.compile(model)(xs[0]).numpy(), ref(xs[0]).numpy(), rtol=2e-5, atol=2e-5)
