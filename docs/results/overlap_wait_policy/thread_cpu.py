#!/usr/bin/env python3
# Usage: thread_cpu.py INTERVAL_S COMMAND...  Runs COMMAND; samples the CPU time of every thread
# of the processes started after it every INTERVAL_S seconds and prints the totals by (process
# name, thread name), with the machine-wide /proc/stat deltas, on stderr.
import os, sys, time, subprocess, collections
HZ = os.sysconf('SC_CLK_TCK')
def stat_all():
    out = {}
    for pid in os.listdir('/proc'):
        if not pid.isdigit(): continue
        try:
            pcomm = open(f'/proc/{pid}/comm').read().strip()
            for tid in os.listdir(f'/proc/{pid}/task'):
                s = open(f'/proc/{pid}/task/{tid}/stat').read()
                r = s.rfind(')')
                tcomm = s[s.find('(')+1:r]
                f = s[r+2:].split()
                out[(int(pid), int(tid))] = (pcomm, tcomm, (int(f[11]) + int(f[12])) / HZ, int(f[12]) / HZ)
        except Exception:
            pass
    return out
def cpu():
    f = open('/proc/stat').readline().split()[1:]
    return [int(x) / HZ for x in f]
before = set(stat_all().keys())
c0 = cpu(); t0 = time.time()
p = subprocess.Popen(sys.argv[2:])
last = {}
interval = float(sys.argv[1])
while p.poll() is None:
    for k, v in stat_all().items():
        if k not in before: last[k] = v
    time.sleep(interval)
c1 = cpu(); t1 = time.time()
agg = collections.defaultdict(lambda: [0.0, 0.0, 0])
for k, (pc, tc, t, sy) in last.items():
    a = agg[(pc, tc)]; a[0] += t; a[1] += sy; a[2] += 1
print(f'wall {t1-t0:.1f}s', file=sys.stderr)
names = ['user','nice','system','idle','iowait','irq','softirq','steal']
print('machine: ' + ' '.join(f'{n}={b-a:.1f}' for n, a, b in zip(names, c0, c1)), file=sys.stderr)
for (pc, tc), (t, sy, n) in sorted(agg.items(), key=lambda x: -x[1][0]):
    if t < 0.05: continue
    print(f'{pc:16s} {tc:16s} threads={n:3d} cpu={t:7.2f}s sys={sy:6.2f}s', file=sys.stderr)
sys.exit(p.returncode)
