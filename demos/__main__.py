"""python -m rtrigid.demos [NAME [--headless] [--frames N] [--screenshot PATH] ...]

(``python -m demos`` in a checkout.)"""
from __future__ import annotations

import argparse
import sys

from . import DEMOS, names
from rtrigid import integrators
from rtrigid._jit import compile_notice
from rtrigid.viewer.cli import add_output_arguments


# the name this package was imported under: rtrigid.demos, or demos in a checkout
PROG = f"python -m {__package__}"


def main(argv=None):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("name", nargs="?", help="demo to run; without it, list the demos")
    p.add_argument("--integrator", default=None, choices=integrators.names(),
                   help="default: the demo's (energy_momentum, or nullspace_rk4 for robots "
                        "with joint dampers)")
    p.add_argument("--dt", type=float, default=None)
    p.add_argument("--headless", action="store_true", help="render offscreen and print figures")
    p.add_argument("--frames", type=int, default=240, help="frames when headless (1/60 s each)")
    p.add_argument("--screenshot", default=None, help="headless: write the last frame here")
    p.add_argument("--width", type=int, default=None)
    p.add_argument("--height", type=int, default=None)
    add_output_arguments(p)
    args = p.parse_args(argv)
    if args.name is None:
        for n in names():
            print(f"{n:15s} {DEMOS[n].description}")
        print(f"run one with: {PROG} NAME [--headless --frames N --screenshot PATH]")
        return 0
    if args.name not in names():
        print(f"{PROG}: unknown demo {args.name!r}; known: {', '.join(names())}",
              file=sys.stderr)
        return 2
    from rtrigid.viewer.cli import run_viewer

    d = DEMOS[args.name]
    try:
        with compile_notice():  # one line on stderr if kernels compile (a first use)
            sim = d.build(args.integrator, args.dt)
            return run_viewer(sim, headless=args.headless, frames=args.frames,
                              screenshot=args.screenshot, width=args.width, height=args.height,
                              title=f"rtrigid demo: {d.name}", record=args.record,
                              **{**d.viewer_options(sim, args.show_contacts), "hud": args.hud,
                                 "msaa": args.msaa})
    except (ValueError, RuntimeError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
