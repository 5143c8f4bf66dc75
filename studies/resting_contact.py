"""Resting contact at game-sized steps: how far a box at rest on a slope creeps, and how flat
ten dropped boxes come to rest (issue 30's must-shows), under every contact scheme.

    python -m studies.resting_contact [--seconds 10]

Prints, per scheme and step, the box's mean speed over ``seconds`` after one second of
settling on a 16.7 degree slope (mu = 0.5, tan(theta) = 0.3), free and beside a hinged
pendulum (so the tree backend steps it); then, for ten 0.2 m boxes dropped from 0.5-5 m at
random orientations, the largest tilt from flat and the largest error of a centre's height
after 13 s.
"""
import argparse

import numpy as np

import rtrigid as rt

G, HALF, MU = 9.81, 0.1, 0.5
SCHEMES = ("nullspace_rk4", "energy_momentum", "semi_implicit_euler")
STEPS = (1e-3, 1.0 / 240.0, 1.0 / 60.0)


def slope_box(integrator, dt, theta=np.arctan(0.3), tree=False):
    """A 0.2 m box resting flat on a plane tilted by theta about y (mu = 0.5 both sides);
    ``tree``: beside a hinged pendulum far away, so that the tree backend steps it."""
    n = np.array([-np.sin(theta), 0.0, np.cos(theta)])
    m = rt.Model(gravity=(0.0, 0.0, -G))
    inertia = (2 * HALF) ** 2 / 6.0
    box = m.add_body("box", 1.0, (inertia,) * 3, shape=("box", {"half_extents": (HALF,) * 3}),
                     friction=MU)
    if tree:
        p = m.add_body("pendulum", 1.0, (0.01, 0.01, 0.01), collide=False)
        m.add_joint("revolute", None, p, anchor_parent=(5.0, 5.0, 5.0), axis_parent=(1, 0, 0))
    m.add_ground(0.0, tuple(n), friction=MU)
    sim = rt.Simulation(m, integrator=integrator, dt=dt)
    sim.set_position(box, HALF * n)
    sim.set_orientation(box, (np.cos(theta / 2), 0.0, -np.sin(theta / 2), 0.0))
    return sim, box


def creep(sim, box, dt, seconds=10.0):
    """Mean speed (m/s) of the box over ``seconds`` after one second of settling."""
    sim.step(int(round(1.0 / dt)))
    x0 = sim.pose(box)[0].copy()
    sim.step(int(round(seconds / dt)))
    return np.linalg.norm(sim.pose(box)[0] - x0) / seconds


def dropped_boxes(integrator, dt, seconds=13.0):
    m = rt.Model(gravity=(0.0, 0.0, -G))
    inertia = (2 * HALF) ** 2 / 6.0
    for i in range(10):
        m.add_body(f"box{i}", 1.0, (inertia,) * 3,
                   shape=("box", {"half_extents": (HALF,) * 3}), friction=MU)
    m.add_ground(friction=MU)
    sim = rt.Simulation(m, integrator=integrator, dt=dt)
    rng = np.random.default_rng(0)
    for i in range(10):
        sim.set_position(i, (1.0 * i, 0.0, 0.5 + 0.5 * i))
        q = rng.normal(size=4)
        sim.set_orientation(i, q / np.linalg.norm(q))
    sim.step(int(round(seconds / dt)))
    tilt = height = 0.0
    for i in range(10):
        x, q = sim.pose(i)
        up = rt.quat.to_matrix(q)[2]
        tilt = max(tilt, np.degrees(np.arccos(min(1.0, np.max(np.abs(up))))))
        height = max(height, abs(x[2] - HALF))
    return tilt, height


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args(argv)
    print("box on a 16.7 deg slope, mu 0.5: creep (mm/s)")
    for integrator in SCHEMES:
        for dt in STEPS:
            free = creep(*slope_box(integrator, dt), dt, args.seconds)
            tree = creep(*slope_box(integrator, dt, tree=True), dt, args.seconds)
            print(f"  {integrator:20s} dt {dt:.5f}  free {free * 1e3:.3e}  tree {tree * 1e3:.3e}")
    print("ten boxes dropped from 0.5-5 m, after 13 s: largest tilt (deg), height error (mm)")
    for integrator in SCHEMES:
        for dt in (1.0 / 60.0, 1.0 / 240.0):
            tilt, height = dropped_boxes(integrator, dt)
            print(f"  {integrator:20s} dt {dt:.5f}  tilt {tilt:.4f}  height {height * 1e3:.4f}")


if __name__ == "__main__":
    main()
