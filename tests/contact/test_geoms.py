"""Geoms (Model.add_geom): any number per body with their own pose, static scenery, the
filter bits, exclusions and the parent rule, meshes as convex pieces, mass properties, and
the checks on bad input."""
import os
import warnings

import numpy as np
import pytest

import rtrigid as rt
from rtrigid.geoms import hull

G = 9.81
BOX = {"half_extents": (0.1, 0.1, 0.1)}


def _box_inertia(mass, half):
    a, b, c = (2.0 * np.asarray(half, float)) ** 2
    return mass / 12.0 * np.array([b + c, a + c, a + b])


def _pybullet_file(name):
    pybullet_data = pytest.importorskip("pybullet_data")
    return os.path.join(pybullet_data.getDataPath(), name)


# -- the records and their checks ----------------------------------------------------------------
def test_add_geom_returns_handles_into_geoms_after_the_shape_geoms():
    m = rt.Model()
    a = m.add_body("a", 1.0, (1, 1, 1), shape=("sphere", {"radius": 0.1}))
    assert m.add_geom(a, "box", half_extents=(0.1, 0.2, 0.3), pos=(0, 0, 0.1), friction=0.8,
                      contype=3, conaffinity=2) == 1
    assert m.add_geom(None, "capsule", radius=0.1, half_length=0.3, quat=(2, 0, 0, 0)) == 2
    g = m.geoms
    assert [x.kind for x in g] == ["sphere", "box", "capsule"]
    assert [x.body for x in g] == [0, 0, None] and g[0].source == "shape"
    assert g[1].friction == 0.8 and (g[1].contype, g[1].conaffinity) == (3, 2)
    assert np.array_equal(g[2].quat, [1, 0, 0, 0])
    with pytest.raises(ValueError):  # read-only records
        g[1].pos[0] = 1.0
    with pytest.raises(TypeError):
        g[1].params["half_extents"] = 1.0


def test_a_convex_geom_keeps_the_hull_of_its_points_its_faces_and_planes():
    rng = np.random.default_rng(1)
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
    points = np.vstack([0.1 * corners, 0.05 * rng.uniform(-1, 1, (30, 3))])  # inside ones
    m = rt.Model()
    b = m.add_body("b", 1.0, (1, 1, 1))
    handle = m.add_geom(b, "convex", vertices=points)
    g = m.geoms[handle]
    assert len(g.vertices) == 8 and np.allclose(np.sort(np.abs(g.vertices).ravel()), 0.1)
    assert len(g.planes) == 6 and len(g.faces) == 12
    assert np.allclose(np.abs(g.planes[:, :3]).sum(axis=1), 1.0)
    assert np.allclose(g.planes[:, 3], 0.1)
    # outward triangles: each normal agrees with its face plane's
    tri = g.vertices[g.faces]
    n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    assert np.all(np.einsum("ij,ij->i", n, tri[:, 0]) > 0.0)


def test_a_mesh_file_becomes_one_convex_geom_per_object():
    m = rt.Model()
    duck = m.add_body("duck", 1.0, (1, 1, 1))
    handles = m.add_geom(duck, "mesh", file=_pybullet_file("duck_vhacd.obj"), scale=0.1)
    assert handles == (0, 1, 2, 3, 4)
    teddy = m.add_body("teddy", 1.0, (1, 1, 1))
    assert len(m.add_geom(teddy, "mesh", file=_pybullet_file("teddy2_VHACD_CHs.obj"))) == 15
    assert all(g.kind == "mesh" and g.vertices is not None for g in m.geoms)
    assert [g.params["object"] for g in m.geoms[:5]] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("kwargs, field", [
    ({"kind": "torus"}, "kind"),
    ({"kind": "sphere"}, "radius"),
    ({"kind": "sphere", "radius": -1.0}, "radius"),
    ({"kind": "sphere", "radius": 0.1, "height": 1.0}, "height"),
    ({"kind": "box", "half_extents": (0.1, 0.0, 0.1)}, "half_extents"),
    ({"kind": "ellipsoid", "radii": (0.1, 0.1)}, "radii"),
    ({"kind": "sphere", "radius": 0.1, "pos": (0, np.nan, 0)}, "pos"),
    ({"kind": "sphere", "radius": 0.1, "quat": (0, 0, 0, 0)}, "quat"),
    ({"kind": "sphere", "radius": 0.1, "friction": -1}, "friction"),
    ({"kind": "sphere", "radius": 0.1, "restitution": 2}, "restitution"),
    ({"kind": "sphere", "radius": 0.1, "contype": -1}, "contype"),
    ({"kind": "sphere", "radius": 0.1, "conaffinity": 1.5}, "conaffinity"),
    ({"kind": "sphere", "radius": 0.1, "rolling_friction": -1}, "rolling_friction"),
    ({"kind": "convex", "vertices": np.zeros((3, 3))}, "vertices"),
    ({"kind": "convex", "vertices": [[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]]}, "vertices"),
    ({"kind": "convex", "vertices": np.full((4, 3), np.inf)}, "vertices"),
    ({"kind": "heightfield", "heights": np.zeros((3, 3)), "size": (1, 1)}, "body"),
    ({"kind": "mesh", "file": "/no/such/file.obj"}, "file: /no/such/file.obj"),
    ({"kind": "mesh", "file": "x.obj", "scale": 0}, "scale"),
])
def test_add_geom_refuses_bad_input_naming_the_field_and_adds_nothing(kwargs, field):
    m = rt.Model()
    b = m.add_body("b", 1.0, (1, 1, 1), shape=("sphere", {"radius": 0.1}))
    kind = kwargs.pop("kind")
    with pytest.raises(ValueError, match=f"^{field}"):
        m.add_geom(b, kind, **kwargs)
    assert len(m.geoms) == 1


