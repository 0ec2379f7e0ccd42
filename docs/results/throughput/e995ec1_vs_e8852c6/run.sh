#!/bin/bash
# Interleaved throughput comparison: main (new) against e8852c6 (old).
set -u
cd "$(dirname "$0")"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
declare -A bin=([old]=OLD_BUILD [new]=NEW_BUILD)
for rep in 1 2 3; do
  for n in 1 2 4; do
    for v in old new; do
      ${bin[$v]}/apps/frugal/frugal train --np $n --model cnn --max-steps 300 --epochs 1 --progress none --json ${v}_np${n}_r${rep}.jsonl > ${v}_np${n}_r${rep}.log 2>&1
      echo "$v np$n r$rep rc=$?"
    done
  done
done
for v in old new; do
  ${bin[$v]}/torch/frugal_train_baseline --model cnn --steps 300 --repeats 3 --json baseline_${v}.json > baseline_${v}.log 2>&1
  echo "baseline $v rc=$?"
done
