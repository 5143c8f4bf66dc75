"""Contact and friction against the ground: the interface, the narrow phase of each
shape, the solve's must-shows against their analytic values, and the energy rule."""
import math

import numpy as np
import pytest

import rtrigid as rt
from rtrigid.references import mujoco_ref
from tests.helpers import random_drop

G = 9.81
CONTACT_SCHEMES = ("nullspace_rk4", "energy_momentum")


def _box_inertia(mass, half):
    a, b, c = (2.0 * np.asarray(half, float)) ** 2
    return mass / 12.0 * np.array([b + c, a + c, a + b])


def _one_body(kind, params, *, mass=1.0, inertia=(0.01, 0.01, 0.01), ground=None,
              gravity=(0.0, 0.0, -G), **body):
    m = rt.Model(gravity=gravity)
    m.add_ground(**(ground or {}))
    m.add_body("b", mass, inertia, shape=(kind, params), **body)
    return m


# -- interface and validation ------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, field", [
    ({"normal": (0, 0, 0)}, "normal"), ({"normal": (0, 1)}, "normal"),
    ({"height": "0"}, "height"), ({"height": math.nan}, "height"),
    ({"friction": -0.1}, "friction"), ({"friction": True}, "friction"),
    ({"restitution": 1.5}, "restitution"), ({"restitution": -0.1}, "restitution"),
    ({"torsional_friction": -1.0}, "torsional_friction"),
    ({"rolling_friction": math.inf}, "rolling_friction"),
])
def test_add_ground_refuses_bad_input_naming_the_field(kwargs, field):
    m = rt.Model()
    with pytest.raises(ValueError, match=f"^{field}:"):
        m.add_ground(**kwargs)
    assert m.grounds == []


@pytest.mark.parametrize("kwargs, field", [
    ({"friction": -1.0}, "friction"), ({"friction": "0.5"}, "friction"),
    ({"restitution": 2.0}, "restitution"), ({"restitution": math.inf}, "restitution"),
    ({"collide": 1}, "collide"), ({"collide": "yes"}, "collide"),
    ({"torsional_friction": -0.01}, "torsional_friction"),
    ({"torsional_friction": math.nan}, "torsional_friction"),
    ({"rolling_friction": -1e-3}, "rolling_friction"),
    ({"rolling_friction": "0.1"}, "rolling_friction"),
])
def test_add_body_refuses_bad_contact_input_naming_the_field(kwargs, field):
    m = rt.Model()
    with pytest.raises(ValueError, match=f"^{field}:"):
        m.add_body("b", 1.0, (1, 1, 1), shape=("sphere", {"radius": 0.1}), **kwargs)
    assert m.bodies == []


def test_add_ground_makes_the_normal_unit_and_returns_its_index():
    m = rt.Model()
    assert m.add_ground() == 0
    assert m.add_ground(height=1.0, normal=(0, 0, 2)) == 1
    assert np.array_equal(m.grounds[1].normal, [0, 0, 1]) and m.grounds[1].height == 1.0


def test_bodies_joined_by_a_joint_are_the_pairs_that_do_not_collide():
    m = rt.Model()
    a = m.add_body("a", 1.0, (1, 1, 1))
    b = m.add_body("b", 1.0, (1, 1, 1))
    c = m.add_body("c", 1.0, (1, 1, 1))
    m.add_joint("revolute", a, b, axis_parent=(1, 0, 0))
    m.add_joint("spherical", b, c)
    m.add_joint("revolute", None, a, axis_parent=(0, 0, 1))
    assert m.jointed_pairs() == {(0, 1), (1, 2)}


def test_contacts_need_a_scheme_and_a_backend_that_step_them():
    m = _one_body("sphere", {"radius": 0.1})
    with pytest.raises(ValueError, match="^integrator:.*does not step contacts"):
        rt.Simulation(m, "midpoint_em", 1e-3)
    m.add_body("c", 1.0, (1, 1, 1))
    m.add_joint("revolute", "b", "c", axis_parent=(1, 0, 0))
    rt.Simulation(m, "nullspace_rk4", 1e-3)  # contacts through joints (test_tree_contact)
    m.add_body("d", 1.0, (1, 1, 1))
    m.add_joint("revolute", "c", "d", axis_parent=(1, 0, 0))
    m.add_loop_joint("spherical", "b", "d")
    rt.Simulation(m, "nullspace_rk4", 1e-3)  # through the loops (tests/loops)
    with pytest.raises(ValueError, match="^integrator:.*does not step contacts on a model "
                                         "with loop joints.*'nullspace_rk4'"):
        rt.Simulation(m, "energy_momentum", 1e-3)


def test_a_model_without_ground_reports_no_contacts():
    m = rt.Model()
    m.add_body("b", 1.0, (1, 1, 1), shape=("sphere", {"radius": 0.1}))
    sim = rt.Simulation(m, "nullspace_rk4", 1e-3)
    sim.step(10)
    assert sim.contacts() == []


