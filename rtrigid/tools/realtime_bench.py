"""``rtrigid bench --realtime``: the paced loop and the lock-step round trip, measured.

1. The gyro top (``energy_momentum``, dt = 1 ms) paced by :class:`RealtimeRunner` at 1 kHz for
   ``--duration`` seconds: real-time factor, overruns, step latency and tick jitter.  Run
   once as is and once with a busy-loop process started beside it (on a 2-core machine: the
   other core busy), which is killed right after.
2. The lock-step round trip (:func:`lockstep_comparison`): one ``rtrigid serve gyro_top``
   process per configuration of :data:`LOCKSTEP_CONFIGS` (TCP or Unix socket; with or without
   busy-polling, ``--spin``; default scheduler or SCHED_FIFO; server and client on one core or
   on two), all started at once, and a :class:`~rtrigid.hil.Client` here per server; every
   ``client.step(1)`` (request out, 1 step, state back), paced at 1 kHz, is timed on its own.
   The configurations take turns in blocks of 500 round trips until each has ``--duration``
   seconds' worth, so a change in the machine's load hits every row alike.  Beside them, the
   floor: a bare Python echo (TCP and Unix socket) of a message of the same size.

The paced loop is measured under the default scheduler, and, where permitted, a second time
the way a rig would be set up: this process under SCHED_FIFO (``--rt-priority``, default 20;
0 skips it) and confined to the first core, the busy loop to the others.  The lock-step rows
marked "fifo" run server and client at that priority; "cores 1/0" pins the server to the
second core and the client to the first.  The machine's load average is recorded with the
figures: other processes share the cores.  ``--lockstep-only`` skips part 1.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

from rtrigid import scenarios
from rtrigid.tools.bench import report
from rtrigid.io.hil import Client
from rtrigid.io.realtime import (MonotonicClock, RealtimeRunner, restore_priority,
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
def _child_server(cmd, cpus, env=None):
    """Run ``cmd`` (which prints "rtrigid serve: ... on ADDRESS" once listening) as a child;
    yield ADDRESS's port (an int) or, for "unix:PATH", PATH."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, preexec_fn=_pinned(cpus),
                            env=env)
    try:
        line = proc.stdout.readline()
        if "rtrigid serve" not in line:
            raise RuntimeError(f"server did not start: {line!r}")
        where = line.rsplit(" on ", 1)[1].strip()
        yield where[5:] if where.startswith("unix:") else int(where.rsplit(":", 1)[1])
    finally:
        proc.terminate()
        proc.wait()
        proc.stdout.close()


def served_gyro_top(priority=0, cpus=None, unix=None, spin=0.0, env=None):
    """``rtrigid serve gyro_top`` as a child process (on a free TCP port, or on the Unix
    socket ``unix``); yields its port or path."""
    where = ["--unix", unix] if unix else ["--port", "0"]
    return _child_server([sys.executable, "-m", "rtrigid.cli", "serve", "gyro_top", *where,
                          "--spin", repr(float(spin)), "--rt-priority", str(priority)],
                         cpus, env)


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


ECHO_SERVER = """
import os, socket, sys
if len(sys.argv) > 1:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sys.argv[1]); listener.listen()
    print("rtrigid serve: echo on unix:" + sys.argv[1], flush=True)
else:
    listener = socket.create_server(("127.0.0.1", 0))
    print("rtrigid serve: echo on 127.0.0.1:%d" % listener.getsockname()[1], flush=True)
try:
    while True:
        conn, _ = listener.accept()
        if conn.family != socket.AF_UNIX:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while data := conn.recv(4096):
            conn.sendall(data)
        conn.close()
finally:
    if len(sys.argv) > 1:
        os.unlink(sys.argv[1])
"""


def echo_server(priority=0, cpus=None, unix=None):
    """The floor: a bare Python echo process (TCP, or Unix socket at ``unix``), scheduled like
    the rtrigid server."""
    cmd = [sys.executable, "-c", ECHO_SERVER] + ([unix] if unix else [])
    return _child_server(["chrt", "-f", str(priority)] + cmd if priority else cmd, cpus)


class _EchoClient:
    """A bare echo round trip of ``size`` bytes: ``step()`` sends them and waits for all back."""

    def __init__(self, address, size=140):
        if isinstance(address, str):
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._sock.connect(address)
        else:
            self._sock = socket.create_connection(("127.0.0.1", address))
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._message = bytes(size)
        self._buf = bytearray(size)
        self._view = memoryview(self._buf)

    def step(self, n=1, forces=None):
        self._sock.sendall(self._message)
        got, size = 0, len(self._buf)
        while got < size:
            got += self._sock.recv_into(self._view[got:])

    def close(self):
        self._sock.close()


