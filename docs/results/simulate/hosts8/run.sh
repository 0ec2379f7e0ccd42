#!/bin/bash
# `frugal simulate` against 8 workers on emulated hosts at 100 Mbit/s and 1 Gbit/s, everything from
# one sitting: the compute-only profile of 8 ranks, then per network the ring all-reduce's fit, the
# compute's slowdown beside it (bench contention), the gossip rounds' rates, the duplex share of a
# server's NIC with 8 peers (bench exchange on 9 hosts), and 40 steps of cnn of: BSP over the ring
# all-reduce, a parameter server (1 server + 8 workers, 9 hosts), D-PSGD on the ring, CHOCO-SGD with
# top-k 1% and DCD-PSGD with QSGD of 64 levels; then the table of measured against simulated steps.
# Usage: run.sh FRUGAL [OUT] (alone on the machine); RUNS="ps1" (a subset of the runs below) runs
# and prints only those, with the records they need; SKIP_RUNS=1 prints the table from the records,
# PROFILE=tl_h8_1gbit_topk.json against the traced top-k run instead of the compute-only run,
# PROFILE=own against each run's own trace (its slowest rank: the compute as it ran, so that only
# the communication is simulated); TRACE_RANK=lockstep reads the profile in lock step (each step's
# slowest rank).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../sim_runs.sh"  # sim_runs_start, gossip_compress_run, summary_ms, err
sim_runs_start "$1" "${2:-$here}"
nics="100mbit 1gbit"
runs="${RUNS:-bsp ps1 dpsgd choco dcd}"
# run_of NAME NIC: the run's processes (np), strategy flags (flags), label and the simulator's
# extra flags (simflags).
run_of() {
  np=8 flags=() simflags=(--fit-contention contention_h8_$2.jsonl)
  case $1 in
    bsp) label="BSP, ring all-reduce" ;;
    ps1) np=9 flags=(--arch ps:servers=1) label="parameter server, 1 server"
         simflags=(--fit-duplex exchange_h9_$2.jsonl) ;;
    dpsgd) flags=(--arch gossip:topology=ring) label="D-PSGD, ring"
           simflags+=(--fit-round round_h8_$2.jsonl) ;;
    choco|dcd) gossip_compress_run $1
               simflags=(--fit-round round_h8_$2.jsonl --bench-compress "$rates") ;;
  esac
}
if [ "${SKIP_RUNS:-0}" = 0 ]; then
  "$F" train --np 8 --model cnn --max-steps 40 --progress none --skip-comm \
    --timeline tl_h8_skipcomm.json --json skipcomm_h8.jsonl > skipcomm_h8.log 2>&1
  echo "skip-comm h8 rc=$?"
  # The profile of the earlier ring validation: a run with top-k 1% + EF at 1 Gbit/s on the same
  # hosts, whose compute carries the emulated links' share of the two cores.
  "$F" train --np 8 --emulate hosts=8,nic=1gbit --model cnn --max-steps 40 --progress none \
    --compress topk:ratio=0.01 --ef --timeline tl_h8_1gbit_topk.json \
    --json tl_h8_1gbit_topk.jsonl > tl_h8_1gbit_topk.log 2>&1
  echo "topk h8 1gbit rc=$?"
  for nic in $nics; do
    "$F" --np 8 --emulate hosts=8,nic=$nic bench allreduce --algorithms ring \
      --sizes 4K,64K,256K,1M,4M --iters 10 --json fit_h8_$nic.jsonl > fit_h8_$nic.log 2>&1
    echo "fit h8 $nic rc=$?"
    if [ "$runs" != ps1 ]; then
      "$F" --np 8 --emulate hosts=8,nic=$nic bench contention --model cnn --bytes 1M --iters 20 \
        --json contention_h8_$nic.jsonl > contention_h8_$nic.log 2>&1
      echo "contention h8 $nic rc=$?"
      "$F" bench round --np 8 --emulate hosts=8,nic=$nic --topology ring --sizes 32290,1819688 \
        --rounds 20 --json round_h8_$nic.jsonl > round_h8_$nic.log 2>&1
      echo "round h8 $nic rc=$?"
    fi
    # The server's keys are 128 KiB or less: the duplex share at their size and larger.
    "$F" bench exchange --np 9 --emulate hosts=9,nic=$nic --sizes 128K,1M,4M --iters 10 \
      --json exchange_h9_$nic.jsonl > exchange_h9_$nic.log 2>&1
    echo "exchange h9 $nic rc=$?"
    for run in $runs; do
      run_of $run $nic
      "$F" train --np $np --emulate hosts=$np,nic=$nic --model cnn --max-steps 40 \
        --progress none "${flags[@]}" --timeline tl_${run}_h8_$nic.json \
        --json ${run}_h8_$nic.jsonl > ${run}_h8_$nic.log 2>&1
      echo "train $run h8 $nic rc=$?"
    done
  done
fi
printf "| NIC | run | measured median (ms) | measured mean (ms) | run's compute (ms) | profile's compute (ms) | simulated (ms) | error vs mean | error vs median |\n"
printf "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
for nic in $nics; do
  for run in $runs; do
    run_of $run $nic
    read -r median mean compute < <(summary_ms ${run}_h8_$nic.jsonl)
    profile=(--timeline ${PROFILE:-tl_h8_skipcomm.json} --trace-rank ${TRACE_RANK:-0})
    [ "${PROFILE:-}" = own ] && profile=(--timeline tl_${run}_h8_$nic.json --trace-rank slowest)
    read -r sim sim_compute < <("$F" simulate "${profile[@]}" --model cnn --workers 8 \
      --fit fit_h8_$nic.jsonl "${simflags[@]}" "${flags[@]}" | tail -1 | awk '{print $4, $5}')
    printf "| %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %s | %s |\n" $nic "$label" $median \
      $mean $compute $sim_compute $sim "$(err $sim $mean)" "$(err $sim $median)"
  done
done
