#!/usr/bin/env python3
"""An algorithm's median and MPI_Allreduce's over it, before and after, per rank count, size and
round (interleaved.sh's files), and the whole table of run.sh's files when the directory has them.
"""
import argparse
import json
from pathlib import Path

ap = argparse.ArgumentParser()
ap.add_argument("--small", action="store_true", help="the runs below 1 MiB")
ap.add_argument("--dir", type=Path, default=Path(__file__).parent)
ap.add_argument("--algorithm", default="rd")
args = ap.parse_args()
here = args.dir
prefix = "small_" if args.small else ""
algorithm = args.algorithm
for np in (4, 2):
    print(f"\n{np} ranks\n")
    print(f"| size | before: {algorithm} | MPI_Allreduce / {algorithm} | after: {algorithm} | "
          f"MPI_Allreduce / {algorithm} |")
    print("| ---: | --- | --- | --- | --- |")
    sizes = {}
    for which in ("before", "after"):
        for rnd in (1, 2, 3):
            path = here / f"{prefix}np{np}_{which}_{rnd}.json"
            if not path.exists():
                continue
            recs = [json.loads(l) for l in path.read_text().splitlines() if l.strip()]
            by = {(r["bytes"], r["algorithm"]): r["time_us"] for r in recs}
            for (size, algo), t in by.items():
                if algo != algorithm:
                    continue
                cell = sizes.setdefault(size, {"before": [], "after": []})
                cell[which].append((t, by[(size, "mpi")] / t))
    for size, cell in sorted(sizes.items()):
        def fmt(xs, i, f):
            return ", ".join(f(x[i]) for x in xs)
        label = f"{size >> 20}M" if size >= 1 << 20 else f"{size >> 10}K"
        print(f"| {label} | {fmt(cell['before'], 0, lambda v: f'{v:.0f} us')} | "
              f"{fmt(cell['before'], 1, lambda v: f'{v:.2f}x')} | "
              f"{fmt(cell['after'], 0, lambda v: f'{v:.0f} us')} | "
              f"{fmt(cell['after'], 1, lambda v: f'{v:.2f}x')} |")

# The whole table (run.sh of allreduce_rd_read with this directory as OUT): MPI_Allreduce's time
# over each algorithm's, lowest and highest of the runs.
runs = sorted(here.glob("np*_run*.json"))
if runs and not args.small:
    algos = ["ring", "rd", "rabenseifner", "tree", "dbtree", "hier", "torus", "direct"]
    print("\n| ranks | size | " + " | ".join(algos) + " |")
    print("| ---: | ---: |" + " ---: |" * len(algos))
    cells = {}
    for path in runs:
        np = int(path.name[2:path.name.index("_")])
        recs = [json.loads(l) for l in path.read_text().splitlines() if l.strip()]
        by = {(r["bytes"], r["algorithm"]): r["time_us"] for r in recs}
        for (size, algo), t in by.items():
            if algo in algos:
                cells.setdefault((np, size), {}).setdefault(algo, []).append(by[(size, "mpi")] / t)
    for (np, size), row in sorted(cells.items(), key=lambda kv: (-kv[0][0], kv[0][1])):
        print(f"| {np} | {size >> 20}M | " +
              " | ".join(f"{min(row[a]):.2f}-{max(row[a]):.2f}x" for a in algos) + " |")
