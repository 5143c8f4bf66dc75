"""rt.Batch of models with loop joints (closed kinematic loops) under nullspace_rk4,
energy_momentum and energy_momentum4: copy i is bit for bit the single Simulation of that
copy, with 1 and 2 threads -- a four-bar with a motor on its crank and the crank's upper
limit, and the delta robot with its arms' servos and a limit on one arm, copies starting in
different states and hitting their limits; held and per-step controls, feedback, rollout; a
copy whose step fails stops alone; a scheme without a loop step is refused.  The
allocation-free least K-norm solve of the limit steps against numpy's pseudo-inverse; the
compiled EM loop step's energy balance (E - W kept to round-off through motor and limit)."""
import functools

import numpy as np
import pytest

import rtrigid as rt
from rtrigid import integrators, scenarios
from rtrigid.backends.tree import loops
from rtrigid.maths import dense
from tests.helpers import DT, LIMITED, batch_feedback, four_bar, sim_rows, with_threads

N = 4


SCHEMES = [i.name for i in integrators.REGISTRY.values() if i.batched_loops]


def delta(i, integrator="nullspace_rk4"):
    """Copy i: the delta robot's platform 0.38 + 0.01 i m below the base, its three arm
    servos (kp 20, kv 0.5) holding it there; arm 0 limited to 0.1 rad above its start (as
    :func:`four_bar`)."""
    h = 0.38 + 0.01 * i
    thetas = scenarios.delta_robot_arm_angles((0.0, 0.0, -h))
    m = scenarios.build("delta_robot", kp=20.0, kv=0.5, height=h).model
    if LIMITED[integrator]:
        next(j for j in m.joints if j.name == "arm0").limits = (thetas[0] - 0.4,
                                                                thetas[0] + 0.1)
    s = rt.Simulation(m, integrator, DT)
    s.set_controls(thetas)
    return s


# model: (copy i's Simulation, the limited joint, the controls' spread, held steps, per-step)
MODELS = {"four_bar": (four_bar, "crank", 0.6, 90, 40), "delta": (delta, "arm0", 0.4, 60, 20)}


def _controls(make, spread, k, seed):
    """(held (N, na), per-step (k, N, na)): copy i's starting controls (a servo's target,
    a motor's 0) plus a push of up to ``spread`` towards the limit."""
    rng = np.random.default_rng(seed)
    base = np.array([make(i).controls() for i in range(N)])
    held = base + rng.uniform(0.3, 1.0, base.shape) * spread
    return held, held[None] + rng.uniform(-0.5, 0.5, (k,) + base.shape) * spread


def _assert_copies_are(batches, sims, saved=None, read=False):
    """Copy i of each batch is sims[i], for every i: the whole rows (``saved``: the batches'
    rows taken before their reads; the sims' taken here before theirs -- under a mean-rate
    scheme a read writes the row's tree scratch, which the EM loop step does not read back;
    ``read``: the sims were read between steps, so that section is not compared), then what
    the façade reads."""
    mine = [sim_rows(s) for s in sims]
    saved = saved or [(b.F.copy(), b.I.copy()) for b in batches]
    if read:
        be = sims[0].backend
        o = (be._work.__array_interface__["data"][0] - be.F.__array_interface__["data"][0]) // 8
        saved = [(F.copy(), I) for F, I in saved]
        for F, _ in saved + mine:
            F[..., o:o + be._work.size] = 0.0
    for F, I in saved:
        for i, (Fs, Is) in enumerate(mine):
            np.testing.assert_array_equal(F[i], Fs, err_msg=f"copy {i}")
            np.testing.assert_array_equal(I[i], Is, err_msg=f"copy {i}")
    for b in batches:
        for i, s in enumerate(sims):
            np.testing.assert_array_equal(b.qpos()[i], s.qpos())
            np.testing.assert_array_equal(b.qvel()[i], s.qvel())
            assert b.energy()[i] == s.energy()


@pytest.mark.parametrize("integrator", [
    s if s != "energy_momentum4" else pytest.param(s, marks=pytest.mark.slow) for s in SCHEMES])
