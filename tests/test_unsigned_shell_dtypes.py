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
    with pytest.raises(RuntimeError, match="uint16 cannot be saved"):  # (PyTorch's format names them otherwise)
        fg.save(fg.zeros(2, dtype=fg.uint16), "unused.pt")
