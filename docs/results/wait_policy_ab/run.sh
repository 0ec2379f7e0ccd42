#!/bin/sh
# One round of the wait policy's A/B comparison: two builds of frugal that differ only in the
# oversubscribed yield phase (mpi_work.cc, kOversubscribedYield), each running, in turn, cnn on 4
# emulated hosts at 100 Mbit/s with priority scheduling and 0.25 MB partitions (80 steps), then
# a 1 MB and 4 MB all-reduce over shared memory on 4 ranks. Run from the source tree, alone on
# the machine, one round per command, the rounds alternating which build goes first:
#   docs/results/wait_policy_ab/run.sh FRUGAL_A NAME_A FRUGAL_B NAME_B ROUND
set -e
dir=$(dirname "$0")
round=$5
cnn() {
  "$1" train --np 4 --emulate hosts=4,nic=100mbit --progress none --seed 1 \
    --test-samples 500 --model cnn --max-steps 80 --overlap priority --partition-mb 0.25 \
    --json "$dir/cnn_$2_r$round.jsonl" > "$dir/cnn_$2_r$round.txt"
}
shm() {
  "$1" bench allreduce --np 4 --sizes 1M,4M --iters 20 \
    --algorithms ring,rabenseifner,dbtree,mpi --json "$dir/shm_$2_r$round.jsonl" \
    > "$dir/shm_$2_r$round.txt" 2>&1
}
cnn "$1" "$2"
cnn "$3" "$4"
shm "$1" "$2"
shm "$3" "$4"
