"""Joint Coulomb friction (``Model.add_joint(friction=...)``): stick and slip against exact
references -- a pendulum's turning points from its energy balance, a slider on a tilted axis
that holds or slides at (m g sin(a) - c) / m -- and under ``energy_momentum`` an energy balance
exact to round-off: the energy lost is the friction's work (``friction_work``)."""
import numpy as np
import pytest
from scipy.optimize import brentq

import rtrigid as rt

SCHEMES = ("nullspace_rk4", "semi_implicit_euler", "energy_momentum")
G = 9.81


def _pendulum(friction, theta0, *, mass=1.0, arm=0.5):
    m = rt.Model()
    bob = m.add_body("bob", mass=mass, inertia=(1e-3, 1e-3, 1e-3))
    m.add_joint("revolute", None, bob, anchor_child=(0, 0, arm), axis_parent=(1, 0, 0),
                friction=friction, position=theta0, name="hinge")
    return m


def _exact_turning_points(theta0, mgl, friction):
    """The turning points of a pendulum with Coulomb friction from its energy balance
    m g l (cos b - cos a) = friction (|a| + |b|), until it stops (m g l |sin a| <= friction)."""
    out, a = [theta0], theta0
    while mgl * abs(np.sin(a)) > friction:
        b = brentq(lambda x: mgl * (np.cos(x) - np.cos(a)) - friction * (abs(a) + abs(x)),
                   0.0, abs(a))
        a = -np.copysign(b, a)
        out.append(a)
    return out


@pytest.mark.parametrize("scheme", SCHEMES)
def test_pendulum_turning_points_follow_the_energy_balance_and_it_stops_without_chatter(scheme):
    theta0, friction, arm = np.radians(30.0), 0.3, 0.5
    sim = rt.Simulation(_pendulum(friction, theta0, arm=arm), scheme, dt=1e-3)
    q, v = [], []
    for _ in range(5000):
        sim.step()
        q.append(sim.qpos()[0])
        v.append(sim.qvel()[0])
    q, v = np.array(q), np.array(v)
    # energy_momentum's rates are its momenta's: a held joint's is zero to round-off
    v[np.abs(v) < 1e-15] = 0.0
    # a turning point: the step where the rate reaches zero or changes sign
    turns = [theta0] + [q[i] for i in range(1, len(v))
                        if (v[i] == 0.0 and v[i - 1] != 0.0) or v[i] * v[i - 1] < 0.0]
    exact = _exact_turning_points(theta0, 1.0 * G * arm, friction)
    assert len(exact) == 5  # it swings four times before the friction holds it
    assert len(turns) == len(exact), (turns, exact)
    assert np.max(np.abs(np.array(turns) - exact)) <= 1e-4
    # it stays at the last one: not a bit of motion, no chatter
    stop = len(v) - int(np.argmax(v[::-1] != 0.0))  # the first step of the final rest
    assert stop < 4000
    assert np.all(v[stop:] == 0.0) and np.all(q[stop:] == q[-1])


