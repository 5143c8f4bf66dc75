"""What a call of ``Simulation.step`` costs beside the steps it takes: the A1 standing on its
servos on the floor (``rtrigid.demos.robots.a1_standing``, dt = 1 ms, after 2 s of settling),
thread CPU per step when each call takes one step (as a real-time loop calls it) and when one
call takes 500, medians of 7 rounds of 500 steps, the state restored between rounds; and a
call that takes no step (``step(0)``: the call itself, into the compiled step and back).

    python scripts/step_call_cost.py [scheme]
"""
import sys
import time

import numpy as np

from rtrigid.demos import robots


def per_step(sim, snap, k, n=500, rounds=7):
    """Median over ``rounds`` of the thread CPU per step (us) of n steps taken k per call."""
    res = []
    for _ in range(rounds):
        sim.restore(snap)
        t = time.thread_time_ns()
        for _ in range(n // k):
            sim.step(k)
        res.append((time.thread_time_ns() - t) / n / 1e3)
    return float(np.median(res))


def main():
    scheme = sys.argv[1] if len(sys.argv) > 1 else "semi_implicit_euler"
    sim = robots.a1_standing(scheme, 1e-3)
    sim.step(2000)
    snap = sim.snapshot()
    one, many = per_step(sim, snap, 1), per_step(sim, snap, 500)
    t = time.thread_time_ns()
    for _ in range(5000):
        sim.step(0)
    empty = (time.thread_time_ns() - t) / 5000 / 1e3
    print(f"{scheme}: {one:.1f} us a step one step a call, {many:.1f} us 500 a call "
          f"({len(sim.contacts())} contacts); step(0) {empty:.1f} us")


if __name__ == "__main__":
    main()
