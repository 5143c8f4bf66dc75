"""Kinematic bodies: moved by the user (``add_body(..., kinematic=True)``,
``Simulation.set_kinematic_target``), an infinite mass to what they touch.

References: the target pose itself (reached at the end of the step); Coulomb's law for a box
on a platform moving as x = A sin(2 pi f t) -- it rides while the platform's acceleration stays
below mu g, and otherwise slides with acceleration mu g against its slip, integrated here
independently by fine steps; a turntable's circle; the pusher's prescribed velocity.
"""
import numpy as np
import pytest

import rtrigid as rt
from rtrigid.maths import quat

MU, G = 0.5, 9.81
SCHEMES = ("nullspace_rk4", "energy_momentum", "semi_implicit_euler")


def platform_scene(integrator, dt, half=(1.0, 1.0, 0.05), ground=False):
    """A kinematic slab (top at z = 0.05) with a 0.1 m box of 1 kg resting on it."""
    m = rt.Model()
    p = m.add_body("platform", 10.0, (1.0, 1.0, 1.0), kinematic=True)
    m.add_geom(p, "box", half_extents=half, friction=MU)
    b = m.add_body("box", 1.0, (1 / 600, 1 / 600, 1 / 600))
    m.add_geom(b, "box", half_extents=(0.05, 0.05, 0.05), friction=MU)
    if ground:
        m.add_ground(height=-1.0)
    sim = rt.Simulation(m, integrator=integrator, dt=dt)
    sim.set_position(b, (0.0, 0.0, 0.1))
    return sim, p, b


def coulomb_slide(amplitude, frequency, seconds, samples, h=1e-5):
    """A box starting at rest on a platform at x = A sin(w t): its position and velocity
    relative to the platform at the ``samples`` times, by steps of h (stick while the
    platform's acceleration is within mu g, else mu g against the slip)."""
    w = 2.0 * np.pi * frequency
    u, x, out, want = 0.0, 0.0, [], list(samples)
    for k in range(int(round(seconds / h))):
        t = k * h
        vp, ap, vn = (amplitude * w * np.cos(w * t), -amplitude * w * w * np.sin(w * t),
                      amplitude * w * np.cos(w * (t + h)))
        rel = u - vp
        if abs(rel) < 1e-9 and abs(ap) <= MU * G:
            u = vn
        else:
            un = u + h * MU * G * (-np.sign(rel) if abs(rel) >= 1e-9 else np.sign(ap))
            u = vn if abs(rel) >= 1e-9 and (un - vn) * rel < 0.0 else un
        x += h * u
        if want and abs((k + 1) * h - want[0]) < 0.5 * h:
            tt = want.pop(0)
            out.append((x - amplitude * np.sin(w * tt), u - amplitude * w * np.cos(w * tt)))
    return np.array(out)


def test_a_kinematic_body_reaches_its_target_and_keeps_that_velocity():
    dt = 0.01
    sim, p, _ = platform_scene("nullspace_rk4", dt)
    x0 = sim.pose(p)[0]
    target_x = x0 + np.array([0.03, -0.02, 0.01])
    target_q = quat.from_rotvec(np.array([0.0, 0.0, 0.2]))
    sim.set_kinematic_target(p, target_x, target_q)
    sim.step()
    x, q = sim.pose(p)
    np.testing.assert_allclose(x, target_x, atol=1e-12)
    assert abs(abs(q @ target_q) - 1.0) < 1e-12
    np.testing.assert_allclose(sim.velocity(p)[1], (0.0, 0.0, 20.0), atol=1e-9)
    sim.apply_impulse(p, (100.0, 0.0, 0.0))  # an infinite mass: no change
    sim.apply_force(p, (0.0, 1e3, 0.0))
    sim.step()  # it goes on at that velocity, gravity, loads and the box on it notwithstanding
    np.testing.assert_allclose(sim.pose(p)[0], 2 * target_x - x0, atol=1e-12)
    assert abs(abs(sim.pose(p)[1] @ quat.from_rotvec(np.array([0.0, 0.0, 0.4]))) - 1) < 1e-12


