#!/bin/bash
# Compressed gossip (CHOCO-SGD with top-k 1%, DCD-PSGD with QSGD of 64 levels; the study's
# settings) against `frugal simulate`, everything from one sitting: the compute-only profiles of 2
# and 4 ranks, the ring all-reduce fits and the gossip rounds' rates of the emulated hosts, then
# 40 steps of cnn of each algorithm on the ring of 2 hosts (1 Gbit/s, a core per rank) and of 4
# hosts (100 Mbit/s and 1 Gbit/s), and the table of measured against simulated steps.
# Usage: run.sh FRUGAL [OUT] (alone on the machine: the emulated network and the times);
# SKIP_RUNS=1 prints the table from the records, TRACE_RANK=lockstep reads the profiles in lock
# step (each step's slowest rank).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../sim_runs.sh"  # sim_runs_start, gossip_compress_run, summary_ms, err
sim_runs_start "$1" "${2:-$here}"
cells() { # HOSTS NIC: the fits of that network
  "$F" --np $1 --emulate hosts=$1,nic=$2 bench allreduce --algorithms ring \
    --sizes 4K,64K,256K,1M,4M --iters 10 --json fit_h$1_$2.jsonl > fit_h$1_$2.log 2>&1
  echo "fit h$1 $2 rc=$?"
  # The rounds of the two messages: CHOCO's (top-k 1% of cnn) and the dense model's.
  "$F" bench round --np $1 --emulate hosts=$1,nic=$2 --topology ring --sizes 32290,1819688 \
    --rounds 20 --json round_h$1_$2.jsonl > round_h$1_$2.log 2>&1
  echo "round h$1 $2 rc=$?"
}
if [ "${SKIP_RUNS:-0}" = 0 ]; then
  for h in 2 4; do
    "$F" train --np $h --model cnn --max-steps 40 --progress none --skip-comm \
      --timeline tl_h${h}_skipcomm.json --json skipcomm_h$h.jsonl > skipcomm_h$h.log 2>&1
    echo "skip-comm h$h rc=$?"
  done
  cells 2 1gbit
  cells 4 100mbit
  cells 4 1gbit
  for cell in 2:1gbit 4:100mbit 4:1gbit; do
    h=${cell%%:*} nic=${cell#*:}
    for run in choco dcd; do
      gossip_compress_run $run
      "$F" train --np $h --emulate hosts=$h,nic=$nic --model cnn --max-steps 40 --progress none \
        "${flags[@]}" --json ${run}_h${h}_${nic}.jsonl > ${run}_h${h}_${nic}.log 2>&1
      echo "train $run h$h $nic rc=$?"
    done
  done
fi
printf "| hosts | NIC | run | measured median (ms) | measured mean (ms) | run's compute (ms) | profile's compute (ms) | simulated (ms) | error vs mean |\n"
printf "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n"
for cell in 2:1gbit 4:100mbit 4:1gbit; do
  h=${cell%%:*} nic=${cell#*:}
  for run in choco dcd; do
    gossip_compress_run $run
    read -r median mean compute < <(summary_ms ${run}_h${h}_${nic}.jsonl)
    read -r sim sim_compute < <("$F" simulate --timeline tl_h${h}_skipcomm.json \
      --trace-rank ${TRACE_RANK:-0} --model cnn \
      --workers $h --fit fit_h${h}_${nic}.jsonl --fit-round round_h${h}_${nic}.jsonl \
      --bench-compress "$rates" "${flags[@]}" | tail -1 | awk '{print $4, $5}')
    printf "| %s | %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %s |\n" $h $nic "$label" $median \
      $mean $compute $sim_compute $sim "$(err $sim $mean)"
  done
done
