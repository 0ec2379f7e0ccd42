#!/usr/bin/env python3
# Median step, compute per step and hidden share of the cnn and vgg runs of run.sh, per build and
# round; and frugal's all-reduce times on 2 ranks (us) per build and round.
import glob, os, re, sys
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, *['..'] * 3, 'scripts'))
from frugal_results import summary  # noqa: E402
print('| model | build | round | median step (ms) | compute per step (ms) | comm hidden |')
print('| --- | --- | ---: | ---: | ---: | ---: |')
for path in sorted(glob.glob(os.path.join(here, '*_r*.jsonl'))):
    name = os.path.basename(path)[:-len('.jsonl')]
    model, build, rnd = re.match(r'(\w+?)_(\w+)_r(\d+)', name).groups()
    if model == 'shm':
        continue
    r = summary(path)
    print(f"| {model} | {build} | {rnd} | {r['step_seconds_median'] * 1e3:.1f} | "
          f"{r['compute_seconds'] / r['steps'] * 1e3:.1f} | {r['comm_hidden_fraction'] * 100:.0f}% |")
