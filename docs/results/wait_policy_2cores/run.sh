#!/bin/bash
# Two builds that differ in the MPI transport's wait policy, interleaved, alone on the machine:
# 2 emulated hosts at 100 Mbit/s (cnn with priority and 0.5 MB partitions, 80 steps; vgg with
# priority, 24 steps; compute only for both), and a shared-memory all-reduce on 2 ranks.
#   run.sh FRUGAL_A NAME_A FRUGAL_B NAME_B ROUND
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
a=$1 na=$2 b=$3 nb=$4 round=$5
common=(--np 2 --emulate hosts=2,nic=100mbit --progress none --seed 1 --test-samples 500)
for pair in "$a $na" "$b $nb"; do
  set -- $pair
  "$1" train "${common[@]}" --model cnn --max-steps 80 --overlap priority --partition-mb 0.5 \
    --json "cnn_$2_r$round.jsonl" > "cnn_$2_r$round.txt" 2>&1
done
for pair in "$a $na" "$b $nb"; do
  set -- $pair
  "$1" train "${common[@]}" --model vgg --max-steps 24 --overlap priority \
    --json "vgg_$2_r$round.jsonl" > "vgg_$2_r$round.txt" 2>&1
done
for pair in "$a $na" "$b $nb"; do
  set -- $pair
  "$1" bench allreduce --np 2 --sizes 1M,4M,16M --iters 20 --algorithms ring,rd,rabenseifner,direct,mpi \
    --json "shm_$2_r$round.jsonl" > "shm_$2_r$round.txt" 2>&1
done
