#!/bin/bash
# Validation runs of frugal simulate with per-layer times taken on the emulated hosts themselves:
# for each host count and NIC rate, the ring all-reduce's alpha-beta fit on that network
# (`frugal bench allreduce`), the compute's slowdown beside a 1 MB ring all-reduce on those hosts
# (`frugal bench contention`) and 40 steps of cnn, dense and top-k 1% + EF, with --timeline.
# With `arch`, instead: 40 steps of cnn over a parameter server (4 workers and 1 or 2 servers,
# each rank on a host of its own) and D-PSGD on a ring of 4 hosts, at 100 Mbit/s and 1 Gbit/s.
# With `dpsgd`: only the D-PSGD runs of `arch` on the ring and the one-peer graph, each traced
# (its trace is the compute profile of its own simulation, `compare_arch.sh BUILD own`), and
# before them the rate of a gossip round's flows on the same hosts (`frugal bench round`, the
# ring and the one-peer exponential graph of 4, the cnn model's size) for `--fit-round`.
# With `local`: 40 steps of cnn with Local SGD over the ring of 4 hosts (period 4; period 4 with
# overlapped averages; period 4 with QSGD-compressed model deltas) at 100 Mbit/s and 1 Gbit/s,
# each traced (its trace is the compute profile of its own simulation, `compare_arch.sh BUILD
# local`).
# With `fedavg`: 6 rounds of FedAvg over the ring of 4 hosts (8 clients, all of them every round,
# 10 local steps each) at 100 Mbit/s and 1 Gbit/s (`compare_arch.sh BUILD fedavg`).
# With `fedavg-epochs`: 4 rounds of FedAvg over the ring of 4 hosts with local epochs (8 clients
# on a Dirichlet(0.5) split, half of them each round, one local epoch each) at 100 Mbit/s and
# 1 Gbit/s (`compare_arch.sh BUILD fedavg-epochs`).
# With `contention-gossip`: the compute's slowdown beside gossip rounds of the cnn model on the
# ring and the one-peer graph of 4 hosts (`frugal bench contention --topology`).
# With `gossip-compress`: 40 steps of cnn with compressed gossip on the ring of 4 hosts, CHOCO-SGD
# with top-k 1% (gamma 0.05) and DCD-PSGD with QSGD (64 levels), at 100 Mbit/s and 1 Gbit/s
# (`compare_arch.sh BUILD gossip-compress`).
# Usage: validate_emulated.sh BUILD_DIR [arch|dpsgd|local|fedavg|fedavg-epochs|contention-gossip|gossip-compress] (run alone: the emulated network and the times).
set -u
build="$(cd "$1" && pwd)"
what="${2:-allreduce}"
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
# DIR (relative to this directory): where the records are written and read; "." by default.
mkdir -p "${DIR:-.}" && cd "${DIR:-.}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
F="$build/apps/frugal/frugal"
source "$here/sim_runs.sh"
if [ "$what" = fedavg ]; then
  for nic in 100mbit 1gbit; do
    "$F" train --np 4 --emulate hosts=4,nic=$nic --model cnn --epochs 6 --progress none \
      --sync fedavg:clients=8,fraction=1,local-steps=10 --json fedavg_h4_${nic}.jsonl \
      > fedavg_h4_${nic}.log 2>&1
    echo "train fedavg 4 $nic rc=$?"
  done
  exit 0
fi
if [ "$what" = gossip-compress ]; then
  for nic in 100mbit 1gbit; do
    for run in choco dcd; do
      gossip_compress_run $run
      "$F" train --np 4 --emulate hosts=4,nic=$nic --model cnn --max-steps 40 --progress none \
        "${flags[@]}" --json ${run}_h4_${nic}.jsonl > ${run}_h4_${nic}.log 2>&1
      echo "train $run 4 $nic rc=$?"
    done
  done
  exit 0
fi
if [ "$what" = contention-gossip ]; then
  # The compute's slowdown beside D-PSGD's rounds of the cnn model (1819688 bytes) on the ring and
  # the one-peer graph of 4 hosts; contention_all_h4_NIC.jsonl holds them with the all-reduce's
  # record of the default run (CONTENTION=contention_all compare_arch.sh BUILD own-contention).
  for nic in 100mbit 1gbit; do
    for graph in ring onepeer-exp; do
      "$F" --np 4 --emulate hosts=4,nic=$nic bench contention --model cnn --bytes 1819688 \
        --iters 20 --topology $graph --json contention_${graph}_h4_${nic}.jsonl \
        > contention_${graph}_h4_${nic}.log 2>&1
      echo "contention $graph h4 $nic rc=$?"
    done
    cat contention_h4_${nic}.jsonl contention_ring_h4_${nic}.jsonl \
      contention_onepeer-exp_h4_${nic}.jsonl > contention_all_h4_${nic}.jsonl
  done
  exit 0
fi
if [ "$what" = fedavg-epochs ]; then
  # H=2: on 2 hosts (a core per rank) at 1 Gbit/s, with the ring's fit and a compute-only profile
  # of 2 ranks (tl_h2_skipcomm.json) taken first.
  h=${H:-4}
  nics="100mbit 1gbit"
  if [ "$h" = 2 ]; then
    nics=1gbit
    "$F" --np 2 --emulate hosts=2,nic=1gbit bench allreduce --algorithms ring \
      --sizes 4K,64K,256K,1M,4M --iters 10 --json fit_h2_1gbit.jsonl > fit_h2_1gbit.log 2>&1
    echo "fit h2 1gbit rc=$?"
    "$F" train --np 2 --model cnn --max-steps 40 --progress none --skip-comm \
      --timeline tl_h2_skipcomm.json --json skipcomm_h2.jsonl > skipcomm_h2.log 2>&1
    echo "train skip-comm 2 rc=$?"
  fi
  for nic in $nics; do
    "$F" train --np $h --emulate hosts=$h,nic=$nic --model cnn --epochs 4 --progress none \
      --sync fedavg:clients=8,fraction=0.5,local-epochs=1 --partition dirichlet:0.5 \
      --json fedavg_epochs_h${h}_${nic}.jsonl > fedavg_epochs_h${h}_${nic}.log 2>&1
    echo "train fedavg-epochs $h $nic rc=$?"
  done
  exit 0
