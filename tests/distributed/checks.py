"""Checks run on every rank under ``mpiexec -n N python tests/distributed/checks.py SUITE``
(launched by tests/test_distributed.py). Each check prints ``PASS <name>`` from every rank;
a failure raises, which aborts the whole job through init_process_group's excepthook."""
from __future__ import annotations

import sys
import time

import numpy as np

import fusegrad as fg
import fusegrad.distributed as dist
from fusegrad import nn
from fusegrad.nn.parallel import DistributedDataParallel as DDP

CHECKS = {}


def check(fn):
    CHECKS[fn.__name__] = fn
    return fn


def data(r: int, shape=(3, 4), dtype=np.float64) -> np.ndarray:
    """What rank r contributes (every rank can compute every rank's data)."""
    return np.random.default_rng(100 + r).uniform(0.5, 1.5, shape).astype(dtype)


def close(a, b, tol=1e-12):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


# ------------------------------------------------------------------ collectives vs NumPy
@check
def object_collectives():
    """broadcast_object_list, all_gather_object, gather_object, scatter_object_list: picklable
    objects (a config dict, a tensor, numbers) as torch.distributed moves them."""
    r, n = dist.get_rank(), dist.get_world_size()
    cfg = [{"lr": 0.1, "name": "run"}, fg.arange(3.0) * 2] if r == n - 1 else [None, None]
    dist.broadcast_object_list(cfg, src=n - 1)
    assert cfg[0] == {"lr": 0.1, "name": "run"} and cfg[1].tolist() == [0.0, 2.0, 4.0]
    try:  # (a second default group is refused with torch's ValueError)
        dist.init_process_group(backend="mpi")
    except ValueError as e:
        assert "twice" in str(e)
    else:
        raise AssertionError("a second init_process_group went unnoticed")
    got = [None] * n
    dist.all_gather_object(got, {"rank": r, "loss": 1.0 / (r + 1)})
    assert got == [{"rank": q, "loss": 1.0 / (q + 1)} for q in range(n)]
    out = [None] * n if r == 0 else None
    dist.gather_object(r * 10, out, dst=0)
    assert out == (list(range(0, 10 * n, 10)) if r == 0 else None)
    mine = [None]
    dist.scatter_object_list(mine, [f"part {q}" for q in range(n)] if r == 0 else None, src=0)
    assert mine == [f"part {r}"]


@check
def all_to_all_exchanges():
    """all_to_all_single with even splits and with uneven ones (a mixture of experts'
    dispatch), and all_to_all of tensor lists: rank r's part for rank q lands in rank q's
    part from rank r, as torch.distributed's."""
    r, n = dist.get_rank(), dist.get_world_size()
    src = fg.tensor(np.array([[100 * r + 10 * q + j, -1.0] for q in range(n) for j in range(2)]))
    out = fg.zeros(2 * n, 2, dtype=fg.float64)
    dist.all_to_all_single(out, src)
    assert out[:, 0].tolist() == [100 * q + 10 * r + j for q in range(n) for j in range(2)]
    send = [q + 1 for q in range(n)]  # rank r sends q + 1 rows to rank q
    recv = [r + 1] * n
    src = fg.tensor(np.array([1000 * r + q for q in range(n) for _ in range(q + 1)], dtype=np.int64))
    out = fg.zeros(sum(recv), dtype=fg.int64)
    dist.all_to_all_single(out, src, output_split_sizes=recv, input_split_sizes=send)
    assert out.tolist() == [1000 * q + r for q in range(n) for _ in range(r + 1)]
    ins = [fg.full((q + 1, 2), float(10 * r + q)).to(fg.bfloat16) for q in range(n)]
    outs = [fg.zeros(r + 1, 2).to(fg.bfloat16) for _ in range(n)]
    dist.all_to_all(outs, ins)
    assert [o.float().tolist() for o in outs] == [[[float(10 * q + r)] * 2] * (r + 1) for q in range(n)]


