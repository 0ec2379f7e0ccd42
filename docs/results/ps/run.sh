#!/bin/bash
# The parameter server's figures (docs/performance.md, "Parameter server").
#   net: 4 workers on their own emulated 100 Mbit/s hosts, with 1 and 2 servers on hosts of their
#        own, against ring all-reduce on the 4 workers' hosts: cnn and vgg, step time and bytes
#        (dense pushes and pulls);
#   straggler: 4 workers + 1 server on this machine (shared memory, the 2 cores), rank 1 three
#        times slower (--straggler 1:3), cnn, lr 0.05: bsp, ssp:staleness=1 and 4, asp,
#        backup:workers=1 and lag, each until 88% test accuracy (at most 3 epochs).
# Usage: run.sh FRUGAL_BINARY net|straggler. Run it alone (under quiet).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
frugal="$1"
part="$2"
cd "$here"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

timed() {  # NAME ARGS...: runs frugal train, records its exit code and wall time
  local name=$1
  shift
  local start=$(date +%s.%N)
  "$frugal" train --progress none --json "$name.jsonl" "$@" >"$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc wall=$(echo "$(date +%s.%N) - $start" | bc) s" | tee -a wall.txt
}

net() {
  local e=nic=100mbit
  timed ring_cnn --np 4 --emulate hosts=4,$e --model cnn --max-steps 40
  timed ps1_cnn --np 5 --emulate hosts=5,$e --arch ps:servers=1 --model cnn --max-steps 40
  timed ps2_cnn --np 6 --emulate hosts=6,$e --arch ps:servers=2 --model cnn --max-steps 40
  timed ring_vgg --np 4 --emulate hosts=4,$e --model vgg --max-steps 12
  timed ps1_vgg --np 5 --emulate hosts=5,$e --arch ps:servers=1 --model vgg --max-steps 12
  timed ps2_vgg --np 6 --emulate hosts=6,$e --arch ps:servers=2 --model vgg --max-steps 12
}

straggler() {
  local common="--np 5 --arch ps:servers=1 --model cnn --straggler 1:3 --lr 0.05 --epochs 3"
  for sync in bsp ssp:staleness=1 ssp:staleness=4 asp backup:workers=1 lag; do
    timed "straggler_${sync//[:=]/_}" $common --sync "$sync" --stop-at-accuracy 0.88
  done
}

case "$part" in
  net) net ;;
  straggler) straggler ;;
  *) echo "usage: run.sh FRUGAL net|straggler" >&2; exit 2 ;;
esac
