"""Driven demos in the viewer: the per-step controller hook, keys and a dragged target that
move servo targets, the quadrotor flown by hand, the robots from files; checked through the
viewer's real input handlers and on rendered frames (headless EGL), as tests/viewer/test_viewer.py
does."""
import numpy as np
import pytest

import demos
from demos.controllers import QuadrotorController, ServoTeleop
from rtrigid import scenarios
from tests.viewer.helpers import dispatch, drawn

W, H = 320, 240


def key(v, name):
    dispatch(v, "on_key_press", getattr(v.pyglet.window.key, name), 0)


def bodies_mask(v):
    def recolour(rgb):
        for vis in v.visuals:
            vis.color = rgb
    return drawn(v, {"bodies": (recolour, v.visuals[0].color)})[1]["bodies"]


def demo_viewer(open_viewer, name, **kw):
    d = demos.DEMOS[name]
    sim = d.build()
    return open_viewer(sim, **{**d.viewer_options(sim), **kw})


class Recorder:
    """Records the step count at each call and pushes joint 0 with a torque that depends
    on the state, so a missed or extra call changes the motion."""

    def __init__(self):
        self.calls = []

    def __call__(self, sim):
        self.calls.append(sim.steps_taken)
        sim.set_joint_force(0, -3.0 * float(sim.qvel()[0]) + 0.5)


def test_the_viewer_calls_the_controller_before_every_step(open_viewer):
    sim = scenarios.build("arm")
    rec = Recorder()
    v = open_viewer(sim, controller=rec)
    rec.calls.clear()                    # the run-ahead that placed the camera called it too
    assert sim.steps_taken == 0           # ... and was undone
    for _ in range(5):
        v.update(1 / 60)
    v.step_once()
    n = sim.steps_taken
    assert n == 83 + 1 and rec.calls == list(range(n))   # 5/60 s in 1 ms steps, and one
    # the same motion as a loop calling the controller and stepping, bit for bit
    ref = scenarios.build("arm")
    for _ in range(n):
        rec(ref)
        ref.step(1)
    assert np.array_equal(sim.qpos(), ref.qpos()) and np.array_equal(sim.qvel(), ref.qvel())


def test_a_controller_must_be_callable(open_viewer):
    with pytest.raises(ValueError, match="controller"):
        open_viewer(scenarios.build("arm"), controller=3)


def test_arm_keys_move_a_servo_target_and_the_arm_follows_on_screen(open_viewer):
    v = demo_viewer(open_viewer, "arm")
    sim, ctl = v.sim, v.controller
    v.update(1.5)                                   # settle on the scenario's targets
    before = bodies_mask(v)
    u0 = sim.controls()
    key(v, "RIGHT")                                  # choose joint1
    for _ in range(5):
        key(v, "UP")
    assert ctl.selected == 1
    assert sim.controls() == pytest.approx(u0 + [0.0, 0.5])
    for _ in range(90):
        v.update(1 / 60)
    assert sim.joint_position("joint1")[0] == pytest.approx(u0[1] + 0.5, abs=0.05)
    after = bodies_mask(v)
    assert (before ^ after).sum() > 0.2 * before.sum()   # the forearm moved on screen


def test_dragging_the_red_ball_brings_the_arm_tip_to_it(open_viewer):
    v = demo_viewer(open_viewer, "arm")
    sim, ctl = v.sim, v.controller
    v.update(1.0)
    start = np.array(v.project(ctl.target))
    goal = ctl.target + np.array([0.12, 0.0, 0.15])
    end = np.array(v.project(goal))
    mouse = v.pyglet.window.mouse
    dispatch(v, "on_mouse_press", *start, mouse.LEFT, 0)
    dispatch(v, "on_mouse_drag", *end, *(end - start), mouse.LEFT, 0)
    dispatch(v, "on_mouse_release", *end, mouse.LEFT, 0)
    assert ctl.reach
    # the ball is where the cursor let go, in the plane facing the camera
    assert np.allclose(v.project(ctl.target), end, atol=0.5)
    for _ in range(150):
        v.update(1 / 60)
    # a planar arm (x-z): the ball, dragged in the plane facing the camera, may sit off that
    # plane; the tip reaches its place in the plane
    assert np.linalg.norm((ctl.tip_position(sim) - ctl.target)[[0, 2]]) < 5e-3
    v.render()
    tip_px = np.round(v.project(ctl.tip_position(sim))).astype(int)
    mask = bodies_mask(v)
    assert mask[tip_px[1] - 3:tip_px[1] + 4, tip_px[0] - 3:tip_px[0] + 4].any()


def test_arm_keeps_its_energy_balance_while_driven(open_viewer):
    """Energy minus the servos' work stays constant under energy_momentum, however the
    targets are moved; the HUD reports that figure."""
    v = demo_viewer(open_viewer, "arm", hud=True)
    sim, mon = v.sim, v.monitor
    for k in range(60):
        if k % 10 == 0:
            key(v, "UP")
        v.update(1 / 60)
    assert 0 < mon.max_energy_drift < 1e-12
    assert abs(sim.energy() - sim.actuator_work().sum() - mon.e0) < 1e-12 * mon.e_scale
    assert abs(sim.actuator_work().sum()) > 1e3 * 1e-12 * mon.e_scale   # work was done
    v.render()
    assert "energy - actuator work" in v.hud.label.text.lower()
    assert "servo targets [rad]" in v.hud.label.text