def test_bad_mesh_files_name_the_file_and_the_geom(tmp_path):
    m = rt.Model()
    b = m.add_body("b", 1.0, (1, 1, 1))
    bad = {"garbage.obj": "this is not a mesh\n", "empty.obj": "",
           "flat.obj": "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 1 1 0\nf 1 2 3\nf 2 4 3\n",
           "nan.obj": "v 0 0 0\nv 1 0 0\nv 0 1 0\nv nan 0 1\nf 1 2 3\nf 1 2 4\n"}
    for name, text in bad.items():
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(ValueError, match=f"^file: {path}.*geom 0 on body 'b'"):
            m.add_geom(b, "mesh", file=path)
    assert m.geoms == ()


def test_exclude_contacts_checks_its_bodies():
    m = rt.Model()
    a = m.add_body("a", 1.0, (1, 1, 1))
    with pytest.raises(ValueError, match="^body_b"):
        m.exclude_contacts(a, "nobody")
    with pytest.raises(ValueError, match="^body_b"):
        m.exclude_contacts(a, a)
    with pytest.raises(ValueError, match="^body_a"):
        m.exclude_contacts(5, a)


# -- mass properties ------------------------------------------------------------------------------
def test_mass_properties_of_primitives_are_their_closed_forms():
    rho = 500.0
    props = rt.mass_properties([("box", {"half_extents": (0.1, 0.2, 0.3)}, (1, 2, 3),
                                 (1, 0, 0, 0))], density=rho)
    m = rho * 0.2 * 0.4 * 0.6
    assert props.mass == pytest.approx(m)
    assert np.allclose(props.com, (1, 2, 3))
    assert np.allclose(props.moments, sorted(_box_inertia(m, (0.1, 0.2, 0.3))))
    r = 0.1
    ball = rt.mass_properties([("sphere", {"radius": r}, (0, 0, 0), (1, 0, 0, 0))])
    assert ball.mass == pytest.approx(1000 * 4 / 3 * np.pi * r ** 3)
    assert np.allclose(ball.moments, 0.4 * ball.mass * r * r)


@pytest.mark.parametrize("kind, params, mesh", [
    ("capsule", {"radius": 0.05, "half_length": 0.1}, "capsule"),
    ("cylinder", {"radius": 0.05, "half_length": 0.1}, "cylinder"),
    ("cone", {"radius": 0.05, "height": 0.2}, "cone"),
    ("ellipsoid", {"radii": (0.05, 0.08, 0.1)}, "ellipsoid"),
])
def test_mass_properties_agree_with_trimesh_on_a_fine_mesh(kind, params, mesh):
    trimesh = pytest.importorskip("trimesh")
    c = trimesh.creation
    if mesh == "capsule":
        t = c.capsule(height=0.2, radius=0.05, count=[128, 128])
    elif mesh == "cylinder":
        t = c.cylinder(radius=0.05, height=0.2, sections=512)
    elif mesh == "cone":
        t = c.cone(radius=0.05, height=0.2, sections=512)
        t.apply_translation((0, 0, -0.05))  # apex at -3 h / 4, as the geom
    else:
        t = c.icosphere(subdivisions=6)
        t.apply_scale((0.05, 0.08, 0.1))
    t.density = 1000.0
    props = rt.mass_properties([(kind, params, (0, 0, 0), (1, 0, 0, 0))])
    assert props.mass == pytest.approx(t.mass, rel=2e-3)
    assert np.allclose(props.com, t.center_mass, atol=1e-4)
    want = np.sort(np.linalg.eigvalsh(t.moment_inertia))
    assert np.allclose(props.moments, want, rtol=5e-3)


