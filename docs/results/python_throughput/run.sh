#!/bin/bash
# samples/s of examples/fashion_mnist.py (frugal.torch) against frugal train --model cnn and the
# same script under PyTorch DDP with Gloo, interleaved, 300 steps of batch 64 per rank, 3 repeats.
# Usage: run.sh BUILD_DIR (a Release build of the commit measured, with the Python package).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
build="$(cd "$1" && pwd)"
src="$(cd "$build/.." && pwd)"
cd "$here"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONPATH="$build/python"
frugal="$build/apps/frugal/frugal"
for rep in 1 2 3; do
  for n in 2 4; do
    "$frugal" train --np $n --model cnn --max-steps 300 --epochs 1 --progress none \
      --json train_np${n}_r${rep}.jsonl > train_np${n}_r${rep}.log 2>&1
    echo "train np$n r$rep rc=$?"
    "$frugal" run --np $n -- /usr/bin/python3 "$src/examples/fashion_mnist.py" --epochs 1 \
      --max-steps 300 --json python_np${n}_r${rep}.jsonl > python_np${n}_r${rep}.log 2>&1
    echo "python np$n r$rep rc=$?"
    "$frugal" run --np $n -- /usr/bin/python3 "$src/bench/python/fashion_mnist_ddp.py" --epochs 1 \
      --max-steps 300 --json ddp_np${n}_r${rep}.jsonl > ddp_np${n}_r${rep}.log 2>&1
    echo "ddp np$n r$rep rc=$?"
  done
done
