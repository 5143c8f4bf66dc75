"""Per-step thread CPU time of robots from their files with contacts, beside MuJoCo on the
same file: the A1 from pybullet's URDF standing on 12 position servos on the floor
(``rtrigid.demos.robots.a1_standing`` at dt = 1 ms, after 2 s of settling; MuJoCo's Euler
with the same servos, floor and friction), and gymnasium's humanoid falling onto its floor
from the file's initial pose (its first second, at the file's 3 ms step; MuJoCo with the
file's options, RK4, and with its default Euler).  9 alternating rounds, every state restored
between rounds; medians, and the worst step of rtrigid's rounds.  Thread CPU time, because
the wall clock swings on a loaded machine.

Run from the repository root: ``python3 assets/bench/robots_cpu.py``."""

import os
import time
import warnings

import gymnasium
import mujoco
import numpy as np

import rtrigid as rt
from rtrigid.demos import robots
from rtrigid.tools import mujoco_ref

ROUNDS = 9
HUMANOID = os.path.join(os.path.dirname(gymnasium.__file__), "envs/mujoco/assets/humanoid.xml")


def ours(sim, n):
    """(mean us of thread CPU per step over n steps, worst single step in us), state restored."""
    snap = sim.snapshot()
    steps = []
    for _ in range(n):
        t = time.thread_time_ns()
        sim.step(1)
        steps.append(time.thread_time_ns() - t)
    sim.restore(snap)
    return sum(steps) / n / 1e3, max(steps) / 1e3


def theirs(model, data, n):
    q0, v0, t0 = data.qpos.copy(), data.qvel.copy(), data.time
    t = time.thread_time()
    mujoco.mj_step(model, data, n)
    d = time.thread_time() - t
    data.qpos[:], data.qvel[:], data.time = q0, v0, t0
    mujoco.mj_forward(model, data)
    return d / n * 1e6


def compare(title, sims, refs, n):
    """Alternating rounds of every rtrigid scheme and every MuJoCo set-up, after one round of
    each not counted (it loads the compiled kernels); prints the median over the rounds of
    each round's mean cost per step."""
    mean = {k: [] for k in list(sims) + list(refs)}
    worst = {k: 0.0 for k in sims}
    for sim in sims.values():
        ours(sim, n)
    for _ in range(ROUNDS):
        for k, sim in sims.items():
            m, w = ours(sim, n)
            mean[k].append(m)
            worst[k] = max(worst[k], w)
        for k, (model, data) in refs.items():
            mean[k].append(theirs(model, data, n))
    print(f"\n{title} ({n} steps a round, {ROUNDS} rounds)")
    base = {k: float(np.median(mean[k])) for k in refs}
    for k in mean:
        med = float(np.median(mean[k]))
        ratios = ", ".join(f"{med / b:.2f}x {r}" for r, b in base.items())
        extra = f", worst step {worst[k]:.0f} us" if k in worst else ""
        print(f"  {k:28s} {med:8.1f} us/step ({ratios}){extra}")


def a1():
    dt = 1e-3
    sims = {}
    for s in ("semi_implicit_euler", "nullspace_rk4", "energy_momentum"):
        sims[s] = robots.a1_standing(s, dt)
        sims[s].step(2000)
    model, data = mujoco_ref.servoed_on_floor(
        sims["semi_implicit_euler"], robots.path(robots.A1), dt=dt, friction=0.8
    )
    mujoco.mj_step(model, data, 2000)
    compare("A1 standing on its servos, dt = 1 ms", sims, {"MuJoCo Euler": (model, data)}, 500)


def humanoid():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = rt.load_model(HUMANOID)
    dt = model.timestep
    sims = {
        s: rt.Simulation(model, s, dt)
        for s in ("semi_implicit_euler", "nullspace_rk4", "energy_momentum")
    }
    refs = {}
    for name, integrator in (("MuJoCo (file: RK4)", None), ("MuJoCo Euler", "EULER")):
        m = mujoco.MjModel.from_xml_path(HUMANOID)
        if integrator:
            m.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator}")
        refs[name] = (m, mujoco.MjData(m))
    compare(f"gymnasium's humanoid falling, dt = {dt:g} s", sims, refs, round(1.0 / dt))


if __name__ == "__main__":
    a1()
    humanoid()
