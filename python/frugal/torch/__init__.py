"""frugal.torch: Horovod's PyTorch API on frugal's engine.

    import frugal.torch as hvd
    hvd.init()
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)

See docs/python.md for the API next to Horovod's, and frugal's own keyword arguments.
"""

from frugal.torch.compression import Compression
from frugal.torch.functions import (broadcast_object, broadcast_optimizer_state,
                                    broadcast_parameters)
from frugal.torch.mpi_ops import (Adasum, Average, FrugalError, Handle, Sum, allgather,
                                  allgather_async, allreduce, allreduce_, allreduce_async,
                                  allreduce_async_, broadcast, broadcast_, broadcast_async,
                                  broadcast_async_, cuda_built, gloo_built, gloo_enabled, init,
                                  is_initialized, local_rank, local_size, mpi_built, mpi_enabled,
                                  mpi_threads_supported, nccl_built, poll, rank, rocm_built,
                                  shutdown, size, synchronize)
from frugal.torch.optimizer import DistributedOptimizer
