#!/bin/bash
# Simulated against measured step times for the runs of validate_emulated.sh: the network from
# the all-reduce fit on the same emulated hosts and NICs (--fit), the per-layer times from one
# profile per host count: the trace of the top-k run at 1 Gbit/s (little communication, so its
# forward and backward are the compute's). With --same, each run's own trace instead. With
# --contention, two more columns: the compute's slowdown beside an all-reduce measured on the same
# hosts (`frugal bench contention`, contention_hN_NIC.jsonl) and the simulation that charges it
# (--fit-contention).
# Usage: compare_emulated.sh BUILD_DIR [--same|--contention]
set -u
build="$(cd "$1" && pwd)"
same="${2:-}"
cd "$(dirname "$0")/${DIR:-.}"  # DIR: the records' directory, as for validate_emulated.sh
F="$build/apps/frugal/frugal"
if [ "$same" = --contention ]; then
  printf "| hosts | NIC | method | fitted alpha (us) | fitted rate (Mbit/s) | measured step (ms) | simulated step (ms) | error | contention | simulated with it (ms) | error |\n"
  printf "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
else
  printf "| hosts | NIC | method | fitted alpha (us) | fitted rate (Mbit/s) | measured step (ms) | simulated step (ms) | error |\n"
  printf "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |\n"
fi
for n in 4 8; do
  for nic in 100mbit 1gbit; do
    fit=fit_h${n}_${nic}.jsonl
    read -r alpha rate < <(python3 -c "import json; r=json.loads(open('$fit').readline()); print(r['alpha_us'], 8/r['beta_s_per_byte']/1e6)")
    for comp in dense topk; do
      profile=tl_h${n}_1gbit_topk.json
      [ "$same" = --same ] && profile=tl_h${n}_${nic}_${comp}.json
      j=tl_h${n}_${nic}_${comp}.jsonl
      measured=$(grep '"event":"summary"' $j | python3 -c 'import json,sys; print(json.load(sys.stdin)["step_seconds_median"]*1e3)')
      extra=(--compress none); label=dense
      [ $comp = topk ] && extra=(--compress topk:ratio=0.01 --ef) && label="top-k 1% + EF"
      sim=$("$F" simulate --timeline $profile --model cnn --workers $n \
        --fit $fit "${extra[@]}" | tail -1 | awk '{print $4}')
      err=$(python3 -c "print(f'{($sim-$measured)/$measured*100:+.1f}%')")
      if [ "$same" = --contention ]; then
        c=contention_h${n}_${nic}.jsonl
        slowdown=$(python3 -c "import json; print(max((json.loads(l) for l in open('$c')), key=lambda r: r['bytes'])['slowdown'])")  # the record --fit-contention reads
        simc=$("$F" simulate --timeline $profile --model cnn --workers $n --fit $fit \
          --fit-contention $c "${extra[@]}" | tail -1 | awk '{print $4}')
        errc=$(python3 -c "print(f'{($simc-$measured)/$measured*100:+.1f}%')")
        printf "| %d | %s | %s | %.0f | %.0f | %.1f | %.1f | %s | %.2f | %.1f | %s |\n" $n $nic \
          "$label" $alpha $rate $measured $sim $err $slowdown $simc $errc
      else
        printf "| %d | %s | %s | %.0f | %.0f | %.1f | %.1f | %s |\n" $n $nic "$label" $alpha $rate \
          $measured $sim $err
      fi
    done
  done
done
