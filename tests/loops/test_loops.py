"""Closed loops: loop joints on the tree, null-space method under nullspace_rk4.

References: the four-bar's closed-form kinematics and the one-degree-of-freedom energy
quadrature (scipy), Bennett's closure relation, and the joints' own residual functions.
"""
import numpy as np
import pytest

import rtrigid as rt
from rtrigid.maths import quat
from rtrigid.model import Model
from rtrigid.scenarios import bennett_theta2, four_bar_angles

PLANE = (0.0, -1.0, 0.0)
LENGTHS = dict(crank=0.1, coupler=0.35, rocker=0.3, ground=0.4)


def _pin_velocities(sim, a, b, point_a, point_b):
    v = sim.qvel()
    return sim.jacobian(a, point_a) @ v, sim.jacobian(b, point_b) @ v


def test_four_bar_stays_closed_to_round_off_with_exact_pin_velocities():
    sim = rt.scenarios.build("four_bar", integrator="nullspace_rk4", dt=1.0 / 240.0)
    b, c = LENGTHS["coupler"], LENGTHS["rocker"]
    worst = worst_v = 0.0
    for _ in range(480):
        sim.step()
        worst = max(worst, sim.constraint_error())
        va, vb = _pin_velocities(sim, "coupler", "rocker", (b / 2, 0, 0), (c / 2, 0, 0))
        # the pin's linear velocity agrees; the relative turn is about the pin axis only
        worst_v = max(worst_v, np.max(np.abs(va[:3] - vb[:3])),
                      np.max(np.abs((va[3:] - vb[3:])[[0, 2]])))
    assert worst <= 1e-12
    assert worst_v <= 1e-12 * max(1.0, np.max(np.abs(sim.qvel())))
    assert sim.joint_position("crank")[0] > 0.5 + 2 * np.pi  # the crank turned fully


def _crank_angle_at(sim, t_end):
    sim.step(int(round(t_end / sim.dt)))
    return sim.qpos()


def test_four_bar_is_fourth_order():
    t_end = 0.5
    ref = _crank_angle_at(rt.scenarios.build("four_bar", dt=1.0 / 3200.0), t_end)
    errs = [np.max(np.abs(_crank_angle_at(rt.scenarios.build("four_bar", dt=dt), t_end) - ref))
            for dt in (1.0 / 100.0, 1.0 / 200.0)]
    order = np.log2(errs[0] / errs[1])
    assert 3.8 < order < 4.3, (errs, order)


def _energy_coefficients(theta, flywheel=(2.0, 0.08), g=9.81):
    """(m(theta), V(theta)): kinetic energy 1/2 m theta_dot^2 and potential of the four-bar
    from its closed-form kinematics (complex-step derivatives), independent of the tree."""
    a, b, c, d = (LENGTHS[k] for k in ("crank", "coupler", "rocker", "ground"))
    h = 1e-30
    phi, psi = four_bar_angles(theta, a, b, c, d)
    # complex step through the closed form: d/dtheta of the coupler and rocker angles
    dphi, dpsi = (x.imag / h for x in _complex_angles(theta + 1j * h, a, b, c, d))
    mf, rf = flywheel
    mb, mc = b, c  # rods of 1 kg/m
    vx = -a * np.sin(theta) - b / 2 * np.sin(phi) * dphi
    vz = a * np.cos(theta) + b / 2 * np.cos(phi) * dphi
    m = (0.5 * mf * rf ** 2 + mb * (vx ** 2 + vz ** 2) + mb * b ** 2 / 12 * dphi ** 2
         + mc * c ** 2 / 3 * dpsi ** 2)
    V = g * (mb * (a * np.sin(theta) + b / 2 * np.sin(phi)) + mc * c / 2 * np.sin(psi))
    return m, V


def _complex_angles(theta, a, b, c, d):
    ax, az = a * np.cos(theta), a * np.sin(theta)
    ex, ez = d - ax, -az
    span = np.sqrt(ex * ex + ez * ez)
    along = (b * b - c * c + span * span) / (2 * span)
    hh = np.sqrt(b * b - along * along)
    bx = ax + (along * ex - hh * ez) / span
    bz = az + (along * ez + hh * ex) / span
    return _atan2(bz - az, bx - ax), _atan2(bz, bx - d)