def test_mass_properties_of_a_compound_body_agree_with_trimesh():
    """Two boxes and a hull turned and apart: the union's mass, centre and principal
    moments and axes, against trimesh on the same solids."""
    trimesh = pytest.importorskip("trimesh")
    rng = np.random.default_rng(3)
    points = rng.normal(size=(40, 3)) * (0.05, 0.03, 0.04)
    q = np.array([np.cos(0.3), np.sin(0.3) / np.sqrt(2), np.sin(0.3) / np.sqrt(2), 0.0])
    pieces = [("box", {"half_extents": (0.1, 0.05, 0.02)}, (0.3, 0, 0), q),
              ("box", {"half_extents": (0.02, 0.05, 0.1)}, (-0.2, 0.1, 0), (1, 0, 0, 0)),
              ("convex", {"vertices": points}, (0, 0, 0.3), q)]
    props = rt.mass_properties(pieces, density=800.0)
    from rtrigid.geoms import quat_matrix
    meshes = []
    for kind, p, pos, quat in pieces:
        mesh = (trimesh.creation.box(extents=2 * np.asarray(p["half_extents"])) if kind == "box"
                else trimesh.convex.convex_hull(p["vertices"]))
        t = np.eye(4)
        t[:3, :3], t[:3, 3] = quat_matrix(np.asarray(quat) / np.linalg.norm(quat)), pos
        mesh.apply_transform(t)
        meshes.append(mesh)
    union = trimesh.util.concatenate(meshes)
    union.density = 800.0
    assert props.mass == pytest.approx(union.mass, rel=1e-9)
    assert np.allclose(props.com, union.center_mass, atol=1e-12)
    moments, axes = np.linalg.eigh(union.moment_inertia)
    assert np.allclose(props.moments, moments, rtol=1e-9)
    assert np.allclose(np.abs(np.sum(props.axes * axes, axis=0)), 1.0, atol=1e-6)
    assert np.linalg.det(props.axes) == pytest.approx(1.0)


def test_a_hull_of_box_corners_has_the_box_s_mass_properties():
    corners = np.array([[x, y, z] for x in (-0.1, 0.1) for y in (-0.2, 0.2)
                        for z in (-0.3, 0.3)])
    v, f, _ = hull(corners + 1.0, "vertices")
    a = rt.mass_properties([("convex", {"vertices": v}, (0, 0, 0), (1, 0, 0, 0))])
    b = rt.mass_properties([("box", {"half_extents": (0.1, 0.2, 0.3)}, (1, 1, 1),
                             (1, 0, 0, 0))])
    assert a.mass == pytest.approx(b.mass, rel=1e-12)
    assert np.allclose(a.com, b.com) and np.allclose(a.moments, b.moments, rtol=1e-12)


# -- contacts ------------------------------------------------------------------------------------
def _drop(model, integrator="energy_momentum", dt=1 / 240):
    return rt.Simulation(model, integrator, dt)


def _set_pose(sim, body, x, q):
    sim.set_position(body, x)
    sim.set_orientation(body, q)


def test_a_geom_steps_bit_identically_to_the_shape_it_replaces():
    """The same box on the ground, by add_body(shape=) and by add_geom at pos/quat: the
    same steps, bit for bit (a ball touching it too)."""
    def build(as_geom):
        m = rt.Model()
        m.add_ground(normal=(0.1, 0.0, 1.0), friction=0.6)
        half = (0.1, 0.15, 0.05)
        shape = ("box", {"half_extents": half, "offset": (0.0, 0.0, 0.02)})
        b = m.add_body("box", 1.0, _box_inertia(1.0, half), shape=None if as_geom else shape,
                       friction=0.7)
        if as_geom:
            m.add_geom(b, "box", half_extents=half, pos=(0.0, 0.0, 0.02), friction=0.7)
        m.add_body("ball", 0.5, (0.002,) * 3, shape=("sphere", {"radius": 0.1}))
        sim = rt.Simulation(m, "energy_momentum", 1 / 240)
        _set_pose(sim, "box", (0, 0, 0.2), (np.cos(0.2), np.sin(0.2), 0.0, 0.0))
        sim.set_position("ball", (0.05, 0.0, 0.5))
        sim.step(300)
        return sim.x.copy(), sim.q.copy()

    (xa, qa), (xb, qb) = build(False), build(True)
    assert np.array_equal(xa, xb) and np.array_equal(qa, qb)


