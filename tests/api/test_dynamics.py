"""Dynamics queries: mass matrix, bias forces, inverse dynamics and Jacobians against MuJoCo on
the same models, against the simulation's own motion, and in computed-torque control."""
import numpy as np
import pytest

import rtrigid as rt
from rtrigid.model import Model
from rtrigid.tools import mujoco_ref
from rtrigid.tools.bench import seven_link_arm
from tests.test_generalized import _single_bodies
from tests.test_multibody import _mixed_tree, randomize_joints

needs_mujoco = pytest.mark.skipif(not mujoco_ref.available(), reason="mujoco is a dev dependency")


def _inertia(rng, mass):
    """Principal moments of a random box (the triangle inequality holds)."""
    a = rng.uniform(0.05, 0.5, 3) ** 2
    return mass / 3.0 * np.array([a[1] + a[2], a[0] + a[2], a[0] + a[1]])


def random_tree(seed, n=7, kinds=("revolute", "prismatic"), free_root=False):
    """n bodies with random masses, inertias, anchors, axes and parents (several roots),
    joint springs and dampers; with ``free_root`` body 0 has no joint (a free body)."""
    rng = np.random.default_rng(seed)
    m = Model(gravity=rng.normal(size=3) * 5.0)
    for i in range(n):
        mass = rng.uniform(0.5, 3.0)
        m.add_body(f"b{i}", mass, _inertia(rng, mass))
    for i in range(1 if free_root else 0, n):
        parent = int(rng.integers(0, i)) if i > 0 and rng.uniform() > 0.2 else None
        kind = kinds[int(rng.integers(len(kinds)))]
        extra = {}
        if kind in ("revolute", "prismatic"):
            extra = dict(axis_parent=rng.normal(size=3), axis_child=rng.normal(size=3),
                         stiffness=rng.uniform(0.0, 5.0), rest=rng.normal(),
                         damping=rng.uniform(0.0, 1.0))
        m.add_joint(kind, parent, i, anchor_parent=0.5 * rng.normal(size=3),
                    anchor_child=0.5 * rng.normal(size=3), **extra)
    return m


def _random_state(sim, rng):
    sim.set_qpos(rng.normal(size=sim.nq))
    sim.set_qvel(2.0 * rng.normal(size=sim.nv))


def random_sim(seed, kinds, free_root, state_seed):
    """(simulation of random_tree(seed, ...) in a random state, the generator that made it)."""
    sim = rt.Simulation(random_tree(seed, kinds=kinds, free_root=free_root), "nullspace_rk4",
                        1e-3)
    rng = np.random.default_rng(state_seed)
    _random_state(sim, rng)
    return sim, rng


def _mujoco_twin(sim):
    import mujoco

    mjm, d, qadr, vadr = mujoco_ref.build_tree(sim.model)
    d.qpos[qadr] = sim.qpos()
    d.qvel[vadr] = sim.qvel()
    mujoco.mj_forward(mjm, d)
    return mjm, d, vadr


def _rel(a, b):
    return np.abs(a - b).max() / max(np.abs(b).max(), 1e-300)


MUJOCO_CASES = [(seed, kinds, free) for seed in range(4)
                for kinds, free in ((("revolute", "prismatic"), False),
                                    (("revolute", "prismatic", "spherical", "fixed"), True))]