@pytest.mark.parametrize("integrator", SCHEMES)
def test_a_box_rides_a_platform_moving_within_its_friction(integrator):
    """A = 0.1 m at 1 Hz: peak acceleration 3.9 m/s^2 < mu g = 4.9: the box rides without
    slipping and gains no energy relative to the platform."""
    dt, amplitude, w = 1 / 240, 0.1, 2 * np.pi
    sim, p, b = platform_scene(integrator, dt)
    sim.set_velocity(b, (amplitude * w, 0.0, 0.0))
    sim.set_velocity(p, (amplitude * w, 0.0, 0.0))
    offset, relative = [], []
    for k in range(int(round(10.0 / dt))):
        sim.set_kinematic_target(p, (amplitude * np.sin(w * (k + 1) * dt), 0.0, 0.0))
        sim.step()
        offset.append(sim.pose(b)[0] - sim.pose(p)[0])
        dv = sim.velocity(b)[0] - sim.velocity(p)[0]
        spin = sim.velocity(b)[1]
        relative.append(0.5 * dv @ dv + 0.5 / 600 * spin @ spin)
    offset = np.array(offset)
    assert np.max(np.abs(offset[:, 0])) < 1e-4  # m: it rides (the platform swings 0.2 m)
    assert np.max(np.abs(offset[:, 2] - 0.1)) < 2e-4  # m: on the platform, not in it
    # its kinetic energy relative to the platform: at most 1e-5 J (its own, with the
    # platform: up to 0.2 J), and none gained over the run
    relative = np.array(relative)
    half = len(relative) // 2
    assert relative.max() < 1e-5
    assert relative[half:].max() <= 1.5 * relative[:half].max()


def test_a_box_on_a_platform_moving_beyond_its_friction_slides_as_coulomb_says():
    """A = 0.5 m at 1 Hz: peak acceleration 19.7 m/s^2 > mu g; the box, starting at rest,
    slides back and forth on it, against an independent integration of Coulomb's law."""
    dt, amplitude, w = 1e-3, 0.5, 2 * np.pi
    sim, p, b = platform_scene("nullspace_rk4", dt)
    samples = np.arange(1, 11) * 0.5
    got = []
    for k in range(int(round(5.0 / dt))):
        t = (k + 1) * dt
        sim.set_kinematic_target(p, (amplitude * np.sin(w * t), 0.0, 0.0))
        sim.step()
        if np.any(np.abs(samples - t) < 0.5 * dt):
            got.append((sim.pose(b)[0][0] - sim.pose(p)[0][0],
                        sim.velocity(b)[0][0] - sim.velocity(p)[0][0]))
    want = coulomb_slide(amplitude, 1.0, 5.0, samples)
    got = np.array(got)
    assert np.max(np.abs(got[:, 1] - want[:, 1])) < 0.01  # m/s, of slips up to 2.9 m/s
    assert np.max(np.abs(got[:, 0] - want[:, 0])) < 0.015  # m, after 5 s


def test_a_box_on_a_turntable_goes_round_with_it():
    """A turntable at 1 rad/s carries a box at r = 0.3 m (centripetal 0.3 m/s^2 < mu g)."""
    dt, spin, r = 1 / 240, 1.0, 0.3
    sim, p, b = platform_scene("nullspace_rk4", dt)
    sim.set_position(b, (r, 0.0, 0.1))
    sim.set_velocity(b, (0.0, spin * r, 0.0))
    sim.set_angular_velocity(p, (0.0, 0.0, spin))
    for k in range(int(round(2 * np.pi / spin / dt))):
        turn = spin * (k + 1) * dt
        sim.set_kinematic_target(p, (0.0, 0.0, 0.0), quat.from_rotvec(np.array([0, 0, turn])))
        sim.step()
    x = sim.pose(b)[0]
    assert np.hypot(x[0], x[1]) == pytest.approx(r, abs=1e-3)
    assert np.arctan2(x[1], x[0]) % (2 * np.pi) == pytest.approx(turn % (2 * np.pi), abs=1e-2)
    assert sim.velocity(b)[1][2] == pytest.approx(spin, abs=1e-2)


