"""Model builder: bodies, attachments and force elements -> validated, frozen flat arrays.

A :class:`Model` is assembled in Python, where every argument is checked and a bad one is
refused with a ``ValueError`` that names it.  :meth:`Model.freeze` turns it into a
:class:`FrozenModel`: a handful of contiguous float64/int64 arrays (structure of arrays) that
the compiled step kernels read and never write.

Frames.  Each body frame sits at the centre of mass with its axes along the principal axes of
inertia; ``inertia`` is given as the three principal moments about the centre of mass.  A body
is either *free* (six degrees of freedom) or *pivoted*: one body point is held at a fixed world
point by a spherical joint (the top's tip).  The kernels treat a pivoted body as a pure
rotation about its *reference point* (the pivot), with the rotational inertia moved there by the
parallel-axis theorem; a free body's reference point is its centre of mass.  All body-fixed
points are stored relative to that reference point, so the kernels never branch on which it is.

Joints between bodies (:meth:`Model.add_joint`) and springs between two bodies make the model
a *multibody* model: :class:`rtrigid.Simulation` then steps it with the tree kernels of
:mod:`rtrigid.multibody` (generalized coordinates per joint) instead of the per-body kernels.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from rtrigid._jit import jit

FREE = 0
PIVOTED = 1

SHAPES = {
    "box": ("half_extents",),
    "sphere": ("radius",),
    "cylinder": ("radius", "half_length"),
    "cone": ("radius", "height"),
    "capsule": ("radius", "half_length"),
}


def as_vector(value, n, name):
    """Return ``value`` as a finite float64 vector of length ``n`` or raise ``ValueError``."""
    try:
        arr = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected {n} numbers, got {value!r}") from None
    if arr.shape != (n,):
        raise ValueError(f"{name}: expected shape ({n},), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: must be finite, got {arr.tolist()}")
    return arr


def as_scalar(value, name, *, positive=False, nonnegative=False):
    """Return ``value`` as a finite float or raise ``ValueError`` naming ``name``."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a number, got {value!r}") from None
    if not np.isfinite(x):
        raise ValueError(f"{name}: must be finite, got {x}")
    if positive and x <= 0.0:
        raise ValueError(f"{name}: must be > 0, got {x}")
    if nonnegative and x < 0.0:
        raise ValueError(f"{name}: must be >= 0, got {x}")
    return x


def _unit(value, name):
    v = as_vector(value, 3, name)
    n = float(np.linalg.norm(v))
    if n < 1e-12:
        raise ValueError(f"{name}: must be a non-zero vector, got {v.tolist()}")
    return v / n


def check_inertia(inertia, allow_nonphysical, name="inertia"):
    """Validate principal moments: positive and, unless opted out, the triangle inequality."""
    j = as_vector(inertia, 3, name)
    if np.any(j <= 0.0):
        raise ValueError(f"{name}: principal moments must be > 0, got {j.tolist()}")
    if not allow_nonphysical:
        for i in range(3):
            if j[i] > j[(i + 1) % 3] + j[(i + 2) % 3] * (1.0 + 1e-12):
                raise ValueError(
                    f"{name}: {j.tolist()} violates the triangle inequality "
                    f"I{i + 1} <= I{(i + 1) % 3 + 1} + I{(i + 2) % 3 + 1}, which every real body "
                    "satisfies; pass allow_nonphysical_inertia=True to use it anyway"
                )
    return j


@dataclass
class Shape:
    """Render shape of a body, in its body frame (centred on the centre of mass)."""

    kind: str
    params: dict
    offset: np.ndarray = field(default_factory=lambda: np.zeros(3))


@dataclass
class Body:
    name: str
    mass: float
    inertia: np.ndarray
    shape: Shape | None = None
    pivot_body: np.ndarray | None = None
    pivot_world: np.ndarray | None = None