# -- narrow phase: each shape's contact points, exactly ------------------------------------------
def _touch(kind, params, q=(1, 0, 0, 0), x=(0, 0, 0), normal=(0, 0, 1)):
    """Contacts of a body at rest at pose (x, q) against the plane through the origin (no
    gravity, a tiny step: the free flight moves nothing)."""
    m = _one_body(kind, params, gravity=(0, 0, 0), ground={"normal": normal})
    sim = rt.Simulation(m, "nullspace_rk4", 1e-12)
    sim.set_orientation("b", q)
    sim.set_position("b", x)
    sim.step(1)
    return sorted(sim.contacts(), key=lambda c: tuple(np.round(c["point"], 9)))


def _quat(axis, angle):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    return np.r_[math.cos(angle / 2), math.sin(angle / 2) * axis]


def test_sphere_touches_at_its_lowest_point_with_its_depth():
    c = _touch("sphere", {"radius": 0.1}, x=(0.3, -0.2, 0.099))
    assert len(c) == 1
    assert np.allclose(c[0]["point"], (0.3, -0.2, -0.001), atol=1e-15)
    assert c[0]["depth"] == pytest.approx(1e-3, abs=1e-15)
    assert np.array_equal(c[0]["normal"], [0, 0, 1]) and c[0]["other"] is None


def test_sphere_on_a_tilted_ground_touches_along_its_normal():
    n = np.array([0.0, -math.sin(0.4), math.cos(0.4)])
    c = _touch("sphere", {"radius": 0.1}, x=0.095 * n, normal=n)
    assert len(c) == 1 and c[0]["depth"] == pytest.approx(5e-3, abs=1e-15)
    assert np.allclose(c[0]["point"], -0.005 * n, atol=1e-15)


def test_capsule_lying_flat_touches_at_both_end_spheres():
    c = _touch("capsule", {"radius": 0.05, "half_length": 0.2}, q=_quat((0, 1, 0), math.pi / 2),
               x=(0, 0, 0.049))
    assert len(c) == 2
    assert np.allclose([p["point"] for p in c], [(-0.2, 0, -0.001), (0.2, 0, -0.001)],
                       atol=1e-12)


def test_box_flat_touches_at_its_four_lower_corners_and_on_an_edge_at_two():
    c = _touch("box", {"half_extents": (0.1, 0.2, 0.3)}, x=(0, 0, 0.299))
    assert len(c) == 4 and all(p["depth"] == pytest.approx(1e-3, abs=1e-15) for p in c)
    assert sorted(tuple(np.round(p["point"][:2], 12)) for p in c) == [
        (-0.1, -0.2), (-0.1, 0.2), (0.1, -0.2), (0.1, 0.2)]
    q = _quat((1, 0, 0), math.pi / 4)  # on the edge along x
    z = 0.2 * math.sin(math.pi / 4) + 0.3 * math.cos(math.pi / 4)
    e = _touch("box", {"half_extents": (0.1, 0.2, 0.3)}, q=q, x=(0, 0, z - 2e-3))
    assert len(e) == 2 and all(p["depth"] == pytest.approx(2e-3, abs=1e-14) for p in e)


def test_cylinder_on_its_face_touches_at_four_rim_points():
    c = _touch("cylinder", {"radius": 0.1, "half_length": 0.05}, x=(0, 0, 0.049))
    assert len(c) == 4
    assert all(np.linalg.norm(p["point"][:2]) == pytest.approx(0.1, abs=1e-15) for p in c)


def test_tilted_cylinder_touches_at_its_exact_rim_point():
    tilt = 0.3
    q = _quat((1, 0, 0), tilt)
    r, hl = 0.1, 0.05
    z = r * math.sin(tilt) + hl * math.cos(tilt)  # the lowest rim point is at -z
    c = _touch("cylinder", {"radius": r, "half_length": hl}, q=q, x=(0, 0, z - 1e-4))
    assert len(c) == 1 and c[0]["depth"] == pytest.approx(1e-4, abs=1e-14)
    assert np.allclose(c[0]["point"], (0, hl * math.sin(tilt) - r * math.cos(tilt), -1e-4),
                       atol=1e-14)


def test_cylinder_on_its_side_touches_once_per_rim():
    c = _touch("cylinder", {"radius": 0.1, "half_length": 0.05},
               q=_quat((1, 0, 0), math.pi / 2), x=(0, 0, 0.0999))
    assert len(c) == 2
    assert np.allclose(sorted(p["point"][1] for p in c), [-0.05, 0.05], atol=1e-14)


def test_cone_touches_at_its_apex_on_its_base_rim_and_on_its_side():
    r, h = 0.1, 0.2
    apex = _touch("cone", {"radius": r, "height": h}, x=(0, 0, 0.75 * h - 1e-3))
    assert len(apex) == 1 and np.allclose(apex[0]["point"], (0, 0, -1e-3), atol=1e-15)
    flip = _touch("cone", {"radius": r, "height": h}, q=_quat((1, 0, 0), math.pi),
                  x=(0, 0, 0.25 * h - 1e-3))
    assert len(flip) == 4 and all(p["depth"] == pytest.approx(1e-3, abs=1e-14) for p in flip)
    # on its side: the apex and the rim point on the same generatrix touch, equally deep
    half = math.atan2(r, h)
    z = 0.75 * h * math.sin(half)
    side = _touch("cone", {"radius": r, "height": h}, q=_quat((1, 0, 0), math.pi / 2 - half),
                  x=(0, 0, z - 1e-3))
    assert len(side) == 2 and all(p["depth"] == pytest.approx(1e-3, abs=1e-14) for p in side)


