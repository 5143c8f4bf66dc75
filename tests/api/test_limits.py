"""Joint limits on revolute and prismatic joints: they hold, gain no energy, show in
joint_reaction, and bad limits or states outside them are refused."""
import numpy as np
import pytest

import rtrigid as rt
from tests.helpers import limited_link

TREE_SCHEMES = ["nullspace_rk4", "energy_momentum", "energy_momentum4"]


def _two_links(restitution=0.0):
    m = rt.Model()
    m.add_body("a", 1.0, (0.02, 0.02, 0.01))
    m.add_body("b", 0.5, (0.01, 0.01, 0.005))
    j = m.add_joint("revolute", None, "a", anchor_child=(0, 0, 0.3), axis_parent=(1, 0, 0),
                    limits=(-0.3, 1.0), limit_restitution=restitution)
    k = m.add_joint("revolute", "a", "b", anchor_parent=(0, 0, -0.3), anchor_child=(0, 0, 0.2),
                    axis_parent=(1, 0, 0), limits=(-0.2, 0.2), limit_restitution=restitution)
    return m, j, k


@pytest.mark.parametrize("integrator", TREE_SCHEMES)
def test_a_motor_driving_into_a_limit_for_10_s_is_held_and_gains_no_energy(integrator):
    m, j = limited_link()
    sim = rt.Simulation(m, integrator, 1e-3)
    tau = 2.0  # more than gravity's 0.3 * 9.81 * sin(0.5) = 1.41 N m: it pushes into the stop
    sim.set_joint_force(j, tau)
    worst_pen = worst_gain = 0.0
    for _ in range(10000):
        a, e = sim.joint_position(j)[0], sim.energy()
        sim.step()
        b = sim.joint_position(j)[0]
        worst_pen = max(worst_pen, b - 0.5, -0.5 - b)
        worst_gain = max(worst_gain, sim.energy() - e - tau * (b - a))
    assert worst_pen <= 1e-6
    assert sim.joint_position(j)[0] == 0.5  # put on the limit, not near it
    assert abs(sim.joint_velocity(j)[0]) < 1e-12
    # energy minus the motor's work never goes up (round-off of E ~ 3 J aside)
    assert worst_gain <= 1e-12
    # at rest on the stop the joint holds the link against gravity: its moment about the
    # hinge is the opposite of gravity's (motor and limit together), and the IMU reads -g
    force, torque = sim.joint_reaction(j)
    x, _ = sim.pose("link")
    anchor = sim.joints()[0]["anchor"]
    g = sim.gravity
    np.testing.assert_allclose(force, -1.0 * g, atol=1e-9)
    np.testing.assert_allclose(torque, -np.cross(x - anchor, 1.0 * g), atol=1e-9)
    gyro, accel = sim.imu("link")
    np.testing.assert_allclose(gyro, 0.0, atol=1e-9)
    _, q = sim.pose("link")
    np.testing.assert_allclose(rt.maths.quat.rotate(q, accel, np.empty(3)), -g, atol=1e-9)


@pytest.mark.parametrize("integrator", TREE_SCHEMES)
def test_a_motor_actuator_at_a_limit_counts_its_work_once(integrator):
    """An actuator's work through the steps a limit re-solves: exactly u (theta_N - theta_0)
    for a constant motor control, and energy minus that work never rises."""
    m, j = limited_link()
    m.add_actuator(j, "motor", gear=2.0, name="drive")
    sim = rt.Simulation(m, integrator, 1e-3)
    sim.set_control("drive", 1.0)   # 2 N m on the joint, into the upper stop
    theta0, e0 = sim.joint_position(j)[0], sim.energy()
    worst_gain = 0.0
    for _ in range(1500):
        e, w = sim.energy(), sim.actuator_work()[0]
        sim.step()
        worst_gain = max(worst_gain, sim.energy() - e - (sim.actuator_work()[0] - w))
    theta = sim.joint_position(j)[0]
    assert theta == 0.5
    assert sim.actuator_work()[0] == pytest.approx(2.0 * (theta - theta0), abs=1e-12)
    assert worst_gain <= 1e-12
    assert sim.energy() - e0 <= sim.actuator_work()[0] + 1e-12


