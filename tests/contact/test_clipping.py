"""The face-on contact manifold (rtrigid.contact.clipping): a box resting on a hull box touches
at its four bottom corners with equal depth, a standing cylinder at four rim points, a lying
capsule at its two ends, a sphere at one point; tilted, the deepest point is kept."""
import itertools

import numpy as np
import pytest

from rtrigid.contact import clipping as cl
from rtrigid.contact import convex as cv
from rtrigid.contact.geometry import BOX, CAPSULE, CYLINDER, HULL, SPHERE

DEPTH = 1e-3


@pytest.fixture(scope="module")
def slab():
    corners = np.array(list(itertools.product((-0.5, 0.5), (-0.5, 0.5), (-0.1, 0.1))))
    verts, planes = cv.hull_pools(corners)
    hull = cv.world_geom(np.zeros(cv.W_WIDTH), HULL, (0, 0, 0), (0, 0, 0), np.eye(3), verts, 0,
                         0, len(planes))
    return hull, verts, planes


def _turn_z(angle):
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _manifold(geom, slab):
    hull, verts, planes = slab
    res, out = np.zeros(cv.R_WIDTH), np.zeros((cl.MAX_POINTS, cl.M_WIDTH))
    assert cv.collide(geom, hull, verts, cv.workspace(), res) == cv.CONVERGED
    count = cl.manifold(geom, hull, verts, planes, res, 1e-3, cl.clip_space(), out)
    return res, out[:count]


def test_box_resting_on_a_hull_box_touches_at_its_four_corners(slab):
    for angle in (0.0, 0.5, 1.2):
        rot = _turn_z(angle)
        centre = np.array([0.05, 0.02, 0.2 - DEPTH])
        box = cv.world_geom(np.zeros(cv.W_WIDTH), BOX, (0.1, 0.07, 0.1), centre, rot)
        res, points = _manifold(box, slab)
        assert res[cv.R_DIST] == pytest.approx(-DEPTH, abs=1e-12)
        assert len(points) == 4
        np.testing.assert_allclose(points[:, cl.M_DEPTH], DEPTH, atol=1e-12)
        corners = {tuple(np.round(centre + rot @ [sx * 0.1, sy * 0.07, -0.1]
                                  + [0, 0, 0.5 * DEPTH], 9))
                   for sx in (-1, 1) for sy in (-1, 1)}
        assert {tuple(np.round(p, 9)) for p in points[:, :3]} == corners


def test_standing_cylinder_touches_at_four_rim_points_and_lying_capsule_at_its_ends(slab):
    cylinder = cv.world_geom(np.zeros(cv.W_WIDTH), CYLINDER, (0.1, 0.1, 0.0),
                             (0.0, 0.0, 0.2 - DEPTH), np.eye(3))
    _, points = _manifold(cylinder, slab)
    assert len(points) == 4
    np.testing.assert_allclose(points[:, cl.M_DEPTH], DEPTH, atol=1e-12)
    np.testing.assert_allclose(np.hypot(points[:, 0], points[:, 1]), 0.1, atol=1e-12)
    lying = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])  # axis along y
    capsule = cv.world_geom(np.zeros(cv.W_WIDTH), CAPSULE, (0.05, 0.1, 0.0),
                            (0.0, 0.0, 0.15 - DEPTH), lying)
    _, points = _manifold(capsule, slab)
    assert len(points) == 2
    np.testing.assert_allclose(sorted(points[:, 1]), [-0.1, 0.1], atol=1e-9)
    np.testing.assert_allclose(points[:, cl.M_DEPTH], DEPTH, atol=1e-9)


def test_curved_and_tilted_contacts_keep_the_deepest_point(slab):
    ball = cv.world_geom(np.zeros(cv.W_WIDTH), SPHERE, (0.05, 0.0, 0.0),
                         (0.1, 0.0, 0.15 - DEPTH), np.eye(3))
    res, points = _manifold(ball, slab)
    assert len(points) == 1 and points[0, cl.M_DEPTH] == pytest.approx(DEPTH, abs=1e-10)
    # a cylinder tipped 10 degrees: its deepest rim point is a contact, at collide's depth
    c, s = np.cos(0.17), np.sin(0.17)
    tilt = np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]]) @ _turn_z(0.3)
    low = 0.1 * s + 0.1 * c  # the rim's lowest point below the centre
    cylinder = cv.world_geom(np.zeros(cv.W_WIDTH), CYLINDER, (0.1, 0.1, 0.0),
                             (0.0, 0.0, 0.1 + low - DEPTH), tilt)
    res, points = _manifold(cylinder, slab)
    assert points[:, cl.M_DEPTH].max() == pytest.approx(-res[cv.R_DIST], abs=1e-9)
    assert -res[cv.R_DIST] == pytest.approx(DEPTH, abs=1e-9)