def test_a_body_with_collide_false_falls_through():
    m = _one_body("sphere", {"radius": 0.1}, collide=False)
    sim = rt.Simulation(m, "nullspace_rk4", 1e-3)
    sim.step(100)
    assert sim.contacts() == [] and sim.pose("b")[0][2] < -0.04


# -- the solve: pair rules, must-shows --------------------------------------------------------
def test_pair_friction_is_the_geometric_mean_and_restitution_the_larger():
    half = (0.1, 0.1, 0.1)
    m = _one_body("box", {"half_extents": half}, inertia=_box_inertia(1.0, half),
                  ground={"friction": 0.2, "restitution": 0.0}, friction=0.8, restitution=0.5)
    sim = rt.Simulation(m, "nullspace_rk4", 1e-3)
    sim.set_position("b", (0, 0, 0.1))
    sim.set_velocity("b", (1.0, 0, 0))
    sim.step(1)
    v = sim.velocity("b")[0][0]
    assert v == pytest.approx(1.0 - math.sqrt(0.2 * 0.8) * G * 1e-3, rel=1e-12)
    sim.set_velocity("b", (0, 0, -2.0))  # a drop onto the ground: e = max(0, 0.5)
    sim.set_position("b", (0, 0, 0.1 + 1e-9))
    sim.step(1)
    # (four corners, 16 Gauss-Seidel sweeps: converged to 1e-6)
    assert sim.velocity("b")[0][2] == pytest.approx(0.5 * (2.0 + G * 1e-3), rel=1e-5)


@pytest.mark.parametrize("integrator", CONTACT_SCHEMES)
def test_sliding_box_stops_after_v2_over_2_mu_g_and_rests_without_creep(integrator):
    half = (0.1, 0.1, 0.1)
    m = _one_body("box", {"half_extents": half}, inertia=_box_inertia(1.0, half),
                  ground={"friction": 0.5}, friction=0.5)
    sim = rt.Simulation(m, integrator, 1e-3)
    sim.set_position("b", (0, 0, 0.1))
    sim.set_velocity("b", (2.0, 0, 0))
    sim.step(600)  # it stops after 0.41 s
    x_stop = sim.pose("b")[0]
    assert x_stop[0] == pytest.approx(2.0 ** 2 / (2 * 0.5 * G), rel=0.01)
    assert np.linalg.norm(sim.velocity("b")[0]) < 1e-4
    sim.step(5000)
    x, _ = sim.pose("b")
    assert np.linalg.norm(sim.velocity("b")[0]) < 1e-4
    assert np.linalg.norm(sim.velocity("b")[1]) < 1e-4
    assert np.linalg.norm(x[:2] - x_stop[:2]) < 1e-6 and abs(x[2] - 0.1) < 1e-6


@pytest.mark.parametrize("integrator", ("nullspace_rk4", "semi_implicit_euler"))
def test_sliding_box_stops_where_pybullet_stops(require, integrator):
    """Cross-check against an independent engine (which steps semi-implicit Euler): the same
    box (0.2 m, 1 kg, 2 m/s, pair friction 0.5) in PyBullet with its defaults stops 2.9 %
    short of v^2 / (2 mu g) at dt = 1 ms, rtrigid 0.25 % beyond it under either scheme (the
    solve follows the flight: + dt v / 2); both come to rest."""
    require("pybullet")
    from rtrigid.references import pybullet_ref

    cid, body = pybullet_ref.sliding_box(1e-3)
    try:
        pybullet_ref.step(cid, 1000)
        ref = pybullet_ref.positions(cid, [body])[0]
        ref_speed = np.linalg.norm(pybullet_ref.velocity(cid, body)[0])
    finally:
        pybullet_ref.close(cid)
    half = (0.1, 0.1, 0.1)
    m = _one_body("box", {"half_extents": half}, inertia=_box_inertia(1.0, half),
                  ground={"friction": 0.5}, friction=0.5)
    sim = rt.Simulation(m, integrator, 1e-3)
    sim.set_position("b", (0, 0, 0.1))
    sim.set_velocity("b", (2.0, 0, 0))
    sim.step(1000)
    x = sim.pose("b")[0]
    assert ref_speed < 1e-3 and np.linalg.norm(sim.velocity("b")[0]) < 1e-4
    assert ref[0] == pytest.approx(2.0 ** 2 / (2 * 0.5 * G), rel=0.05)  # the reference is sane
    assert x[0] == pytest.approx(ref[0], rel=0.05)
    assert abs(x[1]) < 1e-6 and abs(ref[1]) < 5e-3  # straight on (PyBullet drifts 0.16 mm)