# The side-by-side lock-step comparison: (label, server, client) where server is
# (kind "rtrigid" or "echo", transport "tcp" or "unix", server spin s, FIFO priority or 0,
#  server cpu index or None) and client is (client spin s, FIFO priority or 0, cpu index or None,
#  a torque in each request).  Core indices are positions in this process's affinity list;
#  "fifo" rows are measured only where SCHED_FIFO is permitted and there are >= 2 cores.
SERVER_SPIN = 2e-3   # a little over the 1 ms between a 1 kHz client's requests
CLIENT_SPIN = 5e-4   # a one-step reply takes tens of microseconds
LOCKSTEP_CONFIGS = (
    ("echo, tcp", ("echo", "tcp", 0, 0, None), (0, 0, None, False)),
    ("echo, unix", ("echo", "unix", 0, 0, None), (0, 0, None, False)),
    ("tcp", ("rtrigid", "tcp", 0, 0, None), (0, 0, None, False)),
    ("tcp, torque in request", ("rtrigid", "tcp", 0, 0, None), (0, 0, None, True)),
    ("unix", ("rtrigid", "unix", 0, 0, None), (0, 0, None, False)),
    ("tcp, spin, cores 1/0", ("rtrigid", "tcp", SERVER_SPIN, 0, 1), (CLIENT_SPIN, 0, 0, False)),
    ("unix, spin, cores 1/0", ("rtrigid", "unix", SERVER_SPIN, 0, 1), (CLIENT_SPIN, 0, 0, False)),
    ("tcp, fifo, core 0", ("rtrigid", "tcp", 0, "fifo", 0), (0, "fifo", 0, False)),
    ("unix, fifo, core 0", ("rtrigid", "unix", 0, "fifo", 0), (0, "fifo", 0, False)),
    ("tcp, fifo, cores 1/0", ("rtrigid", "tcp", 0, "fifo", 1), (0, "fifo", 0, False)),
    ("unix, fifo, cores 1/0", ("rtrigid", "unix", 0, "fifo", 1), (0, "fifo", 0, False)),
    ("unix, fifo, client spin, cores 1/0", ("rtrigid", "unix", 0, "fifo", 1),
     (CLIENT_SPIN, "fifo", 0, False)),
    ("tcp, fifo, spin, cores 1/0", ("rtrigid", "tcp", SERVER_SPIN, "fifo", 1),
     (CLIENT_SPIN, "fifo", 0, False)),
    ("unix, fifo, spin, cores 1/0", ("rtrigid", "unix", SERVER_SPIN, "fifo", 1),
     (CLIENT_SPIN, "fifo", 0, False)),
    ("unix, fifo, spin, cores 1/0, torque", ("rtrigid", "unix", SERVER_SPIN, "fifo", 1),
     (CLIENT_SPIN, "fifo", 0, True)),
)


def lockstep_comparison(duration=10.0, priority=20, configs=LOCKSTEP_CONFIGS, block=500,
                        env=None):
    """Round trips of every configuration, side by side: all servers run at once, and the
    client takes ``block`` round trips (paced at 1 kHz) from each configuration in turn until
    each has ``duration`` seconds' worth, so a change in the machine's load hits all alike.

    Returns {label: {round_trips, rtt_us_p50, rtt_us_p99, rtt_us_max, server, client}}.
    """
    cpus = sorted(os.sched_getaffinity(0))
    fifo_ok = bool(priority) and len(cpus) >= 2
    if fifo_ok:
        try:
            restore_priority(set_fifo_priority(priority))
        except ValueError:
            fifo_ok = False
    configs = [c for c in configs if fifo_ok or "fifo" not in (c[1][3], c[2][1])]
    n_blocks = max(1, int(round(duration * 1000 / block)))
    path_dir = tempfile.mkdtemp(prefix="rtrigid-bench-")
    times = {label: [] for label, *_ in configs}
    try:
        with contextlib.ExitStack() as stack:
            clients = {}
            for i, (label, (kind, transport, spin, prio, core), (cspin, _, _, load)) in \
                    enumerate(configs):
                prio = priority if prio == "fifo" else 0
                where = os.path.join(path_dir, f"{i}.sock") if transport == "unix" else None
                pin = None if core is None else {cpus[core]}
                if kind == "echo":
                    address = stack.enter_context(echo_server(prio, pin, where))
                    client = _EchoClient(address)
                    stack.callback(client.close)
                    clients[label] = (client.step, None)
                    continue
                address = stack.enter_context(served_gyro_top(prio, pin, where, spin, env))
                client = stack.enter_context(
                    Client(unix=address, spin=cspin) if where else
                    Client("127.0.0.1", address, spin=cspin))
                forces = {"top": ((0.0, 0.0, 0.0), (0.0, 1e-4, 0.0))} if load else None
                clients[label] = (lambda c=client, f=forces: c.step(1, f), None)
            for _ in range(n_blocks):
                for label, _server, (_, cprio, ccore, _) in configs:
                    call = clients[label][0]
                    with scheduling(priority if cprio == "fifo" else 0,
                                    None if ccore is None else {cpus[ccore]}):
                        times[label].append(_timed_calls(call, block))
    finally:
        shutil.rmtree(path_dir, ignore_errors=True)
    out = {}
    for label, server, client in configs:
        t = np.concatenate(times[label])
        p50, p99 = np.percentile(t, [50, 99], method="higher")
        out[label] = {"round_trips": int(t.size), "rtt_us_p50": float(p50) * 1e-3,
                      "rtt_us_p99": float(p99) * 1e-3, "rtt_us_max": float(t.max()) * 1e-3,
                      "server": dict(zip(("kind", "transport", "spin_s", "fifo", "core"), server)),
                      "client": dict(zip(("spin_s", "fifo", "core", "torque"), client))}
    return out


