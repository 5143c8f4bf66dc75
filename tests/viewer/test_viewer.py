"""The viewer, rendering real frames through OpenGL (Mesa's software renderer, headless EGL).

Pixels are read back from the framebuffer the viewer draws into; mouse and keyboard input
goes through pyglet's event dispatch to the window, as a user's would.  Colours are never
compared with fixed RGB values: renderers light and round differently, so :func:`drawn`
asks the renderer in use how it draws each part of the frame.
"""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyglet
import pytest
from PIL import Image
from scipy import ndimage

from rtrigid import scenarios
from rtrigid.model import Model
from rtrigid.simulation import Simulation
from tests.viewer.helpers import (H, W, assert_colours_as_drawn, at, dispatch, drawn, key,
                                  module_colour, two_bodies)
from viewer import Viewer, app, drawing, scene

ROOT = Path(__file__).resolve().parents[2]
MAGENTA = (0.85, 0.10, 0.85)
YELLOW = (0.90, 0.85, 0.10)


def body_parts(v, colours):
    """``drawn`` parts: each body, expected in ``colours[name]``."""
    def set_colour(b):
        return lambda rgb: setattr(v.visuals[b], "color", rgb)

    return {name: (set_colour(v.sim.body_index(name)), rgb) for name, rgb in colours.items()}


def test_bodies_appear_where_project_says(open_viewer):
    sim = two_bodies()
    v = open_viewer(sim, colors={"ball": MAGENTA, "brick": YELLOW})
    img, covered, expected = drawn(v, body_parts(v, {"ball": MAGENTA, "brick": YELLOW}))
    for name in ("ball", "brick"):
        assert at(covered[name], v.project(sim.pose(name)[0])), name
    assert_colours_as_drawn(img, covered, expected)
    # between them there is no body
    between = v.project((0.0, 0.05, 0.3))
    assert not at(covered["ball"], between) and not at(covered["brick"], between)
    # move the ball sideways on the screen: it is drawn at its new place, gone from the old
    old = v.project(sim.pose("ball")[0])
    sim.set_position("ball", sim.pose("ball")[0] - 0.6 * v.camera.view()[0, :3])
    _, covered, _ = drawn(v, body_parts(v, {"ball": MAGENTA, "brick": YELLOW}))
    assert at(covered["ball"], v.project(sim.pose("ball")[0]))
    assert not at(covered["ball"], old)


def test_picking_agrees_with_the_rendered_image(open_viewer):
    sim = two_bodies()
    v = open_viewer(sim, colors={"ball": MAGENTA, "brick": YELLOW})
    _, covered, _ = drawn(v, body_parts(v, {"ball": MAGENTA, "brick": YELLOW}))
    label = np.full((H, W), None, dtype=object)
    for name, mask in covered.items():
        label[mask] = name
    # empty pixels within the pick tolerance of a body (plus a pixel of rasterization) take it
    body = np.logical_or.reduce(list(covered.values()))
    near = ndimage.distance_transform_edt(~body) <= app.PICK_TOLERANCE + 1.5
    seen = {"ball": 0, "brick": 0, None: 0, "near": 0}
    for py in range(2, H - 2, 4):
        for px in range(2, W - 2, 4):
            around = set(label[py - 1:py + 2, px - 1:px + 2].ravel())
            if len(around) != 1:
                continue  # an edge: rasterization and the exact shape may differ by a pixel
            shown = around.pop()
            hit = v.pick(px + 0.5, py + 0.5)
            if shown is None and near[py, px]:
                seen["near"] += hit is not None
                continue
            assert (None if hit is None else sim.names[hit[0]]) == shown, (px, py)
            seen[shown] += 1
    assert seen["ball"] > 50 and seen["brick"] > 50 and seen[None] > 1000 and seen["near"] > 10


