#!/usr/bin/env python3
# Prints, per (ranks, size, segment), every algorithm's throughput as a multiple of
# MPI_Allreduce's in the same run, from the files segments.sh wrote:
#   segments.py np2 np4
import json, os, sys
algs = ['ring', 'rd', 'rabenseifner', 'tree', 'dbtree']
here = os.path.dirname(os.path.abspath(__file__))
segs = ['64K', '128K', '256K', '512K', '1M']
print('| ranks | size | segment | ' + ' | '.join(algs) + ' | MPI_Allreduce |')
print('| ---: | ---: | ---: | ' + ' | '.join('---:' for _ in algs) + ' | ---: |')
table = {}
for prefix in sys.argv[1:]:
    for seg in segs:
        path = os.path.join(here, f'{prefix}_seg{seg}.jsonl')
        if not os.path.exists(path):
            continue
        for r in (json.loads(l) for l in open(path) if l.strip()):
            if not r['correct']:
                sys.exit(f"{path}: {r['algorithm']} at {r['bytes']} bytes was not correct")
            table.setdefault((r['ranks'], r['bytes'], segs.index(seg)), {})[r['algorithm']] = r['time_us']
for (n, b, s), t in sorted(table.items()):
    mpi = t['mpi']
    mpi_s = f"{mpi/1000:.2f} ms" if mpi >= 1000 else f"{mpi:.0f} us"
    print(f"| {n} | {b >> 20}M | {segs[s]} | " +
          ' | '.join(f"{mpi / t[a]:.2f}x" for a in algs) + f" | {mpi_s} |")
