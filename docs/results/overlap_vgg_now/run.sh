#!/bin/sh
# vgg (24 steps) on 4 emulated hosts at 100 Mbit/s: compute only (--skip-comm), no overlap (its
# communication time per step is the communication alone) and priority scheduling (4 MB
# partitions). Run from the source tree, alone on the machine, one configuration per command:
#   docs/results/overlap_vgg_now/run.sh build/apps/frugal/frugal skip|none|priority
set -e
frugal=$1
out=$(dirname "$0")
case $2 in
  skip) flags=--skip-comm ;;
  none) flags="--overlap none" ;;
  priority) flags="--overlap priority" ;;
  *) echo "unknown configuration '$2' (known: skip, none, priority)" >&2; exit 2 ;;
esac
"$frugal" train --np 4 --emulate hosts=4,nic=100mbit --progress none --seed 1 \
  --test-samples 500 --model vgg --max-steps 24 $flags \
  --json "$out/vgg_$2.jsonl" > "$out/vgg_$2.txt"
