#!/usr/bin/env bash
# Tier-3 fault tests of `frugal train --inject` under a real mpirun (3 ranks, rank 1 hit at step 5),
# each outcome asserted on frugal's own lines, never on mpirun's:
#   kill       the job ends non-zero within 30 s; frugal's line names rank 1 and the step;
#   stop       the job ends non-zero within 30 s; the error line of another rank names rank 1
#              (with priority overlap and with --overlap none);
#   drop       one message of rank 1 is lost: the job ends non-zero within 30 s, the error line
#              of another rank names rank 1 (both overlaps);
#   corrupt    one compressed payload of rank 1 has its header changed on the wire: a receiver
#              refuses it naming rank 1 as the sender;
#   nan-abort  a NaN in rank 1's gradient of fc2.weight: the job ends non-zero with one line
#              naming rank 1, step 5 and fc2.weight (the step given over the run, and as step 5
#              of epoch 1);
#   nan-skip   the same with --nan-policy skip: every rank skips step 5's update (one line says
#              so), the run ends with identical replicas and a finite loss;
#   slow       rank 1 three times slower: the run ends as the run without the fault.
# The modes stop-epoch, drop-epoch and corrupt-epoch place the fault by its epoch
# (epoch=2,step=3; batch 1024: 20 steps an epoch, so step 23 of the run, after the first epoch's
# evaluation): the outcome as above, and the injecting rank's line names step 3 of epoch 2 as step
# 23 of the run (with epoch= ignored the fault would fire at step 3). For stop and drop also
# under `frugal train --np 3 --max-restarts 1` with a checkpoint at every epoch's end: the job
# restarts from the checkpoint of step 20 with 3 steps to redo and ends with exit code 0.
#   train_inject.sh FRUGAL MPIRUN MODE
set -uo pipefail
frugal=$1 mpirun=$2 mode=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
summary=$work/summary.json
source "$(dirname "$0")/summary_lib.sh"

base=(--model mlp --batch-size 32 --max-steps 12 --progress none --timeout-ms 5000)
run() {
  local start_ms=$(($(date +%s%N) / 1000000))
  "$mpirun" -np 3 --oversubscribe --mca pml ob1 --mca btl tcp,vader,self --timeout 120 \
    "$frugal" train "${base[@]}" "$@" >"$work/out" 2>"$work/err"
  code=$?
  elapsed_ms=$(($(date +%s%N) / 1000000 - start_ms))
  echo "exit $code after $elapsed_ms ms"
  echo "--- frugal's lines on stderr:"
  grep -E '^([EW][0-9:.]+ \[rank [0-9]+\]|frugal: )' "$work/err"
}
fail() {
  echo "FAIL: $*"
  echo "--- stdout:"; cat "$work/out"; echo "--- stderr:"; cat "$work/err"
  exit 1
}
# frugal's own lines (its log and its error lines), without the injecting rank's announcement.
frugal_lines() {
  grep -E '^([EW][0-9:.]+ \[rank [0-9]+\]|frugal: )' "$work/err" | grep -v -- '--inject'
}
# The job fails within 30 s and an error line of another rank names rank 1: its engine's error
# log or its "frugal: rank R: train: ..." line as it ends (a rank whose peer failed first may be
# ended by the job's abort before it prints the second).
ends_naming_rank1() {
  [ "$code" -ne 0 ] || fail "exit code 0"
  [ "$elapsed_ms" -le 30000 ] || fail "took more than 30 s"
  frugal_lines | grep -E '^(frugal: rank [02]: train: |E[0-9:.]+ \[rank [02]\] engine: )' |
    grep -q "rank 1" ||
    fail "no rank's error line names rank 1"
}

# Step 3 of epoch 2 (the run's step 23) and the flags of the epoch modes.
epoch_base=(--model mlp --batch-size 1024 --epochs 2 --max-steps 26 --test-samples 500 --progress none
  --timeout-ms 5000)
at_epoch="at step 3 of epoch 2 (step 23 of the run)"
announces() {  # LINE: the injecting rank printed exactly this line
  grep -qxF "$1" "$work/err" || fail "no line '$1'"
}
# FLAGS...: `frugal train --np 3 --max-restarts 1` with checkpoints at every epoch's end; the
# job restarts from the checkpoint of step 20, 3 steps to redo on every rank, and ends well.
restarts_at_epoch_end() {
  rm -rf "$work/ckpt"
  "$frugal" train --np 3 "${epoch_base[@]}" --overlap none --checkpoint-dir "$work/ckpt" \
    --max-restarts 1 "$@" >"$work/out" 2>"$work/err"
  code=$?
  echo "restarted run: exit $code"; grep '^frugal: ' "$work/err"
  [ "$code" -eq 0 ] || fail "the restarted job ended with exit code $code"
  grep -qE "^frugal: restart 1/1 after: rank [0-9]: .*; resuming checkpoint $work/ckpt/ckpt-000000000020 at step 20 \(3 step\(s\) to redo\)$" \
    "$work/err" || fail "no restart from the checkpoint of step 20 with 3 steps to redo"
  grep -qx "frugal: 1 restart(s), 3 step(s) redone" "$work/err" || fail "no summary of the restart"
}

