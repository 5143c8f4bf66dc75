"""The HUD in plain words, feedback for what the user did, events marked on the chart rather
than wiping it, deselection, the frame step, and spin drawn so it never seems to turn
backwards; through the viewer's real input handlers and rendered frames (headless EGL)."""
import math

import numpy as np
import pytest

from rtrigid import scenarios
from tests.viewer.helpers import dispatch, drawn, two_bodies
from viewer import monitor


def key(v, name):
    dispatch(v, "on_key_press", getattr(v.pyglet.window.key, name), 0)


def hud_text(v):
    return "\n".join(v.hud_lines())


@pytest.mark.parametrize("drift,words", [(0.0, "exactly"), (3.9e-15, "to 1 part in 10^14"),
                                         (1e-3, "to 1 part in 10^3"), (0.25, "only to 25 %")])
def test_drift_in_plain_words(drift, words):
    assert monitor.kept_to(drift) == words


def test_push_is_reported_in_newton_seconds_and_marked_on_the_chart(open_viewer):
    sim = two_bodies()
    v = open_viewer(sim, hud=True)
    for _ in range(20):
        v.update(1 / 60)
    history = list(v.monitor.energy_history)
    assert len(history) == 20
    px, py = v.project(sim.pose("ball")[0])
    impulse = v.drag((px, py), (px + 30, py))
    for _ in range(5):
        v.update(1 / 60)
    text = hud_text(v)
    assert f"push: {np.linalg.norm(impulse):.3g} N·s on ball" in text
    assert "since the push at t = 0.33 s" in text
    # the histories go on through the event, which is marked where it happened
    assert list(v.monitor.energy_history)[:20] == history
    assert v.monitor.event_positions() == [(20, "push")]
    assert "kept to 1 part in 10^" in text or "kept exactly" in text


def test_chart_marks_the_event_with_a_line(open_viewer):
    sim = two_bodies()
    v = open_viewer(sim, hud=True, width=640, height=480)
    for _ in range(30):
        v.update(1 / 60)
    v.render()
    before = v.read_pixels().astype(int)
    v.kick("ball")
    v.render()
    after = v.read_pixels().astype(int)
    x0, y0, x1, y1 = v.hud.chart
    [(index, label)] = v.monitor.event_positions()
    history = v.monitor.energy_history
    assert label == "kick" and index == len(history) == 30
    col = int(round(x0 + (x1 - x0) * (index + history.maxlen - len(history))
                    / (history.maxlen - 1)))   # the event's column
    changed = np.abs(after - before).sum(axis=2) > 30
    assert changed[y0 + 2:y1 - 2, col - 1:col + 2].sum() > 0.5 * (y1 - y0)
    assert "kick:" in hud_text(v) and "N·s upward on ball" in hud_text(v)


def test_esc_and_a_click_on_empty_space_clear_the_selection_and_frame_steps(open_viewer):
    sim = two_bodies()
    v = open_viewer(sim)
    key(v, "TAB")
    assert v.selected == 0
    key(v, "ESCAPE")
    assert v.selected is None and not v.closed
    key(v, "TAB")
    left = v.pyglet.window.mouse.LEFT
    dispatch(v, "on_mouse_press", 3, 3, left, 0)
    dispatch(v, "on_mouse_release", 3, 3, left, 0)
    assert v.selected is None
    key(v, "SPACE")
    n = sim.steps_taken
    key(v, "COMMA")          # one frame: 1/60 s of wall time at speed 1, dt = 0.01
    assert v.paused and sim.steps_taken - n in (1, 2)
    key(v, "ESCAPE")         # nothing selected: closes
    assert v.closed


