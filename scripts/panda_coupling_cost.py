"""What the Panda's finger coupling costs a step: the ``panda_grasp`` scene (the cube resting on
the table, 4 contacts) with its ``<mimic>`` coupling and with it dropped (``ignore=("mimic",)``),
``nullspace_rk4`` at 1 ms; medians of 7 runs of 500 steps, side by side in one process.

    python scripts/panda_coupling_cost.py
"""

import time

import numpy as np

from rtrigid.demos import robots


def main():
    sims = {"coupled": robots.panda_grasp(), "mimic dropped": robots.panda_grasp(ignore=("mimic",))}
    times = {k: [] for k in sims}
    for sim in sims.values():
        sim.step(200)  # compiled, the cube settled
    for _ in range(7):
        for k, sim in sims.items():
            t = time.perf_counter()
            sim.step(500)
            times[k].append((time.perf_counter() - t) / 500)
    for k, ts in times.items():
        print(f"{k:14s} {1e6 * np.median(ts):7.1f} us a step ({len(sims[k].contacts())} contacts)")


if __name__ == "__main__":
    main()
