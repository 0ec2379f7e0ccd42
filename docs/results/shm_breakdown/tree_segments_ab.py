#!/usr/bin/env python3
# Median and range over the rounds of tree_segments_ab.sh: tree and dbtree over MPI_Allreduce.
import glob, json, os, statistics
here = os.path.dirname(os.path.abspath(__file__))
print('| ranks | size | segment | tree | dbtree |')
print('| ---: | ---: | ---: | ---: | ---: |')
for np in (2, 4):
    for size in (1 << 20, 4 << 20):
        for seg in ('1M', '256K'):
            ratios = {'tree': [], 'dbtree': []}
            for path in sorted(glob.glob(os.path.join(here, f'tree_ab_np{np}_seg{seg}_r*.jsonl'))):
                t = {(r['bytes'], r['algorithm']): r['time_us'] for r in map(json.loads, open(path))}
                for a in ratios:
                    ratios[a].append(t[(size, 'mpi')] / t[(size, a)])
            cells = [f"{statistics.median(v):.2f}x ({min(v):.2f}-{max(v):.2f}x)" for v in ratios.values()]
            print(f"| {np} | {size >> 20}M | {seg} | " + ' | '.join(cells) + ' |')