@needs_mujoco
@pytest.mark.parametrize("seed,kinds,free_root", MUJOCO_CASES)
def test_mass_matrix_bias_and_inverse_dynamics_agree_with_mujoco(seed, kinds, free_root):
    import mujoco

    sim, rng = random_sim(seed, kinds, free_root, 100 + seed)
    mjm, d, vadr = _mujoco_twin(sim)
    for b in range(sim.nb):  # the same physical model: the centres of mass coincide
        bid = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_BODY, sim.names[b])
        np.testing.assert_allclose(d.xipos[bid], sim.x[b], rtol=0, atol=1e-14)
    full = np.zeros((mjm.nv, mjm.nv))
    mujoco.mj_fullM(mjm, d, full)
    M = sim.mass_matrix()
    assert _rel(M, full[np.ix_(vadr, vadr)]) < 1e-10
    np.testing.assert_array_equal(M, M.T)
    assert _rel(sim.bias_forces(), d.qfrc_bias[vadr]) < 1e-10
    # mj_inverse: M qacc + bias - springs - dampers, which is ours with no other loads
    qacc = rng.normal(size=sim.nv)
    d.qacc[vadr] = qacc
    mujoco.mj_inverse(mjm, d)
    assert _rel(sim.inverse_dynamics(qacc), d.qfrc_inverse[vadr]) < 1e-10
    # MuJoCo's passive forces are what ours accounts for beyond M qacc + bias
    np.testing.assert_allclose(sim.mass_matrix() @ qacc + sim.bias_forces()
                               - sim.inverse_dynamics(qacc), d.qfrc_passive[vadr], rtol=0,
                               atol=1e-10 * np.abs(d.qfrc_inverse).max())


@needs_mujoco
def test_applied_loads_and_held_forces_are_accounted_for_as_mujoco_applies_them():
    import mujoco

    sim = rt.Simulation(random_tree(7, kinds=("revolute", "prismatic", "spherical"),
                                    free_root=True), "nullspace_rk4", 1e-3)
    rng = np.random.default_rng(8)
    _random_state(sim, rng)
    mjm, d, vadr = _mujoco_twin(sim)
    held = rng.normal(size=sim.nv)
    for j, name in enumerate(sim.joint_names):
        sl = slice(*(np.cumsum([0] + [len(sim.joint_velocity(n)) for n in sim.joint_names])
                     [j:j + 2]))
        sim.set_joint_force(name, held[sl])
    qfrc = np.zeros(mjm.nv)
    for b in range(sim.nb):
        f, t = rng.normal(size=3), rng.normal(size=3)
        sim.apply_force(b, f)
        sim.apply_torque(b, t)
        bid = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_BODY, sim.names[b])
        mujoco.mj_applyFT(mjm, d, f, t, d.xipos[bid], bid, qfrc)
    qacc = rng.normal(size=sim.nv)
    d.qacc[vadr] = qacc
    mujoco.mj_inverse(mjm, d)
    expected = d.qfrc_inverse[vadr] - qfrc[vadr] - held
    assert _rel(sim.inverse_dynamics(qacc), expected) < 1e-10


@needs_mujoco
@pytest.mark.parametrize("integrator", ["nullspace_rk4", "energy_momentum"])
def test_single_body_queries_agree_with_mujoco(integrator):
    sim = rt.Simulation(_single_bodies(), integrator, 1e-3)
    assert sim.backend.name == "bodies"
    rng = np.random.default_rng(9)
    _random_state(sim, rng)
    sim.step(20)
    mjm, d, vadr = _mujoco_twin(sim)
    import mujoco

    full = np.zeros((mjm.nv, mjm.nv))
    mujoco.mj_fullM(mjm, d, full)
    assert _rel(sim.mass_matrix(), full[np.ix_(vadr, vadr)]) < 1e-10
    assert _rel(sim.bias_forces(), d.qfrc_bias[vadr]) < 1e-10
    qacc = rng.normal(size=sim.nv)
    d.qacc[vadr] = qacc
    mujoco.mj_inverse(mjm, d)
    assert _rel(sim.inverse_dynamics(qacc), d.qfrc_inverse[vadr]) < 1e-10


