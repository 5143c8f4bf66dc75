"""Frames per second of the viewer with the physics in real time.

    python -m viewer.bench gyro_top                       # 1280x720, 10 s, headless
    python -m viewer.bench chain --set n=10               # once the chain scenario exists

Each frame is what the real-time loop does: the wall time since the previous frame goes to
``Viewer.update`` (``sim.advance``: fixed steps, accumulator), then ``render()`` draws the
frame with the HUD and waits for the renderer to finish it (``glFinish``, the cost a buffer
swap would expose).  Reported: frames per second over the timed window, frame time
percentiles, the physics and drawing shares of a frame, and the real-time factor (simulated
time over wall time; 1 means the physics kept up).  ``--window`` draws into a visible window
instead (needs a display, e.g. ``xvfb-run``), blit and swap included.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time


def measure(sim, width=1280, height=720, seconds=10.0, warmup=1.0, headless=True, msaa=4):
    from rtrigid import scenarios
    from .app import Viewer

    frames, physics, drawing = [], [], []
    with Viewer(sim, width, height, headless=headless, msaa=msaa) as v:
        last = time.perf_counter()
        start = last + warmup
        t_sim0 = None
        dropped0 = 0.0
        while True:
            now = time.perf_counter()
            if t_sim0 is None and now >= start:
                t_sim0, dropped0, begin = sim.t, sim.dropped_time, now
                frames, physics, drawing = [], [], []
            if t_sim0 is not None and now - begin >= seconds:
                break
            frames.append(now - last)
            last = now
            v.update(frames[-1])
            mid = time.perf_counter()
            if not headless:
                v.poll()
            v.render()
            drawing.append(time.perf_counter() - mid)
            physics.append(mid - now)
        wall = now - begin
        simulated = sim.t - t_sim0
        dropped = sim.dropped_time - dropped0
    frames = sorted(frames[1:])

    def pct(p):
        return frames[min(int(p * len(frames)), len(frames) - 1)] * 1e3

    return {
        "scenario": scenarios.info(sim).get("scenario"),
        "bodies": sim.nb,
        "integrator": sim.integrator,
        "dt": sim.dt,
        "size": [width, height],
        "window": not headless,
        "frames": len(frames) + 1,
        "wall_s": wall,
        "fps": (len(frames) + 1) / wall,
        "frame_ms_p50": pct(0.5),
        "frame_ms_p95": pct(0.95),
        "frame_ms_max": frames[-1] * 1e3,
        "physics_ms_per_frame_median": statistics.median(physics) * 1e3,
        "draw_ms_per_frame_median": statistics.median(drawing) * 1e3,
        "real_time_factor": simulated / wall,
        "dropped_time_s": dropped,
    }


def main(argv=None):
    from rtrigid import scenarios
    from rtrigid.cli import parse_param
    from rtrigid import integrators

    p = argparse.ArgumentParser(prog="python -m viewer.bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenario", nargs="?", default="gyro_top", choices=scenarios.names())
    p.add_argument("--integrator", default="energy_momentum", choices=integrators.names())
    p.add_argument("--dt", type=float, default=None)
    p.add_argument("--set", type=parse_param, action="append", metavar="KEY=VALUE")
    p.add_argument("--width", type=int, default=1280)
    p.add_argument("--height", type=int, default=720)
    p.add_argument("--seconds", type=float, default=10.0, help="timed wall-clock seconds")
    p.add_argument("--window", action="store_true", help="a visible window (needs a display)")
    p.add_argument("--msaa", type=int, default=4, help="samples per pixel (0: none)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    try:
        sim = scenarios.build(args.scenario, integrator=args.integrator, dt=args.dt,
                              **dict(args.set or []))
        r = measure(sim, args.width, args.height, args.seconds, headless=not args.window,
                    msaa=args.msaa)
    except ValueError as exc:
        print(f"viewer.bench: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(r, indent=2))
    else:
        for k, val in r.items():
            print(f"{k:30s} {val:.4g}" if isinstance(val, float) else f"{k:30s} {val}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