@pytest.mark.parametrize("integrator", CONTACT_SCHEMES)
def test_ball_rolls_down_a_20_degree_incline_at_five_sevenths_g_sin(integrator):
    th = math.radians(20)
    n = np.array([-math.sin(th), 0.0, math.cos(th)])
    r, mass = 0.1, 1.0
    inertia = 0.4 * mass * r * r
    m = _one_body("sphere", {"radius": r}, mass=mass, inertia=(inertia,) * 3,
                  ground={"normal": n, "friction": 0.5}, friction=0.5)
    sim = rt.Simulation(m, integrator, 1 / 240)
    sim.set_position("b", r * n)
    sim.step(240)
    down = np.array([-math.cos(th), 0.0, -math.sin(th)])
    v, w = sim.velocity("b")
    assert v @ down / sim.t == pytest.approx(5 / 7 * G * math.sin(th), rel=0.01)
    assert abs(v @ n) < 1e-9  # stays on the incline
    assert np.linalg.norm(v + np.cross(w, -r * n)) < 1e-9  # the contact point does not slip


@pytest.mark.parametrize("integrator", CONTACT_SCHEMES)
@pytest.mark.parametrize("dt", (1 / 240, 1e-3))
def test_ball_dropped_from_1m_with_restitution_half_rebounds_to_a_quarter(integrator, dt):
    r = 0.1
    m = _one_body("sphere", {"radius": r}, inertia=(0.004,) * 3,
                  ground={"restitution": 0.5}, restitution=0.5)
    sim = rt.Simulation(m, integrator, dt)
    sim.set_position("b", (0, 0, 1.0 + r))
    top, hit = 0.0, False
    for _ in range(int(1.1 / dt)):
        sim.step(1)
        hit = hit or bool(sim.contacts())
        if hit:
            top = max(top, sim.pose("b")[0][2] - r)
    assert top == pytest.approx(0.25, rel=0.02)


def test_contact_impulses_of_a_resting_box_carry_its_weight():
    half = (0.2, 0.1, 0.05)
    m = _one_body("box", {"half_extents": half}, mass=2.0, inertia=_box_inertia(2.0, half))
    sim = rt.Simulation(m, "energy_momentum", 1e-3)
    sim.set_position("b", (0, 0, 0.05))
    sim.step(100)
    c = sim.contacts()
    assert len(c) == 4 and all(p["body"] == 0 and p["name"] == "b" for p in c)
    total = sum(p["impulse"] for p in c)
    assert np.allclose(total, (0, 0, 2.0 * G * 1e-3), rtol=1e-9, atol=1e-12)


def test_results_do_not_depend_on_the_order_bodies_were_added_in():
    def build(order):
        m = rt.Model()
        m.add_ground(friction=0.7)
        for name in order:
            half = {"a": (0.1, 0.2, 0.05), "c": (0.05, 0.05, 0.05)}.get(name)
            shape = ("box", {"half_extents": half}) if half else ("sphere", {"radius": 0.1})
            m.add_body(name, 1.0, _box_inertia(1.0, half or (0.1, 0.1, 0.1)), shape=shape)
        sim = rt.Simulation(m, "energy_momentum", 1 / 240)
        for k, name in enumerate("abc"):
            sim.set_position(name, (k, 0, 0.3))
            sim.set_orientation(name, _quat((1, k, 2), 0.5 + k))
            sim.set_velocity(name, (1.0, -0.5 * k, 0))
            sim.set_angular_velocity(name, (k, 2.0, -1.0))
        sim.step(240)
        return {name: np.r_[sim.pose(name)[0], sim.pose(name)[1], sim.velocity(name)[0]]
                for name in "abc"}

    one, two = build("abc"), build("cab")
    for name in "abc":
        assert np.array_equal(one[name], two[name])


def test_snapshot_restore_is_bit_exact_with_contacts():
    half = (0.1, 0.1, 0.1)
    m = _one_body("box", {"half_extents": half}, inertia=_box_inertia(1.0, half))
    sim = rt.Simulation(m, "nullspace_rk4", 1 / 240)
    sim.set_position("b", (0, 0, 0.5))
    sim.set_angular_velocity("b", (3, 1, 0))
    sim.step(60)
    snap = sim.snapshot()
    sim.step(100)
    after, contacts = sim.pose("b"), sim.contacts()
    sim.restore(snap)
    sim.step(100)
    assert all(np.array_equal(a, b) for a, b in zip(after, sim.pose("b")))
    assert len(contacts) == len(sim.contacts())


def _largest_contact_energy_rise(sim, seconds):
    """The largest energy rise of a step with contacts, relative to the size of the energy's
    terms, kinetic + |potential| (the scale of its round-off: E itself may be near zero when a
    body rolls at about its ground's height, as one of the 1000 drops does)."""
    worst = -np.inf
    e0, scale = sim.energy(), sim.kinetic_energy() + abs(sim.potential_energy())
    for _ in range(int(seconds / sim.dt)):
        sim.step(1)
        e1 = sim.energy()
        if sim.contacts():
            worst = max(worst, (e1 - e0) / scale)
        e0, scale = e1, sim.kinetic_energy() + abs(sim.potential_energy())
    return worst


def test_inelastic_contacts_add_no_energy_on_random_drops():
    rng = np.random.default_rng(7)
    worst = max(_largest_contact_energy_rise(random_drop(rng, "energy_momentum"), 0.6)
                for _ in range(40))
    assert -np.inf < worst < 1e-13


