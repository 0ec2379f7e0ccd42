#!/bin/bash
# Usage: run_4ranks.sh (from the source tree, with a Release build in build/)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONPATH=build/python
out=${OUT:-docs/results/python_throughput/4ranks}; mkdir -p $out
f=build/apps/frugal/frugal
for rep in 1 2 3; do
  $f train --np 4 --model cnn --max-steps 300 --epochs 1 --progress none --json $out/train_$rep.jsonl >/dev/null 2>&1
  $f run --np 4 -- /usr/bin/python3 examples/fashion_mnist.py --epochs 1 --max-steps 300 --json $out/py_$rep.jsonl >/dev/null 2>&1
  $f run --np 4 -- /usr/bin/python3 examples/fashion_mnist.py --epochs 1 --max-steps 300 --defer-updates --json $out/pydefer_$rep.jsonl >/dev/null 2>&1
done
for x in $out/*.jsonl; do echo "$(basename $x) $(grep -o '"samples_per_s[a-z_]*": *[0-9.]*' $x | head -1) $(grep -o '"accuracy": *[0-9.]*\|"test_accuracy":[0-9.]*' $x | head -1)"; done
