"""DistributedOptimizer and the broadcasts of state, against references every rank computes
from every rank's data."""

import copy

import numpy as np
import pytest
import torch

from conftest import expected_size


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))


def batch(rank, step, micro=0):
    g = torch.Generator().manual_seed(10000 * step + 100 * rank + micro)
    return torch.randn(6, 8, generator=g), torch.randint(0, 3, (6,), generator=g)


def loss_of(model, x, y):
    return torch.nn.functional.cross_entropy(model(x), y)


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def assert_identical_across_ranks(hvd, tensor, name):
    gathered = hvd.allgather(tensor.reshape(1, -1), name=name)
    for r in range(hvd.size()):
        assert torch.equal(gathered[r], gathered[0]), "rank %d differs from rank 0" % r


def train(model, opt, rank, steps, passes=1):
    for step in range(steps):
        opt.zero_grad()
        for m in range(passes):
            loss_of(model, *batch(rank, step, m)).backward()
        opt.step()


def reference_training(initial, steps, n, passes, lr, momentum, op_sum=False):
    """Serial: every step averages (or sums) the ranks' gradients, each accumulated over
    `passes` micro-batches."""
    model = copy.deepcopy(initial)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    for step in range(steps):
        grads = None
        for r in range(n):
            model.zero_grad()
            for m in range(passes):
                loss_of(model, *batch(r, step, m)).backward()
            g = [p.grad.detach().clone() for p in model.parameters()]
            grads = g if grads is None else [a + b for a, b in zip(grads, g)]
        for p, g in zip(model.parameters(), grads):
            p.grad = g if op_sum else g / n
        opt.step()
    return model


@pytest.mark.parametrize("overlap", ["none", "wfbp", "fusion", "priority"])
def test_replicas_identical_and_equal_to_reference(hvd, overlap):
    n = hvd.size()
    model = make_model(seed=hvd.rank())  # different on every rank before the broadcast
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                   overlap=overlap)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    initial = copy.deepcopy(model)
    assert_identical_across_ranks(hvd, flat(model), "initial")
    train(model, opt, hvd.rank(), 4)
    assert_identical_across_ranks(hvd, flat(model), "trained")
    ref = reference_training(initial, 4, n, 1, 0.1, 0.9)
    np.testing.assert_allclose(flat(model).numpy(), flat(ref).numpy(), rtol=1e-5, atol=1e-6)
    assert opt.frugal_strategy == "bsp"
    assert isinstance(opt, torch.optim.SGD)


@pytest.mark.parametrize("passes", [1, 3])
def test_backward_passes_per_step_equals_accumulation(hvd, passes):
    n = hvd.size()
    model = make_model(seed=7)
    initial = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                   named_parameters=model.named_parameters(),
                                   backward_passes_per_step=passes)
    train(model, opt, hvd.rank(), 3, passes)
    ref = reference_training(initial, 3, n, passes, 0.05, 0.0)
    np.testing.assert_allclose(flat(model).numpy(), flat(ref).numpy(), rtol=1e-5, atol=1e-6)


def test_too_many_backward_passes_raise(hvd):
    model = make_model(seed=3)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                   named_parameters=model.named_parameters())
    loss_of(model, *batch(hvd.rank(), 0)).backward()
    with pytest.raises((AssertionError, RuntimeError), match="backward_passes_per_step"):
        loss_of(model, *batch(hvd.rank(), 1)).backward()
    opt.step()


def test_op_sum(hvd):
    n = hvd.size()
    model = make_model(seed=5)
    initial = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                   named_parameters=model.named_parameters(), op=hvd.Sum)
    train(model, opt, hvd.rank(), 2)
    ref = reference_training(initial, 2, n, 1, 0.01, 0.0, op_sum=True)
    np.testing.assert_allclose(flat(model).numpy(), flat(ref).numpy(), rtol=1e-5, atol=1e-6)


