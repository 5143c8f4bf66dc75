"""Picking through the simulation's ray cast (``sim.raycast``), on rendered frames (headless
EGL) with the mouse events a user's clicks send: a body made of geoms is picked where its geoms
are hit, as they collide (a convex hull, every geom of a compound body); the world's scenery and
the grounds stop the ray and pick nothing; parts that are drawn only are picked by the viewer's
own ray casts, the nearest hit winning."""
import numpy as np
import pyglet
import pytest

from rtrigid.model import Model
from rtrigid.simulation import Simulation
from tests.viewer.helpers import dispatch, drawn
from viewer.scene import rotation

COS, SIN = np.cos(np.pi / 4), np.sin(np.pi / 4)


def _hull_points(n, size, seed):
    """n points of an irregular convex blob about ``size`` across."""
    rng = np.random.default_rng(seed)
    p = rng.normal(size=(n, 3))
    return 0.5 * size * p / np.linalg.norm(p, axis=1)[:, None] * rng.uniform(0.7, 1.0, (n, 1))


def click(v, p, drag=(30, 0)):
    """Press the left button at window pixel p, drag by ``drag`` pixels and release, through
    pyglet's event dispatch; returns the integer pixel pressed (what the handlers were sent)."""
    x, y = int(p[0]), int(p[1])
    left = pyglet.window.mouse.LEFT   # (pyglet.window opens a display: after the viewer's set-up)
    dispatch(v, "on_mouse_press", x, y, left, 0)
    if drag != (0, 0):
        dispatch(v, "on_mouse_drag", x + drag[0], y + drag[1], drag[0], drag[1], left, 0)
    dispatch(v, "on_mouse_release", x + drag[0], y + drag[1], left, 0)
    return x, y


def covered_by_bodies(v):
    """{body index: mask of the pixels it covers} on the rendered frame."""
    def set_colour(b):
        return lambda rgb: setattr(v.visuals[b], "color", rgb)

    return drawn(v, {b: (set_colour(b), v.visuals[b].color) for b in range(v.sim.nb)})[1]


def test_a_click_picks_a_convex_hull_or_a_compound_body_where_its_geoms_are_hit(open_viewer):
    """Bodies made only of geoms (a hull; two spheres and a capsule) are picked where
    ``sim.raycast`` meets them: the push acts at that very point, not at a drawn facet."""
    m = Model(gravity=(0.0, 0.0, 0.0))
    gem = m.add_body("gem", 1.0, (0.01, 0.01, 0.01))
    hull = m.add_geom(gem, "convex", vertices=_hull_points(14, 0.36, seed=3))
    bell = m.add_body("dumbbell", 1.0, (0.01, 0.02, 0.02))
    balls = [m.add_geom(bell, "sphere", radius=0.1, pos=(s * 0.2, 0.0, 0.0)) for s in (-1, 1)]
    bar = m.add_geom(bell, "capsule", radius=0.03, half_length=0.2, quat=(COS, 0.0, SIN, 0.0))
    sim = Simulation(m, "nullspace_rk4", 1e-3)
    sim.set_position(gem, (-0.4, 0.0, 0.3))
    sim.set_position(bell, (0.35, 0.0, 0.3))
    sim.set_orientation(bell, (np.cos(0.3), 0.0, 0.0, np.sin(0.3)))
    v = open_viewer(sim, paused=True)
    covered = covered_by_bodies(v)
    x_bell, q_bell = sim.pose(bell)
    R = rotation(q_bell)
    centres = [x_bell + R @ np.array([s * 0.2, 0.0, 0.0]) for s in (-1, 1)]
    targets = [(bell, balls[0], centres[0]),
               (bell, balls[1], centres[1] + R @ np.array([0.03, 0.0, 0.03])),
               (bell, bar, x_bell),
               (gem, hull, sim.pose(gem)[0]),
               (gem, hull, sim.pose(gem)[0] + np.array([0.06, 0.0, 0.05]))]
    for body, geom, p in targets:
        x, y = click(v, v.project(p))
        assert covered[body][y, x]  # the pixel shows that body
        hit = sim.raycast(*v.camera.ray(x, y))
        assert (hit.body, hit.geom) == (body, geom)
        picked, impulse, point = v.last_impulse
        assert picked == body and v.selected == body and np.linalg.norm(impulse) > 0.0
        # the push acts on the geom's own surface (a ball's sphere, not its drawn facets),
        # where the ray cast meets it
        if geom in balls:
            assert np.linalg.norm(point - centres[balls.index(geom)]) == pytest.approx(
                0.1, rel=0.0, abs=1e-12)
        np.testing.assert_allclose(point, hit.point, rtol=0.0, atol=1e-12)


