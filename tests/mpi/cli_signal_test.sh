#!/usr/bin/env bash
# SIGTERM sent to a `frugal --np` launcher reaches mpirun and the ranks: the launcher exits with
# 128 + 15 within seconds and no rank is left running.
# Usage: cli_signal_test.sh /path/to/frugal
set -u
frugal="$1"
marker="$(mktemp -u /tmp/frugal-signal-XXXXXX).json"
"$frugal" bench allreduce --np 2 --sizes 16M --iters 100000 --warmup 0 --algorithms ring \
  --json "$marker" >/dev/null 2>&1 &
launcher=$!
# Wait until both ranks run.
for _ in $(seq 1 100); do
  [ "$(pgrep -f -- "$marker" | wc -l)" -ge 4 ] && break
  sleep 0.1
done
if [ "$(pgrep -f -- "$marker" | wc -l)" -lt 4 ]; then
  echo "the job did not start"; kill -KILL $launcher 2>/dev/null; exit 1
fi
start=$(date +%s)
kill -TERM $launcher
wait $launcher
code=$?
elapsed=$(( $(date +%s) - start ))
sleep 1
left=$(pgrep -f -- "$marker" | wc -l)
echo "exit code $code after ${elapsed} s; processes left: $left"
rm -f "$marker"
[ "$code" -eq 143 ] && [ "$elapsed" -le 15 ] && [ "$left" -eq 0 ]
