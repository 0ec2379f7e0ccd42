#!/usr/bin/env python3
# Per build of the A/B rounds run.sh wrote: the cnn priority run's median step and the 1 MB and
# 4 MB shared-memory all-reduces (ring, rabenseifner, dbtree) as multiples of MPI_Allreduce's
# throughput, each as the median over the rounds with the range in parentheses:
#   table.py yield500us yield50us
import glob, os, statistics, sys
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, *['..'] * 3, 'scripts'))
from frugal_results import records, summary  # noqa: E402


def cell(values, fmt):
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}-{fmt(max(values))})"


cols = [(b, a) for b in (1 << 20, 4 << 20) for a in ('ring', 'rabenseifner', 'dbtree')]
print('| build | rounds | cnn priority 0.25 MB, median step | ' +
      ' | '.join(f"{b >> 20}M {a}" for b, a in cols) + ' |')
print('| --- | ---: | ---: | ' + ' | '.join('---:' for _ in cols) + ' |')
for name in sys.argv[1:]:
    steps = []
    for path in sorted(glob.glob(os.path.join(here, f'cnn_{name}_r*.jsonl'))):
        steps.append(summary(path)['step_seconds_median'] * 1e3)
    ratios = {c: [] for c in cols}
    for path in sorted(glob.glob(os.path.join(here, f'shm_{name}_r*.jsonl'))):
        t = {(r['bytes'], r['algorithm']): r['time_us'] for r in records(path)}
        for b, a in cols:
            ratios[(b, a)].append(t[(b, 'mpi')] / t[(b, a)])
    print(f"| {name} | {len(steps)} | {cell(steps, lambda v: f'{v:.1f}')} ms | " +
          ' | '.join(cell(ratios[c], lambda v: f'{v:.2f}x') for c in cols) + ' |')
