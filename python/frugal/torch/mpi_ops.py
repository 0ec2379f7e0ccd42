"""Start-up, the ranks, and the collectives of frugal.torch (Horovod's ``mpi_ops``).

Every collective goes through frugal's engine: ranks match operations by name (an unnamed
operation is matched with the other ranks' unnamed operations of the same kind, in the order
they were made), and a rank that gives a name another shape, dtype, reduction or root than its
peers makes the operation raise FrugalError on every rank. Waits release the GIL.
"""

import atexit
import threading

import torch

from frugal import _frugal
from frugal._frugal import FrugalError
from frugal.torch.compression import Compression

# Reduction operations (Horovod's constants).
Average = "average"
Sum = "sum"
Adasum = "adasum"

_lock = threading.Lock()
_mpi = None  # the MPI runtime: lives until the interpreter exits
_runtime = None  # the engine: from init() to shutdown()


def init(comm=None, timeout=60.0, log_level="warning"):
    """Starts frugal on every rank of the job (collective).

    MPI may have been initialised before (by mpi4py, say): frugal then uses it and leaves it
    initialised at exit. ``comm`` must be None or the world communicator: frugal runs over all
    ranks. ``timeout`` bounds, in seconds, every wait for a peer; ``log_level`` is the engine's
    (debug, info, warning, error, off).
    """
    global _mpi, _runtime
    if comm is not None and not _is_world(comm):
        raise ValueError("frugal.torch.init: frugal runs over every rank (comm=None)")
    if timeout <= 0:
        raise ValueError("frugal.torch.init: timeout must be positive")
    with _lock:
        if _runtime is not None:
            return
        if _mpi is None:
            _mpi = _frugal.Mpi()
        _runtime = _frugal.start(_mpi, float(timeout), log_level)


def _is_world(comm):
    try:
        from mpi4py import MPI
    except ImportError:
        return False
    if isinstance(comm, (list, tuple)):
        return sorted(comm) == list(range(MPI.COMM_WORLD.Get_size()))
    return comm == MPI.COMM_WORLD or MPI.Comm.Compare(comm, MPI.COMM_WORLD) in (
        MPI.IDENT,
        MPI.CONGRUENT,
    )


def shutdown():
    """Stops the engine (collective). init() may be called again."""
    global _runtime
    with _lock:
        runtime, _runtime = _runtime, None
    if runtime is not None:
        runtime.stop()


@atexit.register
def _at_exit():
    global _mpi
    try:
        shutdown()
    except FrugalError:
        pass
    if _mpi is not None:
        _mpi.finalize()
        _mpi = None


def is_initialized():
    return _runtime is not None


def _rt():
    runtime = _runtime
    if runtime is None:
        raise ValueError("frugal.torch has not been initialised; call init() first")
    return runtime


def rank():
    return _rt().rank


def size():
    return _rt().size


def local_rank():
    """This rank's index among the ranks on its host."""
    return _rt().local_rank


def local_size():
    """The number of ranks on this rank's host."""
    return _rt().local_size


def mpi_threads_supported():
    return True


def mpi_enabled():
    return True


def mpi_built():
    return True


def gloo_enabled():
    return False


def gloo_built():
    return False


def nccl_built():
    return False


def rocm_built():
    return False


def cuda_built():
    return False


class Handle:
    """An operation in flight: give it to poll() or synchronize()."""

    __slots__ = ("_handle", "_finish", "_result", "_done")

    def __init__(self, handle, finish):
        self._handle = handle
        self._finish = finish
        self._result = None
        self._done = False


def _op_of(op, average):
    if average is not None:
        if op is not None:
            raise ValueError("give op or average, not both")
        return Average if average else Sum
    if op is None:
        return Average
    if op == Adasum:
        raise ValueError("op=Adasum is not available in frugal; use Average or Sum")
    if op not in (Average, Sum):
        raise ValueError("op must be frugal.torch.Average or frugal.torch.Sum")
    return op


def _name(name):
    if name is None:
        return "noname"
    if not isinstance(name, str) or not name:
        raise ValueError("a name must be a non-empty string")
    return name


def _submit(kind, tensor, name, op=Average, prescale=1.0, postscale=1.0, root=0):
    if not isinstance(tensor, torch.Tensor):
        raise ValueError("frugal.torch works on torch tensors, not %s" % type(tensor).__name__)
    return _frugal.submit(
        _rt(),
        kind,
        tensor.detach(),
        _name(name),
        op == Sum,
        float(prescale),
        float(postscale),
        int(root),
    )


