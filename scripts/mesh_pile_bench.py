"""A pile of decomposed meshes poured onto a static ramp and table: rtrigid and MuJoCo side by
side on the same scene with the same hulls.

    python scripts/mesh_pile_bench.py [--count 100] [--seconds 3] [--integrator NAME]

100 objects (pybullet's duck_vhacd: 5 hulls, teddy_vhacd: 15, cube: 1; 698 geoms) dropped in
a 5 x 5 x 4 grid from about 1 m onto a 20 degree ramp that leads onto a table, at dt = 1/240.
Prints the median and worst step (us) over the run for each, the deepest contact rtrigid
found during the run (before its contact solve moved the bodies apart) and the contacts at
the end.  MuJoCo gets every hull as a mesh geom, the same masses and inertias, and the same
starting poses (its default Euler and soft contacts).
"""
import argparse
import os
import time

import numpy as np

import rtrigid as rt

KINDS = (("duck_vhacd.obj", 0.05), ("teddy2_VHACD_CHs.obj", 0.1), ("cube.obj", 0.1))


def build(count, seed=0):
    """(model, bodies, rng): the ground, table, ramp and ``count`` meshes."""
    import pybullet_data

    path = pybullet_data.getDataPath()
    m = rt.Model()
    m.add_ground(friction=0.6)
    m.add_geom(None, "box", half_extents=(0.6, 0.6, 0.02), pos=(0.0, 0.0, 0.4), friction=0.6)
    th = np.radians(20.0)
    m.add_geom(None, "box", half_extents=(0.5, 0.6, 0.02), pos=(-0.95, 0.0, 0.58),
               quat=(np.cos(th / 2), 0.0, np.sin(th / 2), 0.0), friction=0.6)
    props, bodies = {}, []
    for k in range(count):
        name, scale = KINDS[k % len(KINDS)]
        file = os.path.join(path, name)
        if name not in props:
            props[name] = rt.mass_properties([("mesh", {"file": file, "scale": scale},
                                               (0, 0, 0), (1, 0, 0, 0))], density=500.0)
        p = props[name]
        b = m.add_body(f"o{k}", p.mass, p.moments)
        m.add_geom(b, "mesh", file=file, scale=scale, pos=-p.axes.T @ p.com,
                   quat=rt.geoms.matrix_quat(p.axes.T), friction=0.6)
        bodies.append(b)
    return m, bodies, np.random.default_rng(seed)


def place(sim, bodies, rng):
    for k, b in enumerate(bodies):
        i, j, layer = k % 5, (k // 5) % 5, k // 25
        sim.set_position(b, (-1.0 + 0.13 * i, -0.3 + 0.13 * j, 1.0 + 0.13 * layer))
        q = rng.normal(size=4)
        sim.set_orientation(b, q / np.linalg.norm(q))


def _v(a):
    return " ".join(f"{x:.17g}" for x in np.ravel(a))


def mujoco_twin(m, sim, dt):
    """The same scene as an MJCF string: each hull a mesh geom, each body free."""
    assets, world, owned = [], [], {}
    for i, g in enumerate(m.geoms):
        mu = f'friction="{g.friction} 0.005 0.0001"'
        if g.kind in ("mesh", "convex"):
            assets.append(f'<mesh name="h{i}" vertex="{_v(g.vertices)}"/>')
            xml = f'<geom type="mesh" mesh="h{i}" pos="{_v(g.pos)}" quat="{_v(g.quat)}" {mu}/>'
        else:
            xml = (f'<geom type="box" size="{_v(g.params["half_extents"])}" pos="{_v(g.pos)}" '
                   f'quat="{_v(g.quat)}" {mu}/>')
        (world if g.body is None else owned.setdefault(g.body, [])).append(xml)
    bodies = []
    for b, geoms in owned.items():
        x, q = sim.pose(b)
        body = m.bodies[b]
        bodies.append(f'<body pos="{_v(x)}" quat="{_v(q)}"><freejoint/><inertial pos="0 0 0" '
                      f'mass="{body.mass!r}" diaginertia="{_v(body.inertia)}"/>'
                      + "".join(geoms) + "</body>")
    return (f'<mujoco><option timestep="{dt!r}"/><size memory="200M"/>'
            f'<asset>{"".join(assets)}</asset><worldbody><geom type="plane" size="50 50 .1" '
            f'friction="0.6 0.005 0.0001"/>{"".join(world)}{"".join(bodies)}</worldbody>'
            "</mujoco>")


def _costs(step, n):
    out = np.empty(n)
    for s in range(n):
        t = time.perf_counter()
        step()
        out[s] = time.perf_counter() - t
    return out * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--integrator", default="semi_implicit_euler")
    args = ap.parse_args()
    dt = 1.0 / 240.0
    n = int(round(args.seconds / dt))
    m, bodies, rng = build(args.count)
    sim = rt.Simulation(m, integrator=args.integrator, dt=dt)
    place(sim, bodies, rng)
    xml = mujoco_twin(m, sim, dt)
    snap = sim.snapshot()
    sim.step(1)  # compile (or load) outside the timing
    sim.restore(snap)
    deepest = [0.0]


    costs = np.empty(n)
    for s in range(n):
        t = time.perf_counter()
        sim.step(1)
        costs[s] = (time.perf_counter() - t) * 1e6
        deepest[0] = max(deepest[0], max((c["depth"] for c in sim.contacts()), default=0.0))
    print(f"rtrigid {args.integrator}: {len(m.geoms)} geoms, median {np.median(costs):.0f} us, "
          f"worst {costs.max():.0f} us, deepest contact {deepest[0] * 1e3:.1f} mm, "
          f"{len(sim.contacts())} contacts at the end")
    try:
        import mujoco
    except ImportError:
        print("MuJoCo is not installed: no side-by-side figure")
        return
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    theirs = _costs(lambda: mujoco.mj_step(model, data), n)
    print(f"MuJoCo Euler: median {np.median(theirs):.0f} us, worst {theirs.max():.0f} us, "
          f"{data.ncon} contacts at the end; ratio of medians "
          f"{np.median(costs) / np.median(theirs):.2f}")


if __name__ == "__main__":
    main()
