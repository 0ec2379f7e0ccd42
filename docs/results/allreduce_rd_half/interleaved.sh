#!/bin/sh
# Recursive doubling before and after the half sums in place, interleaved: BEFORE and AFTER are
# the two binaries; three rounds of both on 4 and on 2 ranks. SET: "large" (1-64 MB, files
# np*_*) or "small" (64 KiB-1 MiB, files small_np*_*). ALGORITHMS: what runs (rd,ring,mpi by
# default); OUT: where the files go (the script's directory by default).
set -e
BEFORE=${1:?usage: interleaved.sh BEFORE AFTER [large|small]}
AFTER=${2:?usage: interleaved.sh BEFORE AFTER [large|small]}
SET=${3:-large}
if [ "$SET" = small ]; then
  sizes=64K,128K,256K,512K,1M iters=50 prefix=small_
else
  sizes=1M,4M,16M,64M iters=20 prefix=
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "${OUT:-$(dirname "$0")}"
for round in 1 2 3; do
  for np in 4 2; do
    for which in before after; do
      if [ $which = before ]; then bin=$BEFORE; else bin=$AFTER; fi
      "$bin" bench allreduce --np $np --sizes $sizes --iters $iters --algorithms ${ALGORITHMS:-rd,ring,mpi} \
        --json ${prefix}np${np}_${which}_${round}.json > ${prefix}np${np}_${which}_${round}.txt 2>&1
    done
  done
done
