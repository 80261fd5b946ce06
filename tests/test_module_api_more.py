"""``nn.Module``'s state-dict hooks, extra state, deprecated backward hooks, ``to_empty``,
``set_submodule``, ``Module.compile`` and the global module hooks, each program run with
fusegrad and with PyTorch and what the hooks saw compared."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

import fusegrad  # noqa: E402


def _both(fn):
    """``fn(lib)`` with fusegrad and with torch."""
    return fn(fusegrad), fn(torch)


def _net(L):
    L.manual_seed(0)
    return L.nn.Sequential(L.nn.Linear(3, 4), L.nn.ReLU(), L.nn.Sequential(L.nn.Linear(4, 2)))


def _shapes(ts):
    return [None if t is None else tuple(t.shape) for t in ts]


def _messages(ws):
    return [(w.category.__name__, str(w.message)) for w in ws]


# ------------------------------------------------------------------ state_dict hooks
def test_state_dict_pre_and_post_hooks_order_and_arguments():
    def prog(L):
        net = _net(L)
        seen = []
        for name, m in net.named_modules():
            m.register_state_dict_pre_hook(lambda mod, prefix, keep_vars, n=name: seen.append(("pre", n, prefix,
                                                                                                keep_vars)))
            m.register_state_dict_post_hook(
                lambda mod, sd, prefix, meta, n=name: seen.append(("post", n, prefix, list(sd), dict(meta))))
        sd = net.state_dict(prefix="p.", keep_vars=True)
        seen.append(dict(sd._metadata))
        seen.append(list(net.state_dict()._metadata.items()))
        return seen
    ours, theirs = _both(prog)
    assert ours == theirs


def test_state_dict_post_hooks_return_values_and_removal():
    def prog(L):
        net = _net(L)
        out = []
        # the private hook's return value replaces the root's result, not a child's
        net._register_state_dict_hook(lambda m, sd, p, meta: {"root": 1})
        net[0]._register_state_dict_hook(lambda m, sd, p, meta: {"child": 1})
        out.append(list(net.state_dict()))

        def bad(m, sd, p, meta):
            return {}
        h = net[2].register_state_dict_post_hook(bad)
        with pytest.raises(RuntimeError) as e:
            net[2].state_dict()
        out.append(str(e.value))
        with pytest.raises(RuntimeError) as e:
            net[2]._register_state_dict_hook(bad)
        out.append(str(e.value))
        h.remove()
        out.append(list(net[2].state_dict()))

        def edit(m, sd, p, meta):
            sd[p + "extra"] = 0
        with net[2].register_state_dict_post_hook(edit):
            out.append(list(net[2].state_dict(prefix="x.")))
        out.append(list(net[2].state_dict(prefix="x.")))
        return out
    ours, theirs = _both(prog)
    assert ours == theirs


def test_state_dict_positional_arguments_warn():
    def prog(L):
        m = L.nn.Linear(2, 2)
        with warnings.catch_warnings(record=True) as ws:
            warnings.simplefilter("always")
            d = {}
            res = m.state_dict(d, "a.")
        return _messages(ws), list(res), res is d
    ours, theirs = _both(prog)
    assert ours == theirs


# ------------------------------------------------------------------ load_state_dict hooks
def test_load_state_dict_pre_and_post_hooks():
    def prog(L):
        net = _net(L)
        sd = {k: v.clone() + 1 for k, v in net.state_dict().items()}
        expect = np.asarray(sd["0.bias"]).round(5).tolist()
        sd["0.old_bias"] = sd.pop("0.bias")
        seen = []

        def pre(mod, state_dict, prefix, meta, strict, missing, unexpected, errors):
            seen.append(("pre", type(mod).__name__, prefix, sorted(state_dict), dict(meta), strict))
            if prefix + "old_bias" in state_dict:  # a renaming hook, as modules' version upgrades do
                state_dict[prefix + "bias"] = state_dict.pop(prefix + "old_bias")

        def private(state_dict, prefix, meta, strict, missing, unexpected, errors):
            seen.append(("private", prefix, len(missing), len(unexpected)))

        def post(mod, keys):
            seen.append(("post", type(mod).__name__, list(keys.missing_keys), list(keys.unexpected_keys)))

        for name, m in net.named_modules():
            m.register_load_state_dict_pre_hook(pre)
            m._register_load_state_dict_pre_hook(private)
            m.register_load_state_dict_post_hook(post)
        res = net.load_state_dict(sd)
        seen.append((list(res.missing_keys), list(res.unexpected_keys), repr(res)))
        seen.append(np.asarray(net[0].bias.detach()).round(5).tolist() == expect)
        return seen
    ours, theirs = _both(prog)
    assert ours[-1] == theirs[-1]
    assert ours[:-1] == theirs[:-1]


def test_load_state_dict_post_hook_edits_incompatible_keys():
    def prog(L):
        out = []
        m = L.nn.Sequential(L.nn.Linear(2, 2))
        sd = dict(m.state_dict())
        sd["junk"] = L.zeros(1)
        del sd["0.bias"]
        with pytest.raises(RuntimeError) as e:
            m.load_state_dict(sd)
        out.append(str(e.value))

        def clear(mod, keys):
            keys.missing_keys.clear()
            keys.unexpected_keys.clear()
        h = m.register_load_state_dict_post_hook(clear)
        out.append(repr(m.load_state_dict(sd)))
        h.remove()

        def add(mod, keys):
            keys.missing_keys.append("made.up")
        with m[0].register_load_state_dict_post_hook(add):
            r = m.load_state_dict(sd, strict=False)
            out.append((r.missing_keys, r.unexpected_keys))
        m.register_load_state_dict_post_hook(lambda mod, keys: 1)
        with pytest.raises(AssertionError) as e:
            m.load_state_dict(sd, strict=False)
        out.append(str(e.value))
        return out
    ours, theirs = _both(prog)
    assert ours == theirs


def test_load_state_dict_metadata_and_assign():
    def prog(L):
        m = L.nn.Sequential(L.nn.Linear(2, 3))
        sd = m.state_dict()
        metas = []
        m[0].register_load_state_dict_pre_hook(lambda mod, s, p, meta, *rest: metas.append(dict(meta)))
        m.load_state_dict(sd)
        new = {k: v.clone() * 2 for k, v in sd.items()}
        m.load_state_dict(new, assign=True)
        w = m[0].weight
        return metas, type(w).__name__, w.requires_grad, np.allclose(np.asarray(w.detach()),
                                                                    np.asarray(new["0.weight"]))
    ours, theirs = _both(prog)
    assert ours == theirs


# ------------------------------------------------------------------ extra state
def test_extra_state_saved_loaded_and_reported():
    def prog(L):
        class WithExtra(L.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = L.nn.Linear(2, 2)
                self.count = 3

            def get_extra_state(self):
                return {"count": self.count}

            def set_extra_state(self, state):
                self.count = state["count"]

        out = []
        net = L.nn.Sequential(WithExtra(), L.nn.ReLU())
        sd = net.state_dict()
        out.append(list(sd))
        out.append(sd["0._extra_state"])
        sd = dict(sd)
        sd["0._extra_state"] = {"count": 7}
        out.append(repr(net.load_state_dict(sd)))
        out.append(net[0].count)
        del sd["0._extra_state"]
        with pytest.raises(RuntimeError) as e:
            net.load_state_dict(sd)
        out.append(str(e.value))
        out.append(tuple(net.load_state_dict(sd, strict=False)))
        plain = L.nn.Sequential(L.nn.Linear(2, 2))
        psd = dict(plain.state_dict())
        psd["0._extra_state"] = 1
        psd["_extra_state"] = 2
        with pytest.raises(RuntimeError) as e:
            plain.load_state_dict(psd)
        out.append(str(e.value))
        with pytest.raises(RuntimeError) as e:
            plain.get_extra_state()
        out.append(str(e.value))
        with pytest.raises(RuntimeError) as e:
            plain.set_extra_state(0)
        out.append(str(e.value))
        return out
    ours, theirs = _both(prog)
    assert ours == theirs


# ------------------------------------------------------------------ deprecated backward hooks
def test_register_backward_hook_single_op_modules():
    def prog(L):
        L.manual_seed(0)
        out = []
        for mod in [L.nn.ReLU(), L.nn.Sigmoid(), L.nn.Linear(3, 2)]:
            seen = []
            mod.register_backward_hook(
                lambda m, gi, go: seen.append((type(m).__name__, _shapes(gi), _shapes(go))))
            for leaf in (True, False):
                x = L.randn(4, 3, requires_grad=True)
                inp = x if leaf else x * 1
                with warnings.catch_warnings(record=True) as ws:
                    warnings.simplefilter("always")
                    y = mod(inp)
                y.sum().backward()
                out.append((list(seen), _messages(ws)))
                seen.clear()
        relu = L.nn.ReLU()
        grads = []
        relu.register_backward_hook(lambda m, gi, go: grads.append((gi[0].detach().clone(),
                                                                     go[0].detach().clone())))
        x = L.tensor([[-1.0, 2.0, 3.0]], requires_grad=True)
        (relu(x * 1) * L.tensor([[1.0, 2.0, 3.0]])).sum().backward()
        out.append([np.asarray(g).tolist() for g in grads[0]])
        return out
    ours, theirs = _both(prog)
    assert ours == theirs


def test_backward_hook_kinds_cannot_mix():
    def prog(L):
        out = []
        a, b = L.nn.ReLU(), L.nn.ReLU()
        a.register_backward_hook(lambda *x: None)
        with pytest.raises(RuntimeError) as e:
            a.register_full_backward_hook(lambda *x: None)
        out.append(str(e.value))
        b.register_full_backward_hook(lambda *x: None)
        with pytest.raises(RuntimeError) as e:
            b.register_backward_hook(lambda *x: None)
        out.append(str(e.value))
        b.register_full_backward_pre_hook(lambda *x: None)  # pre-hooks mix with either
        return out
    ours, theirs = _both(prog)
    assert ours == theirs


def test_non_full_backward_hook_warnings_for_nested_outputs():
    def prog(L):
        class TwoOut(L.nn.Module):
            def forward(self, x):
                return x.sin(), x.cos()

        class DictOut(L.nn.Module):
            def forward(self, x):
                return {"a": x.exp()}

        out = []
        for mod in (TwoOut(), DictOut()):
            mod.register_backward_hook(lambda m, gi, go: None)
            x = L.randn(2, requires_grad=True) * 1
            with warnings.catch_warnings(record=True) as ws:
                warnings.simplefilter("always")
                mod(x)
            out.append(_messages(ws))
        return out
    ours, theirs = _both(prog)
    assert ours == theirs


# ------------------------------------------------------------------ to_empty, set_submodule
def test_to_empty_keeps_shapes_dtypes_and_parameters():
    def prog(L):
        m = L.nn.Sequential(L.nn.Linear(3, 2), L.nn.BatchNorm1d(2))
        m.double()
        params = list(m.parameters())
        r = m.to_empty(device="cpu")
        out = [r is m, [p is q for p, q in zip(params, m.parameters())]]
        out.append([(k, tuple(v.shape), str(v.dtype).split(".")[-1], type(v).__name__, v.requires_grad)
                    for k, v in m.state_dict(keep_vars=True).items()])
        m2 = L.nn.Sequential(L.nn.Linear(2, 2))
        m2.to_empty(device=None, recurse=False)  # no parameter of its own: nothing changes
        with pytest.raises(TypeError):
            m2.to_empty("cpu")
        return out
    ours, theirs = _both(prog)
    assert ours == theirs


def test_set_submodule():
    def prog(L):
        out = []
        net = L.nn.Sequential(L.nn.Linear(2, 2), L.nn.Sequential(L.nn.ReLU()))
        net.set_submodule("1.0", L.nn.Tanh())
        net.set_submodule("1.extra", L.nn.Identity())
        net.set_submodule("2", L.nn.Sigmoid())
        out.append(repr(net))
        for args in [("", L.nn.ReLU()), ("0", 3), ("1.missing", L.nn.ReLU(), True), ("0.weight", L.nn.ReLU()),
                     ("9.x", L.nn.ReLU())]:
            with pytest.raises((ValueError, AttributeError)) as e:
                net.set_submodule(*args)
            out.append((type(e.value).__name__, str(e.value)))
        net.set_submodule("1.0", L.nn.ReLU(), strict=True)
        out.append(repr(net[1]))
        return out
    ours, theirs = _both(prog)
    assert ours == theirs


# ------------------------------------------------------------------ Module.compile
def test_module_compile_in_place():
    fusegrad.manual_seed(0)
    net = fusegrad.nn.Sequential(fusegrad.nn.Linear(3, 4), fusegrad.nn.ReLU(), fusegrad.nn.Linear(4, 2))
    x = fusegrad.randn(5, 3)
    expect = np.asarray(net(x)) * 2
    net.register_forward_hook(lambda m, a, o: o * 2.0)  # (its result replaces the output)
    assert net.compile() is None
    assert net._compiled_call_impl is not None
    for _ in range(3):
        got = np.asarray(net(x))
    np.testing.assert_allclose(got, expect, rtol=1e-5, atol=1e-6)
    assert net._compiled_call_impl.cache_info()["compiles"] >= 1
    # a replaced parameter is seen by the compiled call
    with fusegrad.no_grad():
        net[2].weight = fusegrad.nn.Parameter(net[2].weight * 0)
    np.testing.assert_allclose(np.asarray(net(x)), np.broadcast_to(np.asarray(net[2].bias.detach()) * 2, (5, 2)),
                               rtol=1e-5, atol=1e-6)
    # a hook with a Python side effect runs at every call (its list is watched: a graph break)
    calls = []
    net.register_forward_hook(lambda m, a, o: calls.append(tuple(o.shape)))
    for _ in range(3):
        net(x)
    assert calls == [(5, 2)] * 3
    # gradients flow through the compiled call
    net(x).sum().backward()
    assert net[2].bias.grad is not None and tuple(net[0].weight.grad.shape) == (4, 3)


# ------------------------------------------------------------------ global module hooks
def test_global_module_hooks_match_torch():
    def prog(L):
        mm = L.nn.modules.module
        seen = []
        net = _net(L)
        net[0].register_forward_pre_hook(lambda m, a: seen.append(("own-pre", type(m).__name__)))
        net[0].register_forward_hook(lambda m, a, o: seen.append(("own-fwd", type(m).__name__)))
        handles = [
            mm.register_module_forward_pre_hook(lambda m, a: seen.append(("pre", type(m).__name__, _shapes(a)))),
            mm.register_module_forward_hook(lambda m, a, o: seen.append(("fwd", type(m).__name__,
                                                                         tuple(o.shape)))),
            mm.register_module_forward_hook(lambda m, a, k, o: seen.append(("fwd-kw", type(m).__name__, k)),
                                            with_kwargs=True),
            mm.register_module_full_backward_hook(
                lambda m, gi, go: seen.append(("bwd", type(m).__name__, _shapes(gi), _shapes(go)))),
        ]
        try:
            x = L.randn(2, 3, requires_grad=True)
            net(x).sum().backward()
            with pytest.raises(RuntimeError) as e:
                mm.register_module_backward_hook(lambda *a: None)
            seen.append(str(e.value))
        finally:
            for h in handles:
                h.remove()
            mm._global_is_full_backward_hook = None  # (the kind of global backward hooks stays set otherwise)
        seen.append("removed")
        net(L.randn(2, 3))
        return seen
    ours, theirs = _both(prog)
    assert ours == theirs


def test_global_forward_hook_always_call():
    def prog(L):
        mm = L.nn.modules.module
        seen = []

        class Boom(L.nn.Module):
            def forward(self, x):
                raise ValueError("boom")

        h = mm.register_module_forward_hook(lambda m, a, o: seen.append(("always", type(m).__name__, o)),
                                            always_call=True)
        try:
            with pytest.raises(ValueError):
                Boom()(L.zeros(1))
        finally:
            h.remove()
        return seen
    ours, theirs = _both(prog)
    assert ours == theirs


def test_backward_hook_return_values_replace_gradients_and_norm_versions():
    """A value a node's hook (or a module's register_backward_hook) returns replaces the
    gradients it saw, as in PyTorch; batch and instance norm save _metadata version 2."""
    import warnings

    def run(lib):
        lin = lib.nn.Linear(3, 2)
        with lib.no_grad():
            lin.weight.copy_(lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
            lin.bias.fill_(0.5)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lin.register_backward_hook(lambda m, gi, go: tuple(None if g is None else g * 2 for g in gi))
            x = lib.ones(4, 3, requires_grad=True)
            lin(x).sum().backward()
        y = lib.ones(3, requires_grad=True)
        z = (y * y).sum()
        z.grad_fn.register_hook(lambda gi, go: (gi[0] * 10,))
        z.backward()
        return ([t.numpy() for t in (lin.weight.grad, lin.bias.grad, x.grad, y.grad)],
                dict(lib.nn.BatchNorm2d(3).state_dict()._metadata), dict(lib.nn.InstanceNorm1d(3).state_dict()._metadata))
    ours, theirs = run(fusegrad), run(torch)
    for a, b in zip(ours[0], theirs[0]):
        np.testing.assert_allclose(a, b)
    assert ours[1:] == theirs[1:]


def test_sync_batch_norm_without_a_process_group_is_batch_norm_and_converts_as_torch():
    torch = pytest.importorskip("torch")
    import fusegrad as fg

    def build(lib):
        lib.manual_seed(0)
        return lib.nn.Sequential(lib.nn.Conv2d(2, 3, 3), lib.nn.BatchNorm2d(3), lib.nn.ReLU(),
                                 lib.nn.Sequential(lib.nn.BatchNorm1d(4, momentum=None)))
    ours, theirs = build(fg), build(torch)
    conv = fg.nn.SyncBatchNorm.convert_sync_batchnorm(ours)
    ref = torch.nn.SyncBatchNorm.convert_sync_batchnorm(theirs)
    assert repr(conv) == repr(ref).replace("torch.", "fusegrad.")
    assert conv[1].weight is ours[1].weight and conv[3][0].momentum is None
    assert list(conv.state_dict()) == list(ref.state_dict())
    x = np.random.default_rng(1).normal(size=(4, 3, 5, 5)).astype(np.float32)
    plain = fg.nn.BatchNorm2d(3)
    out = conv[1](fg.tensor(x))
    np.testing.assert_allclose(out.detach().numpy(), plain(fg.tensor(x)).detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(conv[1].running_mean.numpy(), plain.running_mean.numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="at least 2D"):
        conv[1](fg.ones(3))
