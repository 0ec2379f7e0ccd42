#!/bin/bash
# Time to 88% of the best method of sweeps/tta_cnn.toml (top-k 1% with error feedback) against the
# compute-only bound (--skip-comm), cnn on 4 emulated hosts at 100 Mbit/s, the settings of
# sweeps/tta_cnn.toml, with a frugal binary that allocates through tcmalloc.
#   run.sh FRUGAL_BINARY
set -u
frugal="$1"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
common=(--np 4 --emulate hosts=4,nic=100mbit --model cnn --epochs 6 --lr 0.05 --progress none
  --stop-at-accuracy 0.88)
for run in topk_100x_ef compute_only; do
  case $run in
    topk_100x_ef) extra=(--compress topk:ratio=0.01 --ef) ;;
    compute_only) extra=(--skip-comm) ;;
  esac
  start=$(date +%s.%N)
  "$frugal" train "${common[@]}" "${extra[@]}" --json "$run.jsonl" > "$run.txt" 2>&1
  echo "$run rc=$? wall=$(echo "$(date +%s.%N) - $start" | bc) s" | tee -a wall.txt
done