@pytest.mark.parametrize("name", list(MODELS))
def test_loop_copy_is_a_single_simulation(name, integrator):
    make, joint, spread, k1, k2 = MODELS[name]
    make = functools.partial(make, integrator=integrator)
    held, per_step = _controls(make, spread, k2, 3)
    batches = []
    for threads in (1, 2):
        b = rt.Batch(make, n=N)
        assert b.integrator == integrator

        def run():
            b.step(k1, controls=held)
            b.step(k2, controls=per_step)

        with_threads(threads, run)
        batches.append(b)
    saved = [(b.F.copy(), b.I.copy()) for b in batches]
    hits, sims = [], []
    probe = make(0)  # the joint's slot in qpos (joint_position writes a mean-rate scheme's
    names = probe.joint_names  # scratch in F, which a batch copy never reads: not read below)
    slot = sum(len(probe.joint_position(j)) for j in names[:names.index(joint)])
    for i in range(N):
        s = make(i)
        lim = s.model.joints[[j.name for j in s.model.joints].index(joint)].limits
        upper = lim[1] if lim is not None else np.inf
        s.set_controls(held[i])
        hit = None
        for t in range(k1 + k2):
            if t >= k1:
                s.set_controls(per_step[t - k1, i])
            s.step(1)
            if hit is None and s.qpos()[slot] == upper:
                hit = t
        hits.append(hit)
        sims.append(s)
    _assert_copies_are(batches, sims, saved)
    assert all(s.constraint_error() <= 1e-12 for s in sims)
    if LIMITED[integrator]:  # every copy hit its limit, not all together
        assert None not in hits and len(set(hits)) > 1
    assert len({b.F[i].tobytes() for i in range(N)}) == N


@pytest.mark.parametrize("integrator", SCHEMES)
@pytest.mark.parametrize("threads", [1, 2])
def test_four_bar_feedback_and_rollout(threads, integrator):
    rng = np.random.default_rng(7)
    make = functools.partial(four_bar, integrator=integrator)
    b = rt.Batch(make, n=N)
    U = rng.uniform(-0.5, 0.5, (25, N, b.na))
    K = np.zeros((N, b.na, b.nq + b.nv))  # the motor on the crank's angle and rate
    K[:, 0, 0] = rng.uniform(0.5, 2.0, N)
    K[:, 0, b.nq] = rng.uniform(0.05, 0.2, N)
    if integrator != "nullspace_rk4":  # the batch's feedback reads an EM scheme's mean rates
        K[:, 0, b.nq] = 0.0           # (rt.batch's docstring), qvel() the rates at t
    u0 = rng.uniform(-0.2, 0.2, (N, b.na))

    def run():
        first = b.rollout(25, controls=U, record=("qpos", "qvel", "energy"))
        b.set_feedback(K, u0, np.zeros(b.nq + b.nv))
        b.step(30)
        return first

    traj = with_threads(threads, run)
    rows = b.F.copy(), b.I.copy()
    assert traj["qpos"].shape == (25, N, b.nq) and traj["energy"].shape == (25, N)
    sims = []
    for i in range(N):
        s = make(i)
        sims.append(s)
        for t in range(25):
            s.set_controls(U[t, i])
            s.step(1)
            np.testing.assert_array_equal(traj["qpos"][t, i], s.qpos())
            np.testing.assert_array_equal(traj["qvel"][t, i], s.qvel())
            assert traj["energy"][t, i] == s.energy()
        for _ in range(30):
            s.set_controls(batch_feedback(s, K[i], u0[i]))
            s.step(1)
    _assert_copies_are([b], sims, [rows], read=integrator != "nullspace_rk4")


# a crank rate at which the scheme's step fails (the EM schemes' sub-steps carry 1000 rad/s)
FAILING = {"nullspace_rk4": 1000.0, "energy_momentum": 1e4, "energy_momentum4": 3e4}


@pytest.mark.parametrize("integrator", SCHEMES)
def test_a_failed_loop_copy_stops_alone(integrator):
    """Copy 2 spun fast: under nullspace_rk4 (1000 rad/s) its step moves the crank ~4 rad,
    the loop cannot be closed after it, and the step fails (NONFINITE, rolled back); under
    the EM schemes the Newton solve fails even on sub-steps (FAILED, rolled back) -- in the
    batch that copy alone stops (``failed``), at the step its single Simulation fails at
    (which raises, as before), and the others go on, each its single Simulation."""
    make = lambda i: four_bar(i, omega=FAILING[integrator] if i == 2 else None,  # noqa: E731
                              integrator=integrator)
    b = rt.Batch(make, n=N)
    with pytest.raises(RuntimeError, match=r"copies \[2\]"):
        b.step(40)
    assert b.failed.tolist() == [False, False, True, False]
    sims = [make(i) for i in range(N)]
    for i, s in enumerate(sims):
        if i == 2:
            with pytest.raises(rt.SimulationError, match="not taken"):
                s.step(40)
        else:
            s.step(40)
    _assert_copies_are([b], sims)
    assert np.all(np.isfinite(b.qpos()[2])) and np.all(np.isfinite(b.qvel()[2]))


def test_batched_loop_schemes_are_named_by_the_registry():
    assert SCHEMES == [i.name for i in integrators.REGISTRY.values() if i.loops] == [
        "nullspace_rk4", "energy_momentum", "energy_momentum4"]
    with pytest.raises(ValueError, match="semi_implicit_euler does not step closed loops"):
        rt.Batch(scenarios.build("four_bar").model, n=N, integrator="semi_implicit_euler",
                 dt=DT)


