"""The ``rtrigid`` command: run, list, bench, serve, view."""
from __future__ import annotations

import argparse
import ast
import json
import sys

from rtrigid import scenarios
from rtrigid.integrators import INTEGRATORS


def _param(text):
    """KEY=VALUE with VALUE a Python literal (number, tuple, list) or a bare string."""
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    key, value = text.split("=", 1)
    try:
        return key, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return key, value


def _print_run(r):
    rows = [
        ("scenario", r["scenario"]),
        ("integrator", r["integrator"]),
        ("dt [s]", f"{r['dt']:g}"),
        ("simulated time [s]", f"{r['t_end']:g}"),
        ("steps", r["steps"]),
        ("wall time [s]", f"{r['wall_s']:.4f}"),
        ("cost [us/step]", f"{r['us_per_step']:.3f}"),
        ("max rel. energy drift", f"{r['max_rel_energy_drift']:.3e}"),
    ]
    if r["max_rel_momentum_drift"] is not None:
        rows.append((f"max rel. drift of {', '.join(r['conserved_components'])}",
                     f"{r['max_rel_momentum_drift']:.3e}"))
    rows += [
        ("max constraint error", f"{r['max_constraint_error']:.3e}"),
        ("max ||q|-1|", f"{r['max_unit_quaternion_error']:.3e}"),
    ]
    if "max_rel_reference_error" in r:
        rows.append((f"max rel. error of {r['reference']} vs analytic",
                     f"{r['max_rel_reference_error']:.3e}"))
        rows.append((f"rel. error of {r['reference']} at t_end",
                     f"{r['final_rel_reference_error']:.3e}"))
    solver = r["solver"]
    if "mean_iterations" in solver:
        rows.append(("Newton iterations per step (mean/max)",
                     f"{solver['mean_iterations']:.2f} / {solver['max_iterations']}"))
        rows.append(("steps that needed the sub-step fallback", solver["fallback_steps"]))
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


def cmd_run(args):
    from rtrigid.diagnostics import run_measured

    params = dict(args.set or [])
    sim = scenarios.build(args.scenario, integrator=args.integrator, dt=args.dt, **params)
    t_end = sim.info["t_end"] if args.t_end is None else args.t_end
    if args.realtime:
        from rtrigid.realtime import run_main

        return run_main(sim, t_end if args.duration is None else args.duration, args.json,
                        args.rt_priority)
    result = run_measured(sim, t_end)
    if args.json:
        print(json.dumps(result, indent=2, default=float))
    else:
        _print_run(result)
    return 0


def cmd_list(args):
    for name in scenarios.names():
        dt, t_end = scenarios.defaults(name)
        params = ", ".join(f"{k}={v!r}" for k, v in scenarios.parameters(name).items())
        print(f"{name:14s} dt={dt:g} t_end={t_end:g}  {params}")
    print("integrators: " + ", ".join(INTEGRATORS))
    return 0


def cmd_bench(args):
    if args.accuracy:
        from rtrigid.accuracy import main as accuracy_main

        return accuracy_main(args)
    if args.realtime:
        from rtrigid.realtime_bench import main as bench_main
    else:
        from rtrigid.bench import main as bench_main

    return bench_main(args)


def cmd_serve(args):
    from rtrigid.hil import serve_main

    return serve_main(args)


def cmd_view(args):
    # the viewer (pyglet, moderngl) is imported only here: rtrigid itself never needs it
    try:
        from viewer.cli import view_command
    except ImportError as exc:
        print(f"rtrigid view: the viewer is not available ({exc}); install the extras with "
              'pip install -e ".[viewer]" from a checkout of rtrigid', file=sys.stderr)
        return 2
    return view_command(args)


def add_view_parser(sub):
    v = sub.add_parser("view", help="show a scenario in the OpenGL viewer (or render it headless)")
    v.add_argument("scenario", choices=scenarios.names())
    v.add_argument("--integrator", default="energy_momentum", choices=list(INTEGRATORS))
    v.add_argument("--dt", type=float, default=None, help="step size (scenario default if omitted)")
    v.add_argument("--set", type=_param, action="append", metavar="KEY=VALUE",
                   help="scenario parameter, e.g. --set omega_p=12")
    v.add_argument("--speed", type=float, default=1.0, help="simulated seconds per wall second")
    v.add_argument("--headless", action="store_true", help="render offscreen, no window")
    v.add_argument("--frames", type=int, default=120, help="frames to draw when headless (1/60 s each)")
    v.add_argument("--screenshot", default=None, help="headless: write the last frame to this PNG")
    v.add_argument("--width", type=int, default=None)
    v.add_argument("--height", type=int, default=None)
    v.set_defaults(func=cmd_view)


