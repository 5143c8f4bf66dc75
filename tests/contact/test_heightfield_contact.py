"""Heightfields against convex geoms (rtrigid.contact.fieldcontact), through the public API: a
box resting on flat terrain as on a ground, a ball rolling down a sloped field at 5/7 g sin(a),
the depth and normal of every convex kind pressed into bumpy terrain against MuJoCo, and a
pile of mixed geoms dropped on bumpy terrain that nothing falls through.

MuJoCo is the reference for depth and normal.  Its hfield contacts (one per prism, each the
penetration of the geom into the triangle extruded down to the base, the normal of a sphere,
capsule, cylinder or ellipsoid then recomputed from that geom's surface at the contact point)
are compared for the curved kinds: the deepest contact's depth, and its normal where MuJoCo's
is the normal of the triangle under the point (a face contact; over an edge MuJoCo keeps the
edge's normal even where the neighbouring triangle's face faces the geom more, which rtrigid
turns to that face's).  An ellipsoid's normal is left out: MuJoCo recomputes it from the
midpoint of the overlap by an iteration stopped at 1e-6, about a degree off the face's.  For
boxes and hulls MuJoCo's hfield contacts are not penetration depths (its multi-contact search
reports a deepest contact shallower than the geom's deepest corner), so the reference there is
``mj_geomDistance`` of the geom against each triangle's prism given to MuJoCo as a mesh: the
deepest of those penetrations, its normal the witness segment's.
"""
import numpy as np
import pytest

import rtrigid as rt
from tests.helpers import assert_batch_is_singles

from .mujoco_scenes import random_hull_points, random_rotation

DT = 1e-3


def _box_model(terrain):
    """A 0.2 m box of 1 kg on flat terrain: a heightfield (9 x 9 points, 0.25 m cells, the box
    across four of them) or a ground plane."""
    m = rt.Model()
    if terrain:
        m.add_geom(None, "heightfield", heights=np.zeros((9, 9)), size=(1.0, 1.0))
    else:
        m.add_ground()
    box = m.add_body("box", 1.0, (0.02 / 3,) * 3)
    m.add_geom(box, "box", half_extents=(0.1, 0.1, 0.1))
    return m, box


@pytest.mark.parametrize("integrator", ["nullspace_rk4", "energy_momentum",
                                        "semi_implicit_euler"])
def test_a_box_rests_on_flat_terrain_as_on_a_ground(integrator):
    """Dropped 5 mm, the box comes to rest on the heightfield where it rests on a ground plane
    (within 1e-6 m), flat and without sliding, on four contacts at its corners."""
    rest = {}
    for terrain in (True, False):
        m, box = _box_model(terrain)
        sim = rt.Simulation(m, integrator, DT)
        sim.set_position(box, (0.25, 0.25, 0.105))
        sim.step(1000)
        x, q = sim.pose(box)
        rest[terrain] = x
        assert np.hypot(x[0] - 0.25, x[1] - 0.25) < 1e-6, (terrain, x)
        assert abs(q[0]) > 1.0 - 1e-9, (terrain, q)
        if terrain:
            contacts = sim.contacts()
            assert len(contacts) == 4, contacts
            corners = np.sort(np.array([c["point"][:2] for c in contacts]), axis=0)
            assert np.allclose(corners[[0, -1]], [[0.15, 0.15], [0.35, 0.35]], atol=1e-6)
            for c in contacts:
                assert np.allclose(c["normal"], (0, 0, 1)) and c["other_geom"] == 0
    assert abs(rest[True][2] - rest[False][2]) < 1e-6, rest
    assert abs(rest[True][2] - 0.1) < 1e-4


