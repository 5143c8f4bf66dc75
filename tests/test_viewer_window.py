"""The viewer in a real X window (Xvfb) driven by real X input (xdotool).

The viewer runs its own loop (``Viewer.run``) in a child process; the test types keys and
drags the mouse through the X server, and reads what the window shows from the X screen.
The child reports its state after each key or mouse release on stdout.
"""
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import ImageGrab

ROOT = Path(__file__).resolve().parents[1]
W, H = 320, 240

CHILD = r"""
import json, sys
import numpy as np
from rtrigid import scenarios
import viewer

sim = scenarios.build("gyro_top")
v = viewer.Viewer(sim, %d, %d, title="rtrigid-window-test", hud=False)
clock = v.pyglet.clock

def report(tag):
    def now(dt):
        x = sim.pose(0)[0]
        impulse = None if v.last_impulse is None else v.last_impulse[1].tolist()
        print(json.dumps({"tag": tag, "paused": v.paused, "steps": sim.steps_taken,
                          "pixel": v.project(x), "impulse": impulse}), flush=True)
    clock.schedule_once(now, 0.0)  # after the viewer has handled the event

class Spy:
    def on_key_press(self, symbol, modifiers):
        report(v.pyglet.window.key.symbol_string(symbol))
    def on_mouse_release(self, x, y, button, modifiers):
        report("release")

spy = Spy()  # pyglet holds handlers weakly
v.window.push_handlers(spy)
clock.schedule_once(lambda dt: report("ready"), 1.0)
v.run()
print(json.dumps({"tag": "closed", "steps": sim.steps_taken}), flush=True)
""" % (W, H)


@pytest.fixture
def xserver(require):
    require("Xvfb", "xdotool")
    r, w = os.pipe()
    proc = subprocess.Popen(["Xvfb", "-displayfd", str(w), "-screen", "0", "640x480x24",
                             "-nolisten", "tcp"], pass_fds=(w,), stderr=subprocess.DEVNULL)
    os.close(w)
    with os.fdopen(r) as f:
        display = ":" + f.readline().strip()
    yield display
    proc.terminate()
    proc.wait(timeout=10)


def _xdo(display, *args):
    return subprocess.run(["xdotool", *args], env={**os.environ, "DISPLAY": display},
                          capture_output=True, text=True, check=True, timeout=20).stdout


class Reports:
    """The child's JSON report lines, read in a thread so that waiting can time out."""

    def __init__(self, child):
        self.child = child
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.child.stdout:
            if line.startswith("{"):
                self.lines.put(json.loads(line))

    def next(self, tag, timeout=60.0):
        """The next report with this tag (reports come in order)."""
        end = time.monotonic() + timeout
        while True:
            try:
                msg = self.lines.get(timeout=max(end - time.monotonic(), 0.01))
            except queue.Empty:
                raise AssertionError(f"no {tag!r} report from the viewer") from None
            if msg["tag"] == tag:
                return msg


def test_window_keys_mouse_and_frames_under_x(xserver):
    env = {**os.environ, "DISPLAY": xserver, "PYTHONPATH": str(ROOT)}
    env.pop("PYGLET_HEADLESS", None)
    child = subprocess.Popen([sys.executable, "-c", CHILD], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
    reports = Reports(child)
    try:
        ready = reports.next("ready")
        # pyglet also makes a hidden window: take the one on screen
        win = _xdo(xserver, "search", "--sync", "--onlyvisible", "--name",
                   "rtrigid-window-test").split()[0]
        assert not ready["paused"] and ready["steps"] > 0
        # X input goes where the pointer is (no window manager): into the window
        _xdo(xserver, "mousemove", "--window", win, "5", "5")

        _xdo(xserver, "key", "space")
        paused = reports.next("SPACE")
        assert paused["paused"]

        # what the window shows: the paused top where project() says, over the pale ground
        time.sleep(0.5)  # a few frames
        geo = dict(line.split("=") for line in
                   _xdo(xserver, "getwindowgeometry", "--shell", win).split())
        shot = np.asarray(ImageGrab.grab(xdisplay=xserver).convert("RGB")).astype(int)
        px, py = paused["pixel"]
        r, g, b = shot[int(geo["Y"]) + H - 1 - int(py), int(geo["X"]) + int(px)]
        assert r > g + 40 and r > b + 40, (r, g, b)  # the top's terracotta, not the ground

        _xdo(xserver, "key", "period")
        assert reports.next("PERIOD")["steps"] == paused["steps"] + 1
        _xdo(xserver, "key", "period")
        stepped = reports.next("PERIOD")
        assert stepped["steps"] == paused["steps"] + 2 and stepped["paused"]

        # drag from the top's centre of mass to the left: an impulse is applied
        px, py = stepped["pixel"]
        x0, y0 = int(px), H - 1 - int(py)
        _xdo(xserver, "mousemove", "--window", win, str(x0), str(y0))
        _xdo(xserver, "mousedown", "1")
        _xdo(xserver, "mousemove", "--window", win, str(x0 - 40), str(y0))
        time.sleep(0.3)
        _xdo(xserver, "mouseup", "1")
        released = reports.next("release")
        assert released["impulse"] is not None and np.linalg.norm(released["impulse"]) > 0

        _xdo(xserver, "key", "r")
        assert reports.next("R")["steps"] == 0
        _xdo(xserver, "key", "Escape")
        assert child.wait(timeout=30) == 0
        assert reports.next("closed")["steps"] == 0  # paused through the reset until closed
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        child.stdout.close()


NEEDS_XVFB = """
import pytest

@pytest.fixture
def xserver(require):
    require("Xvfb")

def test_needs_xvfb(xserver):
    pass
"""


@pytest.mark.parametrize("installed,require_all,outcome", [
    (False, "", "1 skipped"), (False, "1", "1 error"), (True, "1", "1 passed")])
def test_a_missing_tool_skips_with_a_reason_or_under_require_all_fails(
        installed, require_all, outcome, tmp_path):
    """What the window test above meets on a machine without Xvfb, and in CI."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if installed:
        fake = bin_dir / "Xvfb"  # the requirement only asks that it can be found
        fake.write_text("#!/bin/sh\n")
        fake.chmod(0o755)
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["tests.conftest"]\n')
    (tmp_path / "test_needs.py").write_text(NEEDS_XVFB)
    env = {"PATH": str(bin_dir), "PYTHONPATH": str(ROOT), "RTRIGID_REQUIRE_ALL": require_all}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rsE", "-p", "no:cacheprovider",
                          "test_needs.py"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=300)
    summary = out.stdout.strip().splitlines()[-1]
    assert summary.startswith(outcome), out.stdout
    if not installed:
        # the reason names the tool and how to install it
        assert "needs Xvfb: Xvfb is not on PATH" in out.stdout, out.stdout
        assert "apt-get install -y --no-install-recommends xvfb" in out.stdout, out.stdout
    assert out.returncode == (1 if outcome == "1 error" else 0), out.stdout