def _scratch(m, n, nb):
    xf, xi = (np.zeros(s) for s in loops.loop_scratch_size(nb, n, n, m, 0))
    xi = xi.astype(np.int64)
    xi[:loops.XI_HEAD] = m, 0, -1
    return loops.carve_loop.py_func(xf, xi, nb, n, n)[3]


def _reference(J, K, defect, free):
    """The least K-norm change by numpy (the Cholesky, solves and pinv it took before)."""
    idx = np.nonzero(free)[0]
    L = np.linalg.cholesky(K[np.ix_(idx, idx)])
    A = np.linalg.solve(L, J[:, idx].T).T
    out = np.zeros(K.shape[0])
    out[idx] = np.linalg.solve(L.T, -(np.linalg.pinv(A, dense.RANK_GAP) @ defect))
    return out


@pytest.mark.parametrize("compiled", [True, False])
def test_least_k_norm_matches_numpy_and_reports_a_singular_inertia(compiled):
    f = dense.least_k_norm if compiled else dense.least_k_norm.py_func
    rng = np.random.default_rng(11)
    n, nb = 6, 4
    for trial in range(20):
        m = int(rng.integers(2, 8))
        B = rng.normal(size=(n, n))
        K = B @ B.T + 0.1 * np.eye(n)
        J = rng.normal(size=(m, n))
        if m > 3:  # redundant rows, as a planar loop's
            J[3:] = rng.normal(size=(m - 3, 3)) @ J[:3]
        free = (rng.uniform(size=n) < 0.8).astype(np.int64)
        free[0] = 1
        defect = rng.normal(size=m) if trial % 2 else J @ rng.normal(size=n)
        ws = _scratch(m, n, nb)
        delta = np.full(n, np.nan)
        assert f(J, K, defect, free, delta, ws)
        ref = _reference(J, K, defect, free)
        np.testing.assert_allclose(delta, ref, rtol=0, atol=1e-10 * max(1.0, np.abs(ref).max()))
        assert np.all(delta[free == 0] == 0.0)
    K[1, :] = K[:, 1] = 0.0  # no inertia on rate 1: not positive definite
    delta = np.full(n, 7.0)
    assert not f(J, K, defect, np.ones(n, np.int64), delta, _scratch(m, n, nb))
    assert np.all(delta == 7.0)


BATCH_ALLOCATION_PROBE = """
import warnings; warnings.simplefilter("ignore")
import numpy as np
from numba.core.runtime import rtsys
import rtrigid as rt
from tests.helpers import four_bar
b = rt.Batch(lambda i: four_bar(i, integrator=INTEGRATOR), n=4)
U = np.full((4, 1), 0.5)  # the motors push every crank onto its limit, then hold it there
b.step(200, controls=U)
counts = []
for n in (1, 500):
    before = rtsys.get_allocation_stats().alloc
    b.step(n, controls=U)
    counts.append(rtsys.get_allocation_stats().alloc - before)
print(*counts)
"""


@pytest.mark.parametrize("integrator", SCHEMES[:2])
def test_batch_loop_steps_allocate_nothing_per_step(integrator):
    """numba's allocation counter: a batch call of 500 steps (every copy on its limit, each
    step a limit step) allocates exactly as much as one of 1 step."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, NUMBA_NRT_STATS="1")
    probe = BATCH_ALLOCATION_PROBE.replace("INTEGRATOR", repr(integrator))
    out = subprocess.run([sys.executable, "-c", probe], env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    one, many = map(int, out)
    assert one == many


@pytest.mark.parametrize("integrator", SCHEMES[1:])
def test_compiled_em_loop_step_keeps_energy_less_work_through_motor_and_limit(integrator):
    """The four-bar driven by its motor (into the crank's limit and held there, where the
    scheme holds limits: :data:`LIMITED`): E - W (W the motor's work) is kept to round-off
    step by step (the numpy solve's figure before: 1e-12 of E, tests/loops/test_loop_drive.py) but
    at the limit's hits, which only take energy; and the loop stays closed to 1e-10."""
    s = four_bar(1, integrator=integrator)
    s.set_controls([0.4])
    E0 = s.energy()
    limit = s.model.joints[0].limits[1] if LIMITED[integrator] else np.inf
    before = s.energy() - s.actuator_work()[0]
    hits = 0
    for _ in range(150):
        s.step(1)
        now = s.energy() - s.actuator_work()[0]
        if s.joint_position("crank")[0] == limit:
            hits += 1
            assert now <= before + 1e-12 * abs(E0)
        else:
            assert abs(now - before) <= 1e-12 * abs(E0), (now - before) / abs(E0)
        assert s.constraint_error() <= 1e-10
        before = now
    assert hits > 10 or not LIMITED[integrator]
