"""Collectives on tensors, in place on their NumPy arrays (MPI reads and writes the
buffers directly; a non-contiguous tensor goes through a contiguous copy).

Every collective first compares the shapes and dtypes of the participating tensors across
ranks with one tiny all-reduce, so a mismatch raises a clear error on every rank instead of
corrupting memory or hanging."""
from __future__ import annotations

import enum
from typing import Callable, List, Optional

import numpy as np

from ..runtime.tensor import Tensor
from ..tracer.trace import GraphBreak, capturing, user_frame
from .process_group import ProcessGroup, _mpi, resolve


class ReduceOp(enum.Enum):
    """Reduction operators, as ``torch.distributed.ReduceOp``."""
    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"

    def mpi(self):
        MPI = _mpi()
        return {"sum": MPI.SUM, "avg": MPI.SUM, "product": MPI.PROD, "min": MPI.MIN, "max": MPI.MAX}[self.value]


class Work:
    """Handle of an ``async_op=True`` collective: ``wait()`` completes it (and its write-back)."""

    def __init__(self, request, finish: Optional[Callable[[], None]] = None, keep=()):
        self._request = request
        self._finish = finish
        self._keep = keep  # buffers MPI still reads or writes until completion
        self._done = False

    def wait(self, timeout=None) -> bool:
        if not self._done:
            if self._request is not None:
                self._request.Wait()
            self._complete()
        return True

    def is_completed(self) -> bool:
        if not self._done and (self._request is None or self._request.Test()):
            self._complete()
        return self._done

    def _complete(self) -> None:
        self._done = True
        if self._finish is not None:
            self._finish()
        self._keep = self._finish = None


def _run(start: Callable, finish: Optional[Callable[[], None]], async_op: bool, keep=()) -> Optional[Work]:
    """Start a collective (``start(blocking)`` returns a request, or None when blocking)."""
    if async_op:
        return Work(start(False), finish, keep)
    start(True)
    if finish is not None:
        finish()
    return None


# ------------------------------------------------------------------ buffers
def _array(t: Tensor, what: str, op: str) -> np.ndarray:
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: {what} must be a Tensor, got {type(t).__name__}")
    a = t._data
    if not isinstance(a, np.ndarray):
        raise RuntimeError(f"{op}: {what} is a traced value; collectives run on concrete tensors")
    return a


def _buffer(t: Tensor, what: str, op: str):
    """A contiguous array MPI may write, and the write-back that updates ``t`` afterwards."""
    a = _array(t, what, op)
    if a.flags.c_contiguous and a.flags.writeable:
        return a, t._bump
    c = np.ascontiguousarray(a)

    def back():
        a[...] = c
        t._bump()
    return c, back


def _wire(a: np.ndarray) -> np.ndarray:
    """``a`` as MPI moves it: bfloat16 (which MPI has no type for) as its 16-bit patterns."""
    return a.view(np.uint16) if a.dtype.name == "bfloat16" else a


def _reducible(buf: np.ndarray, back: Callable[[], None]):
    """(the array MPI reduces, the write-back after it): bfloat16 through a float32 copy (each
    result rounded once) and bool through an int32 one (any/all by SUM/MAX/MIN/PRODUCT), which
    MPI cannot reduce themselves."""
    if buf.dtype.name != "bfloat16" and buf.dtype != np.bool_:
        return buf, back
    wide = buf.astype(np.float32 if buf.dtype.name == "bfloat16" else np.int32)

    def narrow():
        buf[...] = wide.astype(buf.dtype) if buf.dtype.name == "bfloat16" else wide != 0
        back()
    return wide, narrow


def _chain(*fns) -> Callable[[], None]:
    def run():
        for f in fns:
            if f is not None:
                f()
    return run


# ------------------------------------------------------------------ cross-rank checks
_DTYPES = {np.dtype(c): i for i, c in enumerate("?bBhHiIlLqQefdgFD")}


def _signature(arrays) -> list:
    sig = []
    for a in arrays:
        if a is None:
            sig += [-1, -1, -1]
            continue
        sig += [_DTYPES.get(a.dtype, 99), a.ndim, hash(a.shape) & 0x3FFFFFFF]
    return sig


def _describe(arrays) -> str:
    return ", ".join("none" if a is None else f"{list(a.shape)} {a.dtype}" for a in arrays)


