"""The viewer on a tilted ground (ball_on_incline): the slope drawn as it lies, and
the demo rolling the ball down it with the camera following and the mouse and keys kicking it.

Frames are rendered through real OpenGL (headless EGL) and input goes through pyglet's event
dispatch, as in tests/viewer/test_viewer.py.  No colour is compared with a fixed value: the slope's
pixels are those that change when it is not drawn.
"""
import numpy as np

import demos
from rtrigid import scenarios
from tests.viewer.helpers import frame, key, push_right
from viewer import meshes, scene

CHANGED = 4   # 8-bit levels: more than rounding


def pixel_rays(v):
    """World rays (origins, unit directions), each (H, W, 3), through every pixel's centre,
    indexed as read_pixels is ([py, px], row 0 at the bottom)."""
    cam = v.camera
    py, px = np.mgrid[0:cam.height, 0:cam.width] + 0.5
    ndc = np.stack([2.0 * px / cam.width - 1.0, 2.0 * py / cam.height - 1.0], axis=-1)
    inv = np.linalg.inv(cam.proj_view())

    def unproject(depth):
        ones = np.ones(ndc.shape[:2] + (1,))
        p = np.concatenate([ndc, depth * ones, ones], axis=-1) @ inv.T
        return p[..., :3] / p[..., 3:]
    near, far = unproject(-1.0), unproject(1.0)
    d = far - near
    return near, d / np.linalg.norm(d, axis=-1, keepdims=True)


def test_tilted_ground_is_drawn_where_it_lies(open_viewer):
    sim = scenarios.build("ball_on_incline", angle=30.0)
    (ground,) = sim.model.grounds
    normal, height = np.asarray(ground.normal), ground.height
    v = open_viewer(sim, paused=True)
    assert v.ground_z is None            # no level floor under a model whose ground is tilted
    assert len(v.slopes) == 1 and np.allclose(v.slopes[0][0], normal)
    with_slope = frame(v)
    slopes, v.slopes = v.slopes, []
    without = frame(v)
    v.slopes = slopes
    changed = np.abs(with_slope - without).max(axis=-1) > CHANGED
    # where each pixel's ray meets the plane normal . p = height
    o, d = pixel_rays(v)
    t = (height - o @ normal) / (d @ normal)
    hit = o + t[..., None] * d
    x = sim.pose("ball")[0]
    r = 0.1
    oc = o - x
    b = np.einsum("ijk,ijk->ij", oc, d)
    ball = b * b - (np.einsum("ijk,ijk->ij", oc, oc) - r * r) > -(0.05 * r) ** 2   # near the ball
    # the plane's tiles are drawn around the point under the camera's target, fading out
    # towards 24 tiles away: well inside that, every pixel that sees the plane shows it
    foot = v.camera.target - (v.camera.target @ normal - height) * normal
    near = (t > 0) & (np.linalg.norm(hit - foot, axis=-1) < 8 * v.grid_spacing) & ~ball
    # a ray that never meets the plane (the sky above the slope's horizon) sees no change
    misses = ~(t > 0) & ~ball
    assert near.sum() > 0.2 * near.size and misses.sum() > 0.05 * misses.size   # both seen
    assert changed[near].all()
    assert not changed[misses].any()
    # and the slope really is tilted: a horizontal plane through the ball's contact point
    # would be seen by some of the rays that see the sky above the slope
    level = (x[2] - r - o[..., 2]) / d[..., 2]
    assert ((level > 0) & misses).any()


def test_level_floor_is_unchanged_by_the_plane_drawing():
    """The floor is the checkered plane in the world's x-y axes at height z, and its shadows
    the projection onto that plane, as before tilted grounds were drawn."""
    floor = meshes.checker_floor((0.3, -1.2), 2.4, 0.2, 0.25, (1, 1, 1, 1), (0, 0, 0, 1))
    assert np.all(floor[:, 2] == np.float32(0.25))
    plane = meshes.checker_plane((0.3, -1.2), 2.4, 0.2, (0, 0, 0.25), (1, 0, 0), (0, 1, 0),
                                 (1, 1, 1, 1), (0, 0, 0, 1))
    assert np.array_equal(floor, plane)
    light = np.array([0.35, 0.25, 1.0]) / np.linalg.norm([0.35, 0.25, 1.0])
    p = np.array([0.4, -0.2, 1.3, 1.0])
    s = scene.shadow_matrix(light, 0.25) @ p
    assert np.isclose(s[2], 0.25) and np.allclose(np.cross(p[:3] - s[:3], light), 0.0)


