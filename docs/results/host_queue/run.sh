#!/bin/bash
# A host's own transmit queue (eth0) as deep as Linux gives a NIC (1000 frames, host_queue.patch)
# against the switch port's queue (20 ms, at least 16 frames): rank 0 of `frugal bench exchange`
# sends to, receives from, or does both with every other emulated host at 100 Mbit/s, and every
# host's tbf drops are read from its namespace while the run goes on. Run alone, from the source
# tree, one build after the other:
#   docs/results/host_queue/run.sh FRUGAL NAME ROUND
# Writes exchange_hH_NAME_rROUND.{jsonl,txt} and drops_hH_NAME_rROUND.txt beside this script.
set -eu
frugal=$1 name=$2 round=$3
here=$(cd "$(dirname "$0")" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for hosts in 5 8; do
  tag=h${hosts}_${name}_r${round}
  "$here/drops.sh" "$here/drops_$tag.txt" &
  sampler=$!
  "$frugal" bench exchange --np $hosts --emulate hosts=$hosts,nic=100mbit --sizes 1M,4M \
    --modes send,recv,both --iters 5 --json "$here/exchange_$tag.jsonl" > "$here/exchange_$tag.txt" 2>&1
  wait $sampler
done
