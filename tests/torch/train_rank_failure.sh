#!/usr/bin/env bash
# Tier-3 fault test of `frugal train` under a real mpirun with 3 ranks (or NP): rank 2 (or VICTIM)
# is killed (SIGKILL) or frozen (SIGSTOP) once training is under way.
#   stop:           frugal's own waits must notice: a line of frugal's (its log or its error
#                   line, not mpirun's) names rank 2 within 30 s and the job exits non-zero;
#   kill-recovery:  killed under `mpirun --enable-recovery`, where the runtime keeps the
#                   survivors running: again frugal's own line must name rank 2 within 30 s
#                   (mpirun's exit code is not asserted: with --enable-recovery it reports 0
#                   even after MPI_Abort);
#   kill:           killed under a default mpirun, which ends the whole job itself within about
#                   a second: the job must exit non-zero within 30 s (the runtime, not frugal,
#                   names the rank here; that case is the two above).
#   train_rank_failure.sh FRUGAL MPIRUN kill|kill-recovery|stop [NP VICTIM [TRAIN ARGS...]]
set -uo pipefail
frugal=$1
mpirun=$2
mode=$3
np=${4:-3}
victim_rank=${5:-2}
shift $(( $# < 5 ? $# : 5 ))
extra=("$@")
recovery=()
if [ "$mode" = kill-recovery ]; then recovery=(--enable-recovery); fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$mpirun" -np "$np" --oversubscribe "${recovery[@]}" --mca pml ob1 --mca btl tcp,vader,self \
  --timeout 120 "$frugal" train --model mlp --batch-size 16 --epochs 5 --progress lines \
  --timeout-ms 4000 "${extra[@]}" >"$work/out" 2>"$work/err" &
job=$!

# Wait for training to be under way (rank 0 reports 10% of the first epoch, or FedAvg's first
# round of five).
under_way='^(epoch 1/5: | +1 +[0-9]+ )'
for _ in $(seq 1 600); do
  grep -qE "$under_way" "$work/err" "$work/out" && break
  sleep 0.1
done
if ! grep -qE "$under_way" "$work/err" "$work/out"; then
  echo "training did not start"; cat "$work/err"; kill -9 $job; exit 1
fi

victim=""
for pid in $(pgrep -P $job); do
  if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$victim_rank"; then
    victim=$pid
  fi
done
if [ -z "$victim" ]; then
  echo "rank $victim_rank not found among the children of mpirun"; kill -9 $job; exit 1
fi

start_ms=$(($(date +%s%N) / 1000000))
if [ "$mode" = stop ]; then kill -STOP "$victim"; else kill -KILL "$victim"; fi
code=""
for _ in $(seq 1 400); do
  if ! kill -0 $job 2>/dev/null; then
    wait $job
    code=$?
    break
  fi
  sleep 0.1
done
elapsed_ms=$(($(date +%s%N) / 1000000 - start_ms))
kill -CONT "$victim" 2>/dev/null
echo "mode $mode: exit code ${code:-none} after $elapsed_ms ms"
echo "--- stderr:"; grep -v "^epoch " "$work/err"
if [ -z "$code" ]; then
  echo "FAIL: the job is still running 40 s after rank $victim_rank was hit"; kill -9 $job; exit 1
fi
if [ "$mode" != kill-recovery ] && [ "$code" -eq 0 ]; then echo "FAIL: exit code 0"; exit 1; fi
if [ "$elapsed_ms" -gt 30000 ]; then echo "FAIL: took more than 30 s"; exit 1; fi
if [ "$mode" = kill ]; then echo "PASS"; exit 0; fi
# frugal's lines: its log ("E06:22:02.111 [rank 0] ...") and its error line ("frugal: ...").
if ! grep -E '^([EW][0-9:.]+ \[rank [0-9]+\]|frugal: )' "$work/err" | grep -q "rank $victim_rank"; then
  echo "FAIL: no line of frugal's names rank $victim_rank"; exit 1
fi
echo "PASS"
