"""Tests for the MuJoCo reference models (optional dependency)."""

import numpy as np
import pytest

from rtrigid.references import mujoco_ref

mujoco = pytest.importorskip("mujoco")


def _qmul(a, b):
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array(
        [
            w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
            w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        ]
    )


def _rot(q):
    mat = np.zeros(9)
    mujoco.mju_quat2Mat(mat, np.asarray(q, dtype=float))
    return mat.reshape(3, 3)


def _random_quat(rng):
    q = rng.normal(size=4)
    return q / np.linalg.norm(q)


def test_available():
    assert mujoco_ref.available()


def test_model_matches_request_exactly():
    mass, inertia = 1.7, (0.3, 0.45, 0.6)
    model, _ = mujoco_ref.build_single_body(
        mass, inertia, pivot_world=(0.1, -0.2, 0.3), pivot_body=(0.01, 0.02, -0.05),
        gravity=(0.0, 0.5, -9.0), dt=2.5e-4, integrator="implicitfast",
    )
    assert model.body_mass[1] == mass
    np.testing.assert_array_equal(model.body_inertia[1], inertia)
    np.testing.assert_array_equal(model.body_ipos[1], (-0.01, -0.02, 0.05))
    np.testing.assert_array_equal(model.body_pos[1], (0.1, -0.2, 0.3))
    np.testing.assert_array_equal(model.opt.gravity, (0.0, 0.5, -9.0))
    assert model.opt.timestep == 2.5e-4
    assert model.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    assert model.jnt_type[0] == mujoco.mjtJoint.mjJNT_BALL
    assert model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_CONTACT
    assert model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_AUTORESET
    for name, code in [
        ("RK4", mujoco.mjtIntegrator.mjINT_RK4),
        ("Euler", mujoco.mjtIntegrator.mjINT_EULER),
        ("implicit", mujoco.mjtIntegrator.mjINT_IMPLICIT),
    ]:
        free, _ = mujoco_ref.build_single_body(1.0, (1.0, 1.0, 1.0), integrator=name)
        assert free.opt.integrator == code
        assert free.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE
    with pytest.raises(ValueError):
        mujoco_ref.build_single_body(1.0, (1.0, 1.0, 1.0), integrator="leapfrog")


def test_round_trip_free():
    rng = np.random.default_rng(1)
    model, data = mujoco_ref.build_single_body(2.0, (0.1, 0.2, 0.25))
    state = dict(
        x=rng.normal(size=3), p=_random_quat(rng), v=rng.normal(size=3),
        omega_body=rng.normal(size=3),
    )
    mujoco_ref.set_state(model, data, **state)
    out = mujoco_ref.get_state(model, data)
    for key, value in state.items():
        np.testing.assert_array_equal(out[key], value)
    # mj_forward ran: MuJoCo's own CoM and orientation agree.
    np.testing.assert_allclose(data.xipos[1], state["x"], atol=1e-15)
    np.testing.assert_allclose(data.xquat[1], state["p"], atol=1e-15)


def test_round_trip_pivoted():
    rng = np.random.default_rng(2)
    pivot_world = np.array([0.3, -0.1, 0.5])
    pivot_body = np.array([0.02, -0.01, -0.07])
    model, data = mujoco_ref.build_single_body(
        1.3, (0.01, 0.02, 0.025), pivot_world=pivot_world, pivot_body=pivot_body
    )
    p = _random_quat(rng)
    omega = rng.normal(size=3)
    rot = _rot(p)
    x = pivot_world - rot @ pivot_body
    v = rot @ np.cross(omega, -pivot_body)
    mujoco_ref.set_state(model, data, x=x, p=p, v=v, omega_body=omega)
    out = mujoco_ref.get_state(model, data)
    np.testing.assert_array_equal(out["p"], p)
    np.testing.assert_array_equal(out["omega_body"], omega)
    np.testing.assert_allclose(out["x"], x, atol=1e-15)
    np.testing.assert_allclose(out["v"], v, atol=1e-15)
    # MuJoCo's own kinematics: CoM position and CoM velocity (world frame).
    np.testing.assert_allclose(data.xipos[1], x, atol=1e-15)
    vel = np.zeros(6)
    mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_BODY, 1, vel, 0)
    np.testing.assert_allclose(vel[3:], v, atol=1e-14)
    np.testing.assert_allclose(vel[:3], rot @ omega, atol=1e-14)
    with pytest.raises(ValueError):
        mujoco_ref.set_state(model, data, x=x + 0.01, p=p, omega_body=omega)
    with pytest.raises(ValueError):
        mujoco_ref.set_state(model, data, x=x, p=p, v=v + 0.01, omega_body=omega)


