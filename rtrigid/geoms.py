"""Geoms: the convex pieces a body, or the world, collides with (:meth:`rtrigid.Model.add_geom`).

A geom has a kind and its parameters, a pose in its body's frame (``pos`` from the centre of
mass, ``quat`` turning the geom's axes into the body's), its contact coefficients and
MuJoCo's filter bits.  Kinds, in the geom's own frame (axis z):

- ``sphere`` (radius), ``capsule`` (radius, half_length), ``box`` (half_extents),
  ``cylinder`` (radius, half_length), ``cone`` (radius, height; apex at -3 height / 4, base
  centre at +height / 4, its centre of mass at the origin), ``ellipsoid`` (radii);
- ``convex`` (vertices (N, 3)): the convex hull of the points, computed here by qhull
  (scipy); the record keeps the hull's vertices, its outward triangles and its face planes;
- ``mesh`` (file, scale): an OBJ / STL / ... file read by trimesh, one convex hull per object
  in the file (a mesh decomposed in advance, as pybullet's ``duck_vhacd.obj``, five objects);
  each object becomes one geom of kind ``mesh``;
- ``heightfield`` (heights (ny, nx), size (sx, sy)): terrain on the world only, heights[i, j]
  at x = pos_x + sx (2 j / (nx - 1) - 1), y = pos_y + sy (2 i / (ny - 1) - 1).

Everything is checked before anything is added: a bad parameter is a ``ValueError`` naming
it, a mesh file that is missing, unreadable, empty, non-finite, flat or too large names the
file and the geom.  The records are read-only (:class:`Geom`).
"""

from __future__ import annotations

import numbers
import os
from dataclasses import dataclass
from typing import Mapping, NamedTuple

import numpy as np

from rtrigid.validate import as_scalar, as_vector, check_contact, check_spin_friction
from rtrigid.maths.quat import spurrier_klumpp

GEOM_PARAMS = {
    "sphere": ("radius",),
    "capsule": ("radius", "half_length"),
    "box": ("half_extents",),
    "cylinder": ("radius", "half_length"),
    "cone": ("radius", "height"),
    "ellipsoid": ("radii",),
    "convex": ("vertices",),
    "mesh": ("file", "scale"),
    "heightfield": ("heights", "size"),
}
OPTIONAL = {"mesh": {"scale": 1.0}}
MAX_FILE_BYTES = 64 << 20  # a collision mesh larger than this is refused
MAX_FILE_VERTICES = 1 << 20
MAX_HULL_VERTICES = 4096  # a hull with more vertices is refused (simplify the mesh)
MAX_BITS = (1 << 31) - 1


class Params(Mapping):
    """A geom's parameters: a read-only mapping (its arrays read-only too)."""

    def __init__(self, values):
        self._values = dict(values)

    def __getitem__(self, key):
        return self._values[key]

    def __iter__(self):
        return iter(self._values)

    def __len__(self):
        return len(self._values)

    def __repr__(self):
        return f"Params({self._values!r})"


@dataclass(frozen=True)
class Geom:
    """One geom of a model (read-only; see :meth:`rtrigid.Model.add_geom`).

    ``body``: its body's index, None for the world.  ``kind`` and ``params`` (a read-only
    mapping; arrays read-only).  ``pos`` (3,), ``quat`` (4,, unit, scalar first): its frame
    in the body frame.  ``friction``, ``restitution``, ``torsional_friction``,
    ``rolling_friction``, ``contype``, ``conaffinity``.  For hulls (``convex``, ``mesh``):
    ``vertices`` (n, 3) in the geom frame, ``faces`` (m, 3) outward triangles, ``planes``
    (k, 4) outward unit normal and offset (n . p <= offset inside).  ``source``: "add_geom",
    or "shape" for the one :meth:`rtrigid.Model.add_body` made of its ``shape``.
    """

    body: int | None
    kind: str
    params: Mapping
    pos: np.ndarray
    quat: np.ndarray
    friction: float
    restitution: float
    torsional_friction: float
    rolling_friction: float
    contype: int
    conaffinity: int
    vertices: np.ndarray | None = None
    faces: np.ndarray | None = None
    planes: np.ndarray | None = None
    source: str = "add_geom"


def _frozen(a):
    """A read-only copy of ``a``."""
    a = np.array(a)
    a.flags.writeable = False
    return a


def _bits(value, name):
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, numbers.Integral)
        or not 0 <= value <= MAX_BITS
    ):
        raise ValueError(f"{name}: expected an integer bit mask in [0, 2^31), got {value!r}")
    return int(value)


