"""Broadcasts of model and optimizer state (Horovod's ``functions``)."""

import io

import torch

from frugal.torch.mpi_ops import broadcast_, broadcast_async_, rank, synchronize


def broadcast_parameters(params, root_rank):
    """Copies `root_rank`'s tensors into every rank's, in place (collective).

    `params` is a ``state_dict()`` (its tensors share storage with the model) or a list of
    ``named_parameters()`` pairs (or of tensors). Tensors are matched across ranks by name.
    """
    if isinstance(params, dict):
        items = sorted(params.items())
    elif isinstance(params, list):
        items = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError("invalid params of type: %s" % type(params).__name__)
    handles = []
    for name, p in items:
        if not isinstance(p, torch.Tensor):
            raise ValueError("broadcast_parameters: '%s' is not a tensor" % name)
        handles.append(broadcast_async_(p, root_rank, "param." + name if name else None))
    for h in handles:
        synchronize(h)


def broadcast_object(obj, root_rank=0, name=None):
    """`root_rank`'s `obj` (anything torch.save can write) on every rank (collective)."""
    if rank() == root_rank:
        buffer = io.BytesIO()
        torch.save(obj, buffer)
        data = torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)
        length = torch.tensor([data.numel()], dtype=torch.int64)
    else:
        length = torch.zeros(1, dtype=torch.int64)
    name = name or "object"
    broadcast_(length, root_rank, name + ".length")
    if rank() != root_rank:
        data = torch.empty(int(length.item()), dtype=torch.uint8)
    broadcast_(data, root_rank, name + ".data")
    if rank() == root_rank:
        return obj
    return torch.load(io.BytesIO(data.numpy().tobytes()))


def broadcast_optimizer_state(optimizer, root_rank):
    """Copies `root_rank`'s optimizer state (its state_dict: momentum buffers, step counts, the
    parameter groups' options) into every rank's optimizer (collective). The optimizers must
    hold the same parameters in the same order."""
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    state = broadcast_object(optimizer.state_dict(), root_rank, "optimizer_state")
    if rank() != root_rank:
        optimizer.load_state_dict(state)