def check_same(group: ProcessGroup, op: str, arrays, what: str = "tensor") -> None:
    """Raise on every rank when the arrays' shapes or dtypes differ across ranks (one small
    all-reduce of a signature; on a mismatch, one all-gather of the descriptions for the error)."""
    MPI = _mpi()
    sig = np.array(_signature(arrays), dtype=np.int64)
    n = np.array([sig.size, -sig.size], dtype=np.int64)
    group.comm.Allreduce(MPI.IN_PLACE, n, op=MPI.MAX)
    same = n[0] == -n[1]
    if same:
        both = np.concatenate([sig, -sig])
        group.comm.Allreduce(MPI.IN_PLACE, both, op=MPI.MAX)
        same = bool(np.array_equal(both[:sig.size], -both[sig.size:]))
    if not same:
        seen = group.comm.allgather(_describe(arrays))
        per_rank = "; ".join(f"rank {group.ranks[r]}: {d}" for r, d in enumerate(seen))
        raise RuntimeError(f"{op}: the {what} shapes or dtypes differ across ranks ({per_rank})")


def member(group: Optional[ProcessGroup], op: str) -> Optional[ProcessGroup]:
    if capturing():  # a compiled graph would replay without communicating: that call runs eagerly
        raise GraphBreak(f"fusegrad.distributed.{op} inside a compiled function at {user_frame()}")
    g = resolve(group)
    return g if g.comm is not None else None  # a non-member's call is a no-op, as PyTorch's


def _mpi_dtype_ok(a: np.ndarray, op: str) -> None:
    if a.dtype.kind not in "biufc" or a.dtype.itemsize > 16:
        raise TypeError(f"{op}: unsupported dtype {a.dtype} for MPI")


# ------------------------------------------------------------------ collectives
def all_reduce(tensor: Tensor, op: ReduceOp = ReduceOp.SUM, group: Optional[ProcessGroup] = None,
               async_op: bool = False) -> Optional[Work]:
    """Reduce ``tensor`` across ranks in place; every rank gets the result."""
    g = member(group, "all_reduce")
    if g is None:
        return None
    op = ReduceOp(op)  # an Enum: a ReduceOp passes through, a value string converts
    if op is ReduceOp.AVG and not tensor.is_floating_point():
        raise RuntimeError(f"all_reduce: ReduceOp.AVG needs a floating point tensor, got {tensor.dtype}")
    buf, back = _buffer(tensor, "tensor", "all_reduce")
    check_same(g, "all_reduce", [buf])
    buf, back = _reducible(buf, back)
    _mpi_dtype_ok(buf, "all_reduce")
    return _run(lambda blocking: iallreduce(g, buf, op, blocking), _chain(_averager(g, buf, op), back),
                async_op, (buf,))


def iallreduce(g: ProcessGroup, buf: np.ndarray, op: ReduceOp, blocking: bool = False):
    """The raw in-place all-reduce of a contiguous array (AVG leaves the division to the caller)."""
    MPI = _mpi()
    if blocking:
        g.comm.Allreduce(MPI.IN_PLACE, buf, op=op.mpi())
        return None
    return g.comm.Iallreduce(MPI.IN_PLACE, buf, op=op.mpi())


def _averager(g: ProcessGroup, buf: np.ndarray, op: ReduceOp):
    if op is not ReduceOp.AVG:
        return None

    def avg():
        np.true_divide(buf, g.size(), out=buf)
    return avg


def reduce(tensor: Tensor, dst: int = 0, op: ReduceOp = ReduceOp.SUM, group: Optional[ProcessGroup] = None,
           async_op: bool = False) -> Optional[Work]:
    """Reduce ``tensor`` across ranks into rank ``dst``'s tensor (global rank)."""
    g = member(group, "reduce")
    if g is None:
        return None
    op = ReduceOp(op)  # an Enum: a ReduceOp passes through, a value string converts
    buf, back = _buffer(tensor, "tensor", "reduce")
    check_same(g, "reduce", [buf])
    MPI = _mpi()
    root = g.group_rank(dst)
    mine = g.rank() == root

    def start(blocking):
        send = MPI.IN_PLACE if mine else buf
        recv = buf if mine else None
        if blocking:
            return g.comm.Reduce(send, recv, op=op.mpi(), root=root)
        return g.comm.Ireduce(send, recv, op=op.mpi(), root=root)
    return _run(start, _chain(_averager(g, buf, op) if mine else None, back if mine else None), async_op, (buf,))