def test_a_click_beside_a_thin_link_picks_it(open_viewer):
    sim = scenarios.build("chain")
    v = open_viewer(sim)
    x, q = sim.pose(2)
    centre = np.array(v.project(x))
    # a few pixels off the link's axis, sideways on the screen, beyond its drawn radius
    axis = np.array(v.project(x + scene.rotation(q)[:, 2] * 0.1)) - centre
    side = np.array([-axis[1], axis[0]]) / np.linalg.norm(axis)
    radius_px = np.linalg.norm(np.array(v.project(x + v.camera.view()[0, :3] * 0.05)) - centre)
    hit = v.pick(*(centre + side * (radius_px + 0.6 * app.PICK_TOLERANCE)))
    assert hit is not None and hit[0] == 2
    assert v.pick(*(centre + side * (radius_px + 3 * app.PICK_TOLERANCE))) is None


def test_pick_returns_the_surface_point(open_viewer):
    sim = two_bodies()
    v = open_viewer(sim)
    v.render()
    centre = sim.pose("ball")[0]
    body, point = v.pick(*v.project(centre))
    assert sim.names[body] == "ball"
    # the front of the sphere, on the line of sight through its centre
    toward_eye = (v.camera.eye - centre) / np.linalg.norm(v.camera.eye - centre)
    assert np.allclose(point, centre + 0.25 * toward_eye, atol=1e-9)


def drag_in_view_plane(v, start_point, shift_world):
    """Pixels of a drag from a world point by a world shift perpendicular to the view."""
    f = v.camera.forward()
    shift = np.asarray(shift_world, float) - (np.asarray(shift_world, float) @ f) * f
    return v.project(start_point), v.project(start_point + shift), shift


def test_scripted_drag_applies_the_implied_impulse_to_a_free_body(open_viewer):
    sim = two_bodies()
    v = open_viewer(sim, impulse_gain=3.0)
    v.render()
    centre = sim.pose("ball")[0]
    surface = centre + 0.25 * (v.camera.eye - centre) / np.linalg.norm(v.camera.eye - centre)
    start_px, _, _ = drag_in_view_plane(v, centre, (0, 0, 0))
    _, end_px, shift = drag_in_view_plane(v, surface, (0.1, 0.05, 0.2))
    p0, l0 = sim.momentum()
    impulse = v.drag(start_px, end_px)
    expected = 3.0 * 2.0 * shift  # gain * mass * drag
    assert np.allclose(impulse, expected, rtol=1e-7, atol=1e-12)
    p1, l1 = sim.momentum()
    assert np.allclose(p1 - p0, expected, rtol=1e-7, atol=1e-12)
    assert np.allclose(l1 - l0, np.cross(surface, expected), rtol=1e-6, atol=1e-12)
    assert v.selected == sim.body_index("ball")


def test_scripted_drag_on_a_top_turns_it_about_its_pivot(open_viewer):
    sim = scenarios.build("gyro_top")
    v = open_viewer(sim, impulse_gain=2.0, paused=True)
    v.render()
    start_px = v.project(sim.pose(0)[0])
    body, point = v.pick(*start_px)
    _, end_px, shift = drag_in_view_plane(v, point, (0.0, 0.03, 0.0))
    l0 = sim.momentum()[1]
    impulse = v.drag(start_px, end_px)
    expected = 2.0 * sim.backend.frozen.mass[0] * shift
    assert np.allclose(impulse, expected, rtol=1e-6, atol=1e-12)
    # the pivot (at the origin) takes the reaction: L about it changes by point x J
    assert np.allclose(sim.momentum()[1] - l0, np.cross(point, expected), rtol=1e-6, atol=1e-14)
    assert v.drag(v.project((0.0, 0.0, 0.3)), end_px) is None  # nothing there to pick