def _atan2(y, x):
    """atan2 that carries a complex step (the real part chooses the branch)."""
    base = np.arctan2(y.real, x.real)
    return base + 1j * ((x.real * y.imag - y.real * x.imag) / (x.real ** 2 + y.real ** 2))


def test_crank_turn_time_matches_the_energy_quadrature():
    integrate = pytest.importorskip("scipy.integrate")
    theta0, omega0 = 0.5, 8.0
    sim = rt.scenarios.build("four_bar", dt=1e-3, theta0=theta0, omega0=omega0)
    m0, V0 = _energy_coefficients(theta0)
    E = 0.5 * m0 * omega0 ** 2 + V0
    # the same energy, read from the simulation (its own masses, tree and loop)
    assert abs(sim.energy() - E) <= 1e-12 * abs(E)
    target = theta0 + 2 * np.pi

    def rate(th):
        m, V = _energy_coefficients(th)
        return np.sqrt(2 * (E - V) / m)

    expected, err = integrate.quad(lambda th: 1.0 / rate(th), theta0, target, epsabs=0,
                                   epsrel=1e-13, limit=400)
    th_prev, w_prev = theta0, omega0
    while True:
        sim.step()
        th, w = sim.qpos()[0], sim.qvel()[0]
        if th >= target:
            break
        th_prev, w_prev = th, w
    # the crossing inside the last step: cubic Hermite in time through (theta, theta_dot)
    h, t0 = sim.dt, sim.t - sim.dt
    lo, hi = 0.0, 1.0
    for _ in range(80):
        s = 0.5 * (lo + hi)
        h00, h10 = 2 * s ** 3 - 3 * s ** 2 + 1, s ** 3 - 2 * s ** 2 + s
        h01, h11 = -2 * s ** 3 + 3 * s ** 2, s ** 3 - s ** 2
        value = h00 * th_prev + h10 * h * w_prev + h01 * th + h11 * h * w
        lo, hi = (s, hi) if value < target else (lo, s)
    t_cross = t0 + lo * h
    assert abs(t_cross - expected) <= 1e-8 * expected, (t_cross, expected)


def test_bennett_moves_with_one_degree_of_freedom_and_stays_closed():
    sim = rt.scenarios.build("bennett", dt=1.0 / 240.0, alpha=50.0, beta=80.0)
    al, be = np.radians(50.0), np.radians(80.0)
    th1_seen = []
    for _ in range(480):
        sim.step()
        th1, th2, th3 = sim.qpos()
        assert sim.constraint_error() <= 1e-12
        # every coordinate follows from the first: the closure's one degree of freedom
        assert abs(np.sin(th1 + th3)) <= 1e-10
        assert abs(np.sin((th2 - bennett_theta2(th1, al, be)) / 2)) <= 1e-10
        th1_seen.append(th1)
    assert np.ptp(th1_seen) > 1.0  # it moved


def _triangle(closing="revolute"):
    m = Model(gravity=(0, 0, -9.81))
    for name in ("a", "b"):
        m.add_body(name, 1.0, (1e-3, 1e-2, 1e-2))
    m.add_joint("revolute", None, "a", anchor_child=(-0.5, 0, 0), axis_parent=PLANE)
    m.add_joint("revolute", "a", "b", anchor_parent=(0.5, 0, 0), anchor_child=(-0.5, 0, 0),
                axis_parent=PLANE, position=2 * np.pi / 3)
    # b's far end meets the world at (0.5, 0, sqrt(3)/2): an equilateral triangle
    m.add_loop_joint(closing, None, "b", anchor_parent=(0.5, 0, np.sqrt(3) / 2),
                     anchor_child=(0.5, 0, 0), axis_parent=PLANE)
    return m


def test_a_locked_mechanism_is_refused():
    with pytest.raises(ValueError, match="locked"):
        rt.Simulation(_triangle(), "nullspace_rk4", dt=1e-3)


