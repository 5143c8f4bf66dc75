"""What joint friction costs a step: a chain of n revolute links (damped, bent out of its
hanging pose) stepped without friction, with friction too small to hold any joint (every
joint sliding), with friction that holds some joints and not others, and with friction
that holds every joint; the median microseconds per step of ``--repeats`` runs of
``--steps`` steps each, under every tree scheme that takes joint friction.

    python scripts/joint_friction_bench.py [--links 1 7] [--steps 2000] [--repeats 5]
"""

import argparse
import time

import numpy as np

import rtrigid as rt

CASES = (("no friction", 0.0), ("sliding", 1e-9), ("mixed", 5.0), ("stuck", 1000.0))


def chain(n, friction):
    m = rt.Model()
    parent = None
    for i in range(n):
        body = m.add_body(f"link{i}", mass=1.0, inertia=(0.01, 0.01, 0.002))
        m.add_joint(
            "revolute",
            parent,
            body,
            anchor_parent=(0, 0, -0.2) if parent is not None else (0, 0, 0),
            anchor_child=(0, 0, 0.2),
            axis_parent=(1, 0, 0),
            damping=0.1,
            friction=friction,
            position=0.3,
        )
        parent = body
    return m


def per_step_us(sim, steps, repeats):
    sim.step(10)  # compiled and warm
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        sim.step(steps)
        times.append((time.perf_counter() - t) / steps * 1e6)
    return float(np.median(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--links", type=int, nargs="+", default=[1, 7])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print("scheme, links: " + ", ".join(name for name, _ in CASES) + " (us per step)")
    for scheme in ("nullspace_rk4", "semi_implicit_euler", "energy_momentum"):
        for n in args.links:
            cost = [
                per_step_us(rt.Simulation(chain(n, c), scheme, dt=1e-3), args.steps, args.repeats)
                for _, c in CASES
            ]
            print(f"{scheme}, {n}: " + ", ".join(f"{c:.2f}" for c in cost), flush=True)


if __name__ == "__main__":
    main()
