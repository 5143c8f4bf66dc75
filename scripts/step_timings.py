"""Step costs of a set of scenarios, for an A/B comparison of two checkouts.

    PYTHONPATH=<checkout A> NUMBA_CACHE_DIR=<cache A> python scripts/step_timings.py > a1.json
    PYTHONPATH=<checkout B> NUMBA_CACHE_DIR=<cache B> python scripts/step_timings.py > b1.json
    ... alternate A and B a few times, then compare the minima per case.

Each case builds a scenario, steps it once (to compile or load its kernels), takes a snapshot,
and then times ``--repeats`` calls of ``sim.step(k)`` (with ``--per-call``: k calls of
``sim.step(1)``, the cost a real-time loop pays per tick), each from the same snapshot; it
prints the least time per step (µs) per case as JSON.  Give each checkout its own numba cache
(``NUMBA_CACHE_DIR``), warmed by a first run.  On a shared virtual machine
the minima still move by several per cent from run to run: alternate, and repeat.
"""
import argparse
import json
import time
import warnings

from rtrigid import scenarios

CASES = (("chain", "energy_momentum", 200), ("arm", "energy_momentum", 400),
         ("arm", "energy_momentum4", 200), ("quadruped_on_ground", "energy_momentum", 100),
         ("delta_robot", "nullspace_rk4", 200), ("bennett", "energy_momentum", 100),
         ("gyro_top", "energy_momentum", 2000), ("box_stack", "semi_implicit_euler", 500),
         ("double_pendulum", "energy_momentum", 1000), ("arm", "nullspace_rk4", 1000),
         ("arm", "semi_implicit_euler", 2000), ("four_bar", "nullspace_rk4", 400),
         ("four_bar", "energy_momentum", 100), ("slider_crank", "nullspace_rk4", 400),
         ("quadruped_on_ground", "nullspace_rk4", 100))


def every_case():
    """(scenario, integrator, steps per timed call) of every scenario under every integrator
    that steps it: 2000 steps for a single body, 200 otherwise."""
    for name in scenarios.names():
        for integrator in scenarios.integrators_for(name):
            sim = scenarios.build(name, integrator=integrator)
            yield name, integrator, 2000 if sim.nb == 1 else 200


def finite_steps(sim, steps):
    """How many of ``steps`` steps ``sim`` takes before its state would become non-finite, the
    state put back after.  (``rtrigid.tools.timing.steps_it_takes`` again, written out here
    because this script also times checkouts older than that module.)"""
    snap, t0 = sim.snapshot(), sim.t
    try:
        sim.step(steps)
    except Exception:  # the scheme's SimulationError: a step left the state non-finite
        pass
    taken = int(round((sim.t - t0) / sim.dt))
    sim.restore(snap)
    return taken


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=25, help="timed calls per case")
    ap.add_argument("--only", default="", help="the cases whose name contains this")
    ap.add_argument("--all", action="store_true",
                    help="every scenario under every integrator that steps it, at its default "
                         "step (the rows of `rtrigid bench`), instead of the cases above")
    ap.add_argument("--per-call", action="store_true",
                    help="time k calls of sim.step(1) instead of one sim.step(k): what a loop "
                         "that steps once a tick pays, the Python call included")
    args = ap.parse_args(argv)
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, integrator, k in (every_case() if args.all else CASES):
            case = f"{name}/{integrator}"
            if args.only not in case:
                continue
            sim = scenarios.build(name, integrator=integrator)
            k = min(k, finite_steps(sim, 2 * k) // 2)  # explicit Euler on a tumbling body
            if k < 1:
                continue
            sim.step(k)
            snap = sim.snapshot()
            best = float("inf")
            for _ in range(args.repeats):
                sim.restore(snap)
                t0 = time.perf_counter()
                if args.per_call:
                    for _ in range(k):
                        sim.step(1)
                else:
                    sim.step(k)
                best = min(best, (time.perf_counter() - t0) / k)
            out[case] = round(best * 1e6, 4)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