def test_a_ball_rolls_down_a_sloped_field_at_five_sevenths_g_sin():
    """A ball rolling without slipping down a heightfield sloped at 10 degrees (11 x 11
    points, so it crosses cell edges and diagonals) accelerates at 5/7 g sin(10 deg) within
    2 %, stays on the surface and on its line."""
    theta, size, r = np.radians(10.0), 2.0, 0.1
    xs = np.linspace(-size, size, 11)
    heights = np.tile(np.tan(theta) * (size - xs), (11, 1))  # falling along +x
    m = rt.Model()
    m.add_geom(None, "heightfield", heights=heights, size=(size, size), friction=1.0)
    ball = m.add_body("ball", 1.0, (0.4 * r * r,) * 3)
    m.add_geom(ball, "sphere", radius=r, friction=1.0)
    sim = rt.Simulation(m, "nullspace_rk4", DT)
    x0 = -1.5
    sim.set_position(ball, (x0, 0.03, np.tan(theta) * (size - x0) + r / np.cos(theta)))
    t, s, z = [], [], []
    for _ in range(1500):
        sim.step(1)
        x, _ = sim.pose(ball)
        t.append(sim.t)
        s.append((x[0] - x0) / np.cos(theta))
        z.append(x[2] - np.tan(theta) * (size - x[0]) - r / np.cos(theta))
        assert abs(x[1] - 0.03) < 5e-4
    a = 2.0 * np.polyfit(t, s, 2)[0]
    expected = 5.0 / 7.0 * 9.81 * np.sin(theta)
    assert abs(a / expected - 1.0) < 0.02, (a, expected)
    assert np.max(np.abs(z)) < 1e-4


def test_on_a_turned_field_a_ball_rolls_and_a_box_holds():
    """A flat heightfield turned 15 degrees about x (its pose, not its heights): a ball rolls
    down it at 5/7 g sin(15 deg) within 2 % on its surface, and a box resting on it with
    friction 1 (tan 15 deg = 0.27) stays put (within 1e-5 m in a second)."""
    th, r = np.radians(15.0), 0.1
    q = np.array([np.cos(th / 2), np.sin(th / 2), 0.0, 0.0])
    origin = np.array([0.3, 0.1, 0.5])
    m = rt.Model()
    m.add_geom(None, "heightfield", heights=np.zeros((7, 7)), size=(2.0, 2.0), quat=q,
               pos=origin, friction=1.0)
    ball = m.add_body("ball", 1.0, (0.4 * r * r,) * 3)
    m.add_geom(ball, "sphere", radius=r, friction=1.0)
    box = m.add_body("box", 1.0, (0.02 / 3,) * 3)
    m.add_geom(box, "box", half_extents=(0.1, 0.1, 0.1), friction=1.0)
    sim = rt.Simulation(m, "nullspace_rk4", DT)
    R = rt.geoms.quat_matrix(q)
    up = R[:, 2]
    start = origin + R @ (0.5, 1.2, 0.0) + r * up
    sim.set_position(ball, start)
    rest = origin + R @ (-0.8, 0.5, 0.0) + 0.1 * up
    sim.set_position(box, rest)
    sim.set_orientation(box, q)
    t, s = [], []
    for _ in range(1000):
        sim.step(1)
        x, _ = sim.pose(ball)
        t.append(sim.t)
        s.append(np.linalg.norm(x - start))
        assert abs((x - origin) @ up - r) < 1e-4
    a, expected = 2.0 * np.polyfit(t, s, 2)[0], 5.0 / 7.0 * 9.81 * np.sin(th)
    assert abs(a / expected - 1.0) < 0.02, (a, expected)
    assert np.linalg.norm(sim.pose(box)[0] - rest) < 1e-5


# ---------------------------------------------------------------- against MuJoCo

NX, NY, SX, SY, TOP, BASE = 9, 7, 0.6, 0.45, 0.12, 0.5


def _bumpy(seed):
    rng = np.random.default_rng(seed)
    data = rng.uniform(0.0, 1.0, (NY, NX)).astype(np.float32)
    data.flat[rng.choice(data.size, 2, replace=False)] = (0.0, 1.0)   # MuJoCo keeps them
    return data, data.astype(float) * TOP, rng


