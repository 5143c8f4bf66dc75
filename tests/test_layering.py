"""rtrigid is importable on a server: no module of it imports pyglet or moderngl."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import importlib, pkgutil, sys
import rtrigid
names = [m.name for m in pkgutil.walk_packages(rtrigid.__path__, "rtrigid.")]
for name in names:
    importlib.import_module(name)
gl = sorted(m for m in sys.modules if m.split(".")[0] in ("pyglet", "moderngl", "glcontext"))
print(len(names), gl)
"""


def test_rtrigid_and_all_its_modules_import_no_gl():
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True,
                         text=True, check=True, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    count, gl = out.stdout.split(" ", 1)
    assert int(count) >= 10  # the probe really walked the package
    assert gl.strip() == "[]"


def test_the_view_command_is_registered_without_importing_the_viewer():
    probe = ("import sys; from rtrigid import cli; p = cli.build_parser(); "
             "a = p.parse_args(['view', 'gyro_top', '--headless']); "
             "print(a.func.__name__, 'viewer' in sys.modules, 'pyglet' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                         text=True, check=True, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert out.stdout.split() == ["cmd_view", "False", "False"]
