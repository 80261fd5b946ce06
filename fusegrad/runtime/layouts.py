"""Tensor layouts, as ``torch.layout``: ``fusegrad.strided`` (every dense Tensor),
``fusegrad.sparse_coo`` (``runtime.sparse_coo.SparseCOOTensor``) and ``fusegrad.sparse_csr``
(``runtime.sparse_csr.SparseCSRTensor``)."""
from __future__ import annotations


class layout:
    """How a tensor's elements are stored; compared by identity, as torch's."""
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"fusegrad.{self.name}"

    def __reduce__(self):
        return (_named, (self.name,))


strided = layout("strided")
sparse_coo = layout("sparse_coo")
sparse_csr = layout("sparse_csr")
_BY_NAME = {l.name: l for l in (strided, sparse_coo, sparse_csr)}


def _named(name: str) -> layout:
    """The layout called ``name`` (unpickling keeps identity)."""
    return _BY_NAME[name]
