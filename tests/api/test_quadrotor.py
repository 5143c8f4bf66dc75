"""The quadrotor scenario: rotor thrusts as body-frame forces at body points, checked against
rigid-body statics and kinematics computed here independently, and the demo's controller."""
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from demos.controllers import QuadrotorController
from rtrigid import scenarios

INTEGRATORS = scenarios.integrators_for("quadrotor")


def test_quadrotor_takes_the_explicit_and_the_conserving_schemes():
    assert {"energy_momentum", "nullspace_rk4"} <= set(INTEGRATORS)


@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_equal_thrusts_of_mg_over_4_hover_exactly(integrator):
    sim = scenarios.build("quadrotor", integrator=integrator)
    mg = sim.body_mass[0] * 9.81
    scenarios.set_rotor_thrusts(sim, [mg / 4] * 4)
    sim.step(500)
    x, q = sim.pose(0)
    v, w = sim.velocity(0)
    np.testing.assert_allclose(x, (0, 0, 1), atol=1e-12)
    np.testing.assert_allclose(q, (1, 0, 0, 0), atol=1e-12)
    assert np.abs(v).max() < 1e-12 and np.abs(w).max() < 1e-12


def test_rotor_loads_are_the_body_frame_thrusts_turned_into_the_world():
    sim = scenarios.build("quadrotor", tilt=0.3)
    sim.set_orientation(0, (0.9, 0.2, -0.3, 0.25))
    thrusts = np.array([1.0, 2.5, 3.0, 0.5])
    scenarios.set_rotor_thrusts(sim, thrusts)
    force, torque = sim.applied(0)
    x, q = sim.pose(0)
    rot = Rotation.from_quat([q[1], q[2], q[3], q[0]]).as_matrix()
    arm = scenarios.QUADROTOR_ARM
    points = np.array([(arm, 0, 0), (0, arm, 0), (-arm, 0, 0), (0, -arm, 0)])
    spins = np.array([-1.0, 1.0, -1.0, 1.0])
    f_body = np.zeros(3)
    t_body = np.zeros(3)
    for p, s, t in zip(points, spins, thrusts):
        f_body += (0, 0, t)
        t_body += np.cross(p, (0, 0, t)) + (0, 0, s * scenarios.QUADROTOR_YAW_PER_THRUST * t)
    np.testing.assert_allclose(force, rot @ f_body, rtol=0, atol=1e-14)
    np.testing.assert_allclose(torque, rot @ t_body, rtol=0, atol=1e-14)
    scenarios.set_rotor_thrusts(sim, np.zeros(4))   # replaces, does not add
    assert not np.any(sim.applied(0)[0]) and not np.any(sim.applied(0)[1])


@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_without_thrust_it_falls_freely(integrator):
    sim = scenarios.build("quadrotor", integrator=integrator, tilt=0.2)
    sim.set_angular_velocity(0, (1.0, -2.0, 0.5))
    sim.step(400)
    t = sim.t
    drop = 9.81 * t * t / 2
    if integrator == "semi_implicit_euler":  # x_n = x_0 - h sum_k g k h: g h t / 2 further
        drop += 9.81 * sim.dt * t / 2
    np.testing.assert_allclose(sim.pose(0)[0], (0, 0, 1.0 - drop), atol=1e-12)
    np.testing.assert_allclose(sim.velocity(0)[0], (0, 0, -9.81 * t), atol=1e-12)


@pytest.mark.parametrize("integrator", ["energy_momentum", "nullspace_rk4"])
def test_the_demo_controller_flies_to_its_target_and_heading(integrator):
    sim = scenarios.build("quadrotor", integrator=integrator, tilt=0.4)
    control = QuadrotorController(sim, target=(0.5, -0.3, 1.5), yaw=0.3)
    lowest = np.inf
    for _ in range(6000):
        control(sim)
        assert np.all((control.thrusts >= 0.0) & (control.thrusts <= control.max_thrust))
        sim.step(1)
        lowest = min(lowest, sim.pose(0)[0][2])
    x, q = sim.pose(0)
    np.testing.assert_allclose(x, (0.5, -0.3, 1.5), atol=2e-3)
    np.testing.assert_allclose(q, (np.cos(0.15), 0, 0, np.sin(0.15)), atol=2e-3)
    assert lowest > 0.9   # recovered from the tilt without dropping
    np.testing.assert_allclose(control.thrusts, sim.body_mass[0] * 9.81 / 4, rtol=1e-3)
