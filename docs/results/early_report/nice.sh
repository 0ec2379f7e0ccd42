#!/bin/bash
# The engine thread's nice value on cnn with priority and 0.5 MB partitions, 4 emulated hosts at
# 100 Mbit/s with 64 KB frames and cubic (80 steps), alone on the machine; run from this
# directory:
#   nice.sh FRUGAL NICE ROUND      (NICE: 0, the default, or a value for --engine-nice)
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
frugal=$1 nice=$2 round=$3
"$frugal" train --np 4 --emulate hosts=4,nic=100mbit,mtu=65535,tcp=cubic --progress none --seed 1 \
  --test-samples 500 --model cnn --max-steps 80 --overlap priority --partition-mb 0.5 \
  --engine-nice "$nice" --json "cnn_nice${nice}_r$round.jsonl" > "cnn_nice${nice}_r$round.txt" 2>&1
