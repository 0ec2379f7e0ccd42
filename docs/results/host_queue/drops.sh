#!/bin/bash
# Reads every emulated namespace's qdiscs (tc -s) twice a second while an emulation runs and
# writes the last reading of each host's eth0 to $1 (host, bytes sent, frames dropped); returns
# once the namespaces have been gone for 5 s.
set -u
out=$1 dir=$(mktemp -d) seen=0 gone=0
while [ $gone -lt 10 ]; do
  ns=$(ip netns list | awk '{print $1}' | grep -- '-h[0-9]*$' | grep '^frg-' || true)
  if [ -z "$ns" ]; then
    [ $seen = 1 ] && gone=$((gone + 1))
    sleep 0.5
    continue
  fi
  seen=1
  for s in $ns; do
    tc -n "$s" -s qdisc show dev eth0 > "$dir/$s.tmp" 2>/dev/null && [ -s "$dir/$s.tmp" ] &&
      mv "$dir/$s.tmp" "$dir/$s"
  done
  sleep 0.5
done
for f in "$dir"/*; do
  [ -f "$f" ] || continue
  awk -v h="${f##*-}" '/^qdisc tbf/ {t = 1} t && /Sent/ {gsub(",", ""); print h, "sent_bytes", $2, "dropped", $7; exit}' "$f"
done > "$out"
rm -rf "$dir"
