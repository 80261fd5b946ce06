"""fusegrad.multiprocessing: shared-memory tensors across processes, as torch.multiprocessing
(PyTorch run the same way is the oracle for what each side sees)."""
import gc
import os
import time

import numpy as np
import pytest

import fusegrad
import fusegrad.multiprocessing as mp
import fusegrad.nn.functional as F

pytestmark = pytest.mark.usefixtures("frozen_heap")

METHODS = ["fork", "spawn"]


def _segments_held():
    """How many shared-memory segments this process maps, and holds descriptors of."""
    with open("/proc/self/maps") as f:
        maps = sum("memfd:fusegrad_shared" in line for line in f)
    fds = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds += "memfd:fusegrad_shared" in os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # (the listing's own descriptor, closed since)
            pass
    return maps, fds


@pytest.fixture(autouse=True)
def _no_leaks():
    """Every segment a test made is unmapped when its tensors are gone; nothing is left in /dev/shm."""
    gc.collect()
    held, shm = _segments_held(), set(os.listdir("/dev/shm"))
    yield
    gc.collect()
    assert _segments_held() == held
    assert not [n for n in set(os.listdir("/dev/shm")) - shm if "fusegrad" in n or n.startswith("psm_")]


# ---------------------------------------------------------------- hogwild training
def _train(rank, model, x, y, steps, go, results):
    """A hogwild worker (as pytorch/examples mnist_hogwild): SGD steps on the shared model once
    its turn comes (``go[rank]``), then its view of the parameters, then the next one's turn."""
    go[rank].wait()
    opt = fusegrad.optim.SGD(model.parameters(), lr=0.1)
    x, y = fusegrad.tensor(x), fusegrad.tensor(y)
    for _ in range(steps):
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
    results.put((rank, [p.detach().numpy().copy() for p in model.parameters()]))
    if rank + 1 < len(go):
        go[rank + 1].set()


@pytest.mark.parametrize("method", METHODS)
def test_hogwild_children_update_the_parents_model(pt, method):
    ctx = mp.get_context(method)
    model = fusegrad.nn.Sequential(fusegrad.nn.Linear(4, 5), fusegrad.nn.Tanh(), fusegrad.nn.Linear(5, 2))
    ref = pt.nn.Sequential(pt.nn.Linear(4, 5), pt.nn.Tanh(), pt.nn.Linear(5, 2))
    with pt.no_grad():
        for r, p in zip(ref.parameters(), model.parameters()):
            r.copy_(pt.from_numpy(p.detach().numpy()))
    model.share_memory()
    rng = np.random.default_rng(0)
    data = [(rng.standard_normal((8, 4), dtype=np.float32), rng.standard_normal((8, 2), dtype=np.float32))
            for _ in range(2)]
    go, results = [ctx.Event() for _ in data], ctx.Queue()
    procs = [ctx.Process(target=_train, args=(rank, model, x, y, 3, go, results)) for rank, (x, y) in enumerate(data)]
    for p in procs:
        p.start()
    go[0].set()
    reported = dict(results.get(timeout=60) for _ in procs)
    for p in procs:
        p.join()
        assert p.exitcode == 0
    # PyTorch, one process: worker 0's steps, then worker 1's (which started from worker 0's result)
    opt = pt.optim.SGD(ref.parameters(), lr=0.1)
    for rank, (x, y) in enumerate(data):
        for _ in range(3):
            opt.zero_grad()
            pt.nn.functional.mse_loss(ref(pt.from_numpy(x)), pt.from_numpy(y)).backward()
            opt.step()
        for got, want in zip(reported[rank], ref.parameters()):
            np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-5, atol=1e-6)
    for got, mine in zip(reported[1], model.parameters()):
        np.testing.assert_array_equal(mine.detach().numpy(), got)


# ---------------------------------------------------------------- tensors through a Queue
def _round_trip(inbox, outbox):
    t = inbox.get()
    outbox.put(t.is_shared())
    t.add_(1)
    outbox.put("added")
    assert inbox.get() == "scaled"
    outbox.put(t.numpy().copy())


def _queue_story(lib, mp_module, method, share):
    """What each side sees of a view sent through a Queue and updated in place on both sides."""
    ctx = mp_module.get_context(method)
    inbox, outbox = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=_round_trip, args=(inbox, outbox))
    p.start()
    t = lib.arange(6.0)
    if share:
        t.share_memory_()
    view = t[2:]
    inbox.put(view)
    story = [outbox.get(timeout=60), outbox.get(timeout=60), view.is_shared(), view.numpy().copy()]
    view.mul_(10)
    inbox.put("scaled")
    story.append(outbox.get(timeout=60))
    p.join()
    assert p.exitcode == 0
    return story


def _same_story(got, want):
    assert got[:3] == want[:3]
    for g, w in zip(got[3:], want[3:]):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("method", METHODS)
