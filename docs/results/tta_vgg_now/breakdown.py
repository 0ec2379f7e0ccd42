#!/usr/bin/env python3
# From profile.sh's records: per run, the CPU of a step of one rank in ms by thread and object
# (samples x 0.25 ms, over the 20 s window's steps: 2 ranks x 20 s / the run's median step).
#   breakdown.py RUN...
import os, sys
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, *['..'] * 3, 'scripts'))
from frugal_results import summary  # noqa: E402

WINDOW_S, SAMPLE_MS, RANKS = 20, 0.25, 2


def group(thread, dso):
    if thread == 'frugal-engine':
        return 'engine, kernel' if dso == '[kernel.kallsyms]' else 'engine, user (codec, copies, MPI)'
    if thread == 'swapper':
        return 'idle and interrupts'
    if dso == '[kernel.kallsyms]':
        return 'compute thread, kernel'
    if dso in ('[JIT]', 'libdnnl.so.2.6', 'libtorch_cpu.so.1.13.0', 'libopenblasp-r0.3.21.so'):
        return 'compute thread, torch kernels'
    return 'compute thread, other'


runs = sys.argv[1:]
cells = {}
steps = {}
for run in runs:
    step = summary(os.path.join(here, f'{run}.jsonl'))['step_seconds_median']
    steps[run] = step * 1e3
    per_step = RANKS * WINDOW_S / step
    for line in open(os.path.join(here, f'{run}.perf.txt')):
        parts = line.split()
        samples, thread, dso = int(parts[1]), parts[2], parts[3]
        if thread.startswith('frugal') and thread != 'frugal-engine':
            thread = 'compute'
        elif thread != 'frugal-engine' and thread != 'swapper':
            continue
        key = group(thread, dso)
        cells.setdefault(key, {}).setdefault(run, 0.0)
        cells[key][run] += samples * SAMPLE_MS / per_step
print('| ms per step and rank | ' + ' | '.join(runs) + ' |')
print('| --- | ' + ' | '.join('---:' for _ in runs) + ' |')
print('| median step | ' + ' | '.join(f'{steps[r]:.0f}' for r in runs) + ' |')
for key in sorted(cells):
    print(f'| {key} | ' + ' | '.join(f"{cells[key].get(r, 0):.1f}" for r in runs) + ' |')