def _slider(friction, tilt, mass=2.0):
    """A block on a prismatic joint whose axis is tilted by ``tilt`` from the horizontal."""
    m = rt.Model()
    block = m.add_body("block", mass=mass, inertia=(0.01, 0.01, 0.01))
    axis = (np.cos(tilt), 0.0, -np.sin(tilt))  # positive downhill
    m.add_joint("prismatic", None, block, axis_parent=axis, friction=friction, name="slide")
    return m


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_slider_inside_its_friction_holds_exactly(scheme):
    tilt, mass = np.radians(16.7), 2.0
    friction = 0.5 * mass * G * np.cos(tilt)  # mu = 0.5 on a 16.7 degree slope
    sim = rt.Simulation(_slider(friction, tilt, mass), scheme, dt=1 / 60)
    sim.step(600)  # 10 s of a 60 Hz game
    assert sim.qpos()[0] == 0.0 and abs(sim.qvel()[0]) <= 1e-15


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_slider_beyond_its_friction_slides_at_the_net_force_over_the_mass(scheme):
    tilt, mass, friction, dt = np.radians(30.0), 2.0, 4.0, 1e-3
    a = (mass * G * np.sin(tilt) - friction) / mass
    sim = rt.Simulation(_slider(friction, tilt, mass), scheme, dt=dt)
    n = 1000
    sim.step(n)
    t = n * dt
    if scheme != "semi_implicit_euler":  # a constant force: RK4 and the midpoint are exact
        assert sim.qvel()[0] == pytest.approx(a * t, rel=1e-12)
        assert sim.qpos()[0] == pytest.approx(0.5 * a * t * t, rel=1e-12)
    else:  # semi-implicit Euler: v_n = a n h, x_n = a h^2 n (n + 1) / 2
        assert sim.qvel()[0] == pytest.approx(a * t, rel=1e-12)
        assert sim.qpos()[0] == pytest.approx(a * dt * dt * n * (n + 1) / 2, rel=1e-12)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_pushed_slider_stops_where_its_energy_is_spent(scheme):
    """A block pushed along a level axis at v0 stops after v0^2 m / (2 c), and stays."""
    mass, friction, v0 = 2.0, 3.0, 1.5
    sim = rt.Simulation(_slider(friction, 0.0, mass), scheme, dt=1e-3)
    sim.set_qvel([v0])
    sim.step(2000)
    assert abs(sim.qvel()[0]) <= 1e-15
    assert sim.qpos()[0] == pytest.approx(v0 * v0 * mass / (2 * friction), abs=2e-3 * v0)


def _arm(friction):
    """A two-link arm out of its hanging pose, with friction (shoulder, elbow)."""
    m = rt.Model()
    upper = m.add_body("upper", mass=1.0, inertia=(0.01, 0.01, 0.002))
    lower = m.add_body("lower", mass=0.5, inertia=(0.005, 0.005, 0.001))
    m.add_joint("revolute", None, upper, anchor_child=(0, 0, 0.2), axis_parent=(1, 0, 0),
                friction=friction[0], position=0.8, name="shoulder")
    m.add_joint("revolute", upper, lower, anchor_parent=(0, 0, -0.2),
                anchor_child=(0, 0, 0.15), axis_parent=(1, 0, 0), friction=friction[1],
                position=-0.4, name="elbow")
    return m


@pytest.mark.parametrize("scheme", SCHEMES)
def test_coupled_joints_hold_together_or_slide_off(scheme):
    """A two-link arm out of its hanging pose: with enough friction on both joints nothing
    moves; with too little at the shoulder the arm falls and its energy only decreases."""
    held = rt.Simulation(_arm((5.0, 2.0)), scheme, dt=2e-3)
    start = held.qpos().copy()
    held.step(500)
    assert np.array_equal(held.qpos(), start) and np.all(np.abs(held.qvel()) <= 1e-15)

    falls = rt.Simulation(_arm((0.5, 2.0)), scheme, dt=2e-3)
    energy = [falls.energy()]
    for _ in range(100):
        falls.step(5)
        energy.append(falls.energy())
    assert falls.qpos()[0] < start[0] - 0.1
    # dissipation: the energy never grows by more than the scheme's own error
    assert np.max(np.diff(energy)) <= 1e-6 * abs(energy[0])


