"""Runs `frugal bench contention` and checks its table and its JSON record.

    python3 bench_contention_check.py FRUGAL JSON [RANKS TOPOLOGY]

2 ranks beside ring all-reduces by default; with RANKS and TOPOLOGY that many ranks beside gossip
rounds on the graph. The record names its pattern (and graph), has one entry per rank in each
per-rank array, positive compute times, at least one exchange per rank, and a slowdown equal to
sum(compute_busy_s) / sum(compute_alone_s).
"""

import json
import math
import subprocess
import sys


def main(frugal, path, ranks=2, topology=None):
    command = [frugal, "bench", "contention", "--np", str(ranks), "--model", "cnn", "--iters",
               "3", "--warmup", "1", "--bytes", "64K", "--json", path]
    if topology:
        command += ["--topology", topology]
    name = "round" if topology else "allreduce"
    run = subprocess.run(command, capture_output=True, text=True, timeout=240)
    print(f"command: {' '.join(command)}\nexit: {run.returncode}\nstdout:\n{run.stdout}\n"
          f"stderr:\n{run.stderr}")
    assert run.returncode == 0, f"exit code {run.returncode}"
    assert "slowdown (sum of busy medians / sum of alone medians)" in run.stdout
    with open(path) as f:
        lines = f.read().splitlines()
    assert len(lines) == 1, f"{len(lines)} records, expected 1"
    record = json.loads(lines[0])
    expected = {"bench": "contention", "pattern": name, "model": "cnn", "batch": 64,
                "ranks": ranks, "bytes": 65536, "iters": 3, "threads": 1}
    if topology:
        expected["topology"] = topology
        assert f"gossip rounds on {topology} of 64K" in run.stdout, "the table names the graph"
    else:
        assert "topology" not in record, "an all-reduce record names no graph"
    for key, value in expected.items():
        assert record[key] == value, f"{key} = {record[key]!r}, expected {value!r}"
    for key in ("compute_alone_s", "compute_busy_s", name + "s", name + "_s"):
        assert len(record[key]) == ranks, f"{key} = {record[key]}, expected {ranks} entries"
    for key in ("compute_alone_s", "compute_busy_s", name + "_s"):
        assert all(t > 0 for t in record[key]), f"{key} = {record[key]}, expected > 0"
    assert all(n >= 1 for n in record[name + "s"]), f"{name}s = {record[name + 's']}"
    slowdown = sum(record["compute_busy_s"]) / sum(record["compute_alone_s"])
    assert math.isclose(record["slowdown"], slowdown, rel_tol=1e-9), (
        f"slowdown = {record['slowdown']}, recomputed {slowdown}")


if __name__ == "__main__":
    if len(sys.argv) == 5:
        main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        main(sys.argv[1], sys.argv[2])