def test_quadrotor_holds_then_flies_by_hand_and_holds_again(open_viewer):
    v = demo_viewer(open_viewer, "quadrotor")
    sim, ctl = v.sim, v.controller
    assert np.linalg.norm(scenarios_rot(sim.pose(0)[1])[:, 2] - (0, 0, 1)) > 0.5  # released tilted
    for _ in range(180):
        v.update(1 / 60)
    assert np.linalg.norm(sim.pose(0)[0] - (0, 0, 1)) < 1e-2     # back where it started, level
    assert np.linalg.norm(scenarios_rot(sim.pose(0)[1])[:, 2] - (0, 0, 1)) < 1e-2
    for _ in range(4):
        key(v, "UP")                                              # pitch forward 0.2 rad
    assert ctl.manual[1] == pytest.approx(0.2)
    for _ in range(30):
        v.update(1 / 60)
    x, q = sim.pose(0)
    body_z = scenarios_rot(q)[:, 2]
    assert body_z[0] > 0.15                       # leaning towards +x ...
    assert sim.velocity(0)[0][0] > 0.3             # ... and flying that way
    key(v, "P")
    held = ctl.target.copy()
    for _ in range(240):
        v.update(1 / 60)
    assert ctl.manual is None and np.linalg.norm(sim.pose(0)[0] - held) < 0.05
    assert "holding position" in " ".join(ctl.hud_lines(sim))


def scenarios_rot(q):
    from viewer import scene
    return scene.rotation(q)


def test_quadrotor_red_ball_drag_sets_the_position_to_hold(open_viewer):
    v = demo_viewer(open_viewer, "quadrotor")
    ctl = v.controller
    v.render()
    start = np.array(v.project(ctl.target))
    mouse = v.pyglet.window.mouse
    end = start + (40, 0)
    dispatch(v, "on_mouse_press", *start, mouse.LEFT, 0)
    dispatch(v, "on_mouse_drag", *end, 40, 0, mouse.LEFT, 0)
    dispatch(v, "on_mouse_release", *end, mouse.LEFT, 0)
    assert np.linalg.norm(ctl.target - (0, 0, 1)) > 0.05 and ctl.manual is None
    assert v.selected is None                       # not a body drag (no impulse)


needs_robots = pytest.mark.skipif(not demos.robots.available(demos.robots.A1)
                                  or not demos.robots.available(demos.robots.IIWA),
                                  reason="the robot files come with pybullet_data "
                                         "(pip install pybullet)")


@needs_robots
def test_quadruped_trots_in_the_air_keeps_its_balance_and_stops_on_g(open_viewer):
    v = demo_viewer(open_viewer, "quadruped")
    sim, mon = v.sim, v.monitor
    masks = []
    for _ in range(3):
        for _ in range(10):
            v.update(1 / 60)
        masks.append(bodies_mask(v))
    assert (masks[0] ^ masks[1]).sum() > 100 and (masks[1] ^ masks[2]).sum() > 100   # legs swing
    assert mon.max_energy_drift < 1e-11                   # energy - servo work, energy_momentum
    key(v, "G")
    for _ in range(60):
        v.update(1 / 60)
    assert sim.controls() == pytest.approx(np.clip(v.controller.stance,
                                                   v.controller.limits[:, 0],
                                                   v.controller.limits[:, 1]))


@needs_robots
def test_iiwa_gripper_follows_the_dragged_ball(open_viewer):
    v = demo_viewer(open_viewer, "iiwa")
    sim, ctl = v.sim, v.controller
    assert isinstance(ctl, ServoTeleop) and sim.na == 7 and ctl.reach
    v.update(0.5)
    goal = ctl.target + np.array([-0.1, 0.15, 0.1])
    start, end = np.array(v.project(ctl.target)), np.array(v.project(goal))
    mouse = v.pyglet.window.mouse
    dispatch(v, "on_mouse_press", *start, mouse.LEFT, 0)
    dispatch(v, "on_mouse_drag", *end, *(end - start), mouse.LEFT, 0)
    dispatch(v, "on_mouse_release", *end, mouse.LEFT, 0)
    moved = ctl.target.copy()
    assert np.linalg.norm(moved - ctl.tip_position(sim)) > 0.1
    for _ in range(120):
        v.update(1 / 60)
    assert np.linalg.norm(ctl.tip_position(sim) - moved) < 0.01


def test_quadrotor_controller_keys_are_refused_when_not_its_own():
    sim = scenarios.build("quadrotor")
    ctl = QuadrotorController(sim)
    assert not ctl.on_key("SPACE") and ctl.manual is None
    assert ctl.on_key("PAGEUP") and ctl.manual[2] > sim.body_mass[0] * 9.8
