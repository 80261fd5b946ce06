"""What compiled code returns keeps its container's type (a dataclass, an OrderedDict, a
HuggingFace-style ModelOutput, a UserDict) with working tensors; a compiled module reports its
module's training flag; addmm with beta=0 ignores its input, NaNs included. Against PyTorch."""
import collections
import dataclasses
from typing import Optional

import numpy as np
import pytest

import fusegrad as fg

torch = pytest.importorskip("torch")


def _model_output(T):
    @dataclasses.dataclass
    class ModelOutput(collections.OrderedDict):  # (transformers' pattern: a dataclass that is a dict)
        loss: Optional[object] = None
        logits: Optional[object] = None

        def __post_init__(self):  # (its fields are attributes and items both)
            for f in dataclasses.fields(self):
                if getattr(self, f.name) is not None:
                    self[f.name] = getattr(self, f.name)
    return ModelOutput


@dataclasses.dataclass
class Plain:
    logits: object
    hidden: object
    note: str = "x"


def test_compiled_outputs_keep_their_containers():
    w = np.array([[0.5, -1.0], [2.0, 0.25], [1.0, 1.5]], np.float32)
    x = np.array([[1.0, 2.0, -1.0], [0.5, 0.0, 3.0]], np.float32)
    results = []
    for T in (fg, torch):
        MO = _model_output(T)
        lin = T.nn.Linear(3, 2, bias=False)
        with T.no_grad():
            lin.weight.copy_(T.tensor(w.T))

        def f(t):
            logits = lin(t)
            return (MO(loss=logits.pow(2).mean(), logits=logits), Plain(logits * 2, t + 1),
                    collections.OrderedDict(a=logits.sum(), b=t), collections.UserDict(z=logits.exp()))
        mo, plain, od, ud = fg.compile(f)(T.tensor(x)) if T is fg else f(T.tensor(x))
        assert type(mo).__name__ == "ModelOutput" and type(plain) is Plain and type(od) is collections.OrderedDict
        assert isinstance(ud, collections.UserDict) and plain.note == "x"
        mo.loss.backward()
        results.append([mo.logits.detach().numpy(), mo["loss"].detach().numpy(), (plain.logits * 2).detach().numpy(),
                        plain.hidden.numpy(), od["a"].detach().numpy(), ud["z"].detach().numpy(), lin.weight.grad.numpy()])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_compiled_module_training_flag_and_addmm_beta_zero():
    for T in (fg, torch):
        assert not T.compile(T.nn.Linear(2, 2).eval()).training and T.compile(T.nn.Linear(2, 2)).training
        b = T.full((2, 2), float("nan"), requires_grad=True)
        a = T.ones(2, 3, requires_grad=True)
        r = T.addmm(b, a, T.ones(3, 2), beta=0)
        r.sum().backward()
        assert r.tolist() == [[3.0, 3.0], [3.0, 3.0]] and b.grad.tolist() == [[0.0, 0.0], [0.0, 0.0]]
        assert T.full((2, 2), float("nan")).addmm_(T.ones(2, 3), T.ones(3, 2), beta=0).tolist() == r.tolist()


def test_an_object_made_inside_and_returned_runs_the_function_in_segments():
    """A cache object the function creates and returns (``past_key_values = DynamicCache()``)
    holds the tensors it computed: the call runs with the graph broken there, as eager."""
    class Cache:
        def __init__(self):
            self.k = []

        def update(self, k):
            self.k.append(k)
            return fg.cat(self.k, 0)
    lin = fg.nn.Linear(2, 2)

    def f(x, cache=None):
        cache = Cache() if cache is None else cache
        return cache.update(lin(x)).sum(0), cache
    cf = fg.compile(f)
    x = fg.ones(1, 2)
    for _ in range(2):
        o, c = cf(x)
        o2, c2 = cf(x, c)
        assert c2 is c and len(c.k) == 2 and (c.k[0] * 2).shape == (1, 2)
        np.testing.assert_allclose(o2.detach().numpy(), 2 * o.detach().numpy(), rtol=1e-6)
        o2.sum().backward()
    assert any("Cache" in r for r in cf.cache_info()["graph_breaks"])
