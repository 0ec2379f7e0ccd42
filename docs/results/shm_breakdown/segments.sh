#!/bin/sh
# Segment size of the pipelined all-reduces over shared memory, N ranks: one
# `frugal bench allreduce` per segment size (ring, rd, rabenseifner, tree, dbtree and
# MPI_Allreduce interleaved in each), alone on the machine. Run from the source tree:
#   docs/results/shm_breakdown/segments.sh build/apps/frugal/frugal 2 PREFIX [SEGMENTS]
set -e
frugal=$1
np=$2
out=$(dirname "$0")/$3
segments=${4:-64K 128K 256K 512K 1M}
for seg in $segments; do
  "$frugal" bench allreduce --np "$np" --sizes 1M,4M,16M --iters 20 \
    --algorithms ring,rd,rabenseifner,tree,dbtree,mpi --segment-bytes "$seg" \
    --json "${out}_seg$seg.jsonl" > "${out}_seg$seg.txt" 2>&1
done
