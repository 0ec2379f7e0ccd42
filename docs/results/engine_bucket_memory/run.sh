#!/bin/sh
# Training throughput with fused buckets (--overlap fusion), before and after the engine gathers
# them into the reducer's bucket memory: two builds, runs interleaved, then a segment-size sweep
# of the all-reduce at 1 and 16 MB on 2 ranks. Run from the source tree, alone on the machine:
#   docs/results/engine_bucket_memory/run.sh BEFORE_FRUGAL AFTER_FRUGAL
# (and software counters of 16 MB all-reduces of one algorithm each under `perf stat`)
set -e
before=$1
after=$2
out=$(dirname "$0")
for repeat in 1 2; do
  for np in 2 4; do
    for build in before after; do
      eval frugal=\$$build
      "$frugal" train --np $np --model cnn --max-steps 150 --epochs 1 --overlap fusion \
        --progress none --json "$out/${build}_np${np}_r$repeat.jsonl" > /dev/null 2>&1
    done
  done
done
for segment in 256K 512K 1M 4M; do
  "$after" bench allreduce --np 2 --sizes 1M,16M --iters 10 --warmup 2 \
    --algorithms ring,rabenseifner,torus,mpi --segment-bytes $segment \
    --json "$out/segment_$segment.jsonl" > "$out/segment_$segment.txt" 2>&1
done
# Software counters of the whole job (both ranks, mpirun included) for one algorithm at a time.
for algorithm in ring rabenseifner mpi; do
  perf stat -x, -e task-clock,context-switches,cpu-migrations,page-faults \
    -o "$out/perf_stat_16M_$algorithm.csv" \
    "$after" bench allreduce --np 2 --sizes 16M --iters 40 --warmup 2 --algorithms $algorithm \
    > "$out/perf_stat_16M_$algorithm.txt" 2>&1
done
