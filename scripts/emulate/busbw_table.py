#!/usr/bin/env python3
"""Markdown table of all-reduce bus bandwidth as a fraction of the emulated NIC rate.

Reads the JSON lines of `frugal bench allreduce --json FILE` run under `--emulate ...,nic=RATE`
and prints, for each algorithm (rows) and message size (columns), busbw / NIC rate computed from
the median time of the timed iterations, and in parentheses from the fastest iteration.
busbw = 2 (n-1)/n x bytes / time, the amount each rank must send and receive in a bandwidth-
optimal all-reduce, so 1.0 means the NIC was busy all the time.

Usage: busbw_table.py RATE_BITS_PER_SECOND FILE.jsonl   e.g. busbw_table.py 1e9 ar_1gbit.jsonl
"""
import sys

from emulate_common import human, rate_and_records


def main():
    parsed = rate_and_records(__doc__)
    if parsed is None:
        return 2
    rate, records = parsed
    records = [r for r in records if r.get("bench") == "allreduce"]
    if not records:
        sys.stderr.write(f"{sys.argv[2]}: no allreduce records\n")
        return 1
    sizes = sorted({r["bytes"] for r in records})
    algorithms = []
    for r in records:
        if r["algorithm"] not in algorithms:
            algorithms.append(r["algorithm"])
    cell = {}
    for r in records:
        n = r["ranks"]
        factor = 2.0 * (n - 1) / n * r["bytes"] * 8 / rate
        cell[(r["algorithm"], r["bytes"])] = (factor / (r["time_us"] * 1e-6),
                                              factor / (r["min_us"] * 1e-6))
    best = {s: max(cell[(a, s)][0] for a in algorithms if (a, s) in cell) for s in sizes}
    print("| algorithm | " + " | ".join(human(s) for s in sizes) + " |")
    print("| --- |" + " ---: |" * len(sizes))
    for a in algorithms:
        row = []
        for s in sizes:
            if (a, s) not in cell:
                row.append("–")
                continue
            median, fastest = cell[(a, s)]
            text = f"{median:.2f} ({fastest:.2f})"
            row.append(f"**{text}**" if median == best[s] else text)
        print(f"| {a} | " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
