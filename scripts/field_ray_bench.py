"""Speed of ray casts onto a heightfield against MuJoCo's ``mj_multiRay``.

    PYTHONPATH=. python scripts/field_ray_bench.py [--grid 64] [--rays 10000] [--repeats 9]

A random 64 x 64 heightfield 8 m x 8 m, 0.5 m high, and a lidar 1.5 m above it: ``--rays``
directions over the lower hemisphere and a little above the horizon, from one origin (the
one case ``mj_multiRay`` casts).  Ours: ``sim.raycast_many`` (the whole query from Python)
and the compiled ``fieldray.raycast_fields`` alone; MuJoCo's: ``mj_multiRay`` on the same
hfield (its base 1e-9 m deep).  Medians of ``--repeats``, in rays per second.
"""
import argparse
import os
import sys
import timeit

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import mujoco  # noqa: E402

import rtrigid as rt  # noqa: E402
from rtrigid.contact.fieldray import field_row, raycast_fields  # noqa: E402


def _median(f, repeats):
    return float(np.median(timeit.repeat(f, number=1, repeat=repeats)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grid", type=int, default=64)
    ap.add_argument("--rays", type=int, default=10000)
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    n, size, top = args.grid, (4.0, 4.0), 0.5
    data = rng.uniform(0.0, 1.0, (n, n)).astype(np.float32)
    data.flat[:2] = (0.0, 1.0)
    m = rt.Model(gravity=(0, 0, 0))
    m.add_geom(None, "heightfield", heights=data.astype(float) * top, size=size)
    m.add_body("far", 1.0, (0.01,) * 3)   # a Simulation needs a body; no geom
    sim = rt.Simulation(m, "nullspace_rk4", 1e-3)
    xml = (f'<mujoco><asset><hfield name="h" nrow="{n}" ncol="{n}" size="{size[0]} {size[1]} '
           f'{top} 1e-9" elevation="' + " ".join(f"{x:.9g}" for x in data[::-1].ravel())
           + '"/></asset><worldbody><geom type="hfield" hfield="h"/></worldbody></mujoco>')
    model = mujoco.MjModel.from_xml_string(xml)
    mdata = mujoco.MjData(model)
    mujoco.mj_forward(model, mdata)

    k = args.rays
    origin = np.array([0.3, -0.2, top + 1.5])
    d = rng.normal(size=(k, 3))
    d[:, 2] = -np.abs(d[:, 2]) + 0.1
    d /= np.linalg.norm(d, axis=1)[:, None]
    origins = np.tile(origin, (k, 1))
    ours = sim.raycast_many(origins, d)
    gid, dist = np.zeros(k, np.int32), np.zeros(k)
    mujoco.mj_multiRay(model, mdata, origin, d.ravel(), None, 1, -1, gid, dist, None, k,
                       mujoco.mjMAXVAL)
    ref = np.where(dist < 0.0, np.inf, dist)
    both = np.isfinite(ours) & np.isfinite(ref)
    print(f"{n}x{n} heightfield, {k} rays from one point: {both.sum()} hits, "
          f"{int(np.sum(np.isfinite(ours) != np.isfinite(ref)))} disagree on hitting, "
          f"worst distance difference {np.max(np.abs(ours[both] - ref[both])):.1e} m")

    fields = field_row(data.astype(float) * top, size, np.zeros(3), np.eye(3), 0)[None]
    heights = np.ascontiguousarray((data.astype(float) * top).ravel())
    out, which, normals = np.empty(k), np.empty(k, np.int64), np.empty((k, 3))

    def kernel():
        out[:] = np.inf
        raycast_fields(fields, heights, origins, d, np.inf, out, which, normals, 0)

    kernel()
    times = {
        "sim.raycast_many": _median(lambda: sim.raycast_many(origins, d), args.repeats),
        "fieldray.raycast_fields": _median(kernel, args.repeats),
        "mujoco.mj_multiRay": _median(
            lambda: mujoco.mj_multiRay(model, mdata, origin, d.ravel(), None, 1, -1, gid, dist,
                                       None, k, mujoco.mjMAXVAL), args.repeats),
    }
    for name, t in times.items():
        print(f"{name:26s} {t * 1e3:8.2f} ms  {k / t / 1e6:6.2f} M rays/s")


if __name__ == "__main__":
    main()
