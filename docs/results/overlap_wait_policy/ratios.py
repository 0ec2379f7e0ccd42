#!/usr/bin/env python3
# Usage: ratios.py DIR...  For each directory written by run.sh: compute per step (the skip-comm
# run's median step), communication per step (the none run's comm_seconds / steps), the median
# steps of the none and priority runs, and the priority step over max(compute, communication).
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), *['..'] * 3, 'scripts'))
from frugal_results import summary  # noqa: E402

print('| build | compute | communication | none | priority 0.25 MB | priority / max(compute, comm) |')
print('| --- | ---: | ---: | ---: | ---: | ---: |')
for d in sys.argv[1:]:
    skip = summary(os.path.join(d, 'cnn_skip.jsonl'))
    none = summary(os.path.join(d, 'cnn_none.jsonl'))
    prio = summary(os.path.join(d, 'cnn_priority_p0.25.jsonl'))
    compute = skip['step_seconds_median'] * 1e3
    comm = none['comm_seconds'] / none['steps'] * 1e3
    step = prio['step_seconds_median'] * 1e3
    print(f"| {os.path.basename(d.rstrip('/'))} | {compute:.1f} ms | {comm:.1f} ms | "
          f"{none['step_seconds_median'] * 1e3:.1f} ms | {step:.1f} ms | {step / max(compute, comm):.2f} |")
