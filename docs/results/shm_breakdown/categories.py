#!/usr/bin/env python3
# Sorts the symbols of the profiles profile.sh wrote into what an all-reduce spends CPU on, as
# shares of the samples left after start-up and exit (libtorch's operator registry, the dynamic
# loader, the allocator's frees at exit) and after the benchmark's own input copy and check:
#   categories.py PREFIX ring dbtree ...
import os, re, sys
here = os.path.dirname(os.path.abspath(__file__))
RULES = [  # (category, regex on "dso symbol"), first match wins
    ('start-up/exit', r'libtorch|libc10|ld-linux|malloc_consolidate|_int_free|unlink_chunk|cfree|unmap_page_range|_dl_'),
    ('bench check', r'__memcmp'),
    ('reduction kernel', r'AddInto|AddTo|ScaleInPlace|mca_op_avx|ompi_op_'),
    ('copy by the kernel (CMA)', r'_copy_to_iter|_copy_from_iter|process_vm|follow_page_pte|gup_|pin_user|copy_user'),
    ('copy in user space (memmove)', r'__memmove|__memcpy'),
    ('idle core', r'pv_native_safe_halt|default_idle|cpu_idle'),
    ('waiting: yield, schedule, poll', r'sched_yield|__schedule|finish_task_switch|schedule|ompi_request|opal_progress|btl_vader|MpiWork|clock_gettime|nanosleep|hrtimer|do_syscall_64|entry_SYSCALL|syscall_exit|_raw_spin|queued_spin|BackOff|pick_next|update_curr|MPI_Test'),
    ('page faults', r'page_fault|clear_page|handle_mm|do_anonymous|alloc_pages|rmqueue'),
]
prefix = sys.argv[1]
cats = [c for c, _ in RULES[2:]] + ['other']
print('| algorithm | ' + ' | '.join(cats) + ' |')
print('| :--- | ' + ' | '.join('---:' for _ in cats) + ' |')
for alg in sys.argv[2:]:
    shares = {}
    for line in open(os.path.join(here, f'{prefix}_{alg}.profile.txt')):
        m = re.match(r'\s*([\d.]+)%\s+(.*)', line)
        if not m:
            continue
        pct, rest = float(m.group(1)), m.group(2)
        cat = next((c for c, rx in RULES if re.search(rx, rest)), 'other')
        shares[cat] = shares.get(cat, 0.0) + pct
    kept = sum(v for c, v in shares.items() if c not in ('start-up/exit', 'bench check'))
    print(f'| {alg} | ' + ' | '.join(f"{100 * shares.get(c, 0.0) / kept:.0f}%" for c in cats) + ' |')
