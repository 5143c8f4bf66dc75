"""The ``rtrigid`` command: run, list, bench, serve, sweep -- and commands other packages add.

A package adds a command through the entry-point group ``rtrigid.commands``: each entry is a
function ``add(subparsers)`` that adds its sub-parser (the viewer adds ``view`` this way, so
rtrigid itself never imports it).  Every user mistake ends in one line on stderr and exit
code 2.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
from importlib.metadata import entry_points

from rtrigid import integrators, scenarios
from rtrigid._jit import compile_notice
from rtrigid.simulation import SimulationError


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2), as every other mistake gets."""

    def error(self, message):
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(2)


def parse_param(text):
    """KEY=VALUE with VALUE a Python literal (number, tuple, list) or a bare string."""
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    key, value = text.split("=", 1)
    try:
        return key, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return key, value


def scenario_name(text):
    """A registered scenario's name, a robot file's path, or a model factory as
    ``module:function``."""
    if text in scenarios.names() or scenarios.is_file(text) or scenarios.is_factory(text):
        return text
    raise argparse.ArgumentTypeError(
        f"{text!r} is neither a scenario ({', '.join(scenarios.names())}), nor a robot file "
        "that exists, nor a model factory as module:function"
    )


def add_scenario_arguments(parser, what="scenario", optional=False):
    """The arguments every command that builds a scenario takes (see :func:`build_scenario`);
    ``optional``: SCENARIO may be left out (None)."""
    parser.add_argument(
        "scenario",
        type=scenario_name,
        metavar="SCENARIO",
        **({"nargs": "?", "default": None} if optional else {}),
        help=f"the {what} to build: a name (rtrigid list shows them), the path "
        "of a URDF or MJCF robot file (--set floating_base=True, "
        "merge_fixed=False), or a function returning a Model, as "
        "module:function",
    )
    parser.add_argument(
        "--integrator",
        default=None,
        choices=integrators.names(),
        metavar="NAME",
        help="integrator (rtrigid list shows which fit which "
        "scenario; default the scenario's (energy_momentum, nullspace_rk4 for closed "
        "loops), for a robot file nullspace_rk4)",
    )
    parser.add_argument(
        "--dt", type=float, default=None, help="step size (scenario default if omitted)"
    )
    parser.add_argument(
        "--set",
        type=parse_param,
        action="append",
        metavar="KEY=VALUE",
        help="scenario parameter, e.g. --set omega_p=12",
    )


def build_scenario(args):
    """The Simulation that :func:`add_scenario_arguments`' arguments describe."""
    return scenarios.build(
        args.scenario, integrator=args.integrator, dt=args.dt, **dict(args.set or [])
    )


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
        rows.append(
            (
                f"max rel. drift of {', '.join(r['conserved_components'])}",
                f"{r['max_rel_momentum_drift']:.3e}",
            )
        )
    rows += [
        ("max constraint error", f"{r['max_constraint_error']:.3e}"),
        ("max ||q|-1|", f"{r['max_unit_quaternion_error']:.3e}"),
    ]
    if "max_rel_reference_error" in r:
        rows.append(
            (
                f"max rel. error of {r['reference']} vs analytic",
                f"{r['max_rel_reference_error']:.3e}",
            )
        )
        rows.append(
            (f"rel. error of {r['reference']} at t_end", f"{r['final_rel_reference_error']:.3e}")
        )
    solver = r["solver"]
    if "mean_iterations" in solver:
        rows.append(
            (
                "Newton iterations per step (mean/max)",
                f"{solver['mean_iterations']:.2f} / {solver['max_iterations']}",
            )
        )
        rows.append(("steps that needed the sub-step fallback", solver["fallback_steps"]))
    if "budget_steps" in solver:
        rows.append(("steps that took the budget outcome", solver["budget_steps"]))
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


def cmd_run(args):
    from rtrigid.tools.diagnostics import run_measured

    params = dict(args.set or [])
    sim = scenarios.build(args.scenario, integrator=args.integrator, dt=args.dt, **params)
    if args.step_budget is not None:
        sim.set_step_budget(args.step_budget)
    t_end = scenarios.info(sim)["t_end"] if args.t_end is None else args.t_end
    if args.realtime:
        from rtrigid.io.realtime import run_main

        return run_main(
            sim, t_end if args.duration is None else args.duration, args.json, args.rt_priority
        )
    result = run_measured(sim, t_end)
    if args.json:
        print(json.dumps(result, indent=2, default=float))
    else:
        _print_run(result)
    return 0


def cmd_list(args):
    from rtrigid.tools.diagnostics import format_table

    rows = [("scenario", "dt", "t_end", "integrators", "what it is")]
    for name in scenarios.names():
        dt, t_end = scenarios.defaults(name)
        fits = scenarios.integrators_for(name)
        rows.append(
            (
                name,
                f"{dt:g}",
                f"{t_end:g}",
                "all" if len(fits) == len(integrators.names()) else ", ".join(fits),
                scenarios.describe(name),
            )
        )
    print("\n".join(format_table(rows, "<" * 5)))
    print("\nparameters (--set KEY=VALUE):")
    for name in scenarios.names():
        params = ", ".join(f"{k}={v!r}" for k, v in scenarios.parameters(name).items())
        print(f"  {name}: {params}")
    print("\nintegrators:")
    for line in format_table([(i.name, i.summary) for i in integrators.REGISTRY.values()]):
        print("  " + line)
    return 0


