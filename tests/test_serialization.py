"""``fusegrad.save`` / ``fusegrad.load`` against PyTorch's own ``torch.save`` / ``torch.load``:
checkpoints written by one library load in the other, and ``weights_only`` refuses code."""
import io
import os
import pickle
import struct
import zipfile
from collections import Counter, OrderedDict

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.serialization.zipformat import write_archive


def mlp(lib):
    return lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.Tanh(), lib.nn.LayerNorm(8), lib.nn.Linear(8, 3))


def train(lib, model, opt, x, y, steps):
    for _ in range(steps):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()


def as_np(t):
    return t.detach().numpy()


def trains_alike(pt, fm, fopt, tm, topt):
    """The fusegrad model/optimizer and the torch ones give the same outputs, and training
    continues from the (restored) moments and step counts exactly as torch's does."""
    np.testing.assert_allclose(as_np(fm(fg.tensor(X))), as_np(tm(pt.tensor(X))), rtol=1e-5, atol=1e-6)
    train(pt, tm, topt, pt.tensor(X), pt.tensor(Y), 5)
    train(fg, fm, fopt, fg.tensor(X), fg.tensor(Y), 5)
    for (name, a), (_, b) in zip(fm.named_parameters(), tm.named_parameters()):
        np.testing.assert_allclose(as_np(a), as_np(b), rtol=1e-4, atol=1e-5, err_msg=name)


X = np.random.default_rng(0).standard_normal((16, 4)).astype(np.float32)
Y = np.random.default_rng(1).standard_normal((16, 3)).astype(np.float32)


@pytest.mark.torch
def test_torch_checkpoint_loads_into_fusegrad(pt, tmp_path):
    tm = mlp(pt)
    topt = pt.optim.Adam(tm.parameters(), lr=1e-2)
    train(pt, tm, topt, pt.tensor(X), pt.tensor(Y), 3)
    path = tmp_path / "ckpt.pt"
    pt.save({"model": tm.state_dict(), "optim": topt.state_dict(), "epoch": 3}, path)

    ckpt = fg.load(path)  # weights_only by default
    assert ckpt["epoch"] == 3 and isinstance(ckpt["model"], OrderedDict)
    fm = mlp(fg)
    fm.load_state_dict(ckpt["model"])
    fopt = fg.optim.Adam(fm.parameters(), lr=1e-2)
    fopt.load_state_dict(ckpt["optim"])
    trains_alike(pt, fm, fopt, tm, topt)


@pytest.mark.torch
def test_fusegrad_checkpoint_loads_into_torch(pt, tmp_path):
    fm = mlp(fg)
    fopt = fg.optim.Adam(fm.parameters(), lr=1e-2)
    train(fg, fm, fopt, fg.tensor(X), fg.tensor(Y), 3)
    path = tmp_path / "model.pt"
    fg.save({"model": fm.state_dict(), "optim": fopt.state_dict(), "note": "fg"}, path)
    with zipfile.ZipFile(path) as zf:  # PyTorch's layout: records under the file's stem
        names = zf.namelist()
        assert "model/data.pkl" in names and "model/version" in names and "model/byteorder" in names
        for info in zf.infolist():  # storages start on 64-byte boundaries (mmap-able)
            if "/data/" in info.filename:
                with open(path, "rb") as fh:
                    fh.seek(info.header_offset)
                    header = fh.read(30)
                n, m = struct.unpack("<HH", header[26:30])
                assert (info.header_offset + 30 + n + m) % 64 == 0

    ckpt = pt.load(path, weights_only=True)
    tm = mlp(pt)
    tm.load_state_dict(ckpt["model"])
    topt = pt.optim.Adam(tm.parameters(), lr=1e-2)
    topt.load_state_dict(ckpt["optim"])
    trains_alike(pt, fm, fopt, tm, topt)


def nested(lib):
    base = lib.arange(12, dtype=lib.float32).reshape(3, 4)
    return {
        "dtypes": [lib.tensor([1.5, -2], dtype=d) for d in (lib.float32, lib.float64, lib.float16, lib.bfloat16)]
        + [lib.tensor([3, -4], dtype=d) for d in (lib.int64, lib.int32, lib.int16, lib.int8)]
        + [lib.tensor([3, 4], dtype=lib.uint8), lib.tensor([True, False])],
        "views": (base, base.t(), base[1:, 2:], base[:, 1]),
        "scalar": lib.tensor(2.5), "empty": lib.zeros(0, 3), "grad": lib.ones(2, requires_grad=True),
        "param": lib.nn.Parameter(lib.ones(2)),
        "plain": OrderedDict(a=[1, 2.5, None, True, "s", b"by", 1 + 2j], b=(1, (2, {3})), c=Counter("aab"),
                             e=bytearray(b"xy")),
        "meta": [lib.float64, lib.Size([2, 3]), lib.device("cpu")],
    }


