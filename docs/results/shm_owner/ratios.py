#!/usr/bin/env python3
# Prints, per (ranks, size), every algorithm's throughput as a multiple of MPI_Allreduce's in the
# same run: on the shared buffer, then staged (ALGO:staged) in parentheses.
import json, sys
algs = ['ring', 'rd', 'rabenseifner', 'tree', 'dbtree', 'hier', 'torus']
for path in sys.argv[1:]:
    rows = [json.loads(l) for l in open(path) if l.strip()]
    by = {}
    for r in rows:
        if not r['correct']:
            sys.exit(f"{path}: {r['algorithm']} at {r['bytes']} bytes was not correct")
        by.setdefault((r['ranks'], r['bytes']), {})[r['algorithm']] = r['time_us']
    for (n, b), t in sorted(by.items()):
        mpi = t['mpi']
        def cell(a):
            shared = f"{mpi / t[a]:.2f}x" if a in t else '-'
            staged = a + ':staged'
            return shared + (f" ({mpi / t[staged]:.2f}x)" if staged in t else '')
        mpi_s = f"{mpi/1000:.2f} ms" if mpi >= 1000 else f"{mpi:.0f} us"
        print(f"| {n} | {b >> 20}M | " + " | ".join(cell(a) for a in algs) + f" | {mpi_s} |")
