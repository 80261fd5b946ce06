"""``fusegrad.distributed``: PyTorch's ``torch.distributed`` API over MPI (mpi4py).

Launch one process per rank with ``mpiexec -n N python script.py``; each calls
``init_process_group(backend="mpi")``. mpi4py is imported only when a group is made, so
importing fusegrad works without it."""
from .collectives import (ReduceOp, Work, all_gather, all_gather_into_tensor, all_reduce, all_to_all,
                          all_to_all_single, barrier, broadcast,
                          gather, irecv, isend, monitored_barrier, recv, reduce, reduce_scatter_tensor, scatter,
                          send)
from .object_collectives import all_gather_object, broadcast_object_list, gather_object, scatter_object_list
from .process_group import (GroupMember, ProcessGroup, destroy_process_group, get_backend, get_global_rank,
                            get_group_rank, get_rank,
                            get_world_size, init_process_group, is_available, is_gloo_available,
                            is_initialized, is_mpi_available, is_nccl_available, new_group)

group = GroupMember

__all__ = ["ReduceOp", "Work", "all_gather", "all_gather_into_tensor", "all_reduce", "barrier", "broadcast",
           "gather", "irecv", "isend", "recv", "reduce", "reduce_scatter_tensor", "scatter", "send",
           "GroupMember", "ProcessGroup", "destroy_process_group", "get_backend", "get_rank", "get_world_size",
           "init_process_group", "is_available", "is_gloo_available", "is_initialized", "is_mpi_available",
           "is_nccl_available", "new_group", "group", "all_gather_object", "broadcast_object_list", "gather_object",
           "scatter_object_list", "get_global_rank", "get_group_rank", "monitored_barrier",
           "all_to_all", "all_to_all_single"]
