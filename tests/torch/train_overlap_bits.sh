#!/usr/bin/env bash
# Tier-2 test under a real mpirun: what the overlap policies fuse depends on timing, yet every
# policy that reduces tensors as backward produces them (wfbp, fusion with both planners,
# priority, priority cutting tensors into partitions) ends with the same parameters, test loss and
# accuracy, and the same again when run twice: fused buckets are reduced with the bits of each
# tensor's own all-reduce, and a partition with the bits it has in its tensor's.
#   train_overlap_bits.sh FRUGAL MPIRUN NP -- TRAIN FLAGS...
set -uo pipefail
frugal=$1 mpirun=$2 np=$3
shift 3
[ "${1:-}" = -- ] && shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

source "$(dirname "$0")/train_mpirun_lib.sh"
source "$(dirname "$0")/summary_lib.sh"

runs=(wfbp "--overlap wfbp" mgwfbp "--overlap fusion --fusion mgwfbp"
      cycle "--overlap fusion --fusion cycle" priority "--overlap priority"
      priority_again "--overlap priority"
      partitioned "--overlap priority --partition-mb 0.05")
for ((i = 0; i < ${#runs[@]}; i += 2)); do
  name=${runs[i]}
  # shellcheck disable=SC2086
  run "$@" ${runs[i + 1]} --json "$work/$name.json" --timeline "$work/$name.trace.json" \
    >"$work/$name.out" 2>&1 || fail "the $name run failed"
done
# Not vacuous: the fusing policies put several tensors in one bucket, and the partitioned run
# cut tensors into pieces.
for name in mgwfbp cycle priority; do
  grep -q 'fused(' "$work/$name.trace.json" || fail "the $name run fused no bucket"
done
grep -q '#2/3' "$work/partitioned.trace.json" || fail "the partitioned run cut no tensor in three"
for ((i = 2; i < ${#runs[@]}; i += 2)); do
  same_summary "" wfbp "$work/wfbp.json" "${runs[i]}" "$work/${runs[i]}.json" \
    params_hash test_loss test_accuracy train_loss
done
echo PASS
