"""gymnasium's ant dropped on its floor with zero controls, MuJoCo and rtrigid side by side: the
torso's height every 0.5 s.  Both start at the file's pose with each ankle at the middle of its
range (the file's qpos0 of 0 lies outside it: MuJoCo's soft limit would kick the leg in, rtrigid
starts it at the nearer limit, so the two would not start alike).

    python scripts/ant_drop.py [--integrator nullspace_rk4] [--seconds 3]
"""

import argparse
import importlib.util
import os
import warnings

import mujoco

import rtrigid as rt


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--integrator", default="nullspace_rk4")
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    spec = importlib.util.find_spec("gymnasium")
    path = os.path.join(spec.submodule_search_locations[0], "envs", "mujoco", "assets", "ant.xml")
    m = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # what the loader approximates, reported
        sim = rt.Simulation(
            rt.load_model(path, floating_base=True), args.integrator, dt=m.opt.timestep
        )
    for j in range(m.njnt):
        lo, hi = m.jnt_range[j]
        outside = lo > 0.0 or hi < 0.0  # the range leaves out qpos0 = 0
        if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE and m.jnt_limited[j] and outside:
            d.qpos[m.jnt_qposadr[j]] = 0.5 * (lo + hi)
            sim.set_joint_position(m.joint(j).name, [0.5 * (lo + hi)])
    mujoco.mj_forward(m, d)
    per = round(0.5 / m.opt.timestep)
    print("   t [s]   MuJoCo torso z [m]   rtrigid torso z [m]")
    for k in range(round(args.seconds / 0.5)):
        for _ in range(per):
            mujoco.mj_step(m, d)
        sim.step(per)
        print(f"{(k + 1) * 0.5:8.1f}   {d.qpos[2]:18.5f}   {sim.pose('torso')[0][2]:19.5f}")


if __name__ == "__main__":
    main()
