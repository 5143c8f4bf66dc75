"""rt.Batch: copy i of a batch is bit for bit a single Simulation of that copy, with 1 and 2
threads, for both backends; controls and feedback against the same loop written with the
Simulation API; validation."""
import copy

import numba
import numpy as np
import pytest

import rtrigid as rt
from rtrigid import scenarios

N = 4


def arm():
    """A 2-link arm (revolute rods) with position servos on both joints."""
    m = copy.deepcopy(scenarios.double_pendulum("nullspace_rk4", 1e-3).model)
    m.add_actuator(0, "position", kp=20.0, kv=2.0)
    m.add_actuator(1, "position", kp=10.0, kv=1.0, ctrl_range=(-0.5, 0.5))
    return m


def limited_arm():
    """The arm scenario's 3-link servo arm with hard limits on its joints (the copies hit them)."""
    m = rt.Model()
    for i in range(3):
        m.add_body(f"link{i}", 0.9 ** i, (0.008, 0.008, 0.0005))
        j = m.add_joint("revolute", None if i == 0 else i - 1, i, axis_parent=(0, 1, 0),
                        anchor_parent=(0, 0, 0) if i == 0 else (0, 0, -0.15),
                        anchor_child=(0, 0, 0.15), limits=(-0.6, 0.4 + 0.1 * i))
        m.add_actuator(j, "position", kp=200.0, kv=5.0, force_range=(-40.0, 40.0))
    return m


def top():
    return copy.deepcopy(scenarios.gyro_top("nullspace_rk4", 1e-3).model)


def _random_start(b, seed=0):
    rng = np.random.default_rng(seed)
    ref = rt.Simulation(b._base_model, b.integrator, b.dt)
    Q = ref.qpos() + rng.uniform(-0.3, 0.3, (b.n, b.nq))
    V = ref.qvel() + rng.uniform(-1.0, 1.0, (b.n, b.nv))
    return Q, V


def _single(model, integrator, q, v):
    s = rt.Simulation(model, integrator, 1e-3)
    s.set_qpos(q)
    s.set_qvel(v)
    return s


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("integrator", ["nullspace_rk4", "semi_implicit_euler", "energy_momentum"])
@pytest.mark.parametrize("make", [arm, top])
def test_copy_is_a_single_simulation(make, integrator, threads):
    model = make()
    old = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        b = rt.Batch(model, n=N, integrator=integrator, dt=1e-3)
        Q, V = _random_start(b)
        b.set_qpos(Q)
        b.set_qvel(V)
        rng = np.random.default_rng(1)
        U = rng.uniform(-1.0, 1.0, (30, N, b.na))
        b.step(20)
        if b.na:
            b.step(30, controls=U)
    finally:
        numba.set_num_threads(old)
    for i in range(N):
        s = _single(model, integrator, Q[i], V[i])
        s.step(20)
        for t in range(30 if b.na else 0):
            s.set_controls(U[t, i])
            s.step(1)
        np.testing.assert_array_equal(b.F[i], s.backend.F)
        np.testing.assert_array_equal(b.qpos()[i], s.qpos())
        np.testing.assert_array_equal(b.qvel()[i], s.qvel())
        assert b.energy()[i] == s.energy()
    assert len({b.F[i].tobytes() for i in range(N)}) == N  # the copies differ


@pytest.mark.parametrize("integrator", ["nullspace_rk4", "semi_implicit_euler", "energy_momentum"])
def test_copy_with_limits_and_servos_is_a_single_simulation(integrator):
    model = limited_arm()
    b = rt.Batch(model, n=N, integrator=integrator, dt=1e-3)
    rng = np.random.default_rng(4)
    Q = rng.uniform(-0.5, 0.3, (N, 3))
    V = rng.uniform(-3.0, 3.0, (N, 3))
    b.set_qpos(Q)
    b.set_qvel(V)
    U = rng.uniform(-1.5, 1.5, (N, 3))  # targets beyond the stops: the servos push into them
    b.step(200, controls=U)
    hit = 0
    for i in range(N):
        s = _single(model, integrator, Q[i], V[i])
        s.set_controls(U[i])
        for _ in range(200):
            s.step(1)
            hit += np.any(np.isclose(s.qpos(), -0.6) | np.isclose(s.qpos(), [0.4, 0.5, 0.6]))
        np.testing.assert_array_equal(b.F[i], s.backend.F)
        np.testing.assert_array_equal(b.qpos()[i], s.qpos())
        assert b.energy()[i] == s.energy()
    assert hit > 0  # some copy sat on a stop


def test_factory_and_params_give_per_copy_models():
    masses = [1.0, 1.5, 2.0, 2.5]

    def factory(i):
        m = arm()
        m.bodies[0].mass = masses[i]
        return m

    b = rt.Batch(factory, n=N, integrator="energy_momentum", dt=1e-3)
    b.step(40, controls=np.full((N, 2), 0.3))
    c = rt.Batch(arm(), n=N, integrator="energy_momentum", dt=1e-3)
    c.set_params(mass=[[m, 1.0] for m in masses])
    c.step(40, controls=np.full((N, 2), 0.3))
    for i in range(N):
        s = rt.Simulation(factory(i), "energy_momentum", 1e-3)
        s.set_controls([0.3, 0.3])
        for _ in range(40):
            s.step(1)
        np.testing.assert_array_equal(b.F[i], s.backend.F)
        np.testing.assert_array_equal(c.F[i], s.backend.F)
    assert b.qpos()[0, 0] != b.qpos()[3, 0]


