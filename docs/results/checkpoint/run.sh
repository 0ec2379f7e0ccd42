#!/bin/bash
# Checkpoint cost and automatic restart, 4 ranks on this machine (local disk).
#   1. cnn, 80 steps, a checkpoint every 20 steps; vgg, 30 steps, every 10: each checkpoint's size
#      and time (rank 0: writing, fsync, the exchange and the commit) against the median step;
#   2. vgg, 60 steps, uninterrupted, then killed at step 50 (rank 2) with --max-restarts 1 and a
#      checkpoint every 20 steps: the restart, the steps redone, wall time and parameters;
#   3. the same restart of a short mlp run under --emulate hosts=4,nic=1gbit.
# Usage: run.sh BUILD_DIR (a Release build of the commit measured). Run it alone (under quiet).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
build="$(cd "$1" && pwd)"
cd "$here"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
frugal="$build/apps/frugal/frugal"
scratch=$(mktemp -d /tmp/frugal-ckpt-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
rm -f *.jsonl *.log

timed() {  # NAME ARGS...: runs frugal train, records its wall time
  local name=$1
  shift
  local start=$(date +%s.%N)
  "$frugal" train --np 4 --progress none --json "$name.jsonl" "$@" >"$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc wall=$(echo "$(date +%s.%N) - $start" | bc) s" | tee -a wall.txt
}
rm -f wall.txt
timed cost_cnn --model cnn --max-steps 80 --checkpoint-dir "$scratch/cnn" --checkpoint-every 20
timed cost_vgg --model vgg --max-steps 30 --checkpoint-dir "$scratch/vgg" --checkpoint-every 10
timed vgg_whole --model vgg --max-steps 60 --overlap wfbp
timed vgg_restarted --model vgg --max-steps 60 --overlap wfbp --checkpoint-dir "$scratch/restart" \
  --checkpoint-every 20 --max-restarts 1 --inject kill:rank=2,step=50
timed emulated_whole --model mlp --max-steps 40 --overlap none --emulate hosts=4,nic=1gbit
timed emulated_restarted --model mlp --max-steps 40 --overlap none --emulate hosts=4,nic=1gbit \
  --checkpoint-dir "$scratch/emulated" --checkpoint-every 10 --max-restarts 1 \
  --inject kill:rank=3,step=25