def _params(kind, rng):
    if kind == "sphere":
        return {"radius": rng.uniform(0.04, 0.09)}
    if kind in ("capsule", "cylinder"):
        return {"radius": rng.uniform(0.03, 0.06), "half_length": rng.uniform(0.03, 0.08)}
    if kind == "box":
        return {"half_extents": rng.uniform(0.03, 0.08, 3)}
    if kind == "ellipsoid":
        return {"radii": rng.uniform(0.03, 0.08, 3)}
    return {"vertices": 2.0 * random_hull_points(rng)}


def _fmt(values):
    return " ".join(f"{v:.17g}" for v in np.ravel(values))


def _prisms(heights):
    """Every triangle of the grid as a prism down to MuJoCo's base: (6, 3) points each."""
    xs, ys = np.linspace(-SX, SX, NX), np.linspace(-SY, SY, NY)
    out = []
    for r in range(NY - 1):
        for c in range(NX - 1):
            for tri in (((c, r), (c + 1, r), (c + 1, r + 1)), ((c, r), (c + 1, r + 1), (c, r + 1))):
                top = [(xs[i], ys[j], heights[j, i]) for i, j in tri]
                out.append(np.array(top + [(x, y, -BASE) for x, y, _ in top]))
    return out


def _mujoco(mujoco, kind, params, data, prisms):
    """MuJoCo's model of the hfield (geom 0), for boxes and hulls each prism as a mesh that
    collides with nothing (geoms 1 to n), and the geom on a free body (the last)."""
    meshes, extra = "", ""
    if kind in ("box", "convex"):
        v = params["vertices"] if kind == "convex" else np.array(
            [[i, j, k] for i in (-1, 1) for j in (-1, 1) for k in (-1, 1)]) * params["half_extents"]
        meshes = f'<mesh name="g" vertex="{_fmt(v)}"/>'
        geom = 'type="mesh" mesh="g"'
        for i, p in enumerate(prisms):
            meshes += f'<mesh name="p{i}" vertex="{_fmt(p)}"/>'
            extra += f'<geom type="mesh" mesh="p{i}" contype="0" conaffinity="0"/>'
    elif kind == "sphere":
        geom = f'type="sphere" size="{params["radius"]:.17g}"'
    elif kind == "ellipsoid":
        geom = f'type="ellipsoid" size="{_fmt(params["radii"])}"'
    else:
        geom = f'type="{kind}" size="{params["radius"]:.17g} {params["half_length"]:.17g}"'
    xml = (f'<mujoco><option><flag gravity="disable"/></option><asset>{meshes}'
           f'<hfield name="h" nrow="{NY}" ncol="{NX}" size="{SX} {SY} {TOP} {BASE}" '
           f'elevation="{" ".join(f"{x:.9g}" for x in data[::-1].ravel())}"/></asset>'
           '<worldbody><geom type="hfield" hfield="h"/>'
           f'<body><freejoint/><geom {geom}/></body>{extra}</worldbody></mujoco>')
    model = mujoco.MjModel.from_xml_string(xml)
    return model, mujoco.MjData(model)


def _reference(mujoco, model, d, kind, prisms):
    """MuJoCo's deepest contact of the geom with the terrain: (depth, normal, point, whether
    the normal is checked)."""
    if kind in ("box", "convex"):
        best = (-np.inf, None)
        for i in range(len(prisms)):
            fromto = np.zeros(6)
            dist = mujoco.mj_geomDistance(model, d, model.ngeom - 1, 1 + i, 0.05, fromto)
            seg = fromto[:3] - fromto[3:]  # from the prism's point to the geom's
            if -dist > best[0] and np.linalg.norm(seg) > 0.0:
                best = (-dist, seg / np.linalg.norm(seg) * np.sign(dist), fromto[3:].copy())
        return (*best, True)
    c = min(d.contact[:d.ncon], key=lambda c: c.dist)
    return -c.dist, c.frame[:3].copy(), c.pos.copy(), kind != "ellipsoid"


