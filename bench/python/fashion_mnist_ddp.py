#!/usr/bin/env python3
"""examples/fashion_mnist.py under PyTorch DDP with the Gloo backend, as the peer of frugal.torch
in throughput figures (docs/performance.md). Same data, model, sampler, batches and training
loop; the process group comes from the variables mpirun sets for each rank.

    frugal run --np 2 -- python3 bench/python/fashion_mnist_ddp.py --epochs 1 --max-steps 300
"""

import json
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data.distributed import DistributedSampler

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples"))
import fashion_mnist as ex  # noqa: E402


def main():
    args = ex.parse_args()
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    dist.init_process_group("gloo", rank=rank, world_size=size)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    train_set = ex.load_fashion_mnist(args.data_dir, "train")
    test_set = ex.load_fashion_mnist(args.data_dir, "test")
    sampler = DistributedSampler(train_set, num_replicas=size, rank=rank, seed=args.seed)
    loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size, sampler=sampler,
                                         drop_last=True)
    test_loader = torch.utils.data.DataLoader(
        test_set, batch_size=1000,
        sampler=DistributedSampler(test_set, num_replicas=size, rank=rank, shuffle=False))
    model = DistributedDataParallel(ex.Net())  # broadcasts rank 0's parameters
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        steps, seconds = ex.train_epoch(model, optimizer, loader, args.max_steps)
        metrics = torch.tensor([seconds, *ex.evaluate(model, test_loader)], dtype=torch.float64)
        dist.all_reduce(metrics)
        seconds, test_loss, accuracy = (metrics / size).tolist()
        record = {"epoch": epoch + 1, "test_loss": round(test_loss, 4),
                  "accuracy": round(accuracy, 4),
                  "samples_per_s": round(steps * args.batch_size * size / seconds, 1),
                  "train_seconds": round(seconds, 3), "steps": steps, "ranks": size}
        if rank == 0:
            print("epoch %d: test loss %.4f, accuracy %.2f%%, %.0f samples/s"
                  % (epoch + 1, test_loss, 100 * accuracy, record["samples_per_s"]), flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(record) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