def test_mouse_events_drag_a_body_with_an_arrow_then_impulse(open_viewer, monkeypatch):
    sim = two_bodies()
    v = open_viewer(sim, colors={"ball": MAGENTA, "brick": YELLOW})
    arrow = {"drag": module_colour(monkeypatch, drawing, "DRAG_COLOR")}
    assert not drawn(v, arrow)[1]["drag"].any()  # no drag, no arrow
    left = pyglet.window.mouse.LEFT
    x0, y0 = (int(c) for c in v.project(sim.pose("ball")[0]))
    x1, y1 = x0 - 60, y0 + 50
    p0 = sim.momentum()[0]
    dispatch(v, "on_mouse_press", x0, y0, left, 0)
    dispatch(v, "on_mouse_drag", x1, y1, x1 - x0, y1 - y0, left, 0)
    img, covered, expected = drawn(v, arrow)
    start, end = v._drag_ends()
    # the drag arrow is drawn from the picked point to the cursor, not beyond it, in its colour
    # (a shaft a few pixels thick: its axis may fall on a pixel edge)
    for t in (0.2, 0.4, 0.6, 0.8, 0.95):
        assert at(covered["drag"], v.project(start + t * (end - start)), spread=1), t
    assert not at(covered["drag"], v.project(start + 1.3 * (end - start)), spread=1)
    assert_colours_as_drawn(img, covered, expected)
    dispatch(v, "on_mouse_release", x1, y1, left, 0)
    body, impulse, point = v.last_impulse
    assert sim.names[body] == "ball"
    assert np.allclose(sim.momentum()[0] - p0, impulse, rtol=1e-12, atol=1e-15)
    # up and to the left on the screen
    right, up = v.camera.view()[0, :3], v.camera.view()[1, :3]
    assert impulse @ right < 0 and impulse @ up > 0
    assert np.allclose(impulse, v.impulse_gain * 2.0 * (end - start), rtol=1e-9)


def test_mouse_orbits_pans_and_zooms_on_empty_space(open_viewer):
    sim = two_bodies()
    v = open_viewer(sim)
    v.render()
    left, right = pyglet.window.mouse.LEFT, pyglet.window.mouse.RIGHT
    yaw, target, dist = v.camera.yaw, v.camera.target.copy(), v.camera.distance
    dispatch(v, "on_mouse_press", 5, 5, left, 0)
    dispatch(v, "on_mouse_drag", 25, 5, 20, 0, left, 0)
    dispatch(v, "on_mouse_release", 25, 5, left, 0)
    assert v.camera.yaw != yaw and v.last_impulse is None
    dispatch(v, "on_mouse_press", 5, 5, right, 0)
    dispatch(v, "on_mouse_drag", 5, 25, 0, 20, right, 0)
    dispatch(v, "on_mouse_release", 5, 25, right, 0)
    assert not np.allclose(v.camera.target, target)
    dispatch(v, "on_mouse_scroll", 100, 100, 0, 3)
    assert v.camera.distance == pytest.approx(dist * 0.9 ** 3)


def test_keys_pause_step_speed_and_reset(open_viewer):
    sim = scenarios.build("gyro_top")  # dt = 1 ms
    x_start, q_start = sim.pose(0)
    v = open_viewer(sim)
    assert v.update(0.0505) == 50
    key(v, "SPACE")
    assert v.paused and v.update(0.1) == 0 and sim.steps_taken == 50
    key(v, "PERIOD")
    assert sim.steps_taken == 51 and v.paused
    key(v, "SPACE")
    key(v, "MINUS")
    assert v.speed == 0.5
    assert v.update(0.1) == 50  # slow motion: 0.05 s of simulated time
    key(v, "EQUAL")
    key(v, "EQUAL")
    assert v.speed == 2.0
    assert v.update(0.01) == 20
    key(v, "R")
    assert sim.t == 0.0
    x, q = sim.pose(0)
    assert np.array_equal(x, x_start) and np.array_equal(q, q_start)
    assert v.monitor.max_energy_drift == 0.0


def test_frames_show_interpolated_poses_and_the_state_when_paused(open_viewer):
    sim = scenarios.build("gyro_top")
    v = open_viewer(sim)
    v.update(0.0104)  # 10 steps and 0.4 of the next
    assert sim.alpha == pytest.approx(0.4, abs=1e-6)
    x_drawn = v.poses()[0][0]
    assert np.array_equal(x_drawn, sim.interpolated_pose(0)[0])
    assert not np.allclose(x_drawn, sim.pose(0)[0])
    key(v, "SPACE")
    assert np.array_equal(v.poses()[0][0], sim.pose(0)[0])


