#!/bin/bash
# Builds ring_round.c and runs it on a ring of 4 emulated hosts at 100 Mbit/s: the round alone,
# the two neighbours one after the other, one way; the round with 80 or 160 ms of computation
# during which MPI is called every 200 us or not at all; one way with 80 ms of computation.
# Run alone (the times).
# Usage: run.sh BUILD_DIR
set -eu
build="$(cd "$1" && pwd)"
cd "$(dirname "$0")"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpicc -O2 -o /tmp/ring_round ring_round.c
for args in "0 0 25 0" "0 0 25 1" "0 0 25 2" "80 0 25 0" "80 200 25 0" "160 200 25 0" "80 200 25 2"; do
  "$build/apps/frugal/frugal" run --np 4 --emulate hosts=4,nic=100mbit -- /tmp/ring_round $args \
    | grep '^mode'
done
