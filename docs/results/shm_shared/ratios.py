#!/usr/bin/env python3
# Prints, per (ranks, size), every algorithm's throughput as a multiple of MPI_Allreduce's.
import json, sys
algs = ['ring','rd','rabenseifner','tree','dbtree','hier','torus']
for path in sys.argv[1:]:
    rows = [json.loads(l) for l in open(path) if l.strip()]
    by = {}
    for r in rows:
        by.setdefault((r['ranks'], r['bytes']), {})[r['algorithm']] = r['time_us']
    for (n, b), t in sorted(by.items()):
        mpi = t['mpi']
        cells = [f"{mpi / t[a]:.2f}x" if a in t else '-' for a in algs]
        g = f"{mpi / t['gloo']:.2f}x" if 'gloo' in t else '-'
        mpi_s = f"{mpi/1000:.2f} ms" if mpi >= 1000 else f"{mpi:.0f} us"
        print(f"| {n} | {b >> 20}M | " + " | ".join(cells) + f" | {mpi_s} | {g} |")
