"""semi_implicit_euler: first order against a fine RK4 reference on both backends, MuJoCo's
Euler (and implicitfast) to round-off, implicit dampers and the servo range it accepts,
limits, exact motor work, and what it refuses (loops, contacts)."""
import numpy as np
import pytest

import rtrigid as rt

EULER = "semi_implicit_euler"


def chain(n, kind="motor", damping=0.0, limits=(-np.inf, np.inf), **actuator):
    """n links of 0.5 m hanging from the world origin, tilted axes, one actuator per joint."""
    m = rt.Model()
    for i in range(n):
        m.add_body(f"l{i}", 1.0 - 0.1 * i, (0.03, 0.03, 0.004))
        j = m.add_joint("revolute", None if i == 0 else i - 1, i, axis_parent=(1.0, 0.2, 0.0),
                        anchor_parent=(0.0, 0.0, 0.0) if i == 0 else (0.0, 0.0, -0.25),
                        anchor_child=(0.0, 0.0, 0.25), damping=damping, limits=limits)
        m.add_actuator(j, kind, name=f"a{i}", **actuator)
    return m


def _errors(build, ref, dts, t_end=0.1):
    errors = []
    for dt in dts:
        sim = build(dt)
        sim.step(int(round(t_end / dt)))
        errors.append(max(np.abs(sim.qpos() - ref.qpos()).max(),
                          np.abs(sim.qvel() - ref.qvel()).max()))
    return errors


def test_euler_is_first_order_on_a_chain_of_spherical_joints():
    """Quaternions turned by the exponential map: the error halves with h."""
    rng = np.random.default_rng(12)
    kw = dict(n=3, q0=[rt.quat.from_rotvec(rng.normal(scale=0.5, size=3)) for _ in range(3)],
              omega0=rng.normal(size=(3, 3)))
    ref = rt.scenarios.build("chain", integrator="nullspace_rk4", dt=1e-4, **kw)
    ref.step(1000)
    e = _errors(lambda dt: rt.scenarios.build("chain", integrator=EULER, dt=dt, **kw), ref,
                (2e-3, 1e-3, 5e-4))
    assert 1e-4 < e[0] < 1e-1
    assert 1.8 < e[0] / e[1] < 2.2 and 1.8 < e[1] / e[2] < 2.2


def test_euler_is_first_order_on_a_free_body():
    """The single-body backend: Euler's equations, one evaluation a step."""
    ref = rt.scenarios.build("free_body", integrator="nullspace_rk4", dt=1e-4)
    ref.step(1000)
    e = _errors(lambda dt: rt.scenarios.build("free_body", integrator=EULER, dt=dt), ref,
                (2e-3, 1e-3, 5e-4))
    assert 1.8 < e[0] / e[1] < 2.2 and 1.8 < e[1] / e[2] < 2.2
    sim = rt.scenarios.build("free_body", integrator=EULER, dt=1e-3)
    sim.step(100)
    assert abs(np.linalg.norm(sim.q[0]) - 1.0) < 1e-15


def _against_mujoco(model, mj_integrator, u, steps=1000):
    mujoco = pytest.importorskip("mujoco")
    from rtrigid.references.mujoco_ref import build_tree

    mjm, d, qadr, vadr = build_tree(model, dt=1e-3, integrator=mj_integrator)
    sim = rt.Simulation(model, EULER, 1e-3)
    sim.set_controls(u)
    d.ctrl[:] = u
    err = 0.0
    for _ in range(steps):
        sim.step()
        mujoco.mj_step(mjm, d)
        err = max(err, np.abs(sim.qpos() - d.qpos[qadr]).max(),
                  np.abs(sim.qvel() - d.qvel[vadr]).max())
    assert np.abs(sim.qpos()).max() > 0.3  # the arm moved
    return err


def test_euler_matches_mujoco_euler_with_joint_dampers():
    """Motors and joint dampers: MuJoCo's Euler takes the dampers implicitly, (M + hD), as
    this scheme does, so the two are the same arithmetic up to the order of operations:
    1 s of a 3-link arm agrees to round-off (1e-16 measured)."""
    err = _against_mujoco(chain(3, "motor", damping=0.3), "Euler", np.array([0.4, -0.7, 0.9]))
    assert err < 1e-12


