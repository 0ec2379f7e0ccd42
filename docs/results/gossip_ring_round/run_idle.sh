#!/bin/bash
# ring_round.c on 4 emulated hosts at 100 Mbit/s: one way on a fixed ring against the one-peer
# exponential pattern (each connection idle every other round), with and without TCP's slow
# start after idle, without and with 80 ms of computation. Run alone (the times).
# Usage: run_idle.sh BUILD_DIR
set -eu
build="$(cd "$1" && pwd)"
cd "$(dirname "$0")"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpicc -O2 -o /tmp/ring_round ring_round.c
for args in "0 0 25 2" "0 0 25 3" "0 0 25 3 1" "80 200 25 3" "80 200 25 3 1" "0 0 25 0 1"; do
  "$build/apps/frugal/frugal" run --np 4 --emulate hosts=4,nic=100mbit -- /tmp/ring_round $args \
    | grep '^mode'
done
