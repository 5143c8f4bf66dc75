"""Measure UDP streaming on loopback: ``rtrigid serve SCENARIO --udp 0 --rate RATE`` in a process
of its own, this process as the rig answering every state with a command.

    python3 scripts/udp_stream_bench.py --seconds 60 --rate 1000 [--drop 0.01 --reorder 0.01]
                                        [--rt-priority 50] [--spin S] [--json]

With ``--rt-priority N`` the server runs under SCHED_FIFO N and this client under N-1.

Reported: the states' arrival jitter (arrival time minus the tick's ideal release, less the
smallest such delay seen: how much later than its best a state came) twice -- ``arrival_``:
when the kernel received the datagram (SO_TIMESTAMPNS), the server's timing and the network's;
``seen_``: when this Python process had woken and read it, which adds its own wake-up -- the
intervals between arrivals minus the period, the ticks whose state never came, and the server's own figures
(late and folded ticks, worst lateness, worst step, commands applied, superseded, dropped
stale and reordered).  Both processes read the same monotonic clock
(``time.perf_counter_ns``).  Nothing is asserted: the figures depend on the machine.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np

from rtrigid.io.hil.stream_client import StreamClient


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenario", default="arm")
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--rate", type=float, default=1000.0)
    p.add_argument("--drop", type=float, default=0.0, help="fraction of commands not sent")
    p.add_argument("--reorder", type=float, default=0.0,
                   help="fraction of commands sent after the next one")
    p.add_argument("--rt-priority", type=int, default=0,
                   help="the server, and this client at N-1, under SCHED_FIFO (needs "
                        "CAP_SYS_NICE)")
    p.add_argument("--spin", type=float, default=None,
                   help="seconds the server spins before each release (its --spin)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    cmd = [sys.executable, "-m", "rtrigid.cli", "serve", args.scenario, "--udp", "0",
           "--rate", str(args.rate)]
    if args.rt_priority:
        cmd += ["--rt-priority", str(args.rt_priority)]
    if args.spin is not None:
        cmd += ["--spin", str(args.spin)]
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                  filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))})
    try:
        line = server.stdout.readline()
        if " on udp " not in line:
            print(server.stderr.read(), file=sys.stderr)
            return 1
        host, port = line.rsplit(" ", 1)[1].split(":")
        if args.rt_priority:
            from rtrigid.io.realtime import set_fifo_priority

            set_fifo_priority(max(args.rt_priority - 1, 1))
        rng = random.Random(args.seed)
        period_ns = 1e9 / args.rate
        with StreamClient(host, int(port), timeout=2.0, timestamps=True) as client:
            client.subscribe()
            ticks, arrivals, seen = [], [], []
            sent = dropped = swapped = 0
            held = None
            end = time.perf_counter_ns() + int(args.seconds * 1e9)
            while time.perf_counter_ns() < end:
                state = client.next_state()
                seen.append(time.perf_counter_ns())
                arrivals.append(state["received_ns"])
                ticks.append(state["tick"])
                client.seq += 1
                packet = client.packet(client.seq, {0: 0.3 * np.sin(state["t"])})
                r = rng.random()
                if r < args.drop:
                    dropped += 1
                    continue
                if r < args.drop + args.reorder and held is None:
                    held = packet
                    continue
                client.send(packet)
                sent += 1
                if held is not None:
                    client.send(held)
                    sent += 1
                    swapped += 1
                    held = None
            stats = client.stats()
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=30)
    t = np.array(ticks, dtype=np.int64)

    def jitter(times: list[int]) -> np.ndarray:
        delay = np.array(times, dtype=np.float64) - (t - t[0]) * period_ns
        return (delay - delay.min()) * 1e-3

    a, s = jitter(arrivals), jitter(seen)
    intervals = np.diff(a)  # each arrival interval less the period (a is less the schedule)
    expected = int(t[-1] - t[0] + 1)
    out = {
        "scenario": args.scenario, "rate_hz": args.rate, "seconds": args.seconds,
        "rt_priority": args.rt_priority, "states_received": len(t),
        "ticks_without_a_state": expected - len(np.unique(t)),
        **{f"arrival_jitter_us_{k}": float(v) for k, v in zip(
            ("p50", "p99", "p999", "max"), np.percentile(a, [50, 99, 99.9, 100]))},
        **{f"seen_jitter_us_{k}": float(v) for k, v in zip(
            ("p50", "p99", "p999", "max"), np.percentile(s, [50, 99, 99.9, 100]))},
        "arrival_interval_error_us_p99": float(np.percentile(np.abs(intervals), 99)),
        "commands_sent": sent, "commands_not_sent_on_purpose": dropped,
        "commands_swapped_on_purpose": swapped,
        **{f"server_{k}": v for k, v in stats.items()},
    }
    accounted = (stats["commands_applied"] + stats["commands_superseded"]
                 + stats["dropped_stale"] + stats["dropped_reordered"])
    out["commands_accounted_for"] = accounted  # == commands_sent, unless the STATS reply
    # came before the last commands were read
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        width = max(map(len, out))
        for k, v in out.items():
            print(f"{k:<{width}}  {v:.6g}" if isinstance(v, float) else f"{k:<{width}}  {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
