#!/usr/bin/env python3
"""PNG bar chart (gnuplot) of all-reduce bus bandwidth / NIC rate per algorithm, one bar per
emulated network, for one message size, from `frugal bench allreduce --json` files.

Usage: busbw_plot.py OUT.png BYTES LABEL=RATE=FILE.jsonl [LABEL=RATE=FILE.jsonl ...]
  e.g. busbw_plot.py busbw_64M.png 67108864 1gbit=1e9=ar_1gbit.jsonl 100mbit=1e8=ar_100mbit.jsonl
"""
import json
import os
import subprocess
import sys
import tempfile


def main():
    if len(sys.argv) < 4:
        sys.stderr.write(__doc__)
        return 2
    out, size = sys.argv[1], int(sys.argv[2])
    series = []
    for spec in sys.argv[3:]:
        label, rate, path = spec.split("=", 2)
        values = {}
        for line in open(path):
            if not line.strip():
                continue
            r = json.loads(line)
            if r.get("bench") != "allreduce" or r["bytes"] != size:
                continue
            n = r["ranks"]
            values[r["algorithm"]] = 2.0 * (n - 1) / n * size * 8 / float(rate) / (r["time_us"] * 1e-6)
        series.append((label, values))
    algorithms = []
    for _, values in series:
        for a in values:
            if a not in algorithms:
                algorithms.append(a)
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "busbw.dat")
        with open(data, "w") as f:
            for a in algorithms:
                f.write(a + " " + " ".join(f"{v.get(a, float('nan')):.4f}" for _, v in series) + "\n")
        plots = ", ".join(f"'{data}' using {i + 2}:xtic(1) title '{label} NIC'"
                          for i, (label, _) in enumerate(series))
        script = f"""set terminal pngcairo noenhanced size 900,480 font 'DejaVu Sans,11'
set output '{out}'
set title 'all-reduce of {size >> 20} MiB, 4 emulated hosts: bus bandwidth / NIC rate'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set yrange [0:1.05]
set ytics 0.1
set grid ytics
set key top right
set arrow from graph 0, first 0.9 to graph 1, first 0.9 nohead dashtype 2 lc rgb 'gray40'
plot {plots}
"""
        subprocess.run(["gnuplot"], input=script.encode(), check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