def test_torsional_and_rolling_friction_add_no_energy_on_random_drops():
    rng = np.random.default_rng(11)
    worst = max(_largest_contact_energy_rise(random_drop(rng, "energy_momentum", spin=True),
                                             0.6)
                for _ in range(40))
    assert -np.inf < worst < 1e-13


@pytest.mark.slow
def test_inelastic_contacts_add_no_energy_over_1000_random_drops_of_random_shapes():
    """energy_momentum keeps energy to round-off in free flight, so any rise in a step with
    contacts is the contact's."""
    rng = np.random.default_rng(15)
    worst = max(_largest_contact_energy_rise(random_drop(rng, "energy_momentum"), 0.6)
                for _ in range(1000))
    assert -np.inf < worst < 1e-13


# -- contacts between bodies -------------------------------------------------------------------
def _balls(e, mu, offset):
    m = rt.Model(gravity=(0, 0, 0))
    m.add_ground(height=-10.0)
    r, inertia = 0.1, 0.4 * 0.1 * 0.1
    m.add_body("a", 1.0, (inertia,) * 3, shape=("sphere", {"radius": r}), restitution=e,
               friction=mu)
    m.add_body("b", 2.0, (2 * inertia,) * 3, shape=("sphere", {"radius": r}), restitution=e,
               friction=mu)
    sim = rt.Simulation(m, "energy_momentum", 1e-3)
    sim.set_position("a", (-0.3, 0, 0))
    sim.set_velocity("a", (1.0, 0, 0))
    sim.set_position("b", (0.3, 0, offset))
    sim.set_velocity("b", (-1.0, 0, 0))
    return sim


def test_elastic_head_on_collision_of_two_balls_keeps_momentum_and_energy():
    sim = _balls(1.0, 0.0, 0.0)
    p0, e0 = sim.momentum()[0], sim.energy()
    sim.step(400)
    # 1-D elastic collision of masses 1 and 2 at +-1 m/s: a leaves at -5/3, b at +1/3
    assert sim.velocity("a")[0] == pytest.approx((-5 / 3, 0, 0), abs=1e-12)
    assert sim.velocity("b")[0] == pytest.approx((1 / 3, 0, 0), abs=1e-12)
    assert np.allclose(sim.momentum()[0], p0, atol=1e-14)
    assert sim.energy() == pytest.approx(e0, rel=1e-12)


def test_glancing_collision_with_friction_keeps_momentum_and_loses_energy():
    sim = _balls(0.3, 0.8, 0.08)
    (p0, l0), e0 = sim.momentum(), sim.energy()
    sim.step(400)
    touched = sim.velocity("a")[1]
    p1, l1 = sim.momentum()
    assert np.allclose(p1, p0, atol=1e-13)
    # the impulses keep the angular momentum; moving the bodies apart (depth ~ v dt) moves
    # their momenta's lines, by |p| depth at most
    assert np.linalg.norm(l1 - l0) < 2.0 * 2e-3
    assert sim.energy() < e0 and np.linalg.norm(touched) > 1.0  # friction spun it


def test_a_ball_dropped_on_a_box_comes_to_rest_on_its_top():
    m = rt.Model()
    m.add_ground()
    half = (0.3, 0.3, 0.1)
    m.add_body("table", 10.0, _box_inertia(10.0, half), shape=("box", {"half_extents": half}))
    m.add_body("ball", 1.0, (0.004,) * 3, shape=("sphere", {"radius": 0.1}))
    sim = rt.Simulation(m, "nullspace_rk4", 1 / 240)
    sim.set_position("table", (0, 0, 0.1))
    sim.set_position("ball", (0.05, 0.02, 0.6))
    sim.step(480)
    x = sim.pose("ball")[0]
    assert x[2] == pytest.approx(0.3, abs=1e-3)
    assert np.linalg.norm(sim.velocity("ball")[0]) < 1e-3
    # a pair's first body is the one whose name sorts first, the normal points into it
    pair = [c for c in sim.contacts() if c["other"] is not None]
    assert len(pair) == 1 and (pair[0]["body"], pair[0]["other"]) == (1, 0)
    assert np.allclose(pair[0]["normal"], (0, 0, 1), atol=1e-9)


@pytest.mark.parametrize("names", ("abc", "cab", "bca"))
def test_a_stack_of_three_boxes_stands_whatever_the_names_order(names):
    half = (0.1, 0.1, 0.1)

    def build(order):
        m = rt.Model()
        m.add_ground()
        for name in order:
            m.add_body(name, 1.0, _box_inertia(1.0, half), shape=("box", {"half_extents": half}))
        sim = rt.Simulation(m, "nullspace_rk4", 1 / 240)
        for k, name in enumerate(names):
            sim.set_position(name, (0.01 * k, 0, 0.1 + 0.2 * k))
        sim.step(480)
        return {n: sim.pose(n)[0] for n in names}

    one, two = build(names), build(sorted(names))
    for k, name in enumerate(names):
        assert np.array_equal(one[name], two[name])
        assert np.linalg.norm(one[name] - (0.01 * k, 0, 0.1 + 0.2 * k)) < 1e-3