def _parallelogram(theta, elbow="revolute"):
    """Crank 0.2, coupler 0.4, rocker 0.2, ground 0.4: at theta = 0 all four lie on a line,
    where the parallelogram and the folded branches cross (a singular configuration)."""
    a, b = 0.2, 0.4
    m = Model()
    for name, ln in (("crank", a), ("coupler", b), ("rocker", a)):
        m.add_body(name, ln, (1e-5, ln ** 3 / 12, ln ** 3 / 12))
    m.add_joint("revolute", None, "crank", anchor_child=(-a / 2, 0, 0), axis_parent=PLANE,
                position=theta)
    if elbow == "revolute":
        m.add_joint("revolute", "crank", "coupler", anchor_parent=(a / 2, 0, 0),
                    anchor_child=(-b / 2, 0, 0), axis_parent=PLANE, position=-theta)
    else:  # a ball at the elbow, starting as the revolute one would
        m.add_joint("spherical", "crank", "coupler", anchor_parent=(a / 2, 0, 0),
                    anchor_child=(-b / 2, 0, 0))
    m.add_joint("revolute", None, "rocker", anchor_parent=(b, 0, 0), anchor_child=(-a / 2, 0, 0),
                axis_parent=PLANE, position=theta)
    m.add_loop_joint("revolute", "coupler", "rocker", anchor_parent=(b / 2, 0, 0),
                     anchor_child=(a / 2, 0, 0), axis_parent=PLANE)
    return m


def test_a_singular_configuration_is_refused_and_a_regular_one_is_not():
    with pytest.raises(ValueError, match="singular"):
        rt.Simulation(_parallelogram(0.0), "nullspace_rk4", dt=1e-3)
    sim = rt.Simulation(_parallelogram(0.4), "nullspace_rk4", dt=1e-3)
    assert sim.constraint_error() <= 1e-13


def test_loops_are_refused_by_schemes_without_them():
    m = _parallelogram(0.4)
    for integrator in rt.integrators.names():
        if not rt.integrators.get(integrator).loops:
            with pytest.raises(ValueError, match="integrator: .*loop"):
                rt.Simulation(m, integrator, dt=1e-3)


def test_batches_of_loop_models_are_decided_by_the_registry():
    # the one place: Integrator.refusal, which Simulation and Batch both ask; every scheme
    # that steps loops runs them as one compiled kernel a Batch runs per copy
    # (tests/loops/test_batch_loops.py); a scheme without a loop step is refused alone and batched
    m = _parallelogram(0.4)
    m.add_actuator(0, "motor")
    for name in ("nullspace_rk4", "energy_momentum", "energy_momentum4"):
        entry = rt.integrators.get(name)
        assert entry.refusal("tree", m.inbound_joints(), m.loop_joints, m.actuators) is None
        assert entry.refusal("tree", m.inbound_joints(), m.loop_joints, m.actuators,
                             batched=True) is None
    euler = rt.integrators.get("semi_implicit_euler")
    why = euler.refusal("tree", m.inbound_joints(), m.loop_joints, m.actuators, batched=True)
    assert "does not step closed loops" in why and "'energy_momentum'" in why
    with pytest.raises(ValueError, match="semi_implicit_euler does not step closed loops"):
        rt.Batch(m, n=2, integrator="semi_implicit_euler")


def test_em_steps_loops_through_a_ball_joint():
    # the tree's quaternions go through the step's Cayley chart (loops.step_chart)
    sim = rt.Simulation(_parallelogram(0.4, elbow="spherical"), "energy_momentum", dt=1e-3)
    sim.set_joint_velocity(0, [2.0])
    E0 = sim.energy()
    sim.step(50)
    assert abs(sim.energy() - E0) <= 1e-12 * abs(E0)
    assert sim.constraint_error() <= 1e-12
    assert abs(sim.joint_position(0)[0] - 0.4) > 0.05


