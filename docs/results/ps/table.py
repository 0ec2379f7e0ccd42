#!/usr/bin/env python3
"""The parameter server's tables from the runs' JSON lines: python3 table.py [--epochs] NAME...

Without --epochs: step time, bytes and the servers' NIC per run (the net, compress and keys parts;
the NIC's rate is NIC_MBIT from the environment, 100 by default, 0 for runs on one machine).
With --epochs: per epoch test accuracy, samples/s and the time to 88% (straggler and many)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), *['..'] * 3, 'scripts'))
from frugal_results import epochs, summary  # noqa: E402

NIC = float(os.environ.get("NIC_MBIT", "100")) * 1e6 / 8  # bytes per second of the emulated NIC


def epochs_table(names):
    print("| run | epochs | test acc. per epoch | samples/s | epoch times (s) | time to 88% (s) | "
          "pushes applied / dropped / skipped | staleness median / p95 / max |")
    print("| --- | ---: | --- | ---: | --- | ---: | ---: | ---: |")
    for name in names:
        per_epoch, s = epochs(name + ".jsonl"), summary(name + ".jsonl")
        reached = [e for e in per_epoch if e["test_accuracy"] >= 0.88]
        tta = f"{reached[0]['wall_seconds']:.0f}" if reached else "not reached"
        accs = ", ".join(f"{e['test_accuracy']:.4f}" for e in per_epoch)
        times = ", ".join(f"{e['epoch_seconds']:.0f}" for e in per_epoch)
        counts = (f"{s.get('ps_pushes_applied', 0):.0f} / {s.get('ps_pushes_dropped', 0):.0f} / "
                  f"{s.get('ps_pushes_skipped', 0):.0f}")
        stale = (f"{s.get('staleness_median', 0):.0f} / {s.get('staleness_p95', 0):.0f} / "
                 f"{s.get('staleness_max', 0):.0f}")
        print(f"| {name} | {len(per_epoch)} | {accs} | {s['samples_per_second']:.0f} | {times} | "
              f"{tta} | {counts} | {stale} |")


if sys.argv[1:2] == ["--epochs"]:
    epochs_table(sys.argv[2:])
    sys.exit(0)

print("| run | workers + servers | median step (ms) | MB sent per worker and step | "
      "server MB in / out per step | server NIC busy | samples/s | test acc. |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for name in sys.argv[1:]:
    s = summary(name + ".jsonl")
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
        if NIC > 0:
            nic = f"{max(max(i, o) for i, o in zip(ins, outs)) / NIC / step:.2f}"
    print(f"| {name} | {s['workers']} + {len(servers)} | {step * 1e3:.0f} | "
          f"{s['bytes_sent_per_worker'] / steps / 1e6:.2f} | {io} | {nic} | "
          f"{s['samples_per_second']:.0f} | {s['test_accuracy']:.4f} |")
