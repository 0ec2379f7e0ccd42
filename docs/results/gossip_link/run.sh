#!/bin/bash
# Builds tcp_flows.c and runs its patterns on 4 emulated hosts at 100 Mbit/s, one `frugal run`
# each: the cnn model (1,819,688 bytes) per flow and round, 20 rounds, rounds in lockstep
# (a barrier before each) and free-running (as D-PSGD). Run alone (the times).
# Usage: run.sh BUILD_DIR [PATTERN...]
set -eu
build="$(cd "$1" && pwd)"
shift
cd "$(dirname "$0")"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpicc -O2 -o /tmp/tcp_flows tcp_flows.c
patterns="${*:-one fanout fanin duplex ring1 ring2 onepeer fixed2}"
for p in $patterns; do
  for order in lockstep free; do
    "$build/apps/frugal/frugal" run --np 4 --emulate hosts=4,nic=100mbit -- \
      /tmp/tcp_flows "$p" 1819688 21 "$order" | grep '^pattern'
  done
done
