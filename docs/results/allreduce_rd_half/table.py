#!/usr/bin/env python3
"""Recursive doubling's median and MPI_Allreduce's over it, per rank count, size and round
(argument "small": the runs below 1 MiB)."""
import json
import sys
from pathlib import Path

here = Path(__file__).parent
prefix = "small_" if len(sys.argv) > 1 and sys.argv[1] == "small" else ""
for np in (4, 2):
    print(f"\n{np} ranks\n")
    print("| size | before: rd | MPI_Allreduce / rd | after: rd | MPI_Allreduce / rd |")
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
                if algo != "rd":
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
