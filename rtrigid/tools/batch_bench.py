"""Batch throughput beside ``mujoco.rollout``: copy-steps per second on 1000 2-link arms with
position servos and on 1000 gyro tops, the same models, the same threads, medians of repeats.

    PYTHONPATH=$PWD python3 -m rtrigid.tools.batch_bench [--n 1000] [--steps 200] [--repeats 5]
        [--threads 2]          (rtrigid bench --batch [--repeats N]: the defaults)

rtrigid: :class:`rtrigid.Batch` with controls given per step (k, n, nu); MuJoCo: its RK4 on the
twin of the same model (:func:`rtrigid.tools.mujoco_ref.build_tree`, the servos as MuJoCo
position actuators with the same kp, kv), ``mujoco.rollout.rollout`` with one MjData per
thread and the same controls (n, k, nu).  Both from random joint states.
"""
import argparse
import copy
import statistics
import time

import numba
import numpy as np

import rtrigid as rt
from rtrigid import scenarios
from rtrigid.tools import mujoco_ref


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
    import mujoco
    from mujoco import rollout

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
    b.set_qpos(Q)
    b.set_qvel(V)
    F0, I0 = b.F.copy(), b.I.copy()
    U = rng.uniform(-0.5, 0.5, (steps, n, b.na))
    controls = U if b.na else None
    numba.set_num_threads(threads)
    b.step(1, controls=None if controls is None else U[:1])  # warm (compile or load)

    def run_batch():
        b.F[:], b.I[:] = F0, I0
        b.step(steps, controls=controls)

    t_rt = _median(run_batch, repeats)
    mjm, qadr, vadr = _mujoco_twin(model, dt)
    datas = [mujoco.MjData(mjm) for _ in range(threads)]
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    d = datas[0]
    x0 = np.empty((n, mujoco.mj_stateSize(mjm, spec)))
    for i in range(n):
        mujoco.mj_resetData(mjm, d)
        d.qpos[qadr] = Q[i]
        d.qvel[vadr] = V[i]
        mujoco.mj_getState(mjm, d, x0[i], spec)
    ctrl = np.ascontiguousarray(np.transpose(U, (1, 0, 2))) if b.na else None
    rollout.rollout(mjm, datas, x0, ctrl, nstep=steps)  # warm

    def run_mujoco():
        rollout.rollout(mjm, datas, x0, ctrl, nstep=steps)

    t_mj = _median(run_mujoco, repeats)
    return {"rtrigid": n * steps / t_rt, "mujoco": n * steps / t_mj}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args(argv)
    print(f"{a.n} copies x {a.steps} steps, dt 1 ms, {a.threads} threads, median of "
          f"{a.repeats}; copy-steps per second")
    print(f"{'model':<10} {'rtrigid integrator':<20} {'rtrigid':>12} {'mujoco RK4':>12} "
          f"{'ratio':>7}")
    for name, make in (("arm", arm), ("gyro_top", top)):
        for integ in ("nullspace_rk4", "energy_momentum"):
            r = measure(make, integ, a.n, a.steps, a.repeats, a.threads)
            print(f"{name:<10} {integ:<20} {r['rtrigid']:>12.4g} {r['mujoco']:>12.4g} "
                  f"{r['rtrigid'] / r['mujoco']:>7.2f}", flush=True)


if __name__ == "__main__":
    main()
