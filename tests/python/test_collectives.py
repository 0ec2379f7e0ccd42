"""frugal.torch's collectives against numpy references computed from every rank's input."""

import time

import numpy as np
import pytest
import torch

from conftest import expected_size


def contribution(rank, shape, dtype, seed=0):
    """What rank `rank` contributes: reproducible on every rank."""
    rng = np.random.default_rng(1000 * seed + rank)
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-50, 50, size=shape).astype(dtype)


def test_ranks(hvd):
    assert hvd.is_initialized()
    assert hvd.size() == expected_size()
    assert 0 <= hvd.rank() < hvd.size()
    # One machine: every rank is local.
    assert hvd.local_size() == hvd.size()
    assert hvd.local_rank() == hvd.rank()


FLOAT_TYPES = [(np.float32, torch.float32), (np.float64, torch.float64)]
INT_TYPES = [(np.int32, torch.int32), (np.int64, torch.int64), (np.uint8, torch.uint8)]


@pytest.mark.parametrize("np_dtype,dtype", FLOAT_TYPES)
@pytest.mark.parametrize("op", ["average", "sum"])
def test_allreduce_float(hvd, np_dtype, dtype, op):
    n = hvd.size()
    shape = (17, 5)
    inputs = [contribution(r, shape, np_dtype, seed=1) for r in range(n)]
    ref = np.sum(np.stack(inputs).astype(np.float64), axis=0)
    if op == "average":
        ref = ref / n
    mine = torch.from_numpy(inputs[hvd.rank()].copy())
    before = mine.clone()
    out = hvd.allreduce(mine, op=hvd.Average if op == "average" else hvd.Sum, name="f." + op)
    assert torch.equal(mine, before), "allreduce must not modify its input"
    assert out.dtype == dtype and out.shape == mine.shape
    tol = 1e-5 if np_dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out.numpy(), ref, rtol=tol, atol=tol)
    # Every rank holds the same bits.
    gathered = hvd.allgather(out.reshape(1, -1), name="f.check." + op)
    for r in range(n):
        assert torch.equal(gathered[r], gathered[0])


@pytest.mark.parametrize("np_dtype,dtype", INT_TYPES)
def test_allreduce_sum_integers_exact(hvd, np_dtype, dtype):
    n = hvd.size()
    if np_dtype == np.uint8:
        inputs = [np.arange(10, dtype=np.uint8) + r for r in range(n)]
    else:
        inputs = [contribution(r, (4, 3), np_dtype, seed=2) for r in range(n)]
    ref = np.sum(np.stack(inputs).astype(np.int64), axis=0).astype(np_dtype)
    out = hvd.allreduce(torch.from_numpy(inputs[hvd.rank()].copy()), op=hvd.Sum)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out.numpy(), ref)


def test_allreduce_average_of_integers_is_refused(hvd):
    with pytest.raises(ValueError, match="op=Average needs a floating-point tensor"):
        hvd.allreduce(torch.arange(3), name="int.avg")


def test_allreduce_in_place_scaled_and_async(hvd):
    n = hvd.size()
    inputs = [contribution(r, (100,), np.float32, seed=3) for r in range(n)]
    t = torch.from_numpy(inputs[hvd.rank()].copy())
    handle = hvd.allreduce_async_(t, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0,
                                  name="scaled")
    out = hvd.synchronize(handle)
    assert out is t
    ref = 3.0 * np.sum(0.5 * np.stack(inputs).astype(np.float64), axis=0)
    np.testing.assert_allclose(t.numpy(), ref, rtol=1e-5, atol=1e-5)
    assert hvd.poll(handle)


def test_allreduce_non_contiguous_in_place(hvd):
    n = hvd.size()
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4) * (hvd.rank() + 1)
    view = base.t()  # not contiguous
    hvd.allreduce_(view, op=hvd.Sum, name="transposed")
    factor = sum(r + 1 for r in range(n))
    np.testing.assert_allclose(base.numpy(), np.arange(12).reshape(3, 4) * factor)


def test_async_handles_out_of_order_names(hvd):
    """Ranks submit the same names in different orders: names, not order, match them."""
    n = hvd.size()
    names = ["a", "b", "c", "d"]
    order = names if hvd.rank() % 2 == 0 else list(reversed(names))
    handles = {}
    for name in order:
        value = torch.full((1000,), float(names.index(name) + 10 * hvd.rank()))
        handles[name] = hvd.allreduce_async(value, op=hvd.Sum, name="ooo." + name)
    for name in names:
        out = hvd.synchronize(handles[name])
        expected = n * names.index(name) + 10 * sum(range(n))
        assert torch.all(out == expected), name
        assert hvd.poll(handles[name])


