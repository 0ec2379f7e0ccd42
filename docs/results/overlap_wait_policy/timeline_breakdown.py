#!/usr/bin/env python3
import json, sys, collections
# Usage: timeline_breakdown.py TIMELINE.json  (a --timeline file of frugal train)
# Per rank, steps 20 to the last: the period, the engine thread's time in reductions against the
# time their bytes need at 100 Mbit/s (ring, 4 ranks), negotiation, and the compute thread's phases.
d=json.load(open(sys.argv[1]))
ev=d['traceEvents'] if isinstance(d,dict) else d
for pid in sorted(set(e.get('pid') for e in ev if 'pid' in e)):
  E=[e for e in ev if e.get('pid')==pid and e.get('ph')=='X']
  E.sort(key=lambda e:e['ts'])
  fw=[e for e in E if e['name']=='forward']
  t0=fw[20]['ts']; t1=fw[-1]['ts']; steps=len(fw)-1-20
  et=[e['tid'] for e in ev if e.get('pid')==pid and e.get('name')=='thread_name' and e['args']['name']=='engine'][0]
  eng=[e for e in E if e['tid']==et and t0<=e['ts']<t1]
  comm=sum(e['dur'] for e in eng if e['name']=='communicate')/1000/steps
  neg=sum(e['dur'] for e in eng if e['name']=='negotiate')/1000/steps
  wait=sum(e['dur'] for e in E if e['tid']==0 and e['name']=='wait' and t0<=e['ts']<t1)/1000/steps
  fwd=sum(e['dur'] for e in E if e['tid']==0 and e['name']=='forward' and t0<=e['ts']<t1)/1000/steps
  bwd=sum(e['dur'] for e in E if e['tid']==0 and e['name']=='backward' and t0<=e['ts']<t1)/1000/steps
  ideal=sum(e['args']['bytes']*1.5/12.5e6*1000/0.956 for e in eng if e['name']=='communicate')/steps
  small=[e['dur']/1000 for e in eng if e['name']=='communicate' and e['args']['bytes']<10000]
  n=sum(1 for e in eng if e['name']=='communicate')/steps
  print(f"rank {pid}: period {(t1-t0)/1000/steps:.1f} ms; engine communicate {comm:.1f} (line-rate {ideal:.1f}, {n:.1f} reductions) negotiate {neg:.1f}; compute fwd {fwd:.1f} (wait {wait:.1f}) bwd {bwd:.1f}; small buckets median {sorted(small)[len(small)//2] if small else 0:.1f} ms")
