"""Geoms in the viewer: a body made only of geoms (a duck of five hulls, an ellipsoid) is drawn
as its geoms, the world's geoms (a table, a height field) as scenery -- on rendered frames
(headless EGL) and in the meshes' extents."""
import os

import numpy as np
import pytest

import rtrigid as rt
from tests.viewer.helpers import drawn
from viewer import Viewer, scene

W, H = 320, 240


def _model():
    pybullet_data = pytest.importorskip("pybullet_data")
    m = rt.Model()
    m.add_ground()
    m.add_geom(None, "box", half_extents=(0.5, 0.5, 0.02), pos=(0, 0, 0.4))
    heights = np.random.default_rng(0).uniform(0.0, 0.1, (8, 8))
    m.add_geom(None, "heightfield", heights=heights, size=(2.0, 2.0), pos=(3.0, 0.0, 0.0),
               contype=0, conaffinity=0)
    duck = m.add_body("duck", 1.0, (0.01, 0.01, 0.01))
    m.add_geom(duck, "mesh", file=os.path.join(pybullet_data.getDataPath(), "duck_vhacd.obj"),
               scale=0.1)
    egg = m.add_body("egg", 1.0, (0.01, 0.01, 0.01))
    m.add_geom(egg, "ellipsoid", radii=(0.1, 0.05, 0.03), pos=(0.0, 0.0, 0.02))
    sim = rt.Simulation(m, "nullspace_rk4", 1e-3)
    sim.set_position(duck, (-0.2, 0.0, 0.6))
    sim.set_position(egg, (0.2, 0.0, 0.5))
    return sim


def test_geoms_only_bodies_are_drawn_as_their_geoms_and_scenery_as_the_world():
    sim = _model()
    duck, egg = scene.body_visuals(sim)
    hull = np.vstack([g.vertices for g in sim.model.geoms if g.body == 0])
    np.testing.assert_allclose(duck.mesh[0][:, :3].min(axis=0), hull.min(axis=0), atol=1e-6)
    np.testing.assert_allclose(duck.mesh[0][:, :3].max(axis=0), hull.max(axis=0), atol=1e-6)
    lo, hi = egg.mesh[0][:, :3].min(axis=0), egg.mesh[0][:, :3].max(axis=0)
    np.testing.assert_allclose(hi, (0.1, 0.05, 0.05), atol=1e-6)
    np.testing.assert_allclose(lo, (-0.1, -0.05, -0.01), atol=1e-6)
    mesh, _ = scene.world_visual(sim)
    lo, hi = mesh[0][:, :3].min(axis=0), mesh[0][:, :3].max(axis=0)
    assert np.allclose(lo[:2], (-0.5, -2.0)) and np.allclose(hi[:2], (5.0, 2.0))


def test_geoms_are_seen_on_a_rendered_frame(require):
    require("egl")
    v = Viewer(_model(), W, H, headless=True, hud=False, msaa=0)
    try:
        def recolour(rgb):
            for vis in v.visuals:
                vis.color = rgb
        _, covered, _ = drawn(v, {"bodies": (recolour, v.visuals[0].color)})
        assert covered["bodies"].sum() > 200
    finally:
        v.close()
