"""``python -m studies.hil_fairness``: how the lock-step server treats its clients under
load and abuse, measured against real ``rtrigid serve`` processes over loopback TCP.

1. crowd: 200 idle connections and 16 half-header connections (8 bytes of a header each,
   reconnected whenever the server closes them after its partial_timeout) are held open, then
   20 well-behaved clients in turn connect and take one step: connect + HELLO + STEP(1), the
   time until the client is served.  Then one client's ``step(1)`` round trips with the crowd
   there and, as a baseline, on a fresh server without it.
2. long: client A sends STEP(100000) requests back to back while client B takes ``step(1)``
   round trips (one every ~1 ms); B's round trips with A at work against B alone on the same
   server.  Once on ``gyro_top`` and once on ``chain`` with a torque large enough that Newton
   needs its sub-step fallback (STEP(20000), the case that held the old server 9.5 s).
3. twenty: 20 clients at once, each taking random STEPs with random loads; every reply is then
   compared bit for bit with the same calls made in process.

Every client runs in a thread of this process (blocked in ``recv`` while it waits, so it
holds no lock the others need); the server is a child process, stopped at the end of each
part.  The machine's load average is recorded with the figures: other processes share the
cores.  Nothing here is a pass/fail test; ``tests/io/test_hil.py`` checks the behaviour.
"""
from __future__ import annotations

import argparse
import json
import os
import select
import socket
import struct
import subprocess
import sys
import threading
import time

import numpy as np

from rtrigid import scenarios
from rtrigid.io.hil import Client, ServerError

HEADER = struct.Struct("<4sBBHII")
_TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _stats_ms(samples):
    a = np.asarray(samples, dtype=float) * 1e3
    return {"n": int(a.size), "p50_ms": float(np.median(a)), "p99_ms": float(np.percentile(a, 99)),
            "max_ms": float(a.max())}


class _ServeProcess:
    """``rtrigid serve`` as a child on a free loopback port; :meth:`close` stops it."""

    def __init__(self, scenario, *extra):
        # the server runs the rtrigid of this module's repository, wherever it is started from
        # (python -m puts the working directory first on the path)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [_TREE] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rtrigid.cli", "serve", scenario, "--port", "0", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=_TREE)
        line = self.proc.stdout.readline()
        if "rtrigid serve" not in line:
            self.close()
            raise RuntimeError(f"rtrigid serve {scenario} did not start: {line!r}")
        self.port = int(line.rsplit(":", 1)[1])

    def client(self, timeout=30.0):
        return Client("127.0.0.1", self.port, timeout=timeout)

    def raw(self):
        return socket.create_connection(("127.0.0.1", self.port), timeout=30.0)

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _HalfHeaders:
    """``count`` connections that each send 8 bytes of a header and nothing more; one the
    server closes (partial_timeout) is opened again, so ``count`` stay open."""

    def __init__(self, server, count):
        self.server, self.reopened, self._stop = server, 0, threading.Event()
        self.socks = [self._open() for _ in range(count)]
        self._thread = threading.Thread(target=self._keep, daemon=True)
        self._thread.start()

    def _open(self):
        sock = self.server.raw()
        sock.sendall(HEADER.pack(b"RTRG", 2, 2, 0, 1, 16)[:8])
        return sock

    def _keep(self):
        while not self._stop.is_set():
            ready, _, _ = select.select(self.socks, [], [], 0.05)
            for sock in ready:  # the server's notice, then its close
                try:
                    while sock.recv(4096):
                        pass
                except OSError:
                    pass
                sock.close()
                self.socks[self.socks.index(sock)] = self._open()
                self.reopened += 1

    def close(self):
        self._stop.set()
        self._thread.join()
        for sock in self.socks:
            sock.close()


def _round_trips(client, n, pause=1e-3):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        client.step(1)
        out.append(time.perf_counter() - t0)
        time.sleep(pause)
    return out


def crowd(n_round_trips):
    with _ServeProcess("gyro_top") as server:
        with server.client() as client:
            baseline = _round_trips(client, n_round_trips)
    with _ServeProcess("gyro_top") as server:
        idle = [server.raw() for _ in range(200)]
        half = _HalfHeaders(server, 16)
        try:
            served = []
            for _ in range(20):
                t0 = time.perf_counter()
                with server.client() as client:
                    client.step(1)
                    served.append(time.perf_counter() - t0)
            with server.client() as client:
                crowded = _round_trips(client, n_round_trips)
            still_open = sum(1 for s in idle if not select.select([s], [], [], 0)[0])
        finally:
            half.close()
            for s in idle:
                s.close()
    return {"connect_hello_step1": _stats_ms(served), "rtt_with_crowd": _stats_ms(crowded),
            "rtt_alone": _stats_ms(baseline), "idle_connections_open_at_end": still_open,
            "half_header_reconnects": half.reopened}


