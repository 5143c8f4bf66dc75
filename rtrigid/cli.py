"""The ``rtrigid`` command: run, list, bench."""
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
    from rtrigid.bench import main as bench_main

    return bench_main(args)


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
    b.set_defaults(func=cmd_bench)
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
