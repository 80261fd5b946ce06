"""``torch.distributed``'s collectives of picklable Python objects (a config broadcast from
rank 0, metrics gathered from every rank), over mpi4py's pickling collectives. Ranks given
as ``src``/``dst`` are global ranks, as PyTorch's."""
from __future__ import annotations

from typing import Any, List, Optional

from .collectives import member
from .process_group import ProcessGroup


def broadcast_object_list(object_list: List[Any], src: int = 0, group: Optional[ProcessGroup] = None,
                          device=None, group_src: Optional[int] = None) -> None:
    """Rank ``src``'s ``object_list`` items copied into every rank's list, in place."""
    g = member(group, "broadcast_object_list")
    if g is None:
        return
    root = group_src if group_src is not None else g.group_rank(src)
    object_list[:] = g.comm.bcast(list(object_list) if g.rank() == root else None, root=root)


def all_gather_object(object_list: List[Any], obj: Any, group: Optional[ProcessGroup] = None) -> None:
    """``object_list`` (one slot per rank) filled with every rank's ``obj``, in rank order."""
    g = member(group, "all_gather_object")
    if g is None:
        return
    if len(object_list) != g.size():
        raise ValueError(f"all_gather_object: object_list has {len(object_list)} slots for {g.size()} ranks")
    object_list[:] = g.comm.allgather(obj)


def gather_object(obj: Any, object_gather_list: Optional[List[Any]] = None, dst: int = 0,
                  group: Optional[ProcessGroup] = None, group_dst: Optional[int] = None) -> None:
    """Every rank's ``obj`` into rank ``dst``'s ``object_gather_list`` (one slot per rank)."""
    g = member(group, "gather_object")
    if g is None:
        return
    root = group_dst if group_dst is not None else g.group_rank(dst)
    if g.rank() == root and (object_gather_list is None or len(object_gather_list) != g.size()):
        raise ValueError(f"gather_object: the destination needs an object_gather_list of {g.size()} slots")
    got = g.comm.gather(obj, root=root)
    if g.rank() == root:
        object_gather_list[:] = got


def scatter_object_list(scatter_object_output_list: List[Any], scatter_object_input_list: Optional[List[Any]] = None,
                        src: int = 0, group: Optional[ProcessGroup] = None, group_src: Optional[int] = None) -> None:
    """Rank ``src``'s ``scatter_object_input_list[i]`` into rank i's ``scatter_object_output_list[0]``."""
    g = member(group, "scatter_object_list")
    if g is None:
        return
    if not isinstance(scatter_object_output_list, list) or len(scatter_object_output_list) < 1:
        raise ValueError("Expected argument scatter_object_output_list to be a list of size at least 1.")
    root = group_src if group_src is not None else g.group_rank(src)
    items = None
    if g.rank() == root:
        items = list(scatter_object_input_list or ())
        if len(items) != g.size():
            raise ValueError(f"scatter_object_list: the source needs {g.size()} objects, got {len(items)}")
    scatter_object_output_list[0] = g.comm.scatter(items, root=root)
