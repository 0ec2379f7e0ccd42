#!/bin/sh
# Where the CPU goes in an all-reduce over shared memory: `perf record` (cpu-clock, whole
# machine, from 3 s after the start, past the job's start-up) around `frugal bench allreduce`
# running one algorithm, N ranks, one size, ITERS iterations; one profile per algorithm, alone on
# the machine. categories.py sorts the symbols into kernel, copies, waits and the rest. Run from
# the source tree:
#   docs/results/shm_breakdown/profile.sh build/apps/frugal/frugal 4 1M 2000 PREFIX ring dbtree ...
set -e
frugal=$1
np=$2
size=$3
iters=$4
out=$(dirname "$0")/$5
shift 5
for alg in "$@"; do
  perf record -q -e cpu-clock -F 4999 -a -D 3000 -o "/tmp/perf_$alg.data" -- \
    "$frugal" bench allreduce --np "$np" --sizes "$size" --iters "$iters" --warmup 5 \
    --algorithms "$alg" > "${out}_$alg.bench.txt" 2>&1
  perf report -i "/tmp/perf_$alg.data" --sort dso,sym --percent-limit 0.2 --stdio 2>/dev/null |
    grep '%' | sed 's/  *$//' > "${out}_$alg.profile.txt"
  rm -f "/tmp/perf_$alg.data"
done