def cmd_bench(args):
    if args.accuracy:
        from rtrigid.tools.accuracy import main as accuracy_main

        return accuracy_main(args)
    if args.batch:
        from rtrigid.tools.batch_bench import main as batch_main

        return batch_main(["--repeats", str(args.repeats)])
    if args.realtime:
        from rtrigid.tools.realtime_bench import main as bench_main
    else:
        from rtrigid.tools.bench import main as bench_main

    return bench_main(args)


def cmd_serve(args):
    from rtrigid.io.hil import serve_main

    return serve_main(args)


def cmd_sweep(args):
    from rtrigid import sweep

    spec = sweep.load_spec(args.spec)
    out = args.out or os.path.splitext(args.spec)[0]
    r = sweep.run(
        spec,
        out,
        address=args.address,
        cpus=args.cpus,
        retries=args.retries,
        progress=not args.no_progress,
    )
    print(
        f"{out}: {len(r['ran'])} batches run, {len(r['skipped'])} already done, "
        f"{len(r['failed'])} failed"
    )
    if r["failed"]:
        first = next(iter(r["failed"].items()))
        print(
            f"rtrigid sweep: {len(r['failed'])} batches not done ({first[0]}: {first[1]}); "
            "run the same command again to resume",
            file=sys.stderr,
        )
        return 1
    return 0


def _add_plugin_commands(sub):
    """Commands of other packages (entry-point group ``rtrigid.commands``)."""
    added = set()
    for ep in entry_points(group="rtrigid.commands"):
        ep.load()(sub)
        added.add(ep.name)
    if "view" not in added:
        v = sub.add_parser("view", help="the OpenGL viewer (not installed)")
        v.add_argument("rest", nargs=argparse.REMAINDER)
        v.set_defaults(func=_viewer_missing)


def _viewer_missing(args):
    print(
        "rtrigid view: the viewer is not installed; install it with pip install -e "
        '".[viewer]" from a checkout of rtrigid',
        file=sys.stderr,
    )
    return 2