@check
def bfloat16_and_bool_collectives():
    """all_reduce of bfloat16 (summed in float32, rounded once) and of bool flags (any/all),
    broadcast of bfloat16: MPI has no type for them (a TypeError, a BufferError)."""
    r, n = dist.get_rank(), dist.get_world_size()
    vals = np.array([1.5, 2.25, -3.0, 0.1])
    t = fg.tensor(vals).to(fg.bfloat16) * (r + 1)
    dist.all_reduce(t)
    want = sum((fg.tensor(vals).to(fg.bfloat16) * (q + 1)).float().numpy() for q in range(n))
    assert t.dtype == fg.bfloat16 and t.float().tolist() == fg.tensor(want).to(fg.bfloat16).float().tolist()
    m = fg.tensor([1.0, 5.0]).to(fg.bfloat16) * (r + 1)
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    assert m.float().tolist() == [float(n), 5.0 * n]
    stop = fg.tensor([r == n - 1, False])
    dist.all_reduce(stop)
    every = fg.tensor([True, r == 0])
    dist.all_reduce(every, op=dist.ReduceOp.MIN)
    assert stop.dtype == fg.bool and stop.tolist() == [True, False] and every.tolist() == [True, n == 1]
    x = fg.tensor([r + 0.5, 7.0]).to(fg.bfloat16)
    dist.broadcast(x, src=n - 1)
    assert x.dtype == fg.bfloat16 and x.float().tolist() == [n - 0.5, 7.0]


@check
def ddp_bfloat16_model():
    """DDP of a bfloat16 model (its construction's broadcast and the bucketed gradient
    all-reduce, summed in float32): three SGD steps equal to one bfloat16 process on the
    concatenated batch (it raised MPI's BufferError)."""
    r, n = dist.get_rank(), dist.get_world_size()
    g = np.random.default_rng(0)
    weights = [g.standard_normal(s) for s in ((8, 4), (8,), (2, 8), (2,))]
    x = fg.tensor(g.standard_normal((2 * n, 4))).to(fg.bfloat16)

    def model():
        m = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
        with fg.no_grad():
            for p, w in zip(m.parameters(), weights):
                p.copy_(fg.tensor(w))
        return m.to(fg.bfloat16)
    d, single = DDP(model()), model()
    opts = fg.optim.SGD(d.parameters(), lr=0.1), fg.optim.SGD(single.parameters(), lr=0.1)
    for _ in range(3):
        for o in opts:
            o.zero_grad()
        d(x[2 * r:2 * r + 2]).float().pow(2).mean().backward()
        sum(single(x[2 * q:2 * q + 2]).float().pow(2).mean() / n for q in range(n)).backward()
        for o in opts:
            o.step()
    for p, q in zip(d.parameters(), single.parameters()):
        assert p.dtype == p.grad.dtype == fg.bfloat16
        np.testing.assert_array_equal(p.detach().float().numpy(), q.detach().float().numpy())


