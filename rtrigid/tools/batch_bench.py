"""Batch throughput beside ``mujoco.rollout``: copy-steps per second on 1000 2-link arms with
position servos, on 1000 gyro tops, on 1000 copies of two contact scenes (a stack of 5 boxes,
the quadruped standing on the ground) and of two loop scenes (the four-bar, the delta robot),
the same models, the same threads, medians of repeats.

    PYTHONPATH=$PWD python3 -m rtrigid.tools.batch_bench [--n 1000] [--steps 200] [--repeats 5]
        [--threads 2]          (rtrigid bench --batch [--repeats N]: the defaults)

rtrigid: :class:`rtrigid.Batch` with controls given per step (k, n, nu); MuJoCo: its RK4 on the
twin of the same model (:func:`rtrigid.references.mujoco_ref.build_tree`, the servos as MuJoCo
position actuators with the same kp, kv), ``mujoco.rollout.rollout`` with one MjData per
thread and the same controls (n, k, nu).  Both from random joint states.

Contact scenes (:func:`measure_contact`): the scenario (``box_stack`` with 5 boxes,
``quadruped_on_ground``) at its dt 1/240, every copy dropped from a random height of 0 to 1 cm
(its lifted bodies raised), 200 steps with the controls held (the quadruped's servos at 0);
MuJoCo: the twin from :func:`rtrigid.references.mujoco_ref.build_tree` with contacts (the boxes and
the plane, MuJoCo's default soft contacts) under MuJoCo's default Euler, from the same states.

Loop models (:func:`measure_loops`): the scenario (``four_bar``; ``delta_robot`` with its arms'
servos, kp 20, kv 0.5) under ``nullspace_rk4`` or ``energy_momentum`` at its dt 1/240, the
four-bar's copies turning at
0.5 to 1.5 times its starting rate, the delta robots' servos held at their starting angles plus
up to +-0.2 rad, 200 steps; MuJoCo: the twin from :func:`rtrigid.references.mujoco_ref.build_tree`
(the loop joints as its soft equality constraints) under its RK4, from the same states with the
same controls.
"""
import argparse
import copy
import statistics
import time

import numba
import numpy as np

import rtrigid as rt
from rtrigid import scenarios
from rtrigid.references import mujoco_ref


def arm():
    """The 2-link arm of the tests: double_pendulum's rods, position servos on both joints."""
    m = copy.deepcopy(scenarios.double_pendulum("nullspace_rk4", 1e-3).model)
    m.add_actuator(0, "position", kp=20.0, kv=2.0)
    m.add_actuator(1, "position", kp=10.0, kv=1.0)
    return m


def top():
    return copy.deepcopy(scenarios.gyro_top("nullspace_rk4", 1e-3).model)


def _mujoco_twin(model, dt):
    """(MjModel, qadr, vadr) of model with its actuators as MuJoCo's (the same force law)."""
    mjm, _, qadr, vadr = mujoco_ref.build_tree(model, dt=dt, integrator="RK4")
    return mjm, qadr, vadr


