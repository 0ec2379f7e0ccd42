#!/bin/bash
# tcp_flows.c's ring2 and onepeer patterns (free-running) on 4 emulated hosts at 100 Mbit/s with
# one of each path's two token buckets removed before the first connection: the receivers'
# (the bridge ports' `tbf`), or the senders' (each host's eth0). Run alone (the times).
# Usage: run_buckets.sh BUILD_DIR
set -eu
build="$(cd "$1" && pwd)"
cd "$(dirname "$0")"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpicc -O2 -o /tmp/tcp_flows tcp_flows.c
cat > /tmp/tcp_flows_no_down.sh <<'END'
c=$(ip netns list | awk '$1 ~ /-c$/ {print $1}')
for i in 0 1 2 3; do tc -n "$c" qdisc del dev "h$i" root; done
END
cat > /tmp/tcp_flows_no_up.sh <<'END'
c=$(ip netns list | awk '$1 ~ /-c$/ {print $1}')
for i in 0 1 2 3; do tc -n "${c%-c}-h$i" qdisc del dev eth0 root; done
END
for p in ring2 onepeer; do
  for setup in no_down no_up; do
    echo "$setup"
    "$build/apps/frugal/frugal" run --np 4 --emulate hosts=4,nic=100mbit -- \
      /tmp/tcp_flows "$p" 1819688 21 free "/tmp/tcp_flows_$setup.sh" | grep '^pattern'
  done
done
