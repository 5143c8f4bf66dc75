"""Per-step thread CPU time of the contact scenes under semi_implicit_euler, nullspace_rk4,
energy_momentum and MuJoCo (Euler, its default soft contacts), in 9 alternating rounds of 240
steps at dt = 1/240 (medians; every state restored between rounds): the figures of README's
"Contacts under `semi_implicit_euler`".  Thread CPU time, because the wall clock of
``rtrigid bench --contact`` swings by 2-3x on a loaded machine.

Run from the repository root: ``python3 assets/bench/contact_cpu.py``."""
import time

import mujoco
import numpy as np

import rtrigid as rt
from rtrigid.tools import mujoco_ref
from rtrigid.tools.bench import _mujoco_stack

DT = 1 / 240
SCHEMES = ("semi_implicit_euler", "nullspace_rk4", "energy_momentum")


def ours(sim, n=240):
    """us of thread CPU per step over n steps, the state restored after."""
    snap = sim.snapshot()
    t = time.thread_time()
    sim.step(n)
    d = time.thread_time() - t
    sim.restore(snap)
    return d / n * 1e6


def theirs(model, data, n=240):
    q0, v0 = data.qpos.copy(), data.qvel.copy()
    t = time.thread_time()
    mujoco.mj_step(model, data, n)
    d = time.thread_time() - t
    data.qpos[:], data.qvel[:] = q0, v0
    mujoco.mj_forward(model, data)
    return d / n * 1e6


def main():
    for scene, params in (("quadruped_on_ground", {}), ("box_stack", {"n": 10}),
                          ("box_stack", {"n": 5})):
        sims = {s: rt.scenarios.build(scene, integrator=s, dt=DT, **params) for s in SCHEMES}
        settle = 480 if scene == "quadruped_on_ground" else 1
        for sim in sims.values():
            sim.step(settle)
        if scene == "quadruped_on_ground":
            sim = sims["nullspace_rk4"]
            model, data, qadr, _ = mujoco_ref.build_tree(sim.model, dt=DT, integrator="Euler",
                                                         contacts=True)
            data.qpos[qadr] = sim.qpos()
        else:
            model, data = _mujoco_stack(params["n"], DT)
        mujoco.mj_step(model, data, settle)
        times = {s: [] for s in (*SCHEMES, "mujoco")}
        for _ in range(9):
            for s, sim in sims.items():
                times[s].append(ours(sim))
            times["mujoco"].append(theirs(model, data))
        med = {s: float(np.median(v)) for s, v in times.items()}
        e, r = med["semi_implicit_euler"], med["nullspace_rk4"]
        print(scene, params, "  ".join(f"{s} {m:.2f}" for s, m in med.items()),
              f"| euler/rk4 {e / r:.2f} euler/mujoco {e / med['mujoco']:.2f} "
              f"rk4/mujoco {r / med['mujoco']:.2f}", flush=True)


if __name__ == "__main__":
    main()
