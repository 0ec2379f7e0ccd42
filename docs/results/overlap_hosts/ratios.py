#!/usr/bin/env python3
# For each MODEL_hHOSTS group of runs beside this script: compute per step (the skip run's median
# step), communication per step (the none run's comm_seconds / steps), every overlapped run's
# median step and its ratio to max(compute, communication), and the share of communication hidden.
# MODEL_hHOSTSmMTU groups ran with that MTU (run.sh's MTU), groups ending tTCP with that TCP
# congestion control (run.sh's TCP; the others with the default of their time). A directory as
# the argument reads the records there instead (run.sh's OUT).
import glob, os, re, sys
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, *['..'] * 3, 'scripts'))
from frugal_results import summary  # noqa: E402

if len(sys.argv) > 1:
    here = os.path.abspath(sys.argv[1])

print('| model | hosts | MTU | TCP | compute | communication | run | median step | / max(compute, comm) | comm hidden |')
print('| --- | ---: | ---: | --- | ---: | ---: | --- | ---: | ---: | ---: |')
for skip_path in sorted(glob.glob(os.path.join(here, '*_skip.jsonl'))):
    group = os.path.basename(skip_path)[:-len('_skip.jsonl')]
    model, hosts, mtu, tcp = re.match(r'([a-z0-9]+)_h(\d+)(?:m(\d+))?(?:t([a-z0-9]+))?$', group).groups()
    none_path = os.path.join(here, f'{group}_none.jsonl')
    if not os.path.exists(none_path):
        continue
    skip, none = summary(skip_path), summary(none_path)
    compute = skip['step_seconds_median'] * 1e3
    comm = none['comm_seconds'] / none['steps'] * 1e3
    for path in sorted(glob.glob(os.path.join(here, f'{group}_*.jsonl'))):
        run = os.path.basename(path)[len(group) + 1:-len('.jsonl')]
        if run == 'skip':
            continue
        record = summary(path)
        step = record['step_seconds_median'] * 1e3
        hidden = record.get('comm_hidden_fraction', float('nan')) * 100
        print(f'| {model} | {hosts} | {mtu or 1500} | {tcp or "-"} | {compute:.1f} ms | {comm:.1f} ms | {run} | {step:.1f} ms | '
              f'{step / max(compute, comm):.2f} | {hidden:.0f}% |')