def test_fp16_compression(hvd):
    n = hvd.size()
    model = make_model(seed=9)
    initial = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(),
                                   compression=hvd.Compression.fp16, compress_min_bytes=0)
    assert "fp16" in opt.frugal_reducer
    train(model, opt, hvd.rank(), 2)
    assert_identical_across_ranks(hvd, flat(model), "fp16")
    ref = reference_training(initial, 2, n, 1, 0.1, 0.0)
    np.testing.assert_allclose(flat(model).numpy(), flat(ref).numpy(), rtol=0, atol=2e-3)
    assert not np.array_equal(flat(model).numpy(), flat(ref).numpy())


def test_topk_with_error_feedback_runs_and_keeps_replicas(hvd):
    model = make_model(seed=11)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(),
                                   compress="topk:ratio=0.1", ef=True, compress_min_bytes=0)
    assert "topk" in opt.frugal_reducer
    before = flat(model).clone()
    train(model, opt, hvd.rank(), 3)
    assert not torch.equal(before, flat(model))
    assert_identical_across_ranks(hvd, flat(model), "topk")


def test_local_sgd_averages_every_period(hvd):
    if hvd.size() == 1:
        pytest.skip("needs two ranks")
    model = make_model(seed=13)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(),
                                   sync="local:period=2")
    assert opt.frugal_strategy.startswith("local")
    for step in range(3):
        opt.zero_grad()
        loss_of(model, *batch(hvd.rank(), step)).backward()
        opt.step()
        gathered = hvd.allgather(flat(model).reshape(1, -1), name="local")
        same = all(torch.equal(gathered[r], gathered[0]) for r in range(hvd.size()))
        # Local steps 1 and 3 leave the replicas apart; step 2 averages them.
        assert same == (step == 1), step


def test_refused_combinations_raise_value_error(hvd):
    model = make_model(seed=1)
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="nosuch"):
        hvd.DistributedOptimizer(sgd, named_parameters=model.named_parameters(),
                                 compress="nosuch")
    with pytest.raises(ValueError, match="overlap"):
        hvd.DistributedOptimizer(sgd, named_parameters=model.named_parameters(),
                                 overlap="sometimes")
    with pytest.raises(ValueError, match="fedavg"):
        hvd.DistributedOptimizer(sgd, named_parameters=model.named_parameters(),
                                 sync="fedavg:clients=4")
    with pytest.raises(ValueError, match="arch=ps:servers=1.* is not available from Python"):
        hvd.DistributedOptimizer(sgd, named_parameters=model.named_parameters(),
                                 arch="ps:servers=1")
    with pytest.raises(ValueError, match="Adasum"):
        hvd.DistributedOptimizer(sgd, named_parameters=model.named_parameters(), op=hvd.Adasum)


def test_parameter_mismatch_raises_on_every_rank(hvd):
    if hvd.size() == 1:
        pytest.skip("needs two ranks")
    width = 4 if hvd.rank() == 0 else 5
    model = torch.nn.Linear(width, 2)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    opt.zero_grad()
    model(torch.randn(3, width)).sum().backward()
    with pytest.raises(hvd.FrugalError, match="weight"):
        opt.step()


def test_broadcast_optimizer_state(hvd):
    model = make_model(seed=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1 * (hvd.rank() + 1), momentum=0.9)
    torch.manual_seed(100 + hvd.rank())
    loss_of(model, *batch(hvd.rank(), 0)).backward()
    opt.step()  # momentum buffers differ across ranks
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1)
    for p in model.parameters():
        assert_identical_across_ranks(hvd, opt.state[p]["momentum_buffer"], "momentum")


def test_broadcast_parameters_from_each_root(hvd):
    for root in range(hvd.size()):
        model = make_model(seed=hvd.rank() + 50)
        expected = flat(make_model(seed=root + 50))
        hvd.broadcast_parameters(list(model.named_parameters()), root_rank=root)
        assert torch.equal(flat(model), expected)
    with pytest.raises(ValueError, match="invalid params"):
        hvd.broadcast_parameters(42, root_rank=0)