@needs_mujoco
def test_jacobian_agrees_with_mujoco():
    import mujoco

    sim = rt.Simulation(random_tree(3, kinds=("revolute", "prismatic", "spherical"),
                                    free_root=True), "nullspace_rk4", 1e-3)
    rng = np.random.default_rng(10)
    _random_state(sim, rng)
    mjm, d, vadr = _mujoco_twin(sim)
    for b in range(sim.nb):
        p = rng.normal(size=3)
        bid = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_BODY, sim.names[b])
        jacp, jacr = np.zeros((3, mjm.nv)), np.zeros((3, mjm.nv))
        point = sim.x[b] + rt.quat.rotate(sim.q[b], p, np.empty(3))
        mujoco.mj_jac(mjm, d, jacp, jacr, point, bid)
        J = sim.jacobian(b, point_body=p)
        assert _rel(J, np.vstack([jacp, jacr])[:, vadr]) < 1e-12


@pytest.mark.parametrize("integrator,kinds", [
    ("nullspace_rk4", ["spherical", "revolute", "prismatic", "cylindrical", "planar", "fixed"]),
    ("energy_momentum", ["spherical", "revolute", "fixed", "revolute"]),
])
def test_jacobian_times_qvel_is_the_point_velocity_for_every_joint_kind(integrator, kinds):
    sim = rt.Simulation(_mixed_tree(kinds, seed=11), integrator, dt=1.0 / 240.0)
    randomize_joints(sim, np.random.default_rng(12))
    rng = np.random.default_rng(13)
    for _ in range(3):
        sim.step(7)
        for b in range(sim.nb):
            p = rng.normal(size=3)
            v, w = sim.velocity(b)
            point = v + np.cross(w, rt.quat.rotate(sim.q[b], p, np.empty(3)))
            got = sim.jacobian(b, p) @ sim.qvel()
            scale = max(1.0, np.abs(point).max(), np.abs(w).max())
            assert np.abs(got[:3] - point).max() < 1e-14 * scale
            assert np.abs(got[3:] - w).max() < 1e-14 * scale


def test_jacobian_of_single_bodies_gives_their_velocities():
    sim = rt.Simulation(_single_bodies(), "energy_momentum", 1e-3)
    _random_state(sim, np.random.default_rng(14))
    sim.step(10)
    for b in range(2):
        J = sim.jacobian(b)
        np.testing.assert_allclose(J @ sim.qvel(), np.r_[sim.velocity(b)], rtol=0, atol=1e-14)


def test_inverse_dynamics_accounts_for_every_load_the_simulation_applies():
    """Along a motion driven by applied loads, point springs, joint springs and dampers and
    held joint forces, inverse_dynamics of the motion's own acceleration (central
    differences of qvel) is zero: nothing more is needed to produce it."""
    m = _mixed_tree(["revolute", "prismatic", "spherical", "cylindrical", "planar"], seed=15)
    for j in m.joints:
        if j.kind in ("revolute", "prismatic"):
            j.stiffness, j.rest, j.damping = 3.0, 0.2, 0.4
    m.add_spring(2, (0.1, 0.0, 0.2), (0.5, -0.3, 1.0), stiffness=20.0, rest_length=0.3)
    m.add_spring_between(1, (0.0, 0.1, 0.0), 4, (0.2, 0.0, -0.1), stiffness=15.0)
    h = 1e-5
    sim = rt.Simulation(m, "nullspace_rk4", h)
    rng = np.random.default_rng(16)
    randomize_joints(sim, rng)
    for b in range(sim.nb):
        sim.apply_force(b, rng.normal(size=3), point=rng.normal(size=3), frame="body")
        sim.apply_torque(b, rng.normal(size=3))
    for name in sim.joint_names:
        sim.set_joint_force(name, rng.normal(size=len(sim.joint_velocity(name))))
    sim.step(100)
    v0 = sim.qvel()
    sim.step(1)
    tau_check = sim.inverse_dynamics  # evaluated at the middle state
    snap = sim.snapshot()
    sim.step(1)
    v2 = sim.qvel()
    sim.restore(snap)
    qacc = (v2 - v0) / (2.0 * h)
    held = np.concatenate([sim.joint_force(n) for n in sim.joint_names])
    scale = np.abs(sim.mass_matrix() @ qacc).max() + np.abs(held).max()
    assert np.abs(tau_check(qacc)).max() < 1e-7 * scale  # central difference: O(h^2)
    # and the held forces alone do not explain it: the check is not vacuous
    assert np.abs(sim.mass_matrix() @ qacc + sim.bias_forces() - held).max() > 1e-2 * scale