def test_boxes_apart_make_no_contacts_and_a_capsule_touches_every_box_it_lies_across():
    m = rt.Model(gravity=(0, 0, 0))
    m.add_ground(height=-10)
    for k in range(6):
        m.add_body(f"box{k}", 1.0, (1, 1, 1), shape=("box", {"half_extents": (0.1, 0.1, 0.1)}))
    m.add_body("cap", 1.0, (1, 1, 1), shape=("capsule", {"radius": 0.05, "half_length": 0.2}))
    sim = rt.Simulation(m, "nullspace_rk4", 1e-12)
    for k in range(6):
        sim.set_position(f"box{k}", (0.21 * k, 0.0, 0.0))
    sim.set_orientation("cap", _quat((0, 1, 0), math.pi / 2))
    sim.set_position("cap", (0.21, 0.0, 0.149))  # its ends over box0 and box2, box1 between
    sim.step(1)
    c = sim.contacts()
    # two points on each box, at the ends of the part of the capsule that lies over it (its
    # end spheres alone, the fast test it had, missed box1 under its middle)
    assert len(c) == 6 and all(p["depth"] == pytest.approx(1e-3, abs=1e-12) for p in c)
    assert sorted((p["body"], p["other"]) for p in c) == [(0, 6)] * 2 + [(1, 6)] * 2 + [
        (2, 6)] * 2
    for box in range(3):
        xs = sorted(p["point"][0] for p in c if p["body"] == box)
        covered = (max(0.01, 0.21 * box - 0.1), min(0.41, 0.21 * box + 0.1))
        assert xs == pytest.approx(covered, abs=1e-9)


def test_boxes_meeting_edge_on_edge_touch_where_the_edges_cross():
    m = rt.Model(gravity=(0, 0, 0))
    m.add_ground(height=-10)
    for name in ("lower", "upper"):
        m.add_body(name, 1.0, (1, 1, 1), shape=("box", {"half_extents": (0.1, 0.1, 0.1)}))
    sim = rt.Simulation(m, "nullspace_rk4", 1e-12)
    s2 = math.sqrt(2) * 0.1
    sim.set_orientation("lower", _quat((1, 0, 0), math.pi / 4))  # its top edge along x
    sim.set_orientation("upper", _quat((0, 1, 0), math.pi / 4))  # its bottom edge along y
    sim.set_position("upper", (0.01, 0.02, 2 * s2 - 1e-3))  # no corner inside the other box
    sim.step(1)
    c = sim.contacts()
    assert len(c) == 1 and (c[0]["body"], c[0]["other"]) == (0, 1)
    assert np.allclose(c[0]["normal"], (0, 0, -1), atol=1e-9)  # into "lower", the first name
    assert c[0]["depth"] == pytest.approx(1e-3, abs=1e-9)
    assert np.allclose(c[0]["point"], (0.01, 0.0, s2 - 5e-4), atol=1e-9)


def test_boxes_crossing_face_to_face_touch_at_the_corners_of_their_overlap():
    """A plank pressed 2 mm into a box's side, longer than the box is wide and lower than it
    is tall: no corner of either lies inside the other (the corners alone found nothing);
    the contacts are where the edges of each pass through the other's side faces."""
    m = rt.Model(gravity=(0, 0, 0))
    m.add_ground(height=-10)
    m.add_body("box", 1.0, (1, 1, 1), shape=("box", {"half_extents": (0.1, 0.1, 0.1)}))
    m.add_body("plank", 1.0, (1, 1, 1), shape=("box", {"half_extents": (0.05, 0.2, 0.05)}))
    sim = rt.Simulation(m, "nullspace_rk4", 1e-12)
    sim.set_position("plank", (-0.148, 0.0, 0.03))
    sim.step(1)
    c = sim.contacts()
    assert len(c) >= 4
    assert all((p["body"], p["other"]) == (0, 1) for p in c)
    assert all(p["depth"] == pytest.approx(2e-3, abs=1e-12) for p in c)
    assert all(np.allclose(p["normal"], (1, 0, 0), atol=1e-12) for p in c)
    corners = {(round(p["point"][1], 9), round(p["point"][2], 9)) for p in c}
    assert corners == {(y, z) for y in (-0.1, 0.1) for z in (-0.02, 0.08)}
    assert all(-0.1 - 1e-12 <= p["point"][0] <= -0.098 + 1e-12 for p in c)


# -- scenarios -----------------------------------------------------------------------------------
def _axis_z(sim, body):
    q = sim.pose(body)[1]
    return 1.0 - 2.0 * (q[1] ** 2 + q[2] ** 2)


def test_contact_scenarios_offer_the_schemes_that_step_contacts():
    for name in ("ball_on_incline", "box_stack", "top_on_table", "tippe_top", "euler_disk"):
        assert rt.scenarios.integrators_for(name) == ["nullspace_rk4", "semi_implicit_euler",
                                                      "energy_momentum", "energy_momentum4"]


def test_ball_on_incline_follows_its_analytic_rolling():
    sim = rt.scenarios.build("ball_on_incline", integrator="nullspace_rk4")
    ref = rt.scenarios.info(sim)["reference"]
    sim.step(480)
    start = ref(0.0)
    assert np.linalg.norm(sim.pose("ball")[0] - ref(sim.t)) < 1e-3 * np.linalg.norm(
        ref(sim.t) - start)


