#!/usr/bin/env python3
# Compute per step (the skip run's median step), communication per step (the none run's
# comm_seconds / steps), the none and priority runs' median steps, priority / max(compute, comm).
import os, sys
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, *['..'] * 3, 'scripts'))
from frugal_results import summary  # noqa: E402

skip, none, prio = (summary(os.path.join(here, f'vgg_{name}.jsonl')) for name in ('skip', 'none', 'priority'))
compute = skip['step_seconds_median'] * 1e3
comm = none['comm_seconds'] / none['steps'] * 1e3
step = prio['step_seconds_median'] * 1e3
print('| compute | communication | none | priority (4 MB) | priority / max(compute, comm) | comm hidden |')
print('| ---: | ---: | ---: | ---: | ---: | ---: |')
print(f"| {compute:.0f} ms | {comm:.0f} ms | {none['step_seconds_median'] * 1e3:.0f} ms | {step:.0f} ms | "
      f"{step / max(compute, comm):.2f} | {prio.get('comm_hidden_fraction', float('nan')) * 100:.0f}% |")
