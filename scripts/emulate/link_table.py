#!/usr/bin/env python3
"""Markdown table of the links of an emulated network, from `frugal bench pingpong --all-pairs`.

Reads the JSON lines of `frugal bench pingpong --json FILE` run under `--emulate ...,nic=RATE`
and prints one row per pair of ranks: the one-way latency of the smallest message, the bandwidth
of the largest message, and the bandwidth 1/beta of the alpha-beta fit over the large sizes, each
bandwidth also as a fraction of the NIC rate (payload bytes; TCP/IP headers are not counted, so
about 0.956 is the most a 1500-byte-MTU link can show).

Usage: link_table.py RATE_BITS_PER_SECOND FILE.jsonl   e.g. link_table.py 1e8 pp_100mbit.jsonl
"""
import sys

from emulate_common import human, rate_and_records


def main():
    parsed = rate_and_records(__doc__)
    if parsed is None:
        return 2
    rate, records = parsed
    samples, fits = {}, {}
    for r in records:
        pair = (r["rank_a"], r["rank_b"])
        if r.get("bench") == "pingpong":
            samples.setdefault(pair, []).append(r)
        elif r.get("bench") == "pingpong_fit":
            fits[pair] = r
    if not samples:
        sys.stderr.write(f"{sys.argv[2]}: no pingpong records\n")
        return 1
    small = min(s["bytes"] for v in samples.values() for s in v)
    large = max(s["bytes"] for v in samples.values() for s in v)
    print(f"| pair | latency {human(small)} (us) | bandwidth {human(large)} (MB/s) | fraction of NIC "
          f"| 1/beta (MB/s) | fraction of NIC |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for pair in sorted(samples):
        by_size = {s["bytes"]: s for s in samples[pair]}
        lat = by_size[small]["latency_us"]
        bw = large / (by_size[large]["latency_us"] * 1e-6)
        row = f"| {pair[0]}<->{pair[1]} | {lat:.1f} | {bw / 1e6:.2f} | {bw * 8 / rate:.3f} |"
        fit = fits.get(pair)
        beta = fit and (fit.get("large_sizes_beta_s_per_byte") or fit.get("beta_s_per_byte"))
        if beta:
            row += f" {1 / beta / 1e6:.2f} | {8 / beta / rate:.3f} |"
        else:
            row += " – | – |"
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