def _face_normals(heights, x, y):
    """The normals of the two triangles of the cell under (x, y)."""
    cx, cy = 2 * SX / (NX - 1), 2 * SY / (NY - 1)
    c, r = min(int((x + SX) // cx), NX - 2), min(int((y + SY) // cy), NY - 2)

    def p(i, j):
        return np.array([i * cx - SX, j * cy - SY, heights[j, i]])

    out = []
    for a, b, e in ((p(c, r), p(c + 1, r), p(c + 1, r + 1)), (p(c, r), p(c + 1, r + 1), p(c, r + 1))):
        n = np.cross(b - a, e - a)
        out.append(n / np.linalg.norm(n))
    return out


@pytest.mark.parametrize("kind", ["sphere", "capsule", "cylinder", "ellipsoid", "box", "convex"])
def test_depth_and_normal_in_bumpy_terrain_agree_with_mujoco(kind):
    """Each geom, at a random pose over random terrain, pushed 8 mm below where it first
    touches: the deepest contact's depth within 1e-5 m of MuJoCo's and its normal within 1e-3
    rad where MuJoCo's deepest contact is a face contact (its normal the triangle's), else its
    depth within the 5 % by which a face's depth may exceed the least translation (see the
    module's docstring for what MuJoCo's reference is, kind by kind)."""
    mujoco = pytest.importorskip("mujoco")
    data, heights, rng = _bumpy(["sphere", "capsule", "cylinder", "ellipsoid", "box",
                                 "convex"].index(kind))
    prisms = _prisms(heights) if kind in ("box", "convex") else []
    checked = 0
    for case in range(8):
        params = _params(kind, rng)
        q, _ = random_rotation(rng)
        xy = rng.uniform((-SX + 0.12, -SY + 0.12), (SX - 0.12, SY - 0.12))
        model, d = _mujoco(mujoco, kind, params, data, prisms)

        def at(z):
            d.qpos[:3] = (*xy, z)
            d.qpos[3:7] = q
            mujoco.mj_forward(model, d)
            return d.ncon > 0 and min(c.dist for c in d.contact[:d.ncon]) < 0.0

        lo, hi = -0.2, 0.5
        for _ in range(34):
            lo, hi = ((0.5 * (lo + hi), hi) if at(0.5 * (lo + hi)) else (lo, 0.5 * (lo + hi)))
        at(hi - 0.008)
        depth, normal, point, check_normal = _reference(mujoco, model, d, kind, prisms)
        m = rt.Model(gravity=(0, 0, 0))
        m.add_geom(None, "heightfield", heights=heights, size=(SX, SY))
        body = m.add_body("g", 1.0, (0.01,) * 3)
        if kind in ("box", "convex"):  # the mesh MuJoCo made, at MuJoCo's geom frame
            g = model.ngeom - 1
            adr, n = model.mesh_vertadr[model.geom_dataid[g]], model.mesh_vertnum[model.geom_dataid[g]]
            m.add_geom(body, "convex", vertices=model.mesh_vert[adr:adr + n].astype(float))
            pos, quat = d.geom_xpos[g].copy(), np.zeros(4)
            mujoco.mju_mat2Quat(quat, d.geom_xmat[g])
        else:
            m.add_geom(body, kind, **params)
            pos, quat = np.array([*xy, hi - 0.008]), q
        sim = rt.Simulation(m, "nullspace_rk4", DT)
        sim.set_position(body, pos)
        sim.set_orientation(body, quat)
        sim.step(1)  # no gravity, at rest: the contacts of this pose
        contacts = sim.contacts()
        ours = max(c["depth"] for c in contacts)
        where = f"{kind} case {case}: ours {ours!r}, MuJoCo {depth!r}"
        # never shallower; deeper by at most the 5 % by which a face's depth along its
        # normal may exceed the least translation (clipping.manifold)
        assert depth - 1e-5 < ours < 1.05 * depth + 1e-5, where
        face = any(np.dot(n, normal) > np.cos(1e-3) for n in _face_normals(heights, *point[:2]))
        if face and check_normal:
            checked += 1
            assert abs(ours - depth) < 1e-5, where
            angles = [np.arccos(min(1.0, np.dot(c["normal"], normal))) for c in contacts
                      if c["depth"] > depth - 1e-5]
            assert min(angles) < 1e-3, (where, angles)
    assert kind == "ellipsoid" or checked >= 2, checked


# ---------------------------------------------------------------- nothing falls through


@pytest.mark.parametrize("integrator", ["nullspace_rk4", "energy_momentum",
                                        "semi_implicit_euler"])
def test_a_pile_dropped_on_bumpy_terrain_stays_on_it(integrator):
    """Seven geoms, one of each convex kind, dropped from up to 0.3 m onto bumpy terrain (16 x 16
    cells, 8 cm high) at 1/240 s: no contact is ever deeper than 2 mm beyond what one step's
    free flight carries a geom into the terrain before its contact is found (its speed times
    the step: up to 1 cm at the impacts), and after 3 s every geom lies on the terrain, over
    its footprint."""
    rng = np.random.default_rng(5)
    n = 17
    heights = 0.08 * rng.uniform(0.0, 1.0, (n, n))
    m = rt.Model()
    m.add_geom(None, "heightfield", heights=heights, size=(1.0, 1.0), friction=0.8)
    kinds = [("box", {"half_extents": (0.08, 0.06, 0.05)}), ("sphere", {"radius": 0.07}),
             ("capsule", {"radius": 0.05, "half_length": 0.08}),
             ("cylinder", {"radius": 0.07, "half_length": 0.04}),
             ("ellipsoid", {"radii": (0.09, 0.06, 0.05)}),
             ("convex", {"vertices": 2.5 * random_hull_points(rng)}),
             ("cone", {"radius": 0.07, "height": 0.12})]
    bodies = []
    for i, (kind, params) in enumerate(kinds):
        b = m.add_body(f"b{i}", 1.0, (0.004, 0.005, 0.006))
        m.add_geom(b, kind, friction=0.8, **params)
        bodies.append(b)
    dt = 1.0 / 240.0
    sim = rt.Simulation(m, integrator, dt)
    for i, b in enumerate(bodies):
        sim.set_position(b, (0.25 * (i % 3) - 0.25, 0.3 * (i // 3) - 0.15, 0.3 + 0.04 * i))
        sim.set_orientation(b, random_rotation(rng)[0])
    late = 0.0
    for step in range(720):
        flight = max(np.linalg.norm(sim.velocity(b)[0]) for b in bodies) * dt
        sim.step(1)
        depth = max([0.0] + [c["depth"] for c in sim.contacts()])
        assert depth < 0.002 + flight, (step, depth, flight)
        if step >= 240:
            late = max(late, depth)
    assert late < 0.001, late  # once landed: resting and rolling contacts 0.1-0.4 mm deep
    for b in bodies:
        x, _ = sim.pose(b)
        assert abs(x[0]) < 1.0 and abs(x[1]) < 1.0 and 0.04 < x[2] < 0.2, (b, x)


def test_a_batch_on_terrain_is_its_single_simulations():
    """Copies of a model with a heightfield stepped in a Batch (one and two threads: each copy
    its own scratch) are their single simulations, bit for bit."""
    heights = 0.05 * np.random.default_rng(1).uniform(0.0, 1.0, (9, 9))

    def model():
        m = rt.Model()
        m.add_geom(None, "heightfield", heights=heights, size=(1.0, 1.0))
        b = m.add_body("c", 1.0, (0.004, 0.004, 0.005))
        m.add_geom(b, "cylinder", radius=0.1, half_length=0.05, friction=0.5)
        return m

    assert_batch_is_singles(model, "c", [(0.1 * i, -0.05 * i, 0.2) for i in range(3)], 300, DT)
