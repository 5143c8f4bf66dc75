"""rt.Batch of contact models (a ground): copy i is bit for bit the single Simulation of that
copy, with 1 and 2 threads, on both backends (free bodies: box_stack, ball_on_incline,
tippe_top; a tree: quadruped_on_ground) under every integrator that steps contacts, copies
landing at different times; controls, feedback, rollout, per-copy parameters and failures."""
import numpy as np
import pytest

import rtrigid as rt
from rtrigid import integrators, scenarios
from tests.helpers import batch_feedback, sim_rows, with_threads

N = 4
# scenario: (its parameters, the bodies raised by copy i's lift, steps)
SCENES = {
    "box_stack": (dict(n=3), (0, 1, 2), 120),
    "ball_on_incline": ({}, (0,), 120),
    "tippe_top": ({}, (0,), 160),
    "quadruped_on_ground": ({}, (0,), 120),
}
CONTACT_SCHEMES = [i.name for i in integrators.REGISTRY.values() if i.contacts]


def _scene(name, integrator):
    kw, _, _ = SCENES[name]
    return scenarios.build(name, integrator=integrator, **kw)


def _starts(name, integrator, n=N):
    """(Q, V): copy i raised 4 i mm (so the copies land at different steps), its rates
    scaled by 1 + 0.1 i (the tippe top's spin)."""
    _, lifted, _ = SCENES[name]
    Q, V = [], []
    for i in range(n):
        s = _scene(name, integrator)
        for b in lifted:
            s.set_position(b, s.pose(b)[0] + (0.0, 0.0, 0.004 * i))
        Q.append(s.qpos())
        V.append(s.qvel() * (1.0 + 0.1 * i))
    return np.array(Q), np.array(V)


def _single(name, integrator, q, v):
    s = _scene(name, integrator)
    s.set_qpos(q)
    s.set_qvel(v)
    return s


def _assert_copy_is(b, i, s, rows=None):
    """Copy i of b is s: its rows (``rows``: s's taken before reads, which under a mean-rate
    scheme write the tree's scratch in F) and what the façade reads."""
    F, I = sim_rows(s) if rows is None else rows
    np.testing.assert_array_equal(b.F[i], F)  # state, loads, and the warm start, the table
    np.testing.assert_array_equal(b.I[i], I)
    np.testing.assert_array_equal(b.qpos()[i], s.qpos())
    np.testing.assert_array_equal(b.qvel()[i], s.qvel())
    assert b.energy()[i] == s.energy()


@pytest.mark.parametrize("integrator", [
    pytest.param(i, marks=pytest.mark.slow) if i == "energy_momentum4" else i
    for i in CONTACT_SCHEMES])
@pytest.mark.parametrize("name", list(SCENES))
def test_contact_copy_is_a_single_simulation(name, integrator):
    steps = SCENES[name][2]
    Q, V = _starts(name, integrator)
    batches = []
    for threads in (1, 2):
        b = rt.Batch(_scene(name, integrator), n=N)
        b.set_qpos(Q)
        b.set_qvel(V)
        with_threads(threads, lambda: b.step(steps))
        batches.append(b)
    counts = []
    for i in range(N):
        s = _single(name, integrator, Q[i], V[i])
        trace = []
        for _ in range(steps):
            s.step(1)
            trace.append(len(s.contacts()))
        counts.append(trace)
        rows = sim_rows(s)
        for b in batches:
            _assert_copy_is(b, i, s, rows)
    assert all(max(c) > 0 for c in counts)  # every copy touched the ground
    assert len({tuple(c) for c in counts}) > 1  # and not at the same steps
    assert len({b.F[i].tobytes() for i in range(N)}) == N


