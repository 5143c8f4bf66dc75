"""How long this machine takes the CPU away from a process that never yields it.

    python3 scripts/cpu_gaps.py [--seconds 60] [--rt-priority 50]

A loop reads ``time.perf_counter_ns`` as fast as it can for ``--seconds`` and reports every
gap between two readings longer than ``--threshold`` microseconds: time the process did not
run.  With ``--rt-priority N`` it runs under SCHED_FIFO N (needs CAP_SYS_NICE), where no
ordinary process can preempt it, so what is left is the kernel's and, on a virtual machine,
the host's.  Linux throttles a real-time process that never sleeps to 95 % of each second
(``/proc/sys/kernel/sched_rt_runtime_us``): expect one ~50 ms gap a second unless that is -1.
Nothing is asserted: the figures are the machine's.
"""
from __future__ import annotations

import argparse
import os
import sys
import time


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--threshold", type=float, default=100.0, help="microseconds")
    p.add_argument("--rt-priority", type=int, default=0)
    args = p.parse_args(argv)
    if args.rt_priority:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(args.rt_priority))
    now = time.perf_counter_ns
    threshold = int(args.threshold * 1e3)
    gaps = []
    last = now()
    end = last + int(args.seconds * 1e9)
    while last < end:
        t = now()
        if t - last > threshold:
            gaps.append(t - last)
        last = t
    gaps.sort()
    print(f"{len(gaps)} gaps over {args.threshold:g} us in {args.seconds:g} s "
          f"(SCHED_FIFO {args.rt_priority})" if args.rt_priority else
          f"{len(gaps)} gaps over {args.threshold:g} us in {args.seconds:g} s")
    print(f"over 1 ms: {sum(g > 1_000_000 for g in gaps)}; the longest (us): "
          f"{[round(g / 1e3) for g in gaps[-5:]]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