def test_queries_refuse_bad_input_and_change_nothing():
    sim = rt.scenarios.build("chain", integrator="nullspace_rk4", n=3)
    sim.step(3)
    before = sim.backend.S.copy(), sim.backend.A.copy()
    for call, field in [(lambda: sim.inverse_dynamics(np.zeros(sim.nv + 1)), "qacc"),
                        (lambda: sim.inverse_dynamics(np.full(sim.nv, np.nan)), "qacc"),
                        (lambda: sim.jacobian("nope"), "body"),
                        (lambda: sim.jacobian(0, point_body=(0.0, np.inf, 0.0)), "point_body"),
                        (lambda: sim.jacobian(0, point_body=(0.0, 0.0)), "point_body")]:
        with pytest.raises(ValueError, match=f"^{field}"):
            call()
    np.testing.assert_array_equal(sim.backend.S, before[0])
    np.testing.assert_array_equal(sim.backend.A, before[1])


def test_computed_torque_control_tracks_a_smooth_trajectory_on_a_7_link_arm():
    """tau = M(q) (qdd_d + Kd e' + Kp e) + bias at 1 kHz keeps a 7-link arm on a smooth
    trajectory to 1e-6 rad under nullspace_rk4 at dt = 1 ms.

    The torque is held over each step (a zero-order hold), so the controller evaluates the
    model at the state it predicts for mid-step (its own Simulation of the arm, moved there
    with set_qpos/set_qvel): the mean torque the step needs.  Measured: 5.8e-7 rad (seeds
    18, 19: 6.0e-7, 7.3e-7); with the torque of the state at the start of the step the hold
    alone costs 3.5e-5 rad (it lags by dt/2 what the light roll joints need)."""
    dt = 1e-3
    rng = np.random.default_rng(17)
    amp, omega = 0.3 * rng.uniform(0.6, 1.0, 7), 0.5 * np.pi * rng.uniform(0.6, 1.0, 7)
    phase, q0 = rng.uniform(0.0, 2.0 * np.pi, 7), rng.normal(scale=0.3, size=7)

    def desired(t):
        s, c = np.sin(omega * t + phase), np.cos(omega * t + phase)
        return q0 + amp * s, amp * omega * c, -amp * omega ** 2 * s

    arm = rt.Simulation(seven_link_arm(), "nullspace_rk4", dt)
    model = rt.Simulation(seven_link_arm(), "nullspace_rk4", dt)  # the controller's own
    qd, vd, _ = desired(0.0)
    arm.set_qpos(qd)
    arm.set_qvel(vd)
    kp, kd = 2500.0, 100.0  # critically damped at 50 rad/s
    worst = 0.0
    for k in range(4000):
        t = arm.t
        q, v = arm.qpos(), arm.qvel()
        qd, vd, _ = desired(t)
        acc = desired(t + 0.5 * dt)[2] + kd * (vd - v) + kp * (qd - q)
        model.set_qpos(q + 0.5 * dt * v + 0.125 * dt * dt * acc)
        model.set_qvel(v + 0.5 * dt * acc)
        tau = model.mass_matrix() @ acc + model.bias_forces()
        if k % 1000 == 0:  # the same torque, from the other query
            np.testing.assert_allclose(model.inverse_dynamics(acc), tau, rtol=0,
                                       atol=1e-12 * np.abs(tau).max())
        for j in range(7):
            arm.set_joint_force(j, tau[j])
        arm.step()
        worst = max(worst, np.abs(arm.qpos() - desired(arm.t)[0]).max())
    assert worst <= 1e-6
    assert np.abs(arm.qpos() - q0).max() > 0.1  # it did move
