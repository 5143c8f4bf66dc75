"""Ray casts against heightfields (sim.raycast, raycast_many, rangefinder) against MuJoCo's
mj_ray on the same hfield at the same pose: rays from above, grazing, from the sides, from
below and from inside the terrain.

MuJoCo's hfield stands on a base of depth size[3] (at least some positive depth); rtrigid's
has none, its bottom at its lowest height: MuJoCo's base is made 1e-9 m deep here, so the two
solids agree to 1e-9 m.  A ray that starts inside the terrain and leaves it through the
bottom meets, in MuJoCo, the top of the base box (normal up, inside the solid); rtrigid meets
the bottom (normal down) at the same distance, so only there the normals differ."""
import numpy as np
import pytest

import rtrigid as rt

from .mujoco_scenes import random_rotation

mujoco = pytest.importorskip("mujoco")
BASE = 1e-9


def _terrain(seed, nx=9, ny=6, size=(1.3, 0.8), top=0.5):
    """A random heightfield at a random pose: the Simulation (the terrain its geom 0, a ball
    on a body far away), MuJoCo's model and data of the same hfield, the heights, the pose
    (pos, rotation) and the rng."""
    rng = np.random.default_rng(seed)
    data = rng.uniform(0.0, 1.0, (ny, nx)).astype(np.float32)
    data.flat[rng.choice(data.size, 2, replace=False)] = (0.0, 1.0)   # MuJoCo keeps them
    heights = data.astype(float) * top
    q, R = random_rotation(rng)
    q = q if rng.uniform() < 0.7 else np.array([1.0, 0.0, 0.0, 0.0])
    R = rt.geoms.quat_matrix(q)
    pos = rng.uniform(-0.5, 0.5, 3)
    m = rt.Model(gravity=(0, 0, 0))
    m.add_geom(None, "heightfield", heights=heights, size=size, pos=pos, quat=q)
    ball = m.add_body("ball", 1.0, (0.01,) * 3)
    m.add_geom(ball, "sphere", radius=0.05, contype=2, conaffinity=2)
    sim = rt.Simulation(m, "nullspace_rk4", 1e-3)
    sim.set_position(ball, (50.0, 0.0, 0.0))
    fmt = " ".join
    xml = (f'<mujoco><asset><hfield name="h" nrow="{ny}" ncol="{nx}" size="{size[0]:.17g} '
           f'{size[1]:.17g} {top:.17g} {BASE:.17g}" elevation="'
           + fmt(f"{x:.9g}" for x in data[::-1].ravel())   # the file's first row: max y
           + '"/></asset><worldbody>'
           f'<geom type="hfield" hfield="h" pos="{fmt(f"{x:.17g}" for x in pos)}" '
           f'quat="{fmt(f"{x:.17g}" for x in q)}"/></worldbody></mujoco>')
    model = mujoco.MjModel.from_xml_string(xml)
    mdata = mujoco.MjData(model)
    mujoco.mj_forward(model, mdata)
    assert np.array_equal(model.hfield_data.reshape(ny, nx), data)
    return sim, model, mdata, heights, (pos, R), rng


def _rays(rng, n, size, top, pose):
    """n rays of each class in the terrain's frame, then to the world: (origins, unit
    directions, class names)."""
    sx, sy = size
    at = np.column_stack([rng.uniform(-1.1 * sx, 1.1 * sx, n), rng.uniform(-1.1 * sy, 1.1 * sy, n),
                          rng.uniform(-0.1, 1.1 * top, n)])
    o, names = [], []
    # from above, down onto the footprint
    o.append(at + np.column_stack([rng.normal(0, 0.5, (n, 2)), rng.uniform(1.0, 3.0, n)]))
    # grazing: nearly level, through the terrain's height band
    flat = rng.normal(size=(n, 3)) * [1.0, 1.0, 0.03]
    o.append(at - flat / np.linalg.norm(flat, axis=1)[:, None] * rng.uniform(1.0, 3.0, (n, 1)))
    # from the sides: outside the footprint, from below the bottom up to above the top
    a = rng.uniform(0, 2 * np.pi, n)
    o.append(np.column_stack([2.5 * sx * np.cos(a), 2.5 * sy * np.sin(a),
                              rng.uniform(-0.3, 1.2 * top, n)]))
    # from below
    o.append(at * [1, 1, 0] + np.column_stack([rng.normal(0, 0.5, (n, 2)),
                                               -rng.uniform(0.2, 2.0, n)]))
    # from inside: points under the surface (kept where they are), any direction
    o.append(np.column_stack([rng.uniform(-sx, sx, n), rng.uniform(-sy, sy, n),
                              rng.uniform(0.0, top, n)]))
    origins = np.vstack(o)
    aims = np.vstack([at] * 4)
    d = np.vstack([aims - origins[:4 * n], rng.normal(size=(n, 3))])
    d /= np.linalg.norm(d, axis=1)[:, None]
    names = np.repeat(["above", "grazing", "sides", "below", "inside"], n)
    pos, R = pose
    return origins @ R.T + pos, d @ R.T, names


