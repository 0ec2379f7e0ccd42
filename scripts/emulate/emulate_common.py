"""Helpers shared by the emulated-network report scripts."""
import json
import sys


def human(nbytes):
    """1048576 -> '1M'; sizes that are not whole K/M/G stay in bytes."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    return str(nbytes)


def rate_and_records(doc):
    """Parses `SCRIPT RATE_BITS_PER_SECOND FILE.jsonl`: (rate, records), or None after printing
    the usage `doc` when the arguments are wrong."""
    if len(sys.argv) != 3:
        sys.stderr.write(doc)
        return None
    rate = float(sys.argv[1])
    with open(sys.argv[2]) as f:
        records = [json.loads(line) for line in f if line.strip()]
    return rate, records
