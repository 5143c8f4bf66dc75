"""Sensors at the current time: imu and joint_reaction against MuJoCo and against finite
differences of the motion, and rates at t (not step means) under every integrator."""
import numpy as np
import pytest

import rtrigid as rt
from rtrigid.model import Model
from rtrigid.references import mujoco_ref
from tests.helpers import MUJOCO_CASES, random_sim, random_state, random_tree, single_bodies

needs_mujoco = pytest.mark.skipif(not mujoco_ref.available(), reason="mujoco is a dev dependency")


def _mujoco_forward(sim, held):
    """MuJoCo's twin of ``sim`` in the same state, with the same held joint forces and the
    same applied loads; after mj_forward and mj_rnePostConstraint."""
    import mujoco

    mjm, d, qadr, vadr = mujoco_ref.build_tree(sim.model)
    d.qpos[qadr] = sim.qpos()
    d.qvel[vadr] = sim.qvel()
    d.qfrc_applied[vadr] = held
    for b in range(sim.nb):
        bid = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_BODY, sim.names[b])
        f, t = sim.applied(b)
        d.xfrc_applied[bid] = np.r_[f, t]
    mujoco.mj_forward(mjm, d)
    mujoco.mj_rnePostConstraint(mjm, d)
    return mjm, d


@needs_mujoco
@pytest.mark.parametrize("seed,kinds,free_root", MUJOCO_CASES)
def test_imu_and_joint_reaction_agree_with_mujoco(seed, kinds, free_root):
    import mujoco

    sim, rng = random_sim(seed, kinds, free_root, 200 + seed)
    held = rng.normal(size=sim.nv)
    at = np.cumsum([0] + [len(sim.joint_velocity(n)) for n in sim.joint_names])
    for j, name in enumerate(sim.joint_names):
        if at[j + 1] > at[j]:
            sim.set_joint_force(name, held[at[j]:at[j + 1]])
    for b in range(sim.nb):
        sim.apply_force(b, rng.normal(size=3))
        sim.apply_torque(b, rng.normal(size=3))
    mjm, d = _mujoco_forward(sim, held)
    scale_a = max(1.0, np.abs(d.qacc).max())
    for b in range(sim.nb):
        bid = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_BODY, sim.names[b])
        # MuJoCo's body frame is ours (centre of mass, principal axes); its object
        # acceleration in local axes is the accelerometer's specific force a - g
        acc = np.zeros(6)
        mujoco.mj_objectAcceleration(mjm, d, mujoco.mjtObj.mjOBJ_BODY, bid, acc, 1)
        vel = np.zeros(6)
        mujoco.mj_objectVelocity(mjm, d, mujoco.mjtObj.mjOBJ_BODY, bid, vel, 1)
        gyro, accel = sim.imu(b)
        np.testing.assert_allclose(gyro, vel[:3], rtol=0, atol=1e-12 * scale_a)
        np.testing.assert_allclose(accel, acc[3:], rtol=0, atol=1e-10 * scale_a)
    for j, name in enumerate(sim.joint_names):
        b = sim._joint_child[j]
        bid = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_BODY, sim.names[b])
        force, torque = sim.joint_reaction(name)
        if sim.backend.joints[b].kind == "free":
            assert not force.any() and not torque.any()
            continue
        # cfrc_int: (torque, force) about the subtree centre of mass of the body's root
        c = d.subtree_com[mjm.body_rootid[bid]]
        anchor = next(jd["anchor"] for jd in sim.joints() if jd["child"] == b)
        t_mj, f_mj = d.cfrc_int[bid, :3], d.cfrc_int[bid, 3:]
        scale = max(1.0, np.abs(d.cfrc_int).max())
        np.testing.assert_allclose(force, f_mj, rtol=0, atol=1e-10 * scale)
        np.testing.assert_allclose(torque, t_mj + np.cross(c - anchor, f_mj), rtol=0,
                                   atol=1e-10 * scale * max(1.0, np.abs(c - anchor).max()))


def test_imu_is_the_finite_difference_of_the_points_velocity():
    sim = rt.Simulation(random_tree(3, n=4), "nullspace_rk4", 1e-5)
    random_state(sim, np.random.default_rng(4))
    point = np.array([0.05, -0.02, 0.1])
    for b in range(sim.nb):
        snap = sim.snapshot()
        gyro, accel = sim.imu(b, point_body=point)
        np.testing.assert_array_equal(gyro, sim.velocity(b, frame="body")[1])
        vel = []
        for _ in range(2):  # velocities of the point at t, t + h, t + 2h
            vel.append((sim.jacobian(b, point) @ sim.qvel())[:3])
            sim.step()
        vel.append((sim.jacobian(b, point) @ sim.qvel())[:3])
        _, q = sim.pose(b)
        sim.restore(snap)
        # second-order one-sided difference at t
        a = (-3.0 * vel[0] + 4.0 * vel[1] - vel[2]) / (2.0 * sim.dt)
        _, q = sim.pose(b)
        world = rt.quat.rotate(q, accel, np.empty(3)) + sim.gravity
        np.testing.assert_allclose(world, a, rtol=0, atol=1e-6 * max(1.0, np.abs(a).max()))