def unit_quat(quat, name="quat"):
    """A unit quaternion (scalar first) from ``quat``, ``ValueError`` naming ``name``."""
    value = as_vector(quat, 4, name)
    norm = float(np.linalg.norm(value))
    if not norm > 1e-12:
        raise ValueError(f"{name}: expected a non-zero quaternion, got {value.tolist()}")
    return value if norm == 1.0 else value / norm


def quat_along(axis):
    """The quaternion turning z onto the unit vector ``axis`` as the viewer draws a shape's
    axis (:func:`viewer.meshes.frame_along`): exactly (1, 0, 0, 0) for +z."""
    z = np.asarray(axis, float)
    if np.array_equal(z, (0.0, 0.0, 1.0)):
        return np.array([1.0, 0.0, 0.0, 0.0])
    z = z / np.linalg.norm(z)
    helper = np.array([0.0, 1.0, 0.0]) if abs(z[1]) < 0.9 else np.array([1.0, 0.0, 0.0])
    x = np.cross(helper, z)
    x /= np.linalg.norm(x)
    return matrix_quat(np.column_stack([x, np.cross(z, x), z]))


def matrix_quat(r):
    """The unit quaternion (scalar first, w >= 0) of the rotation matrix r."""
    q = spurrier_klumpp.py_func(np.ascontiguousarray(r, dtype=float), np.empty(4))
    return -q if q[0] < 0 else q