def test_a_dumbbell_of_three_geoms_rests_on_the_ground_on_its_balls():
    r, half = 0.1, 0.3
    m = rt.Model()
    m.add_ground(friction=0.8)
    b = m.add_body("dumbbell", 2.0, (0.01, 0.1, 0.1))
    m.add_geom(b, "sphere", radius=r, pos=(half, 0, 0))
    m.add_geom(b, "sphere", radius=r, pos=(-half, 0, 0))
    m.add_geom(b, "capsule", radius=0.03, half_length=half, quat=(np.cos(np.pi / 4), 0,
                                                                 np.sin(np.pi / 4), 0))
    sim = _drop(m)
    _set_pose(sim, b, (0, 0, 0.3), (np.cos(0.1), 0.0, np.sin(0.1), 0.0))  # one end first
    sim.step(1200)
    x, q = sim.pose(b)
    assert x[2] == pytest.approx(r, abs=1e-4)
    assert np.linalg.norm(sim.velocity(b)[0]) < 1e-3
    assert sorted({c["geom"] for c in sim.contacts()}) == [0, 1]  # the balls, not the bar


def _ramp_model(theta, mu, static_box=True):
    m = rt.Model()
    half = np.array([0.1, 0.1, 0.1])
    q = (np.cos(theta / 2), 0.0, np.sin(theta / 2), 0.0)  # about y: the slope falls along +x
    if static_box:
        m.add_geom(None, "box", half_extents=(3.0, 1.0, 0.2), quat=q, friction=mu)
    b = m.add_body("crate", 1.0, _box_inertia(1.0, half))
    m.add_geom(b, "box", half_extents=half, friction=mu)
    return m, q, 0.2 + 0.1


@pytest.mark.parametrize("integrator", ["energy_momentum", "semi_implicit_euler"])
def test_a_box_slides_down_a_static_box_ramp_at_g_sin_minus_mu_cos(integrator):
    theta, mu = np.arctan(0.7), 0.5
    m, q, lift = _ramp_model(theta, mu)
    sim = rt.Simulation(m, integrator, 1e-3)
    normal = np.array([np.sin(theta), 0.0, np.cos(theta)])
    _set_pose(sim, "crate", lift * normal + (1e-4 * normal), q)
    sim.step(200)  # settle onto the face
    v0, t0 = sim.velocity("crate")[0].copy(), sim.t
    sim.step(500)
    a = (sim.velocity("crate")[0] - v0) / (sim.t - t0)
    want = G * (np.sin(theta) - mu * np.cos(theta))
    downhill = np.array([np.cos(theta), 0.0, -np.sin(theta)])
    assert np.dot(a, downhill) == pytest.approx(want, rel=0.02)
    assert abs(np.dot(a, normal)) < 0.02 * want


def test_a_box_rests_on_a_static_table_and_the_table_is_reported_as_its_geom():
    m = rt.Model()
    table = m.add_geom(None, "box", half_extents=(0.5, 0.5, 0.05), pos=(0, 0, 0.5))
    b = m.add_body("b", 1.0, _box_inertia(1.0, (0.1, 0.1, 0.1)))
    mine = m.add_geom(b, "box", half_extents=(0.1, 0.1, 0.1))
    sim = _drop(m)
    sim.set_position(b, (0.1, -0.2, 0.7))
    sim.step(720)
    x = sim.pose(b)[0]
    assert x[2] == pytest.approx(0.65, abs=1e-4) and np.allclose(x[:2], (0.1, -0.2))
    c = sim.contacts()
    assert len(c) == 4 and all((k["geom"], k["other_geom"], k["other"]) == (mine, table, None)
                               for k in c)
    assert sum(k["impulse"][2] for k in c) == pytest.approx(G / 240, rel=1e-3)


def _two_balls(**second):
    """Two balls on a collision course without gravity or ground; the second's geom takes
    ``second``."""
    m = rt.Model(gravity=(0, 0, 0))
    a = m.add_body("a", 1.0, (0.004,) * 3)
    b = m.add_body("b", 1.0, (0.004,) * 3)
    m.add_geom(a, "sphere", radius=0.1, restitution=1.0)
    m.add_geom(b, "sphere", radius=0.1, restitution=1.0, **second)
    return m


def _collide(m):
    sim = _drop(m, "nullspace_rk4", 1e-3)
    sim.set_position("a", (-0.5, 0, 0))
    sim.set_position("b", (0.5, 0, 0))
    sim.set_velocity("a", (1.0, 0, 0))
    sim.step(1000)
    return sim


