"""Readers of the JSON lines `frugal train --json FILE` writes, for the scripts beside the results
under docs/results/ that turn them into tables.

    import os, sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), *['..'] * 3, 'scripts'))
    from frugal_results import summary, epochs
"""
import json


def records(path):
    """Every record of the file, in order."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def summary(path):
    """The run's summary record (the last of its kind); exits naming the file when it has none."""
    found = [r for r in records(path) if r.get('event') == 'summary']
    if not found:
        raise SystemExit(f'{path}: no summary record')
    return found[-1]


def epochs(path):
    """The run's per-epoch records, in order."""
    return [r for r in records(path) if r.get('event') == 'epoch']
