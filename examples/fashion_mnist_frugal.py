#!/usr/bin/env python3
"""The Horovod-style Fashion-MNIST example with frugal's methods: top-k sparsification of 1% of
each gradient with error feedback, and Local SGD averaging the models every 4 steps.

    frugal run --np 4 -- python3 examples/fashion_mnist_frugal.py --epochs 2

The script is examples/fashion_mnist.py; the only change is the keyword arguments of
DistributedOptimizer:

    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compress="topk:ratio=0.01", ef=True,
                                         sync="local:period=4")

Any compressor, strategy and overlap `frugal train` accepts can be given the same way.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fashion_mnist  # noqa: E402

if __name__ == "__main__":
    fashion_mnist.main(compress="topk:ratio=0.01", ef=True, sync="local:period=4")