def test_em_steps_a_loop_through_massless_links():
    """A universal pair of revolute joints (a massless link between them, as a file body with
    two joints loads) and a ball joint, closed to the world by a ball joint: energy_momentum
    keeps the energy and the closure and follows nullspace_rk4 to its order."""
    m = Model()
    m.add_body("link", 0.0, np.zeros(3), massless=True)
    m.add_body("a", 1.0, (0.02, 0.03, 0.04))
    m.add_body("b", 1.0, (0.02, 0.03, 0.04))
    m.add_joint("revolute", None, "link", anchor_parent=(0, 0, 1), axis_parent=(1, 0, 0))
    m.add_joint("revolute", "link", "a", anchor_child=(0, 0, 0.25), axis_parent=(0, 1, 0))
    m.add_joint("spherical", "a", "b", anchor_parent=(0, 0, -0.25), anchor_child=(0, 0, 0.25))
    m.add_loop_joint("spherical", None, "b", anchor_parent=(0.2, 0.1, 0.2),
                     anchor_child=(0, 0, -0.25))
    sims = [rt.Simulation(m, s, dt=5e-3) for s in ("nullspace_rk4", "energy_momentum")]
    for sim in sims:
        sim.set_qvel(np.random.default_rng(0).normal(size=sim.nv))
    E0 = sims[1].energy()
    for sim in sims:
        sim.step(400)
    assert abs(sims[1].energy() - E0) <= 1e-12 * abs(E0)
    assert sims[1].constraint_error() <= 1e-12
    assert np.max(np.abs(sims[1].qpos() - sims[0].qpos())) < 5e-5  # measured 1.1e-5


# -- energy_momentum(4): the discrete-gradient step with the discrete null space ---------------
@pytest.mark.slow
def test_em_four_bar_keeps_energy_and_closure_over_1e4_steps():
    sim = rt.scenarios.build("four_bar", integrator="energy_momentum", dt=1.0 / 240.0)
    E0 = sim.energy()
    worst_e = worst_c = 0.0
    for _ in range(100):
        for _ in range(100):
            sim.step()
            worst_c = max(worst_c, sim.constraint_error())
        worst_e = max(worst_e, abs(sim.energy() - E0))
    assert worst_e <= 1e-10 * abs(E0), worst_e / abs(E0)
    assert worst_c <= 1e-10
    assert sim.steps_taken == 10000


@pytest.mark.parametrize("integrator", ["energy_momentum", "energy_momentum4"])
@pytest.mark.parametrize("name", ["four_bar", "bennett"])
def test_em_loops_keep_energy_and_closure(name, integrator):
    sim = rt.scenarios.build(name, integrator=integrator, dt=1.0 / 120.0)
    E0 = sim.energy()
    for _ in range(60):
        sim.step()
        assert sim.constraint_error() <= 1e-12
        assert abs(sim.energy() - E0) <= 1e-12 * abs(E0)


def _moving_delta(integrator, dt):
    """The delta robot with its arms set turning (the loops close the other rates)."""
    sim = rt.scenarios.build("delta_robot", integrator=integrator, dt=dt)
    for i, rate in enumerate((1.5, -0.7, 0.4)):
        sim.set_joint_velocity(f"arm{i}", [rate])
    return sim


@pytest.mark.parametrize("integrator", ["energy_momentum",
                                        pytest.param("energy_momentum4", marks=pytest.mark.slow)])
def test_em_delta_robot_keeps_energy_and_closure(integrator):
    sim = _moving_delta(integrator, 1.0 / 240.0)
    E0 = sim.energy()
    for _ in range(12):
        sim.step()
        assert sim.constraint_error() <= 1e-12
        assert abs(sim.energy() - E0) <= 1e-12 * abs(E0)
        q = sim.pose("platform")[1]
        assert np.max(np.abs(q[1:])) <= 1e-10  # the parallelograms keep the platform level


@pytest.mark.slow
def test_em_delta_robot_falls_for_10_s_keeping_energy_and_closure():
    # no motors: it falls and swings, the rods whirling; their free spins are out of the
    # solve (loops.spin_links), which failed at step 293 while they were unknowns
    sim = rt.scenarios.build("delta_robot", integrator="energy_momentum", dt=1.0 / 240.0)
    E0, x0 = sim.energy(), sim.pose("platform")[0]
    drift, closure, moved = [], [], []
    for _ in range(2400):
        sim.step()
        drift.append(abs(sim.energy() - E0) / abs(E0))
        closure.append(sim.constraint_error())
        moved.append(np.linalg.norm(sim.pose("platform")[0] - x0))
    assert max(drift) <= 1e-10 and max(closure) <= 1e-10, (max(drift), max(closure))
    assert sim.solver_stats()["fallback_steps"] <= 5, sim.solver_stats()
    assert max(moved) > 0.05 and sim.steps_taken == 2400