@pytest.mark.parametrize("pivoted", [False, True])
def test_qvel_frames_by_finite_differences(pivoted):
    """Free joint: linear qvel in world axes, angular in body axes; ball: body axes."""
    rng = np.random.default_rng(3)
    kwargs = dict(pivot_world=(0.0, 0.0, 0.0), pivot_body=(0.0, 0.0, -0.1)) if pivoted else {}
    model, data = mujoco_ref.build_single_body(
        1.0, (0.1, 0.2, 0.3), gravity=(0, 0, 0), dt=1e-7, integrator="Euler", **kwargs
    )
    p = _random_quat(rng)
    omega = np.array([0.3, -0.7, 1.1])
    v = np.array([1.0, 2.0, -0.5])
    if pivoted:
        mujoco_ref.set_state(model, data, p=p, omega_body=omega)
    else:
        mujoco_ref.set_state(model, data, x=np.zeros(3), p=p, v=v, omega_body=omega)
    before = mujoco_ref.get_state(model, data)
    mujoco_ref.step(model, data, 1)
    after = mujoco_ref.get_state(model, data)
    dt = model.opt.timestep
    pdot = (after["p"] - before["p"]) / dt
    np.testing.assert_allclose(pdot, 0.5 * _qmul(p, np.r_[0.0, omega]), atol=1e-5)
    xdot = (after["x"] - before["x"]) / dt
    np.testing.assert_allclose(xdot, before["v"], atol=1e-5)


def test_free_body_without_gravity_conserves_momenta():
    rng = np.random.default_rng(4)
    mass = 3.0
    inertia = np.array([0.2, 0.5, 0.6])
    model, data = mujoco_ref.build_single_body(
        mass, inertia, gravity=(0.0, 0.0, 0.0), dt=1e-3, integrator="RK4"
    )
    x0 = np.array([0.1, 0.2, 0.3])
    v0 = np.array([0.4, -0.3, 0.2])
    # Rotation close to the unstable intermediate axis: a demanding case.
    omega0 = np.array([0.3, 5.0, 0.2])
    mujoco_ref.set_state(model, data, x=x0, p=_random_quat(rng), v=v0, omega_body=omega0)
    e0 = mujoco_ref.energy(model, data)

    def ang_mom_world(state):
        return _rot(state["p"]) @ (inertia * state["omega_body"])

    h0 = ang_mom_world(mujoco_ref.get_state(model, data))
    for k in range(1, 11):
        mujoco_ref.step(model, data, 200)
        s = mujoco_ref.get_state(model, data)
        t = k * 200 * model.opt.timestep
        np.testing.assert_allclose(mass * s["v"], mass * v0, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(s["x"], x0 + v0 * t, atol=1e-10)
        h = ang_mom_world(s)
        assert abs(np.linalg.norm(h) - np.linalg.norm(h0)) < 1e-6 * np.linalg.norm(h0)
        np.testing.assert_allclose(h, h0, atol=1e-5 * np.linalg.norm(h0))
    assert abs(mujoco_ref.energy(model, data) - e0) < 1e-6 * e0


def _gyro_model(dt, integrator):
    top = mujoco_ref.gyro_top_state()
    model, data = mujoco_ref.build_single_body(
        top["mass"], top["inertia"], pivot_world=top["pivot_world"],
        pivot_body=top["pivot_body"], gravity=top["gravity"], dt=dt, integrator=integrator,
    )
    mujoco_ref.set_state(
        model, data, x=top["x"], p=top["p"], v=top["v"], omega_body=top["omega_body"]
    )
    return top, model, data


def test_gyro_top_initial_state():
    top = mujoco_ref.gyro_top_state()
    np.testing.assert_allclose(top["com_ref"](0.0), top["x"], atol=1e-15)
    # The velocity of the reference trajectory at t = 0 matches the state.
    h = 1e-6
    v_fd = (top["com_ref"](h) - top["com_ref"](-h)) / (2 * h)
    np.testing.assert_allclose(v_fd, top["v"], atol=1e-8)
    # The tip sits at the origin.
    np.testing.assert_allclose(top["x"] + _rot(top["p"]) @ top["pivot_body"], 0.0, atol=1e-15)
    assert top["com_ref"](np.linspace(0, 1, 5)).shape == (5, 3)


def test_gyro_top_follows_steady_precession_and_conserves_energy():
    top, model, data = _gyro_model(1e-4, "RK4")
    e0 = mujoco_ref.energy(model, data)
    ref_norm = np.linalg.norm(top["x"])
    worst_pos = 0.0
    worst_energy = 0.0
    for k in range(1, 21):
        mujoco_ref.step(model, data, 100)
        t = data.time
        assert t == pytest.approx(k * 100 * 1e-4)
        x = mujoco_ref.get_state(model, data)["x"]
        worst_pos = max(worst_pos, np.linalg.norm(x - top["com_ref"](t)) / ref_norm)
        worst_energy = max(worst_energy, abs(mujoco_ref.energy(model, data) - e0) / abs(e0))
    assert worst_pos < 1e-4
    assert worst_energy < 1e-6


def test_time_per_step_restores_state():
    _, model, data = _gyro_model(1e-3, "RK4")
    before = mujoco_ref.get_state(model, data)
    t0 = data.time
    tps = mujoco_ref.time_per_step(model, data, n=200, repeats=3)
    assert 0.0 < tps < 1e-2
    after = mujoco_ref.get_state(model, data)
    assert data.time == t0
    for key in before:
        np.testing.assert_array_equal(after[key], before[key])
