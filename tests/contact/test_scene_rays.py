"""Simulation.raycast and raycast_many: rays into a scene of moving and static geoms of every
kind MuJoCo has, against MuJoCo's mj_ray on the same geoms at the same poses; grounds; bad
input."""
import numpy as np
import pytest

import rtrigid as rt

from .mujoco_scenes import Scene, random_hull_points, random_rotation, random_size

mujoco = pytest.importorskip("mujoco")
KINDS = ["sphere", "capsule", "cylinder", "box", "ellipsoid", "convex"]


def _params(kind, size, rng):
    if kind == "sphere":
        return {"radius": size[0]}
    if kind in ("capsule", "cylinder"):
        return {"radius": size[0], "half_length": size[1]}
    if kind == "box":
        return {"half_extents": size}
    if kind == "ellipsoid":
        return {"radii": size}
    return {"vertices": random_hull_points(rng)}


def _world(sim, g):
    """A geom's world position, quaternion and rotation matrix."""
    if g.body is None:
        x, q = np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0])
    else:
        x, q = sim.pose(g.body)
    R = rt.geoms.quat_matrix(q)
    qw = rt.quat.quat_mul(q, np.asarray(g.quat, float), np.empty(4))
    return x + R @ g.pos, qw, rt.geoms.quat_matrix(qw)


def _scene(seed):
    """Six bodies (one per kind, two geoms each, at random poses) and a static box and
    capsule; the Simulation and the same geoms in MuJoCo (geom i: rtrigid's handle i)."""
    rng = np.random.default_rng(seed)
    m = rt.Model(gravity=(0, 0, 0))
    for i, kind in enumerate(KINDS):
        b = m.add_body(f"b{i}", 1.0, (0.01, 0.01, 0.01))
        for j in range(2):
            q, _ = random_rotation(rng)
            m.add_geom(b, kind, pos=rng.uniform(-0.05, 0.05, 3), quat=q,
                       **_params(kind, random_size(kind, rng), rng))
    m.add_geom(None, "box", half_extents=(0.3, 0.2, 0.02), pos=(0.0, 0.0, -0.3))
    m.add_geom(None, "capsule", radius=0.03, half_length=0.2, pos=(0.3, 0.3, 0.1),
               quat=random_rotation(rng)[0])
    sim = rt.Simulation(m, "nullspace_rk4", 1e-3)
    for i in range(len(KINDS)):
        sim.set_position(i, rng.uniform(-0.25, 0.25, 3))
        sim.set_orientation(i, random_rotation(rng)[0])
    scene = Scene()
    for g in sim.model.geoms:
        pos, qw, R = _world(sim, g)
        p = g.params
        if g.kind == "convex":
            scene.add("hull", np.zeros(3), pos, qw, R, g.vertices)
            continue
        if g.kind == "sphere":
            size = [p["radius"], 0.0, 0.0]
        elif g.kind in ("capsule", "cylinder"):
            size = [p["radius"], p["half_length"], 0.0]
        else:
            size = p["half_extents"] if g.kind == "box" else p["radii"]
        scene.add(g.kind, size, pos, qw, R)
    return sim, scene.build(), rng


def test_rays_into_a_scene_agree_with_mujoco():
    sim, scene, rng = _scene(5)
    centres = np.array([_world(sim, g)[0] for g in sim.model.geoms])
    n = 3000
    origins = rng.uniform(-0.6, 0.6, (n, 3))
    aims = centres[rng.integers(0, len(centres), n)] + rng.normal(size=(n, 3)) * 0.03
    directions = (aims - origins) * rng.uniform(0.5, 2.0, (n, 1))   # not unit: any length
    dist = sim.raycast_many(origins, directions)
    hits = 0
    for i in range(n):
        unit = directions[i] / np.linalg.norm(directions[i])
        gid, normal = np.zeros(1, np.int32), np.zeros(3)
        ref = mujoco.mj_ray(scene.model, scene.data, origins[i], unit, None, 1, -1, gid,
                            normal)
        hit = sim.raycast(origins[i], directions[i])
        if ref < 0.0:
            assert dist[i] == np.inf and hit is None, i
            continue
        hits += 1
        assert abs(dist[i] - ref) <= 1e-6, (i, dist[i], ref)
        g = sim.model.geoms[hit.geom]
        assert hit.geom == gid[0] and hit.body == g.body and hit.distance == dist[i]
        assert np.allclose(hit.point, origins[i] + ref * unit, atol=1e-6)
        assert np.linalg.norm(hit.normal - normal) <= 1e-6
    assert hits > 100
    # a shorter reach: the far hits are dropped, the near ones kept
    near = sim.raycast_many(origins, directions, max_distance=0.3)
    assert np.array_equal(near, np.where(dist <= 0.3, dist, np.inf))


def test_rays_meet_grounds_and_follow_the_bodies():
    m = rt.Model()
    m.add_ground(height=0.1)
    b = m.add_body("ball", 1.0, (0.004,) * 3)
    m.add_geom(b, "sphere", radius=0.1)
    sim = rt.Simulation(m, "nullspace_rk4", 1e-3)
    sim.set_position(b, (2.0, 0.0, 1.0))
    down = sim.raycast((0, 0, 1), (0, 0, -3))
    assert (down.body, down.geom) == (None, None)
    assert down.distance == pytest.approx(0.9) and np.allclose(down.normal, (0, 0, 1))
    assert sim.raycast((0, 0, 1), (0, 0, 1)) is None
    assert sim.raycast((0, 0, 1), (0, 0, -1), max_distance=0.5) is None
    ball = sim.raycast((2.0, 0.0, 3.0), (0, 0, -1))
    assert (ball.body, ball.geom) == (b, 0) and ball.distance == pytest.approx(1.9)
    sim.set_position(b, (5.0, 0.0, 1.0))   # moved: the ray now reaches the ground
    assert sim.raycast((2.0, 0.0, 3.0), (0, 0, -1)).body is None


@pytest.mark.parametrize("call, field", [
    (lambda s: s.raycast((0, 0, 0), (0, 0, 0)), "direction"),
    (lambda s: s.raycast((0, 0, np.nan), (0, 0, 1)), "origin"),
    (lambda s: s.raycast((0, 0, 0), (0, 0, 1), max_distance=-1.0), "max_distance"),
    (lambda s: s.raycast_many(np.zeros((2, 3)), np.ones((3, 3))), "origins, directions"),
    (lambda s: s.raycast_many(np.zeros((1, 3)), np.zeros((1, 3))), "directions"),
])
def test_bad_rays_are_refused_naming_the_field(call, field):
    m = rt.Model()
    m.add_ground()
    m.add_body("b", 1.0, (1, 1, 1))
    sim = rt.Simulation(m, "nullspace_rk4", 1e-3)
    with pytest.raises(ValueError, match=f"^{field}"):
        call(sim)