def test_em_delta_rods_keep_their_spins():
    # a ball-ended rod's spin about its own axis is a conserved momentum, I_axial omega . u:
    # the step holds it (it is no unknown), with the energy and the closure; read back as a
    # rate through K^-1 (the axial inertia 1/1350 of the transverse) it keeps ~11 digits
    sim = _moving_delta("energy_momentum", 1.0 / 240.0)
    rods = [f"rod{i}{s}" for i in range(3) for s in "ab"]
    for k, rod in enumerate(rods):
        sim.set_joint_velocity(rod, [3.0 * (k - 2.5), 0.0, 0.0])  # about the rod's axis (x)
    spins = lambda: np.array([sim.velocity(r, frame="body")[1][0] for r in rods])  # noqa: E731
    s0, E0 = spins(), sim.energy()
    assert np.min(np.abs(s0)) > 1.0
    for _ in range(40):
        sim.step()
        assert np.max(np.abs(spins() - s0)) <= 1e-10 * np.max(np.abs(s0))
        assert abs(sim.energy() - E0) <= 1e-12 * abs(E0)
        assert sim.constraint_error() <= 1e-12


def _delta_state_at(sim, t_end):
    sim.step(int(round(t_end / sim.dt)))
    return np.concatenate([sim.pose("platform")[0]]
                          + [np.atleast_1d(sim.joint_position(f"arm{i}")) for i in range(3)])


def test_em_delta_robot_is_second_order_against_rk4():
    t_end = 0.05
    ref = _delta_state_at(_moving_delta("nullspace_rk4", 1.0 / 1920.0), t_end)
    errs = [np.max(np.abs(_delta_state_at(_moving_delta("energy_momentum", dt), t_end) - ref))
            for dt in (1.0 / 120.0, 1.0 / 240.0)]
    order = np.log2(errs[0] / errs[1])
    assert abs(order - 2.0) < 0.3, (errs, order)


def test_em_loops_are_second_and_fourth_order():
    t_end = 0.25
    ref = _crank_angle_at(rt.scenarios.build("four_bar", dt=1.0 / 3200.0), t_end)
    for integrator, dts, want in (("energy_momentum", (1 / 200, 1 / 400), 2.0),
                                  ("energy_momentum4", (1 / 40, 1 / 80), 4.0)):
        errs = [np.max(np.abs(_crank_angle_at(
            rt.scenarios.build("four_bar", integrator=integrator, dt=dt), t_end) - ref))
            for dt in dts]
        order = np.log2(errs[0] / errs[1])
        assert abs(order - want) < 0.3, (integrator, errs, order)


def test_loop_joints_are_listed_in_their_bodies_frames():
    sim = rt.scenarios.build("delta_robot", dt=1.0 / 240.0)
    sim.step(10)
    loops = sim.loop_joints()
    assert [j["name"] for j in loops] == [j.name for j in sim.model.loop_joints]
    for j in loops:
        assert j["kind"] == "spherical" and j["axis_child"] is None
        xc, qc = sim.pose(j["child"])
        xp, qp = sim.pose(j["parent"])
        on_child = xc + quat.rotate(qc, j["anchor_child"], np.empty(3))
        on_parent = xp + quat.rotate(qp, j["anchor_parent"], np.empty(3))
        assert np.max(np.abs(on_child - on_parent)) <= 1e-12  # the loop closes there
    four = rt.scenarios.build("four_bar").loop_joints()[0]
    assert four["kind"] == "revolute" and abs(np.linalg.norm(four["axis_child"]) - 1.0) < 1e-12


