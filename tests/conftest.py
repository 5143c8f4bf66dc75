"""Tests that need something outside the core install: an X server, an input tool, a C
compiler, headless OpenGL, Ray (the sweep extra), PyBullet (a reference in the dev extra), MkDocs
(the docs tools, in the dev extra), ruff and mypy (the linter and the type checker, in the dev
extra).

A test asks through the ``require`` fixture (``require("Xvfb", "xdotool")``).  On a machine
that lacks one, the test is skipped with a reason naming it and the package that provides
it, so the README's test command stays green on a fresh machine.  With the environment
variable ``RTRIGID_REQUIRE_ALL=1`` (``.ci/run`` sets it after installing everything) a missing
requirement fails the test instead: CI must run every test, and a skip there would hide a
broken set-up.
"""
import functools
import os
import shutil
import subprocess
import sys

import pytest

REQUIRE_ALL = "RTRIGID_REQUIRE_ALL"
APT = "apt-get install -y --no-install-recommends"
GL_PACKAGES = "libegl1 libegl-mesa0 libgl1-mesa-dri libgl1 libfontconfig1"

# What the viewer tests do with headless OpenGL, in a fresh process: pyglet picks its platform
# once per process, so a failed probe here must not leave the test process half set up
GL_PROBE = """
import pyglet
pyglet.options["headless"] = True
pyglet.options["debug_gl"] = False
import pyglet.window
window = pyglet.window.Window(16, 16, visible=False)
import moderngl
moderngl.create_context().release()
window.close()
"""


def _program(name):
    def missing():
        return None if shutil.which(name) else f"{name} is not on PATH"
    return missing


@functools.cache
def _headless_gl_missing():
    try:
        out = subprocess.run([sys.executable, "-c", GL_PROBE], capture_output=True, text=True,
                             timeout=120)
    except subprocess.TimeoutExpired:
        return "opening a headless OpenGL context did not finish in 120 s"
    if out.returncode == 0:
        return None
    lines = (out.stderr or out.stdout).strip().splitlines()
    return "no headless OpenGL (EGL) context: " + (lines[-1] if lines else f"exit {out.returncode}")


def _module(*names):
    def missing():
        import importlib.util

        def found(name):
            try:   # a dotted name whose parent is missing raises instead of giving None
                return importlib.util.find_spec(name) is not None
            except ModuleNotFoundError:
                return False

        absent = [n for n in names if not found(n)]
        return f"Python package(s) {', '.join(absent)} not installed" if absent else None
    return missing


# name -> (check returning None or what is missing, how to install it)
REQUIREMENTS = {
    "Xvfb": (_program("Xvfb"), f"on Debian, as root: {APT} xvfb"),
    "xdotool": (_program("xdotool"), f"on Debian, as root: {APT} xdotool"),
    "cc": (_program("cc"), f"a C compiler; on Debian, as root: {APT} gcc libc6-dev"),
    "egl": (_headless_gl_missing, f"on Debian, as root: {APT} {GL_PACKAGES}"),
    "ray": (_module("ray", "tqdm"), 'python3 -m pip install -e ".[sweep]"'),
    "pybullet": (_module("pybullet"), 'python3 -m pip install -e ".[dev]"'),
    "gymnasium": (_module("gymnasium"), 'python3 -m pip install -e ".[dev]"'),
    "mkdocs": (_module("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"),
               'python3 -m pip install -e ".[dev]"'),
    "ruff": (_module("ruff"), 'python3 -m pip install -e ".[dev]"'),
    "mypy": (_module("mypy"), 'python3 -m pip install -e ".[dev]"'),
}


def require_all():
    return os.environ.get(REQUIRE_ALL, "") not in ("", "0")


def require(*names):
    """Skip the calling test unless every named requirement is met; fail under REQUIRE_ALL."""
    unknown = [n for n in names if n not in REQUIREMENTS]
    if unknown:
        # a typo must not turn into a silent skip
        raise ValueError(f"require: unknown requirement(s) {unknown}; "
                         f"known: {sorted(REQUIREMENTS)}")
    missing = [(n, REQUIREMENTS[n][0](), REQUIREMENTS[n][1]) for n in names]
    missing = [(n, why, how) for n, why, how in missing if why]
    if not missing:
        return
    text = "; ".join(f"needs {n}: {why} ({how})" for n, why, how in missing)
    if require_all():
        pytest.fail(f"{text}; {REQUIRE_ALL}=1 makes a missing requirement a failure",
                    pytrace=False)
    pytest.skip(f"{text}; .ci/run installs everything")


@pytest.fixture(name="require")
def require_fixture():
    """``require("Xvfb", "egl", ...)``: see the module docstring."""
    return require