def build_parser():
    p = _Parser(prog="rtrigid", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    r = sub.add_parser("run", help="run a scenario headless and print its figures")
    add_scenario_arguments(r)
    r.add_argument("--t-end", type=float, default=None, help="simulated duration in seconds")
    r.add_argument("--json", action="store_true", help="print the figures as JSON")
    r.add_argument(
        "--step-budget",
        type=int,
        default=None,
        metavar="N",
        help="Newton iterations one step of the jointed energy-momentum schemes may "
        "spend; a step that runs out takes the counted budget outcome (docs/guide/"
        "step-budget.md; default: none)",
    )
    r.add_argument(
        "--realtime",
        action="store_true",
        help="pace the run to the wall clock (one step per dt) and report deadlines",
    )
    r.add_argument(
        "--duration",
        type=float,
        default=None,
        help="wall-clock seconds of a --realtime run (default: --t-end)",
    )
    r.add_argument(
        "--rt-priority",
        type=int,
        default=0,
        metavar="N",
        help="run --realtime under SCHED_FIFO priority N (Linux, needs CAP_SYS_NICE)",
    )
    r.set_defaults(func=cmd_run)
    ls = sub.add_parser("list", help="list scenarios and integrators")
    ls.set_defaults(func=cmd_list)
    b = sub.add_parser("bench", help="per-step cost of every integrator on every scenario")
    b.add_argument("--repeats", type=int, default=7)
    b.add_argument("--steps", type=int, default=20000, help="steps per timed call")
    b.add_argument("--json", action="store_true", help="print JSON instead of the table")
    b.add_argument(
        "--out",
        default=None,
        help="also write the JSON to this file (with "
        "--accuracy: the directory for figures and table, default assets/figures)",
    )
    b.add_argument(
        "--accuracy",
        action="store_true",
        help="the papers' accuracy comparisons as PNG figures and a markdown table",
    )
    b.add_argument("--no-mujoco", action="store_true", help="skip the MuJoCo comparison")
    b.add_argument(
        "--contact",
        action="store_true",
        help="only the contact section: box stacks and a sliding box beside MuJoCo and PyBullet",
    )
    b.add_argument(
        "--batch",
        action="store_true",
        help="instead: rt.Batch throughput on 1000 arms, gyro tops, box stacks, "
        "quadrupeds on the ground, four-bars and delta robots beside "
        "mujoco.rollout, 2 threads each "
        "(rtrigid.tools.batch_bench)",
    )
    b.add_argument(
        "--realtime",
        action="store_true",
        help="instead: paced 1 kHz gyro top (idle and with a busy core) and the "
        "lock-step round trip",
    )
    b.add_argument("--duration", type=float, default=10.0, help="seconds per --realtime run")
    b.add_argument(
        "--lockstep-only",
        action="store_true",
        help="--realtime: only the lock-step round-trip comparison",
    )
    b.add_argument(
        "--rt-priority",
        type=int,
        default=20,
        metavar="N",
        help="--realtime: also measure under SCHED_FIFO priority N (0: skip)",
    )
    b.set_defaults(func=cmd_bench)
    sv = sub.add_parser("serve", help="serve a scenario to lock-step clients (rtrigid.hil)")
    add_scenario_arguments(sv, "scenario to serve")
    sv.add_argument("--host", default="127.0.0.1")
    sv.add_argument("--port", type=int, default=5757, help="TCP port (0: any free port)")
    sv.add_argument(
        "--unix",
        default=None,
        metavar="PATH",
        help="listen on a Unix-domain socket at PATH instead of TCP (same host)",
    )
    sv.add_argument(
        "--spin",
        type=float,
        default=0.0,
        metavar="S",
        help="after each request, busy-poll up to S seconds for the next one "
        "before sleeping (burns a core while a client keeps it busy; "
        "default 0)",
    )
    sv.add_argument(
        "--rt-priority",
        type=int,
        default=0,
        metavar="N",
        help="serve under SCHED_FIFO priority N (Linux, needs CAP_SYS_NICE)",
    )
    sv.add_argument(
        "--max-clients",
        type=int,
        default=256,
        metavar="N",
        help="connections served at once; one more gets an error reply and is closed (default 256)",
    )
    sv.add_argument(
        "--idle-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="close a connection that sent nothing for S seconds (inf: never; default 60)",
    )
    sv.add_argument(
        "--session-grace",
        type=float,
        default=120.0,
        metavar="S",
        help="keep a closed connection's simulation S seconds for a client that "
        "RESUMEs it with its session token (0: free it at once; default 120)",
    )
    sv.add_argument(
        "--partial-timeout",
        type=float,
        default=2.0,
        metavar="S",
        help="a message must be complete S seconds after its first byte (default 2)",
    )
    sv.add_argument(
        "--send-timeout",
        type=float,
        default=1.0,
        metavar="S",
        help="close a connection that leaves its replies unread for S seconds (default 1)",
    )
    sv.add_argument(
        "--time-slice",
        type=float,
        default=0.002,
        metavar="S",
        help="the longest one client's request holds the server before the "
        "others' requests are served (default 0.002)",
    )
    sv.add_argument(
        "--imu",
        action="append",
        metavar="BODY[@x,y,z]",
        help="add an IMU on BODY (at a point in body axes from its centre of "
        "mass) to every state reply; repeatable",
    )
    sv.add_argument(
        "--udp",
        type=int,
        default=None,
        metavar="PORT",
        help="stream over UDP on PORT at a fixed rate instead of serving "
        "lock-step TCP (0: any free port; see docs/hil/protocol.md)",
    )
    sv.add_argument(
        "--rate",
        type=float,
        default=None,
        metavar="HZ",
        help="--udp: ticks per second (default 1/dt: one step per tick)",
    )
    sv.add_argument(
        "--every",
        type=int,
        default=1,
        metavar="K",
        help="--udp: send the state every K-th tick (default 1)",
    )
    sv.add_argument(
        "--watchdog",
        type=float,
        default=0.1,
        metavar="S",
        help="--udp: seconds without a command before --on-silence acts (default 0.1)",
    )
    sv.add_argument(
        "--on-silence",
        choices=("hold", "zero"),
        default="hold",
        help="--udp: after the watchdog's silence, hold the last command or zero "
        "the controls, joint forces and loads (default hold)",
    )
    sv.set_defaults(func=cmd_serve)
    sw = sub.add_parser(
        "sweep", help="a parameter sweep from a TOML spec, in batches on Ray (see rtrigid.sweep)"
    )
    sw.add_argument("spec", metavar="SPEC", help="the sweep's TOML file")
    sw.add_argument(
        "--out",
        default=None,
        help="directory of the batch files and index.json "
        "(default: SPEC without .toml); a rerun into it runs only missing batches",
    )
    sw.add_argument(
        "--address",
        default=None,
        help="join the Ray cluster at this address (default: start a local one)",
    )
    sw.add_argument(
        "--cpus", type=int, default=None, help="CPUs of the local cluster (default: all)"
    )
    sw.add_argument(
        "--retries",
        type=int,
        default=2,
        help="times a batch whose worker dies is rerun before it is left for a "
        "rerun of the command (default 2)",
    )
    sw.add_argument("--no-progress", action="store_true", help="no progress bar")
    sw.set_defaults(func=cmd_sweep)
    _add_plugin_commands(sub)
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        with compile_notice():
            return args.func(args)
    except (ValueError, SimulationError) as exc:
        print(f"rtrigid: error: {exc}", file=sys.stderr)
    except OSError as exc:  # a busy port, a file that cannot be written
        print(
            f"rtrigid: error: {exc.strerror or exc}"
            f"{': ' + str(exc.filename) if exc.filename else ''}",
            file=sys.stderr,
        )
    return 2


if __name__ == "__main__":
    sys.exit(main())