@pytest.mark.parametrize("integrator", rt.integrators.names())
def test_single_body_sensors_and_rates_are_at_t(integrator):
    """A pivoted top released from rest, tilted: after one 1 ms step its angular velocity is
    the one at t (a step mean would be half of it), and the IMU agrees with velocity()."""
    m = Model()
    m.add_body("top", 1.0, (0.02, 0.02, 0.01))
    m.attach_to_world("top", (0.0, 0.0, -0.1))
    ref = rt.Simulation(m, "nullspace_rk4", 1e-5)
    sim = rt.Simulation(m, integrator, 1e-3)
    tilt = rt.quat.from_rotvec(np.array([0.3, 0.0, 0.0]))
    for s in (ref, sim):
        s.set_orientation("top", tilt)
    ref.step(100)
    sim.step(1)
    exact = ref.velocity("top")[1]
    assert np.abs(sim.velocity("top")[1] - exact).max() < 1e-3 * np.abs(exact).max()
    gyro, accel = sim.imu("top")
    np.testing.assert_array_equal(gyro, sim.velocity("top", frame="body")[1])
    np.testing.assert_array_equal(sim.qvel(), sim.joint_velocity("pivot_top"))
    # the pivot's reaction and the IMU come from one forward-dynamics solve: the pivot
    # force is m (a - g) of the centre of mass
    force, _ = sim.joint_reaction("pivot_top")
    _, q = sim.pose("top")
    np.testing.assert_allclose(force, rt.quat.rotate(q, accel, np.empty(3)), rtol=1e-12,
                               atol=1e-12)


def test_a_free_body_imu_reads_the_applied_force_and_its_joint_transmits_nothing():
    sim = rt.Simulation(single_bodies(), "energy_momentum", 1e-3)
    sim.set_angular_velocity("free", (0.3, -1.0, 2.0))
    sim.apply_force("free", (0.0, 0.0, 4.0), point=(0.0, 0.0, 0.0), frame="body")
    sim.step(10)
    gyro, accel = sim.imu("free")
    # the force was taken in body axes when applied, then fixed in the world; mass 2 kg
    f, _ = sim.applied("free")
    _, q = sim.pose("free")
    np.testing.assert_allclose(rt.quat.rotate(q, accel, np.empty(3)), f / 2.0, atol=1e-12)
    assert np.linalg.norm(f) == pytest.approx(4.0)
    force, torque = sim.joint_reaction("free_free")
    assert not force.any() and not torque.any()


@pytest.mark.parametrize("integrator", ["nullspace_rk4", "energy_momentum",
                                        "energy_momentum4"])
def test_tree_rates_velocities_and_imu_agree_at_t(integrator):
    sim = rt.scenarios.build("chain", integrator=integrator, dt=1.0 / 240.0, n=3,
                             omega0=np.random.default_rng(5).normal(size=(3, 3)))
    sim.step(30)
    qvel = sim.qvel()
    np.testing.assert_array_equal(qvel, np.concatenate([sim.joint_velocity(j)
                                                        for j in sim.joint_names]))
    for b in range(sim.nb):
        v, w = sim.velocity(b)
        J = sim.jacobian(b)
        np.testing.assert_allclose(J @ qvel, np.r_[v, w], rtol=0, atol=1e-13)
        gyro, _ = sim.imu(b)
        np.testing.assert_array_equal(gyro, sim.velocity(b, frame="body")[1])


def test_energy_momentum4_reports_the_rate_at_t_not_the_step_mean():
    m = Model()
    m.add_body("arm", 1.0, (0.02, 0.02, 0.01))
    j = m.add_joint("revolute", None, "arm", anchor_child=(0, 0, 0.2), axis_parent=(1, 0, 0))
    ref = rt.Simulation(m, "nullspace_rk4", 1e-5)
    sim = rt.Simulation(m, "energy_momentum4", 1e-3)
    for s in (ref, sim):
        s.set_joint_position(j, [0.4])
    ref.step(100)
    sim.step(1)
    assert sim.joint_velocity(j)[0] == pytest.approx(ref.joint_velocity(j)[0], rel=1e-6)


def test_sensor_queries_refuse_bad_input():
    sim = rt.Simulation(single_bodies(), "nullspace_rk4", 1e-3)
    with pytest.raises(ValueError, match="^body"):
        sim.imu("nobody")
    with pytest.raises(ValueError, match="^point_body"):
        sim.imu("top", point_body=(0.0, 1.0))
    with pytest.raises(ValueError, match="^joint"):
        sim.joint_reaction("nojoint")
