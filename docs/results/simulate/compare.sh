#!/bin/bash
# Simulated against measured step times (median) for the validation runs.
cd "$(dirname "$0")/../../.."
F=build/apps/frugal/frugal
OUT=docs/results/simulate
printf "| hosts | NIC | method | measured step (ms) | simulated step (ms) | error |\n| ---: | --- | --- | ---: | ---: | ---: |\n"
for n in 4 8; do
  for nic in 100mbit 1gbit; do
    gbit=$([ $nic = 100mbit ] && echo 0.1 || echo 1)
    for comp in dense topk; do
      j=$OUT/emu_cnn_h${n}_${nic}_${comp}.jsonl
      [ -f $j ] || continue
      measured=$(grep '"event":"summary"' $j | python3 -c 'import json,sys; print(json.load(sys.stdin)["step_seconds_median"]*1e3)')
      extra="--compress none"; label=dense
      [ $comp = topk ] && extra="--compress topk:ratio=0.01 --ef" && label="topk:ratio=0.01 + EF"
      sim=$($F simulate --timeline $OUT/profile_cnn_np$n.json --model cnn --workers $n --bandwidth-gbit $gbit $extra --out $OUT/sim_h${n}_${nic}_${comp} | tail -1 | awk '{print $4}')
      err=$(python3 -c "print(f'{($sim-$measured)/$measured*100:+.1f}%')")
      printf "| %d | %s | %s | %.1f | %.1f | %s |\n" $n $nic "$label" $measured $sim $err
    done
  done
done
