"""Speed of the general convex narrow phase and of the batched ray cast against MuJoCo.

    PYTHONPATH=. python scripts/convex_bench.py [--pairs 500] [--repeats 7] [--rays-only]

Per kind pair: random pairs about 10 cm across (tests/contact/mujoco_scenes.py), our
``collide`` on every pair in one compiled loop, against MuJoCo's ``mj_collision`` on the same
geoms (one call collides every pair of the model: the pairs sit 1 m apart, so its broad phase
passes exactly the pairs; its ccd tolerance at MuJoCo's default, 1e-6).  Rays: ``raycast_many``
over a scene of 100 geoms against ``mj_multiRay`` from one origin.  Medians of ``--repeats``.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import mujoco  # noqa: E402

from rtrigid._jit import jit  # noqa: E402
from rtrigid.contact import convex as cv  # noqa: E402
from rtrigid.contact import raycast as rc  # noqa: E402
from tests.contact.mujoco_scenes import KINDS, random_pairs  # noqa: E402


@jit
def _collide_all(rows, verts, ws, res):
    c = 0
    for i in range(rows.shape[0] // 2):
        c += cv.collide(rows[2 * i], rows[2 * i + 1], verts, ws, res)
    return c


def _median(f, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--rays-only", action="store_true", help="time the ray casts only")
    args = ap.parse_args()
    ws, res = cv.workspace(), np.zeros(cv.R_WIDTH)
    rng = np.random.default_rng(0)
    names = list(KINDS)
    if not args.rays_only:
        print(f"{'pair':22s} {'ours /s':>12s} {'MuJoCo /s':>12s}  ratio")
    for i, a in enumerate([] if args.rays_only else names):
        for b in names[i:]:
            scene = random_pairs(a, b, args.pairs, rng)
            m, d = scene.model, scene.data
            m.opt.ccd_tolerance, m.opt.ccd_iterations = 1e-6, 50
            _collide_all(scene.rows, scene.verts, ws, res)
            ours = _median(lambda: _collide_all(scene.rows, scene.verts, ws, res), args.repeats)
            mujoco.mj_kinematics(m, d)
            theirs = _median(lambda: mujoco.mj_collision(m, d), args.repeats)
            n = args.pairs
            print(f"{a + '-' + b:22s} {n / ours:12.0f} {n / theirs:12.0f}  {theirs / ours:5.2f}")
    # rays: 100 geoms of every kind round the origin, 10 000 rays from one point
    from tests.contact.mujoco_scenes import Scene, random_hull_points, random_rotation, \
        random_size
    rng = np.random.default_rng(1)  # the same scene with or without the pairs
    scene = Scene()
    for k in range(100):
        kind = names[k % len(names)]
        q, rot = random_rotation(rng)
        scene.add(kind, random_size(kind, rng), rng.uniform(-1.0, 1.0, 3), q, rot,
                  random_hull_points(rng) if kind == "hull" else None)
    scene.build()
    n = 10_000
    dirs = rng.normal(size=(n, 3))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    origins = np.zeros((n, 3)) + [0.0, 0.0, 1.5]
    dist, which, normals = np.empty(n), np.empty(n, np.int64), np.empty((n, 3))
    rc.raycast_many(scene.rows, scene.planes, origins, dirs, np.inf, dist, which, normals)
    ours = _median(lambda: rc.raycast_many(scene.rows, scene.planes, origins, dirs, np.inf,
                                           dist, which, normals), args.repeats)
    gid, mdist = np.empty(n, np.int32), np.empty(n)
    flat = np.ascontiguousarray(dirs.ravel())
    theirs = _median(lambda: mujoco.mj_multiRay(scene.model, scene.data, origins[0], flat, None,
                                                1, -1, gid, mdist, None, n, np.inf),
                     args.repeats)
    print(f"rays (100 geoms): ours {n / ours:.0f} /s, mj_multiRay {n / theirs:.0f} /s, "
          f"ratio {theirs / ours:.2f}")


if __name__ == "__main__":
    main()
