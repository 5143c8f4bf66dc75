"""Cold starts of rtrigid's main entry points: the wall time of a first run on an empty numba cache.

    python scripts/cold_start.py [--repeat 1] [--only run,view,...]

Each command runs in a fresh process with its own empty numba cache (``NUMBA_CACHE_DIR``), so
it compiles every kernel it needs, as a user's first command after the install does; then once
more on the cache it filled (warm).  Prints one row per command: the cold and warm wall times
(medians over ``--repeat`` runs), and whether the command printed its one line about compiling.  The viewer runs headless (Mesa's EGL).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import pybullet_data  # noqa: F401  (the robot file below; installed by the dev extra)

IIWA = os.path.join(os.path.dirname(pybullet_data.__file__), "kuka_iiwa", "model.urdf")
HEADLESS = ["--headless", "--frames", "5", "--width", "160", "--height", "120"]
COMMANDS = {
    "run": ["rtrigid", "run", "gyro_top", "--t-end", "1"],
    "view": ["rtrigid", "view", "gyro_top", *HEADLESS],
    "demo": [sys.executable, "-m", "rtrigid.demos", "box_stack", *HEADLESS],
    "demo-quadruped": [sys.executable, "-m", "rtrigid.demos", "quadruped", *HEADLESS],
    "robot-file": ["rtrigid", "view", IIWA, *HEADLESS],
}


def timed(cmd, env):
    t0 = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    said = "compiling numba kernels" in out.stderr
    return wall, said


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1, help="cold runs per command (median)")
    ap.add_argument("--only", default=",".join(COMMANDS),
                    help="comma-separated commands among " + ", ".join(COMMANDS))
    args = ap.parse_args(argv)
    names = args.only.split(",")
    unknown = [n for n in names if n not in COMMANDS]
    if unknown:
        ap.error(f"--only: unknown command(s) {', '.join(unknown)}")
    print(f"{'command':16s} {'cold s':>8s} {'warm s':>8s}  says it compiles")
    for name in names:
        cold, warm, said = [], [], True
        for _ in range(args.repeat):
            folder = tempfile.mkdtemp(prefix="rtrigid-cold-")
            env = dict(os.environ, NUMBA_CACHE_DIR=os.path.join(folder, "numba"))
            try:
                wall, s = timed(COMMANDS[name], env)
                cold.append(wall)
                said = said and s
                warm.append(timed(COMMANDS[name], env)[0])
            finally:
                shutil.rmtree(folder, ignore_errors=True)
        print(f"{name:16s} {statistics.median(cold):8.1f} {statistics.median(warm):8.1f}  "
              f"{'yes' if said else 'NO'}", flush=True)


if __name__ == "__main__":
    main()