def summary(x):
    """Library-neutral description of a loaded object (tensors: class, dtype, values, grad flag)."""
    if hasattr(x, "requires_grad") and hasattr(x, "dtype"):
        kind = "param" if type(x).__name__ == "Parameter" else "tensor"
        return (kind, str(x.dtype).split(".")[-1], x.detach().float().numpy().tolist(), x.requires_grad)
    if isinstance(x, dict):
        return type(x).__name__, {k: summary(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x).__name__, [summary(v) for v in x]
    if type(x).__name__ in ("dtype", "device"):
        return type(x).__name__, str(x).split(".")[-1]
    return x


@pytest.mark.torch
@pytest.mark.parametrize("direction", ["fg->torch", "torch->fg", "fg->fg"])
def test_nested_containers_round_trip(pt, direction):
    src, dst = {"fg->torch": (fg, pt), "torch->fg": (pt, fg), "fg->fg": (fg, fg)}[direction]
    obj = nested(src)
    buf = io.BytesIO()
    src.save(obj, buf)
    buf.seek(0)
    got = dst.load(buf, weights_only=True)
    assert summary(got) == summary(nested(dst))
    # views of one tensor still share memory after loading
    base, t, _, col = got["views"]
    base.add_(1) if dst is fg else base.data.add_(1)
    assert float(t[2, 1]) == float(base[1, 2]) == 7.0 and float(col[0]) == 2.0


def malicious(marker):
    """A checkpoint whose pickle calls ``open(marker, "w")`` when loaded unsafely."""
    class Evil:
        def __reduce__(self):
            return open, (str(marker), "w")
    buf = io.BytesIO()
    write_archive(buf, "archive", pickle.dumps({"w": Evil()}, protocol=2), {})
    return buf.getvalue()


@pytest.mark.torch
def test_weights_only_refuses_code(pt, tmp_path):
    marker = tmp_path / "pwned"
    data = malicious(marker)
    for lib in (fg, pt):
        with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
            lib.load(io.BytesIO(data))
        with pytest.raises(pickle.UnpicklingError, match="GLOBAL builtins.open|GLOBAL io.open|open"):
            lib.load(io.BytesIO(data), weights_only=True)
        assert not marker.exists()
    fg.load(io.BytesIO(data), weights_only=False)  # the file really is harmful: unsafe loading runs it
    assert marker.exists()


class Config:
    def __init__(self, lr):
        self.lr = lr


def test_weights_only_objects_and_safe_globals(tmp_path):
    path = tmp_path / "c.pt"
    fg.save({"cfg": Config(0.5), "w": fg.ones(2)}, path)
    with pytest.raises(pickle.UnpicklingError, match="Unsupported global: GLOBAL test_serialization.Config"):
        fg.load(path)
    assert fg.load(path, weights_only=False)["cfg"].lr == 0.5
    with fg.serialization.safe_globals([Config]):
        assert fg.load(path)["cfg"].lr == 0.5
    with pytest.raises(pickle.UnpicklingError):
        fg.load(path)
    # protocol 4 (STACK_GLOBAL) and a BUILD on a non-allowlisted object are refused too
    buf = io.BytesIO()
    write_archive(buf, "archive", pickle.dumps({"x": Config(1.0)}, protocol=4), {})
    with pytest.raises(pickle.UnpicklingError, match="Unsupported global"):
        fg.load(io.BytesIO(buf.getvalue()))
    with pytest.raises(RuntimeError, match="Invalid magic number"):  # (neither zip nor legacy: as torch)
        fg.load(io.BytesIO(pickle.dumps([1], protocol=2)))
    with pytest.raises(RuntimeError, match="CUDA"):
        b = io.BytesIO()
        fg.save(fg.ones(1), b)
        b.seek(0)
        fg.load(b, map_location="cuda")
    b.seek(0)
    assert fg.load(b, map_location=fg.device("cpu")).tolist() == [1.0]


def test_whole_module_pickles_unsafely(tmp_path):
    m = mlp(fg)
    path = tmp_path / "m.pt"
    fg.save(m, path)
    with pytest.raises(pickle.UnpicklingError):
        fg.load(path)
    m2 = fg.load(path, weights_only=False)
    np.testing.assert_array_equal(as_np(m2(fg.tensor(X))), as_np(m(fg.tensor(X))))
    assert os.path.getsize(path) > 0


def test_loaded_views_report_their_storage_and_offset():
    """Tensors loaded from one storage share it as PyTorch's do: a view keeps its offset and
    its untyped_storage() is the base's (code finding tied weights by storage relies on it)."""
    base = fg.arange(10.0)
    buf = io.BytesIO()
    fg.save({"a": base, "b": base[2:6], "c": base[::3]}, buf)
    buf.seek(0)
    got = fg.load(buf)
    assert got["b"].storage_offset() == 2 and got["c"].stride() == (3,)
    assert got["b"].untyped_storage().data_ptr() == got["a"].untyped_storage().data_ptr()
    got["b"][0] = 100.0
    assert got["a"][2].item() == 100.0 and got["c"].tolist() == [0.0, 3.0, 6.0, 9.0]


@pytest.mark.parametrize("weights_only", [True, False])
def test_legacy_format_checkpoints_load(weights_only):
    """torch.save(..., _use_new_zipfile_serialization=False) (PyTorch before 1.6: old model
    zoos' .pth files): a state dict, a view sharing its base's storage, several dtypes."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    base = torch.arange(10.0)
    obj = {"sd": m.state_dict(), "a": base, "b": base[2:6], "i": torch.tensor([1, -2]),
           "h": torch.tensor([0.5, 2.0], dtype=torch.float16), "step": 7}
    buf = io.BytesIO()
    torch.save(obj, buf, _use_new_zipfile_serialization=False)
    buf.seek(0)
    got = fg.load(buf, weights_only=weights_only)
    assert got["step"] == 7 and got["i"].tolist() == [1, -2] and got["h"].dtype == fg.float16
    assert got["b"].tolist() == [2.0, 3.0, 4.0, 5.0] and got["b"].storage_offset() == 2
    ours = fg.nn.Sequential(fg.nn.Linear(3, 4), fg.nn.BatchNorm1d(4))
    ours.load_state_dict(got["sd"])
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(ours.state_dict()[k].numpy(), v.numpy(), err_msg=k)
    for bad in (pickle.dumps({"a": 1}), b"", b"hello world"):  # errors as torch's: RuntimeError, EOFError, pickle's
        raised = []
        for lib in (fg, torch):
            try:
                lib.load(io.BytesIO(bad), weights_only=False)
            except Exception as e:  # noqa: BLE001 - the type and message are what is compared
                raised.append((type(e), str(e)))
        assert len(raised) == 2 and raised[0] == raised[1], raised


def test_legacy_format_is_written_as_pytorch_reads_it():
    """fusegrad.save(..., _use_new_zipfile_serialization=False): PyTorch's legacy format (its
    header and storage records), read back by torch.load (weights_only too) and fusegrad.load."""
    torch = pytest.importorskip("torch")
    base = fg.arange(10.0)
    obj = {"sd": fg.nn.Linear(3, 2).state_dict(), "a": base, "b": base[2:6], "i": fg.tensor([1, -2]),
           "h": fg.tensor([0.5, 2.0], dtype=fg.float16), "step": 7}
    buf = io.BytesIO()
    fg.save(obj, buf, _use_new_zipfile_serialization=False)
    ref = io.BytesIO()
    torch.save({"x": torch.ones(1)}, ref, _use_new_zipfile_serialization=False)
    assert buf.getvalue()[:40] == ref.getvalue()[:40]  # (magic number, version, system information)
    for got in (torch.load(io.BytesIO(buf.getvalue()), weights_only=True), fg.load(io.BytesIO(buf.getvalue()))):
        assert got["step"] == 7 and got["i"].tolist() == [1, -2] and got["b"].tolist() == [2.0, 3.0, 4.0, 5.0]
        assert str(got["h"].dtype).endswith("float16") and got["b"].storage_offset() == 2
        np.testing.assert_array_equal(got["sd"]["weight"].numpy(), obj["sd"]["weight"].numpy())


class _Unsafe:
    """A class no weights-only load allows (pickled by its module-level name)."""


def test_get_unsafe_globals_in_checkpoint_as_torch():
    """torch.serialization.get_unsafe_globals_in_checkpoint: the globals a weights-only load
    would refuse, from the pickle's opcodes (was missing; found by yp)."""
    import collections
    import io

    import torch
    got = []
    for T in (fg, torch):
        buf = io.BytesIO()
        T.save({"a": T.ones(2), "f": _Unsafe(), "c": collections.OrderedDict(), "g": [_Unsafe()], "s": T.Size([2]),
                "sd": T.nn.Linear(2, 2).state_dict()}, buf)
        row = []
        for extra in ([], [_Unsafe]):
            with T.serialization.safe_globals(extra):
                buf.seek(0)
                row.append(T.serialization.get_unsafe_globals_in_checkpoint(buf))
        got.append(row)
    assert got[0] == got[1] == [[f"{__name__}._Unsafe"], []]
