"""Runs `frugal bench contention` on 2 ranks and checks its table and its JSON record.

    python3 bench_contention_check.py FRUGAL JSON

The record has one entry per rank in each per-rank array, positive compute times, at least one
all-reduce per rank, and a slowdown equal to sum(compute_busy_s) / sum(compute_alone_s).
"""

import json
import math
import subprocess
import sys


def main(frugal, path):
    command = [frugal, "bench", "contention", "--np", "2", "--model", "cnn", "--iters", "3",
               "--warmup", "1", "--bytes", "64K", "--json", path]
    run = subprocess.run(command, capture_output=True, text=True, timeout=240)
    print(f"command: {' '.join(command)}\nexit: {run.returncode}\nstdout:\n{run.stdout}\n"
          f"stderr:\n{run.stderr}")
    assert run.returncode == 0, f"exit code {run.returncode}"
    assert "slowdown (sum of busy medians / sum of alone medians)" in run.stdout
    with open(path) as f:
        lines = f.read().splitlines()
    assert len(lines) == 1, f"{len(lines)} records, expected 1"
    record = json.loads(lines[0])
    expected = {"bench": "contention", "model": "cnn", "batch": 64, "ranks": 2, "bytes": 65536,
                "iters": 3, "threads": 1}
    for key, value in expected.items():
        assert record[key] == value, f"{key} = {record[key]!r}, expected {value!r}"
    for key in ("compute_alone_s", "compute_busy_s", "allreduces", "allreduce_s"):
        assert len(record[key]) == 2, f"{key} = {record[key]}, expected 2 entries"
    for key in ("compute_alone_s", "compute_busy_s", "allreduce_s"):
        assert all(t > 0 for t in record[key]), f"{key} = {record[key]}, expected > 0"
    assert all(n >= 1 for n in record["allreduces"]), f"allreduces = {record['allreduces']}"
    slowdown = sum(record["compute_busy_s"]) / sum(record["compute_alone_s"])
    assert math.isclose(record["slowdown"], slowdown, rel_tol=1e-9), (
        f"slowdown = {record['slowdown']}, recomputed {slowdown}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
