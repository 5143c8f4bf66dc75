"""The viewer in a real X window (Xvfb) driven by real X input (xdotool).

The viewer runs its own loop (``Viewer.run``) in a child process; the test types keys and
drags the mouse through the X server, and reads what the window shows from the X screen.
The child reports its state after each key or mouse release on stdout.

Nothing here waits a guessed time: the viewer runs in real time, so when a key arrives is
up to the machine, and every check is on state the child reports or on a condition polled
until it holds (with a generous bound that only a broken viewer reaches).
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

ROOT = Path(__file__).resolve().parents[2]
W, H = 320, 240
BOUND = 60.0  # seconds; reached only when something is broken

CHILD = r"""
import json, sys
import numpy as np
from rtrigid import scenarios
import viewer

out = sys.argv[1]
sim = scenarios.build("gyro_top")
v = viewer.Viewer(sim, %d, %d, title="rtrigid-window-test", hud=False,
                   msaa=0)  # the window and the offscreen copy compared pixel by pixel
clock = v.pyglet.clock
saved = 0

def report(tag):
    global saved
    x = sim.pose(0)[0]
    impulse = None if v.last_impulse is None else v.last_impulse[1].tolist()
    msg = {"tag": tag, "paused": v.paused, "steps": sim.steps_taken, "pixel": v.project(x),
           "impulse": impulse}
    if v.paused:
        # the frame the window should settle on, drawn offscreen by the same renderer, and
        # the same with the top black: the pixels where they differ are the top's
        saved += 1
        top = v.visuals[0]
        colour = top.color
        msg["frame"] = f"{out}/frame{saved}.npy"
        np.save(msg["frame"], v.read_pixels())
        top.color = (0.0, 0.0, 0.0)
        msg["black"] = f"{out}/black{saved}.npy"
        np.save(msg["black"], v.read_pixels())
        top.color = colour
    print(json.dumps(msg), flush=True)

def after_event(tag):
    clock.schedule_once(lambda dt: report(tag), 0.0)  # after the viewer has handled it

class Spy:
    def on_key_press(self, symbol, modifiers):
        after_event(v.pyglet.window.key.symbol_string(symbol))
    def on_mouse_release(self, x, y, button, modifiers):
        after_event("release")

def ready(dt):
    # the loop runs: it has stepped the simulation and drawn a frame into the window
    if sim.steps_taken > 0:
        clock.unschedule(ready)
        report("ready")

spy = Spy()  # pyglet holds handlers weakly
v.window.push_handlers(spy)
clock.schedule_interval(ready, 1 / 60)
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
    try:
        with os.fdopen(r) as f:
            number = f.readline().strip()  # written once the server accepts clients
        assert number.isdigit(), f"Xvfb did not start (exit code {proc.poll()})"
        yield ":" + number
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _xdo(display, *args):
    return subprocess.run(["xdotool", *args], env={**os.environ, "DISPLAY": display},
                          capture_output=True, text=True, check=True, timeout=20).stdout


def near(a, b, tolerance=2):
    """Per pixel of ``a``: the same colour (up to rounding) in ``b`` there or next to it.

    A window and an offscreen framebuffer may rasterize an edge that falls exactly on a pixel
    boundary to different sides (Mesa draws a few line pixels one row apart).
    """
    pad = np.pad(b.astype(int), ((1, 1), (1, 1), (0, 0)), mode="edge")
    h, w = a.shape[:2]
    found = np.zeros((h, w), bool)
    for dy in (0, 1, 2):
        for dx in (0, 1, 2):
            found |= np.abs(pad[dy:dy + h, dx:dx + w] - a).max(axis=-1) <= tolerance
    return found


def wait_until(what, condition, bound=BOUND):
    """Poll ``condition()`` until it holds; fail naming ``what`` if it never does."""
    end = time.monotonic() + bound
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"{what}: not within {bound:g} s")
        time.sleep(0.02)


class Reports:
    """The child's JSON report lines, read in a thread so that waiting can time out."""

    def __init__(self, child, stderr_path):
        self.child = child
        self.stderr_path = stderr_path
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.child.stdout:
            if line.startswith("{"):
                self.lines.put(json.loads(line))

    def next(self, tag, bound=BOUND):
        """The next report with this tag (reports come in order)."""
        end = time.monotonic() + bound
        while True:
            try:
                msg = self.lines.get(timeout=max(end - time.monotonic(), 0.01))
            except queue.Empty:
                tail = self.stderr_path.read_text()[-2000:]
                raise AssertionError(f"no {tag!r} report from the viewer; its stderr:\n{tail}") \
                    from None
            if msg["tag"] == tag:
                return msg


