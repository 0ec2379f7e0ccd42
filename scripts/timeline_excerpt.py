#!/usr/bin/env python3
"""Cuts a `frugal train --timeline` Chrome trace down to a few training steps.

Keeps the metadata events and every event that starts within steps FIRST..FIRST+COUNT-1 of
rank 0 (counted by its "forward" events), so that the excerpt opens in chrome://tracing or
Perfetto like the full trace.

Usage: timeline_excerpt.py TRACE.json OUT.json FIRST COUNT
"""
import json
import sys


def main():
    if len(sys.argv) != 5:
        sys.stderr.write(__doc__)
        return 2
    with open(sys.argv[1]) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    first, count = int(sys.argv[3]), int(sys.argv[4])
    starts = sorted(e["ts"] for e in events if e.get("pid") == 0 and e.get("name") == "forward")
    if first < 0 or count < 1 or first + count >= len(starts):
        sys.stderr.write(f"{sys.argv[1]}: has {len(starts)} steps, cannot cut {first}+{count}\n")
        return 1
    begin, end = starts[first], starts[first + count]
    kept = [e for e in events if e.get("ph") == "M" or begin <= e.get("ts", -1) < end]
    out = dict(trace) if isinstance(trace, dict) else {}
    out["traceEvents"] = kept
    with open(sys.argv[2], "w") as f:
        json.dump(out, f)
    print(f"{len(kept)} of {len(events)} events, {(end - begin) / 1000:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
