#!/bin/sh
# Recursive doubling before and after the reading rounds, interleaved: BEFORE and AFTER are the
# two binaries; three rounds of both on 4 ranks.
set -e
BEFORE=${1:?usage: interleaved.sh BEFORE AFTER}
AFTER=${2:?usage: interleaved.sh BEFORE AFTER}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$(dirname "$0")"
for round in 1 2 3; do
  for which in before after; do
    if [ $which = before ]; then bin=$BEFORE; else bin=$AFTER; fi
    "$bin" bench allreduce --np 4 --sizes 1M,4M,16M,64M --iters 20 --algorithms rd,rabenseifner,mpi \
      --json interleaved_${which}_${round}.json > interleaved_${which}_${round}.txt 2>&1
  done
done