@pytest.mark.parametrize("integrator", TREE_SCHEMES)
def test_a_falling_link_stops_dead_on_its_limits_and_energy_never_rises(integrator):
    m, j, k = _two_links()
    sim = rt.Simulation(m, integrator, 1e-3)
    sim.set_joint_position(j, [0.9])
    energies = [sim.energy()]
    pen = 0.0
    for _ in range(3000):
        sim.step()
        a, b = sim.joint_position(j)[0], sim.joint_position(k)[0]
        pen = max(pen, a - 1.0, -0.3 - a, b - 0.2, -0.2 - b)
        energies.append(sim.energy())
    assert pen <= 1e-6
    steps = np.diff(energies)
    if integrator != "nullspace_rk4":  # the conserving schemes: only round-off goes up
        assert steps.max() <= 2e-12 * abs(energies[0])
    assert energies[-1] < energies[0] - 1.0  # the stops took energy out


def test_restitution_rebounds_with_that_fraction_of_the_approach_rate():
    m, j = limited_link(limits=(-0.2, 0.2), restitution=0.5)
    sim = rt.Simulation(m, "nullspace_rk4", 1e-4)
    sim.set_joint_velocity(j, [3.0])
    before = None
    for _ in range(2000):
        rate = sim.joint_velocity(j)[0]
        sim.step()
        if sim.joint_velocity(j)[0] < 0.0 < rate:
            before = rate
            break
    assert before is not None
    # the rate in the step that reached the stop, reversed and halved
    assert sim.joint_velocity(j)[0] == pytest.approx(-0.5 * before, rel=1e-3)


@pytest.mark.parametrize("integrator", TREE_SCHEMES)
def test_no_restitution_under_the_conserving_schemes_stops_a_fast_link(integrator):
    m, j = limited_link(limits=(-0.2, 0.2))
    sim = rt.Simulation(m, integrator, 1e-3)
    sim.set_joint_velocity(j, [3.0])
    e0 = sim.energy()
    for _ in range(200):
        sim.step()
    # it hit the upper stop, stopped there and swings back from rest: it never passes 0.2
    # again with the energy it had, and has lost the kinetic energy of the approach
    assert sim.energy() < e0 - 0.5 * 0.1 * 9.0 * 0.5
    assert sim.joint_position(j)[0] <= 0.2


def test_a_prismatic_stop_holds_a_sliding_block():
    m, j = limited_link(limits=(-0.1, 0.4), kind="prismatic")  # slides along z, gravity pulls down
    sim = rt.Simulation(m, "nullspace_rk4", 1e-3)
    for _ in range(2000):
        sim.step()
        assert sim.joint_position(j)[0] >= -0.1
    assert sim.joint_position(j)[0] == -0.1
    force, _ = sim.joint_reaction(j)
    np.testing.assert_allclose(force, -sim.gravity, atol=1e-9)


def test_limits_are_checked_naming_the_field():
    m = rt.Model()
    m.add_body("a", 1.0, (0.02, 0.02, 0.01))
    m.add_body("b", 1.0, (0.02, 0.02, 0.01))
    bad = [dict(limits=(1.0, -1.0)), dict(limits=(0.5, 0.5)), dict(limits=(np.nan, 1.0)),
           dict(limits=(-1.0, "2")), dict(limits=(np.inf, np.inf)), dict(limits=1.0),
           dict(limits=(-1.0, 1.0), limit_restitution=1.5),
           dict(limits=(-1.0, 1.0), limit_restitution=-0.1), dict(limit_restitution=0.5)]
    for extra in bad:
        with pytest.raises(ValueError, match=r"^limit"):
            m.add_joint("revolute", None, "a", axis_parent=(1, 0, 0), **extra)
    with pytest.raises(ValueError, match="^limits: only revolute and prismatic"):
        m.add_joint("spherical", None, "a", limits=(-1.0, 1.0))
    assert not m.joints
    m.add_joint("revolute", None, "a", axis_parent=(1, 0, 0), limits=(-np.inf, 0.5))
    m.add_joint("prismatic", "a", "b", axis_parent=(0, 0, 1), limits=(0.2, np.inf))
    sim = rt.Simulation(m, "nullspace_rk4", 1e-3)
    # zero lies below the prismatic joint's lower limit: it starts on that limit
    assert sim.joint_position(1)[0] == 0.2
    assert sim.joints()[1]["limits"] == (0.2, np.inf)
    snap = sim.snapshot()
    with pytest.raises(ValueError, match="^value: 0.6 is outside the limits"):
        sim.set_joint_position(0, [0.6])
    with pytest.raises(ValueError, match="^qpos: entry 1"):
        sim.set_qpos([0.0, 0.1])
    sim.set_qpos([-3.0, 5.0])  # inside (the open sides are unlimited)
    sim.restore(snap)
    np.testing.assert_array_equal(sim.qpos(), [0.0, 0.2])