fi
if [ "$what" = local ]; then
  for nic in 100mbit 1gbit; do
    for run in local4 local4ov local4q; do
      case $run in
        local4) flags=(--sync local:period=4) ;;
        local4ov) flags=(--sync local:period=4,overlap=1) ;;
        local4q) flags=(--sync local:period=4 --compress qsgd) ;;
      esac
      "$F" train --np 4 --emulate hosts=4,nic=$nic --model cnn --max-steps 40 --progress none \
        "${flags[@]}" --timeline tl_${run}_h4_${nic}.json --json ${run}_h4_${nic}.jsonl \
        > ${run}_h4_${nic}.log 2>&1
      echo "train $run 4 $nic rc=$?"
    done
  done
  exit 0
fi
if [ "$what" = arch ] || [ "$what" = dpsgd ]; then
  if [ "$what" = dpsgd ]; then
    for nic in 100mbit 1gbit; do
      rm -f round_h4_${nic}.jsonl
      for topology in ring onepeer-exp; do
        "$F" bench round --np 4 --emulate hosts=4,nic=$nic --topology $topology --sizes 1819688 \
          --rounds 20 --json round_tmp.jsonl >> round_h4_${nic}.log 2>&1
        echo "bench round $topology 4 $nic rc=$?"
        cat round_tmp.jsonl >> round_h4_${nic}.jsonl && rm -f round_tmp.jsonl
      done
    done
  fi
  for nic in 100mbit 1gbit; do
    for servers in 1 2; do
      [ "$what" = dpsgd ] && continue
      np=$((4 + servers))
      "$F" train --np $np --emulate hosts=$np,nic=$nic --arch ps:servers=$servers --model cnn \
        --max-steps 40 --progress none --json ps${servers}_h4_${nic}.jsonl \
        > ps${servers}_h4_${nic}.log 2>&1
      echo "train ps servers=$servers 4 workers $nic rc=$?"
    done
    # With `dpsgd` the ring's run is traced: its trace is the profile of its own simulation.
    trace=()
    [ "$what" = dpsgd ] && trace=(--timeline tl_dpsgd_h4_${nic}.json)
    "$F" train --np 4 --emulate hosts=4,nic=$nic --arch gossip:topology=ring --model cnn \
      --max-steps 40 --progress none "${trace[@]}" --json dpsgd_h4_${nic}.jsonl \
      > dpsgd_h4_${nic}.log 2>&1
    echo "train dpsgd ring 4 $nic rc=$?"
  done
  if [ "$what" = arch ]; then
    # Where D-PSGD's time goes at 100 Mbit/s: the ring again with its trace, and with order=atc.
    "$F" train --np 4 --emulate hosts=4,nic=100mbit --arch gossip:topology=ring,order=atc \
      --model cnn --max-steps 40 --progress none --json dpsgdatc_h4_100mbit.jsonl \
      > dpsgdatc_h4_100mbit.log 2>&1
    "$F" train --np 4 --emulate hosts=4,nic=100mbit --arch gossip:topology=ring --model cnn \
      --max-steps 40 --progress none --timeline tl_dpsgd_h4_100mbit.json \
      --json tl_dpsgd_h4_100mbit.jsonl > tl_dpsgd_h4_100mbit.log 2>&1
  fi
  # D-PSGD on the one-peer exponential graph (one message out and one in per step), traced.
  for nic in 100mbit 1gbit; do
    "$F" train --np 4 --emulate hosts=4,nic=$nic --arch gossip:topology=onepeer-exp --model cnn \
      --max-steps 40 --progress none --timeline tl_dpsgd1_h4_${nic}.json \
      --json dpsgd1_h4_${nic}.jsonl > dpsgd1_h4_${nic}.log 2>&1
    echo "train dpsgd onepeer-exp 4 $nic rc=$?"
  done
  exit 0
fi
for n in 4 8; do
  for nic in 100mbit 1gbit; do
    "$F" --np $n --emulate hosts=$n,nic=$nic bench allreduce --algorithms ring \
      --sizes 4K,64K,256K,1M,4M --iters 10 --json fit_h${n}_${nic}.jsonl > fit_h${n}_${nic}.log 2>&1
    echo "fit h$n $nic rc=$?"
    "$F" --np $n --emulate hosts=$n,nic=$nic bench contention --model cnn --bytes 1M --iters 20 \
      --json contention_h${n}_${nic}.jsonl > contention_h${n}_${nic}.log 2>&1
    echo "contention h$n $nic rc=$?"
    for comp in dense topk; do
      extra=()
      [ $comp = topk ] && extra=(--compress topk:ratio=0.01 --ef)
      "$F" train --np $n --emulate hosts=$n,nic=$nic --model cnn --max-steps 40 --progress none \
        "${extra[@]}" --timeline tl_h${n}_${nic}_${comp}.json \
        --json tl_h${n}_${nic}_${comp}.jsonl > tl_h${n}_${nic}_${comp}.log 2>&1
      echo "train h$n $nic $comp rc=$?"
    done
  done
done
