"""What a person sees in each demo, checked on rendered frames (headless EGL).

Pixels are found the way tests/viewer/test_viewer.py finds them: a part is recoloured black and
grey and the pixels that change are the part's, so no fixed RGB window is assumed.
"""
import numpy as np
import pytest

import demos
from tests.viewer.helpers import drawn
from viewer import Viewer

W, H = 320, 240


@pytest.fixture
def demo_viewer(require):
    require("egl")
    opened = []

    def make(name):
        d = demos.DEMOS[name]
        sim = d.build()
        v = Viewer(sim, W, H, headless=True,
                   **{**d.viewer_options(sim), "hud": False, "msaa": 0})
        opened.append(v)
        return v

    yield make
    for v in opened:
        v.close()


def bodies_mask(v):
    def recolour(rgb):
        for vis in v.visuals:
            vis.color = rgb
    _, covered, _ = drawn(v, {"bodies": (recolour, v.visuals[0].color)})
    return covered["bodies"]


@pytest.mark.parametrize("name", demos.names())
def test_moving_bodies_stay_above_the_floor_and_inside_the_frame(demo_viewer, name):
    v = demo_viewer(name)
    for k in range(5):
        if k:
            v.update(0.4)  # 2 s of wall time over the run, at the demo's speed
        mask = bodies_mask(v)
        assert mask.sum() > 50, (name, k)  # the bodies are seen, not a speck
        # not cut by the frame's edges
        assert not (mask[0].any() or mask[-1].any() or mask[:, 0].any() or mask[:, -1].any()), \
            (name, k)
        if v.ground_z is not None:
            lowest = min(float((vis.mesh[0][:, :3].astype(float) @ _rot(q).T + x)[:, 2].min())
                         for vis, (x, q) in zip(v.visuals, v.poses()))
            assert lowest >= v.ground_z - 1e-6 * v.extent, (name, k)  # float32 meshes


def _rot(q):
    from viewer import scene
    return scene.rotation(q)


def test_no_floor_without_gravity_and_a_floor_under_a_hanging_chain(demo_viewer):
    v = demo_viewer("tennis_racket")
    assert v.ground_z is None
    v.close()
    v = demo_viewer("chain")
    # the chain hangs 2.5 m below its pivot: the floor is below its lowest point, not at it
    assert v.ground_z < -2.5


def test_racket_marking_flips_side_within_its_first_second(demo_viewer):
    v = demo_viewer("tennis_racket")
    marking = next(p for p in v.visuals[0].parts if p.kind == "sphere")

    def where():
        def recolour(rgb):
            marking.color = rgb
        _, covered, _ = drawn(v, {"marking": (recolour, marking.color)})
        ys, xs = np.nonzero(covered["marking"])
        assert len(xs) > 5
        return np.array([xs.mean(), ys.mean()]) - np.array(v.project(v.sim.pose(0)[0]))

    first = where()
    sides = []
    v.speed = 1.0
    for _ in range(20):
        v.update(0.05)  # 1 s of simulated time
        sides.append(where() @ first)
    assert min(sides) < -0.5 * (first @ first), sides  # on the other side of the centre


@pytest.mark.parametrize("name", [n for n in demos.names()
                                  if demos.DEMOS[n].viewer.get("show_omega")
                                  or demos.DEMOS[n].viewer.get("show_momentum")])
def test_arrows_of_a_demo_are_seen_not_hidden_in_the_body(demo_viewer, monkeypatch, name):
    from viewer import drawing

    v = demo_viewer(name)
    v.update(0.3)
    parts = {}
    if v.show_omega:
        parts["omega"] = (lambda rgb: monkeypatch.setattr(drawing, "OMEGA_COLOR", rgb),
                          drawing.OMEGA_COLOR)
    if v.show_momentum:
        parts["momentum"] = (lambda rgb: monkeypatch.setattr(drawing, "MOMENTUM_COLOR", rgb),
                             drawing.MOMENTUM_COLOR)
    _, covered, _ = drawn(v, parts)
    for part, mask in covered.items():
        assert mask.sum() > 40, (name, part, mask.sum())  # a visible arrow, not a few pixels
