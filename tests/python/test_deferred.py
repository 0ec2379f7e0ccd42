"""DistributedOptimizer(defer_updates=True): each parameter's update runs just before the next
forward pass of its module; the result is bit-identical to waiting at step()."""

import copy

import pytest
import torch

from test_optimizer import assert_identical_across_ranks, batch, flat, loss_of, make_model


def run(hvd, model, steps, defer, op=None, momentum=0.9, by_hand=False):
    """`steps` steps with a learning rate that changes every step (a scheduler stepped right
    after the optimizer); returns the optimizer. Each gradient is averaged on its own (wfbp):
    fused buffers at 3+ ranks depend on timing, which would change the sums' order."""
    sgd = torch.optim.SGD(model.parameters(), lr=0.1, momentum=momentum, weight_decay=1e-3)
    opt = hvd.DistributedOptimizer(sgd, named_parameters=model.named_parameters(),
                                   overlap="wfbp", defer_updates=defer,
                                   op=op if op is not None else hvd.Average)
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0 / (1 + step))
    for step in range(steps):
        opt.zero_grad()
        loss_of(model, *batch(hvd.rank(), step)).backward()
        if by_hand:
            opt.synchronize()
            with opt.skip_synchronize():
                opt.step()
        else:
            opt.step()
        schedule.step()
    return opt


@pytest.mark.parametrize("case", ["average", "sum", "no_momentum", "synchronize_by_hand"])
def test_equals_the_undeferred_optimizer_bit_for_bit(hvd, case):
    op = hvd.Sum if case == "sum" else hvd.Average
    momentum = 0.0 if case == "no_momentum" else 0.9
    by_hand = case == "synchronize_by_hand"
    plain = make_model(seed=21)
    deferred = copy.deepcopy(plain)
    run(hvd, plain, 5, False, op, momentum, by_hand)
    opt = run(hvd, deferred, 5, True, op, momentum, by_hand)
    opt.finish_updates()
    assert torch.equal(flat(plain), flat(deferred))
    assert_identical_across_ranks(hvd, flat(deferred), "deferred_" + case)


def test_an_update_waits_for_the_forward_pass_of_its_module(hvd):
    model = make_model(seed=22)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(),
                                   defer_updates=True)
    opt.zero_grad()
    loss_of(model, *batch(hvd.rank(), 0)).backward()
    before = [p.detach().clone() for p in model.parameters()]
    opt.step()
    # Nothing moved yet; the gradients are the optimizer's until their update.
    assert all(torch.equal(a, p) for a, p in zip(before, model.parameters()))
    assert all(p.grad is None for p in model.parameters())
    # The first layer's forward applies its update, and only its own.
    with torch.no_grad():
        model[0](batch(hvd.rank(), 1)[0])
    first, last = model[0], model[2]
    assert not torch.equal(before[0], first.weight) and not torch.equal(before[1], first.bias)
    assert torch.equal(before[2], last.weight) and torch.equal(before[3], last.bias)
    # The optimizer's state_dict() applies the rest first.
    opt.state_dict()
    assert not torch.equal(before[2], last.weight)


def test_the_next_step_applies_what_no_forward_reached(hvd):
    """Steps whose gradients are set by hand (no forward pass, no backward): the next step()
    applies the previous update before it submits, and the result equals waiting at step()."""
    models = []
    for defer in (False, True):
        model = make_model(seed=23)
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1,
                                                       weight_decay=1e-3),
                                       named_parameters=model.named_parameters(),
                                       overlap="wfbp", defer_updates=defer)
        schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0 / (1 + step))
        for step in range(3):
            opt.zero_grad()
            loss_of(model, *batch(hvd.rank(), step)).backward()
            opt.step()
            schedule.step()
            for p in model.parameters():
                p.grad = torch.full_like(p, 0.01 * (hvd.rank() + 1))
            opt.step()
            schedule.step()
        opt.finish_updates()
        models.append(model)
    assert torch.equal(flat(models[0]), flat(models[1]))


def test_a_parameter_used_outside_its_module_raises(hvd):
    model = make_model(seed=24)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(),
                                   defer_updates=True)
    x, y = batch(hvd.rank(), 0)
    opt.zero_grad()
    loss_of(model, x, y).backward()
    opt.step()
    # The first layer's weight used functionally, without model[0]'s forward.
    h = torch.tanh(torch.nn.functional.linear(x, model[0].weight, model[0].bias))
    with pytest.raises(RuntimeError, match="'0[.](weight|bias)' was used by a forward pass "
                                           "before its deferred update"):
        torch.nn.functional.cross_entropy(model[2](h), y).backward()
    opt.finish_updates()


def test_defer_updates_needs_bsp(hvd):
    model = make_model(seed=25)
    with pytest.raises(ValueError, match="defer_updates=True needs sync=\"bsp\""):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=model.named_parameters(),
                                 defer_updates=True, sync="local:period=2")
