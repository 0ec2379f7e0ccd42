#!/bin/bash
# Planning a cluster with `frugal simulate`: the speed-up of cnn (workers x scaling efficiency)
# against 1 to 4096 workers, one host each, at NICs of 1, 10 and 100 Gbit/s (alpha 50 us), for
#   allreduce dense and top-k 1% + EF (ring all-reduce; top-k on its allgather path),
#   ps dense, pushes top-k 1% + EF, and pushes and answers top-k 1% (1 server),
#   D-PSGD on a ring and CHOCO-SGD with top-k 1% on a ring (gamma 0.05, as sweeps/gossip_4w.toml),
#   Local SGD over the ring, period 8, dense, with and without overlapped averages,
# all from the profile the validation against emulated runs uses (tl_h4_1gbit_topk.json: the
# per-layer times of a 4-host top-k run at 1 Gbit/s) and top-k's encode and decode rates from
# ../compress_bench/bench_sparse.jsonl. Each architecture is one `frugal simulate --out` run (into
# a temporary directory); their records are merged into plan/simulate.jsonl with a label per
# method, and plan/speedup_RATEgbit.png draws every method at one rate.
# Usage: plan.sh BUILD_DIR
set -eu
build="$(cd "$1" && pwd)"
cd "$(dirname "$0")"
F="$build/apps/frugal/frugal"
out=plan
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
common=(--timeline tl_h4_1gbit_topk.json --model cnn --bandwidth-gbit 1,10,100
  --workers 1,2,4,8,16,32,64,128,256,512,1024,2048,4096
  --bench-compress ../compress_bench/bench_sparse.jsonl)
topk=(--compress topk:ratio=0.01 --ef)
run() {  # NAME ARGS...
  local name=$1
  shift
  "$F" simulate "${common[@]}" "$@" --out "$tmp/$name" >"$tmp/$name.txt"
}
run allreduce --arch allreduce --compress none "${topk[@]}"
run ps --arch ps:servers=1 --compress none "${topk[@]}"
run ps_pull --arch ps:servers=1 "${topk[@]}" --compress-pull topk:ratio=0.01
run dpsgd --arch gossip:topology=ring
run choco --arch gossip:topology=ring,algorithm=choco,gamma=0.05 --compress topk:ratio=0.01
run local8 --arch allreduce --sync local:period=8 --compress none
run local8ov --arch allreduce --sync local:period=8,overlap=1 --compress none

/usr/bin/python3 - "$tmp" "$out" <<'EOF'
import json, os, subprocess, sys
tmp, out = sys.argv[1], sys.argv[2]
runs = [("allreduce", {"none": "allreduce dense", "topk:ratio=0.01": "allreduce top-k 1% + EF"}),
        ("ps", {"none": "ps 1 server dense", "topk:ratio=0.01": "ps 1 server, pushes top-k 1% + EF"}),
        ("ps_pull", {"topk:ratio=0.01": "ps 1 server, pushes and answers top-k 1%"}),
        ("dpsgd", {"none": "D-PSGD ring"}),
        ("choco", {"topk:ratio=0.01": "CHOCO-SGD ring, top-k 1%"}),
        ("local8", {"none": "Local SGD 8, ring, dense"}),
        ("local8ov", {"none": "Local SGD 8, ring, dense, overlap=1"})]
records = []
for name, labels in runs:
    with open(os.path.join(tmp, name, "simulate.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            r["label"] = labels[r["method"]]
            r["speedup"] = r["workers"] * r["scaling_efficiency"]
            records.append(r)
with open(os.path.join(out, "simulate.jsonl"), "w") as f:
    for r in records:
        f.write(json.dumps(r, sort_keys=True) + "\n")
order = [l for _, labels in runs for l in labels.values()]
for gbit in sorted({r["bandwidth_gbit"] for r in records}):
    tag = f"{gbit:g}gbit"
    plots = []
    for i, label in enumerate(order):
        dat = os.path.join(tmp, f"{tag}_{i}.dat")
        with open(dat, "w") as f:
            for r in records:
                if r["label"] == label and r["bandwidth_gbit"] == gbit:
                    f.write(f"{r['workers']} {r['speedup']}\n")
        plots.append(f"'{dat}' using 1:2 with linespoints lw 2 title '{label}'")
    script = (
        "set terminal pngcairo noenhanced size 1000,620 font 'DejaVu Sans,11'\n"
        f"set output '{os.path.join(out, 'speedup_' + tag + '.png')}'\n"
        "set grid\nset key top left\nset logscale x 2\nset logscale y 2\n"
        "set xlabel 'workers'\nset ylabel 'speed-up (workers x scaling efficiency)'\n"
        f"set title 'frugal simulate: cnn, {gbit:g} Gbit/s NICs, alpha 50 us, profile tl_h4_1gbit_topk'\n"
        "plot " + ", ".join(plots) + ", x title 'linear' dt 2 lc rgb 'gray'\n")
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
EOF
ls "$out"