def test_feedback_in_the_loop_matches_the_simulation_loop():
    model = arm()
    b = rt.Batch(model, n=N, integrator="nullspace_rk4", dt=1e-3)
    Q, V = _random_start(b, seed=3)
    b.set_qpos(Q)
    b.set_qvel(V)
    rng = np.random.default_rng(2)
    K = rng.uniform(0.0, 2.0, (N, 2, 4))
    u0 = rng.uniform(-0.2, 0.2, (N, 2))
    xref = rng.uniform(-0.2, 0.2, (N, 4))
    b.set_feedback(K, u0, xref)
    traj = b.rollout(25, record=("qpos", "qvel"))
    assert traj["qpos"].shape == (25, N, 2) and traj["qvel"].shape == (25, N, 2)
    for i in range(N):
        s = _single(model, "nullspace_rk4", Q[i], V[i])
        for t in range(25):
            x = np.concatenate([s.qpos(), s.qvel()])
            u = []
            for a in range(2):
                ua = u0[i, a]
                for j in range(4):
                    ua -= K[i, a, j] * (x[j] - xref[i, j])
                u.append(ua)
            s.set_controls(u)
            s.step(1)
            np.testing.assert_array_equal(traj["qpos"][t, i], s.qpos())
            np.testing.assert_array_equal(traj["qvel"][t, i], s.qvel())


def test_validation_refuses_and_keeps_the_state():
    b = rt.Batch(arm(), n=N, integrator="energy_momentum", dt=1e-3)
    F = b.F.copy()
    with pytest.raises(ValueError, match="qpos"):
        b.set_qpos(np.zeros((N, 3)))
    Q = np.zeros((N, 2))
    Q[2, 1] = np.nan
    with pytest.raises(ValueError, match="qpos: copy 2"):
        b.set_qpos(Q)
    with pytest.raises(ValueError, match="qvel"):
        b.set_qvel(np.zeros((N + 1, 2)))
    with pytest.raises(ValueError, match="controls"):
        b.step(3, controls=np.zeros((N, 3)))
    with pytest.raises(ValueError, match="controls"):
        b.step(3, controls=np.full((3, N, 2), np.inf))
    with pytest.raises(ValueError, match="mass"):
        b.set_params(mass=np.zeros((N, 2)))
    with pytest.raises(ValueError, match="colour"):
        b.set_params(colour=1)
    with pytest.raises(ValueError, match="K"):
        b.set_feedback(np.zeros((2, 5)))
    np.testing.assert_array_equal(b.F, F)
    with pytest.raises(ValueError, match="does not share"):
        rt.Batch(lambda i: arm() if i < 2 else top(), n=N, integrator="energy_momentum")
    with pytest.raises(ValueError, match="model"):
        rt.Batch("arm", n=N)
    with pytest.raises(ValueError, match="n"):
        rt.Batch(arm(), n=0)
    with pytest.raises(ValueError, match="closed loops"):  # (the loop schemes batch them)
        rt.Batch(rt.scenarios.build("four_bar").model, n=N, integrator="semi_implicit_euler")


def test_simulations_as_sources_start_in_their_state():
    """A factory of Simulations (a scenario's state, its controls set after building) gives
    copies that are bit for bit those Simulations stepped alone; the sources stay untouched."""
    kps = [100.0, 150.0, 200.0, 250.0]
    sims = [scenarios.build("arm", integrator="nullspace_rk4", kp=kp) for kp in kps]
    before = [s.backend.F.copy() for s in sims]
    b = rt.Batch(lambda i: sims[i], n=N)
    assert (b.integrator, b.dt) == ("nullspace_rk4", 1e-3)
    b.step(50)
    for s, F0 in zip(sims, before):
        np.testing.assert_array_equal(s.backend.F, F0)
        s.step(50)
    for i in range(N):
        np.testing.assert_array_equal(b.F[i], sims[i].backend.F)
        np.testing.assert_array_equal(b.qpos()[i], sims[i].qpos())
    assert b.controls()[0].tolist() == [0.5, -0.8]
    with pytest.raises(ValueError, match="copy 0's Simulation steps nullspace_rk4"):
        rt.Batch(sims[0], n=N, integrator="energy_momentum")


def test_zero_steps_with_controls_over_time_change_nothing():
    """step(0, controls=(0, n, nu)) takes no step and so applies no control row (it raised
    an IndexError once); step(0) with held controls sets them, as set_controls would."""
    b = rt.Batch(arm(), n=N, integrator="nullspace_rk4", dt=1e-3)
    Q, V = _random_start(b)
    b.set_qpos(Q)
    b.set_qvel(V)
    before = b.F.copy()
    b.step(0, controls=np.zeros((0, N, b.na)))
    np.testing.assert_array_equal(b.F, before)
    U = np.full((N, b.na), 0.9)
    b.step(0, controls=U)
    for i in range(N):
        s = _single(b._base_model, "nullspace_rk4", Q[i], V[i])
        s.set_controls(U[i])  # clamped to the second servo's ctrl_range
        np.testing.assert_array_equal(b.F[i], s.backend.F)
