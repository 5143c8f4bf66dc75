"""Dynamics queries: mass matrix, bias forces, inverse dynamics and Jacobians against MuJoCo on
the same models, against the simulation's own motion, and in computed-torque control."""
import numpy as np
import pytest

import rtrigid as rt
from rtrigid.references import mujoco_ref
from rtrigid.tools.bench import seven_link_arm
from tests.helpers import (MUJOCO_CASES, random_sim, random_state, random_tree, randomize_joints,
                           single_bodies, tree_of_kinds)

needs_mujoco = pytest.mark.skipif(not mujoco_ref.available(), reason="mujoco is a dev dependency")


def _mujoco_twin(sim):
    import mujoco

    mjm, d, qadr, vadr = mujoco_ref.build_tree(sim.model)
    d.qpos[qadr] = sim.qpos()
    d.qvel[vadr] = sim.qvel()
    mujoco.mj_forward(mjm, d)
    return mjm, d, vadr


def _rel(a, b):
    return np.abs(a - b).max() / max(np.abs(b).max(), 1e-300)


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
    random_state(sim, rng)
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
    sim = rt.Simulation(single_bodies(), integrator, 1e-3)
    assert sim.backend.name == "bodies"
    rng = np.random.default_rng(9)
    random_state(sim, rng)
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
    random_state(sim, rng)
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
    sim = rt.Simulation(tree_of_kinds(kinds, seed=11), integrator, dt=1.0 / 240.0)
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
    sim = rt.Simulation(single_bodies(), "energy_momentum", 1e-3)
    random_state(sim, np.random.default_rng(14))
    sim.step(10)
    for b in range(2):
        J = sim.jacobian(b)
        np.testing.assert_allclose(J @ sim.qvel(), np.r_[sim.velocity(b)], rtol=0, atol=1e-14)


def test_inverse_dynamics_accounts_for_every_load_the_simulation_applies():
    """Along a motion driven by applied loads, point springs, joint springs and dampers and
    held joint forces, inverse_dynamics of the motion's own acceleration (central
    differences of qvel) is zero: nothing more is needed to produce it."""
    m = tree_of_kinds(["revolute", "prismatic", "spherical", "cylindrical", "planar"], seed=15)
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
