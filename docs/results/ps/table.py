#!/usr/bin/env python3
"""The parameter server's tables from the runs' JSON lines: python3 table.py NAME..."""
import json
import sys

NIC = 100e6 / 8  # bytes per second of an emulated 100 Mbit/s NIC


def summary(name):
    with open(name + ".jsonl") as f:
        records = [json.loads(line) for line in f if line.strip()]
    return [r for r in records if r.get("event") == "epoch"], records[-1]


print("| run | workers + servers | median step (ms) | MB sent per worker and step | "
      "server MB in / out per step | server NIC busy | samples/s | test acc. |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for name in sys.argv[1:]:
    _, s = summary(name)
    steps = s["steps"]
    step = s["step_seconds_median"]
    servers = [k for k in s if k.startswith("server") and k.endswith("_bytes_in")]
    nic = "-"
    io = "-"
    if servers:
        ins = [s[k] / steps for k in sorted(servers)]
        outs = [s[k.replace("_in", "_out")] / steps for k in sorted(servers)]
        io = " , ".join(f"{i / 1e6:.2f} / {o / 1e6:.2f}" for i, o in zip(ins, outs))
        # The busier direction of the busiest server's NIC against the median step.
        nic = f"{max(max(i, o) for i, o in zip(ins, outs)) / NIC / step:.2f}"
    print(f"| {name} | {s['workers']} + {len(servers)} | {step * 1e3:.0f} | "
          f"{s['bytes_sent_per_worker'] / steps / 1e6:.2f} | {io} | {nic} | "
          f"{s['samples_per_second']:.0f} | {s['test_accuracy']:.4f} |")
