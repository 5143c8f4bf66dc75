"""The records a :class:`~rtrigid.model.Model` holds -- bodies and their shapes, grounds,
springs, joints, actuators -- and the checks of their arguments that the model and the loaders
share.  (Importable from :mod:`rtrigid.model` too.)"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import numpy as np

from rtrigid.validate import as_scalar, as_vector


SHAPES = {
    "box": ("half_extents",),
    "sphere": ("radius",),
    "cylinder": ("radius", "half_length"),
    "cone": ("radius", "height"),
    "capsule": ("radius", "half_length"),
    "torus": ("radius", "tube_radius"),
    "visuals": ("parts",),
}
# the parts of a "visuals" shape (what robot files draw; see rtrigid.loaders): each a dict with
# "type", "pos" and "quat" (the part's frame in the body frame), "color" (rgba or None) and
# per type: box "half_extents", sphere "radius", cylinder/capsule "radius" and
# "half_length" (axis z), mesh "file", "scale" and "missing" (the file was not found)
PART_TYPES = {
    "box": ("half_extents",),
    "sphere": ("radius",),
    "cylinder": ("radius", "half_length"),
    "capsule": ("radius", "half_length"),
    "mesh": ("file", "scale"),
}


def broken_triangle(j):
    """The first principal moment of ``j`` that exceeds the sum of the other two (beyond
    round-off), as an index, or None: no real body has one."""
    for i in range(3):
        if j[i] > j[(i + 1) % 3] + j[(i + 2) % 3] * (1.0 + 1e-12):
            return i
    return None


def check_inertia(inertia, allow_nonphysical, name="inertia"):
    """Validate principal moments: positive and, unless opted out, the triangle inequality."""
    j = as_vector(inertia, 3, name)
    if np.any(j <= 0.0):
        raise ValueError(f"{name}: principal moments must be > 0, got {j.tolist()}")
    if not allow_nonphysical:
        i = broken_triangle(j)
        if i is not None:
            raise ValueError(
                f"{name}: {j.tolist()} violates the triangle inequality "
                f"I{i + 1} <= I{(i + 1) % 3 + 1} + I{(i + 2) % 3 + 1}, which every real body "
                "satisfies; pass allow_nonphysical_inertia=True to use it anyway"
            )
    return j


@dataclass
class Shape:
    """Render shape of a body, in its body frame (centred on the centre of mass).

    ``offset``: where the shape's own centre sits; ``axis``: where the shape's own z axis
    points (a cylinder's, cone's, capsule's or torus's axis); ``color``: optional RGB in [0, 1]
    (a marking, a material); None leaves the colour to the viewer.
    """

    kind: str
    params: dict
    offset: np.ndarray = field(default_factory=lambda: np.zeros(3))
    axis: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, 1.0]))
    color: tuple | None = None


@dataclass
class Body:
    """A body; ``free_joint`` names its free joint (if it has one; default ``free_<name>``)
    and ``pose0`` is its starting (x, q) as a free body (default: the origin, unturned)."""

    name: str
    mass: float
    inertia: np.ndarray
    shape: Shape | tuple | None = None  # a Shape or a tuple of Shapes (the parts)
    pivot_body: np.ndarray | None = None
    pivot_world: np.ndarray | None = None
    free_joint: str | None = None
    pose0: tuple | None = None
    friction: float = 0.5
    restitution: float = 0.0
    collide: bool = True
    torsional_friction: float = 0.0
    rolling_friction: float = 0.0
    kinematic: bool = False


@dataclass
class Ground:
    """A half-space {p : normal . p <= height}: the ground bodies rest on (see
    :meth:`Model.add_ground`)."""

    height: float
    normal: np.ndarray
    friction: float
    restitution: float
    torsional_friction: float = 0.0
    rolling_friction: float = 0.0


@dataclass
class Spring:
    body: int
    point_body: np.ndarray
    anchor_world: np.ndarray
    stiffness: float
    rest_length: float
    other: int = -1  # a second body (anchor_world is then a point of that body, its frame)


@dataclass
class Joint:
    """A lower pair between ``parent`` (-1: the world) and ``child``; see :meth:`Model.add_joint`."""

    name: str
    kind: str
    parent: int
    child: int
    anchor_parent: np.ndarray
    anchor_child: np.ndarray
    axis_parent: np.ndarray
    axis_child: np.ndarray
    stiffness: float = 0.0
    rest: float = 0.0
    damping: float = 0.0
    rotation: np.ndarray | None = None  # child axes in parent axes at zero; None: the default
    limits: tuple = (-np.inf, np.inf)  # (lower, upper) of the coordinate; +-inf: none
    limit_restitution: float = 0.0
    position: np.ndarray | None = None  # initial coordinates (None: zero, or the nearer limit)
    armature: float = 0.0  # rotor inertia on a revolute or prismatic coordinate
    friction: float = 0.0  # Coulomb friction: its torque (force) bound on that coordinate


LIMITED_KINDS = ("revolute", "prismatic")


@dataclass
class Coupling:
    """A joint coupling q_joint = offset + ratio * q_source; see :meth:`Model.add_coupling`."""

    name: str
    joint: str  # the follower's name
    source: str
    ratio: float = 1.0
    offset: float = 0.0


def make_coupling(follower, source, ratio, offset, name, couplings):
    """The checked :class:`Coupling` of :meth:`Model.add_coupling` (joints as records)."""
    for field_name, j in (("joint", follower), ("source", source)):
        if j.kind not in LIMITED_KINDS:
            raise ValueError(
                f"{field_name}: only {' and '.join(LIMITED_KINDS)} joints are coupled, "
                f"{j.name!r} is {j.kind}"
            )
    if follower is source:
        raise ValueError(f"source: joint {source.name!r} cannot follow itself")
    if any(c.joint == follower.name for c in couplings):
        raise ValueError(f"joint: {follower.name!r} already follows a coupling")
    ratio, offset = as_scalar(ratio, "ratio"), as_scalar(offset, "offset")
    return Coupling(
        f"coupling_{follower.name}" if name is None else name,
        follower.name,
        source.name,
        ratio,
        offset,
    )


def check_limits(kind, limits, restitution):
    """((lower, upper), restitution) of :meth:`Model.add_joint`, checked."""
    bounce = as_scalar(restitution, "limit_restitution", nonnegative=True)
    if bounce > 1.0:
        raise ValueError(f"limit_restitution: must be in [0, 1], got {bounce}")
    if limits is None:
        if bounce:
            raise ValueError("limit_restitution: the joint has no limits")
        return (-np.inf, np.inf), 0.0
    if kind not in LIMITED_KINDS:
        raise ValueError(
            f"limits: only {' and '.join(LIMITED_KINDS)} joints take limits, not {kind}"
        )
    try:
        lo, hi = limits
    except (TypeError, ValueError):
        raise ValueError(f"limits: expected (lower, upper), got {limits!r}") from None
    out = []
    for value, side in ((lo, "lower"), (hi, "upper")):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise ValueError(f"limits: the {side} limit must be a number, got {value!r}")
        value = float(value)
        if np.isnan(value):
            raise ValueError(f"limits: the {side} limit is NaN")
        out.append(value)
    lo, hi = out
    if not lo < hi or lo == np.inf or hi == -np.inf:
        raise ValueError(f"limits: need lower < upper (finite or -inf / +inf), got {(lo, hi)}")
    return (lo, hi), bounce


@dataclass
class Actuator:
    """A force on one revolute or prismatic joint's coordinate; see :meth:`Model.add_actuator`."""

    name: str
    joint: int
    kind: str
    gear: float
    kp: float
    kv: float
    force_range: tuple
    ctrl_range: tuple


ACTUATOR_KINDS = ("motor", "position", "velocity")