def test_a_loop_the_user_owns(open_viewer):
    """poll() handles window events between the user's own steps and frames."""
    sim = scenarios.build("gyro_top")
    v = open_viewer(sim)
    for _ in range(3):
        assert v.poll()
        sim.step(10)
        v.render()
    assert sim.steps_taken == 30
    v.close()
    assert not v.poll()


def test_hud_and_follow_keys(open_viewer):
    sim = two_bodies()
    sim.set_velocity("brick", (0.3, 0.0, 0.0))
    v = open_viewer(sim, hud=True)
    v.update(0.1)
    v.render()
    with_hud = v.read_pixels()
    key(v, "H")
    v.render()
    without = v.read_pixels()
    # the text panel at the top left and the chart at the bottom left are gone
    assert np.abs(with_hud[H - 40:, :100].astype(int) - without[H - 40:, :100]).max() > 60
    assert np.abs(with_hud[:40, :100].astype(int) - without[:40, :100]).max() > 60
    key(v, "TAB")
    key(v, "TAB")  # the brick
    key(v, "F")
    v.update(0.5)
    v.render()
    assert v.project(sim.interpolated_pose("brick")[0]) == pytest.approx((W / 2, H / 2), abs=1e-6)


def test_keys_can_be_rebound_or_turned_off(open_viewer):
    v = open_viewer(scenarios.build("gyro_top"), keys={"pause": "P", "reset": None})
    key(v, "SPACE")
    assert not v.paused
    key(v, "P")
    assert v.paused
    v.step_once()
    key(v, "R")
    assert v.sim.steps_taken == 1
    with pytest.raises(RuntimeError, match="another Viewer"):
        open_viewer(scenarios.build("gyro_top"))
    v.close()
    w = open_viewer(scenarios.build("gyro_top"), keys=False)
    key(w, "SPACE")
    key(w, "ESCAPE")
    assert not w.paused and not w.closed


def test_viewer_never_wipes_user_forces(open_viewer):
    sim = two_bodies()
    sim.apply_force("ball", (0.0, 0.0, 0.5), point=(-0.45, 0.0, 0.4))
    sim.apply_torque("brick", (0.01, 0.0, 0.0))
    loads = [sim.applied(b) for b in range(sim.nb)]
    v = open_viewer(sim)
    v.update(0.05)
    v.render()
    v.drag(v.project(sim.pose("ball")[0]), v.project(sim.pose("ball")[0] + (0.1, 0, 0)))
    v.kick("brick")
    v.spin_up("brick")
    key(v, "PERIOD")
    key(v, "R")
    for b, (f, t) in enumerate(loads):
        assert np.array_equal(sim.applied(b)[0], f) and np.array_equal(sim.applied(b)[1], t)
    v.update(0.05)
    assert v.monitor.loads_applied


def test_applied_forces_are_drawn_as_arrows(open_viewer, monkeypatch):
    sim = two_bodies()
    v = open_viewer(sim, width=480, height=360)
    direction = np.array([0.0, -0.6, 0.8])
    arrows = {"load": module_colour(monkeypatch, drawing, "LOAD_COLOR")}
    assert not drawn(v, arrows)[1]["load"].any()  # no force, no arrow
    x = sim.pose("brick")[0]
    size = v.visuals[sim.body_index("brick")].radius
    sim.apply_force("brick", 2.0 * direction)
    img, covered, expected = drawn(v, arrows)
    # on the shaft outside the brick, the load arrow, in its colour
    assert at(covered["load"], v.project(x + direction * 1.2 * size), spread=1)
    assert not at(covered["load"], v.project(x - direction * 1.2 * size), spread=1)
    assert_colours_as_drawn(img, covered, expected)


