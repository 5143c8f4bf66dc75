"""The universal joint (a Hooke's joint: two perpendicular hinges through one point) against
MuJoCo's two hinges in one body, its energy and momentum under the conserving schemes, the
exact work of its joint torques, and its refusals."""
import numpy as np
import pytest

import rtrigid as rt

# MuJoCo turns a body's hinges in order, each about its axis in the body frame as the
# previous ones left it: the first axis stays with the parent, the second with the child
TWO_HINGES = """<mujoco><option timestep="{dt}" integrator="RK4" gravity="0 0 -9.81"/>
<worldbody><body name="link" pos="0 0 -0.25">
 <joint name="j1" type="hinge" axis="1 0 0" pos="0 0 0.25"/>
 <joint name="j2" type="hinge" axis="0 1 0" pos="0 0 0.25"/>
 <inertial pos="0 0 0" mass="1.3" diaginertia="0.02 0.03 0.015"/>
</body></worldbody></mujoco>"""
START = (0.3, -0.2), (1.5, -2.0)  # the two angles and their rates


def _hooke_pendulum(integrator, dt):
    m = rt.Model(gravity=(0.0, 0.0, -9.81))
    b = m.add_body("link", 1.3, (0.02, 0.03, 0.015))
    j = m.add_joint("universal", None, b, anchor_child=(0.0, 0.0, 0.25),
                    axis_parent=(1.0, 0.0, 0.0), axis_child=(0.0, 1.0, 0.0), position=START[0])
    sim = rt.Simulation(m, integrator, dt)
    sim.set_joint_velocity(j, START[1])
    return sim, j


def _mujoco_two_hinges(dt, t_end):
    mujoco = pytest.importorskip("mujoco")
    model = mujoco.MjModel.from_xml_string(TWO_HINGES.format(dt=dt))
    data = mujoco.MjData(model)
    data.qpos[:], data.qvel[:] = START
    mujoco.mj_step(model, data, nstep=int(round(t_end / dt)))
    return data.qpos.copy(), data.qvel.copy()


@pytest.mark.parametrize("integrator,tol", [("nullspace_rk4", 1e-9),
                                            ("semi_implicit_euler", 2e-3)])
def test_universal_joint_moves_as_mujoco_two_hinges_in_one_body(integrator, tol):
    """Over 0.5 s at dt = 1e-4, the angles and their rates agree with MuJoCo's RK4 (RK4 on both
    sides: to round-off; the first-order scheme: to its own error)."""
    dt, t_end = 1e-4, 0.5
    qpos, qvel = _mujoco_two_hinges(dt, t_end)
    sim, j = _hooke_pendulum(integrator, dt)
    sim.step(int(round(t_end / dt)))
    assert np.abs(sim.joint_position(j) - qpos).max() < tol
    assert np.abs(sim.joint_velocity(j) - qvel).max() < 10 * tol
    assert np.abs(qpos - START[0]).max() > 0.3  # it did swing


def _gimbal_chain(integrator, dt):
    """A body turning about the vertical, and two universal joints below it (the second
    with skew axes): every joint's axes move with the bodies."""
    m = rt.Model(gravity=(0.0, 0.0, -9.81))
    a = m.add_body("a", 0.8, (0.01, 0.012, 0.005))
    b = m.add_body("b", 1.3, (0.02, 0.03, 0.015))
    c = m.add_body("c", 0.5, (0.004, 0.006, 0.003))
    m.add_joint("revolute", None, a, anchor_child=(0.0, 0.0, 0.1), axis_parent=(0.0, 0.0, 1.0),
                name="spin")
    m.add_joint("universal", a, b, anchor_parent=(0.1, 0.0, -0.1), anchor_child=(0.0, 0.0, 0.25),
                axis_parent=(1.0, 0.0, 0.0), axis_child=(0.0, 1.0, 0.0), position=(0.3, -0.2),
                name="upper")
    m.add_joint("universal", b, c, anchor_parent=(0.0, 0.0, -0.25),
                anchor_child=(0.05, 0.0, 0.15), axis_parent=(0.0, 1.0, 0.0),
                axis_child=(0.6, 0.0, 0.8), position=(0.5, 1.0), name="lower")
    sim = rt.Simulation(m, integrator, dt)
    sim.set_joint_velocity("spin", [2.0])
    sim.set_joint_velocity("upper", [1.5, -2.0])
    sim.set_joint_velocity("lower", [-3.0, 4.0])
    return sim