def _mujoco_ray(model, data, o, d):
    gid, normal = np.zeros(1, np.int32), np.zeros(3)
    t = mujoco.mj_ray(model, data, o, d, None, 1, -1, gid, normal)
    return t, normal


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_rays_onto_terrain_agree_with_mujoco(seed):
    sim, model, data, heights, pose, rng = _terrain(seed)
    size = (1.3, 0.8)
    origins, dirs, names = _rays(rng, 600, size, 0.5, pose)
    dist = sim.raycast_many(origins, dirs)
    local = (origins - pose[0]) @ pose[1]
    hits = {}
    for i in range(len(origins)):
        ref, normal = _mujoco_ray(model, data, origins[i], dirs[i])
        if ref < 0.0:
            assert dist[i] == np.inf, (i, names[i], dist[i])
            continue
        assert abs(dist[i] - ref) <= 1e-6, (i, names[i], dist[i], ref)
        hits[names[i]] = hits.get(names[i], 0) + 1
        hit = sim.raycast(origins[i], dirs[i])
        assert (hit.body, hit.geom, hit.distance) == (None, 0, dist[i])
        assert np.allclose(hit.point, origins[i] + ref * dirs[i], atol=1e-6)
        inside = np.all(abs(local[i, :2]) < size) and local[i, 2] > 0.0
        bottom = abs((local[i] + ref * dirs[i] @ pose[1])[2]) < 1e-6
        if inside and bottom:   # MuJoCo: the base box's top, inside the solid (the docstring)
            assert np.allclose(hit.normal, -normal, atol=1e-9), i
            assert np.allclose(hit.normal @ pose[1], (0, 0, -1), atol=1e-9), i
        else:
            assert np.linalg.norm(hit.normal - normal) <= 1e-6, (i, names[i], hit.normal,
                                                                 normal)
    assert all(hits.get(k, 0) > 100 for k in ("above", "sides", "below", "inside")), hits
    assert hits.get("grazing", 0) > 50, hits


def test_raycast_many_on_terrain_is_raycast_one_by_one_and_keeps_max_distance():
    sim, model, data, heights, pose, rng = _terrain(7, nx=17, ny=23)
    origins, dirs, _ = _rays(rng, 300, (1.3, 0.8), 0.5, pose)
    dirs = dirs * rng.uniform(0.5, 2.0, (len(dirs), 1))   # any length
    dist = sim.raycast_many(origins, dirs)
    assert np.isfinite(dist).sum() > 500
    for i in range(len(origins)):
        hit = sim.raycast(origins[i], dirs[i])
        assert (hit is None and dist[i] == np.inf) or hit.distance == dist[i], i
    near = sim.raycast_many(origins, dirs, max_distance=0.7)
    assert np.array_equal(near, np.where(dist <= 0.7, dist, np.inf))


def test_a_range_finder_and_a_body_see_terrain_and_the_nearer_wins():
    m = rt.Model(gravity=(0, 0, 0))
    heights = np.zeros((5, 5))
    heights[2, 2] = 0.4   # a peak at the centre
    m.add_geom(None, "heightfield", heights=heights, size=(2.0, 2.0), pos=(0, 0, 0.1))
    drone = m.add_body("drone", 1.0, (0.01,) * 3)
    m.add_geom(drone, "sphere", radius=0.05, contype=2, conaffinity=2)
    ball = m.add_body("ball", 1.0, (0.01,) * 3)
    m.add_geom(ball, "sphere", radius=0.05, contype=4, conaffinity=4)
    sim = rt.Simulation(m, "nullspace_rk4", 1e-3)
    sim.set_position(drone, (0.0, 0.0, 2.0))
    sim.set_position(ball, (5.0, 0.0, 0.0))
    # the drone's own sphere not counted: the peak, 2 - 0.5 below
    assert sim.rangefinder(drone, axis_body=(0, 0, -1)) == pytest.approx(1.5, abs=1e-12)
    # halfway down the peak's slope (1 m wide): 0.2 + 0.1 high
    assert sim.rangefinder(drone, (0.5, 0, 0), (0, 0, -1)) == pytest.approx(1.7, abs=1e-12)
    assert sim.rangefinder(drone, axis_body=(0, 0, -1), max_distance=1.0) == np.inf
    sim.set_position(drone, (-5.0, 0.0, 2.0))
    sim.set_position(ball, (0.0, 0.0, 1.0))   # now the ball is nearer
    hit = sim.raycast((0, 0, 3), (0, 0, -1))
    assert hit.body == ball and hit.distance == pytest.approx(1.95)
    sim.set_position(ball, (0.5, 0.25, 0.2))   # inside the peak: the terrain is met first
    hit = sim.raycast((0.5, 0.25, 3), (0, 0, -1))
    assert (hit.body, hit.geom) == (None, 0) and hit.distance == pytest.approx(2.7)
    assert np.allclose(hit.normal, np.array([0.4, 0, 1]) / np.sqrt(1.16))
    assert sim.raycast((0.5, 0.25, 3), (0, 0, 1)) is None
