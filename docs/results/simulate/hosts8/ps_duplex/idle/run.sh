#!/bin/bash
# The parameter server on 8 hosts at 100 Mbit/s (1 server + 8 workers, cnn, 40 steps) with and
# without TCP's slow start after idle, interleaved: default, slow-start-after-idle=0, twice.
# Usage: run.sh FRUGAL [OUT] (alone on the machine); prints the median and mean steps.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../../../sim_runs.sh"  # sim_runs_start, summary_ms
sim_runs_start "$1" "${2:-$here}"
for r in 1 2; do
  for idle in 1 0; do
    "$F" train --np 9 --emulate hosts=9,nic=100mbit,slow-start-after-idle=$idle --model cnn \
      --max-steps 40 --progress none --arch ps:servers=1 --json ps1_idle${idle}_r$r.jsonl \
      > ps1_idle${idle}_r$r.log 2>&1
    echo "ps1 slow-start-after-idle=$idle run $r rc=$?"
  done
done
printf "| slow-start-after-idle | run | median step (ms) | mean step (ms) |\n| --- | ---: | ---: | ---: |\n"
for idle in 1 0; do
  for r in 1 2; do
    read -r median mean compute < <(summary_ms ps1_idle${idle}_r$r.jsonl)
    printf "| %s | %s | %.1f | %.1f |\n" $idle $r $median $mean
  done
done