def _median(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(make, integrator, n, steps, repeats, threads, seed=0):
    """{'rtrigid': copy-steps/s, 'mujoco': copy-steps/s} of n copies of make() over steps."""
    dt = 1e-3
    model = make()
    rng = np.random.default_rng(seed)
    b = rt.Batch(model, n=n, integrator=integrator, dt=dt)
    ref = rt.Simulation(model, integrator, dt)
    Q = np.tile(ref.qpos(), (n, 1))
    V = np.tile(ref.qvel(), (n, 1)) + rng.uniform(-0.5, 0.5, (n, b.nv))
    if not b.na:  # a top: random tilts about its spin
        Q = Q.copy()
    else:
        Q = Q + rng.uniform(-0.5, 0.5, Q.shape)
    U = rng.uniform(-0.5, 0.5, (steps, n, b.na))
    t_rt = _batch_seconds(b, Q, V, U if b.na else None, steps, repeats, threads)
    mjm, qadr, vadr = _mujoco_twin(model, dt)
    ctrl = np.ascontiguousarray(np.transpose(U, (1, 0, 2))) if b.na else None
    t_mj = _mujoco_seconds(mjm, qadr, vadr, Q, V, ctrl, steps, repeats, threads)
    return {"rtrigid": n * steps / t_rt, "mujoco": n * steps / t_mj}


def _batch_seconds(b, Q, V, controls, steps, repeats, threads):
    """Median seconds of ``b.step(steps, controls=controls)`` from the states (Q, V);
    ``controls``: None, held (n, nu) or per step (steps, n, nu)."""
    b.set_qpos(Q)
    b.set_qvel(V)
    F0, I0 = b.F.copy(), b.I.copy()
    numba.set_num_threads(threads)
    warm = controls if controls is None or controls.ndim == 2 else controls[:1]  # held or not
    b.step(1, controls=warm)  # warm (compile or load)

    def run_batch():
        b.F[:], b.I[:] = F0, I0
        b.step(steps, controls=controls)

    return _median(run_batch, repeats)


def _mujoco_seconds(mjm, qadr, vadr, Q, V, ctrl, steps, repeats, threads):
    """Median seconds of ``mujoco.rollout.rollout`` of ``steps`` steps from the joint states
    (Q, V) (rtrigid's layout, placed by qadr, vadr), one MjData per thread."""
    import mujoco
    from mujoco import rollout

    n = len(Q)
    datas = [mujoco.MjData(mjm) for _ in range(threads)]
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    d = datas[0]
    x0 = np.empty((n, mujoco.mj_stateSize(mjm, spec)))
    for i in range(n):
        mujoco.mj_resetData(mjm, d)
        d.qpos[qadr] = Q[i]
        d.qvel[vadr] = V[i]
        mujoco.mj_getState(mjm, d, x0[i], spec)
    rollout.rollout(mjm, datas, x0, ctrl, nstep=steps)  # warm

    def run_mujoco():
        rollout.rollout(mjm, datas, x0, ctrl, nstep=steps)

    return _median(run_mujoco, repeats)


CONTACT_SCENES = {"box_stack": ({"n": 5}, range(5)), "quadruped_on_ground": ({}, (0,))}


def _heights(sim, bodies):
    """The qpos entries that raise ``bodies`` (their free joints' z), found by raising them
    1 m in ``sim`` (which is restored)."""
    snap, q0 = sim.snapshot(), sim.qpos()
    for k in bodies:
        sim.set_position(k, sim.pose(k)[0] + (0.0, 0.0, 1.0))
    moved = np.flatnonzero(np.isclose(sim.qpos() - q0, 1.0))
    sim.restore(snap)
    assert len(moved) == len(bodies)
    return moved


def measure_contact(scene, integrator, n, steps, repeats, threads, seed=0):
    """{'rtrigid': copy-steps/s, 'mujoco': copy-steps/s} of n copies of a contact scene
    (:data:`CONTACT_SCENES`: its parameters and the bodies a copy's drop raises) over steps."""
    kw, lifted = CONTACT_SCENES[scene]
    sim = scenarios.build(scene, integrator=integrator, **kw)
    rng = np.random.default_rng(seed)
    b = rt.Batch(sim, n=n)
    Q = np.tile(sim.qpos(), (n, 1))
    V = np.tile(sim.qvel(), (n, 1))
    Q[:, _heights(sim, lifted)] += rng.uniform(0.0, 0.01, (n, 1))
    t_rt = _batch_seconds(b, Q, V, None, steps, repeats, threads)
    mjm, _, qadr, vadr = mujoco_ref.build_tree(sim.model, dt=sim.dt, integrator="Euler",
                                               contacts=True)
    t_mj = _mujoco_seconds(mjm, qadr, vadr, Q, V, None, steps, repeats, threads)
    return {"rtrigid": n * steps / t_rt, "mujoco": n * steps / t_mj}


LOOP_SCENES = {"four_bar": {}, "delta_robot": {"kp": 20.0, "kv": 0.5}}


def measure_loops(scene, n, steps, repeats, threads, seed=0, integrator="nullspace_rk4"):
    """{'rtrigid': copy-steps/s, 'mujoco': copy-steps/s} of n copies of a loop scenario
    (:data:`LOOP_SCENES`) under ``integrator`` over steps (see the module docstring); MuJoCo
    under its RK4 whatever the scheme."""
    sim = scenarios.build(scene, integrator=integrator, **LOOP_SCENES[scene])
    rng = np.random.default_rng(seed)
    b = rt.Batch(sim, n=n)
    Q = np.tile(sim.qpos(), (n, 1))
    V = np.tile(sim.qvel(), (n, 1)) * rng.uniform(0.5, 1.5, (n, 1))  # J V = 0 still
    U = sim.controls() + rng.uniform(-0.2, 0.2, (n, b.na))
    t_rt = _batch_seconds(b, Q, V, U if b.na else None, steps, repeats, threads)
    mjm, qadr, vadr = _mujoco_twin(sim.model, sim.dt)
    ctrl = np.ascontiguousarray(np.repeat(U[:, None], steps, axis=1)) if b.na else None
    t_mj = _mujoco_seconds(mjm, qadr, vadr, Q, V, ctrl, steps, repeats, threads)
    return {"rtrigid": n * steps / t_rt, "mujoco": n * steps / t_mj}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args(argv)
    print(f"{a.n} copies x {a.steps} steps, {a.threads} threads, median of {a.repeats}; "
          "copy-steps per second; arm and top at dt 1 ms beside MuJoCo's RK4, the contact "
          "scenes at 1/240 beside its Euler, the loop scenes at 1/240 beside its RK4")
    print(f"{'model':<20} {'rtrigid integrator':<20} {'rtrigid':>12} {'mujoco':>12} "
          f"{'ratio':>7}")
    for name, make in (("arm", arm), ("gyro_top", top)) + tuple(
            (scene, None) for scene in CONTACT_SCENES):
        for integ in ("nullspace_rk4", "energy_momentum"):
            if make is None:
                r = measure_contact(name, integ, a.n, a.steps, a.repeats, a.threads)
            else:
                r = measure(make, integ, a.n, a.steps, a.repeats, a.threads)
            print(f"{name:<20} {integ:<20} {r['rtrigid']:>12.4g} {r['mujoco']:>12.4g} "
                  f"{r['rtrigid'] / r['mujoco']:>7.2f}", flush=True)
    for scene in LOOP_SCENES:
        for integ in ("nullspace_rk4", "energy_momentum"):
            r = measure_loops(scene, a.n, a.steps, a.repeats, a.threads, integrator=integ)
            print(f"{scene:<20} {integ:<20} {r['rtrigid']:>12.4g} {r['mujoco']:>12.4g} "
                  f"{r['rtrigid'] / r['mujoco']:>7.2f}", flush=True)


if __name__ == "__main__":
    main()