def optional(module, what):
    """Import ``module`` (scipy, trimesh), or an ``ImportError`` saying which extra installs
    it: the core install is numpy and numba only."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(
            f"{what} need {module.split('.')[0]}: pip install 'rtrigid[geometry]'"
        ) from None


def quat_matrix(q):
    """The rotation matrix of the unit quaternion q (scalar first)."""
    w, x, y, z = q
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def hull(points, what):
    """(vertices, faces, planes) of the convex hull of ``points`` (n, 3) by qhull: the hull's
    vertices, its triangles (outward, indices into vertices) and its distinct face planes
    (outward unit normal, offset).  ``ValueError`` starting with ``what`` for too few
    points, a flat hull or too many vertices."""
    spatial = optional("scipy.spatial", "convex and mesh geoms (their hulls, by qhull)")
    ConvexHull, QhullError = spatial.ConvexHull, spatial.QhullError
    points = np.asarray(points, float)
    extent = float(np.ptp(points, axis=0).max()) if len(points) else 0.0
    if len(points) < 4 or not extent > 0.0:
        raise ValueError(f"{what}: needs at least 4 points spanning a volume, got {len(points)}")
    try:
        h = ConvexHull(points)
    except QhullError:
        raise ValueError(f"{what}: the points are flat (they span no volume)") from None
    if not h.volume > 1e-9 * extent**3:
        raise ValueError(
            f"{what}: the hull is flat (volume {h.volume:.3g} for an extent of {extent:.3g})"
        )
    if len(h.vertices) > MAX_HULL_VERTICES:
        raise ValueError(
            f"{what}: the hull has {len(h.vertices)} vertices, more than "
            f"{MAX_HULL_VERTICES}; simplify the mesh"
        )
    index = np.full(len(points), -1)
    index[h.vertices] = np.arange(len(h.vertices))
    vertices = points[h.vertices]
    faces = index[h.simplices]
    normals, offsets = h.equations[:, :3], -h.equations[:, 3]
    # qhull's triangles in either orientation: turn each so that its normal points out
    tri = vertices[faces]
    cross = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    flip = np.einsum("ij,ij->i", cross, normals) < 0.0
    faces[flip] = faces[flip][:, ::-1]
    # one plane per face of the hull (qhull splits a face into coplanar triangles)
    planes = []
    tol = 1e-9 * extent
    for n, d in zip(normals, offsets):
        if not any(np.dot(n, p[:3]) > 1.0 - 1e-9 and abs(d - p[3]) <= tol for p in planes):
            planes.append(np.array([*n, d]))
    return vertices, faces.astype(np.int64), np.array(planes)


def _check_param(kind, key, value, where):
    name = f"{where}.{key}" if where else key
    if key in ("half_extents", "radii"):
        v = as_vector(value, 3, name)
        if np.any(v <= 0.0):
            raise ValueError(f"{name}: must be > 0, got {v.tolist()}")
        return _frozen(v)
    if key == "vertices":
        try:
            v = np.array(value, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: expected an (N, 3) array of points") from None
        if v.ndim != 2 or v.shape[1] != 3:
            raise ValueError(f"{name}: expected an (N, 3) array of points, got shape {v.shape}")
        if not np.all(np.isfinite(v)):
            raise ValueError(f"{name}: must be finite")
        return _frozen(v)
    if key == "heights":
        try:
            v = np.array(value, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: expected a (ny, nx) array") from None
        if v.ndim != 2 or min(v.shape) < 2:
            raise ValueError(f"{name}: expected a (ny, nx) array, ny, nx >= 2, got shape {v.shape}")
        if not np.all(np.isfinite(v)):
            raise ValueError(f"{name}: must be finite")
        return _frozen(v)
    if key == "size":
        v = as_vector(value, 2, name)
        if np.any(v <= 0.0):
            raise ValueError(f"{name}: must be > 0, got {v.tolist()}")
        return _frozen(v)
    if key == "file":
        if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
            raise ValueError(f"{name}: expected a path, got {value!r}")
        return os.fspath(value)
    if key == "scale":
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            s = as_scalar(value, name, positive=True)
            return _frozen(np.full(3, s))
        v = as_vector(value, 3, name)
        if np.any(v <= 0.0):
            raise ValueError(f"{name}: must be > 0, got {v.tolist()}")
        return _frozen(v)
    return as_scalar(value, name, positive=True)


def check_params(kind, params, where=""):
    """A geom's parameters, checked: a read-only mapping, ``ValueError`` naming the field
    (``where``.key) that is missing, unknown or bad."""
    if kind not in GEOM_PARAMS:
        raise ValueError(f"kind: unknown geom kind {kind!r}; known: {list(GEOM_PARAMS)}")
    params = {**OPTIONAL.get(kind, {}), **params}
    unknown = sorted(set(params) - set(GEOM_PARAMS[kind]))
    if unknown:
        raise ValueError(
            f"{unknown[0]}: a {kind} geom takes {list(GEOM_PARAMS[kind])}, not {unknown}"
        )
    clean = {}
    for key in GEOM_PARAMS[kind]:
        if key not in params:
            raise ValueError(f"{key}: a {kind} geom needs {key!r}")
        clean[key] = _check_param(kind, key, params[key], where)
    return Params(clean)


def mesh_pieces(file, scale, label):
    """The vertices (n_i, 3) of each object of the mesh ``file`` times ``scale``, read by
    trimesh (each object of a multi-object OBJ on its own).  ``ValueError`` naming the file
    and ``label`` (the geom) for a file missing, unreadable, empty, non-finite or too large."""
    trimesh = optional("trimesh", "mesh geoms (read from their files)")
    where = f"file: {file} ({label})"
    if not os.path.isfile(file):
        raise ValueError(f"{where}: no such file")
    if os.path.getsize(file) > MAX_FILE_BYTES:
        raise ValueError(
            f"{where}: {os.path.getsize(file)} bytes, more than "
            f"{MAX_FILE_BYTES} for a collision mesh"
        )
    try:
        loaded = trimesh.load(
            file, force=None, split_objects=True, group_material=False, process=False
        )
    except Exception as e:  # trimesh raises many kinds for a bad file
        raise ValueError(f"{where}: cannot be read as a mesh ({type(e).__name__}: {e})") from None
    meshes = loaded.dump() if isinstance(loaded, trimesh.Scene) else [loaded]
    pieces = []
    for mesh in meshes:
        v = np.asarray(getattr(mesh, "vertices", np.zeros((0, 3))), float)
        if len(v):
            pieces.append(v * np.asarray(scale))
    if not pieces:
        raise ValueError(f"{where}: holds no vertices")
    if sum(len(v) for v in pieces) > MAX_FILE_VERTICES:
        raise ValueError(f"{where}: more than {MAX_FILE_VERTICES} vertices")
    for v in pieces:
        if not np.all(np.isfinite(v)):
            raise ValueError(f"{where}: non-finite vertices")
    return pieces


# -- mass properties --------------------------------------------------------------------------
class MassProperties(NamedTuple):
    """What :func:`mass_properties` returns: ``mass``, ``com`` (3,) centre of mass,
    ``moments`` (3,) principal moments about it, ascending, ``axes`` (3, 3) their unit
    axes as columns (a right-handed rotation: body axes in the pieces' frame)."""

    mass: float
    com: np.ndarray
    moments: np.ndarray
    axes: np.ndarray


def _solid(kind, params):
    """(volume, centre of mass, inertia tensor about it per unit density), geom frame."""
    p = params
    if kind == "sphere":
        r = p["radius"]
        v = 4.0 / 3.0 * np.pi * r**3
        return v, np.zeros(3), np.eye(3) * 0.4 * v * r * r
    if kind == "ellipsoid":
        a, b, c = p["radii"]
        v = 4.0 / 3.0 * np.pi * a * b * c
        return v, np.zeros(3), np.diag([b * b + c * c, a * a + c * c, a * a + b * b]) * v / 5
    if kind == "box":
        a, b, c = p["half_extents"]
        v = 8.0 * a * b * c
        return v, np.zeros(3), np.diag([b * b + c * c, a * a + c * c, a * a + b * b]) * v / 3
    if kind == "cylinder":
        r, h = p["radius"], p["half_length"]
        v = np.pi * r * r * 2 * h
        side = v * (3 * r * r + 4 * h * h) / 12
        return v, np.zeros(3), np.diag([side, side, v * r * r / 2])
    if kind == "cone":
        r, h = p["radius"], p["height"]
        v = np.pi * r * r * h / 3
        side = v * (3 * r * r / 20 + 3 * h * h / 80)
        return v, np.zeros(3), np.diag([side, side, 0.3 * v * r * r])
    if kind == "capsule":
        r, h = p["radius"], p["half_length"]
        vc = np.pi * r * r * 2 * h
        vh = 2.0 / 3.0 * np.pi * r**3  # one end: a half ball, its centre of mass 3 r / 8 out
        arm = h + 3 * r / 8
        own = 0.4 * vh * r * r - vh * (3 * r / 8) ** 2
        side = vc * (3 * r * r + 4 * h * h) / 12 + 2 * (own + vh * arm * arm)
        return vc + 2 * vh, np.zeros(3), np.diag([side, side, vc * r * r / 2 + 0.8 * vh * r * r])
    if kind in ("convex", "mesh"):
        vertices, faces = p["vertices"], p["faces"]
        return _polyhedron(vertices, faces)
    raise ValueError(f"kind: a {kind} has no mass properties (the world's only)")


def _polyhedron(vertices, faces):
    """Volume, centre of mass and inertia tensor (about it) per unit density of the closed
    outward-triangulated surface (vertices, faces), by the divergence theorem over the
    tetrahedra from the origin to each face (Tonon's closed forms)."""
    a, b, c = (vertices[faces[:, i]] for i in range(3))
    det = np.einsum("ij,ij->i", a, np.cross(b, c))  # 6 x each tetrahedron's signed volume
    volume = det.sum() / 6.0
    com = (det[:, None] * (a + b + c)).sum(axis=0) / (24.0 * volume)
    # second moments  int x_i x_j dV = sum det / 120 (sum over the 4 vertices' products)
    s = a + b + c
    second = (
        np.einsum("k,ki,kj->ij", det, s, s)
        + np.einsum("k,ki,kj->ij", det, a, a)
        + np.einsum("k,ki,kj->ij", det, b, b)
        + np.einsum("k,ki,kj->ij", det, c, c)
    )
    second /= 120.0
    second -= volume * np.outer(com, com)
    inertia = np.eye(3) * np.trace(second) - second
    return volume, com, inertia


def mass_properties(pieces, density=1000.0):
    """Mass, centre of mass, principal moments and axes of a body made of ``pieces`` of
    uniform ``density`` (kg/m^3).

    ``pieces``: a list of ``(kind, params, pos, quat)``, kinds and parameters as
    :meth:`rtrigid.Model.add_geom` takes them (a ``mesh``'s file gives the union of its
    objects' hulls), each placed at ``pos`` turned by ``quat`` in the frame the pieces are
    described in.  Primitives by their closed forms, hulls by the divergence theorem over
    their triangles.  Overlapping pieces count twice.  Returns :class:`MassProperties`;
    the body frame :meth:`rtrigid.Model.add_body` wants sits at ``com`` with ``axes`` as
    its axes, so a piece's pose in the body frame is ``axes.T @ (pos - com)`` and
    ``axes``' quaternion conjugate times ``quat``."""
    rho = as_scalar(density, "density", positive=True)
    if not isinstance(pieces, (list, tuple)) or not pieces:
        raise ValueError("pieces: expected a non-empty list of (kind, params, pos, quat)")
    items = []
    for i, piece in enumerate(pieces):
        try:
            kind, params, pos, quat = piece
        except (TypeError, ValueError):
            raise ValueError(f"pieces[{i}]: expected (kind, params, pos, quat)") from None
        where = f"pieces[{i}]"
        if kind == "heightfield":
            raise ValueError(f"{where}: a heightfield has no mass (it is terrain)")
        clean = check_params(kind, dict(params), where)
        pos = as_vector(pos, 3, f"{where}.pos")
        r = quat_matrix(unit_quat(quat, f"{where}.quat"))
        if kind == "convex":
            shapes = [hull(clean["vertices"], f"{where}.vertices")]
        elif kind == "mesh":
            shapes = [
                hull(v, f"file: {clean['file']} ({where}, object {j})")
                for j, v in enumerate(mesh_pieces(clean["file"], clean["scale"], where))
            ]
        else:
            shapes = None
        if shapes is None:
            items.append((*_solid(kind, clean), pos, r))
        else:
            for vertices, faces, _ in shapes:
                items.append((*_solid("convex", {"vertices": vertices, "faces": faces}), pos, r))
    mass = sum(v for v, *_ in items) * rho
    com = sum(v * (pos + r @ c) for v, c, _, pos, r in items) * rho / mass
    total = np.zeros((3, 3))
    for v, c, inertia, pos, r in items:
        d = pos + r @ c - com
        total += rho * (r @ inertia @ r.T + v * (np.dot(d, d) * np.eye(3) - np.outer(d, d)))
    moments, axes = np.linalg.eigh(0.5 * (total + total.T))
    if np.linalg.det(axes) < 0.0:
        axes[:, 2] = -axes[:, 2]
    return MassProperties(float(mass), com, moments, axes)


# -- the records of Model.add_geom --------------------------------------------------------------
def make_geoms(
    model,
    body,
    kind,
    pos,
    quat,
    friction,
    restitution,
    torsional_friction,
    rolling_friction,
    contype,
    conaffinity,
    params,
):
    """The checked :class:`Geom` records of one :meth:`rtrigid.Model.add_geom` call (several
    for a mesh file of several objects); nothing is added to the model here."""

    b = None if body is None else model.body_index(body)
    label = f"geom {len(model.geoms)} on " + (
        "the world" if b is None else f"body {model.bodies[b].name!r}"
    )
    if kind == "heightfield" and b is not None:
        raise ValueError("body: a heightfield is terrain: it goes on the world (body None)")
    clean = check_params(kind, params)
    common = dict(
        pos=_frozen(as_vector(pos, 3, "pos")),
        quat=_frozen(unit_quat(quat)),
        friction=0.0,
        restitution=0.0,
        torsional_friction=0.0,
        rolling_friction=0.0,
        contype=_bits(contype, "contype"),
        conaffinity=_bits(conaffinity, "conaffinity"),
    )
    common["friction"], common["restitution"] = check_contact(friction, restitution)
    common["torsional_friction"], common["rolling_friction"] = check_spin_friction(
        torsional_friction, rolling_friction
    )
    if kind == "convex":
        shapes = [hull(clean["vertices"], f"vertices ({label})")]
        params = [clean]
    elif kind == "mesh":
        pieces = mesh_pieces(clean["file"], clean["scale"], label)
        shapes = [
            hull(v, f"file: {clean['file']} ({label}, object {i})") for i, v in enumerate(pieces)
        ]
        params = [Params({**clean, "object": i}) for i in range(len(pieces))]
    else:
        return [Geom(b, kind, clean, **common)]
    return [
        Geom(b, kind, p, vertices=_frozen(v), faces=_frozen(f), planes=_frozen(pl), **common)
        for p, (v, f, pl) in zip(params, shapes)
    ]


def shape_collides(body, shape):
    """Whether :meth:`rtrigid.Model.add_body` makes a geom of ``shape``, one of ``body``'s
    shapes: not of a shape that is drawn only (a torus, a robot file's visuals), nor on a body
    with ``collide=False``."""
    return shape is not None and body.collide and shape.kind in GEOM_PARAMS


def shape_geoms(body_index, body):
    """The geoms :meth:`rtrigid.Model.add_body` makes of a body's ``shape`` (one per part of
    a list of shapes that :func:`shape_collides`), with the body's contact coefficients."""
    shapes = body.shape if isinstance(body.shape, tuple) else (body.shape,)
    out = []
    for shape in shapes:
        if not shape_collides(body, shape):
            continue
        out.append(
            Geom(
                body_index,
                shape.kind,
                Params(dict(shape.params)),
                _frozen(shape.offset),
                _frozen(quat_along(shape.axis)),
                body.friction,
                body.restitution,
                body.torsional_friction,
                body.rolling_friction,
                1,
                1,
                source="shape",
            )
        )
    return out
