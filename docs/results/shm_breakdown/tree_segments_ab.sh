#!/bin/sh
# The binary tree (and dbtree) with 256 KiB segments against the default 1 MiB, alternating:
# three rounds per rank count, each one benchmark per segment size (order swapped every round),
# tree, dbtree and MPI_Allreduce interleaved in each. Run from the source tree, alone on the
# machine:
#   docs/results/shm_breakdown/tree_segments_ab.sh build/apps/frugal/frugal
set -e
frugal=$1
out=$(dirname "$0")/tree_ab
run() {
  "$frugal" bench allreduce --np "$1" --sizes 1M,4M --iters 20 --algorithms tree,dbtree,mpi \
    --segment-bytes "$2" --json "${out}_np$1_seg$2_r$3.jsonl" > "${out}_np$1_seg$2_r$3.txt" 2>&1
}
for np in 2 4; do
  run $np 1M 1; run $np 256K 1
  run $np 256K 2; run $np 1M 2
  run $np 1M 3; run $np 256K 3
done