case "$mode" in
  kill)
    run --inject kill:rank=1,step=5
    [ "$code" -ne 0 ] || fail "exit code 0"
    [ "$elapsed_ms" -le 30000 ] || fail "took more than 30 s"
    grep -q '^frugal: rank 1: --inject kill:rank=1,step=5: killing (SIGKILL) this rank at step 5$' \
      "$work/err" || fail "no line of frugal's names the killed rank and the step"
    ;;
  stop)
    run --inject stop:rank=1,step=5
    ends_naming_rank1
    run --overlap none --inject stop:rank=1,step=5
    ends_naming_rank1
    ;;
  drop)
    run --inject drop:rank=1,step=5
    ends_naming_rank1
    run --overlap none --inject drop:rank=1,step=5
    ends_naming_rank1
    ;;
  corrupt)
    run --compress topk:ratio=0.01 --ef --compress-min-bytes 1024 --inject corrupt:rank=1,step=5
    ends_naming_rank1
    frugal_lines | grep -q "payload of rank 1: topk payload: payload header is corrupted" ||
      fail "no receiver refused rank 1's payload"
    ;;
  nan-abort)
    run --inject nan:rank=1,step=5,tensor=fc2.weight
    [ "$code" -ne 0 ] || fail "exit code 0"
    [ "$elapsed_ms" -le 30000 ] || fail "took more than 30 s"
    frugal_lines | grep -q "step 5: the gradient of 'fc2.weight' on rank 1 is not finite" ||
      fail "no line names the rank, the step and the tensor"
    # The same step named by its epoch (the first: 625 steps).
    run --inject nan:rank=1,epoch=1,step=5,tensor=fc2.weight
    [ "$code" -ne 0 ] || fail "exit code 0 with epoch=1"
    frugal_lines | grep -q "step 5: the gradient of 'fc2.weight' on rank 1 is not finite" ||
      fail "epoch=1: no line names the rank, the step and the tensor"
    ;;
  nan-skip)
    run --overlap none --nan-policy skip --inject nan:rank=1,step=5 --json "$summary"
    [ "$code" -eq 0 ] || fail "exit code $code"
    [ "$(grep -c 'skipped the update' "$work/err")" -eq 1 ] || fail "not one line about the skip"
    grep -q "^frugal: step 5: the gradient of 'fc1.weight' on rank 1 is not finite: every rank skipped the update" \
      "$work/err" || fail "the skip is not named"
    [ "$(summary_field "$summary" skipped_steps)" = 1 ] || fail "skipped_steps is not 1"
    [ "$(summary_field "$summary" params_consistent)" = true ] || fail "the replicas differ"
    [ "$(summary_field "$summary" steps)" = 12 ] || fail "steps is not 12"
    loss=$(summary_field "$summary" test_loss)
    case "$loss" in *nan* | *inf* | null) fail "test loss $loss" ;; esac
    ;;
  stop-epoch | drop-epoch)
    fault=${mode%-epoch}:rank=1,epoch=2,step=3
    base=("${epoch_base[@]}")
    run --inject "$fault"
    ends_naming_rank1
    if [ "$mode" = stop-epoch ]; then
      announces "frugal: rank 1: --inject $fault: freezing (SIGSTOP) this rank $at_epoch"
      cause="rank 1: --inject $fault: freezing"  # the frozen rank's own line
    else
      announces "frugal: rank 1: --inject $fault: losing the first message this rank sends from step 3 of epoch 2 (step 23 of the run) on"
      cause="rank [02]: .*rank 1"  # a line of a rank that waited for rank 1
    fi
    restarts_at_epoch_end --inject "$fault"
    grep -qE "^frugal: restart 1/1 after: $cause" "$work/err" ||
      fail "the restart's cause is not '$cause'"
    ;;
  corrupt-epoch)
    base=("${epoch_base[@]}")
    run --compress topk:ratio=0.01 --ef --compress-min-bytes 1024 \
      --inject corrupt:rank=1,epoch=2,step=3
    ends_naming_rank1
    announces "frugal: rank 1: --inject corrupt:rank=1,epoch=2,step=3: corrupting the header of the first compressed payload this rank sends from step 3 of epoch 2 (step 23 of the run) on"
    frugal_lines | grep -q "payload of rank 1: topk payload: payload header is corrupted" ||
      fail "no receiver refused rank 1's payload"
    ;;
  slow)
    # --overlap none: with priority overlap and 3 ranks the bucket composition follows timing.
    run --overlap none --json "$summary"
    [ "$code" -eq 0 ] || fail "the plain run failed"
    plain=$(summary_field "$summary" params_hash)
    run --overlap none --inject slow:rank=1,factor=3 --json "$summary"
    [ "$code" -eq 0 ] || fail "the slow run failed"
    [ "$(summary_field "$summary" params_hash)" = "$plain" ] || fail "the slow run ended elsewhere"
    ;;
  *)
    echo "unknown mode $mode"
    exit 2
    ;;
esac
echo PASS
