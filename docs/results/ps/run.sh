#!/bin/bash
# The parameter server's figures (docs/performance.md, "Parameter server").
#   net: 4 workers on their own emulated 100 Mbit/s hosts, with 1 and 2 servers on hosts of their
#        own, against ring all-reduce on the 4 workers' hosts: cnn and vgg, step time and bytes
#        (dense pushes and pulls; TAG=T from the environment ends the records' names in _T);
#   straggler: 4 workers + 1 server on this machine (shared memory, the 2 cores), rank 1 three
#        times slower (--straggler 1:3), cnn, lr 0.05: bsp, ssp:staleness=1 and 4, asp,
#        backup:workers=1 and lag, each until 88% test accuracy (at most 3 epochs, or EPOCHS from
#        the environment: the records then end in _eEPOCHS; REPLICA_EVAL=N from the environment
#        evaluates each worker's own model on the first N test images, --replica-eval-samples N,
#        and the records end in _rN; TAG=T ends them in _T);
#   compress: the net setup with 1 server, pushes compressed (top-k 1% with error feedback) and
#        pushes and pulls compressed (top-k 1% both ways), cnn and vgg;
#   tta MODE...: the net setup with 1 server, cnn at lr 0.05 until 88% test accuracy
#        (--stop-at-accuracy 0.88), MODE dense, push (top-k 1% with error feedback) or pushpull
#        (top-k 1% both ways), each with at most as many epochs as fit in 15 minutes at its step
#        time (dense 3, push 4, pushpull 8; EPOCHS from the environment overrides);
#   keys: the key size (shard-mb) of 4 workers + 1 server, bsp, dense: cnn (40 steps) on 100 Mbit/s
#        emulated hosts at 4, 1, 0.25, 0.125 and 0.0625 MB, vgg (12 steps) at 4, 0.25 and 0.125,
#        and cnn (60 steps) on this machine (shared memory) and on 1 Gbit/s hosts at 4, 0.25 and
#        0.125 (records keys_MODEL_NET_sSIZE);
#   many LR: 16 workers + 1 server on this machine (oversubscribed), cnn at learning rate LR, one
#        epoch (or MAX_STEPS steps of each worker, from the environment) of asp and of bsp;
#        TAG=T from the environment ends the records' names in _T.
# Usage: run.sh FRUGAL_BINARY net|straggler|compress|tta|keys|many [LR] [SYNC...|MODE...]. straggler,
# tta and many take the syncs or modes to run (default: all of them), so that each can run in a
# hold of its own. Run it alone (under quiet) for times; accuracy, staleness and bytes are exact
# under load.
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
  local e=nic=100mbit t=${TAG:+_$TAG}
  timed ring_cnn$t --np 4 --emulate hosts=4,$e --model cnn --max-steps 40
  timed ps1_cnn$t --np 5 --emulate hosts=5,$e --arch ps:servers=1 --model cnn --max-steps 40
  timed ps2_cnn$t --np 6 --emulate hosts=6,$e --arch ps:servers=2 --model cnn --max-steps 40
  timed ring_vgg$t --np 4 --emulate hosts=4,$e --model vgg --max-steps 12
  timed ps1_vgg$t --np 5 --emulate hosts=5,$e --arch ps:servers=1 --model vgg --max-steps 12
  timed ps2_vgg$t --np 6 --emulate hosts=6,$e --arch ps:servers=2 --model vgg --max-steps 12
}

straggler() {
  local common="--np 5 --arch ps:servers=1 --model cnn --straggler 1:3 --lr 0.05"
  local sync syncs=("$@") suffix=""
  [ -z "${EPOCHS:-}" ] || suffix="_e$EPOCHS"
  if [ -n "${REPLICA_EVAL:-}" ]; then
    common="$common --replica-eval-samples $REPLICA_EVAL"
    suffix="${suffix}_r$REPLICA_EVAL"
  fi
  suffix="$suffix${TAG:+_$TAG}"
  [ ${#syncs[@]} -gt 0 ] || syncs=(bsp ssp:staleness=1 ssp:staleness=4 asp backup:workers=1 lag)
  for sync in "${syncs[@]}"; do
    timed "straggler_${sync//[:=]/_}$suffix" $common --epochs "${EPOCHS:-3}" --sync "$sync" \
      --stop-at-accuracy 0.88
  done
}

compress() {
  local e=nic=100mbit push="--compress topk:ratio=0.01 --ef" pull="--compress-pull topk:ratio=0.01"
  local ps="--np 5 --emulate hosts=5,$e --arch ps:servers=1"
  timed ps1_cnn_push $ps --model cnn --max-steps 40 $push
  timed ps1_cnn_pushpull $ps --model cnn --max-steps 40 $push $pull
  timed ps1_vgg_push $ps --model vgg --max-steps 12 $push
  timed ps1_vgg_pushpull $ps --model vgg --max-steps 12 $push $pull
}

tta() {
  local push="--compress topk:ratio=0.01 --ef" pull="--compress-pull topk:ratio=0.01"
  local common="--np 5 --emulate hosts=5,nic=100mbit --arch ps:servers=1 --model cnn --lr 0.05"
  common="$common --stop-at-accuracy 0.88"
  local mode modes=("$@")
  [ ${#modes[@]} -gt 0 ] || modes=(dense push pushpull)
  for mode in "${modes[@]}"; do
    case "$mode" in
      dense) timed tta_dense $common --epochs "${EPOCHS:-3}" ;;
      push) timed tta_push $common --epochs "${EPOCHS:-4}" $push ;;
      pushpull) timed tta_pushpull $common --epochs "${EPOCHS:-8}" $push $pull ;;
      *) echo "run.sh tta: unknown mode '$mode' (dense, push, pushpull)" >&2; exit 2 ;;
    esac
  done
}

keys() {
  local ps="--arch ps:servers=1" s
  for s in 4 1 0.25 0.125 0.0625; do
    timed keys_cnn_100mbit_s$s --np 5 --emulate hosts=5,nic=100mbit $ps,shard-mb=$s --model cnn \
      --max-steps 40
  done
  for s in 4 0.25 0.125; do
    timed keys_vgg_100mbit_s$s --np 5 --emulate hosts=5,nic=100mbit $ps,shard-mb=$s --model vgg \
      --max-steps 12
    timed keys_cnn_shm_s$s --np 5 $ps,shard-mb=$s --model cnn --max-steps 60
    timed keys_cnn_1gbit_s$s --np 5 --emulate hosts=5,nic=1gbit $ps,shard-mb=$s --model cnn \
      --max-steps 60
  done
}

many() {
  local lr=$1
  shift
  local common="--np 17 --arch ps:servers=1 --model cnn --lr $lr --epochs 1"
  [ -z "${MAX_STEPS:-}" ] || common="$common --max-steps $MAX_STEPS"
  local sync syncs=("$@")
  [ ${#syncs[@]} -gt 0 ] || syncs=(asp bsp)
  for sync in "${syncs[@]}"; do
    timed "many16_${sync//[:=]/_}_lr$lr${TAG:+_$TAG}" $common --sync "$sync"
  done
}

shift 2
case "$part" in
  net) net ;;
  straggler) straggler "$@" ;;
  compress) compress ;;
  tta) tta "$@" ;;
  keys) keys ;;
  many) many "$@" ;;
  *) echo "usage: run.sh FRUGAL net|straggler|compress|tta|keys|many [LR] [SYNC...|MODE...]" >&2
     exit 2 ;;
esac
