"""The broad phase of mesh pieces: a piece of a decomposed mesh lies off its body's origin, so
the sweep and the pair test bound it by its own box and sphere, not the sphere about the
origin that holds the whole mesh.  Checked through the public API: every pair of pieces that
overlap (``Simulation.overlaps``, each piece's hull as the query shape) is a contact of the
step, and every contact is between pieces that overlap or nearly touch."""
import os

import numpy as np
import pytest

import rtrigid as rt
from rtrigid.geoms import quat_matrix

FILES = (("duck_vhacd.obj", 0.05), ("teddy2_VHACD_CHs.obj", 0.1), ("cube.obj", 0.1))


def _pile(seed, count=12):
    """``count`` meshes (ducks, teddies, cubes) at random poses in a 0.2 m box, at rest and
    without gravity, so that the step's free flight leaves them where they are."""
    pybullet_data = pytest.importorskip("pybullet_data")
    rng = np.random.default_rng(seed)
    m = rt.Model(gravity=(0.0, 0.0, 0.0))
    for k in range(count):
        name, scale = FILES[k % len(FILES)]
        b = m.add_body(f"m{k}", 1.0, (1e-3, 1e-3, 1e-3))
        m.add_geom(b, "mesh", file=os.path.join(pybullet_data.getDataPath(), name), scale=scale)
    sim = rt.Simulation(m, integrator="semi_implicit_euler", dt=1e-3)
    for k in range(count):
        q = rng.normal(size=4)
        sim.set_orientation(k, q / np.linalg.norm(q))
        sim.set_position(k, rng.uniform(-0.1, 0.1, 3))
    return sim


def _overlapping_pairs(sim):
    """{(geom, other geom)} of pieces of different bodies that overlap, by the scene query."""
    pairs = set()
    for h, g in enumerate(sim.model.geoms):
        x, q = sim.pose(g.body)
        pos = x + quat_matrix(q) @ g.pos
        quat = rt.geoms.matrix_quat(quat_matrix(q) @ quat_matrix(g.quat))
        for hit in sim.overlaps("convex", pos, quat, vertices=g.vertices):
            if hit.body is not None and hit.body != g.body and hit.depth > 1e-6:
                pairs.add((min(h, hit.geom), max(h, hit.geom)))
    return pairs


@pytest.mark.parametrize("seed", [0, 1])
def test_every_overlapping_pair_of_mesh_pieces_is_a_contact(seed):
    sim = _pile(seed)
    expected = _overlapping_pairs(sim)
    assert len(expected) >= 10  # a crowded scene, or the check would say little
    sim.step(1)
    found = {(min(c["geom"], c["other_geom"]), max(c["geom"], c["other_geom"]))
             for c in sim.contacts()}
    assert expected <= found
    # and no contact between pieces that are apart: each is overlapping or within the margin
    for a, b in found - expected:
        ga, gb = sim.model.geoms[a], sim.model.geoms[b]
        closest = sim.distance(ga.body, gb.body)
        assert closest is not None and closest.distance < 2e-3
