#!/bin/bash
# Where a step's CPU goes: vgg with QSGD on 2 emulated hosts at 100 Mbit/s (MTU 1500, and 9000:
# qsgd_h2_mtu9000_prof; 65535: qsgd_h2_mtu65535_prof), the same over shared memory (no emulated
# network), and the compute-only run (--skip-comm) on 2 emulated hosts (at MTU 65535:
# compute_only_h2_mtu65535_prof).
# Each run is 90 steps; 25 s in, `perf record -a` samples every CPU for 20 s (cpu-clock, 4 kHz).
# Writes RUN.jsonl, RUN.txt and RUN.perf.txt (samples per thread name and object) beside this
# script; breakdown.py turns them into ms per step and rank. Run in this directory, alone:
#   profile.sh FRUGAL_BINARY [qsgd_h2_prof|qsgd_h2_mtu9000_prof|qsgd_h2_mtu65535_prof|qsgd_shm_prof|
#                             compute_only_h2_prof|compute_only_h2_mtu65535_prof]...
set -u
frugal="$1"
shift
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
common=(--np 2 --model vgg --lr 0.05 --progress none --max-steps 90)
for run in "$@"; do
  case $run in
    qsgd_h2_prof) extra=(--emulate hosts=2,nic=100mbit --compress qsgd) ;;
    qsgd_h2_mtu9000_prof) extra=(--emulate hosts=2,nic=100mbit,mtu=9000 --compress qsgd) ;;
    qsgd_h2_mtu65535_prof) extra=(--emulate hosts=2,nic=100mbit,mtu=65535 --compress qsgd) ;;
    qsgd_shm_prof) extra=(--compress qsgd) ;;
    compute_only_h2_prof) extra=(--emulate hosts=2,nic=100mbit --skip-comm) ;;
    compute_only_h2_mtu65535_prof) extra=(--emulate hosts=2,nic=100mbit,mtu=65535 --skip-comm) ;;
    *) echo "unknown run '$run'" >&2; exit 2 ;;
  esac
  "$frugal" train "${common[@]}" "${extra[@]}" --json "$run.jsonl" > "$run.txt" 2>&1 &
  train=$!
  sleep 25
  perf record -a -F 4000 -o "/tmp/$run.perf.data" -- sleep 20 2> /dev/null
  wait $train
  perf report -i "/tmp/$run.perf.data" --no-children -n --sort comm,dso --stdio 2> /dev/null |
    grep -v '^#' | grep -v '^$' | sed 's/\[JIT\] tid [0-9]*/[JIT]/' > "$run.perf.txt"
  rm -f "/tmp/$run.perf.data"
done
