"""``rtrigid bench --realtime``: the paced loop and the lock-step round trip, measured.

1. The gyro top (``energy_momentum``, dt = 1 ms) paced by :class:`RealtimeRunner` at 1 kHz for
   ``--duration`` seconds: real-time factor, overruns, step latency and tick jitter.  Run
   once as is and once with a busy-loop process started beside it (on a 2-core machine: the
   other core busy), which is killed right after.
2. The lock-step round trip: ``rtrigid serve gyro_top`` as its own process on loopback and a
   :class:`~rtrigid.hil.Client` here, stepping once per millisecond for ``--duration``
   seconds; every ``client.step(1)`` is timed on its own (request out, 1 step, state back),
   without and with a load in the request, idle and with the busy loop; beside it, under
   the same conditions, the floor: a bare Python TCP echo of a message of the same size.
   Under the default scheduler also back to back (the next request as soon as the reply is
   in), where both processes stay warm.

Both are measured under the default scheduler, and, where permitted, a second time the way
a rig would be set up: this process (and the server) under SCHED_FIFO (``--rt-priority``,
default 20; 0 skips it) and confined to the first core, the busy loop to the others.  The
machine's load average is recorded with the figures: other processes share the cores.
"""
from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time

import numpy as np

from rtrigid import scenarios
from rtrigid.hil import Client
from rtrigid.realtime import (MonotonicClock, RealtimeRunner, restore_priority,
                              set_fifo_priority, warm_up)

PACED_KEYS = ("real_time_factor", "steps", "overruns", "caught_up_ticks", "dropped_s",
              "step_latency_us_p50", "step_latency_us_p99", "step_latency_us_max",
              "tick_jitter_us_p50", "tick_jitter_us_p99", "tick_jitter_us_max")


def _pinned(cpus):
    """A preexec_fn that confines a child process to ``cpus`` (None: no constraint)."""
    if cpus is None:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


@contextlib.contextmanager
def busy_core(active=True, cpus=None):
    """A process spinning in a Python loop for the duration of the block (killed after).

    It runs under the default scheduler whatever this process uses, and only on ``cpus``
    if given.
    """
    if not active:
        yield None
        return
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                            preexec_fn=_pinned(cpus))
    try:
        time.sleep(0.2)  # let the scheduler place it
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def scheduling(priority, cpus):
    """SCHED_FIFO at ``priority`` (0: unchanged) and affinity ``cpus`` (None: unchanged)."""
    previous_cpus = os.sched_getaffinity(0)
    previous = set_fifo_priority(priority) if priority else None
    try:
        if cpus is not None:
            os.sched_setaffinity(0, cpus)
        yield
    finally:
        os.sched_setaffinity(0, previous_cpus)
        if previous is not None:
            restore_priority(previous)


@contextlib.contextmanager
def _child_server(cmd, cpus):
    """Run ``cmd`` (which prints "...:PORT" once listening) as a child; yield the port."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, preexec_fn=_pinned(cpus))
    try:
        line = proc.stdout.readline()
        if "rtrigid serve" not in line:
            raise RuntimeError(f"server did not start: {line!r}")
        yield int(line.rsplit(":", 1)[1])
    finally:
        proc.terminate()
        proc.wait()
        proc.stdout.close()


def served_gyro_top(priority=0, cpus=None):
    """``rtrigid serve gyro_top --port 0`` as a child process; yields its port."""
    return _child_server([sys.executable, "-m", "rtrigid.cli", "serve", "gyro_top", "--port",
                          "0", "--rt-priority", str(priority)], cpus)


def paced_gyro_top(duration):
    sim = scenarios.build("gyro_top", integrator="energy_momentum", dt=1e-3)
    warm_up(sim)
    stats = RealtimeRunner(sim).run(duration=duration)
    out = {k: stats[k] for k in PACED_KEYS}
    out["rtf_error"] = abs(stats["real_time_factor"] - 1.0)
    return out


def step_cost_after_gap(gaps_us=(0, 100, 1000), samples=3000):
    """Median cost of one ``sim.step()`` right after spinning ``gap`` microseconds.

    Back to back, a step runs from warm caches; once per millisecond (a 1 kHz loop) it may
    not, on a machine whose other tenants use the caches in between.
    """
    sim = scenarios.build("gyro_top", integrator="energy_momentum", dt=1e-3)
    warm_up(sim)
    clock = time.perf_counter_ns
    out = {}
    for gap in gaps_us:
        times = np.empty(samples, dtype=np.int64)
        for i in range(samples):
            until = clock() + gap * 1000
            while clock() < until:
                pass
            start = clock()
            sim.step()
            times[i] = clock() - start
        out[f"after_{gap}us"] = float(np.median(times)) * 1e-3
    return out


def _paced_calls(call, duration, rate=1000.0):
    """Time ``call()`` once per 1/rate seconds for ``duration`` seconds (a 1 kHz rig).

    ``rate=None``: back to back, as many calls as a 1 kHz run would make.  Not under
    SCHED_FIFO: a client and a server that keep one core busy at a real-time priority are
    stopped by the kernel's real-time throttling for 50 ms every second.
    """
    n = int(round(duration * (rate or 1000.0)))
    period = int(round(1e9 / rate)) if rate else 0
    clock = MonotonicClock(spin=0.0)
    times = np.empty(n, dtype=np.int64)
    for _ in range(200):  # connection and caches warm
        call()
    origin = clock.now_ns()
    for i in range(n):
        clock.sleep_until(origin + i * period)
        start = clock.now_ns()
        call()
        times[i] = clock.now_ns() - start
    p50, p99 = np.percentile(times, [50, 99], method="higher")
    return {"round_trips": n, "rtt_us_p50": float(p50) * 1e-3, "rtt_us_p99": float(p99) * 1e-3,
            "rtt_us_max": float(times.max()) * 1e-3}


def round_trips(port, duration, with_load=False, rate=1000.0):
    """``client.step(1)`` (with a torque in the request if ``with_load``), paced at ``rate``."""
    forces = {"top": ((0.0, 0.0, 0.0), (0.0, 1e-4, 0.0))} if with_load else None
    with Client("127.0.0.1", port) as client:
        return _paced_calls(lambda: client.step(1, forces), duration, rate)


ECHO_SERVER = """
import socket
listener = socket.create_server(("127.0.0.1", 0))
print("rtrigid serve: echo on 127.0.0.1:%d" % listener.getsockname()[1], flush=True)
while True:
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while data := conn.recv(4096):
        conn.sendall(data)
    conn.close()
