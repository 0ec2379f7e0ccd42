#!/bin/sh
# Segment sizes of every pipelined all-reduce in one run: each algorithm at 64 KiB to 4 MiB
# segments (ALGO@SEGMENT cases) and MPI_Allreduce take turns in every round, so all of them see
# the same load. Run from the source tree, alone on the machine, once per rank count and round:
#   docs/results/segment_defaults/sweep.sh build/apps/frugal/frugal NP ROUND [SIZES]
set -e
frugal=$1
np=$2
round=$3
sizes=${4:-1M,4M,16M}
out=$(dirname "$0")/sweep_np${np}_r${round}
cases=""
for alg in ring rd rabenseifner tree dbtree; do
  for seg in 64K 128K 256K 512K 1M 2M 4M; do
    cases="$cases$alg@$seg,"
  done
done
"$frugal" bench allreduce --np "$np" --sizes "$sizes" --iters 20 --algorithms "${cases}mpi" \
  --json "$out.jsonl" > "$out.txt" 2>&1