def test_a_click_on_static_scenery_picks_nothing_even_with_a_body_behind_it(open_viewer):
    """A table (a geom of the world) hides a crate under it: a click on the table there picks
    nothing and clears the selection, as MuJoCo's viewer does on the world; so does a click on
    the ground.  A body on the table is picked as before."""
    m = Model(gravity=(0.0, 0.0, 0.0))
    m.add_ground()
    table = m.add_geom(None, "box", half_extents=(0.5, 0.5, 0.02), pos=(0.0, 0.0, 0.5))
    crate = m.add_body("crate", 1.0, (0.01, 0.01, 0.01))
    m.add_geom(crate, "convex", vertices=_hull_points(12, 0.2, seed=5))
    gem = m.add_body("gem", 1.0, (0.01, 0.01, 0.01))
    m.add_geom(gem, "convex", vertices=_hull_points(14, 0.16, seed=3))
    sim = Simulation(m, "nullspace_rk4", 1e-3)
    sim.set_position(crate, (0.0, 0.0, 0.25))
    sim.set_position(gem, (0.3, 0.15, 0.62))
    v = open_viewer(sim, paused=True)
    v.camera.target, v.camera.distance, v.camera.pitch = np.array([0.0, 0.0, 0.4]), 2.5, 1.1
    covered = covered_by_bodies(v)
    # the gem, on the table, is picked and pushed
    click(v, v.project(sim.pose(gem)[0]))
    assert v.selected == gem and v.last_impulse[0] == gem
    pushed = v.last_impulse
    # above the crate the frame shows the table, and the ray meets the table, then the crate
    x, y = (int(c) for c in v.project(sim.pose(crate)[0]))
    assert not covered[crate][y - 12:y + 13, x - 12:x + 13].any()
    assert not covered[gem][y - 12:y + 13, x - 12:x + 13].any()
    origin, direction = v.camera.ray(x, y)
    hit = sim.raycast(origin, direction)
    assert (hit.body, hit.geom) == (None, table)
    assert sim.raycast(hit.point + 0.05 * direction, direction).body == crate
    # a click there (press and release in place) picks nothing: a click on empty space
    click(v, (x, y), drag=(0, 0))
    assert v.pick(x, y) is None
    assert v.selected is None and v.last_impulse is pushed
    # the ground beside the table, away from every body
    x, y = (int(c) for c in v.project((-0.9, 0.0, 0.0)))
    assert 20 < x < v.window.width - 20 and 20 < y < v.window.height - 20
    hit = sim.raycast(*v.camera.ray(x, y))
    assert (hit.body, hit.geom) == (None, None)
    click(v, (x, y), drag=(30, 0))  # a drag from there orbits the camera
    assert v.pick(x, y) is None and v.selected is None and v.last_impulse is pushed


def test_parts_drawn_only_are_picked_by_their_drawn_shape_the_nearest_hit_first(open_viewer):
    """A torus (drawn only) on a body whose small sphere collides, and boxes of a body with
    ``collide=False`` in front of and behind a wall body: each is picked where it is drawn,
    unless a geom is nearer along the ray."""
    m = Model(gravity=(0.0, 0.0, 0.0))
    ring = m.add_body("ring", 1.0, (0.01, 0.01, 0.02),
                      shape=[("torus", {"radius": 0.2, "tube_radius": 0.04, "axis": (0, 1, 0)}),
                             ("sphere", {"radius": 0.04})])
    wall = m.add_body("wall", 1.0, (0.01, 0.01, 0.01),
                      shape=("box", {"half_extents": (0.2, 0.05, 0.2)}))
    front = m.add_body("front", 1.0, (0.01, 0.01, 0.01),
                       shape=("box", {"half_extents": (0.05, 0.05, 0.05)}), collide=False)
    back = m.add_body("back", 1.0, (0.01, 0.01, 0.01),
                      shape=("box", {"half_extents": (0.05, 0.05, 0.05)}), collide=False)
    sim = Simulation(m, "nullspace_rk4", 1e-3)
    assert [g.body for g in sim.model.geoms] == [ring, wall]
    sim.set_position(ring, (-0.55, 0.0, 0.0))
    sim.set_position(wall, (0.2, 0.0, 0.0))
    sim.set_position(front, (0.1, -0.3, 0.0))
    sim.set_position(back, (0.3, 0.3, 0.0))
    v = open_viewer(sim, paused=True)
    # looking along +y: front, then the wall, then back
    v.camera.target, v.camera.distance = np.zeros(3), 3.0
    v.camera.yaw, v.camera.pitch = -np.pi / 2, 0.0
    covered = covered_by_bodies(v)
    # the torus's rim: sim.raycast meets nothing there, the drawn ring is picked
    x, y = click(v, v.project(sim.pose(ring)[0] + np.array([0.0, 0.0, 0.2])))
    assert covered[ring][y, x] and sim.raycast(*v.camera.ray(x, y)) is None
    assert v.selected == ring and v.last_impulse[0] == ring
    point = v.last_impulse[2]
    rim = np.hypot(np.hypot(*(point - sim.pose(ring)[0])[[0, 2]]) - 0.2, point[1])
    assert rim == pytest.approx(0.04, rel=0.02)
    # the box drawn in front of the wall, though the ray cast meets the wall
    x, y = click(v, v.project(sim.pose(front)[0]))
    assert covered[front][y, x] and sim.raycast(*v.camera.ray(x, y)).body == wall
    assert v.last_impulse[0] == front
    assert v.last_impulse[2][1] == pytest.approx(-0.35, abs=1e-9)  # its front face
    # the box behind the wall: hidden, the wall is picked
    x, y = click(v, v.project(sim.pose(back)[0]))
    assert not covered[back][y, x] and covered[wall][y, x]
    assert v.last_impulse[0] == wall