def test_shared_tensor_through_queue_shares_memory_both_ways(pt, method):
    _same_story(_queue_story(fusegrad, mp, method, share=True),
                _queue_story(pt, pt.multiprocessing, "fork", share=True))


def test_unshared_tensor_through_queue_moves_to_shared_memory(pt):
    # as PyTorch: sending moves the sender's data into shared memory first, so the receiver shares it
    _same_story(_queue_story(fusegrad, mp, "fork", share=False),
                _queue_story(pt, pt.multiprocessing, "fork", share=False))


def test_non_leaf_that_requires_grad_is_refused(pt):
    from multiprocessing.reduction import ForkingPickler
    for lib in (fusegrad, pt):
        with pytest.raises(RuntimeError, match="Cowardly refusing to serialize non-leaf tensor"):
            ForkingPickler.dumps(lib.ones(2, requires_grad=True) * 2)


# ---------------------------------------------------------------- spawn
def _fill_then_fail(i, out):
    """Process i writes i + 1 to ``out[i]``; process 1 waits to see process 0's write, then raises."""
    if i == 1:
        while out[0].item() == 0:
            time.sleep(0.01)
    out[i] = i + 1
    if i == 1:
        raise ValueError("boom in process 1")


def test_spawn_runs_fn_with_the_process_index_and_raises_a_childs_exception():
    out = fusegrad.zeros(2).share_memory_()
    with pytest.raises(mp.ProcessRaisedException, match="ValueError: boom in process 1") as info:
        mp.spawn(_fill_then_fail, args=(out,), nprocs=2)
    assert info.value.error_index == 1
    np.testing.assert_array_equal(out.numpy(), [1.0, 2.0])


def _exit_3(i):
    os._exit(3)


def test_start_processes_reports_an_exit_code():
    with pytest.raises(mp.ProcessExitedException, match="process 0 terminated with exit code 3") as info:
        mp.start_processes(_exit_3, nprocs=1, start_method="fork")
    assert info.value.exit_code == 3


# ---------------------------------------------------------------- sharing in one process
def test_module_share_memory_covers_parameters_buffers_and_grads(pt):
    def build(lib):
        lib.manual_seed(0)
        m = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4))
        m(lib.ones(5, 3)).sum().backward()
        return m
    mine, ref = build(fusegrad), build(pt)
    before = {k: v.numpy().copy() for k, v in mine.state_dict().items()}
    assert mine.share_memory() is mine and ref.share_memory() is ref
    for (k, a), (_, b) in zip(mine.state_dict().items(), ref.state_dict().items()):
        assert a.is_shared() == b.is_shared(), k
        np.testing.assert_array_equal(a.numpy(), before[k])
    for a, b in zip(mine.parameters(), ref.parameters()):
        assert (a.is_shared(), a.data.is_shared(), a.grad.is_shared()) == \
            (b.is_shared(), b.data.is_shared(), b.grad.is_shared())


def test_share_memory_keeps_values_and_aliases(pt):
    for lib in (fusegrad, pt):
        base = lib.arange(6.0)
        view = base[1:]
        assert not view.is_shared()
        assert view.share_memory_() is view and view.is_shared() and base.is_shared()
        view.add_(1)  # the view and its base still share their memory
        np.testing.assert_array_equal(base.numpy(), [0, 2, 3, 4, 5, 6])


def _add_ten(args):
    t, i = args
    t[i] += 10
    return float(t[i])


def test_pool_and_stdlib_api(pt):
    assert mp.get_all_sharing_strategies() == pt.multiprocessing.get_all_sharing_strategies()
    assert mp.get_sharing_strategy() == pt.multiprocessing.get_sharing_strategy()
    assert set(pt.multiprocessing.__all__) <= set(mp.__all__)
    t = fusegrad.arange(4.0).share_memory_()
    with mp.get_context("fork").Pool(2) as pool:
        assert pool.map(_add_ten, [(t, i) for i in range(4)]) == [10.0, 11.0, 12.0, 13.0]
    np.testing.assert_array_equal(t.numpy(), [10, 11, 12, 13])


def _count_up(t, i, n):
    for _ in range(n):
        t[i] += 1
    t[[i + 2]] = fusegrad.tensor([float(n)])
    t[fusegrad.arange(6) == i + 4] = float(n)


def test_item_writes_store_only_their_elements():
    """``t[i] = v`` stores t[i] alone, as PyTorch: processes writing different elements of one
    shared tensor at once lose none of each other's writes."""
    t = fusegrad.zeros(6).share_memory_()
    n = 3000
    procs = [mp.get_context("fork").Process(target=_count_up, args=(t, i, n)) for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0]
    np.testing.assert_array_equal(t.numpy(), [n] * 6)