def test_spin_up_adds_angular_momentum_only(open_viewer):
    sim = scenarios.build("free_body")
    v = open_viewer(sim)
    p0, l0 = sim.momentum()
    v.spin_up()
    p1, l1 = sim.momentum()
    assert np.allclose(p1, p0, atol=1e-12)
    assert np.linalg.norm(l1) > np.linalg.norm(l0) * 1.01
    v.kick()
    assert sim.momentum()[0][2] > p1[2]


def test_joints_of_every_kind_are_drawn(open_viewer, monkeypatch):
    """sim.joints() is the contract: each kind gets a marker where its anchor is."""
    kinds = ["spherical", "revolute", "prismatic", "cylindrical", "planar", "fixed"]

    class Jointed(Simulation):
        def joints(self):
            return [{"kind": k, "parent": -1 if i == 0 else 0, "child": 0,
                     "anchor": np.array([0.9 * (i - 2.5), -0.8, 0.9]),
                     "axis": None if k in ("spherical", "fixed") else np.array([0.0, 0.0, 1.0])}
                    for i, k in enumerate(kinds)]

    m = Model(gravity=(0.0, 0.0, 0.0))
    m.add_body("b", 1.0, (0.1, 0.1, 0.1), shape=("sphere", {"radius": 0.5}))
    sim = Jointed(m, "energy_momentum", dt=0.01)
    v = open_viewer(sim, width=480, height=320)
    v.joint_size = 0.12
    v.camera.target = np.array([0.0, -0.8, 0.9])
    v.camera.distance = 6.0
    marker_colours = {"joint": module_colour(monkeypatch, scene, "JOINT_COLOR"),
                      "pin": module_colour(monkeypatch, scene, "JOINT_AXIS_COLOR")}
    part_of = {scene.JOINT_COLOR: "joint", scene.JOINT_AXIS_COLOR: "pin"}
    img, covered, expected = drawn(v, marker_colours)
    for j in sim.joints():
        # the anchor shows one of the parts scene.joint_markers gives this kind
        parts = {part_of[color] for _, _, color in scene.joint_markers(j, v.joint_size)}
        shown = {name for name, mask in covered.items() if at(mask, v.project(j["anchor"]))}
        assert shown and shown <= parts, (j["kind"], shown, parts)
    assert_colours_as_drawn(img, covered, expected)


def test_traces_follow_the_top_crown(open_viewer):
    sim = scenarios.build("gyro_top")
    v = open_viewer(sim)
    for _ in range(30):
        v.update(1 / 60)
    path = np.array(v._traces[0])
    assert len(path) == 30
    # the crown: the centre of the base, on the axis, one cone height from the pivot
    height = sim.model.bodies[0].shape.params["height"]
    assert np.allclose(np.linalg.norm(path, axis=1), height, rtol=1e-9)
    # nearly steady precession: it stays near one height while it circles the vertical
    assert np.ptp(path[:, 2]) < 0.02 * height
    assert np.ptp(np.arctan2(path[:, 1], path[:, 0])) > 0.5 * 10.0 * 0.25
    v.render()


def test_screenshot_is_the_rendered_frame(open_viewer, tmp_path):
    v = open_viewer(two_bodies(), colors={"ball": MAGENTA, "brick": YELLOW}, hud=True)
    v.render()
    out = v.screenshot(tmp_path / "frame.png")
    img = np.asarray(Image.open(out).convert("RGB"))
    assert img.shape == (H, W, 3)
    assert np.array_equal(img, np.flipud(v.read_pixels()))


def test_bad_arguments_are_refused(require):
    require("egl")  # key names are checked against pyglet.window, whose import opens GL
    sim = two_bodies()
    for kw, field in [({"width": 0}, "width"), ({"speed": 0.0}, "speed"),
                      ({"speed": 100.0}, "speed"), ({"keys": {"jump": "J"}}, "keys"),
                      ({"keys": {"pause": "NOSUCHKEY"}}, "keys"),
                      ({"traces": {0: "x"}}, "traces"), ({"impulse_gain": -1}, "impulse_gain"),
                      ({"follow": "nobody"}, "body")]:
        args = {"width": W, "height": H, **kw}
        with pytest.raises(ValueError, match=field):
            Viewer(sim, args.pop("width"), args.pop("height"), headless=True, **args)


