#!/usr/bin/env bash
# Tier-2 test of the parameter server's checkpoints where arrival order decides the bits (ssp, asp
# and backup with several workers): what a resume keeps. A run of FIRST_EPOCHS saves a checkpoint
# at the end of each epoch and stops; a run with --resume continues it to EPOCHS. Asserted:
#  - the resumed run starts at the checkpoint of the nominal end of epoch FIRST_EPOCHS;
#  - rank 0's parameters as the checkpoint restored them equal those it saved (resumed_params_hash
#    of the resumed run = params_hash of the first, whose last act was the save);
#  - the servers' counts continue from the saved values: over the whole run the pushes the
#    servers received are KEYS x the steps of all workers (none lost, none counted twice), the
#    resumed run received KEYS x its own steps on top of the first run's, and the updates are the
#    pushes applied (ssp, asp: pushes - dropped; backup: between applied / (W - B) and applied);
#  - the final test accuracy is within 0.05 of an uninterrupted run of EPOCHS epochs (the order
#    of arrival moves asp's accuracy by a few hundredths), and above MIN_ACCURACY.
#   train_resume_ps_async.sh FRUGAL MPIRUN NP KEYS STEPS_PER_EPOCH MIN_ACCURACY -- TRAIN FLAGS...
# FLAGS must not hold --epochs (FIRST_EPOCHS=1 and EPOCHS=3 unless set in the environment);
# STEPS_PER_EPOCH is the nominal number of steps per worker of an epoch.
set -uo pipefail
frugal=$1 mpirun=$2 np=$3 keys=$4 steps_per_epoch=$5 min_accuracy=$6
shift 6
[ "${1:-}" = -- ] && shift
first_epochs=${FIRST_EPOCHS:-1}
epochs=${EPOCHS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

run() {
  "$mpirun" -np "$np" --oversubscribe --mca pml ob1 --mca btl tcp,vader,self --timeout 240 \
    "$frugal" train --progress none "$@"
}
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.out; do echo "--- $f"; cat "$f"; done
  exit 1
}
source "$(dirname "$0")/summary_lib.sh"
field() { summary_field "$work/$1.json" "$2" | tr -d '"'; }

run "$@" --epochs "$epochs" --json "$work/whole.json" >"$work/whole.out" 2>&1 ||
  fail "the uninterrupted run failed"
run "$@" --epochs "$first_epochs" --checkpoint-dir "$work/ckpt" --json "$work/first.json" \
  >"$work/first.out" 2>&1 || fail "the first run failed"
expected=$((first_epochs * steps_per_epoch))
[ -f "$work/ckpt/$(printf 'ckpt-%012d' "$expected")/MANIFEST" ] ||
  fail "no committed checkpoint of step $expected: $(ls "$work/ckpt")"
run "$@" --epochs "$epochs" --checkpoint-dir "$work/ckpt" --resume "$work/ckpt" \
  --json "$work/resumed.json" >"$work/resumed.out" 2>&1 || fail "the resumed run failed"

[ "$(field resumed resumed_from_step)" = "$expected" ] ||
  fail "resumed_from_step is $(field resumed resumed_from_step), expected $expected"
echo "rank 0's parameters: saved $(field first params_hash), restored $(field resumed resumed_params_hash)"
[ "$(field first params_hash)" = "$(field resumed resumed_params_hash)" ] ||
  fail "the restored parameters differ from the saved ones"

for run_name in whole first resumed; do
  pushes=$(field $run_name ps_pushes)
  steps=$(field $run_name worker_steps)
  echo "$run_name: pushes $pushes, worker steps $steps, applied $(field $run_name ps_pushes_applied)," \
    "dropped $(field $run_name ps_pushes_dropped), updates $(field $run_name ps_updates)"
  [ -n "$pushes" ] && [ -n "$steps" ] || fail "$run_name: no ps_pushes or worker_steps"
  [ "$pushes" = $((keys * steps)) ] ||
    fail "$run_name: the servers received $pushes pushes, $keys keys x $steps steps were made"
  applied=$(field $run_name ps_pushes_applied)
  dropped=$(field $run_name ps_pushes_dropped)
  updates=$(field $run_name ps_updates)
  [ $((applied + dropped)) = "$pushes" ] ||
    fail "$run_name: $applied applied + $dropped dropped, $pushes pushes"
  if [ -n "${BACKUP_QUORUM:-}" ]; then
    [ "$updates" -le "$applied" ] && [ $((updates * BACKUP_QUORUM)) -ge "$applied" ] ||
      fail "$run_name: $updates updates of at most $BACKUP_QUORUM pushes cannot apply $applied"
  else
    [ "$updates" = "$applied" ] || fail "$run_name: $updates updates, $applied pushes applied"
  fi
done
first_pushes=$(field first ps_pushes)
first_steps=$(field first worker_steps)
[ "$first_steps" -gt 0 ] && [ "$(field resumed worker_steps)" -gt "$first_steps" ] ||
  fail "the resumed run's steps do not continue the first run's"
[ "$(field resumed ps_pushes)" -gt "$first_pushes" ] &&
  [ "$(field resumed ps_updates)" -gt "$(field first ps_updates)" ] ||
  fail "the servers' counts did not continue from the checkpoint"

whole_accuracy=$(field whole test_accuracy)
accuracy=$(field resumed test_accuracy)
echo "test accuracy: uninterrupted $whole_accuracy, resumed $accuracy"
awk -v a="$accuracy" -v w="$whole_accuracy" -v m="$min_accuracy" \
  'BEGIN { d = a - w; if (d < 0) d = -d; exit !(d <= 0.05 && a >= m) }' ||
  fail "the resumed run's accuracy $accuracy is not within 0.05 of $whole_accuracy or below $min_accuracy"
echo PASS