def long_step(scenario, steps, torque, n_round_trips):
    """B's step(1) round trips while A sends STEP(steps) back to back (and alone, before)."""
    forces = {0: ((0.0, 0.0, 0.0), torque)} if torque else None
    with _ServeProcess(scenario) as server:
        with server.client() as b:
            alone = _round_trips(b, n_round_trips)
            stop, done, failed, busy = threading.Event(), [], [0], []

            def hog():
                with server.client(timeout=600.0) as a:
                    while not stop.is_set():
                        t0 = time.perf_counter()
                        try:
                            a.step(steps, forces=forces)
                        except ServerError:
                            failed[0] += 1  # a step that failed is put back: the next one starts over
                        busy.append(time.perf_counter() - t0)
                        done.append(1)

            thread = threading.Thread(target=hog)
            thread.start()
            try:
                time.sleep(0.05)  # time for A's first request to go out
                loaded = _round_trips(b, n_round_trips)
            finally:
                stop.set()
                thread.join()
    return {"scenario": scenario, "steps_per_request": steps, "torque": list(torque or ()),
            "rtt_alone": _stats_ms(alone), "rtt_beside_long_steps": _stats_ms(loaded),
            "long_requests_done": len(done), "long_requests_failed": failed[0],
            "long_request_duration": _stats_ms(busy)}


def twenty(n_requests):
    results, rtts, errors = {}, [], []
    with _ServeProcess("gyro_top") as server:
        def drive(i):
            rng = np.random.default_rng(i)
            log = []
            try:
                with server.client() as client:
                    for _ in range(n_requests):
                        n = int(rng.integers(1, 11))
                        torque = tuple(0.01 * rng.normal(size=3))
                        t0 = time.perf_counter()
                        reply = client.step(n, forces={"top": ((0, 0, 0), torque)})
                        rtts.append(time.perf_counter() - t0)
                        log.append((n, torque, reply))
            except Exception as exc:  # counted, not raised: the figures say how many failed
                errors.append(f"client {i}: {type(exc).__name__}: {exc}")
            results[i] = log

        threads = [threading.Thread(target=drive, args=(i,)) for i in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    identical = 0
    for i, log in results.items():
        ref = scenarios.build("gyro_top")
        same = len(log) == n_requests
        for n, torque, reply in log:
            ref.apply_torque("top", torque)
            ref.step(n)
            ref.clear_applied()
            poses = np.array([np.concatenate(ref.pose(b)) for b in range(ref.nb)])
            vels = np.array([np.concatenate(ref.velocity(b)) for b in range(ref.nb)])
            same &= (reply["poses"].tobytes() == poses.tobytes()
                     and reply["velocities"].tobytes() == vels.tobytes()
                     and reply["steps"] == ref.steps_taken)
        identical += bool(same)
    served = sum(len(log) == n_requests for log in results.values())
    return {"clients": 20, "requests_each": n_requests, "clients_all_served": served,
            "clients_bit_identical": identical, "errors": errors, "rtt": _stats_ms(rtts)}


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m studies.hil_fairness",
                                description=__doc__.split("\n")[0])
    p.add_argument("--round-trips", type=int, default=2000,
                   help="step(1) round trips per measurement (default 2000)")
    p.add_argument("--requests", type=int, default=200,
                   help="requests per client of the 20 concurrent ones (default 200)")
    p.add_argument("--steps", type=int, default=100_000,
                   help="steps of each long request on gyro_top (default 100000)")
    p.add_argument("--chain-steps", type=int, default=20_000,
                   help="steps of each long request on chain (default 20000)")
    p.add_argument("--json", action="store_true", help="print JSON instead of the summary")
    p.add_argument("--out", default=None, help="also write the JSON to this file")
    args = p.parse_args(argv)
    for name in ("round_trips", "requests", "steps", "chain_steps"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    result = {
        "machine": {"cpus": os.cpu_count(), "loadavg_before": list(os.getloadavg())},
        "crowd": crowd(args.round_trips),
        "long_gyro_top": long_step("gyro_top", args.steps, None, args.round_trips),
        "long_chain_fallback": long_step("chain", args.chain_steps, (50.0, 0.0, 0.0),
                                         args.round_trips),
        "twenty": twenty(args.requests),
    }
    result["machine"]["loadavg_after"] = list(os.getloadavg())
    text = json.dumps(result, indent=2)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    if args.json:
        print(text)
    else:
        _summary(result)
    return 0


def _summary(r):
    def row(name, s):
        print(f"  {name:<44} p50 {s['p50_ms']:8.3f}  p99 {s['p99_ms']:8.3f}  max "
              f"{s['max_ms']:8.3f} ms  (n={s['n']})")

    c = r["crowd"]
    print("crowd: 200 idle + 16 half-header connections open "
          f"({c['idle_connections_open_at_end']} idle still open at the end, "
          f"{c['half_header_reconnects']} half-header reconnects)")
    row("connect + HELLO + step(1), 20 new clients", c["connect_hello_step1"])
    row("step(1) round trip, with the crowd", c["rtt_with_crowd"])
    row("step(1) round trip, alone", c["rtt_alone"])
    for key in ("long_gyro_top", "long_chain_fallback"):
        g = r[key]
        print(f"{key}: client A sends STEP({g['steps_per_request']}) back to back on "
              f"{g['scenario']} ({g['long_requests_done']} done, {g['long_requests_failed']} "
              "failed)")
        row("B's step(1) round trip beside A", g["rtt_beside_long_steps"])
        row("B's step(1) round trip alone", g["rtt_alone"])
        row("A's request", g["long_request_duration"])
    t = r["twenty"]
    print(f"twenty: {t['clients_all_served']}/20 served, {t['clients_bit_identical']}/20 bit "
          f"for bit in-process stepping, {len(t['errors'])} errors")
    row("step round trip, all clients", t["rtt"])
    m = r["machine"]
    print(f"load average before {m['loadavg_before']}, after {m['loadavg_after']} "
          f"({m['cpus']} cpus)")


if __name__ == "__main__":
    sys.exit(main())
