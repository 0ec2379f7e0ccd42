#!/bin/sh
# All-reduce over shared memory (2 and 4 ranks on one host) and on 4 emulated hosts at 1 Gbit/s:
# frugal's algorithms against MPI_Allreduce and Gloo, interleaved in one run per setting. Run
# from the source tree, alone on the machine:
#   docs/results/shm_shared/run.sh build/apps/frugal/frugal
set -e
frugal=$1
out=$(dirname "$0")
for np in 2 4; do
  "$frugal" bench allreduce --np $np --sizes 1M,16M,64M --iters 10 --warmup 2 \
    --algorithms ring,rd,rabenseifner,tree,dbtree,hier,torus,mpi,gloo --gloo-mode async \
    --json "$out/np$np.jsonl" > "$out/np$np.txt" 2>&1
done
"$frugal" bench allreduce --np 4 --emulate hosts=4,nic=1gbit --sizes 16M,64M --iters 10 --warmup 1 \
  --algorithms ring,rabenseifner,hier,torus,mpi,gloo --gloo-mode async \
  --json "$out/emulated_1gbit.jsonl" > "$out/emulated_1gbit.txt" 2>&1