@check
def collectives():
    r, n = dist.get_rank(), dist.get_world_size()
    every = np.stack([data(q) for q in range(n)])
    refs = {dist.ReduceOp.SUM: every.sum(0), dist.ReduceOp.AVG: every.mean(0), dist.ReduceOp.MAX: every.max(0),
            dist.ReduceOp.MIN: every.min(0), dist.ReduceOp.PRODUCT: every.prod(0)}
    for op, ref in refs.items():
        t = fg.tensor(data(r))
        before = t._data
        assert dist.all_reduce(t, op=op) is None
        assert t._data is before  # in place, on the tensor's own array
        close(t.numpy(), ref)
    ti = fg.tensor(np.arange(6, dtype=np.int64) * (r + 1))
    dist.all_reduce(ti)
    assert ti.tolist() == (np.arange(6) * sum(range(1, n + 1))).tolist()
    # a non-contiguous view is reduced through a copy and written back into its base
    base = fg.tensor(data(r, (4, 6)))
    view = base[:, ::2]
    dist.all_reduce(view)
    close(base.numpy()[:, ::2], every_of((4, 6), n).sum(0)[:, ::2])
    close(base.numpy()[:, 1::2], data(r, (4, 6))[:, 1::2])
    # broadcast from the last rank
    t = fg.tensor(data(r))
    dist.broadcast(t, src=n - 1)
    close(t.numpy(), data(n - 1))
    # reduce into rank 0
    t = fg.tensor(data(r))
    dist.reduce(t, dst=0, op=dist.ReduceOp.MAX)
    close(t.numpy(), every.max(0) if r == 0 else data(r))
    # all_gather (list) and all_gather_into_tensor (concatenated along dim 0)
    outs = [fg.zeros(3, 4, dtype=fg.float64) for _ in range(n)]
    dist.all_gather(outs, fg.tensor(data(r)))
    for q in range(n):
        close(outs[q].numpy(), data(q))
    out = fg.zeros(3 * n, 4, dtype=fg.float64)
    dist.all_gather_into_tensor(out, fg.tensor(data(r)))
    close(out.numpy(), np.concatenate(list(every)))
    # reduce_scatter_tensor: rank r gets rows [r*2, r*2+2) of the sum
    big = [data(q, (2 * n, 5)) for q in range(n)]
    out = fg.zeros(2, 5, dtype=fg.float64)
    dist.reduce_scatter_tensor(out, fg.tensor(big[r]))
    close(out.numpy(), sum(big)[2 * r:2 * r + 2])
    out = fg.zeros(2, 5, dtype=fg.float64)
    dist.reduce_scatter_tensor(out, fg.tensor(big[r]), op=dist.ReduceOp.AVG)
    close(out.numpy(), (sum(big) / n)[2 * r:2 * r + 2])
    # gather to rank 1, scatter from rank 0
    dst = 1 % n
    gl = [fg.zeros(3, 4, dtype=fg.float64) for _ in range(n)] if r == dst else None
    dist.gather(fg.tensor(data(r)), gl, dst=dst)
    if r == dst:
        for q in range(n):
            close(gl[q].numpy(), data(q))
    t = fg.zeros(3, 4, dtype=fg.float64)
    dist.scatter(t, [fg.tensor(data(q) * 2) for q in range(n)] if r == 0 else None, src=0)
    close(t.numpy(), data(r) * 2)
    # send/recv around a ring
    t = fg.zeros(3, 4, dtype=fg.float64)
    if r % 2 == 0:
        dist.send(fg.tensor(data(r)), dst=(r + 1) % n)
        got = dist.recv(t, src=(r - 1) % n)
    else:
        got = dist.recv(t, src=(r - 1) % n)
        dist.send(fg.tensor(data(r)), dst=(r + 1) % n)
    assert got == (r - 1) % n
    close(t.numpy(), data((r - 1) % n))
    # async_op: all three started, then waited
    ts = [fg.tensor(data(r) * k) for k in (1, 2, 3)]
    works = [dist.all_reduce(x, async_op=True) for x in ts]
    works.append(dist.barrier(async_op=True))
    for w in works:
        assert w.wait() is True and w.is_completed()
    for k, x in zip((1, 2, 3), ts):
        close(x.numpy(), every.sum(0) * k)
    w = dist.all_reduce(fg.tensor(data(r)), op=dist.ReduceOp.AVG, async_op=True)
    w.wait()
    dist.barrier()


def every_of(shape, n):
    return np.stack([data(q, shape) for q in range(n)])


@check
def subgroups():
    r, n = dist.get_rank(), dist.get_world_size()
    members = list(range(0, n, 2)) if n > 2 else [1]  # {0, 2} with 3 ranks, {1} with 2
    g = dist.new_group(members)
    assert [dist.get_global_rank(g, k) for k in range(len(members))] == members
    assert [dist.get_group_rank(g, q) for q in members] == list(range(len(members)))
    dist.monitored_barrier()
    if r in members:
        assert dist.get_rank(g) == members.index(r) and dist.get_world_size(g) == len(members)
        t = fg.tensor(data(r))
        dist.all_reduce(t, group=g)
        close(t.numpy(), sum(data(q) for q in members))
        t = fg.tensor(data(r))
        dist.broadcast(t, src=members[-1], group=g)
        close(t.numpy(), data(members[-1]))
    else:
        assert dist.get_rank(g) == -1
        t = fg.tensor(data(r))
        assert dist.all_reduce(t, group=g) is None  # not a member: untouched
        close(t.numpy(), data(r))
    dist.destroy_process_group(g)


@check
def mismatched_shapes():
    r, n = dist.get_rank(), dist.get_world_size()
    t = fg.zeros(3 + (r == n - 1), dtype=fg.float64)
    try:
        dist.all_reduce(t)
    except RuntimeError as e:
        msg = str(e)
        assert "all_reduce" in msg and "rank 0: [3] float64" in msg and f"rank {n - 1}: [4] float64" in msg, msg
    else:
        raise AssertionError("all_reduce with different shapes did not raise")
    t = fg.zeros(3, dtype=fg.float64 if r else fg.float32)
    try:
        dist.broadcast(t, src=0)
    except RuntimeError as e:
        assert "broadcast" in str(e) and "float32" in str(e), str(e)
    else:
        raise AssertionError("broadcast with different dtypes did not raise")
    dist.barrier()


