#!/bin/bash
# Validation runs of frugal simulate: per-layer profiles, then emulated runs (with nothing else running).
set -u
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
F=build/apps/frugal/frugal
OUT=docs/results/simulate
for n in 4 8; do
  $F train --np $n --model cnn --max-steps 40 --overlap wfbp --progress none --timeline $OUT/profile_cnn_np$n.json --json $OUT/profile_cnn_np$n.jsonl > $OUT/profile_cnn_np$n.log 2>&1
  echo "profile np$n rc=$?"
  for nic in 100mbit 1gbit; do
    for comp in dense topk; do
      extra=""
      [ $comp = topk ] && extra="--compress topk:ratio=0.01 --ef"
      $F train --np $n --emulate hosts=$n,nic=$nic --model cnn --max-steps 40 --progress none $extra --json $OUT/emu_cnn_h${n}_${nic}_${comp}.jsonl > $OUT/emu_cnn_h${n}_${nic}_${comp}.log 2>&1
      echo "h$n $nic $comp rc=$?"
    done
  done
done