def broadcast(tensor: Tensor, src: int = 0, group: Optional[ProcessGroup] = None, async_op: bool = False,
              group_src: Optional[int] = None) -> Optional[Work]:
    """Copy rank ``src``'s tensor (global rank) into every rank's tensor, in place."""
    g = member(group, "broadcast")
    if g is None:
        return None
    root = group_src if group_src is not None else g.group_rank(src)
    buf, back = _buffer(tensor, "tensor", "broadcast")
    check_same(g, "broadcast", [buf])
    buf = _wire(buf)
    return _run(lambda blocking: g.comm.Bcast(buf, root=root) if blocking else g.comm.Ibcast(buf, root=root),
                back, async_op, (buf,))


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor, group: Optional[ProcessGroup] = None,
                           async_op: bool = False) -> Optional[Work]:
    """Concatenate every rank's ``input_tensor`` along dim 0 (or stack) into ``output_tensor``."""
    g = member(group, "all_gather_into_tensor")
    if g is None:
        return None
    op = "all_gather_into_tensor"
    src = np.ascontiguousarray(_array(input_tensor, "input_tensor", op))
    out, back = _buffer(output_tensor, "output_tensor", op)
    if out.size != src.size * g.size() or out.dtype != src.dtype:
        raise RuntimeError(f"{op}: output_tensor {list(out.shape)} {out.dtype} must hold world size "
                           f"({g.size()}) x input_tensor {list(src.shape)} {src.dtype}")
    check_same(g, op, [src], "input_tensor")
    return _run(lambda b: g.comm.Allgather(src, out) if b else g.comm.Iallgather(src, out), back, async_op,
                (src, out))


def _vector(a: np.ndarray, counts: list) -> list:
    """``a`` as a vector collective's buffer: elements per rank and where each rank's start."""
    return [_wire(a), (counts, np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int).tolist())]


