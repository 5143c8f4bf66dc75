"""The collision-shape kinds in one table: per kind, what the contact code and the viewer know
about it.

Today that knowledge is spread out: the codes and the layout of a body's geometry row are in
:mod:`.geometry`, the parameter names in :data:`rtrigid.model.SHAPES`, the narrow phase
between two bodies is an if-chain in :func:`.pairs.pair_contacts`, the ground contacts one in
:func:`.geometry.ground_contacts`, and the viewer draws and picks each kind by name.
:data:`SHAPES` gathers it per kind.  It is built from the existing constants (the codes of
:data:`.geometry.SHAPE_CODES`, the parameter names of :data:`rtrigid.model.SHAPES`), so it
cannot disagree with them; what the kernels only say in code (which pairs have a test, how
many points a shape puts on a ground, where the viewer's mesh ends) is written here and
checked against the kernels and the viewer by ``tests/contact/test_shapes.py``.

The kernels do not read this table: they branch on the codes.  A new kind (a convex hull, a
mesh) gets its row here, its code in :mod:`.geometry`, and its tests in the kernels.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable, Mapping, Optional

import numpy as np

from rtrigid.contact.geometry import G_OFFSET, G_P, SHAPE_CODES
from rtrigid.model import SHAPES as PARAMETERS

# the narrow-phase tests of pairs.pair_contacts, by the name this table gives them
SEGMENTS = "segments"            # spheres and capsules: closest points of their segments
ROUND_ON_BOX = "round_on_box"    # a sphere on a box
BOXES = "boxes"                  # box on box: separating axes, face corners or an edge pair


@dataclass(frozen=True)
class ShapeKind:
    """One collision-shape kind.

    ``params``: its parameter names, in the order their values fill the ``G_P`` columns of a
    body's geometry row, ``sizes`` how many numbers each takes.  ``bounding_radius``: of those
    values, the radius of a sphere about the shape centre that holds the shape (``G_RADIUS``:
    the broad phase and the speculative margin use it).  ``ground_points``: the most contacts
    the shape makes with one ground.  ``pairs``: for each kind it has a narrow-phase test
    with, the test's name (one of ``SEGMENTS``, ``ROUND_ON_BOX``, ``BOXES``).  ``support``: the
    name of its support mapping, for a general convex test (none yet: every test is
    specialised).  ``z_span``: of the parameters (a dict, as :meth:`rtrigid.Model.add_body`
    takes them), the shape's extent along its axis (body z) about the shape centre, where the
    contact code puts it and the viewer draws it.
    """
    name: str
    code: int
    params: tuple
    sizes: tuple
    bounding_radius: Callable[[np.ndarray], float]
    ground_points: int
    pairs: Mapping[str, str]
    z_span: Callable[[dict], tuple]
    support: Optional[str] = field(default=None)


def _sphere_radius(p):
    return p[0]


def _capsule_radius(p):
    return p[0] + p[1]


def _box_radius(p):
    return float(np.linalg.norm(p[:3]))


def _cylinder_radius(p):
    return float(np.hypot(p[0], p[1]))


def _cone_radius(p):
    return max(0.75 * p[1], float(np.hypot(p[0], 0.25 * p[1])))  # apex, rim


# what the code says per kind beyond its code and parameter names: sizes, bounding radius,
# ground points, pair tests, extent along the axis
_FACTS = {
    "sphere": ((1,), _sphere_radius, 1,
               {"sphere": SEGMENTS, "capsule": SEGMENTS, "box": ROUND_ON_BOX},
               lambda s: (-s["radius"], s["radius"])),
    "capsule": ((1, 1), _capsule_radius, 2,
                {"sphere": SEGMENTS, "capsule": SEGMENTS},
                lambda s: (-s["half_length"] - s["radius"], s["half_length"] + s["radius"])),
    "box": ((3,), _box_radius, 8,
            {"sphere": ROUND_ON_BOX, "box": BOXES},
            lambda s: (-s["half_extents"][2], s["half_extents"][2])),
    "cylinder": ((1, 1), _cylinder_radius, 8, {},
                 lambda s: (-s["half_length"], s["half_length"])),
    "cone": ((1, 1), _cone_radius, 5, {},
             lambda s: (-0.75 * s["height"], 0.25 * s["height"])),
}


def _build():
    assert set(_FACTS) == set(SHAPE_CODES), "every kind of geometry.SHAPE_CODES has its row"
    table = {}
    for name, code in sorted(SHAPE_CODES.items(), key=lambda item: item[1]):
        sizes, radius, ground_points, pairs, z_span = _FACTS[name]
        params = PARAMETERS[name]
        assert len(sizes) == len(params) and sum(sizes) <= G_OFFSET - G_P, name
        table[name] = ShapeKind(name, code, params, sizes, radius, ground_points,
                                MappingProxyType(dict(pairs)), z_span)
    return MappingProxyType(table)


SHAPES = _build()
BY_CODE = MappingProxyType({kind.code: kind for kind in SHAPES.values()})


def bounding_radius(kind, values):
    """Radius of a sphere about the shape centre that holds a shape of ``kind`` (its name)
    with G_P ``values``."""
    return SHAPES[kind].bounding_radius(values)
