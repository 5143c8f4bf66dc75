"""Scene queries through the public API: the closest distance between two bodies (or a body
and the world), the overlap of a shape with the scene, a range finder on a body.  References:
closed forms on primitives, and MuJoCo's ``mj_geomDistance`` on random pairs of every kind."""
import numpy as np
import pytest

import rtrigid as rt

from .mujoco_scenes import random_pairs


def _scene():
    m = rt.Model(gravity=(0, 0, 0))
    m.add_ground()
    ball = m.add_body("ball", 1.0, (0.004, 0.004, 0.004))
    m.add_geom(ball, "sphere", radius=0.1)
    crate = m.add_body("crate", 1.0, (0.01, 0.01, 0.01))
    m.add_geom(crate, "box", half_extents=(0.1, 0.2, 0.3))
    table = m.add_geom(None, "box", half_extents=(0.5, 0.5, 0.02), pos=(3.0, 0.0, 0.5))
    sim = rt.Simulation(m, "nullspace_rk4", 0.01)
    sim.set_position(ball, (0.0, 0.0, 1.0))
    sim.set_position(crate, (0.5, 0.0, 1.0))
    return sim, ball, crate, table


def test_distance_between_bodies_and_to_the_world_is_the_closed_form():
    sim, ball, crate, _ = _scene()
    c = sim.distance(ball, crate)
    assert c.distance == pytest.approx(0.5 - 0.1 - 0.1, abs=1e-9)
    assert c.point == pytest.approx((0.1, 0.0, 1.0), abs=1e-9)
    assert c.other_point == pytest.approx((0.4, 0.0, 1.0), abs=1e-9)
    assert (c.geom, c.other_geom) == (0, 1)
    c = sim.distance(ball)  # the world: the ground is nearest
    assert c.distance == pytest.approx(0.9, abs=1e-12) and c.other_geom is None
    assert c.other_point == pytest.approx((0.0, 0.0, 0.0), abs=1e-12)
    assert sim.distance(ball, crate, max_distance=0.2) is None
    sim.set_position(ball, (0.35, 0.0, 1.0))  # 0.05 m into the crate's face
    c = sim.distance("ball", "crate")
    assert c.distance == pytest.approx(-0.05, abs=1e-9)
    assert c.point[0] == pytest.approx(0.45, abs=1e-9)  # the ball's deepest point


def test_overlaps_lists_every_geom_and_ground_a_shape_overlaps():
    sim, ball, crate, table = _scene()
    assert sim.overlaps("sphere", (0.0, 0.0, 2.0), radius=0.5) == []
    hits = sim.overlaps("sphere", (0.45, 0.0, 1.0), radius=0.1)
    assert [(h.body, h.geom) for h in hits] == [(crate, 1)]
    assert hits[0].depth == pytest.approx(0.15, abs=1e-9)
    post = sim.overlaps("box", (3.0, 0.0, 0.0), half_extents=(0.1, 0.1, 0.6))
    assert [(h.body, h.geom) for h in post] == [(None, table), (None, None)]
    assert [h.depth for h in post] == pytest.approx([0.12, 0.6], abs=1e-9)
    rock = np.random.default_rng(0).normal(size=(20, 3)) * 0.05
    assert [h.body for h in sim.overlaps("convex", (0.0, 0.0, 0.95), vertices=rock)] == [ball]
    turned = sim.overlaps("capsule", (0.0, 0.0, 0.03), quat=(np.sqrt(0.5), np.sqrt(0.5), 0, 0),
                          radius=0.05, half_length=1.0)  # lying on the ground
    assert [(h.body, h.geom) for h in turned] == [(None, None)]
    assert turned[0].depth == pytest.approx(0.02, abs=1e-9)