def test_add_joint_points_to_add_loop_joint_and_loop_joints_are_checked():
    m = Model()
    m.add_body("a", 1.0, (1, 1, 1))
    m.add_body("b", 1.0, (1, 1, 1))
    m.add_joint("spherical", None, "a")
    m.add_joint("spherical", "a", "b")
    with pytest.raises(ValueError, match="add_loop_joint"):
        m.add_joint("spherical", None, "b")
    with pytest.raises(ValueError, match="add_loop_joint"):
        m.add_joint("spherical", "b", "a")
    with pytest.raises(ValueError, match="kind"):
        m.add_loop_joint("screw", None, "b")
    with pytest.raises(ValueError, match="axis_parent"):
        m.add_loop_joint("revolute", None, "b")
    with pytest.raises(ValueError, match="child"):
        m.add_loop_joint("spherical", "b", "b")
    assert m.add_loop_joint("spherical", None, "b") == "loop_b"
    with pytest.raises(ValueError, match="name"):
        m.add_loop_joint("spherical", "a", "b")  # loop_b again
    with pytest.raises(ValueError, match="position"):
        m.add_joint("spherical", None, m.add_body("c", 1.0, (1, 1, 1)), position=0.3)
    with pytest.raises(ValueError, match="position"):
        m.add_joint("fixed", None, m.add_body("d", 1.0, (1, 1, 1)), position=[])


def test_writes_close_the_loop_keeping_what_was_written_or_are_refused():
    sim = rt.scenarios.build("four_bar")
    sim.set_joint_position("crank", [1.2])
    assert sim.joint_position("crank")[0] == 1.2
    assert sim.constraint_error() <= 1e-13
    sim.set_joint_velocity("crank", [-3.0])
    assert sim.joint_velocity("crank")[0] == -3.0
    b, c = LENGTHS["coupler"], LENGTHS["rocker"]
    va, vb = _pin_velocities(sim, "coupler", "rocker", (b / 2, 0, 0), (c / 2, 0, 0))
    assert np.max(np.abs(va[:3] - vb[:3])) <= 1e-13
    before = sim.snapshot()
    q, v = sim.qpos(), sim.qvel()
    with pytest.raises(ValueError, match="value"):
        sim.set_joint_position("rocker", [-1.5])  # the rocker cannot reach down there
    assert np.array_equal(sim.qpos(), q) and np.array_equal(sim.qvel(), v)
    sim.restore(before)


def test_an_impulse_is_carried_by_the_loop():
    sim = rt.scenarios.build("four_bar", omega0=0.0)
    b, c = LENGTHS["coupler"], LENGTHS["rocker"]
    sim.apply_impulse("coupler", (0.0, 0.0, 0.2), point=None)
    va, vb = _pin_velocities(sim, "coupler", "rocker", (b / 2, 0, 0), (c / 2, 0, 0))
    assert np.max(np.abs(va[:3] - vb[:3])) <= 1e-13
    assert np.max(np.abs(sim.qvel())) > 0.1
    # the kinetic energy of an impulse from rest is 1/2 p^2 / m_eff along the mechanism's
    # one free direction: positive and no more than what the free coupler would take
    assert 0.0 < sim.kinetic_energy() < 0.5 * 0.2 ** 2 / b


def test_delta_robot_stays_closed_and_level():
    sim = rt.scenarios.build("delta_robot", dt=1.0 / 240.0)
    z0 = sim.pose("platform")[0][2]
    for _ in range(120):
        sim.step()
        assert sim.constraint_error() <= 1e-12
        q = sim.pose("platform")[1]
        assert np.max(np.abs(q[1:])) <= 1e-10  # the parallelograms keep the platform level
    assert abs(sim.pose("platform")[0][2] - z0) > 0.01  # it moved (no motors: it swings)


@pytest.mark.parametrize("name", ["four_bar", "slider_crank", "bennett", "delta_robot"])
def test_mujoco_twin_sees_the_loops_closed(name):
    """MuJoCo's equality constraints (connect at the loop joints' anchors) read our closed
    configuration as closed: an independent check of where the loop joints put the bodies."""
    mujoco = pytest.importorskip("mujoco")
    from rtrigid.references import mujoco_ref

    sim = rt.scenarios.build(name)
    model, data, qadr, vadr = mujoco_ref.build_tree(sim.model, dt=1e-3)
    data.qpos[qadr], data.qvel[vadr] = sim.qpos(), sim.qvel()
    mujoco.mj_forward(model, data)
    assert model.neq == {"four_bar": 2, "slider_crank": 2, "bennett": 2, "delta_robot": 5}[name]
    assert data.nefc > 0 and np.max(np.abs(data.efc_pos)) <= 1e-13
    # and the constraint velocities vanish with our rates
    assert np.max(np.abs(data.efc_vel)) <= 1e-12 * max(1.0, np.max(np.abs(data.qvel)))


