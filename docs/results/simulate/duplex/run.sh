#!/bin/bash
# The duplex share of a parameter server's NIC measured, and the simulator against measured PS
# steps with it (docs/performance.md, "The duplex share measured"). Run alone, in OUT (default: this
# directory):
#   run.sh FRUGAL_BINARY measure [OUT]  # bench exchange on 2 and 5 emulated hosts, PS runs of 1 and 2 servers
#   run.sh FRUGAL_BINARY compare [OUT]  # frugal simulate with each share against the measured steps
set -u
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../sim_runs.sh"  # sim_runs_start
sim_runs_start "$1" "${3:-$here}"
sim=(--timeline "$here/../tl_h4_1gbit_topk.json" --model cnn --workers 4
     --fit "$here/../fit_h4_100mbit.jsonl")
case $2 in
  measure)
    "$F" bench exchange --np 2 --emulate hosts=2,nic=100mbit --sizes 128K,1M,4M --iters 10 \
      --json exchange_h2_100mbit.jsonl
    "$F" bench exchange --np 5 --emulate hosts=5,nic=100mbit --sizes 128K,1M,4M --iters 10 \
      --json exchange_h5_100mbit.jsonl
    for s in 1 2; do
      "$F" train --progress none --json "ps${s}_cnn.jsonl" --np $((4 + s)) \
        --emulate hosts=$((4 + s)),nic=100mbit --arch ps:servers=$s --model cnn --max-steps 40 \
        >"ps${s}_cnn.log" 2>&1
    done ;;
  compare)
    echo "| servers | measured (ms) | share | simulated (ms) | error |"
    echo "| ---: | ---: | --- | ---: | ---: |"
    for s in 1 2; do
      measured=$(grep -o '"step_seconds_median":[0-9.]*' "ps${s}_cnn.jsonl" | cut -d: -f2)
      for share in "1" "--fit-duplex exchange_h2_100mbit.jsonl" \
                   "--fit-duplex exchange_h5_100mbit.jsonl" "0.816"; do
        case $share in
          --*) flags=($share) ;;
          *) flags=(--duplex-share "$share") ;;
        esac
        step=$("$F" simulate "${sim[@]}" --arch ps:servers=$s "${flags[@]}" | tail -1 |
               awk '{print $4}')
        echo "| $s | $(echo "$measured * 1000" | bc -l | xargs printf %.1f) | ${share#--fit-duplex } | $step |" \
             "$(echo "($step / ($measured * 1000) - 1) * 100" | bc -l | xargs printf %+.1f)% |"
      done
    done ;;
  *) echo "usage: run.sh FRUGAL measure|compare" >&2; exit 2 ;;
esac
