#!/bin/sh
# Step time of cnn on 4 emulated hosts at 100 Mbit/s against compute only and communication only,
# for one build of frugal: compute only (--skip-comm), no overlap (its communication time per step
# is the communication alone) and priority scheduling with 0.25 MB partitions, 80 steps each.
# Run from the source tree, alone on the machine, once per build:
#   docs/results/overlap_wait_policy/run.sh FRUGAL NAME
set -e
frugal=$1
out=$(dirname "$0")/$2
mkdir -p "$out"
run() {
  name=$1
  shift
  "$frugal" train --np 4 --emulate hosts=4,nic=100mbit --progress none --seed 1 \
    --test-samples 500 --model cnn --max-steps 80 --json "$out/$name.jsonl" "$@" > "$out/$name.txt"
}
run cnn_skip --skip-comm
run cnn_none --overlap none
run cnn_priority_p0.25 --overlap priority --partition-mb 0.25
