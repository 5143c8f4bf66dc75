"""The viewer on contact scenes: contact points and normals drawn on request, and
the mouse and keys pushing, kicking and spinning bodies that rest on the ground.

Frames are rendered through real OpenGL (headless EGL) and input goes through pyglet's event
dispatch, as in tests/viewer/test_viewer.py, whose helpers (tests/viewer/helpers.py) find a
part's pixels by recolouring it (no fixed RGB values).
"""
import numpy as np

from rtrigid import scenarios
from tests.viewer.helpers import assert_colours_as_drawn, at, drawn, key, module_colour, push_right
from viewer import drawing


def resting_box(steps=20):
    """One box resting on the ground (box_stack with n = 1), settled for ``steps`` steps."""
    sim = scenarios.build("box_stack", n=1)
    sim.step(steps)
    return sim


def test_contact_points_and_normals_are_drawn_on_request(open_viewer, monkeypatch):
    sim = resting_box()
    contacts = sim.contacts()
    assert len(contacts) == 4   # the bottom face's corners
    v = open_viewer(sim, width=480, height=360, paused=True)
    assert v.ground_z == 0.0    # the floor is the contact ground
    parts = {"point": module_colour(monkeypatch, drawing, "CONTACT_COLOR"),
             "normal": module_colour(monkeypatch, drawing, "NORMAL_COLOR")}
    _, covered, _ = drawn(v, parts)
    assert not covered["point"].any() and not covered["normal"].any()   # off by default
    key(v, "C")
    assert v.show_contacts
    img, covered, expected = drawn(v, parts)
    size = v.visuals[0].radius
    ball = 0.08 * size   # the marker's radius
    for c in contacts:
        # the ball around the point (its centre is under the normal arrow's foot)
        assert at(covered["point"], v.project(c["point"] - 0.6 * ball * c["normal"]), spread=1)
        # the normal from the point into the box (up), half the box's radius long
        for t in (0.1, 0.25, 0.4):
            assert at(covered["normal"], v.project(c["point"] + t * size * c["normal"]), spread=1)
        assert not at(covered["normal"], v.project(c["point"] + 0.65 * size * c["normal"]))
    assert_colours_as_drawn(img, covered, expected)
    assert any("contact point" in line for line in v.hud_lines())
    key(v, "C")
    _, covered, _ = drawn(v, parts)
    assert not covered["point"].any()


def test_cli_view_contacts_flag(require, capsys, tmp_path):
    from rtrigid import cli

    require("egl")
    out = tmp_path / "box.png"
    args = ["view", "box_stack", "--set", "n=1", "--headless", "--frames", "3", "--width", "160",
            "--height", "120", "--msaa", "0", "--screenshot"]
    assert cli.main(args + [str(out), "--contacts"]) == 0
    with_contacts = np.asarray(__import__("PIL.Image").Image.open(out).convert("RGB"), int)
    assert cli.main(args + [str(out)]) == 0
    without = np.asarray(__import__("PIL.Image").Image.open(out).convert("RGB"), int)
    assert np.abs(with_contacts - without).max() > 40   # the markers differ from the frame


def test_mouse_drag_slides_a_resting_box_and_friction_stops_it(open_viewer):
    sim = resting_box()
    v = open_viewer(sim, width=480, height=360, impulse_gain=10.0)
    right = push_right(v, 0, 60)
    start = sim.pose(0)[0]
    for _ in range(120):      # 2 s: it slides, then friction stops it on the ground
        v.update(1 / 60)
    moved = sim.pose(0)[0] - start
    # pushed along the drag (the push also turns it, so it slides farther than v0^2/(2 mu g))
    assert moved @ right > 0.01 and moved @ right > 3.0 * abs(moved[2])
    assert abs(sim.pose(0)[0][2] - 0.1) < 1e-3     # still on the ground
    assert np.linalg.norm(sim.velocity(0)[0]) < 1e-3
    assert sim.contacts()


def test_kick_key_lifts_a_resting_box_and_it_lands_again(open_viewer):
    sim = resting_box()
    v = open_viewer(sim)
    key(v, "TAB")   # select the box
    key(v, "K")
    assert sim.velocity(0)[0][2] > 0.2
    heights, touching = [], []
    for _ in range(90):
        v.update(1 / 60)
        heights.append(sim.pose(0)[0][2])
        touching.append(bool(sim.contacts()))
    assert max(heights) > 0.1 + 0.01 and not all(touching)   # in the air for a while
    assert touching[-1] and abs(heights[-1] - 0.1) < 1e-3      # and back on the ground


def test_spin_key_spins_the_top_on_the_table(open_viewer):
    sim = scenarios.build("top_on_table")
    v = open_viewer(sim, paused=True)
    w0 = np.linalg.norm(sim.velocity(0)[1])
    key(v, "U")
    assert np.linalg.norm(sim.velocity(0)[1]) > 1.1 * w0
    v.paused = False
    for _ in range(30):
        v.update(1 / 60)
    assert sim.contacts() and sim.contacts()[0]["name"] == "top"   # still on its tip


def test_loop_joints_are_drawn_where_the_loop_closes(open_viewer, monkeypatch):
    """four_bar's cut joint (Model.add_loop_joint) is drawn at its anchor, on both links."""
    from viewer import scene

    sim = scenarios.build("four_bar")
    v = open_viewer(sim, width=480, height=360, paused=True)
    loops = v.loop_joints()
    assert len(loops) == len(sim.model.loop_joints) == 1
    j = loops[0]
    assert np.linalg.norm(j["anchor"] - j["anchor_parent"]) < 1e-9   # the loop is closed
    assert j["kind"] == "revolute" and j["axis"] is not None
    parts = {"joint": module_colour(monkeypatch, scene, "JOINT_COLOR"),
             "pin": module_colour(monkeypatch, scene, "JOINT_AXIS_COLOR")}
    _, covered, _ = drawn(v, parts)
    tree = [t["anchor"] for t in sim.joints()]
    assert min(np.linalg.norm(j["anchor"] - a) for a in tree) > 0.05   # no tree joint there
    assert at(covered["pin"], v.project(j["anchor"]), spread=1)
    # without the loop joints, nothing is drawn there
    monkeypatch.setattr(type(v), "loop_joints", lambda self, poses=None: [])
    _, without, _ = drawn(v, parts)
    assert not at(without["pin"], v.project(j["anchor"]), spread=1)