def test_tippe_top_turns_over_onto_its_stem():
    sim = rt.scenarios.build("tippe_top", integrator="energy_momentum")
    a, r = rt.scenarios.info(sim)["offset"], 0.02
    assert _axis_z(sim, "top") > 0.99
    sim.step(3000)  # 1.5 s
    assert _axis_z(sim, "top") < -0.9
    assert sim.pose("top")[0][2] == pytest.approx(r + a, abs=1e-3)  # its centre of mass up
    assert max(c["depth"] for c in sim.contacts()) < 1e-3


def test_fast_top_on_table_stays_up_with_its_tip_on_the_table():
    sim = rt.scenarios.build("top_on_table", integrator="energy_momentum")
    worst = 0.0
    for _ in range(30):
        sim.step(100)
        worst = max([worst] + [c["depth"] for c in sim.contacts()])
        assert _axis_z(sim, "top") > 0.95 and len(sim.contacts()) == 1
    assert worst < 1e-3
    slow = rt.scenarios.build("top_on_table", integrator="energy_momentum", spin=100.0)
    slow.step(2000)
    assert _axis_z(slow, "top") < 0.5  # below its critical spin it falls over


@pytest.mark.parametrize("integrator", ("nullspace_rk4", "semi_implicit_euler",
                                        "energy_momentum"))
@pytest.mark.parametrize("n", (5, 10))
def test_box_stack_stands_ten_seconds_within_a_millimetre(n, integrator):
    """The must-show: over 10 s at dt = 1/240 no box centre drifts more than 1 mm, no box sinks
    more than 1 mm into the ground or the box below (measured from the centres, after each
    step), and no contact is deeper than 1 mm before its correction."""
    sim = rt.scenarios.build("box_stack", integrator=integrator, n=n)
    x0 = sim.x.copy()
    drift = sink = deepest = 0.0
    for _ in range(2400):
        sim.step(1)
        z = sim.x[:, 2]
        drift = max(drift, np.abs(sim.x - x0).max())
        sink = max(sink, 0.1 - z[0], (0.2 - np.diff(z)).max())
        deepest = max([deepest] + [c["depth"] for c in sim.contacts()])
    assert drift < 1e-3 and sink < 1e-3 and deepest < 1e-3
    # every box rests on the one below it (or on the ground); a pair is (first name, second)
    below = {(c["body"], c["other"]) for c in sim.contacts()}
    assert (0, None) in below and all((k, k + 1) in below for k in range(n - 1))


def test_a_list_of_shapes_and_a_turned_axis_collide_unless_collide_is_false():
    """Each part of a list of shapes is a geom of the body, and a shape turned by axis= lies
    as the viewer draws it: a cylinder along x rests on its side at its radius; a body with
    collide=False falls through."""
    box = ("box", {"half_extents": (0.1, 0.1, 0.1)})
    turned = ("cylinder", {"radius": 0.1, "half_length": 0.2, "axis": (1.0, 0.0, 0.0)})
    for shape, rest in (([box, ("sphere", {"radius": 0.05, "offset": (0, 0, -0.2)})], 0.25),
                        (turned, 0.1)):
        m = rt.Model()
        m.add_ground()
        m.add_body("b", 1.0, (0.1, 0.1, 0.1), shape=shape)
        sim = rt.Simulation(m, "energy_momentum", 1 / 240)
        sim.set_position("b", (0, 0, rest + 0.05))
        sim.step(480)
        assert sim.pose("b")[0][2] == pytest.approx(rest, abs=2e-3)
        assert len(sim.contacts()) >= 1
        m = rt.Model()
        m.add_ground()
        m.add_body("b", 1.0, (0.1, 0.1, 0.1), shape=shape, collide=False)
        sim = rt.Simulation(m, "energy_momentum", 1 / 240)
        sim.step(10)  # falls through the ground it does not touch
        assert sim.contacts() == [] and sim.pose("b")[0][2] < 0.0


# -- torsional and rolling friction (MuJoCo's condim 4 and 6) ------------------------------------
def _ball(integrator, ground=None, **body):
    """A solid ball (r 0.1 m, 1 kg) resting on the ground at the origin, dt = 1 ms."""
    r, mass = 0.1, 1.0
    m = _one_body("sphere", {"radius": r}, mass=mass, inertia=(0.4 * mass * r * r,) * 3,
                  ground=ground or {"friction": 0.5}, friction=0.5, **body)
    sim = rt.Simulation(m, integrator, 1e-3)
    sim.set_position("b", (0, 0, r))
    return sim


def _first_time(sim, stopped, seconds):
    """The time of the first step after which ``stopped(sim)`` holds (None: not within
    ``seconds``); the energy never rises on the way."""
    e = sim.energy()
    while sim.t < seconds:
        sim.step(1)
        assert sim.energy() <= e + 1e-13 * abs(e)
        e = sim.energy()
        if stopped(sim):
            return sim.t
    return None