def test_shadow_on_a_tilted_plane_lies_on_it_along_the_light():
    light = np.array([0.35, 0.25, 1.0]) / np.linalg.norm([0.35, 0.25, 1.0])
    n = np.array([-np.sin(0.4), 0.0, np.cos(0.4)])
    rng = np.random.default_rng(3)
    for p in rng.normal(size=(20, 3)):
        s = (scene.shadow_matrix(light, 0.7, n) @ np.append(p, 1.0))[:3]
        assert np.isclose(s @ n, 0.7)
        assert np.allclose(np.cross(p - s, light), 0.0, atol=1e-12)


def test_tilted_plane_tiles_lie_in_the_plane():
    n = np.array([-np.sin(0.4), 0.0, np.cos(0.4)])
    u = np.array([np.cos(0.4), 0.0, np.sin(0.4)])
    v = np.cross(n, u)
    rows = meshes.checker_plane((1.0, 2.0), 3.0, 0.5, 0.7 * n, u, v, (1, 1, 1, 1), (0, 0, 0, 1))
    assert np.allclose(rows[:, :3] @ n, 0.7, atol=1e-5)
    ab = (rows[:, :3] - 0.7 * n) @ np.array([u, v]).T
    assert np.allclose(ab.min(axis=0), [1.0 - 3.0, 2.0 - 3.0], atol=1e-5)
    assert np.allclose(ab.max(axis=0), [1.0 + 3.0, 2.0 + 3.0], atol=1e-5)


def ball_demo(open_viewer, **kw):
    d = demos.DEMOS["ball_on_incline"]
    sim = d.build()
    return sim, open_viewer(sim, **{**d.viewer_options(sim), **kw})


def on_plane(sim):
    """The ball's one contact with the slope: its depth, and the centre's height over it."""
    (ground,) = sim.model.grounds
    (c,) = sim.contacts()
    return c, sim.pose("ball")[0] @ np.asarray(ground.normal) - ground.height


def test_demo_rolls_the_ball_down_the_slope_with_the_camera_on_it(open_viewer):
    sim, v = ball_demo(open_viewer)
    assert v.show_contacts and v.follow == sim.body_index("ball")
    ref = scenarios.info(sim)["reference"]
    (ground,) = sim.model.grounds
    down = np.array([-np.cos(np.radians(20.0)), 0.0, -np.sin(np.radians(20.0))])
    start = sim.pose("ball")[0]
    travelled = []
    for _ in range(90):                  # 1.5 s at 60 frames a second
        v.update(1 / 60)
        c, height = on_plane(sim)
        assert c["other"] is None and c["depth"] < 1e-3 and abs(height - 0.1) < 1e-3
        travelled.append((sim.pose("ball")[0] - start) @ down)
    assert np.all(np.diff(travelled) > 0)                       # always down the slope
    s_ref = (ref(sim.t) - start) @ down
    assert s_ref > 1.0 and abs(travelled[-1] - s_ref) < 0.02 * s_ref   # rolling, (5/7) g sin
    # the camera is on the ball, and the slope is drawn under it there
    v.render()
    assert np.allclose(v.camera.target, v.poses()[sim.body_index("ball")][0])
    with_slope = frame(v)
    v.slopes = []
    without = frame(v)
    changed = np.abs(with_slope - without).max(axis=-1) > CHANGED
    x = sim.pose("ball")[0]
    n = np.asarray(ground.normal)
    side = np.cross(n, down)
    for p in (x - 0.1 * n + 0.5 * down, x - 0.1 * n - 0.5 * down, x - 0.1 * n + 0.5 * side):
        px, py = (int(c) for c in v.project(p))
        assert changed[py, px]


def test_mouse_drag_pushes_the_ball_across_the_slope(open_viewer):
    sim, v = ball_demo(open_viewer, impulse_gain=10.0)
    right = push_right(v, "ball", 40)
    for _ in range(30):
        v.update(1 / 60)
        c, height = on_plane(sim)
        assert c["depth"] < 1e-3 and abs(height - 0.1) < 1e-3   # rolling on the slope
    assert sim.velocity("ball")[0] @ right > 0.1   # going the way it was pushed


def test_kick_key_throws_the_ball_off_the_slope_and_it_lands_on_it(open_viewer):
    sim, v = ball_demo(open_viewer)
    key(v, "TAB")    # select the ball
    key(v, "K")
    (ground,) = sim.model.grounds
    n = np.asarray(ground.normal)
    assert sim.velocity("ball")[0] @ n > 0.2
    heights, touching = [], []
    for _ in range(120):
        v.update(1 / 60)
        heights.append(sim.pose("ball")[0] @ n - ground.height)
        touching.append(bool(sim.contacts()))
    # 3 radii a second up: (0.3 cos 20 deg)^2 / (2 g cos 20 deg) = 4.3 mm off the slope
    assert max(heights) > 0.1 + 0.003 and not all(touching)   # in the air for a while
    c, height = on_plane(sim)                                 # and back on the slope
    assert c["depth"] < 1e-3 and abs(height - 0.1) < 1e-3