@pytest.mark.parametrize("case", ["pendulum", "arm"])
def test_energy_momentum_loses_exactly_the_friction_work(case):
    """energy() - friction_work() stays put to round-off (1e-9 of the energy asked) while
    the joints slide, turn, stick and slide off again, and the friction did real work."""
    if case == "pendulum":
        sim = rt.Simulation(_pendulum(0.3, np.radians(30.0)), "energy_momentum", dt=1e-3)
    else:  # two coupled joints, the elbow's friction too weak to hold it, swung at 1/120 s
        sim = rt.Simulation(_arm((0.05, 0.02)), "energy_momentum", dt=1 / 120)
        sim.set_qvel([3.0, -2.0])
    e0 = sim.energy()
    drift = []
    for _ in range(300):
        sim.step(10)
        drift.append(sim.energy() - sim.friction_work() - e0)
    assert sim.friction_work() < -0.05  # J: the friction took a good part of the energy
    assert np.max(np.abs(drift)) <= 1e-9 * max(abs(e0), abs(sim.friction_work()))
    snap = sim.snapshot()
    work = sim.friction_work()
    sim.step(5)
    sim.restore(snap)
    assert sim.friction_work() == work  # part of the state


def test_energy_momentum4_refuses_joint_friction_and_says_why():
    with pytest.raises(ValueError, match="does not step joint friction") as e:
        rt.Simulation(_pendulum(0.3, 0.5), "energy_momentum4", dt=1e-3)
    assert "'hinge'" in str(e.value) and "backward" in str(e.value)
    assert "energy_momentum" in str(e.value).split("backward")[1]


def test_the_schemes_that_do_not_count_friction_work_say_nan():
    sim = rt.Simulation(_pendulum(0.3, 0.5), "nullspace_rk4", dt=1e-3)
    sim.step(10)
    assert np.isnan(sim.friction_work())


@pytest.mark.parametrize("kind,kw", [
    ("spherical", {"friction": 0.5}),
    ("revolute", {"friction": -1.0, "axis_parent": (1, 0, 0)}),
    ("revolute", {"friction": float("nan"), "axis_parent": (1, 0, 0)}),
])
def test_bad_joint_friction_is_refused_and_the_model_is_unchanged(kind, kw):
    m = rt.Model()
    b = m.add_body("b", mass=1.0, inertia=(1, 1, 1))
    with pytest.raises(ValueError, match="^friction: "):
        m.add_joint(kind, None, b, **kw)
    assert m.joints == []


def _dropped_pendulum(friction):
    """Two capsule links (0.4 m) with joint friction hanging from a hinge 0.6 m up over the
    ground: released from near horizontal, the lower link lands on the ground."""
    m = rt.Model()
    m.add_ground(friction=0.5)
    parent = None
    for i in range(2):
        m.add_body(f"link{i}", 1.0, (0.014, 0.014, 0.0005),
                   shape=("capsule", {"radius": 0.03, "half_length": 0.2}))
        m.add_joint("revolute", parent, f"link{i}",
                    anchor_parent=(0.0, 0.0, 0.6) if parent is None else (0.0, 0.0, -0.2),
                    anchor_child=(0.0, 0.0, 0.2), axis_parent=(1.0, 0.0, 0.0),
                    friction=friction, position=1.5 if parent is None else 0.0)
        parent = f"link{i}"
    return m


def test_joint_friction_with_contacts_comes_to_rest_on_the_ground_under_euler():
    sim = rt.Simulation(_dropped_pendulum(0.2), "semi_implicit_euler", 1 / 240)
    energy = [sim.energy()]
    deepest = 0.0
    for _ in range(1440):
        sim.step(1)
        energy.append(sim.energy())
        for x, (w, a, b, c) in zip(sim.x, sim.q):  # the capsules' lowest points
            axis_z = 1 - 2 * (a * a + b * b)
            deepest = max(deepest, 0.03 - (x[2] - 0.2 * abs(axis_z)))
    assert deepest <= 1e-3
    assert np.max(np.diff(energy)) <= 0.0  # the impacts and the friction only take energy
    assert sim.x[1, 2] < 0.3 and not np.any(sim.qvel())  # lying on the ground, at rest
    rest = sim.qpos().copy()
    sim.step(2400)
    assert np.max(np.abs(sim.qpos() - rest)) < 1e-3  # 10 s later


