#!/usr/bin/env bash
# Tier-2 test of checkpoints under a real mpirun: a run killed by --inject and resumed with
# --resume ends bit-identical to the run that was never interrupted (the same params_hash, test
# loss, test accuracy, train loss, steps and bytes sent in the summary), and resumes at the last
# committed checkpoint before the kill.
#   train_resume.sh FRUGAL MPIRUN NP KILL_RANK KILL_STEP EVERY -- TRAIN FLAGS...
# EVERY is --checkpoint-every (a step count, or "epoch" with STEPS_PER_EPOCH=N set in the
# environment); KILL_STEP counts steps (FedAvg: rounds) from 0.
set -uo pipefail
frugal=$1 mpirun=$2 np=$3 kill_rank=$4 kill_step=$5 every=$6
shift 6
[ "${1:-}" = -- ] && shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

source "$(dirname "$0")/train_mpirun_lib.sh"
source "$(dirname "$0")/summary_lib.sh"

# WHOLE_SAVES=1: the uninterrupted run saves the same checkpoints (for strategies whose checkpoint
# completes an exchange in flight).
whole_saves=()
[ "${WHOLE_SAVES:-0}" = 1 ] && whole_saves=(--checkpoint-dir "$work/whole_ckpt" --checkpoint-every "$every")
run "$@" "${whole_saves[@]}" --json "$work/whole.json" >"$work/whole.out" 2>&1 ||
  fail "the uninterrupted run failed"

run "$@" --checkpoint-dir "$work/ckpt" --checkpoint-every "$every" \
  --inject "kill:rank=$kill_rank,step=$kill_step" --json "$work/first.json" >"$work/first.out" 2>&1
code=$?
[ "$code" -ne 0 ] || fail "the run with --inject kill exited 0"
grep -q "^frugal: rank $kill_rank: --inject kill:rank=$kill_rank,step=$kill_step: killing" \
  "$work/first.out" || fail "no line of frugal's names the killed rank"
grep -q '"event":"summary"' "$work/first.json" && fail "the killed run wrote a summary"
if [ "$every" = epoch ]; then
  expected=$((kill_step / STEPS_PER_EPOCH * STEPS_PER_EPOCH))
else
  expected=$((kill_step / every * every))
fi
newest=$(ls -d "$work"/ckpt/ckpt-*/MANIFEST 2>/dev/null | sort | tail -1)
[ -n "$newest" ] || fail "no committed checkpoint"
[ "$(basename "$(dirname "$newest")")" = "$(printf 'ckpt-%012d' "$expected")" ] ||
  fail "newest committed checkpoint $newest, expected step $expected"

run "$@" --checkpoint-dir "$work/ckpt" --checkpoint-every "$every" --resume "$work/ckpt" \
  --json "$work/resumed.json" >"$work/resumed.out" 2>&1 || fail "the resumed run failed"
[ "$(summary_field "$work/resumed.json" resumed_from_step)" = "$expected" ] ||
  fail "resumed_from_step is $(summary_field "$work/resumed.json" resumed_from_step), expected $expected"
same_summary "" uninterrupted "$work/whole.json" resumed "$work/resumed.json" \
  params_hash test_loss test_accuracy train_loss steps bytes_sent_per_worker
echo PASS
