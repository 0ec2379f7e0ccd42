#!/usr/bin/env python3
# Median step, compute per step and hidden share of the cnn and vgg runs of run.sh, per build and
# round; and frugal's all-reduce times on 2 ranks (us) per build and round.
import glob, json, os, re
here = os.path.dirname(os.path.abspath(__file__))
print('| model | build | round | median step (ms) | compute per step (ms) | comm hidden |')
print('| --- | --- | ---: | ---: | ---: | ---: |')
for path in sorted(glob.glob(os.path.join(here, '*_r*.jsonl'))):
    name = os.path.basename(path)[:-len('.jsonl')]
    model, build, rnd = re.match(r'(\w+?)_(\w+)_r(\d+)', name).groups()
    if model == 'shm':
        continue
    for line in open(path):
        r = json.loads(line)
        if r.get('event') == 'summary':
            print(f"| {model} | {build} | {rnd} | {r['step_seconds_median'] * 1e3:.1f} | "
                  f"{r['compute_seconds'] / r['steps'] * 1e3:.1f} | {r['comm_hidden_fraction'] * 100:.0f}% |")
