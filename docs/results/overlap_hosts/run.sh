#!/bin/sh
# Overlap on H emulated hosts at 100 Mbit/s, one rank each: compute only (--skip-comm), no overlap
# (its communication time per step is the communication alone) and priority scheduling (with
# partitions of P MB when given). cnn runs 80 steps, vgg 24. Run from the source tree, alone on
# the machine, one configuration per command:
#   docs/results/overlap_hosts/run.sh FRUGAL cnn|vgg HOSTS skip|none|priority [P]
# Writes MODEL_hHOSTS[mMTU][tTCP]_CONFIG[_pP][_rREP].{jsonl,txt} beside this script (ratios.py
# reads them); REP (environment) names a repeat, MTU (environment) gives the emulated NICs that
# MTU, TCP (environment) the hosts' TCP congestion control (the default: cubic since 9769cc6, the
# machine's own before it), OUT (environment) another directory for the records (queue16/: the
# emulated NICs' queues of at least 16 frames, since d79bf06), ALG (environment) the all-reduce
# algorithm (--allreduce; ring when not given).
set -e
frugal=$1 model=$2 hosts=$3 config=$4 partition=$5
out=${OUT:-$(dirname "$0")}
mkdir -p "$out"
case $model in
  cnn) steps=80 ;;
  vgg) steps=24 ;;
  *) echo "unknown model '$model' (known: cnn, vgg)" >&2; exit 2 ;;
esac
case $config in
  skip) flags=--skip-comm ;;
  none) flags="--overlap none" ;;
  priority) flags="--overlap priority" ;;
  *) echo "unknown configuration '$config' (known: skip, none, priority)" >&2; exit 2 ;;
esac
name=${model}_h${hosts}${MTU:+m$MTU}${TCP:+t$TCP}_$config
if [ -n "$partition" ]; then
  flags="$flags --partition-mb $partition"
  name=${name}_p$partition
fi
if [ -n "$ALG" ]; then
  flags="$flags --allreduce $ALG"
  name=${name}_a$ALG
fi
if [ -n "$REP" ]; then name=${name}_r$REP; fi
"$frugal" train --np "$hosts" --emulate hosts="$hosts",nic=100mbit${MTU:+,mtu=$MTU}${TCP:+,tcp=$TCP} --progress none --seed 1 \
  --test-samples 500 --model "$model" --max-steps "$steps" $flags \
  --json "$out/$name.jsonl" > "$out/$name.txt"
