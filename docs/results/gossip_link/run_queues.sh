#!/bin/bash
# tcp_flows.c's ring2 (lockstep and free-running) and onepeer (free-running) patterns on 4
# emulated hosts at 100 Mbit/s with every token bucket changed before the first connection: a
# queue ten times as long (2.5 MB, no drops expected), a bucket ten times as deep (160 KiB); and
# the same patterns with the default buckets at 50 Mbit/s (half the packet rate). Run alone.
# Usage: run_queues.sh BUILD_DIR
set -eu
build="$(cd "$1" && pwd)"
cd "$(dirname "$0")"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpicc -O2 -o /tmp/tcp_flows tcp_flows.c
for change in "burst 16384b limit 2500000b" "burst 163840b limit 250000b"; do
  cat > /tmp/tcp_flows_change.sh <<END
c=\$(ip netns list | awk '\$1 ~ /-c\$/ {print \$1}')
for i in 0 1 2 3; do
  tc -n "\$c" qdisc change dev "h\$i" root tbf rate 100mbit $change
  tc -n "\${c%-c}-h\$i" qdisc change dev eth0 root tbf rate 100mbit $change
done
END
  echo "every bucket: rate 100mbit $change"
  for run in "ring2 lockstep" "ring2 free" "onepeer free"; do
    set -- $run
    "$build/apps/frugal/frugal" run --np 4 --emulate hosts=4,nic=100mbit -- \
      /tmp/tcp_flows "$1" 1819688 21 "$2" /tmp/tcp_flows_change.sh | grep '^pattern'
  done
done
echo "nic=50mbit, default buckets"
for run in "one lockstep" "ring2 lockstep" "ring2 free" "onepeer free"; do
  set -- $run
  "$build/apps/frugal/frugal" run --np 4 --emulate hosts=4,nic=50mbit -- \
    /tmp/tcp_flows "$1" 1819688 21 "$2" | grep '^pattern'
done
