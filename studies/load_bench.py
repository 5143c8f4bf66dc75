"""Time ``rt.load_model`` and ``rt.Simulation`` on a generated 30-link URDF (warm numba cache).

    python -m studies.load_bench [--links 30] [--repeats 7] [--file robot.xml]

``--file``: time a given URDF or MJCF file instead of the generated chain (warnings off).

The chain's links have rotated inertials with full tensors and every third joint is fixed
between massive links (merged), so the loader does all its work.  Prints medians.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time


def chain_urdf(n):
    """A URDF chain of ``n`` links (revolute joints, every third one fixed)."""
    parts = ['<robot name="chain">', '<link name="base"/>']
    for i in range(n):
        parent = "base" if i == 0 else f"link{i - 1}"
        kind = "fixed" if i % 3 == 2 else "revolute"
        parts.append(
            f'<joint name="joint{i}" type="{kind}"><parent link="{parent}"/>'
            f'<child link="link{i}"/><origin xyz="0 0.01 0.1" rpy="0.1 {0.01 * i} 0.2"/>'
            f'<axis xyz="0 1 0.2"/><limit lower="-2" upper="2" effort="10" velocity="2"/></joint>'
            f'<link name="link{i}"><inertial><origin xyz="0.01 0 0.05" rpy="0.3 0.2 0.1"/>'
            f'<mass value="0.5"/><inertia ixx="0.002" ixy="0.0002" ixz="0" iyy="0.0015" '
            f'iyz="0.0001" izz="0.001"/></inertial></link>')
    parts.append("</robot>")
    return "\n".join(parts)


def main(argv=None):
    import rtrigid as rt

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--links", type=int, default=30)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--file", default=None)
    args = p.parse_args(argv)
    if args.file:
        import warnings

        warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        path = args.file or os.path.join(tmp, "chain.urdf")
        if not args.file:
            with open(path, "w") as f:
                f.write(chain_urdf(args.links))
        rt.Simulation(rt.load_model(path), integrator="nullspace_rk4", dt=1e-3).step(1)  # warm
        load, build = [], []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            model = rt.load_model(path)
            t1 = time.perf_counter()
            rt.Simulation(model, integrator="nullspace_rk4", dt=1e-3).step(1)
            t2 = time.perf_counter()
            load.append(t1 - t0)
            build.append(t2 - t1)
    what = os.path.basename(args.file) if args.file else f"{args.links}-link URDF"
    print(f"{what} ({len(model.bodies)} bodies after merging fixed joints): "
          f"load_model {1e3 * statistics.median(load):.1f} ms, Simulation + first step "
          f"{1e3 * statistics.median(build):.1f} ms (medians of {args.repeats}, warm cache)")


if __name__ == "__main__":
    main()