@pytest.mark.parametrize("integrator", ["energy_momentum", "energy_momentum4"])
def test_universal_joints_keep_energy_and_vertical_momentum_at_a_game_step(integrator):
    """At dt = 1/60 for 1 s: energy to 1e-10 and the angular momentum about the vertical axis
    of the spin joint (gravity has no moment about it) to 1e-10, every step."""
    sim = _gimbal_chain(integrator, 1.0 / 60.0)
    e0, lz0 = sim.energy(), sim.momentum()[1][2]
    q0 = sim.qpos()
    for _ in range(60):
        sim.step(1)
        assert abs(sim.energy() - e0) < 1e-10
        assert abs(sim.momentum()[1][2] - lz0) < 1e-10
        assert sim.constraint_error() < 1e-12
    assert np.abs(sim.qpos() - q0).max() > 1.0  # the chain did move


def test_universal_joint_torques_do_their_exact_work_under_energy_momentum():
    """Constant joint torques (tau1, tau2) on both universal joints: the energy changes by
    exactly tau1 dtheta1 + tau2 dtheta2 per joint, at dt = 1/60."""
    sim = _gimbal_chain("energy_momentum", 1.0 / 60.0)
    torques = {"upper": np.array([0.3, -0.5]), "lower": np.array([0.2, 0.1])}
    for name, tau in torques.items():
        sim.set_joint_force(name, tau)
    e0 = sim.energy()
    start = {name: sim.joint_position(name).copy() for name in torques}
    sim.step(60)
    work = sum(tau @ (sim.joint_position(name) - start[name]) for name, tau in torques.items())
    assert abs(work) > 0.1
    assert abs(sim.energy() - e0 - work) < 1e-10


def test_universal_joint_bad_axes_and_options_are_refused_and_change_nothing():
    m = rt.Model()
    m.add_body("a", 1.0, (0.1, 0.1, 0.1))
    m.add_body("b", 1.0, (0.1, 0.1, 0.1))
    cases = [
        (dict(axis_parent=(1.0, 0.0, 0.0), axis_child=(1.0, 1.0, 0.0)), "^axis_child: .*perpendicular"),
        (dict(axis_parent=(1.0, 0.0, 0.0)), "^axis_child: .*perpendicular"),  # one axis: both alike
        (dict(), "^axis_parent: a universal joint needs an axis"),
        (dict(axis_parent=(1, 0, 0), axis_child=(0, 1, 0), limits=(-1.0, 1.0)), "^limits: "),
        (dict(axis_parent=(1, 0, 0), axis_child=(0, 1, 0), stiffness=1.0), "^stiffness: "),
        (dict(axis_parent=(1, 0, 0), axis_child=(0, 1, 0), armature=0.1), "^armature: "),
    ]
    for options, message in cases:
        with pytest.raises(ValueError, match=message):
            m.add_joint("universal", None, "a", **options)
        assert m.joints == []
    m.add_joint("universal", None, "a", axis_parent=(1, 0, 0), axis_child=(0, 1, 0))
    m.add_joint("spherical", "a", "b")
    m.add_loop_joint("universal", None, "b", anchor_parent=(0.0, 0.0, 1.0),
                     axis_parent=(1, 0, 0), axis_child=(0, 0, 1))
    with pytest.raises(ValueError, match="a universal joint cannot close a loop"):
        rt.Simulation(m, "nullspace_rk4", 1e-3)
