"""Driving closed loops: actuators and joint limits on models with
loop joints, under nullspace_rk4 and energy_momentum.

References: the exact discrete work of a constant motor (its torque times the crank's net
turn), the servo's target, the static balance of the world's reactions against the weight
and the limit, and the delta robot's inverse kinematics.
"""
import numpy as np
import pytest

import rtrigid as rt
from rtrigid import scenarios
from rtrigid.maths import quat

DT = 1.0 / 240.0


def _four_bar(integrator, *, gravity=True, limits=None, actuator=None, omega0=0.0, dt=DT):
    m = scenarios.build("four_bar").model
    if not gravity:
        m.gravity = np.zeros(3)
    if limits is not None:
        m.joints[0].limits = limits  # the crank
    if actuator is not None:
        m.add_actuator("crank", actuator[0], name="drive", **actuator[1])
    sim = rt.Simulation(m, integrator, dt)
    sim.set_joint_velocity("crank", [omega0])
    return sim


def test_em_motor_work_on_a_loop_is_exact():
    sim = _four_bar("energy_momentum", actuator=("motor", {}))
    sim.set_control("drive", 0.5)
    E0, c0 = sim.energy(), sim.joint_position("crank")[0]
    worst = 0.0
    for _ in range(240):
        sim.step()
        worst = max(worst, abs(sim.energy() - sim.actuator_work().sum() - E0))
        assert sim.constraint_error() <= 1e-10
    work = sim.actuator_work()[0]
    assert work > 5.0  # the motor spun the crank up (several J against ~1 J at the start)
    assert worst <= 1e-10 * max(1.0, abs(E0))
    # a constant torque's work is the torque times the crank's net turn, exactly
    assert abs(work - 0.5 * (sim.joint_position("crank")[0] - c0)) <= 1e-12 * work


def test_rk4_motor_work_on_a_loop_is_its_power_quadrature():
    # energy minus work is kept to RK4's error, which falls ~16x when dt is halved
    errors = []
    for dt in (DT, DT / 2):
        sim = _four_bar("nullspace_rk4", actuator=("motor", {}), dt=dt)
        sim.set_control("drive", 0.5)
        E0 = sim.energy()
        sim.step(int(round(0.5 / dt)))
        errors.append(abs(sim.energy() - sim.actuator_work().sum() - E0))
        assert sim.actuator_work()[0] > 1.0
        assert sim.constraint_error() <= 1e-12
    assert errors[0] <= 1e-4 * sim.actuator_work()[0]
    assert errors[1] <= errors[0] / 8


@pytest.mark.parametrize("integrator", ["nullspace_rk4", "energy_momentum"])
def test_position_servo_takes_a_loop_to_its_target(integrator):
    # a horizontal four-bar (no gravity): the servo's equilibrium is its target
    kp, target = 20.0, 1.2
    sim = _four_bar(integrator, gravity=False, actuator=("position", dict(kp=kp, kv=3.0)))
    sim.set_control("drive", target)
    closure = 0.0
    spring = lambda: 0.5 * kp * (target - sim.joint_position("crank")[0]) ** 2  # noqa: E731
    stored = sim.energy() + spring()
    for _ in range(480):
        sim.step()
        closure = max(closure, sim.constraint_error())
        if integrator == "energy_momentum":  # the servo only dissipates: kinetic + spring
            now = sim.energy() + spring()
            assert now <= stored + 1e-12
            stored = now
    assert abs(sim.joint_position("crank")[0] - target) <= 1e-5
    assert closure <= (1e-10 if integrator == "energy_momentum" else 1e-12)


@pytest.mark.parametrize("integrator", ["nullspace_rk4", "energy_momentum"])
def test_limit_holds_a_driven_loop_and_takes_energy_only(integrator):
    upper = 1.0
    sim = _four_bar(integrator, limits=(-np.inf, upper), actuator=("motor", {}))
    sim.set_control("drive", 0.5)
    prev = sim.energy() - sim.actuator_work().sum()
    beyond = closure = gain = 0.0
    hit = None
    for k in range(480):
        sim.step()
        beyond = max(beyond, sim.joint_position("crank")[0] - upper)
        closure = max(closure, sim.constraint_error())
        now = sim.energy() - sim.actuator_work().sum()
        gain = max(gain, now - prev)
        if hit is None and sim.joint_position("crank")[0] == upper:
            hit = k
            assert now < prev - 1e-3  # the stop took the crank's kinetic energy
        prev = now
    assert hit is not None and hit < 120
    assert beyond <= 1e-6
    assert closure <= (1e-10 if integrator == "energy_momentum" else 1e-12)
    # energy_momentum keeps E - W exactly between the hits; RK4 to its truncation error
    assert gain <= (1e-12 if integrator == "energy_momentum" else 1e-9)
    assert np.max(np.abs(sim.qvel())) <= 1e-12  # at rest on the stop
    # at rest the world's reactions on the crank and the rocker carry the whole weight and
    # balance its moment (the limit's and the motor's torques are in the crank's)
    joints = {j["name"]: j for j in sim.joints()}
    force = np.zeros(3)
    moment = np.zeros(3)
    for name in ("crank", "rocker"):
        f, t = sim.joint_reaction(name)
        force += f
        moment += t + np.cross(joints[name]["anchor"], f)
    g = sim.model.gravity
    for b, body in enumerate(sim.model.bodies):
        force += body.mass * g
        moment += np.cross(sim.pose(b)[0], body.mass * g)
    assert np.max(np.abs(force)) <= 1e-9 and np.max(np.abs(moment)) <= 1e-9
    # and the accelerometers read -g: the queries see the stop holding the mechanism
    for body in ("crank", "coupler", "rocker"):
        accel = quat.rotate(sim.pose(body)[1], sim.imu(body)[1], np.empty(3))  # world
        assert np.max(np.abs(accel + g)) <= 1e-9


def _delta_without_gravity(integrator, kp, kv):
    # gravity would leave each servo short of its target by its share of the weight / kp
    m = scenarios.build("delta_robot", kp=kp, kv=kv).model
    m.gravity = np.zeros(3)
    return rt.Simulation(m, integrator, DT)


def test_delta_robot_servos_move_the_platform_to_a_target():
    sim = scenarios.build("delta_robot", kp=400.0, kv=5.0)
    assert sim.actuator_names == ["arm0", "arm1", "arm2"]
    # the servos hold the start: their targets are the arms' starting angles
    np.testing.assert_array_equal(
        sim.controls(), [sim.joint_position(f"arm{i}")[0] for i in range(3)])
    sim = _delta_without_gravity("nullspace_rk4", 400.0, 5.0)
    target = np.array([0.03, -0.02, -0.45])
    sim.set_controls(scenarios.delta_robot_arm_angles(target))
    closure = 0.0
    for _ in range(720):
        sim.step()
        closure = max(closure, sim.constraint_error())
    assert np.max(np.abs(sim.pose("platform")[0] - target)) <= 1e-5  # settled in 3 s
    assert closure <= 1e-12
