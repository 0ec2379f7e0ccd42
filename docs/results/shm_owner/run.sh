#!/bin/sh
# All-reduce over shared memory on one host, N ranks: every frugal algorithm on a buffer shared
# with the transport (AllreduceOptions::data_owner, no staging copies) and the same algorithm
# through the transport's staging copies (ALGO:staged), against MPI_Allreduce, interleaved in one
# run. Run from the source tree, alone on the machine, one rank count per command:
#   /work/bin/quiet docs/results/shm_owner/run.sh build/apps/frugal/frugal 2 [OUT_DIR]
set -e
frugal=$1
np=$2
out=${3:-$(dirname "$0")}
algorithms=ring,rd,rabenseifner,tree,dbtree,hier,torus
staged=$(echo $algorithms | sed 's/\([a-z]*\)/\1:staged/g')
"$frugal" bench allreduce --np "$np" --sizes 1M,4M,16M,64M --iters 10 --warmup 2 \
  --algorithms "$algorithms,$staged,mpi" \
  --json "$out/np$np.jsonl" > "$out/np$np.txt" 2>&1
