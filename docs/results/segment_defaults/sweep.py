#!/usr/bin/env python3
# Reads the sweep_np*_r*.jsonl files sweep.sh wrote and prints, per algorithm, each segment's
# throughput as a multiple of MPI_Allreduce's in the same run (median over the rounds, and their
# range) for every rank count and size, then each algorithm's segment with the best worst case
# (the largest minimum ratio over the rank counts and sizes) among those of at most 1 MiB:
#   sweep.py
import glob, json, os, re, statistics, sys
here = os.path.dirname(os.path.abspath(__file__))
segs = ['64K', '128K', '256K', '512K', '1M', '2M', '4M']
algs = ['ring', 'rd', 'rabenseifner', 'tree', 'dbtree']
ratios = {}  # (alg, seg, ranks, bytes) -> [ratio per round]
for path in sorted(glob.glob(os.path.join(here, 'sweep_np*_r*.jsonl'))):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    mpi = {}
    for r in rows:
        if not r['correct']:
            sys.exit(f"{path}: {r['algorithm']} at {r['bytes']} bytes was not correct")
        if r['algorithm'] == 'mpi':
            mpi[r['bytes']] = r['time_us']
    for r in rows:
        m = re.fullmatch(r'(\w+)@(\w+)', r['algorithm'])
        if m:
            ratios.setdefault((m[1], m[2], r['ranks'], r['bytes']), []).append(
                mpi[r['bytes']] / r['time_us'])
shapes = sorted({(k[2], k[3]) for k in ratios})
def cell(v):
    return f"{statistics.median(v):.2f}x ({min(v):.2f}-{max(v):.2f})" if len(v) > 1 else f"{v[0]:.2f}x"
for alg in algs:
    print(f"\n{alg}\n")
    print('| segment | ' + ' | '.join(f"{n} ranks {b >> 20}M" for n, b in shapes) + ' | worst |')
    print('| ---: | ' + ' | '.join('---:' for _ in shapes) + ' | ---: |')
    for seg in segs:
        vals = [ratios.get((alg, seg, n, b)) for n, b in shapes]
        if not all(vals):
            continue
        worst = min(statistics.median(v) for v in vals)
        print(f"| {seg} | " + ' | '.join(cell(v) for v in vals) + f" | {worst:.2f}x |")
print('\nbest worst case among segments <= 1 MiB:')
for alg in algs:
    best = None
    for seg in segs[:5]:
        vals = [ratios.get((alg, seg, n, b)) for n, b in shapes]
        if not all(vals):
            continue
        worst = min(statistics.median(v) for v in vals)
        if best is None or worst > best[1]:
            best = (seg, worst)
    if best:
        print(f"  {alg}: {best[0]} ({best[1]:.2f}x)")