def test_a_platform_moving_up_and_down_carries_the_box():
    """A = 0.05 m at 1 Hz vertically (peak acceleration 2 m/s^2 < g): the box stays on it,
    lifted by it (the energy rule does not take back the platform's work)."""
    dt, amplitude, w = 1 / 240, 0.05, 2 * np.pi
    sim, p, b = platform_scene("energy_momentum", dt)
    sim.set_velocity(b, (0.0, 0.0, amplitude * w))
    sim.set_velocity(p, (0.0, 0.0, amplitude * w))
    gaps = []
    for k in range(int(round(3.0 / dt))):
        sim.set_kinematic_target(p, (0.0, 0.0, amplitude * np.sin(w * (k + 1) * dt)))
        sim.step()
        gaps.append(sim.pose(b)[0][2] - sim.pose(p)[0][2])
    assert np.max(np.abs(np.array(gaps) - 0.1)) < 1e-3


def test_a_kinematic_pusher_pushes_a_box_along_the_ground_at_its_own_speed():
    m = rt.Model()
    m.add_ground()
    pusher = m.add_body("pusher", 1.0, (0.01, 0.01, 0.01), kinematic=True)
    m.add_geom(pusher, "sphere", radius=0.05)
    box = m.add_body("box", 5.0, (0.02, 0.02, 0.02))
    m.add_geom(box, "box", half_extents=(0.1, 0.1, 0.1), friction=0.3)
    sim = rt.Simulation(m, integrator="nullspace_rk4", dt=1 / 240)
    sim.set_position(pusher, (-0.15, 0.0, 0.1))  # no ground contact: it floats where it is put
    sim.set_position(box, (0.0, 0.0, 0.1))
    sim.set_velocity(pusher, (0.5, 0.0, 0.0))
    sim.step(480)
    assert sim.velocity(pusher)[0] == pytest.approx((0.5, 0.0, 0.0), abs=1e-12)
    assert sim.pose(pusher)[0] == pytest.approx((-0.15 + 1.0, 0.0, 0.1), abs=1e-9)
    assert sim.velocity(box)[0][0] == pytest.approx(0.5, abs=1e-3)
    assert sim.pose(box)[0][0] - sim.pose(pusher)[0][0] == pytest.approx(0.15, abs=2e-3)


def test_kinematic_bad_input_is_refused_by_name():
    m = rt.Model()
    with pytest.raises(ValueError, match="kinematic"):
        m.add_body("a", 1.0, (1, 1, 1), kinematic="yes")
    sim, p, b = platform_scene("nullspace_rk4", 0.01)
    before = sim.qpos(), sim.qvel()
    with pytest.raises(ValueError, match="body: 'box' is not kinematic"):
        sim.set_kinematic_target(b, (0, 0, 1))
    with pytest.raises(ValueError, match="x"):
        sim.set_kinematic_target(p, (0, np.nan, 1))
    with pytest.raises(ValueError, match="q"):
        sim.set_kinematic_target(p, (0, 0, 1), (0, 0, 0, 0))
    np.testing.assert_array_equal(sim.qpos(), before[0])
    np.testing.assert_array_equal(sim.qvel(), before[1])
    jointed = rt.Model()
    a = jointed.add_body("arm", 1.0, (1, 1, 1), kinematic=True)
    jointed.add_body("link", 1.0, (1, 1, 1))
    jointed.add_joint("revolute", a, "link", axis_parent=(0, 0, 1))
    with pytest.raises(ValueError, match="kinematic: bodies \\['arm'\\]"):
        rt.Simulation(jointed, integrator="nullspace_rk4", dt=0.01)


def test_on_a_turntable_blocks_within_mu_g_over_omega_squared_ride_and_the_others_slide_off():
    sim = rt.scenarios.build("turntable", integrator="nullspace_rk4")
    reach = rt.scenarios.info(sim)["reach"]  # 0.545 m
    radii = (0.2, 0.35, 0.5, 0.65, 0.8)
    sim.step(480)
    for k, r in enumerate(radii):
        x = sim.pose(k + 1)[0]
        if r < reach:
            assert np.hypot(x[0], x[1]) == pytest.approx(r, abs=2e-3)
            assert x[2] == pytest.approx(0.4, abs=1e-3)  # still on the table
        else:
            assert np.hypot(x[0], x[1]) > 1.0 and x[2] < 0.06  # on the ground