@pytest.mark.parametrize("integrator", ["energy_momentum", "energy_momentum4"])
def test_the_conserving_schemes_refuse_a_restitution(integrator):
    m, j = limited_link(restitution=0.5)
    with pytest.raises(ValueError, match="^integrator: .* keeps joint limits inelastic"):
        rt.Simulation(m, integrator, 1e-3)


@pytest.mark.parametrize("integrator,restitution", [("energy_momentum", 0.0),
                                                    ("nullspace_rk4", 0.3)])
def test_limited_runs_are_deterministic_and_restore_bit_for_bit(integrator, restitution):
    m, j, k = _two_links(restitution=restitution)
    sim = rt.Simulation(m, integrator, 1e-3)
    sim.set_joint_position(j, [0.9])
    sim.step(300)
    snap = sim.snapshot()
    sim.step(500)
    a = sim.qpos(), sim.qvel()
    sim.restore(snap)
    sim.step(500)
    np.testing.assert_array_equal(sim.qpos(), a[0])
    np.testing.assert_array_equal(sim.qvel(), a[1])


@pytest.mark.skipif(not __import__("rtrigid.references.mujoco_ref", fromlist=["x"]).available(),
                    reason="mujoco is a dev dependency")
@pytest.mark.parametrize("integrator", ["nullspace_rk4", "energy_momentum"])
def test_a_pendulum_falling_onto_its_limit_comes_to_rest_where_mujocos_does(integrator):
    import mujoco

    from rtrigid.references import mujoco_ref

    m, j = limited_link(limits=(0.4, 2.0))  # gravity pulls it onto the lower stop
    sim = rt.Simulation(m, integrator, 1e-3)
    sim.set_joint_position(j, [1.2])
    mjm, d, qadr, vadr = mujoco_ref.build_tree(sim.model, dt=1e-3)
    jid = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_JOINT, sim.joint_names[0])
    mjm.jnt_limited[jid] = 1
    mjm.jnt_range[jid] = (0.4, 2.0)
    mjm.jnt_solref[jid] = (0.002, 1.0)  # a stiff, critically damped limit
    d.qpos[qadr] = sim.qpos()
    mujoco.mj_forward(mjm, d)
    mujoco.mj_step(mjm, d, nstep=5000)
    sim.step(5000)
    mujoco.mj_rnePostConstraint(mjm, d)
    # MuJoCo's soft limit gives a little (4.6e-6 rad here); ours does not
    assert sim.joint_position(j)[0] == 0.4
    assert abs(d.qpos[qadr[0]] - 0.4) < 1e-5  # measured 4.6e-6
    assert abs(d.qvel[vadr[0]]) < 1e-6 and abs(sim.joint_velocity(j)[0]) < 1e-12
    force, torque = sim.joint_reaction(j)
    np.testing.assert_allclose(force, d.cfrc_int[1, 3:], rtol=1e-9, atol=1e-9)
    anchor = sim.joints()[0]["anchor"]
    # cfrc_int's torque is about the subtree's centre of mass: here the link's own
    x, _ = sim.pose("link")
    np.testing.assert_allclose(torque, d.cfrc_int[1, :3] + np.cross(x - anchor, force),
                               rtol=0, atol=1e-9)
