"""The shape kinds' table (rtrigid.contact.shapes) agrees with the codes of contact.geometry,
the parameter names of the model, the dispatch of the kernels (ground contacts, pair tests)
and the viewer's meshes."""
import numpy as np
import pytest

import rtrigid as rt
from rtrigid.contact import Contacts, geometry, pairs
from rtrigid.contact.geometry import (
    C_WIDTH,
    G_E,
    G_KIND,
    G_MU,
    G_P,
    G_QUAT,
    G_RADIUS,
    G_WIDTH,
    GI_HANDLE,
    GI_WIDTH,
    MAX_POINTS,
    P_WIDTH,
    SHAPE_CODES,
)
from rtrigid.contact.shapes import BOXES, BY_CODE, ROUND_ON_BOX, SEGMENTS, SHAPES
from rtrigid.model import SHAPES as PARAMETERS

EXAMPLES = {
    "sphere": {"radius": 0.1},
    "capsule": {"radius": 0.05, "half_length": 0.2},
    "box": {"half_extents": np.array([0.1, 0.2, 0.3])},
    "cylinder": {"radius": 0.1, "half_length": 0.2},
    "cone": {"radius": 0.1, "height": 0.4},
}
IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])


def _values(kind):
    return np.concatenate([np.atleast_1d(EXAMPLES[kind][k]) for k in SHAPES[kind].params])


def _geom_row(kind):
    row = np.zeros(G_WIDTH)
    values = _values(kind)
    row[G_KIND] = SHAPES[kind].code
    row[G_P:G_P + len(values)] = values
    row[G_MU], row[G_E] = 0.5, 0.0
    row[G_RADIUS] = SHAPES[kind].bounding_radius(values)
    row[G_QUAT] = 1.0
    return row


def test_the_table_holds_every_code_of_geometry_and_the_model_parameter_names():
    assert set(SHAPES) == set(SHAPE_CODES) == set(EXAMPLES)
    for name, kind in SHAPES.items():
        assert kind.name == name
        assert kind.code == SHAPE_CODES[name] == getattr(geometry, name.upper())
        assert kind.params == PARAMETERS[name]
        assert len(_values(name)) == sum(kind.sizes)
        assert BY_CODE[kind.code] is kind
        assert 1 <= kind.ground_points <= MAX_POINTS
        assert kind.support is None
    assert len(BY_CODE) == len(SHAPES)


def test_pair_tests_are_symmetric_and_named():
    for name, kind in SHAPES.items():
        for other, test in kind.pairs.items():
            assert test in (SEGMENTS, ROUND_ON_BOX, BOXES)
            assert SHAPES[other].pairs[name] == test


@pytest.mark.parametrize("a", sorted(SHAPES))
@pytest.mark.parametrize("b", sorted(SHAPES))
def test_pair_contacts_meets_exactly_the_pairs_of_the_table(a, b):
    """Two overlapping shapes: the kernel finds contacts exactly when the table names a test
    for the pair (one contact for the segments test)."""
    geom = np.array([_geom_row(a), _geom_row(b)])
    table = np.zeros((32, C_WIDTH))
    k = pairs.pair_contacts(table, 0, table.shape[0], 0, 1, 0, 1, geom,
                            geometry.Pose(np.zeros(3), IDENTITY),
                            geometry.Pose(np.array([0.01, 0.02, 0.03]), IDENTITY))
    test = SHAPES[a].pairs.get(b)
    assert (k > 0) == (test is not None), (a, b, k)
    if test == SEGMENTS:
        assert k == 1


@pytest.mark.parametrize("kind", sorted(SHAPES))
def test_a_buried_shape_makes_its_ground_points(kind):
    """Deep below a ground every candidate point of geometry.ground_contacts counts: as many
    as the table says."""
    geom = np.array([_geom_row(kind)])
    plane = np.zeros(P_WIDTH)
    plane[2], plane[3] = 1.0, 10.0  # normal z, height 10 m above the shape
    table = np.zeros((MAX_POINTS, C_WIDTH))
    k = geometry.ground_contacts(table, 0, 0, 0, geom, np.zeros((1, GI_WIDTH), np.int64),
                                 np.zeros((0, 3)), geometry.Pose(np.zeros(3), IDENTITY), 0,
                                 plane, (0.0, 0.0, 0.0), 0.0)
    assert k == SHAPES[kind].ground_points


@pytest.mark.parametrize("kind", sorted(SHAPES))
def test_the_viewer_draws_each_kind_within_its_bounds(kind):
    """The viewer's mesh spans the table's z extent and reaches its bounding radius."""
    from viewer.meshes import shape_mesh
    from viewer.picking import ANALYTIC
    assert set(SHAPES) == set(ANALYTIC)
    verts, _ = shape_mesh(kind, EXAMPLES[kind])
    p = verts[:, :3].astype(float)
    lo, hi = SHAPES[kind].z_span(EXAMPLES[kind])
    assert p[:, 2].min() == pytest.approx(lo, rel=1e-6)
    assert p[:, 2].max() == pytest.approx(hi, rel=1e-6)
    radius = SHAPES[kind].bounding_radius(_values(kind))
    assert np.linalg.norm(p, axis=1).max() == pytest.approx(radius, rel=1e-5)


def test_contacts_take_the_bounding_radius_of_the_table():
    m = rt.Model()
    m.add_ground()
    for kind, params in EXAMPLES.items():
        m.add_body(kind, 1.0, (0.01, 0.01, 0.01), shape=(kind, params))
    contacts = Contacts(m)
    row = {h: r for r, h in enumerate(contacts.geomi[:, GI_HANDLE])}
    for b, kind in enumerate(EXAMPLES):
        geom = contacts.geom[row[b]]
        assert geom[G_KIND] == SHAPES[kind].code
        assert geom[G_RADIUS] == SHAPES[kind].bounding_radius(_values(kind))
