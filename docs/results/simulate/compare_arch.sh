#!/bin/bash
# Simulated against measured step times for the parameter-server and D-PSGD runs of
# `validate_emulated.sh BUILD arch`: the network from the all-reduce fit on 4 emulated hosts at
# the same NIC rate (--fit fit_h4_RATE.jsonl), the per-layer times from the 4-host profile (the
# trace of the top-k run at 1 Gbit/s, tl_h4_1gbit_topk.json), as compare_emulated.sh does for the
# ring. The D-PSGD rows are simulated a second time with the rate of the graph's round measured on
# the same hosts (--fit-round round_h4_RATE.jsonl, from `validate_emulated.sh BUILD dpsgd`).
# With `own`, only the D-PSGD runs (traced by `validate_emulated.sh BUILD dpsgd`), each simulated
# with its own trace as the compute profile (its slowest rank: --trace-rank slowest), the
# all-reduce fit, and the round's measured rate and copy rate (--fit-round);
# measured: the summary's step_seconds_median and the mean step of the epoch (global_batch /
# samples_per_second), since the simulated step is a mean over its steps. Columns: the run's own
# compute per step (compute_seconds / steps), the profile's compute as the simulator reads it,
# the simulated step, and its error against the median and the mean.
# With `ps-compress`, the compressed parameter-server runs of docs/results/ps/run.sh compress (cnn,
# 4 workers + 1 server on 5 emulated hosts at 100 Mbit/s: dense, pushes top-k 1% + EF, pushes and
# answers top-k 1%), simulated with the same 4-host profile and 100 Mbit/s fit as the rows above
# (those runs were not traced), and once more with the encode and decode rates of
# ../compress_bench/bench_sparse.jsonl (--bench-compress).
# With `local`, the Local SGD runs of `validate_emulated.sh BUILD local` (cnn on 4 emulated hosts,
# period 4, with overlapped averages, with QSGD deltas), each simulated with its own trace as the
# profile (--trace-rank slowest) and the all-reduce fit of its NIC rate; QSGD's encode and decode
# rates from ../compress_bench/bench_quant.jsonl. Measured: the mean step of the run
# (global_batch / samples_per_second), since a period's steps differ (one averages, H - 1 do not).
# With `fedavg`, the FedAvg runs of `validate_emulated.sh BUILD fedavg`, against the simulation with
# the top-k run's profile (PROFILE= another trace) and the all-reduce fit of the NIC rate.
# With `local-contention`, the Local SGD runs against the compute-only profile (PROFILE), with and
# without the contention measured on the same hosts.
# With `own-contention`, the D-PSGD runs of `dpsgd` the same way. CONTENTION=NAME reads the
# contention from NAME_h4_NIC.jsonl (contention_all: with the gossip rounds' records of
# `validate_emulated.sh BUILD contention-gossip`).
# With `fedavg-epochs`, the FedAvg runs with local epochs of `validate_emulated.sh BUILD
# fedavg-epochs` against the simulation of the same 4 rounds (--rounds 4, the run's seed) with
# each run's partition record (--fit-partition), the compute-only profile (PROFILE) and the
# all-reduce fit of the NIC rate (FedAvg's compute is not beside a message: no contention).
# H=2: the 2-host runs.
# With `gossip-compress`, the compressed gossip runs of `validate_emulated.sh BUILD gossip-compress`
# (CHOCO-SGD with top-k, DCD-PSGD with QSGD, ring of 4 hosts) as `own-contention` does D-PSGD's,
# with the compressors' encode and decode rates of ../compress_bench (--bench-compress).
# Usage: compare_arch.sh BUILD_DIR [own|own-contention|ps-compress|local|local-contention|fedavg|fedavg-epochs|gossip-compress]
set -u
build="$(cd "$1" && pwd)"
here="$(cd "$(dirname "$0")" && pwd)"
cd "$(dirname "$0")/${DIR:-.}"  # DIR: the records' directory, as for validate_emulated.sh
F="$build/apps/frugal/frugal"
source "$here/sim_runs.sh"  # gossip_compress_run, summary_ms, err
# The flags and the label of a run of `validate_emulated.sh BUILD local` (flags, label).
local_run() {
  case $1 in
    local4) flags=(--sync local:period=4) label="Local SGD, period 4" ;;
    local4ov) flags=(--sync local:period=4,overlap=1) label="Local SGD, period 4, overlap=1" ;;
    local4q) flags=(--sync local:period=4 --compress qsgd
                    --bench-compress "$here/../compress_bench/bench_quant.jsonl")
             label="Local SGD, period 4, QSGD deltas" ;;
  esac
}
# The graph and the label of a D-PSGD run of `validate_emulated.sh BUILD dpsgd` (topology, label).
dpsgd_run() {
  case $1 in
    dpsgd) topology=ring label="ring" ;;
    dpsgd1) topology=onepeer-exp label="one-peer exponential" ;;
  esac
}
# One row: the mean step of the run RECORD against the compute-only profile (PROFILE) with the
# all-reduce fit of NIC, without and with the contention of contention_h4_NIC.jsonl; the other
# arguments are the simulation's own flags.
contention_row() {
  local nic=$1 label=$2 record=$3
  shift 3
  local median mean compute plain charged
  read -r median mean compute < <(summary_ms "$record")
  sim() {
    "$F" simulate --timeline ${PROFILE:-tl_h4_skipcomm.json} --model cnn --workers 4 \
      --fit fit_h4_${nic}.jsonl "$@" | tail -1 | awk '{print $4}'
  }
  plain=$(sim "$@")
  charged=$(sim "$@" --fit-contention ${CONTENTION:-contention}_h4_${nic}.jsonl)
  printf "| %s | %s | %.1f | %.1f | %s | %.1f | %s |\n" $nic "$label" $mean $plain \
    "$(err $plain $mean)" $charged "$(err $charged $mean)"
}
# The head of a table of contention_row lines; $1 names the run column.
contention_head() {
  printf "| NIC | %s | measured mean (ms) | simulated (ms) | error | with contention (ms) | error |\n" "$1"
  printf "| --- | --- | ---: | ---: | ---: | ---: | ---: |\n"
}
if [ "${2:-}" = ps-compress ]; then
  printf "| run | measured median (ms) | measured mean (ms) | simulated (ms) | error vs median | error vs mean | simulated with rates (ms) |\n"
  printf "| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n"
  push="--compress topk:ratio=0.01 --ef" pull="--compress-pull topk:ratio=0.01"
  for run in ps1_cnn ps1_cnn_push ps1_cnn_pushpull; do
    case $run in
      ps1_cnn) flags="" label="dense" ;;
      ps1_cnn_push) flags="$push" label="pushes top-k 1% + EF" ;;
      ps1_cnn_pushpull) flags="$push $pull" label="pushes and answers top-k 1%" ;;
    esac
    read -r median mean < <(grep '"event":"summary"' "$here/../ps/$run.jsonl" | /usr/bin/python3 -c '
import json,sys; d=json.load(sys.stdin)
print(d["step_seconds_median"]*1e3, d["global_batch"]/d["samples_per_second"]*1e3)')
    sim() {
      "$F" simulate --timeline tl_h4_1gbit_topk.json --model cnn --workers 4 \
        --fit fit_h4_100mbit.jsonl --arch ps:servers=1 $flags "$@" | tail -1 | awk '{print $4}'
    }
    s=$(sim)
    rated=$(sim --bench-compress "$here/../compress_bench/bench_sparse.jsonl")
    printf "| %s | %.1f | %.1f | %.1f | %s | %s | %.1f |\n" "$label" $median $mean $s \
      "$(err $s $median)" "$(err $s $mean)" $rated
  done
  exit 0
fi
if [ "${2:-}" = fedavg ]; then
  # Measured: the median of the rounds' round_seconds (training and the all-reduce, not the
  # evaluation); simulated: the step printed times m S / n = 8 x 10 / 4 client steps.
  printf "| NIC | measured round, median (ms) | rounds (ms) | simulated round (ms) | error |\n"
  printf "| --- | ---: | --- | ---: | ---: |\n"
  for nic in 100mbit 1gbit; do
    read -r median all < <(grep '"event":"round"' fedavg_h4_${nic}.jsonl | /usr/bin/python3 -c '
import json,statistics,sys; r=[json.loads(l)["round_seconds"]*1e3 for l in sys.stdin]
print(statistics.median(r), "/".join(f"{x:.0f}" for x in r))')
    step=$("$F" simulate --timeline ${PROFILE:-tl_h4_1gbit_topk.json} --model cnn --workers 4 \
      --fit fit_h4_${nic}.jsonl --sync fedavg:clients=8,fraction=1,local-steps=10 |
      tail -1 | awk '{print $4}')
    sim=$(/usr/bin/python3 -c "print($step * 8 * 10 / 4)")
    printf "| %s | %.1f | %s | %.1f | %s |\n" $nic $median "$all" $sim "$(err $sim $median)"
  done
  exit 0
fi
if [ "${2:-}" = fedavg-epochs ]; then
  # Measured: the mean of the rounds' round_seconds; simulated: the step printed times the rounds'
  # client steps over 4 workers and 4 rounds (the same rounds: the same clients and steps).
  printf "| NIC | measured round, mean (ms) | rounds (ms) | client steps | simulated (ms) | error |\n"
  printf "| --- | ---: | --- | ---: | ---: | ---: |\n"
  h=${H:-4}  # H=2: the 2-host runs (1 Gbit/s), PROFILE=tl_h2_skipcomm.json
  nics="100mbit 1gbit"
  [ "$h" = 2 ] && nics=1gbit
  for nic in $nics; do
    run=fedavg_epochs_h${h}_${nic}.jsonl
    read -r mean all steps < <(grep '"event":"round"' $run | /usr/bin/python3 -c '
import json,statistics,sys; r=[json.loads(l) for l in sys.stdin]
t=[x["round_seconds"]*1e3 for x in r]
print(statistics.mean(t), "/".join("%.0f" % x for x in t), sum(x["steps"] for x in r))')
    sim=$("$F" simulate --timeline ${PROFILE:-tl_h4_skipcomm.json} --model cnn --workers $h \
      --fit fit_h${h}_${nic}.jsonl --sync fedavg:clients=8,fraction=0.5,local-epochs=1 \
      --fit-partition $run --rounds 4 | tail -1 | awk -v s=$steps -v h=$h '{print $4 * s / h / 4}')
    printf "| %s | %.1f | %s | %s | %.1f | %s |\n" $nic $mean "$all" $steps $sim "$(err $sim $mean)"
  done
  exit 0
fi
if [ "${2:-}" = local-contention ]; then
  # The same runs against the compute-only profile (PROFILE, a --skip-comm trace on the same
  # hosts) with and without the contention of contention_h4_NIC.jsonl.
  contention_head run
  for nic in 100mbit 1gbit; do
    for run in local4 local4ov local4q; do
      local_run $run
      contention_row $nic "$label" ${run}_h4_${nic}.jsonl "${flags[@]}"
    done
  done
  exit 0
fi
if [ "${2:-}" = local ]; then
  printf "| NIC | run | measured mean (ms) | measured median (ms) | run's compute (ms) | profile's compute (ms) | simulated (ms) | error vs mean |\n"
  printf "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n"
  for nic in 100mbit 1gbit; do
    for run in local4 local4ov local4q; do
      local_run $run
      read -r median mean compute < <(summary_ms ${run}_h4_${nic}.jsonl)
      read -r sim sim_compute < <("$F" simulate --timeline tl_${run}_h4_${nic}.json \
        --trace-rank slowest --model cnn --workers 4 --fit fit_h4_${nic}.jsonl "${flags[@]}" |
        tail -1 | awk '{print $4, $5}')
      printf "| %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %s |\n" $nic "$label" $mean $median \
        $compute $sim_compute $sim "$(err $sim $mean)"
    done
  done
  exit 0
fi
if [ "${2:-}" = own-contention ]; then
  # The D-PSGD runs of `dpsgd` against the compute-only profile (PROFILE) with the round's rate
  # and copy rate, with and without the contention of contention_h4_NIC.jsonl.
  contention_head graph
  for nic in 100mbit 1gbit; do
    for run in dpsgd dpsgd1; do
      dpsgd_run $run
      contention_row $nic "$label" ${run}_h4_${nic}.jsonl --fit-round round_h4_${nic}.jsonl \
        --arch gossip:topology=$topology
    done
  done
  exit 0
fi
if [ "${2:-}" = gossip-compress ]; then
  contention_head run
  for nic in 100mbit 1gbit; do
    for run in choco dcd; do
      gossip_compress_run $run
      contention_row $nic "$label" ${run}_h4_${nic}.jsonl --fit-round round_h4_${nic}.jsonl \
        --bench-compress "$rates" "${flags[@]}"
    done
  done
  exit 0
fi
if [ "${2:-}" = own ]; then
  printf "| NIC | graph | measured median (ms) | measured mean (ms) | run's compute (ms) | profile's compute (ms) | simulated (ms) | error vs median | error vs mean |\n"
  printf "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
  for nic in 100mbit 1gbit; do
    for run in dpsgd dpsgd1; do
      dpsgd_run $run
      read -r median mean compute < <(summary_ms ${run}_h4_${nic}.jsonl)
      read -r sim sim_compute < <("$F" simulate --timeline tl_${run}_h4_${nic}.json \
        --trace-rank slowest --model cnn --workers 4 --fit fit_h4_${nic}.jsonl \
        --fit-round round_h4_${nic}.jsonl --arch gossip:topology=$topology | tail -1 | awk '{print $4, $5}')
      printf "| %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %s | %s |\n" $nic "$label" $median \
        $mean $compute $sim_compute $sim "$(err $sim $median)" "$(err $sim $mean)"
    done
  done
  exit 0
fi
printf "| NIC | architecture | measured step (ms) | simulated step (ms) | error | simulated with the round's rate (ms) | error |\n"
printf "| --- | --- | ---: | ---: | ---: | ---: | ---: |\n"
for nic in 100mbit 1gbit; do
  for run in ps1 ps2 dpsgd dpsgd1; do
    case $run in
      ps1) arch=ps:servers=1; label="parameter server, 1 server" ;;
      ps2) arch=ps:servers=2; label="parameter server, 2 servers" ;;
      dpsgd) arch=gossip:topology=ring; label="D-PSGD, ring" ;;
      dpsgd1) arch=gossip:topology=onepeer-exp; label="D-PSGD, one-peer exponential" ;;
    esac
    j=${run}_h4_${nic}.jsonl
    measured=$(grep '"event":"summary"' $j | python3 -c 'import json,sys; print(json.load(sys.stdin)["step_seconds_median"]*1e3)')
    sim=$("$F" simulate --timeline tl_h4_1gbit_topk.json --model cnn --workers 4 \
      --fit fit_h4_${nic}.jsonl --arch $arch | tail -1 | awk '{print $4}')
    err=$(python3 -c "print(f'{($sim-$measured)/$measured*100:+.1f}%')")
    round_sim=- round_err=-
    if [ "${run#dpsgd}" != "$run" ] && [ -f round_h4_${nic}.jsonl ]; then
      round_sim=$("$F" simulate --timeline tl_h4_1gbit_topk.json --model cnn --workers 4 \
        --fit fit_h4_${nic}.jsonl --fit-round round_h4_${nic}.jsonl --arch $arch | tail -1 |
        awk '{printf "%.1f", $4}')
      round_err=$(python3 -c "print(f'{($round_sim-$measured)/$measured*100:+.1f}%')")
    fi
    printf "| %s | %s | %.1f | %.1f | %s | %s | %s |\n" $nic "$label" $measured $sim $err \
      $round_sim $round_err
  done
done
