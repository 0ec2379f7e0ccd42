#!/bin/sh
# All-reduce over shared memory on one host, N ranks: every frugal algorithm on a buffer shared
# with the transport (AllreduceOptions::data_owner, no staging copies) and the same algorithm
# through the transport's staging copies (ALGO:staged), against MPI_Allreduce, interleaved in one
# run. Run from the source tree, alone on the machine, one rank count (and, for 4 ranks, one group
# of sizes) per command:
#   docs/results/shm_owner/run.sh build/apps/frugal/frugal 2 1M,4M,16M,64M np2
#   docs/results/shm_owner/run.sh build/apps/frugal/frugal 4 1M,4M,16M np4
#   docs/results/shm_owner/run.sh build/apps/frugal/frugal 4 64M np4_64M
set -e
frugal=$1
np=$2
sizes=$3
out=$(dirname "$0")/$4
algorithms=ring,rd,rabenseifner,tree,dbtree,hier,torus
staged=$(echo $algorithms | sed 's/\([a-z]*\)/\1:staged/g')
"$frugal" bench allreduce --np "$np" --sizes "$sizes" --iters 10 --warmup 2 \
  --algorithms "$algorithms,$staged,mpi" \
  --json "$out.jsonl" > "$out.txt" 2>&1