def test_fast_spin_is_drawn_blurred_not_backwards_and_slow_motion_shows_it(open_viewer):
    """The gimbal rotor at 60 rad/s turns 57 deg between frames at 60 fps: its six stripes
    (period 60 deg) would seem to stand still or turn back, so they are not drawn; at 1/4
    speed (14 deg a frame) they are, and they advance the way the rotor turns."""
    sim = scenarios.build("gimbal_gyroscope")
    v = open_viewer(sim, hud=True)
    v.update(1 / 60)
    rotor = sim.body_index("rotor")
    stripes, marks = v.spin_visibility(rotor)
    assert stripes == 0.0 and marks == 1.0
    assert "too fast for the frames" in hud_text(v)
    assert "rotor at 60" in hud_text(v)
    v.set_speed(0.25)
    stripes, marks = v.spin_visibility(rotor)
    assert stripes == 1.0 and marks == 1.0
    assert "too fast" not in hud_text(v)


def test_closing_summary_counts_the_frames_drawn(open_viewer):
    v = open_viewer(two_bodies())
    for _ in range(7):
        v.update(1 / 60)
        v.render()
    assert v.frames_drawn == 7


def test_no_face_goes_black_the_side_away_from_the_light_is_lit_too(open_viewer):
    """A sphere seen from the side opposite the key light: the headlight and the ambient keep
    the part facing the camera at a good fraction of the brightest (it was about 0.3)."""
    from scipy import ndimage

    from rtrigid.model import Model
    from rtrigid.simulation import Simulation

    m = Model(gravity=(0.0, 0.0, 0.0))
    m.add_body("ball", 1.0, (0.1, 0.1, 0.1), shape=("sphere", {"radius": 0.5}))
    sim = Simulation(m, "energy_momentum", dt=0.01)
    v = open_viewer(sim)
    light = v.renderer.light_dir
    # look at the ball from below, against the light
    v.camera.yaw = math.atan2(-light[1], -light[0])
    v.camera.pitch = -0.5
    v.visuals[0].color = (0.6, 0.6, 0.6)
    _, covered, _ = drawn(v, {"ball": (lambda rgb: setattr(v.visuals[0], "color", rgb),
                                       (0.6, 0.6, 0.6))})
    v.render()
    img = v.read_pixels().astype(float).mean(axis=2)
    inner = ndimage.binary_erosion(covered["ball"], iterations=3)
    assert inner.sum() > 500
    px, py = (int(round(c)) for c in v.project(sim.pose(0)[0]))
    facing = img[py - 4:py + 5, px - 4:px + 5]     # the part facing the camera, away from the light
    assert facing.mean() > 0.4 * img[inner].max(), (facing.mean(), img[inner].max())


def test_multisampling_smooths_the_edges(open_viewer):
    """With 4 samples a pixel, a body's outline gets pixels between its colour and the
    background's; without, almost none."""
    def edge_blend(msaa):
        v = open_viewer(two_bodies(), msaa=msaa)
        v.visuals[0].color = v.visuals[1].color = (0.0, 0.0, 0.0)
        v.render()
        img = v.read_pixels().astype(float).mean(axis=2)
        v.close()
        # black bodies on a light background: count pixels clearly between the two
        return int(((img > 40) & (img < 150)).sum())

    with_msaa, without = edge_blend(4), edge_blend(0)
    assert with_msaa > 3 * max(without, 1), (with_msaa, without)


def test_frame_rate_bench_runs_and_reports(require, capsys):
    """python -m viewer.bench (the frame-rate table of docs/guide/viewer.md): a short run prints its
    figures (no timing asserted)."""
    import json

    from viewer import bench

    require("egl")
    assert bench.main(["chain", "--set", "n=3", "--seconds", "0.3", "--width", "160",
                       "--height", "120", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["scenario"] == "chain" and r["frames"] > 0 and r["fps"] > 0


@pytest.mark.parametrize("option,value", [("msaa", 3), ("msaa", True), ("floor", float("nan")),
                                          ("floor", "low"), ("controller", 3)])
def test_bad_viewer_options_are_refused_naming_them(open_viewer, option, value):
    with pytest.raises(ValueError, match=f"^{option}:"):
        open_viewer(two_bodies(), **{option: value})