def _in_place(kind, tensor, name, **kwargs):
    """Runs on `tensor` itself, or on a contiguous copy written back at synchronize()."""
    if tensor.is_contiguous():
        return Handle(_submit(kind, tensor, name, **kwargs), lambda out: tensor)
    work = tensor.detach().contiguous()

    def finish(out):
        with torch.no_grad():
            tensor.copy_(out)
        return tensor

    return Handle(_submit(kind, work, name, **kwargs), finish)


def _out_of_place(kind, tensor, name, **kwargs):
    work = tensor.detach().clone(memory_format=torch.contiguous_format)
    return Handle(_submit(kind, work, name, **kwargs), lambda out: out)


def poll(handle):
    """True when synchronize(handle) would return without waiting."""
    return handle._done or handle._handle.poll()


def synchronize(handle):
    """Waits for the operation and returns its result (FrugalError if it failed)."""
    if not handle._done:
        out = handle._handle.wait()
        handle._result = handle._finish(out)
        handle._done = True
        handle._handle = None
    return handle._result


# ---- allreduce ----


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0):
    """Averages (or sums) `tensor` over the ranks into a new tensor; returns a handle."""
    op = _op_of(op, average)
    return _out_of_place(_frugal.ALLREDUCE, tensor, name, op=op, prescale=prescale_factor,
                         postscale=postscale_factor)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0):
    """Averages (or sums) `tensor` over the ranks in place; returns a handle."""
    op = _op_of(op, average)
    return _in_place(_frugal.ALLREDUCE, tensor, name, op=op, prescale=prescale_factor,
                     postscale=postscale_factor)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0):
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor))


class _Allreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale, postscale):
        ctx.op, ctx.prescale, ctx.postscale = op, prescale, postscale
        return synchronize(allreduce_async(tensor, None, name, op, prescale, postscale))

    @staticmethod
    def backward(ctx, grad):
        return allreduce(grad, op=ctx.op, prescale_factor=ctx.prescale,
                         postscale_factor=ctx.postscale), None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0):
    """Averages (or, with op=Sum, sums) `tensor` over the ranks; `tensor` is not modified.

    Differentiable: the gradient is reduced the same way. float32 tensors are reduced with
    frugal's ring all-reduce; other dtypes are gathered and summed in rank order.
    """
    op = _op_of(op, average)
    compressed, ctx = compression.compress(tensor)
    reduced = _Allreduce.apply(compressed, name, op, prescale_factor, postscale_factor)
    return compression.decompress(reduced, ctx)


# ---- allgather ----


def allgather_async(tensor, name=None):
    """Concatenates every rank's `tensor` along dimension 0 (sizes of dimension 0 may differ);
    returns a handle."""
    return Handle(_submit(_frugal.ALLGATHER, tensor.detach().contiguous(), name),
                  lambda out: out)


class _Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name):
        ctx.rows = tensor.shape[0] if tensor.dim() > 0 else 1
        return synchronize(allgather_async(tensor, name))

    @staticmethod
    def backward(ctx, grad):
        reduced = allreduce(grad, op=Average)
        rows = allgather(torch.tensor([ctx.rows], dtype=torch.int64))
        offset = int(rows[: rank()].sum().item())
        return reduced.narrow(0, offset, ctx.rows), None


def allgather(tensor, name=None):
    """Every rank's `tensor`, concatenated along dimension 0 in rank order (differentiable)."""
    return _Allgather.apply(tensor, name)


# ---- broadcast ----


def broadcast_async(tensor, root_rank, name=None):
    """`root_rank`'s `tensor` into a new tensor on every rank; returns a handle."""
    return _out_of_place(_frugal.BROADCAST, tensor, name, root=root_rank)


def broadcast_async_(tensor, root_rank, name=None):
    """`root_rank`'s `tensor` copied into `tensor` on every rank; returns a handle."""
    return _in_place(_frugal.BROADCAST, tensor, name, root=root_rank)


def broadcast_(tensor, root_rank, name=None):
    return synchronize(broadcast_async_(tensor, root_rank, name))


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name):
        ctx.root_rank = root_rank
        return synchronize(broadcast_async(tensor, root_rank, name))

    @staticmethod
    def backward(ctx, grad):
        reduced = allreduce(grad, op=Average)
        if rank() != ctx.root_rank:
            reduced = reduced * 0
        return reduced, None, None


def broadcast(tensor, root_rank, name=None):
    """`root_rank`'s `tensor` on every rank, as a new tensor (differentiable)."""
    return _Broadcast.apply(tensor, root_rank, name)