def _timed_calls(call, n, rate=1000.0, warm=20):
    """Time ``call()`` ``n`` times, once per 1/rate seconds, after ``warm`` untimed calls."""
    clock = MonotonicClock(spin=0.0)
    period = int(round(1e9 / rate))
    for _ in range(warm):
        call()
    times = np.empty(n, dtype=np.int64)
    origin = clock.now_ns() + period
    for i in range(n):
        clock.sleep_until(origin + i * period)
        start = clock.now_ns()
        call()
        times[i] = clock.now_ns() - start
    return times


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


def collect(duration=10.0, priority=20, paced=True):
    """Every measurement of the module docstring, as a dict (see :func:`print_table`)."""
    result = {"duration_s": duration, "cpus": os.cpu_count(), "paced": {}}
    if paced:
        result["step_us_median"] = step_cost_after_gap()
        for label, prio, cpus, busy_cpus in configurations(priority):
            for load, busy in (("idle", False), ("other_core_busy", True)):
                with busy_core(busy, busy_cpus), scheduling(prio, cpus):
                    r = paced_gyro_top(duration)
                r["loadavg_1min"] = os.getloadavg()[0]
                result["paced"][f"{label}, {load}"] = r
    result["lockstep_loadavg_before"] = list(os.getloadavg())
    result["lockstep"] = lockstep_comparison(duration, priority)
    result["lockstep_loadavg_after"] = list(os.getloadavg())
    return result


def print_table(result):
    if result["paced"]:
        _print_paced(result)
    print("lock-step round trip, client.step(1) of the gyro top (energy_momentum, dt = 1 ms) at "
          "1 kHz to `rtrigid serve gyro_top`")
    print(f"{result['duration_s']:g} s per row, rows interleaved in blocks; load average "
          + " / ".join(f"{x:.2f}" for x in result["lockstep_loadavg_before"]) + " before, "
          + " / ".join(f"{x:.2f}" for x in result["lockstep_loadavg_after"]) + " after")
    for label, r in result["lockstep"].items():
        print(f"{label:38s} p50 {r['rtt_us_p50']:7.1f} us  p99 {r['rtt_us_p99']:7.1f} us  "
              f"max {r['rtt_us_max']:8.1f} us  ({r['round_trips']} round trips)")


def _print_paced(result):
    print(f"gyro_top, energy_momentum, dt = 1 ms, paced at 1 kHz for {result['duration_s']:g} s")
    print(f"{'':26s} {'RTF':>9s} {'overruns':>8s} {'dropped s':>9s} {'step us p50/p99/max':>24s} "
          f"{'jitter us p50/p99/max':>26s} {'load':>5s}")
    for label, r in result["paced"].items():
        lat = "/".join(f"{r[f'step_latency_us_{p}']:.1f}" for p in ("p50", "p99", "max"))
        jit = "/".join(f"{r[f'tick_jitter_us_{p}']:.1f}" for p in ("p50", "p99", "max"))
        print(f"{label:26s} {r['real_time_factor']:9.6f} {r['overruns']:8d} {r['dropped_s']:9.4f} "
              f"{lat:>24s} {jit:>26s} {r['loadavg_1min']:5.2f}")
    if "step_us_median" in result:
        gaps = ", ".join(f"{k.split('_')[1]}: {v:.1f} us"
                         for k, v in result["step_us_median"].items())
        print(f"one sim.step() (median), after spinning {gaps}")


def main(args):
    result = collect(duration=args.duration, priority=args.rt_priority,
                     paced=not getattr(args, "lockstep_only", False))
    return report(result, args, print_table)