def build_parser():
    p = argparse.ArgumentParser(prog="rtrigid", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run a scenario headless and print its figures")
    r.add_argument("scenario", choices=scenarios.names())
    r.add_argument("--integrator", default="energy_momentum", choices=list(INTEGRATORS))
    r.add_argument("--dt", type=float, default=None, help="step size (scenario default if omitted)")
    r.add_argument("--t-end", type=float, default=None, help="simulated duration in seconds")
    r.add_argument("--set", type=_param, action="append", metavar="KEY=VALUE",
                   help="scenario parameter, e.g. --set omega_p=12")
    r.add_argument("--json", action="store_true", help="print the figures as JSON")
    r.add_argument("--realtime", action="store_true",
                   help="pace the run to the wall clock (one step per dt) and report deadlines")
    r.add_argument("--duration", type=float, default=None,
                   help="wall-clock seconds of a --realtime run (default: --t-end)")
    r.add_argument("--rt-priority", type=int, default=0, metavar="N",
                   help="run --realtime under SCHED_FIFO priority N (Linux, needs CAP_SYS_NICE)")
    r.set_defaults(func=cmd_run)
    ls = sub.add_parser("list", help="list scenarios and integrators")
    ls.set_defaults(func=cmd_list)
    b = sub.add_parser("bench", help="per-step cost of every integrator on every scenario")
    b.add_argument("--repeats", type=int, default=7)
    b.add_argument("--steps", type=int, default=20000, help="steps per timed call")
    b.add_argument("--json", action="store_true", help="print JSON instead of the table")
    b.add_argument("--out", default=None, help="also write the JSON to this file (with "
                   "--accuracy: the directory for figures and table, default assets/figures)")
    b.add_argument("--accuracy", action="store_true",
                   help="the papers' accuracy comparisons as PNG figures and a markdown table")
    b.add_argument("--no-mujoco", action="store_true", help="skip the MuJoCo comparison")
    b.add_argument("--realtime", action="store_true",
                   help="instead: paced 1 kHz gyro top (idle and with a busy core) and the "
                        "lock-step round trip")
    b.add_argument("--duration", type=float, default=10.0, help="seconds per --realtime run")
    b.add_argument("--lockstep-only", action="store_true",
                   help="--realtime: only the lock-step round-trip comparison")
    b.add_argument("--rt-priority", type=int, default=20, metavar="N",
                   help="--realtime: also measure under SCHED_FIFO priority N (0: skip)")
    b.set_defaults(func=cmd_bench)
    sv = sub.add_parser("serve", help="serve a scenario to lock-step clients (rtrigid.hil)")
    sv.add_argument("scenario", choices=scenarios.names())
    sv.add_argument("--host", default="127.0.0.1")
    sv.add_argument("--port", type=int, default=5757, help="TCP port (0: any free port)")
    sv.add_argument("--integrator", default="energy_momentum", choices=list(INTEGRATORS))
    sv.add_argument("--dt", type=float, default=None,
                    help="step size (scenario default if omitted)")
    sv.add_argument("--set", type=_param, action="append", metavar="KEY=VALUE",
                    help="scenario parameter, e.g. --set omega_p=12")
    sv.add_argument("--unix", default=None, metavar="PATH",
                    help="listen on a Unix-domain socket at PATH instead of TCP (same host)")
    sv.add_argument("--spin", type=float, default=0.0, metavar="S",
                    help="after each request, busy-poll up to S seconds for the next one "
                         "before sleeping (burns a core while a client keeps it busy; "
                         "default 0)")
    sv.add_argument("--rt-priority", type=int, default=0, metavar="N",
                    help="serve under SCHED_FIFO priority N (Linux, needs CAP_SYS_NICE)")
    sv.set_defaults(func=cmd_serve)
    add_view_parser(sub)
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ValueError as exc:
        print(f"rtrigid: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
