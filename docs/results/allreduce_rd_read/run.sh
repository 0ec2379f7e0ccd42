#!/bin/sh
# The all-reduce table of "Recursive doubling reads its partners' buffers": three runs per rank
# count, every frugal algorithm against MPI_Allreduce. FRUGAL: the binary; OUT: where the files go
# (the script's directory by default).
set -e
FRUGAL=${1:?usage: run.sh FRUGAL [OUT]}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "${2:-$(dirname "$0")}"
for run in 1 2 3; do
  for np in 4 2; do
    "$FRUGAL" bench allreduce --np $np --sizes 1M,4M,16M,64M --iters 20 \
      --algorithms ring,rd,rabenseifner,tree,dbtree,hier,torus,direct,mpi \
      --json np${np}_run${run}.json > np${np}_run${run}.txt 2>&1
  done
done
