#!/bin/bash
# Time to 88% on vgg, 4 emulated hosts at 100 Mbit/s, the settings of sweeps/tta_vgg.toml: the
# methods named (sweeps/tta_vgg.toml's variant names, plus qsgd_prio05: QSGD with priority
# scheduling and 0.5 MB partitions, and minmax8: 8-bit min-max quantization) against the
# compute-only bound (compute_only: one epoch with --skip-comm, since dense reaches 88% in its
# first epoch). HOSTS=H from the environment runs H workers on H hosts instead of 4 (records
# RUN_hH); MTU=M gives the emulated NICs that MTU (records RUN_mtuM); TAG=T ends the records'
# names in _T. Run in this directory, alone:
# localH_qsgd runs Local SGD with period H (2, 4 or 8) and QSGD-compressed model deltas, each rank's
# own model evaluated on 500 test images (the averaged model on all); localH_qsgd_ov the same with
# overlap=1 (each average runs beside the next H local steps); local4_qsgdL (L = 1 or 3) Local SGD
# with period 4 and QSGD deltas of L levels instead of 15 (2 or 3 bits an element instead of 5).
#   run.sh FRUGAL_BINARY RUN...
set -u
frugal="$1"
shift
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
hosts=${HOSTS:-4}
suffix=${HOSTS:+_h$HOSTS}${MTU:+_mtu$MTU}${TAG:+_$TAG}
common=(--np "$hosts" --emulate hosts="$hosts",nic=100mbit${MTU:+,mtu=$MTU} --model vgg --lr 0.05 --progress none
  --stop-at-accuracy 0.88)
for run in "$@"; do
  case $run in
    compute_only) extra=(--epochs 1 --skip-comm) ;;
    qsgd) extra=(--epochs 2 --compress qsgd) ;;
    qsgd_prio05) extra=(--epochs 2 --compress qsgd --overlap priority --partition-mb 0.5) ;;
    minmax8) extra=(--epochs 2 --compress minmax8) ;;
    local2_qsgd) extra=(--epochs 2 --sync local:period=2 --compress qsgd --replica-eval-samples 500) ;;
    local4_qsgd) extra=(--epochs 2 --sync local:period=4 --compress qsgd --replica-eval-samples 500) ;;
    local4_qsgd1) extra=(--epochs 2 --sync local:period=4 --compress qsgd:levels=1 --replica-eval-samples 500) ;;
    local4_qsgd3) extra=(--epochs 2 --sync local:period=4 --compress qsgd:levels=3 --replica-eval-samples 500) ;;
    local8_qsgd) extra=(--epochs 2 --sync local:period=8 --compress qsgd --replica-eval-samples 500) ;;
    local2_qsgd_ov) extra=(--epochs 2 --sync local:period=2,overlap=1 --compress qsgd --replica-eval-samples 500) ;;
    local4_qsgd_ov) extra=(--epochs 2 --sync local:period=4,overlap=1 --compress qsgd --replica-eval-samples 500) ;;
    local8_qsgd_ov) extra=(--epochs 2 --sync local:period=8,overlap=1 --compress qsgd --replica-eval-samples 500) ;;
    fp16) extra=(--epochs 2 --compress fp16) ;;
    dense) extra=(--epochs 2) ;;
    *) echo "unknown run '$run'" >&2; exit 2 ;;
  esac
  start=$(date +%s.%N)
  "$frugal" train "${common[@]}" "${extra[@]}" --json "$run$suffix.jsonl" > "$run$suffix.txt" 2>&1
  echo "$run$suffix rc=$? wall=$(echo "$(date +%s.%N) - $start" | bc) s" | tee -a wall.txt
done
