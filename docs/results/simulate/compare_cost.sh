#!/bin/bash
# `frugal cost`'s communication time per step (alpha-beta-gamma, no overlap) against the emulated
# runs recorded here: each run's step time beyond its compute (step_seconds_median -
# compute_seconds / steps) and the time its training thread waited for communication
# (comm_seconds / steps); the network from the all-reduce fit on the same emulated hosts
# (--fit fit_hN_RATE.jsonl). Runs: the ring (dense and top-k 1% + EF) of validate.sh, the
# parameter server (1 and 2 servers, 4 MB keys) and D-PSGD on a ring of validate_emulated.sh.
# Usage: compare_cost.sh BUILD_DIR
set -u
build="$(cd "$1" && pwd)"
cd "$(dirname "$0")"
F="$build/apps/frugal/frugal"
printf "| run | hosts | NIC | cost: communication (ms) | measured: step - compute (ms) | error | measured: waiting for communication (ms) |\n"
printf "| --- | ---: | --- | ---: | ---: | ---: | ---: |\n"
row() {  # LABEL RECORD HOSTS RATE COST-FLAGS...
  local label=$1 record=$2 hosts=$3 rate=$4
  shift 4
  [ -f "$record.jsonl" ] || return 0
  local cost
  cost=$("$F" cost --model cnn --fit "fit_h${hosts}_$rate.jsonl" "$@" |
    awk '/communication time/ {print $3}')
  grep '"event":"summary"' "$record.jsonl" | /usr/bin/python3 -c '
import json, sys
label, hosts, rate, cost = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
d = json.load(sys.stdin)
beyond = (d["step_seconds_median"] - d["compute_seconds"] / d["steps"]) * 1e3
waiting = d["comm_seconds"] / d["steps"] * 1e3
print(f"| {label} | {hosts} | {rate} | {cost:.1f} | {beyond:.1f} | {(cost - beyond) / beyond * 100:+.1f}% | {waiting:.1f} |")
' "$label" "$hosts" "$rate" "$cost"
}
topk="--compress topk:ratio=0.01 --ef"
for n in 4 8; do
  for rate in 100mbit 1gbit; do
    row "ring, dense" "emu_cnn_h${n}_${rate}_dense" $n $rate --np $n
    row "ring, top-k 1% + EF" "emu_cnn_h${n}_${rate}_topk" $n $rate --np $n $topk
  done
done
for rate in 100mbit 1gbit; do
  row "parameter server, 1 server" "ps1_h4_$rate" 4 $rate --np 4 --arch ps:servers=1,shard-mb=4
  row "parameter server, 2 servers" "ps2_h4_$rate" 4 $rate --np 4 --arch ps:servers=2,shard-mb=4
  row "D-PSGD ring, round during the step (cta)" "dpsgd_h4_$rate" 4 $rate --np 4 \
    --arch gossip:topology=ring
  row "D-PSGD ring, round after the step (atc)" "dpsgdatc_h4_$rate" 4 $rate --np 4 \
    --arch gossip:topology=ring,order=atc
done