def test_euler_servos_match_mujoco_implicitfast_not_its_euler():
    """Position servos: their kv is implicit here; MuJoCo's Euler keeps actuator kv explicit
    (only joint damping is implicit there), its implicitfast takes it implicitly as here."""
    model = chain(3, "position", kp=30.0, kv=0.5)
    u = np.array([0.4, -0.7, 0.9])
    assert _against_mujoco(model, "implicitfast", u) < 1e-12
    assert _against_mujoco(model, "Euler", u) > 1e-4  # O(h) apart: kv explicit there


def _pendulum(**actuator):
    m = rt.Model()
    m.add_body("link", 1.0, (0.01, 0.01, 0.001))
    j = m.add_joint("revolute", None, "link", axis_parent=(1, 0, 0), anchor_child=(0, 0, 0.2))
    if actuator:
        m.add_actuator(j, "position", name="servo", **actuator)
    return m


def test_euler_servo_is_stable_at_gains_rk4_refuses():
    """kv implicit: the servo's stable range is kp dt²/m < 4 + 2 kv dt/m, which the
    Simulation accepts up to 0.8 of.  At kv dt/m = 10, kp dt²/m = 18 (RK4 stops at 6.25): the
    servo settles on its target (the discrete step's eigenvalues are ~0.3 in modulus)."""
    dt = 1e-3
    m_eff = rt.Simulation(_pendulum(), EULER, dt).mass_matrix()[0, 0]
    kv = 10.0 * m_eff / dt
    kp = 18.0 * m_eff / dt ** 2
    with pytest.raises(ValueError, match="nullspace_rk4's stable range"):
        rt.Simulation(_pendulum(kp=kp, kv=kv), "nullspace_rk4", dt)
    sim = rt.Simulation(_pendulum(kp=kp, kv=kv), EULER, dt)
    sim.set_control("servo", 0.5)
    errors = []
    for _ in range(40):
        sim.step(1)
        errors.append(abs(sim.qpos()[0] - 0.5))
    assert max(errors) < 0.5  # no overshoot past the start's distance
    # at rest within 40 steps, off the target by gravity's sag m g l sin(0.5) / kp ~ 1e-6
    assert errors[-1] < 1e-5 and abs(errors[-1] - errors[-2]) < 1e-12
    with pytest.raises(ValueError, match=r"semi_implicit_euler's stable range.*kp g² dt²/m_eff"):
        rt.Simulation(_pendulum(kp=kp * 1.1, kv=kv), EULER, dt)


def test_euler_servo_at_the_edge_of_its_range_does_not_grow():
    """kp dt²/m = 3.1 with kv = 0 (range 3.2): a fast oscillation that Euler keeps bounded
    (|eigenvalues| = 1 undamped; its invariant ellipse stretches the angle's swing by up to
    1/sqrt(1 - 3.1/4) = 2.1x the step's 0.1), where kp dt²/m > 4 would grow without bound."""
    dt = 1e-3
    m_eff = rt.Simulation(_pendulum(), EULER, dt).mass_matrix()[0, 0]
    sim = rt.Simulation(_pendulum(kp=3.1 * m_eff / dt ** 2, kv=0.0), EULER, dt)
    sim.set_control("servo", 0.1)
    amp = []  # the oscillation's amplitude over 50 steps, every 500
    for _ in range(4):
        sim.step(500)
        peak = 0.0
        for _ in range(50):
            sim.step(1)
            peak = max(peak, abs(sim.qpos()[0] - 0.1))
        amp.append(peak)
    assert max(amp) < 0.25 and amp[-1] <= 1.01 * amp[0]


def test_euler_motor_work_is_the_force_times_the_turn_and_a_limit_holds():
    """A motor drives a joint into its limit for 10 s: the coordinate never passes it, and
    the motor's work is exactly u g (theta_end - theta_0)."""
    model = chain(2, "motor", limits=(-0.4, 0.3))
    sim = rt.Simulation(model, EULER, 1e-3)
    u = np.array([2.0, -1.5])
    sim.set_controls(u)
    q0 = sim.qpos()
    worst = 0.0
    for _ in range(100):
        sim.step(100)
        q = sim.qpos()
        worst = max(worst, q[0] - 0.3, -0.4 - q[1], 0.0)
    assert worst == 0.0
    assert sim.qpos()[0] == 0.3 and sim.qpos()[1] == -0.4  # on the stops
    np.testing.assert_allclose(sim.actuator_work(), u * (sim.qpos() - q0), rtol=1e-12,
                               atol=1e-14)


def test_euler_refuses_loops():
    with pytest.raises(ValueError, match="^integrator: semi_implicit_euler does not step closed"):
        rt.scenarios.build("four_bar", integrator=EULER)