def test_bad_elapsed_leaves_the_simulation_alone(open_viewer):
    sim = scenarios.build("gyro_top")
    v = open_viewer(sim)
    for bad in (-0.1, float("nan"), "soon", None):
        with pytest.raises(ValueError, match="elapsed"):
            v.update(bad)
    assert sim.steps_taken == 0


def test_cli_view_headless_writes_a_screenshot(tmp_path, capsys, require):
    from rtrigid import cli

    require("egl")

    out = tmp_path / "top.png"
    code = cli.main(["view", "gyro_top", "--headless", "--frames", "6", "--width", "200",
                     "--height", "150", "--screenshot", str(out)])
    text = capsys.readouterr().out
    assert code == 0
    assert Image.open(out).size == (200, 150)
    drift = float(text.split("max rel. energy drift")[1].split()[0])
    assert drift < 1e-12
    assert cli.main(["view", "gyro_top", "--screenshot", str(out)]) == 2


@pytest.mark.parametrize("where", ["/nonexistent/dir/x.png", "{tmp}/frame.jpeg2", "{tmp}/frame"])
def test_cli_view_refuses_a_screenshot_it_cannot_write_in_one_line(where, tmp_path):
    """A user's mistake: one line on stderr and exit code 2, before any frame is drawn."""
    path = where.format(tmp=tmp_path)
    out = subprocess.run([sys.executable, "-m", "rtrigid.cli", "view", "gyro_top", "--headless",
                          "--frames", "30", "--screenshot", path], cwd=tmp_path,
                         env={"PYTHONPATH": str(ROOT), "PATH": ""}, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("rtrigid: error: screenshot: ") and path in out.stderr
    assert len(out.stderr.splitlines()) == 1, out.stderr
    assert out.stdout == ""  # refused before the run, not after it
    assert not any(tmp_path.iterdir())


def test_cli_view_reports_a_failed_screenshot_write_in_one_line(tmp_path, capsys, require):
    from rtrigid import cli

    require("egl")
    taken = tmp_path / "taken.png"
    taken.mkdir()  # a directory by the file's name: only the write itself finds out
    code = cli.main(["view", "gyro_top", "--headless", "--frames", "2", "--width", "64",
                     "--height", "48", "--screenshot", str(taken)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"rtrigid: error: screenshot: cannot write {taken}: ")
    assert len(err.splitlines()) == 1, err


def test_cli_view_draws_a_robot_files_meshes(tmp_path, capsys, require):
    """The panda's meshes drawn headless: the frame differs from the same robot with its mesh
    files out of reach (placeholders), in the region the robot covers."""
    import os
    import shutil
    import warnings

    from rtrigid import cli

    require("egl")
    pybullet_data = pytest.importorskip("pybullet_data")
    pytest.importorskip("trimesh")
    src = os.path.join(pybullet_data.getDataPath(), "franka_panda", "panda.urdf")
    alone = tmp_path / "panda.urdf"
    shutil.copy(src, alone)  # without its meshes folder beside it
    frames = []
    for path in (src, str(alone)):
        out = tmp_path / f"{len(frames)}.png"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            code = cli.main(["view", path, "--set", "ignore=('mimic',)", "--headless",
                             "--frames", "2", "--width", "320", "--height", "240",
                             "--screenshot", str(out)])
        assert code == 0, capsys.readouterr().err
        frames.append(np.asarray(Image.open(out).convert("RGB"), dtype=np.int16))
    # the middle of the frame, clear of the HUD (whose fps figures differ from run to run)
    changed = np.any(np.abs(frames[0] - frames[1]) > 30, axis=2)[80:220, 60:260]
    assert changed.mean() > 0.02, changed.mean()