def test_bodies_collide_without_any_ground():
    sim = _collide(_two_balls())
    assert sim.velocity("a")[0] == pytest.approx((0, 0, 0), abs=1e-9)
    assert sim.velocity("b")[0] == pytest.approx((1, 0, 0), abs=1e-9)


@pytest.mark.parametrize("second, touch", [
    ({"contype": 2, "conaffinity": 2}, False),
    ({"contype": 2, "conaffinity": 1}, True),
    ({"contype": 0, "conaffinity": 1}, True),
    ({"contype": 0, "conaffinity": 0}, False),
])
def test_the_filter_bits_follow_mujoco(second, touch):
    sim = _collide(_two_balls(**second))
    assert (sim.velocity("b")[0][0] > 0.5) == touch


def test_exclude_contacts_lets_two_bodies_pass_through_each_other():
    m = _two_balls()
    m.exclude_contacts("b", "a")
    sim = _collide(m)
    assert sim.velocity("a")[0] == pytest.approx((1, 0, 0))


def test_in_a_tree_a_body_does_not_touch_its_parent_but_does_its_grandparent():
    """Three links hinged in a chain lying on one another: the parent-child pairs do not
    collide, the first and the third do (and the third is pushed off the first)."""
    m = rt.Model(gravity=(0, 0, 0))
    names = ["l0", "l1", "l2"]
    for i, name in enumerate(names):
        m.add_body(name, 1.0, (0.01, 0.01, 0.001))
        m.add_geom(name, "sphere", radius=0.1)
        m.add_joint("revolute", None if i == 0 else names[i - 1], name,
                    anchor_parent=(0, 0, 0) if i == 0 else (0.03, 0, 0),
                    anchor_child=(-0.03, 0, 0) if i else (0, 0, 0), axis_parent=(0, 0, 1))
    sim = rt.Simulation(m, "nullspace_rk4", 1e-3)
    sim.step(1)
    pairs = {(c["body"], c["other"]) for c in sim.contacts()}
    assert pairs == {(0, 2)}


def test_a_duck_of_five_hulls_falls_onto_the_floor_and_rests_on_it():
    m = rt.Model()
    m.add_ground(friction=0.8)
    pieces = [("mesh", {"file": _pybullet_file("duck_vhacd.obj"), "scale": 0.1}, (0, 0, 0),
               (1, 0, 0, 0))]
    props = rt.mass_properties(pieces, density=300.0)
    duck = m.add_body("duck", props.mass, props.moments)
    q = rt.geoms.matrix_quat(props.axes.T)
    m.add_geom(duck, "mesh", file=pieces[0][1]["file"], scale=0.1,
               pos=-props.axes.T @ props.com, quat=q)
    sim = _drop(m, "energy_momentum", 1 / 240)
    sim.set_position(duck, (0, 0, 0.3))
    sim.step(960)
    x, qd = sim.pose(duck)
    lowest = min(
        (x + rt.geoms.quat_matrix(qd) @ (g.pos + rt.geoms.quat_matrix(g.quat) @ v))[2]
        for g in sim.model.geoms for v in g.vertices)
    assert lowest == pytest.approx(0.0, abs=5e-4)
    assert np.linalg.norm(sim.velocity(duck)[0]) < 1e-2
    assert len(sim.contacts()) >= 2


@pytest.mark.parametrize("backend", ["bodies", "tree"])
def test_a_full_table_grows_and_says_so(monkeypatch, backend):
    """Two overlapping boxes and no table rows for pairs: the step that leaves their pair out
    says so and the table grows, so the next step has their contacts; as free bodies, and
    each on a slide joint to the world (the tree backend)."""
    import rtrigid.contact as contact
    monkeypatch.setattr(contact, "PAIR_ROWS", 0)
    m = rt.Model(gravity=(0, 0, 0))
    for name, x in (("a", 0.0), ("b", 0.19)):
        b = m.add_body(name, 1.0, _box_inertia(1.0, (0.1, 0.1, 0.1)))
        m.add_geom(b, "box", half_extents=(0.1, 0.1, 0.1), pos=(0, 0, 0))
        if backend == "tree":
            m.add_joint("prismatic", None, b, anchor_parent=(x, 0.0, 0.0),
                        axis_parent=(1, 0, 0))
    sim = rt.Simulation(m, "nullspace_rk4", 1e-3)
    if backend == "bodies":
        sim.set_position("b", (0.19, 0.0, 0.0))
    with pytest.warns(RuntimeWarning, match="contact table .* was full"):
        sim.step(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sim.step(1)
    assert len(sim.contacts()) >= 4