# ------------------------------------------------------------------ DDP vs one process
def mlp(seed: int, bias_layer: bool = True) -> nn.Module:
    fg.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 3)).double()


def batches(steps: int, n: int, per_rank: int = 4):
    rng = np.random.default_rng(7)
    return [(rng.normal(size=(n * per_rank, 5)), rng.normal(size=(n * per_rank, 3))) for _ in range(steps)]


def params_of(m) -> list:
    return [p.detach().numpy().copy() for p in m.parameters()]


def train(model, opt, data_, r, n, per_rank, accumulate=1):
    loss_fn = nn.MSELoss()
    losses = []
    for x, y in data_:
        sl = slice(r * per_rank, (r + 1) * per_rank) if n else slice(None)
        opt.zero_grad()
        out = model(fg.tensor(x[sl]))
        loss = loss_fn(out, fg.tensor(y[sl]))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@check
def ddp_matches_single_process():
    r, n = dist.get_rank(), dist.get_world_size()
    per = 4
    for name, make_opt in (("SGD", lambda ps: fg.optim.SGD(ps, lr=0.1, momentum=0.9)),
                           ("Adam", lambda ps: fg.optim.Adam(ps, lr=0.01))):
        steps = batches(20, n, per)
        ref = mlp(0)
        train(ref, make_opt(ref.parameters()), steps, 0, 0, per)
        model = mlp(0 if r == 0 else 1 + r)  # DDP starts every rank from rank 0's parameters
        # ~800 bytes: several buckets; Adam's run leaves .grad as views of the buckets
        ddp = DDP(model, bucket_cap_mb=0.0008, gradient_as_bucket_view=name == "Adam")
        assert len(ddp.bucket_sizes) >= 3, ddp.bucket_sizes
        train(ddp, make_opt(ddp.parameters()), steps, r, n, per)
        # the engine wrote each gradient straight into its bucket slot: .grad is a view of it
        flats = [b.flat for b in ddp.reducer.buckets]
        assert all(any(np.shares_memory(p.grad._data, f) for f in flats) for p in model.parameters())
        for a, b in zip(params_of(model), params_of(ref)):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)  # in fact equal to rounding
        # buckets started before the backward was over (the first before the last gradient)
        launched = ddp.reducer.launched_at
        assert launched[0] < len(ddp.reducer.params), launched
        # the progress pokes sit on each iteration's fresh nodes, never on the leaves' lasting ones
        assert all(not p._acc.post_hooks for p in model.parameters())
        print(f"  {name}: max |param - single process| = "
              f"{max(np.abs(a - b).max() for a, b in zip(params_of(model), params_of(ref))):.1e}")
        # one more step: a .grad kept from the step before is overwritten only where .grad is
        # the bucket by request (gradient_as_bucket_view, Adam's run); else each step has its own
        kept = [(p.grad, p.grad.numpy().copy()) for p in model.parameters()]
        train(ddp, make_opt(ddp.parameters()), batches(1, n, per), r, n, per)
        changed = [not np.array_equal(g.numpy(), v) for g, v in kept]
        shared = [np.shares_memory(g._data, p.grad._data) for (g, _), p in zip(kept, model.parameters())]
        assert all(changed) and all(shared) if name == "Adam" else not any(changed) and not any(shared), \
            (changed, shared)


@check
def ddp_no_sync_accumulation():
    r, n = dist.get_rank(), dist.get_world_size()
    per = 3
    (x1, y1), (x2, y2) = batches(2, n, per)
    ref = mlp(0)
    loss_fn = nn.MSELoss()
    for x, y in ((x1, y1), (x2, y2)):  # the sum over micro-batches of the all-ranks mean loss
        loss_fn(ref(fg.tensor(x)), fg.tensor(y)).backward()
    ddp = DDP(mlp(0), bucket_cap_mb=0.001)
    sl = slice(r * per, (r + 1) * per)
    with ddp.no_sync():
        loss_fn(ddp(fg.tensor(x1[sl])), fg.tensor(y1[sl])).backward()
    local = [p.grad.numpy().copy() for p in ddp.parameters()]
    mine = mlp(0)
    loss_fn(mine(fg.tensor(x1[sl])), fg.tensor(y1[sl])).backward()
    for a, p in zip(local, mine.parameters()):  # no communication happened: this rank's grads
        close(a, p.grad.numpy())
    loss_fn(ddp(fg.tensor(x2[sl])), fg.tensor(y2[sl])).backward()
    for p, q in zip(ddp.parameters(), ref.parameters()):
        close(p.grad.numpy(), q.grad.numpy(), 1e-10)


