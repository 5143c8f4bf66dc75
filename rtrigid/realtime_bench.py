"""``rtrigid bench --realtime``: the paced loop and the lock-step round trip, measured.

1. The gyro top (``energy_momentum``, dt = 1 ms) paced by :class:`RealtimeRunner` at 1 kHz for
   ``--duration`` seconds: real-time factor, overruns, step latency and tick jitter.  Run
   once as is and once with a busy-loop process started beside it (on a 2-core machine: the
   other core busy), which is killed right after.
2. The lock-step round trip: ``rtrigid serve gyro_top`` as its own process on loopback and a
   :class:`~rtrigid.hil.Client` here; every ``client.step(1)`` is timed on its own (request
   out, 1 step, state back), without and with a load in the request, idle and with the busy
   loop.

The machine's load average is recorded with the figures: other processes share the cores.
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time

import numpy as np

from rtrigid import scenarios
from rtrigid.hil import Client
from rtrigid.realtime import RealtimeRunner, warm_up

ROUND_TRIPS = 20000
PACED_KEYS = ("real_time_factor", "steps", "overruns", "caught_up_ticks", "dropped_s",
              "step_latency_us_p50", "step_latency_us_p99", "step_latency_us_max",
              "tick_jitter_us_p50", "tick_jitter_us_p99", "tick_jitter_us_max")


@contextlib.contextmanager
def busy_core(active=True):
    """A process spinning in a Python loop for the duration of the block (killed after)."""
    if not active:
        yield None
        return
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)  # let the scheduler place it
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def served_gyro_top():
    """``rtrigid serve gyro_top --port 0`` as a child process; yields its port."""
    cmd = [sys.executable, "-m", "rtrigid.cli", "serve", "gyro_top", "--port", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        if "rtrigid serve" not in line:
            raise RuntimeError(f"server did not start: {line!r}")
        yield int(line.rsplit(":", 1)[1])
    finally:
        proc.terminate()
        proc.wait()
        proc.stdout.close()


def paced_gyro_top(duration):
    sim = scenarios.build("gyro_top", integrator="energy_momentum", dt=1e-3)
    warm_up(sim)
    stats = RealtimeRunner(sim).run(duration=duration)
    out = {k: stats[k] for k in PACED_KEYS}
    out["rtf_error"] = abs(stats["real_time_factor"] - 1.0)
    return out


def round_trips(port, n=ROUND_TRIPS, with_load=False):
    forces = {"top": ((0.0, 0.0, 0.0), (0.0, 1e-4, 0.0))} if with_load else None
    clock = time.perf_counter_ns
    times = np.empty(n, dtype=np.int64)
    with Client("127.0.0.1", port) as client:
        for _ in range(200):  # connection and caches warm
            client.step(1, forces)
        client.reset()
        for i in range(n):
            start = clock()
            client.step(1, forces)
            times[i] = clock() - start
    p50, p99 = np.percentile(times, [50, 99], method="higher")
    return {"round_trips": n, "rtt_us_p50": float(p50) * 1e-3, "rtt_us_p99": float(p99) * 1e-3,
            "rtt_us_max": float(times.max()) * 1e-3}


def collect(duration=10.0):
    result = {"duration_s": duration, "cpus": os.cpu_count(), "paced": {}, "lockstep": {}}
    for label, busy in (("idle", False), ("other_core_busy", True)):
        with busy_core(busy):
            result["paced"][label] = paced_gyro_top(duration)
            result["paced"][label]["loadavg_1min"] = os.getloadavg()[0]
    with served_gyro_top() as port:
        for label, busy in (("idle", False), ("other_core_busy", True)):
            with busy_core(busy):
                result["lockstep"][label] = round_trips(port)
                result["lockstep"][label + "_with_load"] = round_trips(port, with_load=True)
    return result


def print_table(result):
    print(f"gyro_top, energy_momentum, dt = 1 ms, paced at 1 kHz for {result['duration_s']:g} s")
    print(f"{'':18s} {'RTF':>9s} {'overruns':>8s} {'dropped s':>9s} {'step us p50/p99/max':>24s} "
          f"{'jitter us p50/p99/max':>26s} {'load':>5s}")
    for label, r in result["paced"].items():
        lat = "/".join(f"{r[f'step_latency_us_{p}']:.1f}" for p in ("p50", "p99", "max"))
        jit = "/".join(f"{r[f'tick_jitter_us_{p}']:.1f}" for p in ("p50", "p99", "max"))
        print(f"{label:18s} {r['real_time_factor']:9.6f} {r['overruns']:8d} {r['dropped_s']:9.4f} "
              f"{lat:>24s} {jit:>26s} {r['loadavg_1min']:5.2f}")
    print("lock-step round trip, client.step(1) to `rtrigid serve gyro_top` over loopback TCP")
    for label, r in result["lockstep"].items():
        print(f"{label:28s} p50 {r['rtt_us_p50']:7.1f} us  p99 {r['rtt_us_p99']:7.1f} us  "
              f"max {r['rtt_us_max']:8.1f} us  ({r['round_trips']} round trips)")


def main(args):
    result = collect(duration=args.duration)
    text = json.dumps(result, indent=2)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    if args.json:
        print(text)
    else:
        print_table(result)
    return 0
