"""What the contact machinery costs a step when nothing touches: the A1 from its URDF on its
12 position servos (as ``rtrigid.demos.robots.a1_standing``), its base 3.31 m above the
floor so that it stays in the air through each round, built three ways -- without collision
geometry, with it but no ground, with it and a ground.  Thread CPU per step, one step a call,
medians of 9 rounds of 300 steps (the state restored between rounds), two passes.

    python scripts/contact_overhead.py [scheme]
"""
import sys
import time
import warnings

import numpy as np

import rtrigid as rt
from rtrigid.demos import robots


def build(scheme, collision, ground):
    """The servoed A1 in the air, with or without its collision geoms and a ground."""
    with warnings.catch_warnings():  # (what the loader approximates: not the question here)
        warnings.simplefilter("ignore", UserWarning)
        model = rt.load_model(robots.path(robots.A1), floating_base=True, collision=collision)
    if ground:
        model.add_ground(friction=0.8)
    return robots.servoed(model, robots.A1_STANCE * len(robots.LEGS), scheme, 1e-3,
                          omega=100.0, base=(0.0, 0.0, 3.31, 1.0, 0.0, 0.0, 0.0))


def per_step(sim, n=300, rounds=9):
    """Median over ``rounds`` of the thread CPU per step (us) of n steps, one a call."""
    snap = sim.snapshot()
    res = []
    for _ in range(rounds):
        sim.restore(snap)
        t = time.thread_time_ns()
        for _ in range(n):
            sim.step(1)
        res.append((time.thread_time_ns() - t) / n / 1e3)
        if len(sim.contacts()):
            raise RuntimeError("the A1 touched something: the figures would not be in the air")
    sim.restore(snap)
    return float(np.median(res))


def main():
    scheme = sys.argv[1] if len(sys.argv) > 1 else "semi_implicit_euler"
    ways = {"no collision geometry": (False, False), "geoms, no ground": (True, False),
            "geoms and a ground": (True, True)}
    sims = {name: build(scheme, *way) for name, way in ways.items()}
    for _ in range(2):
        print(f"{scheme}: " + ", ".join(f"{name} {per_step(sim):.1f} us"
                                        for name, sim in sims.items()))


if __name__ == "__main__":
    main()
