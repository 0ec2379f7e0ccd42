#!/bin/sh
# Step time of `frugal train --np 4 --model cnn` with frugal's ring, MPI_Allreduce and Gloo's two
# all-reduces, interleaved (two rounds over the four), on shared memory; then one round on 4
# emulated hosts at 1 Gbit/s. Run from the source tree, alone on the machine:
#   docs/results/gloo_train/run.sh build/apps/frugal/frugal
set -e
frugal=$1
out=$(dirname "$0")
for round in 1 2; do
  for arch in ring mpi gloo gloo:halving_doubling; do
    name=$(echo "$arch" | tr ':' '_')
    "$frugal" train --np 4 --model cnn --max-steps 120 --epochs 1 --progress none --seed 1 \
      --arch "allreduce:$arch" --json "$out/shm_${name}_$round.jsonl" > "$out/shm_${name}_$round.txt"
  done
done
for arch in ring mpi gloo gloo:halving_doubling; do
  name=$(echo "$arch" | tr ':' '_')
  "$frugal" train --np 4 --model cnn --max-steps 120 --epochs 1 --progress none --seed 1 \
    --emulate hosts=4,nic=1gbit --arch "allreduce:$arch" --json "$out/1gbit_${name}.jsonl" \
    > "$out/1gbit_${name}.txt"
done