@dataclass
class Spring:
    body: int
    point_body: np.ndarray
    anchor_world: np.ndarray
    stiffness: float
    rest_length: float
    other: int = -1  # a second body (anchor_world is then a point of that body, its frame)


JOINT_KINDS = ("spherical", "revolute", "prismatic", "cylindrical", "planar", "fixed")
AXIAL = ("revolute", "prismatic", "cylindrical", "planar")


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


class FrozenModel(NamedTuple):
    """Flat arrays read by the step kernels (shapes given for ``nb`` bodies, ``ns`` springs).

    kind:      (nb,)    int64    FREE or PIVOTED
    mass:      (nb,)    float64
    inertia:   (nb, 3)  float64  principal moments about the centre of mass
    jref:      (nb, 3, 3)        rotational inertia about the reference point, body frame
    jref_inv:  (nb, 3, 3)        its inverse
    com:       (nb, 3)           centre of mass relative to the reference point, body frame
    pivot:     (nb, 3)           world position of the reference point (pivoted bodies)
    gravity:   (3,)
    spring_body:  (ns,)   int64
    spring_point: (ns, 3)        attachment point relative to the reference point, body frame
    spring_anchor:(ns, 3)        world anchor
    spring_k:     (ns,)
    spring_rest:  (ns,)
    """

    kind: np.ndarray
    mass: np.ndarray
    inertia: np.ndarray
    jref: np.ndarray
    jref_inv: np.ndarray
    com: np.ndarray
    pivot: np.ndarray
    gravity: np.ndarray
    spring_body: np.ndarray
    spring_point: np.ndarray
    spring_anchor: np.ndarray
    spring_k: np.ndarray
    spring_rest: np.ndarray


# Column layout of the per-body float rows and per-spring rows the kernels read.
B_MASS = 0
B_INERTIA = 1  # 3 principal moments about the centre of mass
B_JREF = 4  # 3x3 rotational inertia about the reference point, row-major
B_JINV = 13  # its inverse, row-major
B_COM = 22  # centre of mass relative to the reference point, body frame
B_PIVOT = 25  # world position of the reference point of a pivoted body
B_WIDTH = 28
S_POINT = 0  # attachment point relative to the reference point, body frame
S_ANCHOR = 3  # world anchor
S_K = 6
S_REST = 7
S_WIDTH = 8


def flatten(fm: FrozenModel):
    """Pack a FrozenModel into one float64 and one int64 array for the kernels.

    Kernels unpack them with :func:`kernel_arrays` into five plain arrays rather than a
    namedtuple: numba pays ~0.35 us per call site that passes a 13-array namedtuple along
    (measured), and a step makes many such calls.
    """
    nb, ns = len(fm.mass), len(fm.spring_k)
    bodyf = np.zeros((nb, B_WIDTH))
    bodyf[:, B_MASS] = fm.mass
    bodyf[:, B_INERTIA:B_INERTIA + 3] = fm.inertia
    bodyf[:, B_JREF:B_JREF + 9] = fm.jref.reshape(nb, 9)
    bodyf[:, B_JINV:B_JINV + 9] = fm.jref_inv.reshape(nb, 9)
    bodyf[:, B_COM:B_COM + 3] = fm.com
    bodyf[:, B_PIVOT:B_PIVOT + 3] = fm.pivot
    springf = np.zeros((ns, S_WIDTH))
    springf[:, S_POINT:S_POINT + 3] = fm.spring_point
    springf[:, S_ANCHOR:S_ANCHOR + 3] = fm.spring_anchor
    springf[:, S_K] = fm.spring_k
    springf[:, S_REST] = fm.spring_rest
    floats = np.concatenate([fm.gravity, bodyf.ravel(), springf.ravel()])
    ints = np.concatenate([[nb, ns], fm.kind, fm.spring_body]).astype(np.int64)
    return floats, ints


