"""Helpers shared by the viewer's tests: the frame size, input sent through pyglet's event
dispatch, and :func:`drawn`, which finds a part's pixels by recolouring it (moved verbatim from
test_viewer.py and, :func:`push_right`, from test_viewer_contacts.py)."""
import numpy as np
import pyglet

from rtrigid import scenarios
from rtrigid.model import Model
from rtrigid.simulation import Simulation

W, H = 320, 240
BLACK, GREY = (0.0, 0.0, 0.0), (0.5, 0.5, 0.5)
# 8-bit rounding of the three frames drawn() combines, the grey one scaled by up to 2
COLOUR_TOLERANCE = 4


def dispatch(v, event, *args):
    """Run the window's handlers for an event now (pyglet 2.1's window.dispatch_event queues)."""
    pyglet.event.EventDispatcher.dispatch_event(v.window, event, *args)


def two_bodies():
    """A sphere and a box, free, no gravity, at rest apart from each other."""
    m = Model(gravity=(0.0, 0.0, 0.0))
    m.add_body("ball", 2.0, (0.08, 0.08, 0.08), shape=("sphere", {"radius": 0.25}))
    m.add_body("brick", 1.0, (0.05, 0.04, 0.03),
               shape=("box", {"half_extents": (0.2, 0.15, 0.1)}))
    sim = Simulation(m, "energy_momentum", dt=0.01)
    sim.set_position("ball", (-0.45, 0.0, 0.3))
    sim.set_position("brick", (0.45, 0.1, 0.25))
    sim.set_orientation("brick", (np.cos(0.3), 0.2, np.sin(0.3), 0.1))
    scenarios.info(sim)["conserved"] = [("linear", 0), ("linear", 1), ("linear", 2),
                             ("angular", 0), ("angular", 1), ("angular", 2)]
    return sim


def frame(v):
    v.render()
    return v.read_pixels().astype(int)


def drawn(v, parts):
    """Where each part of the frame is drawn, and which colour it should show, as this
    renderer draws it.

    ``parts``: {name: (set_colour, colour)}: ``set_colour(rgb)`` recolours that part, and
    ``colour`` is the one the test expects the viewer to give it (set again at the end).  The
    lit shader is affine in a part's base colour, channel by channel (base * light +
    highlight), so one frame with every part black and, per part, one with just that part grey
    tell which pixels the part covers (the only ones that change) and what any base colour
    becomes at each of them under this renderer's lighting and rounding.

    Returns (the frame as the viewer drew it, {name: mask of covered pixels}, the frame the
    expected colours give).
    """
    img = frame(v)
    for set_colour, _ in parts.values():
        set_colour(BLACK)
    black = frame(v)
    covered, expected = {}, black.astype(float)
    for name, (set_colour, colour) in parts.items():
        set_colour(GREY)
        grey = frame(v)
        set_colour(BLACK)
        mask = covered[name] = np.abs(grey - black).max(axis=-1) > COLOUR_TOLERANCE
        lit = black + (grey - black) * (np.asarray(colour, float) / GREY[0])
        expected[mask] = np.clip(lit, 0, 255)[mask]
    for set_colour, colour in parts.values():
        set_colour(colour)
    return img, covered, expected


def module_colour(monkeypatch, module, name):
    """``drawn`` part: what the viewer draws in a module's colour constant, expected in it."""
    return (lambda rgb: monkeypatch.setattr(module, name, rgb), getattr(module, name))


def assert_colours_as_drawn(img, covered, expected):
    """Every pixel of every part shows that part's own colour as this renderer lights it."""
    mask = np.logical_or.reduce(list(covered.values()))
    assert mask.any()
    worst = np.abs(img - expected)[mask].max()
    assert worst <= COLOUR_TOLERANCE, worst


def at(mask, p, spread=0):
    """mask at window pixel p (or, with spread, anywhere within that many pixels of it)."""
    px, py = int(p[0]), int(p[1])
    rows = slice(max(py - spread, 0), py + spread + 1)
    return bool(mask[rows, max(px - spread, 0):px + spread + 1].any())


def key(v, name):
    dispatch(v, "on_key_press", getattr(pyglet.window.key, name), 0)


def push_right(v, body, pixels):
    """Drag body's centre ``pixels`` to the right with the mouse: the impulse applied is the
    one the viewer reports, along the screen's right; returns that direction (world)."""
    sim = v.sim
    v.render()
    left = pyglet.window.mouse.LEFT
    x0, y0 = (int(c) for c in v.project(sim.pose(body)[0]))
    right = v.camera.view()[0, :3]
    p0 = sim.momentum()[0]
    dispatch(v, "on_mouse_press", x0, y0, left, 0)
    dispatch(v, "on_mouse_drag", x0 + pixels, y0, pixels, 0, left, 0)
    dispatch(v, "on_mouse_release", x0 + pixels, y0, left, 0)
    pushed, impulse, _ = v.last_impulse
    assert pushed == sim.body_index(body) and impulse @ right > 0
    assert np.allclose(sim.momentum()[0] - p0, impulse, rtol=1e-12, atol=1e-15)
    return right