class Layouts(nn.Module):
    """``x @ w`` gives w a C-ordered gradient, ``(w.T @ x.T).T`` the same values Fortran-ordered."""

    def __init__(self, fortran: bool):
        super().__init__()
        self.w = nn.Parameter(fg.tensor(data(0, (4, 3))))
        self.fortran = fortran

    def forward(self, x):
        return (self.w.T @ x.T).T if self.fortran else x @ self.w


@check
def ddp_gradient_layouts_differ_across_ranks():
    """Buckets carry gradients in their own memory order; ranks whose orders differ (rank 0
    Fortran, the others C) still average correctly, this step and the next."""
    r, n = dist.get_rank(), dist.get_world_size()
    m = Layouts(fortran=r == 0)
    ddp = DDP(m)
    for step in range(2):
        m.w.grad = None
        xs = [data(10 * step + q, (5, 4)) for q in range(n)]
        (ddp(fg.tensor(xs[r])) ** 2).sum().backward()
        refs = []
        for q in range(n):
            w = fg.tensor(m.w.detach().numpy().copy(), requires_grad=True)
            ((fg.tensor(xs[q]) @ w) ** 2).sum().backward()
            refs.append(w.grad.numpy())
        close(m.w.grad.numpy(), sum(refs) / n)
    orders = ddp.reducer.buckets[0].orders
    assert orders == ["C"], orders  # the disagreeing slot went to C order for good


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        fg.manual_seed(3)
        self.body = nn.Linear(4, 4).double()
        self.head_a = nn.Linear(4, 2).double()
        self.head_b = nn.Linear(4, 2).double()
        self.head_c = nn.Linear(4, 2).double()  # used on no rank
        self.register_buffer("steps", fg.zeros(1, dtype=fg.float64))

    def forward(self, x, use_b):
        self.steps.add_(1 + dist.get_rank())  # ranks differ: broadcast_buffers resets to rank 0's
        h = self.body(x).tanh()
        return self.head_b(h) if use_b else self.head_a(h)


@check
def ddp_unused_parameters_buffers_state_dict():
    r, n = dist.get_rank(), dist.get_world_size()
    m = TwoHeads()
    ddp = DDP(m, find_unused_parameters=True)
    x = fg.tensor(data(r, (3, 4)))
    ddp(x, use_b=(r == 0)).sum().backward()  # head_b used on rank 0 only, head_a on the others
    # the reference: each head's grad is its users' sum over the ranks divided by n
    grads = []  # per rank: (used head_b, the used head's weight grad, body weight grad)
    for q in range(n):
        ref = TwoHeads()
        ref(fg.tensor(data(q, (3, 4))), use_b=(q == 0)).sum().backward()
        head = ref.head_b if q == 0 else ref.head_a
        grads.append((q == 0, head.weight.grad.numpy(), ref.body.weight.grad.numpy()))
    wb = sum(g for used_b, g, _ in grads if used_b) / n
    close(m.head_b.weight.grad.numpy(), wb)
    if n > 1:
        wa = sum(g for used_b, g, _ in grads if not used_b) / n
        close(m.head_a.weight.grad.numpy(), wa)
    close(m.body.weight.grad.numpy(), sum(g for _, _, g in grads) / n)
    assert m.head_c.weight.grad is None and m.head_c.bias.grad is None
    # buffers: rank 0's value was broadcast before the forward, then this rank added 1 + r
    close(m.steps.numpy(), [1 + r])
    ddp(x, use_b=True)
    close(m.steps.numpy(), [2 + r])
    keys = list(ddp.state_dict())
    assert keys == ["module." + k for k in m.state_dict()], keys
    assert ddp.module is m
    # without find_unused_parameters, an unused parameter is reported at the next forward
    ddp2 = DDP(TwoHeads())
    ddp2(x, use_b=False).sum().backward()
    try:
        ddp2(x, use_b=False)
    except RuntimeError as e:
        assert "head_b.weight" in str(e) and "find_unused_parameters" in str(e), str(e)
    else:
        raise AssertionError("an unused parameter went unreported")


@check
def ddp_broadcasts_rank0_parameters():
    r = dist.get_rank()
    m = mlp(10 + r)
    DDP(m)
    mine = params_of(m)
    ref = params_of(mlp(10))
    for a, b in zip(mine, ref):
        close(a, b, 0)


