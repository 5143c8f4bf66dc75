"""The viewer on closed-loop linkages: the loop demos run with their loops closed,
and a mouse drag on the delta robot's platform pushes it through the loops.

Frames are rendered through real OpenGL (headless EGL) and input goes through pyglet's event
dispatch, as in tests/viewer/test_viewer.py.
"""
import numpy as np
import pyglet
import pytest

import demos
from rtrigid import scenarios
from tests.viewer.helpers import dispatch

LOOP_DEMOS = ("four_bar", "slider_crank", "bennett", "delta_robot")


@pytest.mark.parametrize("name", LOOP_DEMOS)
def test_loop_demo_runs_with_its_loops_closed(open_viewer, name):
    d = demos.DEMOS[name]
    sim = d.build()
    assert sim.model.loop_joints and sim.integrator == d.integrator
    v = open_viewer(sim, width=160, height=120, **d.viewer_options(sim))
    assert len(v.loop_joints()) == len(sim.model.loop_joints)
    start = sim.snapshot()
    for _ in range(30):
        v.update(1 / 60)
        v.render()
        assert sim.constraint_error() <= 1e-9
    assert sim.steps_taken >= 30 and v.frames_drawn >= 30
    moved = max(np.abs(sim.joint_position(j["name"]) - start_q).max()
                for j, start_q in zip(sim.joints(), _joint_positions(sim, start)))
    assert moved > 1e-3   # the mechanism moves
    for j in v.loop_joints():   # where each loop closes, its two anchors meet
        assert np.linalg.norm(j["anchor"] - j["anchor_parent"]) <= 1e-9


def _joint_positions(sim, snapshot):
    """The tree joints' positions in ``snapshot`` (the state is put back after)."""
    now = sim.snapshot()
    sim.restore(snapshot)
    out = [np.array(sim.joint_position(j["name"])) for j in sim.joints()]
    sim.restore(now)
    return out


def test_mouse_drag_pushes_the_delta_platform_through_the_loops(open_viewer):
    """Drag the platform to the right and release: the impulse moves it to the right (against
    the same motion without the push), the loops stay closed and the platform level."""
    sim = scenarios.build("delta_robot", integrator="nullspace_rk4")
    platform = sim.body_index("platform")
    v = open_viewer(sim, width=480, height=360, impulse_gain=10.0)
    v.render()
    x0, y0 = (int(c) for c in v.project(sim.pose(platform)[0]))
    assert v.pick(x0, y0)[0] == platform
    right = v.camera.view()[0, :3]
    before = sim.snapshot()
    q0 = sim.pose(platform)[1]
    left = pyglet.window.mouse.LEFT
    dispatch(v, "on_mouse_press", x0, y0, left, 0)
    dispatch(v, "on_mouse_drag", x0 + 80, y0, 80, 0, left, 0)
    dispatch(v, "on_mouse_release", x0 + 80, y0, left, 0)
    body, impulse, _ = v.last_impulse
    assert body == platform and impulse @ right > 0
    assert sim.constraint_error() <= 1e-9
    assert sim.velocity(platform)[0] @ right > 0
    for _ in range(6):       # 0.1 s (later it swings back: nothing holds it)
        v.update(1 / 60)
        assert sim.constraint_error() <= 1e-9
    pushed, steps = sim.pose(platform)[0], sim.steps_taken
    _, q = sim.pose(platform)
    assert 2.0 * np.arccos(min(abs(float(q @ q0)), 1.0)) < 1e-6   # still level
    sim.restore(before)          # the same motion without the push
    sim.step(steps - sim.steps_taken)
    unpushed = sim.pose(platform)[0]
    assert (pushed - unpushed) @ right > 0.05


def test_holding_the_platform_pulls_it_toward_the_cursor(open_viewer):
    """Press on the platform and hold the button 80 px to its right: each frame a
    spring-damper force at the picked point (``apply_force(..., point=...)``) pulls it toward
    the cursor through the loops, and is taken off after the frame's steps, so the user's own
    applied force stays as it was."""
    sim = scenarios.build("delta_robot", integrator="nullspace_rk4")
    platform = sim.body_index("platform")
    user = np.array([0.0, 0.3, 0.0])
    sim.apply_force(platform, user)   # the user's own load: the viewer must leave it be
    v = open_viewer(sim, width=480, height=360)
    v.render()
    x0, y0 = (int(c) for c in v.project(sim.pose(platform)[0]))
    right = v.camera.view()[0, :3]
    before = sim.snapshot()
    left = pyglet.window.mouse.LEFT
    dispatch(v, "on_mouse_press", x0, y0, left, 0)
    dispatch(v, "on_mouse_drag", x0 + 80, y0, 80, 0, left, 0)
    force, point = v.pull_force()
    assert force @ right > 0
    start = point @ right
    gap0 = (v._drag_ends()[1] - point) @ right
    assert gap0 > 0.02
    for _ in range(15):   # 0.25 s held
        v.update(1 / 60)
        v.render()
        assert sim.constraint_error() <= 1e-9
        np.testing.assert_array_equal(sim.applied(platform)[0], user)
        np.testing.assert_array_equal(sim.applied(platform)[1], np.zeros(3))
    held_at, steps = v.pull_force()[1], sim.steps_taken
    gap = (v._drag_ends()[1] - held_at) @ right
    # pulled more than half the way toward the cursor, not past it
    assert held_at @ right - start > 0.5 * gap0 and 0.0 <= gap < 0.5 * gap0
    pulled = sim.pose(platform)[0]
    sim.restore(before)   # the same time without the hold
    sim.step(steps - sim.steps_taken)
    assert (pulled - sim.pose(platform)[0]) @ right > 0.5 * gap0
