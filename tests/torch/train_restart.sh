#!/usr/bin/env bash
# Tier-3 test of --max-restarts: `frugal train --np 3` with rank 1 killed at step 27 (--inject)
# and checkpoints every 8 steps is relaunched once by frugal from the checkpoint of step 24, logs
# the restart with its cause, counts the 3 steps redone, and ends with the parameters and test
# loss of the run that was never interrupted.
#   train_restart.sh FRUGAL [hostfile|emulate]
#     hostfile: through --hostfile, 3 local slots;
#     emulate:  each rank on its own emulated host (--emulate hosts=3,nic=1gbit; needs root), the
#               relaunch set up again and nothing of the network left behind.
set -uo pipefail
frugal=$1 variant=${2:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=(--np 3 --model mlp --batch-size 1024 --epochs 2 --overlap none --progress none)
if [ "$variant" = hostfile ]; then
  echo "localhost slots=3" >"$work/hosts"
  flags+=(--hostfile "$work/hosts")
elif [ "$variant" = emulate ]; then
  flags+=(--emulate hosts=3,nic=1gbit)
fi
fail() {
  echo "FAIL: $*"
  echo "--- stderr:"; cat "$work/err"
  exit 1
}
source "$(dirname "$0")/summary_lib.sh"

"$frugal" train "${flags[@]}" --json "$work/whole.json" >"$work/out" 2>"$work/err" ||
  fail "the uninterrupted run failed"

"$frugal" train "${flags[@]}" --checkpoint-dir "$work/ckpt" --checkpoint-every 8 \
  --max-restarts 1 --inject kill:rank=1,step=27 --json "$work/restarted.json" \
  >"$work/out" 2>"$work/err"
code=$?
echo "exit $code"; grep '^frugal: ' "$work/err"
[ "$code" -eq 0 ] || fail "exit code $code"
expected="frugal: restart 1/1 after: rank 1: --inject kill:rank=1,step=27: killing (SIGKILL) this rank at step 27; resuming checkpoint $work/ckpt/ckpt-000000000024 at step 24 (3 step(s) to redo)"
grep -qxF "$expected" "$work/err" || fail "no restart line naming the cause, the checkpoint and the steps"
grep -qx "frugal: 1 restart(s), 3 step(s) redone" "$work/err" || fail "no summary of the restarts"
grep '"event":"restarts"' "$work/restarted.json" | grep -q '"restarts":1,"steps_redone":3' ||
  fail "no restarts record in --json"
ls "$work"/ckpt/.progress-* "$work"/ckpt/.failure-* >/dev/null 2>&1 && fail "notes were left behind"
if [ "$variant" = emulate ]; then
  ip netns list | grep -q '^frg-' && fail "emulated hosts were left behind: $(ip netns list)"
fi
same_summary "" uninterrupted "$work/whole.json" restarted "$work/restarted.json" \
  params_hash test_loss test_accuracy steps
echo PASS