def test_rk4_refuses_joint_friction_with_contacts_and_names_euler():
    with pytest.raises(ValueError, match="joint friction in a model with contacts") as e:
        rt.Simulation(_dropped_pendulum(0.2), "nullspace_rk4", 1 / 240)
    assert "semi_implicit_euler" in str(e.value)


def test_a_batch_with_joint_friction_and_contacts_steps_each_copy_as_a_simulation():
    model = _dropped_pendulum(0.2)
    sim = rt.Simulation(model, "semi_implicit_euler", 1 / 240)
    sim.step(500)
    batch = rt.Batch(model, 2, "semi_implicit_euler", dt=1 / 240)
    batch.step(500)
    assert np.array_equal(batch.qpos(), np.stack([sim.qpos()] * 2))


def test_joint_friction_is_internal_a_floating_chain_keeps_its_momentum():
    """A free body with a two-joint arm in zero gravity, its joints spun up against their
    friction: the friction torques act on both sides of each joint, so linear and angular
    momentum stay (to RK4's error) while the friction drains the energy."""
    m = rt.Model(gravity=(0.0, 0.0, 0.0))
    base = m.add_body("base", mass=3.0, inertia=(0.05, 0.06, 0.07))
    a = m.add_body("a", mass=1.0, inertia=(0.01, 0.01, 0.002))
    c = m.add_body("c", mass=0.5, inertia=(0.005, 0.005, 0.001))
    m.add_joint("revolute", base, a, anchor_parent=(0.1, 0, 0), anchor_child=(0, 0, 0.2),
                axis_parent=(1, 0, 0), friction=0.05)
    m.add_joint("revolute", a, c, anchor_parent=(0, 0, -0.2), anchor_child=(0, 0, 0.15),
                axis_parent=(0, 1, 0), friction=0.02)
    sim = rt.Simulation(m, "nullspace_rk4", dt=1e-3)
    sim.set_qvel([0.0, 0.0, 0.0, 0.3, -0.2, 0.5, 4.0, -3.0])
    (p0, l0), e0 = sim.momentum(), sim.energy()
    energy = [e0]
    for _ in range(20):
        sim.step(500)
        energy.append(sim.energy())
        p, l = sim.momentum()
        assert np.max(np.abs(p - p0)) < 1e-9 and np.max(np.abs(l - l0)) < 1e-9
    assert np.all(np.diff(energy) < 0.0) and energy[-1] < 0.95 * e0


def test_energy_momentum_out_of_its_step_budget_never_gains_energy_with_friction():
    """The budget outcome (an explicit step capped to the energy) counts the sliding joints'
    friction in its cap and in friction_work(): energy() - friction_work() never grows."""
    sim = rt.Simulation(_arm((0.05, 0.02)), "energy_momentum", dt=1 / 30, step_budget=3)
    sim.set_qvel([8.0, -6.0])
    balance = [sim.energy() - sim.friction_work()]
    with pytest.warns(RuntimeWarning, match="step_budget"):
        for _ in range(100):
            sim.step()
            balance.append(sim.energy() - sim.friction_work())
    assert sim.solver_stats()["budget_steps"] > 50
    assert sim.friction_work() < 0.0
    assert np.max(np.diff(balance)) <= 1e-12 * abs(balance[0])


def test_a_batch_under_energy_momentum_steps_friction_as_a_simulation():
    model = _arm((0.05, 0.02))
    sim = rt.Simulation(model, "energy_momentum", dt=1 / 120)
    sim.set_qvel([3.0, -2.0])
    sim.step(300)
    batch = rt.Batch(model, 2, "energy_momentum", dt=1 / 120)
    batch.set_qvel(np.array([[3.0, -2.0]] * 2))
    batch.step(300)
    assert sim.friction_work() < -0.1  # the joints slid and stuck
    assert np.array_equal(batch.qpos(), np.stack([sim.qpos()] * 2))
