#!/bin/bash
# Two builds that differ in when a rank reports the negotiation cycle that follows a bucket under
# priority scheduling (after the bucket's reduction, or before it), interleaved, alone on the
# machine: 4 emulated hosts at 100 Mbit/s with 64 KB frames and cubic, cnn with priority and
# 0.5 MB partitions (80 steps), vgg with priority and 4 MB partitions (24 steps). Run from this
# directory:
#   run.sh FRUGAL_A NAME_A FRUGAL_B NAME_B ROUND [cnn|vgg]...
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
a=$1 na=$2 b=$3 nb=$4 round=$5
shift 5
models=("$@")
[ ${#models[@]} -eq 0 ] && models=(cnn vgg)
common=(--np 4 --emulate hosts=4,nic=100mbit,mtu=65535,tcp=cubic --progress none --seed 1 --test-samples 500)
for model in "${models[@]}"; do
  case $model in
    cnn) flags=(--max-steps 80 --overlap priority --partition-mb 0.5) ;;
    vgg) flags=(--max-steps 24 --overlap priority) ;;
    *) echo "unknown model '$model' (known: cnn, vgg)" >&2; exit 2 ;;
  esac
  for pair in "$a $na" "$b $nb"; do
    set -- $pair
    "$1" train "${common[@]}" --model "$model" "${flags[@]}" \
      --json "${model}_$2_r$round.jsonl" > "${model}_$2_r$round.txt" 2>&1
  done
done
