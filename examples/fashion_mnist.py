#!/usr/bin/env python3
"""Fashion-MNIST with a CNN, written the way a Horovod user writes it.

    frugal run --np 4 -- python3 examples/fashion_mnist.py --epochs 2

Moving a Horovod script to frugal is the import: ``import frugal.torch as hvd``. The model is
the CNN of ``frugal train --model cnn`` and the settings are its defaults (batch 64 per rank,
SGD with lr 0.05 and momentum 0.9, seed 1).
"""

import argparse
import gzip
import json
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data
from torch.utils.data.distributed import DistributedSampler

import frugal.torch as hvd

DATA_DIR = "/usr/share/datasets/fashion-mnist"  # Debian's dataset-fashion-mnist
MEAN, STD = 0.2860, 0.3530


def load_fashion_mnist(data_dir, split):
    """The IDX files of a split as a dataset of normalised 1x28x28 images and labels."""
    prefix = "train" if split == "train" else "t10k"
    with gzip.open(os.path.join(data_dir, prefix + "-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(os.path.join(data_dir, prefix + "-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    x = (torch.from_numpy(images.astype(np.float32)) / 255.0 - MEAN) / STD
    return torch.utils.data.TensorDataset(x, torch.from_numpy(labels.astype(np.int64)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = nn.Linear(64 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64, help="per rank")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data-dir", default=DATA_DIR)
    parser.add_argument("--fp16-allreduce", action="store_true",
                        help="send gradients as float16 (Compression.fp16)")
    parser.add_argument("--defer-updates", action="store_true",
                        help="run each layer's update just before its next forward pass instead "
                             "of waiting for every average at step() (frugal train's default)")
    parser.add_argument("--max-steps", type=int, default=0, help="stop after N steps (0: all)")
    parser.add_argument("--json", help="rank 0 writes one JSON record per epoch here")
    return parser.parse_args(argv)


def metric_average(value, name):
    return hvd.allreduce(torch.tensor(value), name=name).item()


def train_epoch(model, optimizer, loader, max_steps):
    """One epoch; returns (steps, seconds)."""
    model.train()
    start = time.perf_counter()
    steps = 0
    for data, target in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()
        steps += 1
        if max_steps and steps >= max_steps:
            break
    return steps, time.perf_counter() - start


def evaluate(model, loader):
    """Loss and accuracy of this rank's share of the test set."""
    model.eval()
    loss, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for data, target in loader:
            output = model(data)
            loss += F.cross_entropy(output, target, reduction="sum").item()
            correct += (output.argmax(1) == target).sum().item()
            count += target.numel()
    return loss / count, correct / count


def main(argv=None, **frugal_options):
    """Trains and returns rank 0's records. `frugal_options` go to DistributedOptimizer."""
    args = parse_args(argv)
    hvd.init()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    train_set = load_fashion_mnist(args.data_dir, "train")
    test_set = load_fashion_mnist(args.data_dir, "test")
    train_sampler = DistributedSampler(train_set, num_replicas=hvd.size(), rank=hvd.rank(),
                                       seed=args.seed)
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size,
                                               sampler=train_sampler, drop_last=True)
    test_sampler = DistributedSampler(test_set, num_replicas=hvd.size(), rank=hvd.rank(),
                                      shuffle=False)
    test_loader = torch.utils.data.DataLoader(test_set, batch_size=1000, sampler=test_sampler)

    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    if args.defer_updates:
        frugal_options = dict(frugal_options, defer_updates=True, overlap="priority")
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=compression, **frugal_options)

    records = []
    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        steps, seconds = train_epoch(model, optimizer, train_loader, args.max_steps)
        # The ranks' mean time, as frugal train reports it.
        seconds = hvd.allreduce(torch.tensor(seconds), name="seconds", op=hvd.Sum).item()
        seconds = max(seconds / hvd.size(), 1e-9)
        test_loss, accuracy = evaluate(model, test_loader)
        test_loss = metric_average(test_loss, "avg_loss")
        accuracy = metric_average(accuracy, "avg_accuracy")
        samples_per_s = steps * args.batch_size * hvd.size() / seconds
        record = {"epoch": epoch + 1, "test_loss": round(test_loss, 4),
                  "accuracy": round(accuracy, 4), "samples_per_s": round(samples_per_s, 1),
                  "train_seconds": round(seconds, 3), "steps": steps, "ranks": hvd.size()}
        records.append(record)
        if hvd.rank() == 0:
            print("epoch %d: test loss %.4f, accuracy %.2f%%, %.0f samples/s"
                  % (epoch + 1, test_loss, 100 * accuracy, samples_per_s), flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(record) + "\n")
    return records


if __name__ == "__main__":
    main()