def _ball_chain_closed_by(kind):
    """Three bodies on ball joints from the world, the last closed to the world by a loop
    joint of ``kind`` where it stands at zero coordinates (skew anchors, a skew axis)."""
    m = Model()
    anchors = [((0.0, 0.0, 0.0), (-0.2, 0.05, 0.1)), ((0.2, -0.05, 0.1), (-0.15, 0.1, 0.0)),
               ((0.15, 0.0, 0.1), (-0.1, 0.05, 0.05))]
    x = np.zeros(3)
    for i, (ap, ac) in enumerate(anchors):
        m.add_body(f"b{i}", 1.0 - 0.2 * i, (0.02, 0.03, 0.04))
        joint_point = np.array(ap) if i == 0 else x + np.array(ap)
        x = joint_point - np.array(ac)
        m.add_joint("spherical", None if i == 0 else f"b{i - 1}", f"b{i}", anchor_parent=ap,
                    anchor_child=ac)
    tip = np.array([0.1, -0.05, 0.1])
    axis = np.array([0.3, 0.5, 0.8]) / np.linalg.norm([0.3, 0.5, 0.8])
    axial = kind in ("revolute", "prismatic", "cylindrical", "planar")
    m.add_loop_joint(kind, None, "b2", anchor_parent=x + tip, anchor_child=tip,
                     axis_parent=axis if axial else None)
    return m


@pytest.mark.parametrize("kind", ["spherical", "revolute", "prismatic", "cylindrical", "planar",
                                  "fixed"])
def test_every_joint_kind_closes_a_loop(kind):
    """Each kind's rows, Jacobian and acceleration terms: the loop stays closed by the joints'
    own residuals (rtrigid.joints), and energy is kept to RK4's accuracy -- a wrong
    acceleration term would make the projection fight the motion and lose energy."""
    sim = rt.Simulation(_ball_chain_closed_by(kind), "nullspace_rk4", dt=1e-3)
    rng = np.random.default_rng(3)
    sim.set_qvel(rng.standard_normal(sim.nv))
    assert np.max(np.abs(sim.qvel())) > 0.1  # the loop leaves some motion
    E0 = sim.energy()
    for _ in range(200):
        sim.step()
        assert sim.constraint_error() <= 1e-12
    assert abs(sim.energy() - E0) <= 1e-8 * max(1.0, abs(E0))


@pytest.mark.parametrize("integrator", ["nullspace_rk4", "energy_momentum"])
def test_snapshots_of_loops_are_bit_exact_and_refused_elsewhere(integrator):
    sim = rt.scenarios.build("four_bar", integrator=integrator)
    sim.step(3)
    snap = sim.snapshot()
    sim.step(5)
    q, v = sim.qpos(), sim.qvel()
    sim.restore(snap)
    sim.step(5)
    assert np.array_equal(sim.qpos(), q) and np.array_equal(sim.qvel(), v)
    other = rt.scenarios.build("four_bar", integrator=integrator, coupler=0.36)
    with pytest.raises(ValueError, match="snap"):
        other.restore(snap)


def test_em_loop_step_falls_back_to_sub_steps_when_newton_fails():
    # a quarter-second step: the crank turns by ~2 rad, too far for the first solve
    sim = rt.Simulation(rt.scenarios.build("four_bar").model, "energy_momentum", dt=0.25)
    sim.set_joint_velocity("crank", [8.0])
    E0 = sim.energy()
    with pytest.warns(RuntimeWarning, match="sub-steps"):
        sim.step(5)
    assert sim.solver_stats()["fallback_steps"] > 0
    assert abs(sim.energy() - E0) <= 1e-12 * abs(E0)
    assert sim.constraint_error() <= 1e-12