def test_many_unnamed_async(hvd):
    n = hvd.size()
    handles = [hvd.allreduce_async(torch.full((3,), float(i + hvd.rank())), op=hvd.Sum)
               for i in range(20)]
    for i, h in enumerate(handles):
        assert torch.all(hvd.synchronize(h) == n * i + sum(range(n)))


@pytest.mark.parametrize("np_dtype", [np.float32, np.float64, np.int64, np.uint8])
def test_allgather_variable_first_dimension(hvd, np_dtype):
    n = hvd.size()
    inputs = [contribution(r, (r + 1, 3), np_dtype, seed=4) for r in range(n)]
    mine = torch.from_numpy(inputs[hvd.rank()].copy())
    out = hvd.allgather(mine, name="gather")
    np.testing.assert_array_equal(out.numpy(), np.concatenate(inputs, axis=0))
    handle = hvd.allgather_async(mine, name="gather")
    np.testing.assert_array_equal(hvd.synchronize(handle).numpy(), np.concatenate(inputs))


def test_allgather_scalar(hvd):
    out = hvd.allgather(torch.tensor(float(hvd.rank())), name="scalar")
    assert out.tolist() == [float(r) for r in range(hvd.size())]


@pytest.mark.parametrize("np_dtype", [np.float32, np.int64, np.uint8, np.float64])
def test_broadcast_from_each_root(hvd, np_dtype):
    n = hvd.size()
    for root in range(n):
        inputs = [contribution(r, (6, 7), np_dtype, seed=5 + root) for r in range(n)]
        mine = torch.from_numpy(inputs[hvd.rank()].copy())
        out = hvd.broadcast(mine, root_rank=root, name="b%d" % root)
        np.testing.assert_array_equal(out.numpy(), inputs[root])
        np.testing.assert_array_equal(mine.numpy(), inputs[hvd.rank()])  # not modified
        hvd.broadcast_(mine, root_rank=root, name="b%d" % root)
        np.testing.assert_array_equal(mine.numpy(), inputs[root])
        h = hvd.broadcast_async_(torch.from_numpy(inputs[hvd.rank()].copy()), root, name="ba")
        np.testing.assert_array_equal(hvd.synchronize(h).numpy(), inputs[root])


def test_broadcast_bad_root_is_refused(hvd):
    with pytest.raises(ValueError, match="root_rank"):
        hvd.broadcast(torch.zeros(2), root_rank=hvd.size())


def test_allreduce_is_differentiable(hvd):
    n = hvd.size()
    x = torch.full((4,), float(hvd.rank() + 1), requires_grad=True)
    y = hvd.allreduce(x * 2, op=hvd.Sum, name="grad.fwd")
    assert torch.all(y.detach() == 2 * sum(r + 1 for r in range(n)))
    y.sum().backward()
    # d/dx of sum over ranks of 2x_r, then the gradient itself summed over the ranks.
    assert torch.all(x.grad == 2 * n)


def test_shape_mismatch_raises_on_every_rank(hvd):
    shape = (3,) if hvd.rank() == 0 else (4,)
    start = time.monotonic()
    with pytest.raises(hvd.FrugalError, match="mismatch.shape") as info:
        hvd.allreduce(torch.zeros(shape), name="mismatch.shape")
    assert time.monotonic() - start < 10
    assert "different descriptions" in str(info.value)
    # The engine goes on.
    assert torch.all(hvd.allreduce(torch.ones(2), op=hvd.Sum, name="after") == hvd.size())


def test_dtype_mismatch_raises_on_every_rank(hvd):
    dtype = torch.float32 if hvd.rank() == 0 else torch.float64
    with pytest.raises(hvd.FrugalError, match="mismatch.dtype"):
        hvd.allreduce(torch.zeros(3, dtype=dtype), name="mismatch.dtype")


def test_name_mismatch_raises_on_every_rank(hvd):
    if hvd.size() == 1:
        pytest.skip("needs two ranks")
    start = time.monotonic()
    with pytest.raises(hvd.FrugalError, match="names differ"):
        hvd.allreduce(torch.zeros(3), name="only.on.%d" % hvd.rank())
    assert time.monotonic() - start < 10
    assert torch.all(hvd.allreduce(torch.ones(2), op=hvd.Sum, name="after") == hvd.size())


def test_root_mismatch_raises_on_every_rank(hvd):
    if hvd.size() == 1:
        pytest.skip("needs two ranks")
    root = 0 if hvd.rank() == 0 else 1
    with pytest.raises(hvd.FrugalError, match="root"):
        hvd.broadcast(torch.zeros(3), root_rank=root, name="mismatch.root")
