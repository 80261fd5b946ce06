"""Process groups over MPI communicators: the world group made by ``init_process_group``
and the sub-groups of ``new_group``, with rank translation between them."""
from __future__ import annotations

import os
from datetime import timedelta
from typing import Optional, Sequence

from . import faults


def _mpi():
    """mpi4py's MPI module (imported here only: importing fusegrad must not need mpi4py)."""
    try:
        from mpi4py import MPI
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise RuntimeError("fusegrad.distributed needs mpi4py and an MPI library: "
                           "pip install 'fusegrad[dist]' (mpi4py and the mpich wheel)") from e
    return MPI


class ProcessGroup:
    """A set of ranks sharing an MPI communicator. ``comm`` is None on ranks outside it."""

    def __init__(self, comm, ranks: Sequence[int]):
        self.comm = comm
        self.ranks = list(ranks)  # global ranks, in group-rank order

    def rank(self) -> int:
        return self.comm.Get_rank() if self.comm is not None else -1

    def size(self) -> int:
        return len(self.ranks)

    def group_rank(self, global_rank: int) -> int:
        """The rank inside this group of a global rank (PyTorch's src/dst are global)."""
        try:
            return self.ranks.index(global_rank)
        except ValueError:
            raise ValueError(f"Global rank {global_rank} is not part of group {self.ranks}") from None

    def __repr__(self) -> str:
        return f"ProcessGroup(backend='mpi', ranks={self.ranks})"


class _World:
    """The one default group of this process (None until ``init_process_group``)."""
    group: Optional[ProcessGroup] = None


GroupMember = type("GroupMember", (), {"WORLD": None, "NON_GROUP_MEMBER": -100})


def is_available() -> bool:
    """True when mpi4py can be imported (the only backend is MPI)."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def is_mpi_available() -> bool:
    return is_available()


def is_nccl_available() -> bool:
    return False


def is_gloo_available() -> bool:
    return False


def is_initialized() -> bool:
    return _World.group is not None


def _check_env(name: str, expected: int, given: int) -> None:
    env = os.environ.get(name)
    if given is not None and given >= 0 and given != expected:
        raise ValueError(f"init_process_group: {name.lower()}={given} but MPI started this process as "
                         f"{name.lower()} {expected}")
    if env is not None and int(env) != expected:
        raise ValueError(f"init_process_group: environment variable {name}={env} disagrees with MPI's "
                         f"{name.lower()} {expected} (mpiexec sets the rank and world size)")


def init_process_group(backend: Optional[str] = None, init_method: Optional[str] = None,
                       timeout: Optional[timedelta] = None, world_size: int = -1, rank: int = -1,
                       store=None, group_name: str = "", pg_options=None, device_id=None) -> None:
    """Join the job started by ``mpiexec -n N``: rank and world size come from MPI.

    ``env://`` (and its ``RANK``/``WORLD_SIZE``/``MASTER_ADDR``/``MASTER_PORT`` variables) is
    accepted; a rank or world size that disagrees with MPI's raises. Installs an excepthook
    that aborts the whole job, naming this rank and its exception, when this rank raises."""
    if backend is not None and str(backend).lower() != "mpi":
        raise ValueError(f"fusegrad.distributed supports backend='mpi' only, got {backend!r}")
    if init_method is not None and not (init_method.startswith("env://") or init_method.startswith("mpi://")):
        raise ValueError(f"init_process_group: init_method {init_method!r} is not supported with the MPI "
                         "backend (use env:// or leave it unset)")
    if _World.group is not None:
        raise ValueError("trying to initialize the default process group twice!")
    MPI = _mpi()
    world = MPI.COMM_WORLD
    _check_env("RANK", world.Get_rank(), rank)
    _check_env("WORLD_SIZE", world.Get_size(), world_size)
    _World.group = GroupMember.WORLD = ProcessGroup(world.Dup(), range(world.Get_size()))
    faults.install(world)


def get_global_rank(group: ProcessGroup, group_rank: int) -> int:
    """The global rank of rank ``group_rank`` of ``group``."""
    if not 0 <= group_rank < group.size():
        raise ValueError(f"Group rank {group_rank} is not part of group {group.ranks}")
    return group.ranks[group_rank]


def get_group_rank(group: ProcessGroup, global_rank: int) -> int:
    """The rank inside ``group`` of global rank ``global_rank``."""
    return group.group_rank(global_rank)


def destroy_process_group(group: Optional[ProcessGroup] = None) -> None:
    """Free ``group``'s communicator (the default group and its excepthook when None)."""
    if group is None or group is _World.group:
        g = _World.group
        if g is None:
            raise RuntimeError("Default process group has not been initialized, "
                               "please make sure to call init_process_group.")
        g.comm.Free()
        _World.group = GroupMember.WORLD = None  # (the abort hook stays: see distributed.faults)
    elif group.comm is not None:
        group.comm.Free()
        group.comm = None


def default_group() -> ProcessGroup:
    if _World.group is None:
        raise ValueError("Default process group has not been initialized, "
                         "please make sure to call init_process_group.")
    return _World.group


def resolve(group: Optional[ProcessGroup]) -> ProcessGroup:
    return default_group() if group is None else group


def get_rank(group: Optional[ProcessGroup] = None) -> int:
    """This process's rank in ``group`` (-1 when it is not a member)."""
    return resolve(group).rank()


def get_world_size(group: Optional[ProcessGroup] = None) -> int:
    g = resolve(group)
    return g.size() if g.comm is not None else -1


def get_backend(group: Optional[ProcessGroup] = None) -> str:
    resolve(group)
    return "mpi"


def new_group(ranks: Optional[Sequence[int]] = None, timeout=None, backend=None, pg_options=None,
              use_local_synchronization: bool = False, group_desc=None) -> ProcessGroup:
    """A group of the given global ranks; every rank of the world must call it (as PyTorch)."""
    world = default_group()
    if ranks is None:
        ranks = world.ranks
    ranks = sorted(int(r) for r in ranks)
    for r in ranks:
        if not 0 <= r < world.size():
            raise ValueError(f"new_group: rank {r} is outside the world of size {world.size()}")
    comm = world.comm.Create(world.comm.Get_group().Incl(ranks))
    MPI = _mpi()
    return ProcessGroup(comm if comm != MPI.COMM_NULL else None, ranks)
