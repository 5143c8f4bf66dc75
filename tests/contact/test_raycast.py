"""Ray casts (rtrigid.contact.raycast) against MuJoCo's ``mj_ray`` on random rays at random
geoms of every kind; a cone (a mesh in MuJoCo) also against its own surface equation."""
import numpy as np
import pytest

from rtrigid.contact import raycast as rc

from .mujoco_scenes import KINDS, Scene, random_hull_points, random_rotation, random_size

mujoco = pytest.importorskip("mujoco")


def _scene(kind, rng, count=20):
    scene = Scene()
    for i in range(count):
        q, rot = random_rotation(rng)
        scene.add(kind, random_size(kind, rng), np.array([0.3 * i, 0.0, 0.0]), q, rot,
                  random_hull_points(rng) if kind == "hull" else None)
    return scene.build()


def _rays(scene, rng, per_geom):
    origins, directions = [], []
    for g in scene.rows:
        o = g[4:7] + rng.normal(size=(per_geom, 3)) * 0.1
        d = g[4:7] + rng.normal(size=(per_geom, 3)) * 0.03 - o
        origins.append(o)
        directions.append(d / np.linalg.norm(d, axis=1, keepdims=True))
    return np.vstack(origins), np.vstack(directions)


@pytest.mark.parametrize("kind", list(KINDS))
def test_rays_agree_with_mujoco(kind):
    rng = np.random.default_rng(list(KINDS).index(kind))
    scene = _scene(kind, rng)
    origins, directions = _rays(scene, rng, 50)
    n = len(origins)
    dist, which, normals = np.empty(n), np.empty(n, np.int64), np.empty((n, 3))
    rc.raycast_many(scene.rows, scene.planes, origins, directions, np.inf, dist, which, normals)
    # a cone is a mesh of 512 rim points in MuJoCo: off its surface by up to ~1e-5 m
    tol, normal_tol = (2e-5, 1e-2) if kind == "cone" else (1e-6, 1e-6)
    hits = 0
    for i in range(n):
        gid, normal = np.zeros(1, np.int32), np.zeros(3)
        ref = mujoco.mj_ray(scene.model, scene.data, origins[i], directions[i], None, 1, -1,
                            gid, normal)
        if ref < 0.0:
            assert dist[i] == np.inf, i
            continue
        hits += 1
        assert which[i] == gid[0] and abs(dist[i] - ref) <= tol, (i, dist[i], ref)
        assert np.linalg.norm(normals[i] - normal) <= normal_tol, (i, normals[i], normal)
        if kind == "cone":  # on the cone's own surface
            g = scene.rows[which[i]]
            p = (origins[i] + dist[i] * directions[i] - g[4:7]) @ g[7:16].reshape(3, 3)
            r, h = g[1], g[2]
            side = np.hypot(p[0], p[1]) - r * (p[2] + 0.75 * h) / h
            base = p[2] - 0.25 * h
            assert min(abs(side), abs(base)) <= 1e-12
    assert 0.3 * n <= hits < n


def test_ray_single_geom_and_plane():
    rng = np.random.default_rng(7)
    scene = _scene("box", rng, count=1)
    g = scene.rows[0]
    t, *n = rc.ray_geom(g, scene.planes, *(g[4:7] + [0.0, 0.0, 1.0]), 0.0, 0.0, -1.0, np.inf)
    assert 0.0 < t < 1.0 and n[2] > 0.0
    assert rc.ray_geom(g, scene.planes, *(g[4:7] + [0.0, 0.0, 1.0]), 0.0, 0.0, -1.0,
                       0.5)[0] == np.inf  # beyond max_dist
    assert rc.ray_geom(g, scene.planes, *(g[4:7] + [0.0, 0.0, 1.0]), 0.0, 0.0, 1.0,
                       np.inf)[0] == np.inf  # pointing away
    t, *n = rc.ray_plane(0.0, 0.0, 1.0, 0.5, 0.0, 0.0, 2.0, 0.0, 0.6, -0.8, np.inf)
    assert t == pytest.approx(1.5 / 0.8) and n == [0.0, 0.0, 1.0]