@pytest.mark.parametrize("threads", [1, 2])
def test_quadruped_controls_feedback_and_rollout(threads):
    name, integ = "quadruped_on_ground", "nullspace_rk4"
    Q, V = _starts(name, integ)
    rng = np.random.default_rng(5)
    b = rt.Batch(_scene(name, integ), n=N)
    b.set_qpos(Q)
    b.set_qvel(V)
    held = rng.uniform(-0.3, 0.3, (N, b.na))
    per_step = rng.uniform(-0.3, 0.3, (30, N, b.na))
    K = np.zeros((N, b.na, b.nq + b.nv))  # each servo on its leg's angle and rate (the
    for a in range(b.na):  # hinges come first in qpos, qvel)
        K[:, a, a] = rng.uniform(0.0, 0.5, N)
        K[:, a, b.nq + a] = rng.uniform(0.0, 0.02, N)
    u0 = rng.uniform(-0.2, 0.2, (N, b.na))

    def run():
        b.step(20, controls=held)
        b.step(30, controls=per_step)
        b.set_feedback(K, u0, np.zeros(b.nq + b.nv))
        return b.rollout(15, record=("qpos", "qvel", "energy"))

    traj = with_threads(threads, run)
    assert traj["qpos"].shape == (15, N, b.nq) and traj["energy"].shape == (15, N)
    for i in range(N):
        s = _single(name, integ, Q[i], V[i])
        s.set_controls(held[i])
        s.step(20)
        for t in range(30):
            s.set_controls(per_step[t, i])
            s.step(1)
        for t in range(15):
            s.set_controls(batch_feedback(s, K[i], u0[i]))
            s.step(1)
            np.testing.assert_array_equal(traj["qpos"][t, i], s.qpos())
            np.testing.assert_array_equal(traj["qvel"][t, i], s.qvel())
            assert traj["energy"][t, i] == s.energy()
        _assert_copy_is(b, i, s)
        assert s.contacts()  # standing on its feet


def test_per_copy_friction_mass_and_restitution():
    """set_params on a contact model: each copy is its model with its parameters, restarted
    from the model's initial state (here placed by set_qpos): the ball slides on the
    low-friction copies and rolls on the others."""
    frictions = np.array([[0.02], [0.1], [0.5], [1.0]])
    masses = np.array([[1.0], [2.0], [1.0], [3.0]])
    restitutions = np.array([[0.0], [0.5], [0.9], [0.0]])
    sim = scenarios.build("ball_on_incline", integrator="energy_momentum")
    Q, V = np.tile(sim.qpos(), (N, 1)), np.zeros((N, sim.nv))
    Q[:, 2] += 0.05  # dropped 5 cm: the restitution shows
    b = rt.Batch(sim, n=N)
    b.set_params(friction=frictions, mass=masses, restitution=restitutions)
    b.set_qpos(Q)
    b.set_qvel(V)
    b.step(150)
    x = []
    for i in range(N):
        m = rt.Model()
        ground = sim.model.grounds[0]
        m.add_ground(normal=ground.normal, friction=ground.friction)
        ball = sim.model.bodies[0]
        m.add_body("ball", masses[i, 0], ball.inertia, shape=ball.shape,
                   friction=frictions[i, 0], restitution=restitutions[i, 0])
        s = rt.Simulation(m, "energy_momentum", sim.dt)
        s.set_qpos(Q[i])
        s.set_qvel(V[i])
        s.step(150)
        _assert_copy_is(b, i, s)
        x.append(s.qpos()[0])
    assert len(set(x)) == N
    with pytest.raises(ValueError, match="restitution"):
        b.set_params(restitution=np.full((N, 1), 1.5))
    with pytest.raises(ValueError, match="friction"):
        b.set_params(friction=np.full((N, 1), -0.1))


def test_a_failed_copy_stops_alone():
    """A copy spun so fast that its state overflows fails (rolled back, ``failed``); the
    others go on, each its single Simulation."""
    integ = "nullspace_rk4"
    Q, V = _starts("ball_on_incline", integ)
    V[2, 3:] = 1e150
    b = rt.Batch(_scene("ball_on_incline", integ), n=N)
    b.set_qpos(Q)
    b.set_qvel(V)
    with pytest.raises(RuntimeError, match=r"copies \[2\]"):
        b.step(40)
    assert b.failed.tolist() == [False, False, True, False]
    for i in (0, 1, 3):
        s = _single("ball_on_incline", integ, Q[i], V[i])
        s.step(40)
        _assert_copy_is(b, i, s)
    s = _single("ball_on_incline", integ, Q[2], V[2])
    with pytest.raises(rt.SimulationError):
        s.step(40)
    assert np.all(np.isfinite(b.F[2]))

