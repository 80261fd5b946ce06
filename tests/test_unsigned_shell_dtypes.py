"""uint16, uint32 and uint64, PyTorch's "shell" dtypes (16-bit images through a DataLoader,
hashes): made from NumPy and factories, collated, converted, indexed, concatenated and
compared as torch's; their promotion with other dtypes is refused with torch's error (the
DataLoader and from_numpy raised "no dtype for NumPy dtype uint16")."""
import numpy as np
import pytest
import torch
import torch.utils.data

import fusegrad as fg
import fusegrad.utils.data


def _program(T, data):
    img = np.array([[1, 2], [65535, 1000]], dtype=np.uint16)
    batch = next(iter(data.DataLoader([img, img * 0 + 7], batch_size=2)))
    a = T.from_numpy(img.reshape(-1))
    out = [str(batch.dtype).split(".")[-1], batch.numpy().tolist(), str(a.dtype), a.float().tolist(),
           a.to(T.int32).tolist(), (a * 2).tolist(), (a == 1).tolist(), (a / 2).tolist(), a.sum().item(),
           str(a.sum().dtype).split(".")[-1], T.cat([a, a]).tolist(), T.stack([a, a])[1, 1:].tolist(), a.clone()[2].item(),
           (a & 1).tolist(), T.tensor([1, 2], dtype=T.uint32).tolist(), T.zeros(2, dtype=T.uint64).tolist(),
           [str(T.iinfo(d)) for d in (T.uint16, T.uint32, T.uint64)], [d.is_signed for d in (T.uint16, T.uint64)],
           [d.itemsize for d in (T.uint16, T.uint32, T.uint64)], T.uint32 == T.uint32]
    with pytest.raises(RuntimeError) as info:
        T.promote_types(T.uint16, T.int32)
    out.append(str(info.value))
    return out


def test_shell_unsigned_dtypes_as_torch():
    got, want = _program(fg, fg.utils.data), _program(torch, torch.utils.data)
    got[2] = got[2].replace("fusegrad.", "torch.")
    assert got == want



def test_shell_unsigned_tensors_saved_and_loaded_as_torchs():
    """In PyTorch's format (bytes of an UntypedStorage, _rebuild_tensor_v3): fusegrad's file
    loads in torch and torch's in fusegrad, views sharing their storage."""
    import io
    values = {"u16": np.array([1, 2, 65535], np.uint16), "u32": np.array([7, 2**32 - 1], np.uint32),
              "u64": np.array([2**40, 3], np.uint64)}
    for save, load in ((fg, torch), (torch, fg)):
        state = {k: save.from_numpy(v.copy()) for k, v in values.items()}
        state["view"] = state["u16"][1:]
        buf = io.BytesIO()
        save.save(state, buf)
        back = load.load(io.BytesIO(buf.getvalue()))
        for k, v in values.items():
            assert str(back[k].dtype).split(".")[-1] == v.dtype.name
            np.testing.assert_array_equal(back[k].numpy(), v)
        back["u16"][1] = 9  # (the view shares the loaded storage, as torch's)
        assert back["view"][0].item() == 9
