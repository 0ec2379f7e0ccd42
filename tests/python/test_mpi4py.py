"""MPI initialised by mpi4py before frugal: frugal uses it and leaves it initialised (mpi4py
finalises it at exit; a second MPI_Finalize would fail the job)."""

import torch
from mpi4py import MPI


def test_frugal_adopts_mpi_initialised_by_mpi4py():
    assert MPI.Is_initialized()
    import frugal.torch as hvd
    from frugal.torch import mpi_ops

    hvd.init(timeout=20)
    assert not mpi_ops._mpi.owns_mpi
    assert hvd.rank() == MPI.COMM_WORLD.Get_rank()
    assert hvd.size() == MPI.COMM_WORLD.Get_size()
    out = hvd.allreduce(torch.ones(5), op=hvd.Sum, name="x")
    assert torch.all(out == hvd.size())
    # mpi4py keeps working beside frugal.
    assert MPI.COMM_WORLD.allreduce(1) == hvd.size()
    hvd.shutdown()
    assert not hvd.is_initialized()
    hvd.init(timeout=20)
    assert torch.all(hvd.allreduce(torch.ones(2), op=hvd.Sum, name="y") == hvd.size())
    hvd.shutdown()
    assert not MPI.Is_finalized()
