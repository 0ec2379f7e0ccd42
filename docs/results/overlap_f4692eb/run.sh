#!/bin/sh
# Step time against compute and communication on 4 emulated hosts at 100 Mbit/s: cnn (80 steps)
# and vgg (24 steps), compute only (--skip-comm), no overlap (its communication time per step is
# the communication alone) and the best overlap found before (priority, 0.25 MB partitions for
# cnn, 4 MB for vgg). Run from the source tree, alone on the machine:
#   docs/results/overlap_f4692eb/run.sh build/apps/frugal/frugal
set -e
frugal=$1
out=$(dirname "$0")
run() {
  name=$1
  shift
  "$frugal" train --np 4 --emulate hosts=4,nic=100mbit --progress none --seed 1 \
    --test-samples 500 --json "$out/$name.jsonl" "$@" > "$out/$name.txt"
}
run cnn_skip --model cnn --max-steps 80 --skip-comm
run cnn_none --model cnn --max-steps 80 --overlap none
run cnn_priority_p0.25 --model cnn --max-steps 80 --overlap priority --partition-mb 0.25
run vgg_skip --model vgg --max-steps 24 --skip-comm
run vgg_none --model vgg --max-steps 24 --overlap none
run vgg_priority --model vgg --max-steps 24 --overlap priority