def test_a_range_finder_sees_past_its_own_body():
    sim, ball, crate, _ = _scene()
    assert sim.rangefinder(ball, axis_body=(1, 0, 0)) == pytest.approx(0.4)  # the crate
    assert sim.rangefinder(ball, (0.0, 0.0, -0.1), (0, 0, -1)) == pytest.approx(0.9)  # ground
    assert sim.rangefinder(ball, axis_body=(0, 0, 1)) == np.inf
    assert sim.rangefinder(crate, axis_body=(-1, 0, 0), max_distance=0.3) == np.inf
    sim.set_orientation(crate, (np.sqrt(0.5), 0.0, 0.0, np.sqrt(0.5)))  # its x axis now +y
    assert sim.rangefinder(crate, axis_body=(0, 1, 0)) == pytest.approx(0.4)  # to the ball


def test_scene_queries_refuse_bad_input_naming_the_field():
    sim, ball, crate, _ = _scene()
    with pytest.raises(ValueError, match="kind"):
        sim.overlaps("mesh", file="duck.obj")
    with pytest.raises(ValueError, match="half_extents"):
        sim.overlaps("box", half_extents=(0.1, 0.0, 0.1))
    with pytest.raises(ValueError, match="radius"):
        sim.overlaps("sphere")
    with pytest.raises(ValueError, match="quat"):
        sim.overlaps("sphere", quat=(0, 0, 0, 0), radius=0.1)
    with pytest.raises(ValueError, match="other: the same body"):
        sim.distance(ball, ball)
    with pytest.raises(ValueError, match="max_distance"):
        sim.distance(ball, crate, max_distance=-1.0)
    with pytest.raises(ValueError, match="axis_body"):
        sim.rangefinder(ball, axis_body=(0, 0, 0))
    m = rt.Model()
    m.add_ground()
    m.add_body("bare", 1.0, (1, 1, 1))
    with pytest.raises(ValueError, match="body: body 'bare' has no geoms"):
        rt.Simulation(m, "nullspace_rk4", 0.01).distance("bare")


KINDS = ("sphere", "capsule", "box", "cylinder", "ellipsoid", "hull")


def _params(kind, size, points):
    return {"sphere": {"radius": size[0]}, "capsule": {"radius": size[0],
                                                       "half_length": size[1]},
            "cylinder": {"radius": size[0], "half_length": size[1]},
            "box": {"half_extents": size}, "ellipsoid": {"radii": size},
            "hull": {"vertices": points}}[kind]


@pytest.mark.parametrize("kind_b", KINDS)
@pytest.mark.parametrize("kind_a", ("box", "capsule", "hull"))
def test_distance_agrees_with_mujoco_geom_distance(kind_a, kind_b):
    pytest.importorskip("mujoco")
    import mujoco

    rng = np.random.default_rng(KINDS.index(kind_b) + 10 * KINDS.index(kind_a))
    count = 12
    # MuJoCo's capsule-box function is not the least translation once the capsule's axis
    # crosses the box: there the box goes to MuJoCo as a mesh of its corners (same shape)
    scene = random_pairs(kind_a, kind_b, count, rng,
                         box_mesh={kind_a, kind_b} == {"capsule", "box"})
    m = rt.Model(gravity=(0, 0, 0))
    for i, (kind, size, _, _, _, points) in enumerate(scene.items):
        b = m.add_body(f"g{i:03d}", 1.0, (1, 1, 1))
        m.add_geom(b, "convex" if kind == "hull" else kind, **_params(kind, size, points))
    sim = rt.Simulation(m, "nullspace_rk4", 0.01)
    for i, (_, _, pos, quat, _, _) in enumerate(scene.items):
        sim.set_position(i, pos)
        sim.set_orientation(i, quat)
    apart = inside = 0
    for i in range(count):
        ref = mujoco.mj_geomDistance(scene.model, scene.data, 2 * i, 2 * i + 1, 10.0, None)
        got = sim.distance(2 * i, 2 * i + 1)
        assert got.distance == pytest.approx(ref, abs=1e-5), (kind_a, kind_b, i)
        apart += ref > 0
        inside += ref < 0
    assert apart + inside == count