def test_torsional_friction_stops_a_spinning_ball_after_i_w_over_mu_t_m_g():
    """A torque mu_t N about the vertical stops the spin omega after I omega / (mu_t m g);
    the ground's coefficient alone turns it on (a pair takes the larger side's)."""
    mu_t, omega = 0.01, 10.0
    sim = _ball("energy_momentum", ground={"friction": 0.5, "torsional_friction": mu_t})
    sim.set_angular_velocity("b", (0, 0, omega))
    sim.step(100)
    assert sim.velocity("b")[1][2] == pytest.approx(omega - mu_t * G / 0.004 * 0.1, rel=1e-6)
    t = _first_time(sim, lambda s: s.velocity("b")[1][2] < 1e-9, 1.0)
    assert t == pytest.approx(0.004 * omega / (mu_t * 1.0 * G), rel=0.01)
    sim.step(500)  # and it stays stopped, on the spot
    v, w = sim.velocity("b")
    assert np.linalg.norm(v) < 1e-9 and np.linalg.norm(w) < 1e-9
    assert np.linalg.norm(sim.pose("b")[0] - (0, 0, 0.1)) < 1e-9


def test_rolling_friction_decelerates_a_rolling_ball_at_five_sevenths_mu_r_g_over_r():
    """A torque mu_r N against the rolling of a solid ball (I = 2/5 m r^2) that rolls without
    slipping: (I + m r^2) d omega / dt = -mu_r m g, so a = (5/7) mu_r g / r; it stops after
    v0 / a, at v0^2 / (2 a)."""
    mu_r, r, v0 = 0.005, 0.1, 1.0
    sim = _ball("nullspace_rk4", rolling_friction=mu_r)
    sim.set_velocity("b", (v0, 0, 0))
    sim.set_angular_velocity("b", (0, v0 / r, 0))
    a = 5 / 7 * mu_r * G / r
    sim.step(1000)
    assert sim.velocity("b")[0][0] == pytest.approx(v0 - a * 1.0, rel=1e-6)
    t = _first_time(sim, lambda s: s.velocity("b")[0][0] < 1e-9, 4.0)
    assert t == pytest.approx(v0 / a, rel=0.01)
    assert sim.pose("b")[0][0] == pytest.approx(v0 ** 2 / (2 * a), rel=0.01)
    x = sim.pose("b")[0]
    sim.step(1000)  # and it rests there
    assert np.linalg.norm(sim.pose("b")[0] - x) < 1e-9


@pytest.mark.skipif(not mujoco_ref.available(), reason="mujoco is a dev dependency")
def test_rolling_and_torsional_friction_match_mujoco_condim_6():
    """The same ball in MuJoCo (condim 6, same coefficients, elliptic cone): after 1 s of
    rolling from 1 m/s its speed lost is 0.67 % less than the analytic (5/7) mu_r g / r
    (its soft contact), rtrigid's 1e-6 of it; after 0.1 s of spinning from 10 rad/s MuJoCo
    lost 1.4 % more than mu_t m g / I x 0.1 s (its soft contact lifts the spinning ball at
    13 mm/s), rtrigid 1e-12 of it."""
    r, mu_r, mu_t = 0.1, 0.005, 0.01
    model, data = mujoco_ref.rolling_ball(r, 1.0, 0.5, 0.0, mu_r)
    data.qvel[0], data.qvel[4] = 1.0, 1.0 / r
    mujoco_ref.step(model, data, 1000)
    sim = _ball("nullspace_rk4", rolling_friction=mu_r)
    sim.set_velocity("b", (1.0, 0, 0))
    sim.set_angular_velocity("b", (0, 1.0 / r, 0))
    sim.step(1000)
    lost, ref_lost = 1.0 - sim.velocity("b")[0][0], 1.0 - data.qvel[0]
    assert ref_lost == pytest.approx(5 / 7 * mu_r * G / r, rel=0.01)  # the reference is sane
    assert lost == pytest.approx(ref_lost, rel=0.01)
    model, data = mujoco_ref.rolling_ball(r, 1.0, 0.5, mu_t, 0.0)
    data.qvel[5] = 10.0
    mujoco_ref.step(model, data, 100)
    sim = _ball("nullspace_rk4", torsional_friction=mu_t)
    sim.set_angular_velocity("b", (0, 0, 10.0))
    sim.step(100)
    assert 10.0 - data.qvel[5] == pytest.approx(mu_t * G / 0.004 * 0.1, rel=0.02)
    assert 10.0 - sim.velocity("b")[1][2] == pytest.approx(10.0 - data.qvel[5], rel=0.02)


def test_without_torsional_and_rolling_friction_a_ball_rolls_and_spins_on():
    """Off (the default), nothing resists rolling or spinning: the same ball keeps its
    velocities exactly."""
    sim = _ball("energy_momentum", torsional_friction=0.0, rolling_friction=0.0)
    sim.set_velocity("b", (1.0, 0, 0))
    sim.set_angular_velocity("b", (0, 10.0, 3.0))
    sim.step(1000)
    v, w = sim.velocity("b")
    assert np.allclose(v, (1, 0, 0), rtol=0, atol=1e-12)
    assert np.allclose(w, (0, 10, 3), rtol=0, atol=1e-11)