class MLPWithLoss(nn.Module):
    """Not a Sequential, and the loss computed inside: the whole step's forward is compiled."""

    def __init__(self):
        super().__init__()
        self.net = mlp(0)

    def forward(self, x, y):
        return nn.functional.mse_loss(self.net(x), y)


@check
def ddp_compiled():
    """A compiled module computing its loss under DDP: the compiled backward runs in stages,
    one per bucket, the first bucket's all-reduce starting before the last stage; the same
    training as one process on the concatenated batch."""
    r, n = dist.get_rank(), dist.get_world_size()
    per = 4
    steps = batches(4, n, per)
    ref = mlp(0)
    train(ref, fg.optim.SGD(ref.parameters(), lr=0.1), steps, 0, 0, per)
    model = MLPWithLoss()
    compiled = fg.compile(model)
    ddp = DDP(compiled, bucket_cap_mb=0.0025)  # two buckets: layers 2 and 4, then layer 0
    assert len(ddp.bucket_sizes) == 2, ddp.bucket_sizes
    # as PyTorch's: the compiled OptimizedModule is DDP's module
    assert ddp.module is compiled and compiled._orig_mod is model
    assert all(k.startswith("module._orig_mod.net.") for k in ddp.state_dict()), list(ddp.state_dict())
    opt = fg.optim.SGD(ddp.parameters(), lr=0.1)
    for x, y in steps:
        sl = slice(r * per, (r + 1) * per)
        opt.zero_grad()
        ddp(fg.tensor(x[sl]), fg.tensor(y[sl])).backward()
        opt.step()
    for a, b in zip(params_of(model), params_of(ref)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    launched = ddp.reducer.launched_at
    # layers 2 and 4 launched first, after their 4 gradients, before layer 0's stage ran (one
    # backward call would hand over every gradient at once, layer 0's first: [2, 6])
    assert launched == [4, 6], launched
    # compiling around DDP (or a collective) breaks the graph: those calls run eagerly, correctly
    model2 = mlp(0)
    ddp2 = DDP(model2)
    outer = fg.compile(ddp2)
    train(outer, fg.optim.SGD(model2.parameters(), lr=0.1), steps, r, n, per)
    for a, b in zip(params_of(model2), params_of(ref)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    assert any("DistributedDataParallel" in b for b in outer.cache_info()["graph_breaks"])
    summed = fg.compile(lambda t: dist.all_reduce(t) or t * 2)(fg.tensor(data(r)))
    close(summed.numpy(), 2 * sum(data(q) for q in range(n)))


# ------------------------------------------------------------------ sampler
@check
def sync_batch_norm():
    """SyncBatchNorm on per-rank batches of different sizes normalizes as BatchNorm does the
    concatenated batch (outputs, input gradients, running statistics); a DDP model converted
    with convert_sync_batchnorm trains as one process on the concatenated batch."""
    r, n = dist.get_rank(), dist.get_world_size()
    sizes = [q + 2 for q in range(n)]
    rng = np.random.default_rng(11)
    x_all = rng.normal(size=(sum(sizes), 3, 4)) * 2 + 1
    w_all = rng.normal(size=x_all.shape)
    lo = sum(sizes[:r])
    for momentum in (0.1, None):
        ref = nn.BatchNorm1d(3, momentum=momentum).double()
        sync = nn.SyncBatchNorm(3, momentum=momentum).double()
        for m in (ref, sync):
            with fg.no_grad():
                m.weight.copy_(fg.tensor([0.5, 1.5, -1.0]))
                m.bias.copy_(fg.tensor([0.1, 0.0, -0.2]))
        xr = fg.tensor(x_all, requires_grad=True)
        xs = fg.tensor(x_all[lo:lo + sizes[r]], requires_grad=True)
        for _ in range(2):
            out_r, out_s = ref(xr), sync(xs)
        (out_r * fg.tensor(w_all)).sum().backward()
        (out_s * fg.tensor(w_all[lo:lo + sizes[r]])).sum().backward()
        close(out_s.detach().numpy(), out_r.detach().numpy()[lo:lo + sizes[r]], 1e-10)
        close(xs.grad.numpy(), xr.grad.numpy()[lo:lo + sizes[r]], 1e-10)
        close(sync.running_mean.numpy(), ref.running_mean.numpy(), 1e-10)
        close(sync.running_var.numpy(), ref.running_var.numpy(), 1e-10)
        summed = sync.weight.grad.clone()  # (each rank's share of the whole batch's gradient)
        dist.all_reduce(summed)
        close(summed.numpy(), ref.weight.grad.numpy(), 1e-10)
    per = 3
    steps = batches(5, n, per)

    def model(seed):
        fg.manual_seed(seed)
        return nn.Sequential(nn.Linear(5, 8), nn.BatchNorm1d(8), nn.Tanh(), nn.Linear(8, 3)).double()
    ref = model(0)
    train(ref, fg.optim.SGD(ref.parameters(), lr=0.1), steps, 0, 0, per)
    bn = model(0)
    converted = nn.SyncBatchNorm.convert_sync_batchnorm(bn)
    assert isinstance(converted[1], nn.SyncBatchNorm) and converted[1].weight is bn[1].weight
    ddp = DDP(converted)
    train(ddp, fg.optim.SGD(ddp.parameters(), lr=0.1), steps, r, n, per)
    for a, b in zip(params_of(converted), params_of(ref)):
        close(a, b, 1e-10)
    close(converted[1].running_var.numpy(), ref[1].running_var.numpy(), 1e-10)


@check
def distributed_sampler():
    """Each epoch, the ranks' shares partition the dataset exactly (padding repeats the first
    indices, drop_last cuts), and a DataLoader over the sampler yields this rank's rows."""
    from fusegrad.utils.data import DataLoader, DistributedSampler, TensorDataset
    r, n = dist.get_rank(), dist.get_world_size()
    for size, drop_last in ((12 * n, False), (12 * n + 1, False), (12 * n + 1, True)):
        for epoch in range(2):
            s = DistributedSampler(range(size), seed=3, drop_last=drop_last)
            s.set_epoch(epoch)
            mine = fg.tensor(list(s), dtype=fg.int64)
            every = [fg.zeros(len(s), dtype=fg.int64) for _ in range(n)]
            dist.all_gather(every, mine)
            got = sorted(i for t in every for i in t.tolist())
            if size % n == 0:
                assert got == list(range(size))
            elif drop_last:
                assert len(got) == len(set(got)) == size - size % n
            else:
                pad = n - size % n
                assert len(got) == size + pad and sorted(set(got)) == list(range(size))
    ds = TensorDataset(fg.arange(10 * n, dtype=fg.float64))
    s = DistributedSampler(ds, shuffle=True, seed=1)
    seen = [int(v) for (b,) in DataLoader(ds, batch_size=4, sampler=s) for v in b.tolist()]
    assert seen == list(s)


# ------------------------------------------------------------------ faults
@check
def failing_rank():
    """Rank 1 raises while the others wait in a barrier: the excepthook aborts the job."""
    if dist.get_rank() == 1:
        time.sleep(0.3)
        raise ValueError("boom on purpose")
    dist.barrier()
    time.sleep(30)  # never reached in time: the abort ends this rank too


@check
def failing_rank_after_cleanup():
    """Rank 1 raises inside the tutorials' ``try: ... finally: destroy_process_group()``: the
    group is gone when the exception reaches the top, and the abort still ends every rank."""
    try:
        if dist.get_rank() == 1:
            time.sleep(0.3)
            raise ValueError("boom after cleanup")
        dist.barrier()
        time.sleep(30)
    finally:
        if dist.get_rank() == 1:  # (the others wait in the barrier until the abort)
            dist.destroy_process_group()


def main(names):
    import os

    from mpi4py import MPI
    r, n = MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
    os.environ.update(RANK=str(r + 1), WORLD_SIZE=str(n))  # env:// variables disagreeing with MPI
    try:
        dist.init_process_group(backend="mpi", init_method="env://")
    except ValueError as e:
        assert "RANK" in str(e), e
    else:
        raise AssertionError("a wrong RANK went unnoticed")
    assert not dist.is_initialized()
    os.environ.update(RANK=str(r), MASTER_ADDR="localhost", MASTER_PORT="29500")
    dist.init_process_group(backend="mpi", init_method="env://")
    assert dist.is_initialized() and dist.get_rank() == r and dist.get_world_size() == n
    for name in names:
        t0 = time.perf_counter()
        CHECKS[name]()
        print(f"PASS {name} rank {r} ({time.perf_counter() - t0:.2f}s)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:] or [k for k in CHECKS if not k.startswith("failing_rank")])
