#!/usr/bin/env python3
# Sums an Nsight Compute per-kernel summary (ncu --metrics gpu__time_duration.sum --print-summary
# per-kernel --csv --log-file F) by kernel name and prints the top kernels by total GPU time.
#   scripts/ncu-summary.py FILE.csv STEPS_PROFILED TOP_N
import csv,sys,re,collections
f=sys.argv[1]; steps=float(sys.argv[2])
rows=list(csv.DictReader([l for l in open(f) if not l.startswith('==')]))
agg=collections.defaultdict(lambda:[0,0.0])
for r in rows:
    n=r['Kernel Name']; inv=int(r['Invocations']); avg=float(r['Average'].replace(',',''))
    short=re.sub(r'\(.*','',n)[:110]
    agg[short][0]+=inv; agg[short][1]+=inv*avg/1e3
tot=sum(v[1] for v in agg.values())
print(f"total kernel time {tot/1e3:.2f} ms over all invocations (~{steps} steps incl warmup)")
for k,v in sorted(agg.items(), key=lambda kv:-kv[1][1])[:int(sys.argv[3])]:
    print(f"{v[1]/tot*100:5.1f}%  {v[1]/1e3:8.3f} ms  n={v[0]:5d}  {k}")
