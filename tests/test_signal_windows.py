"""``torch.signal.windows`` against PyTorch: every window at lengths 0, 1, 2, 5, 10, symmetric
and periodic, float32 and float64, with each window's parameters; the argument checks."""
import numpy as np
import pytest

import fusegrad as fg
import fusegrad.signal.windows as W

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

PARAMS = {"general_cosine": dict(a=[0.46, 0.23, 0.31]), "general_hamming": dict(alpha=0.6), "gaussian": dict(std=0.9),
          "kaiser": dict(beta=5.0), "exponential": dict(tau=0.5)}


@pytest.mark.parametrize("name", W.__all__)
def test_windows_match_torch(name):
    import torch.signal.windows as TW
    for M in (0, 1, 2, 5, 10):
        for sym in (True, False):
            for dt in ("float32", "float64"):
                kw = dict(PARAMS.get(name, {}), sym=sym)
                if name == "exponential" and not sym:
                    kw["center"] = 3.0
                got = getattr(W, name)(M, dtype=getattr(fg, dt), **kw)
                want = getattr(TW, name)(M, dtype=getattr(torch, dt), **kw)
                assert got.dtype == getattr(fg, dt) and tuple(got.shape) == tuple(want.shape)
                np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7, err_msg=f"{name} {M} {sym}")
    assert getattr(W, name)(4, **PARAMS.get(name, {}), requires_grad=True).requires_grad


def test_window_argument_checks_as_torch():
    import torch.signal.windows as TW
    cases = [("hann", (-1,), {}), ("hann", (3,), {"dtype": "int64"}), ("gaussian", (3,), {"std": 0.0}),
             ("kaiser", (3,), {"beta": -1.0}), ("exponential", (3,), {"center": 1.0}),
             ("exponential", (3,), {"tau": 0.0}), ("general_cosine", (3,), {"a": []})]
    for name, args, kw in cases:
        raised = []
        for lib, mod in ((fg, W), (torch, TW)):
            k = {key: getattr(lib, v) if key == "dtype" else v for key, v in kw.items()}
            with pytest.raises(Exception) as e:
                getattr(mod, name)(*args, **k)
            raised.append((e.type.__name__, str(e.value).replace("fusegrad.", "torch.")))
        assert raised[0] == raised[1], raised
