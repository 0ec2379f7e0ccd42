#!/usr/bin/env bash
# Tier-2 test of the parameter server's checkpoints where arrival order decides the bits (ssp, asp
# and backup with several workers): what a resume keeps. Either a run of FIRST_EPOCHS saves a
# checkpoint at the end of each epoch and stops, and a run with --resume continues it to EPOCHS;
# or (KILL=RANK:STEP) one `frugal train --np NP --max-restarts 1` run of EPOCHS has worker RANK
# killed at its step STEP of epoch FIRST_EPOCHS + 1 (--inject kill:...,epoch=E), after the
# checkpoint of epoch FIRST_EPOCHS, and the launcher restarts the job from that checkpoint.
# Asserted:
#  - the resumed run starts at the checkpoint of the nominal end of epoch FIRST_EPOCHS;
#  - rank 0's parameters as the checkpoint restored them equal those it saved (resumed_params_hash
#    of the resumed run = the hash of the saved parameters: the params_hash of the first run, whose
#    last act was the save, or of the checkpoint's record in --json);
#  - the servers' counts continue from the saved values: over the whole run the pushes the
#    servers received are KEYS x the steps of all workers (none lost, none counted twice), the
#    resumed run received pushes on top of those saved, and the updates are the pushes applied
#    (ssp, asp: pushes - dropped; backup: between applied / (W - B) and applied);
#  - with KILL: the restart is logged with its cause and checkpoint, and the killed worker redid
#    exactly STEP steps (the restarts record's steps_redone_by_rank; steps_redone is the most any
#    worker redid); with STALENESS=S (ssp) every other worker had done, when the job ended,
#    between k - S - 1 and k + S steps of the run, k the killed worker's (steps_done_by_rank);
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
source "$(dirname "$0")/train_mpirun_lib.sh"
source "$(dirname "$0")/summary_lib.sh"
field() { summary_field "$work/$1.json" "$2" | tr -d '"'; }

run "$@" --epochs "$epochs" --json "$work/whole.json" >"$work/whole.out" 2>&1 ||
  fail "the uninterrupted run failed"
expected=$((first_epochs * steps_per_epoch))
checkpoint=$work/ckpt/$(printf 'ckpt-%012d' "$expected")

if [ -z "${KILL:-}" ]; then
  run "$@" --epochs "$first_epochs" --checkpoint-dir "$work/ckpt" --json "$work/first.json" \
    >"$work/first.out" 2>&1 || fail "the first run failed"
  [ -f "$checkpoint/MANIFEST" ] || fail "no committed checkpoint of step $expected: $(ls "$work/ckpt")"
  run "$@" --epochs "$epochs" --checkpoint-dir "$work/ckpt" --resume "$work/ckpt" \
    --json "$work/resumed.json" >"$work/resumed.out" 2>&1 || fail "the resumed run failed"
  saved_hash=$(field first params_hash)
  runs="whole first resumed"
else
  kill_rank=${KILL%%:*} kill_step=${KILL##*:} kill_epoch=$((first_epochs + 1))
  fault="kill:rank=$kill_rank,epoch=$kill_epoch,step=$kill_step"
  "$frugal" train --np "$np" --progress none "$@" --epochs "$epochs" \
    --checkpoint-dir "$work/ckpt" --max-restarts 1 --inject "$fault" \
    --json "$work/resumed.json" >"$work/resumed.out" 2>&1 || fail "the restarted run failed"
  grep -q "^frugal: restart 1/1 after: rank $kill_rank: --inject $fault: killing (SIGKILL) this rank at step $kill_step of epoch $kill_epoch (step [0-9]* of the run); resuming checkpoint $checkpoint at step $expected (" \
    "$work/resumed.out" || fail "no restart line naming the fault and the checkpoint"
  restarts=$(grep '"event":"restarts"' "$work/resumed.json")
  echo "$restarts"
  echo "$restarts" | grep -q '"restarts":1,' || fail "not one restart"
  by_rank=$(echo "$restarts" | grep -o '"steps_redone_by_rank":{[^}]*}' | tail -1)
  echo "$by_rank" | grep -q "\"$kill_rank\":$kill_step[,}]" ||
    fail "worker $kill_rank redid $kill_step steps, the record says $by_rank"
  most=$(echo "$by_rank" | grep -o ':[0-9]*' | tr -d : | sort -n | tail -1)
  echo "$restarts" | grep -q "\"steps_redone\":$most," ||
    fail "steps_redone is not the most steps a worker redid ($most)"
  if [ -n "${STALENESS:-}" ]; then
    # ssp answers a pull once every active worker's clock is at least the puller's minus S.
    done_by=$(echo "$restarts" | grep -o '"steps_done_by_rank":{[^}]*}' | tail -1)
    k=$(echo "$done_by" | grep -o "\"$kill_rank\":[0-9]*" | cut -d: -f2)
    [ -n "$k" ] || fail "no steps done by worker $kill_rank in $done_by"
    for d in $(echo "$done_by" | grep -o ':[0-9]*' | tr -d :); do
      [ "$d" -ge $((k - STALENESS - 1)) ] && [ "$d" -le $((k + STALENESS)) ] ||
        fail "a worker had done $d steps, not within $STALENESS of worker $kill_rank's $k ($done_by)"
    done
  fi
  # The hash of rank 0's parameters when it saved the checkpoint resumed.
  saved_hash=$(grep '"event":"checkpoint"' "$work/resumed.json" | grep "\"step\":$expected[,}]" |
    head -1 | grep -o '"params_hash":"[0-9a-f]*"' | cut -d'"' -f4)
  [ -n "$saved_hash" ] || fail "no record of the checkpoint of step $expected"
  saved_pushes=$(grep '"event":"epoch"' "$work/resumed.json" | grep "\"epoch\":$first_epochs," |
    head -1 | grep -o '"ps_pushes":[0-9]*' | cut -d: -f2)
  [ -n "$saved_pushes" ] || fail "no ps_pushes in the record of epoch $first_epochs"
  runs="whole resumed"
fi

[ "$(field resumed resumed_from_step)" = "$expected" ] ||
  fail "resumed_from_step is $(field resumed resumed_from_step), expected $expected"
echo "rank 0's parameters: saved $saved_hash, restored $(field resumed resumed_params_hash)"
[ "$saved_hash" = "$(field resumed resumed_params_hash)" ] ||
  fail "the restored parameters differ from the saved ones"

for run_name in $runs; do
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
if [ -z "${KILL:-}" ]; then
  first_pushes=$(field first ps_pushes)
  first_steps=$(field first worker_steps)
  [ "$first_steps" -gt 0 ] && [ "$(field resumed worker_steps)" -gt "$first_steps" ] ||
    fail "the resumed run's steps do not continue the first run's"
  [ "$(field resumed ps_updates)" -gt "$(field first ps_updates)" ] ||
    fail "the servers' updates did not continue from the checkpoint"
else
  first_pushes=$saved_pushes
fi
[ "$(field resumed ps_pushes)" -gt "$first_pushes" ] ||
  fail "the servers' pushes did not continue from the checkpoint's $first_pushes"

whole_accuracy=$(field whole test_accuracy)
accuracy=$(field resumed test_accuracy)
echo "test accuracy: uninterrupted $whole_accuracy, resumed $accuracy"
awk -v a="$accuracy" -v w="$whole_accuracy" -v m="$min_accuracy" \
  'BEGIN { d = a - w; if (d < 0) d = -d; exit !(d <= 0.05 && a >= m) }' ||
  fail "the resumed run's accuracy $accuracy is not within 0.05 of $whole_accuracy or below $min_accuracy"
echo PASS