def test_window_keys_mouse_and_frames_under_x(xserver, tmp_path):
    env = {**os.environ, "DISPLAY": xserver, "PYTHONPATH": str(ROOT)}
    env.pop("PYGLET_HEADLESS", None)
    stderr_path = tmp_path / "viewer.stderr"
    with open(stderr_path, "w") as err:
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], env=env,
                                 stdout=subprocess.PIPE, stderr=err, text=True)
    reports = Reports(child, stderr_path)
    try:
        ready = reports.next("ready")
        assert not ready["paused"] and ready["steps"] > 0
        # pyglet also makes a hidden window: take the one on screen
        win = _xdo(xserver, "search", "--sync", "--onlyvisible", "--name",
                   "rtrigid-window-test").split()[0]
        # X input goes where the pointer is (no window manager): into the window
        _xdo(xserver, "mousemove", "--sync", "--window", win, "5", "5")

        _xdo(xserver, "key", "space")
        paused = reports.next("SPACE")
        assert paused["paused"]

        # what the window shows: the frame of the paused state, once the loop has drawn one
        # (the top stands wherever the key caught it), with the top where project() says
        geo = dict(line.split("=") for line in
                   _xdo(xserver, "getwindowgeometry", "--shell", win).split())
        x, y = int(geo["X"]), int(geo["Y"])
        frame, black = np.load(paused["frame"]), np.load(paused["black"])
        shown = {}

        def window_shows_frame():
            grab = np.asarray(ImageGrab.grab(xdisplay=xserver).convert("RGB"))
            shown["image"] = np.flipud(grab[y:y + H, x:x + W])  # row 0 at the bottom
            return near(shown["image"], frame).all() and near(frame, shown["image"]).all()

        try:
            wait_until("the window showing the paused frame", window_shows_frame)
        except AssertionError:
            differ = ~near(shown["image"], frame)
            raise AssertionError(f"{differ.sum()} of {W * H} window pixels are not in the "
                                 "paused frame") from None
        px, py = paused["pixel"]
        assert np.any(frame[int(py), int(px)] != black[int(py), int(px)])

        _xdo(xserver, "key", "period")
        assert reports.next("PERIOD")["steps"] == paused["steps"] + 1
        _xdo(xserver, "key", "period")
        stepped = reports.next("PERIOD")
        assert stepped["steps"] == paused["steps"] + 2 and stepped["paused"]

        # drag from the top's centre of mass to the left: an impulse is applied (X delivers
        # the press, the motion and the release in the order they were made)
        px, py = stepped["pixel"]
        x0, y0 = int(px), H - 1 - int(py)
        _xdo(xserver, "mousemove", "--sync", "--window", win, str(x0), str(y0))
        _xdo(xserver, "mousedown", "1")
        _xdo(xserver, "mousemove", "--sync", "--window", win, str(x0 - 40), str(y0))
        _xdo(xserver, "mouseup", "1")
        released = reports.next("release")
        assert released["impulse"] is not None and np.linalg.norm(released["impulse"]) > 0

        _xdo(xserver, "key", "r")
        assert reports.next("R")["steps"] == 0
        _xdo(xserver, "key", "Escape")     # the dragged top was selected: Esc clears that
        assert reports.next("ESCAPE")["tag"] == "ESCAPE" and child.poll() is None
        _xdo(xserver, "key", "Escape")     # ... and with nothing selected, closes
        assert child.wait(timeout=BOUND) == 0, stderr_path.read_text()[-2000:]
        assert reports.next("closed")["steps"] == 0  # paused through the reset until closed
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        child.stdout.close()


ATTACHED = r"""
import json, sys
import numpy as np
from rtrigid.viewer.attach import Attached

host, port, token = sys.argv[1], int(sys.argv[2]), sys.argv[3]
a = Attached(host, port, token, width=%d, height=%d, hud=False, msaa=0,
             title="rtrigid-attach-test")
frames = 0

def report(tag):
    print(json.dumps({"tag": tag, "steps": a.state["steps"], "received": a.feed.received,
                      "qpos": np.asarray(a.sim.qpos()).view(np.uint64).tolist(),
                      "frames": frames}), flush=True)

pull, render = a.pull, a.viewer.render

def pulled(timeout=0.0):  # report every state the window's loop applies
    n = pull(timeout)
    if n:
        report("state")
    return n

def rendered(*args, **kwargs):
    global frames
    frames += 1
    return render(*args, **kwargs)

a.pull, a.viewer.render = pulled, rendered
report("attached")
a.run()
report("closed")
a.close()
""" % (W, H)


def test_attached_viewer_in_a_window_shows_every_served_state_and_closes(xserver, tmp_path):
    """``rtrigid view --attach`` in a real X window: its own loop (``Attached.run``) applies
    every state the stepping client receives, in order, bit for bit, and draws frames until
    Esc closes the window."""
    from rtrigid import scenarios
    from rtrigid.io.hil import Client, Server

    env = {**os.environ, "DISPLAY": xserver, "PYTHONPATH": str(ROOT)}
    env.pop("PYGLET_HEADLESS", None)
    stderr_path = tmp_path / "viewer.stderr"
    with Server(scenarios.build("arm"), port=0, scenario="arm").start() as server, \
            Client(*server.address, timeout=BOUND) as client:
        host, port = server.address
        first = client.step(10)
        with open(stderr_path, "w") as err:
            child = subprocess.Popen([sys.executable, "-c", ATTACHED, host, str(port),
                                      client.session.hex()], env=env, stdout=subprocess.PIPE,
                                     stderr=err, text=True)
        reports = Reports(child, stderr_path)
        try:
            assert reports.next("attached")["steps"] == first["steps"]
            for k in range(3):
                reply = client.step(40, controls={"joint0": (-1) ** k, "joint1": 0.5})
                shown = reports.next("state")
                while shown["steps"] != reply["steps"]:  # states come in order, none skipped
                    assert shown["steps"] < reply["steps"]
                    shown = reports.next("state")
                want = np.asarray(reply["qpos"], dtype=np.float64).view(np.uint64).tolist()
                assert shown["qpos"] == want and shown["received"] == 2 + k
            win = _xdo(xserver, "search", "--sync", "--onlyvisible", "--name",
                       "rtrigid-attach-test").split()[0]
            _xdo(xserver, "mousemove", "--sync", "--window", win, "5", "5")
            _xdo(xserver, "key", "Escape")  # nothing selected: closes
            assert child.wait(timeout=BOUND) == 0, stderr_path.read_text()[-2000:]
            closed = reports.next("closed")
            assert closed["received"] == 4 and closed["frames"] > 0
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
