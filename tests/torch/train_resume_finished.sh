#!/usr/bin/env bash
# Tier-2 test: resuming a checkpoint that leaves nothing to train (the last one of a run, or the
# one after the epoch that reached --stop-at-accuracy) trains and evaluates nothing and ends with
# the summary of the run that saved it: the same params_hash, steps, losses and accuracy, and no
# new epoch (FedAvg: round) record.
#   train_resume_finished.sh FRUGAL
set -uo pipefail
frugal=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.err; do echo "--- $f"; cat "$f"; done
  exit 1
}
source "$(dirname "$0")/summary_lib.sh"
# NAME EVENT FLAGS...: a run saving checkpoints, then --resume of its newest one.
check() {
  local name=$1 event=$2
  shift 2
  "$frugal" train --np 2 --progress none --checkpoint-dir "$work/$name" "$@" \
    --json "$work/$name.first.json" >/dev/null 2>"$work/$name.err" || fail "$name: the run failed"
  "$frugal" train --np 2 --progress none --checkpoint-dir "$work/$name" "$@" \
    --resume "$work/$name" --json "$work/$name.resumed.jsonl" >/dev/null 2>"$work/$name.err" ||
    fail "$name: the resumed run failed"
  grep -q "\"event\":\"$event\"" "$work/$name.resumed.jsonl" && fail "$name: the resumed run wrote a $event record"
  same_summary "$name: " first "$work/$name.first.json" resumed "$work/$name.resumed.jsonl" \
    params_hash steps train_loss test_loss test_accuracy bytes_sent_per_worker
}

check max_steps epoch --model mlp --batch-size 32 --max-steps 10 --overlap none \
  --checkpoint-every 5
# The first epoch reaches 50% (mlp, batch 512 per rank, 59 steps) and the run stops there.
check stop_at_accuracy epoch --model mlp --batch-size 512 --epochs 3 --overlap none \
  --stop-at-accuracy 0.5 --checkpoint-every epoch
[ "$(summary_field "$work/stop_at_accuracy.first.json" epochs)" = 1 ] ||
  fail "the run did not stop after its first epoch"
check fedavg round --model mlp --batch-size 32 --epochs 2 \
  --sync fedavg:clients=4,fraction=0.5,local-steps=3 --checkpoint-every 1
echo PASS