"""


def echo_server(priority=0, cpus=None):
    """The floor: a bare Python TCP echo process, scheduled like the rtrigid server."""
    cmd = [sys.executable, "-c", ECHO_SERVER]
    return _child_server(["chrt", "-f", str(priority)] + cmd if priority else cmd, cpus)


def echo_round_trips(port, duration, size=140, rate=1000.0):
    """A message of a STATE reply's size echoed back, paced at ``rate``."""
    message = bytes(size)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def call():
            sock.sendall(message)
            got = 0
            while got < size:
                got += len(sock.recv(size - got))

        return _paced_calls(call, duration, rate)


def configurations(priority):
    """(label, FIFO priority, our cpus, the busy loop's cpus) to measure under."""
    configs = [("default", 0, None, None)]
    if priority and len(os.sched_getaffinity(0)) >= 2:
        try:
            restore_priority(set_fifo_priority(priority))
        except ValueError:
            return configs
        ours, *others = sorted(os.sched_getaffinity(0))
        configs.append((f"fifo{priority}+cpu{ours}", priority, {ours}, set(others)))
    return configs


def collect(duration=10.0, priority=20):
    """Every measurement of the module docstring, as a dict (see :func:`print_table`)."""
    result = {"duration_s": duration, "cpus": os.cpu_count(), "paced": {}, "lockstep": {},
              "step_us_median": step_cost_after_gap()}
    for label, prio, cpus, busy_cpus in configurations(priority):
        for load, busy in (("idle", False), ("other_core_busy", True)):
            with busy_core(busy, busy_cpus), scheduling(prio, cpus):
                r = paced_gyro_top(duration)
            r["loadavg_1min"] = os.getloadavg()[0]
            result["paced"][f"{label}, {load}"] = r
        with served_gyro_top(prio, cpus) as port, echo_server(prio, cpus) as echo_port:
            for load, busy in (("idle", False), ("other_core_busy", True)):
                with busy_core(busy, busy_cpus), scheduling(prio, cpus):
                    rows = {"": round_trips(port, duration),
                            ", with load": round_trips(port, duration, with_load=True),
                            ", bare echo": echo_round_trips(echo_port, duration)}
                    if not prio:
                        rows[", back to back"] = round_trips(port, duration, rate=None)
                        rows[", bare echo back to back"] = echo_round_trips(
                            echo_port, duration, rate=None)
                for suffix, r in rows.items():
                    result["lockstep"][f"{label}, {load}{suffix}"] = r
    return result


def print_table(result):
    print(f"gyro_top, energy_momentum, dt = 1 ms, paced at 1 kHz for {result['duration_s']:g} s")
    print(f"{'':26s} {'RTF':>9s} {'overruns':>8s} {'dropped s':>9s} {'step us p50/p99/max':>24s} "
          f"{'jitter us p50/p99/max':>26s} {'load':>5s}")
    for label, r in result["paced"].items():
        lat = "/".join(f"{r[f'step_latency_us_{p}']:.1f}" for p in ("p50", "p99", "max"))
        jit = "/".join(f"{r[f'tick_jitter_us_{p}']:.1f}" for p in ("p50", "p99", "max"))
        print(f"{label:26s} {r['real_time_factor']:9.6f} {r['overruns']:8d} {r['dropped_s']:9.4f} "
              f"{lat:>24s} {jit:>26s} {r['loadavg_1min']:5.2f}")
    gaps = ", ".join(f"{k.split('_')[1]}: {v:.1f} us" for k, v in result["step_us_median"].items())
    print(f"one sim.step() (median), after spinning {gaps}")
    print("lock-step round trip, client.step(1) at 1 kHz (or back to back) to `rtrigid serve "
          "gyro_top` over loopback TCP")
    for label, r in result["lockstep"].items():
        print(f"{label:44s} p50 {r['rtt_us_p50']:7.1f} us  p99 {r['rtt_us_p99']:7.1f} us  "
              f"max {r['rtt_us_max']:8.1f} us  ({r['round_trips']} round trips)")


def main(args):
    result = collect(duration=args.duration, priority=args.rt_priority)
    text = json.dumps(result, indent=2)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    if args.json:
        print(text)
    else:
        print_table(result)
    return 0
