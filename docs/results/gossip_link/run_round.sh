#!/bin/bash
# `frugal bench round` (gossip's exchange over the MPI transport) on 4 emulated hosts at
# 100 Mbit/s, the cnn model's size, 20 rounds: the ring and the one-peer exponential graph,
# rounds back to back and in lock step. Run alone (the times).
# Usage: run_round.sh BUILD_DIR
set -eu
build="$(cd "$1" && pwd)"
cd "$(dirname "$0")"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for topology in ring onepeer-exp; do
  for order in "" --lockstep; do
    "$build/apps/frugal/frugal" bench round --np 4 --emulate hosts=4,nic=100mbit \
      --topology $topology --sizes 1819688 --rounds 20 $order 2>&1 | grep -v setpgid | tail -1
  done
done