@jit
def kernel_arrays(mf, mi):
    """Inverse of :func:`flatten`: (gravity, bodyf, bodyi, springf, springi) views.

    gravity (3,); bodyf (nb, B_WIDTH); bodyi (nb,) kinds; springf (ns, S_WIDTH);
    springi (ns,) the body each spring pulls.
    """
    nb = mi[0]
    ns = mi[1]
    gravity = mf[0:3]
    bodyf = mf[3:3 + B_WIDTH * nb].reshape((nb, B_WIDTH))
    o = 3 + B_WIDTH * nb
    springf = mf[o:o + S_WIDTH * ns].reshape((ns, S_WIDTH))
    return gravity, bodyf, mi[2:2 + nb], springf, mi[2 + nb:2 + nb + ns]


class Model:
    """Builder for a set of rigid bodies, their world attachments and force elements.

    >>> m = Model(gravity=(0, 0, -9.81))
    >>> top = m.add_body("top", mass=0.5, inertia=(1e-3, 1e-3, 4e-4))
    >>> m.attach_to_world(top, point_body=(0, 0, -0.075))
    """

    def __init__(self, gravity=(0.0, 0.0, -9.81)):
        self.gravity = as_vector(gravity, 3, "gravity")
        self.bodies: list[Body] = []
        self.springs: list[Spring] = []
        self.joints: list[Joint] = []

    # -- bodies -------------------------------------------------------------------------
    def add_body(self, name, mass, inertia, *, shape=None, allow_nonphysical_inertia=False):
        """Add a rigid body and return its index.

        ``inertia``: principal moments (I1, I2, I3) about the centre of mass, body axes.
        ``shape``: optional render shape, ``(kind, params)`` or a :class:`Shape`, with kind one
        of box (half_extents), sphere (radius), cylinder/capsule (radius, half_length),
        cone (radius, height; apex at -3 height/4 on the z axis, base centre at +height/4, as the
        gyro top stands on its apex).
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"name: expected a non-empty string, got {name!r}")
        if any(b.name == name for b in self.bodies):
            raise ValueError(f"name: a body called {name!r} already exists")
        mass = as_scalar(mass, "mass", positive=True)
        inertia = check_inertia(inertia, allow_nonphysical_inertia)
        self.bodies.append(Body(name, mass, inertia, self._check_shape(shape)))
        return len(self.bodies) - 1

    @staticmethod
    def _check_shape(shape):
        if shape is None or isinstance(shape, Shape):
            return shape
        try:
            kind, params = shape
        except (TypeError, ValueError):
            raise ValueError(f"shape: expected (kind, params), got {shape!r}") from None
        if kind not in SHAPES:
            raise ValueError(f"shape: unknown kind {kind!r}; known: {sorted(SHAPES)}")
        clean = {}
        for key in SHAPES[kind]:
            if key not in params:
                raise ValueError(f"shape: {kind} needs {key!r}")
            if key == "half_extents":
                clean[key] = as_vector(params[key], 3, f"shape.{key}")
                if np.any(clean[key] <= 0.0):
                    raise ValueError(f"shape.{key}: must be > 0, got {clean[key].tolist()}")
            else:
                clean[key] = as_scalar(params[key], f"shape.{key}", positive=True)
        offset = as_vector(params.get("offset", (0.0, 0.0, 0.0)), 3, "shape.offset")
        return Shape(kind, clean, offset)

    def body_index(self, body):
        """Resolve a body index or name; ``ValueError`` naming ``body`` if there is none."""
        if isinstance(body, (int, np.integer)) and not isinstance(body, bool):
            if 0 <= body < len(self.bodies):
                return int(body)
            raise ValueError(f"body: index {body} out of range (model has {len(self.bodies)})")
        if isinstance(body, str):
            for i, b in enumerate(self.bodies):
                if b.name == body:
                    return i
            raise ValueError(f"body: no body named {body!r}; known: {[b.name for b in self.bodies]}")
        raise ValueError(f"body: expected an index or a name, got {body!r}")

    # -- attachments and force elements ------------------------------------------------
    def attach_to_world(self, body, point_body, point_world=(0.0, 0.0, 0.0)):
        """Hold body point ``point_body`` (body frame, from the centre of mass) at ``point_world``.

        This is a spherical joint to the world: the body keeps three rotational freedoms.
        """
        i = self.body_index(body)
        b = self.bodies[i]
        if b.pivot_body is not None or any(j.child == i for j in self.joints):
            raise ValueError(f"body: {b.name!r} is already attached to the world or jointed")
        b.pivot_body = as_vector(point_body, 3, "point_body")
        b.pivot_world = as_vector(point_world, 3, "point_world")

    def add_spring(self, body, point_body, anchor_world, stiffness, rest_length=0.0):
        """Linear spring from a body point to a world anchor; ``rest_length=0`` is a bushing.

        Potential ½ k (|d| - L0)², d the vector from anchor to the body point.
        """
        i = self.body_index(body)
        self.springs.append(
            Spring(
                i,
                as_vector(point_body, 3, "point_body"),
                as_vector(anchor_world, 3, "anchor_world"),
                as_scalar(stiffness, "stiffness", positive=True),
                as_scalar(rest_length, "rest_length", nonnegative=True),
            )
        )
        return len(self.springs) - 1

    def add_spring_between(self, body_a, point_a, body_b, point_b, stiffness, rest_length=0.0):
        """Linear spring between a point of ``body_a`` and a point of ``body_b`` (body frames).

        Potential ½ k (|d| - L0)², d from one point to the other; ``rest_length=0`` is a
        bushing.  A model with such a spring is stepped as a multibody system.
        """
        a = self.body_index(body_a)
        b = self.body_index(body_b)
        if a == b:
            raise ValueError("body_b: a spring needs two different bodies")
        self.springs.append(
            Spring(
                a,
                as_vector(point_a, 3, "point_a"),
                as_vector(point_b, 3, "point_b"),
                as_scalar(stiffness, "stiffness", positive=True),
                as_scalar(rest_length, "rest_length", nonnegative=True),
                other=b,
            )
        )
        return len(self.springs) - 1

    def add_joint(self, kind, parent, child, *, anchor_parent=(0.0, 0.0, 0.0),
                  anchor_child=(0.0, 0.0, 0.0), axis_parent=None, axis_child=None,
                  stiffness=0.0, rest=0.0, damping=0.0, name=None):
        """Join ``child`` to ``parent`` (a body, or ``None`` / ``"world"``) by a lower pair.

        ``kind``: spherical, revolute, prismatic, cylindrical, planar or fixed.
        ``anchor_parent`` / ``anchor_child``: the joint point in each body's frame (from its
        centre of mass; world coordinates for the world).  ``axis_parent`` / ``axis_child``:
        the joint axis in each frame (the plane normal for planar joints); give one and the
        other is taken equal.  At zero joint coordinates the child is turned so that its axis
        lies along the parent's by the smallest rotation (no rotation for spherical and fixed
        joints).  ``stiffness``, ``rest``, ``damping``: a joint spring -k (c - rest) and damper
        -d c' on a revolute or prismatic joint's coordinate c.  Each body has at most one
        parent joint (tree topologies; closed loops are refused).
        """
        if kind not in JOINT_KINDS:
            raise ValueError(f"kind: unknown joint kind {kind!r}; known: {list(JOINT_KINDS)}")
        p = -1 if parent is None or (isinstance(parent, str) and parent == "world") \
            else self.body_index(parent)
        try:
            c = self.body_index(child)
        except ValueError as e:
            raise ValueError(str(e).replace("body:", "child:", 1)) from None
        if p == c:
            raise ValueError("child: a body cannot be jointed to itself")
        if any(j.child == c for j in self.joints) or self.bodies[c].pivot_body is not None:
            raise ValueError(f"child: {self.bodies[c].name!r} already has a parent joint; closed "
                             "loops are not supported yet (give each body one parent)")
        # walking up from the parent must not reach the child (that would close a loop)
        a = p
        while a >= 0:
            if a == c:
                raise ValueError("parent: this joint would close a loop; only trees are supported")
            a = next((j.parent for j in self.joints if j.child == a), -1)
        ap = as_vector(anchor_parent, 3, "anchor_parent")
        ac = as_vector(anchor_child, 3, "anchor_child")
        up = uc = np.array([0.0, 0.0, 1.0])
        if kind in AXIAL:
            if axis_parent is None and axis_child is None:
                raise ValueError(f"axis_parent: a {kind} joint needs an axis")
            up = _unit(axis_parent if axis_parent is not None else axis_child, "axis_parent")
            uc = _unit(axis_child if axis_child is not None else axis_parent, "axis_child")
        elif axis_parent is not None or axis_child is not None:
            raise ValueError(f"axis_parent: a {kind} joint takes no axis")
        k = as_scalar(stiffness, "stiffness", nonnegative=True)
        d = as_scalar(damping, "damping", nonnegative=True)
        rest = as_scalar(rest, "rest")
        if (k or d or rest) and kind not in ("revolute", "prismatic"):
            raise ValueError(f"stiffness: only revolute and prismatic joints take a spring or "
                             f"damper, not {kind}")
        if name is None:
            name = f"{kind}_{self.bodies[c].name}"
        if not isinstance(name, str) or any(j.name == name for j in self.joints):
            raise ValueError(f"name: joint name {name!r} is not a new string")
        self.joints.append(Joint(name, kind, p, c, ap, ac, up, uc, k, rest, d))
        return len(self.joints) - 1

    def is_multibody(self) -> bool:
        """True when the model has joints between bodies or springs between bodies."""
        return bool(self.joints) or any(s.other >= 0 for s in self.springs)

    # -- freezing -----------------------------------------------------------------------
    def freeze(self) -> FrozenModel:
        """Validate the whole model and return its flat-array form."""
        nb = len(self.bodies)
        if nb == 0:
            raise ValueError("bodies: the model has no bodies")
        if self.is_multibody():
            raise ValueError("joints: a jointed model is frozen by rtrigid.multibody.build_tree")
        kind = np.zeros(nb, np.int64)
        mass = np.zeros(nb)
        inertia = np.zeros((nb, 3))
        jref = np.zeros((nb, 3, 3))
        jref_inv = np.zeros((nb, 3, 3))
        com = np.zeros((nb, 3))
        pivot = np.zeros((nb, 3))
        for i, b in enumerate(self.bodies):
            mass[i] = b.mass
            inertia[i] = b.inertia
            j = np.diag(b.inertia)
            if b.pivot_body is not None:
                kind[i] = PIVOTED
                s = -b.pivot_body
                com[i] = s
                pivot[i] = b.pivot_world
                j = j + b.mass * (np.dot(s, s) * np.eye(3) - np.outer(s, s))
            jref[i] = j
            jref_inv[i] = np.linalg.inv(j)
        ns = len(self.springs)
        spring_body = np.array([s.body for s in self.springs], np.int64).reshape(ns)
        spring_point = np.zeros((ns, 3))
        for k, s in enumerate(self.springs):
            spring_point[k] = s.point_body + com[s.body]
        return FrozenModel(
            kind=kind,
            mass=mass,
            inertia=inertia,
            jref=jref,
            jref_inv=jref_inv,
            com=com,
            pivot=pivot,
            gravity=self.gravity.copy(),
            spring_body=spring_body,
            spring_point=spring_point,
            spring_anchor=np.array([s.anchor_world for s in self.springs]).reshape(ns, 3),
            spring_k=np.array([s.stiffness for s in self.springs]).reshape(ns),
            spring_rest=np.array([s.rest_length for s in self.springs]).reshape(ns),
        )