def _splits(sizes: Optional[list], rows: int, n: int, what: str, op: str) -> list:
    """Rows per rank along dim 0: ``sizes``, or ``rows`` split evenly."""
    if sizes is None:
        if rows % n:
            raise RuntimeError(f"{op}: {what} of {rows} rows does not split evenly over {n} ranks")
        return [rows // n] * n
    sizes = [int(s) for s in sizes]
    if len(sizes) != n or sum(sizes) != rows:
        raise RuntimeError(f"{op}: split sizes {sizes} of {what} need one per rank ({n}) summing to its {rows} rows")
    return sizes


def all_to_all_single(output: Tensor, input: Tensor, output_split_sizes: Optional[list] = None,
                      input_split_sizes: Optional[list] = None, group: Optional[ProcessGroup] = None,
                      async_op: bool = False) -> Optional[Work]:
    """Rank r's ``input`` rows of split q go to rank q's ``output`` rows of split r (even
    splits along dim 0 unless sizes are given): a mixture of experts' dispatch."""
    g = member(group, "all_to_all_single")
    if g is None:
        return None
    op, n = "all_to_all_single", g.size()
    src = np.ascontiguousarray(_array(input, "input", op))
    out, back = _buffer(output, "output", op)
    if src.dtype != out.dtype or src.shape[1:] != out.shape[1:]:
        raise RuntimeError(f"{op}: output {list(out.shape)} {out.dtype} and input {list(src.shape)} {src.dtype} "
                           "need one dtype and the same row shape")
    row = int(np.prod(src.shape[1:], dtype=np.int64))
    counts = [[s * row for s in _splits(sizes, a.shape[0] if a.ndim else 1, n, what, op)]
              for sizes, a, what in ((input_split_sizes, src, "input"), (output_split_sizes, out, "output"))]
    send, recv = _vector(src, counts[0]), _vector(out, counts[1])
    return _run(lambda b: g.comm.Alltoallv(send, recv) if b else g.comm.Ialltoallv(send, recv), back, async_op,
                (src, out))


def all_to_all(output_tensor_list: List[Tensor], input_tensor_list: List[Tensor],
               group: Optional[ProcessGroup] = None, async_op: bool = False) -> Optional[Work]:
    """``input_tensor_list[q]`` of rank r goes to ``output_tensor_list[r]`` of rank q."""
    g = member(group, "all_to_all")
    if g is None:
        return None
    op, n = "all_to_all", g.size()
    if len(input_tensor_list) != n or len(output_tensor_list) != n:
        raise RuntimeError(f"{op}: the tensor lists need one tensor per rank ({n})")
    ins = [np.ascontiguousarray(_array(t, "input_tensor_list", op)) for t in input_tensor_list]
    outs = [_array(t, "output_tensor_list", op) for t in output_tensor_list]
    if len({a.dtype for a in ins + outs}) > 1:
        raise RuntimeError(f"{op}: every tensor needs one dtype")
    flat_in = np.concatenate([a.ravel() for a in ins]) if ins else np.empty(0)
    flat_out = np.empty(sum(a.size for a in outs), ins[0].dtype)

    def spread() -> None:
        at = 0
        for t, a in zip(output_tensor_list, outs):
            a[...] = flat_out[at:at + a.size].reshape(a.shape)
            at += a.size
            t._bump()
    send, recv = _vector(flat_in, [a.size for a in ins]), _vector(flat_out, [a.size for a in outs])
    return _run(lambda b: g.comm.Alltoallv(send, recv) if b else g.comm.Ialltoallv(send, recv), spread, async_op,
                (flat_in, flat_out))


def all_gather(tensor_list: List[Tensor], tensor: Tensor, group: Optional[ProcessGroup] = None,
               async_op: bool = False) -> Optional[Work]:
    """Fill ``tensor_list[r]`` with rank r's ``tensor``, on every rank."""
    g = member(group, "all_gather")
    if g is None:
        return None
    src = np.ascontiguousarray(_array(tensor, "tensor", "all_gather"))
    outs = _list_of(tensor_list, g, src, "tensor_list", "all_gather")
    check_same(g, "all_gather", [src])
    out = np.empty((g.size(),) + src.shape, src.dtype)
    return _run(lambda b: g.comm.Allgather(src, out) if b else g.comm.Iallgather(src, out),
                _scatter_rows(out, outs), async_op, (src, out))


def _list_of(tensors, g: ProcessGroup, like: np.ndarray, what: str, op: str) -> list:
    if tensors is None or len(tensors) != g.size():
        raise ValueError(f"{op}: {what} must hold world size ({g.size()}) tensors, got "
                         f"{None if tensors is None else len(tensors)}")
    for i, t in enumerate(tensors):
        a = _array(t, f"{what}[{i}]", op)
        if a.shape != like.shape or a.dtype != like.dtype:
            raise RuntimeError(f"{op}: {what}[{i}] is {list(a.shape)} {a.dtype}, expected "
                               f"{list(like.shape)} {like.dtype} like the tensor")
    return list(tensors)


def _scatter_rows(out: np.ndarray, tensors: list) -> Callable[[], None]:
    def back():
        for row, t in zip(out, tensors):
            t._data[...] = row
            t._bump()
    return back


def reduce_scatter_tensor(output: Tensor, input: Tensor, op: ReduceOp = ReduceOp.SUM,
                          group: Optional[ProcessGroup] = None, async_op: bool = False) -> Optional[Work]:
    """Reduce ``input`` across ranks and leave rank r's slice (dim 0 split in world size parts)
    in ``output``."""
    g = member(group, "reduce_scatter_tensor")
    if g is None:
        return None
    name = "reduce_scatter_tensor"
    op = ReduceOp(op)  # an Enum: a ReduceOp passes through, a value string converts
    src = np.ascontiguousarray(_array(input, "input", name))
    out, back = _buffer(output, "output", name)
    if src.size != out.size * g.size() or out.dtype != src.dtype:
        raise RuntimeError(f"{name}: input {list(src.shape)} {src.dtype} must hold world size ({g.size()}) "
                           f"x output {list(out.shape)} {out.dtype}")
    check_same(g, name, [src], "input")
    mop = op.mpi()
    return _run(lambda b: g.comm.Reduce_scatter_block(src, out, op=mop) if b
                else g.comm.Ireduce_scatter_block(src, out, op=mop),
                _chain(_averager(g, out, op), back), async_op, (src, out))


def gather(tensor: Tensor, gather_list: Optional[List[Tensor]] = None, dst: int = 0,
           group: Optional[ProcessGroup] = None, async_op: bool = False) -> Optional[Work]:
    """Collect every rank's ``tensor`` into ``gather_list`` on rank ``dst`` (global rank)."""
    g = member(group, "gather")
    if g is None:
        return None
    src = np.ascontiguousarray(_array(tensor, "tensor", "gather"))
    root = g.group_rank(dst)
    mine = g.rank() == root
    if mine:
        outs = _list_of(gather_list, g, src, "gather_list", "gather")
    elif gather_list:
        raise ValueError("gather: Argument ``gather_list`` must NOT be specified on non-destination ranks.")
    check_same(g, "gather", [src])
    out = np.empty((g.size(),) + src.shape, src.dtype) if mine else None
    return _run(lambda b: g.comm.Gather(src, out, root=root) if b else g.comm.Igather(src, out, root=root),
                _scatter_rows(out, outs) if mine else None, async_op, (src, out))


def scatter(tensor: Tensor, scatter_list: Optional[List[Tensor]] = None, src: int = 0,
            group: Optional[ProcessGroup] = None, async_op: bool = False) -> Optional[Work]:
    """Rank ``src`` (global) sends ``scatter_list[r]`` to rank r, into its ``tensor``."""
    g = member(group, "scatter")
    if g is None:
        return None
    out, back = _buffer(tensor, "tensor", "scatter")
    root = g.group_rank(src)
    mine = g.rank() == root
    if mine:
        rows = _list_of(scatter_list, g, out, "scatter_list", "scatter")
        send = np.stack([np.asarray(t._data) for t in rows])
    elif scatter_list:
        raise ValueError("scatter: Argument ``scatter_list`` must NOT be specified on non-source ranks.")
    else:
        send = None
    check_same(g, "scatter", [out])
    return _run(lambda b: g.comm.Scatter(send, out, root=root) if b else g.comm.Iscatter(send, out, root=root),
                back, async_op, (send, out))


def barrier(group: Optional[ProcessGroup] = None, async_op: bool = False, device_ids=None) -> Optional[Work]:
    """Block until every rank of ``group`` has reached it."""
    g = member(group, "barrier")
    if g is None:
        return None
    return _run(lambda b: g.comm.Barrier() if b else g.comm.Ibarrier(), None, async_op)


def monitored_barrier(group: Optional[ProcessGroup] = None, timeout=None, wait_all_ranks: bool = False) -> None:
    """``barrier``: a rank that never arrives is one that failed, and that failure aborts
    the job (distributed.faults), so there is no rank left to report."""
    barrier(group)


# ------------------------------------------------------------------ point to point
def _p2p_header(a: np.ndarray) -> np.ndarray:
    return np.array(_signature([a]), dtype=np.int64)


def isend(tensor: Tensor, dst: int, group: Optional[ProcessGroup] = None, tag: int = 0) -> Optional[Work]:
    """Start sending ``tensor`` to global rank ``dst``; returns a Work to wait on."""
    g = member(group, "send")
    if g is None:
        return None
    buf = np.ascontiguousarray(_array(tensor, "tensor", "send"))
    peer = g.group_rank(dst)
    head = _p2p_header(buf)
    g.comm.Send(head, dest=peer, tag=2 * tag + 1)  # the shape travels first, so recv can check it
    return Work(g.comm.Isend(buf, dest=peer, tag=2 * tag), None, (buf,))


def send(tensor: Tensor, dst: int, group: Optional[ProcessGroup] = None, tag: int = 0) -> None:
    """Send ``tensor`` to global rank ``dst`` (blocks until the buffer may be reused)."""
    w = isend(tensor, dst, group, tag)
    if w is not None:
        w.wait()


def irecv(tensor: Tensor, src: Optional[int] = None, group: Optional[ProcessGroup] = None,
          tag: int = 0) -> Optional[Work]:
    """Start receiving into ``tensor`` from global rank ``src`` (any rank when None)."""
    g = member(group, "recv")
    if g is None:
        return None
    MPI = _mpi()
    buf, back = _buffer(tensor, "tensor", "recv")
    head = np.empty(3, np.int64)
    st = MPI.Status()
    g.comm.Recv(head, source=MPI.ANY_SOURCE if src is None else g.group_rank(src), tag=2 * tag + 1, status=st)
    peer = st.Get_source()
    if not np.array_equal(head, _p2p_header(buf)):
        raise RuntimeError(f"recv: the tensor sent by rank {g.ranks[peer]} differs in shape or dtype from "
                           f"the receiving tensor {list(buf.shape)} {buf.dtype}")
    w = Work(g.comm.Irecv(buf, source=peer, tag=2 * tag), back, (buf,))
    w.source = g.ranks[peer]
    return w


def recv(tensor: Tensor, src: Optional[int] = None, group: Optional[ProcessGroup] = None, tag: int = 0) -> int:
    """Receive into ``tensor``; returns the sender's global rank."""
    w = irecv(tensor, src, group, tag)
    if w is None:
        return -1
    w.wait()
    return w.source
