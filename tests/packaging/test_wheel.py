"""The wheel works outside the checkout: built from this repository, installed with its
``viewer`` extra into a fresh virtual environment in a temporary directory, it renders the
viewer headless to a PNG and runs a demo, from a directory that holds no checkout.

Slow: the fresh environment's numba cache is cold, so the first command compiles its kernels
(a few minutes on a two-core machine), and the install downloads numpy, numba and the viewer's
packages from the package registry.
"""
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# the image's statistics, computed with the venv's own Pillow (the viewer extra installs it)
PNG_STATS = """
import sys
from PIL import Image, ImageStat
img = Image.open(sys.argv[1]).convert("RGB")
colours = img.getcolors(1 << 24)
print(img.size[0], img.size[1], len(colours), max(ImageStat.Stat(img).stddev))
"""


def _run(args, cwd, timeout=1500):
    # no PYTHONPATH: nothing may reach the checkout from the fresh environment
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    out = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True,
                         text=True, timeout=timeout)
    assert out.returncode == 0, f"{args}: exit {out.returncode}\n{out.stdout}\n{out.stderr}"
    return out


def _png(python, path, cwd):
    assert path.is_file() and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path
    width, height, colours, spread = _run([python, "-c", PNG_STATS, path], cwd).stdout.split()
    return int(width), int(height), int(colours), float(spread)


@pytest.mark.slow
def test_the_wheel_holds_only_rtrigid_and_its_viewer_and_demos_run_outside_the_checkout(
        tmp_path, require):
    require("egl")
    assert ROOT not in tmp_path.parents and tmp_path not in ROOT.parents
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", ROOT, "--no-deps", "--quiet", "-w", dist],
         tmp_path)
    (wheel,) = dist.glob("rtrigid-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"rtrigid"}, top
    for shipped in ("rtrigid/py.typed", "rtrigid/viewer/cli.py", "rtrigid/demos/__main__.py",
                    "rtrigid/viewer/shaders/lit.vert", "rtrigid/viewer/shaders/lit.frag"):
        assert shipped in names

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", venv], tmp_path)
    python, rtrigid = venv / "bin" / "python", venv / "bin" / "rtrigid"
    _run([python, "-m", "pip", "install", "--quiet", f"{wheel}[viewer]"], tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    where = _run([python, "-c", "import importlib.util as u, rtrigid; print(rtrigid.__file__, "
                  "u.find_spec('viewer'), u.find_spec('demos'), u.find_spec('assets'))"],
                 work).stdout.split()
    assert Path(where[0]).is_relative_to(venv) and where[1:] == ["None"] * 3, where

    # the demo first: the fresh environment's numba cache is empty, so it compiles, and says so
    shot = work / "tennis_racket.png"
    out = _run([python, "-m", "rtrigid.demos", "tennis_racket", "--headless", "--frames", "5",
                "--width", "160", "--height", "120", "--screenshot", shot], work)
    assert "rtrigid: compiling numba kernels on first use" in out.stderr, out.stderr
    assert any(line.startswith("max rel.") for line in out.stdout.splitlines()), out.stdout
    width, height, colours, spread = _png(python, shot, work)
    assert (width, height) == (160, 120) and colours > 20 and spread > 5.0

    shot = work / "gyro_top.png"
    _run([rtrigid, "view", "gyro_top", "--headless", "--frames", "5", "--width", "320",
          "--height", "240", "--screenshot", shot], work)
    width, height, colours, spread = _png(python, shot, work)
    assert (width, height) == (320, 240)
    assert colours > 50 and spread > 5.0, (colours, spread)   # a scene, not a blank frame
