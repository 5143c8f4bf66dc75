"""The ``rtrigid serve`` command: its IMU arguments parsed, the limits checked, the scenario
served until interrupted."""

from __future__ import annotations

import argparse
import math
import os
import sys

from rtrigid.io.hil.protocol import as_spin
from rtrigid.io.hil.server import Server, check_limits


def parse_imu(text: str) -> str | tuple[str, tuple[float, ...]]:
    """``BODY`` or ``BODY@x,y,z`` (a point in body axes from the centre of mass)."""
    body, at, point = text.partition("@")
    if not at:
        return body
    try:
        point = tuple(float(c) for c in point.split(","))
    except ValueError:
        point = ()
    if len(point) != 3:
        raise ValueError(f"imu: expected BODY or BODY@x,y,z, got {text!r}")
    return body, point


def check_stream_options(args: argparse.Namespace) -> None:
    """``--udp PORT`` and its options, checked before the scenario is built (``ValueError``
    naming the option)."""
    if not 0 <= args.udp <= 65535:
        raise ValueError(f"udp: expected a port in [0, 65535], got {args.udp}")
    if getattr(args, "unix", None) is not None:
        raise ValueError("udp: streams over UDP; --unix is for the lock-step server")
    if args.rate is not None and not (math.isfinite(args.rate) and 0 < args.rate <= 100_000):
        raise ValueError(f"rate: expected ticks per second in (0, 100000], got {args.rate}")
    if not 1 <= args.every <= 1_000_000:
        raise ValueError(f"every: expected an integer in [1, 1000000], got {args.every}")
    if not (math.isfinite(args.watchdog) and args.watchdog > 0):
        raise ValueError(f"watchdog: expected seconds > 0, got {args.watchdog}")


def serve_main(args: argparse.Namespace) -> None:
    """``rtrigid serve``: build the scenario and serve it until interrupted (SIGTERM, SIGINT);
    then the process exits at once (status 0), its connections closed."""
    import signal

    from rtrigid import scenarios

    udp = getattr(args, "udp", None)
    if udp is None:
        for name, default in (
            ("rate", None),
            ("every", 1),
            ("watchdog", 0.1),
            ("on_silence", "hold"),
        ):
            if getattr(args, name, default) != default:
                raise ValueError(f"{name}: only with --udp PORT (streaming)")
    else:
        check_stream_options(args)
    # the limits are checked before the scenario is built: a typo fails at once, in one line
    limits = check_limits(
        **{
            k: getattr(args, k)
            for k in (
                "max_clients",
                "idle_timeout",
                "partial_timeout",
                "send_timeout",
                "time_slice",
                "session_grace",
            )
            if hasattr(args, k)
        }
    )
    spin = as_spin(getattr(args, "spin", 0.0))
    imus = [parse_imu(text) for text in getattr(args, "imu", None) or ()]
    sim = scenarios.build(
        args.scenario, integrator=args.integrator, dt=args.dt, **dict(args.set or [])
    )
    sim.step(0)  # compile before a real-time priority is taken (the Server compiles too)
    if udp is not None:
        from rtrigid.io.hil.stream import stream_main

        stream_main(args, sim, imus)
        return
    if args.rt_priority:
        from rtrigid.io.realtime import set_fifo_priority

        set_fifo_priority(args.rt_priority)
    unix = getattr(args, "unix", None)
    server = Server(
        sim, args.host, args.port, scenario=args.scenario, unix=unix, spin=spin, imus=imus, **limits
    )
    where = f"unix:{server.address}" if unix is not None else "{}:{}".format(*server.address)
    print(
        f"rtrigid serve: {args.scenario} ({sim.integrator}, dt={sim.dt:g}) on {where}", flush=True
    )
    # both signals stop it, SIGINT too when it was started with SIGINT ignored (as a shell's
    # background job or a test runner's worker starts it: Python then raises no
    # KeyboardInterrupt)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: server.stop())
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    # every connection is closed and the listener too (serve_forever's cleanup): exit now,
    # without the interpreter's teardown, which takes about a second with numba loaded and
    # would make SIGTERM/SIGINT take that long to stop the process
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
