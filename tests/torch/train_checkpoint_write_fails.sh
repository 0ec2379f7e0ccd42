#!/usr/bin/env bash
# Tier-2 test: a checkpoint that one rank cannot write ends the run with a line naming that rank,
# the step and the reason, commits nothing, and leaves the previous checkpoint usable: a run
# resumed from it ends as the run that was never interrupted.
#   train_checkpoint_write_fails.sh FRUGAL
set -uo pipefail
frugal=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=(--np 2 --model mlp --batch-size 32 --max-steps 10 --overlap none --progress none)
fail() {
  echo "FAIL: $*"
  echo "--- stderr:"; cat "$work/err"
  exit 1
}
source "$(dirname "$0")/summary_lib.sh"

"$frugal" train "${flags[@]}" --json "$work/whole.json" >"$work/out" 2>"$work/err" ||
  fail "the uninterrupted run failed"

# Rank 1's file of step 10 cannot be created: its temporary name is taken by a directory.
blocked="$work/ckpt/ckpt-000000000010/rank-00001.state.tmp"
mkdir -p "$blocked"
"$frugal" train "${flags[@]}" --checkpoint-dir "$work/ckpt" --checkpoint-every 5 \
  --json "$work/failed.json" >"$work/out" 2>"$work/err"
code=$?
echo "exit $code"; grep '^frugal: ' "$work/err"
[ "$code" -ne 0 ] || fail "exit code 0"
grep -q "checkpoint at step 10 failed on rank 1: .*cannot create $blocked" "$work/err" ||
  fail "no line names rank 1, the step and the reason"
grep -q '"event":"summary"' "$work/failed.json" && fail "the failed run wrote a summary"
[ -f "$work/ckpt/ckpt-000000000005/MANIFEST" ] || fail "the checkpoint of step 5 is gone"
[ -f "$work/ckpt/ckpt-000000000010/MANIFEST" ] && fail "the checkpoint of step 10 was committed"

rmdir "$blocked"
"$frugal" train "${flags[@]}" --checkpoint-dir "$work/ckpt" --checkpoint-every 5 \
  --resume "$work/ckpt" --json "$work/resumed.json" >"$work/out" 2>"$work/err" ||
  fail "the resumed run failed"
[ "$(summary_field "$work/resumed.json" resumed_from_step)" = 5 ] || fail "not resumed at step 5"
same_summary "" uninterrupted "$work/whole.json" resumed "$work/resumed.json" \
  params_hash test_loss steps
echo PASS
