"""What to draw for a Simulation, worked out from its public API (numpy, no GL).

The scene is general: every body is a list of *parts* (shape kind, parameters, placement in
the body frame, optional own colour -- a marking, a pin, a material), taken from
``sim.model.bodies[i].shape`` (one shape or a list; a body without one gets the box with
its principal moments of inertia, see :func:`default_shape`); joints come from
``sim.joints()``.  Nothing here knows a scenario by name: a racket, a gimbal ring with its
pins, a robot link loaded from a file are all bodies made of parts.
Transforms are 4x4 row-major matrices acting on column vectors.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rtrigid.geoms import shape_collides
from rtrigid.maths import quat
from . import meshes

PALETTE = [
    (0.86, 0.42, 0.26), (0.27, 0.52, 0.80), (0.36, 0.68, 0.38), (0.90, 0.70, 0.22),
    (0.58, 0.42, 0.76), (0.20, 0.66, 0.68), (0.84, 0.38, 0.56), (0.55, 0.55, 0.55),
]
JOINT_COLOR = (0.18, 0.18, 0.22)
JOINT_AXIS_COLOR = (0.95, 0.80, 0.20)
LINK_COLOR = (0.2, 0.2, 0.25, 0.8)
MASSLESS_RADIUS = 0.01  # the dot drawn for a massless body (robot files' multi-joint bodies)


@dataclass
class Part:
    """One shape of a body: ``kind``/``params`` as :mod:`viewer.meshes` describes them,
    centred at ``offset`` with its z axis along ``axis`` (body frame); ``color`` None: the
    body's colour.  ``collides``: the part is one of the model's geoms (``sim.raycast``
    hits it); otherwise it is drawn only, and picking casts rays at it itself."""

    kind: str
    params: dict
    offset: np.ndarray
    axis: np.ndarray
    color: tuple | None
    mesh: tuple       # (vertices, indices), body frame
    collides: bool = False

    @property
    def rotation(self):
        return frame_along(self.axis)


@dataclass
class BodyVisual:
    index: int
    name: str
    parts: list
    color: tuple
    mesh: tuple       # all parts' vertices and indices, body frame (bounds, shadows)
    radius: float     # largest distance of the mesh from the centre of mass
    thickness: float  # smallest extent of a part (a link's diameter, a ring's tube)

    @property
    def kind(self):
        return self.parts[0].kind

    @property
    def params(self):
        return self.parts[0].params

    @property
    def offset(self):
        return self.parts[0].offset

    def support(self, direction_body):
        """Farthest mesh point along a body-frame direction."""
        v = self.mesh[0][:, :3].astype(np.float64)
        return v[np.argmax(v @ direction_body)]


def part_thickness(kind, params, mesh):
    """The smallest extent of a shape: what decides whether it can be seen and picked."""
    if kind == "visuals":
        v = mesh[0][:, :3]
        return float(np.min(v.max(axis=0) - v.min(axis=0)))
    if kind == "box":
        return 2.0 * float(np.min(params["half_extents"]))
    if kind == "torus":
        return 2.0 * float(params["tube_radius"])
    if kind == "cylinder":
        return 2.0 * min(float(params["radius"]), float(params["half_length"]))
    if kind == "cone":
        return min(2.0 * float(params["radius"]), float(params["height"]))
    return 2.0 * float(params["radius"])


def merge(meshes_):
    verts = np.vstack([m[0] for m in meshes_])
    starts = np.cumsum([0] + [len(m[0]) for m in meshes_[:-1]])
    idx = np.vstack([m[1] + np.uint32(k) for m, k in zip(meshes_, starts)])
    return verts, idx


def default_shape(mass, inertia):
    """The uniform box with these principal moments (moments clamped to a physical box)."""
    j = np.asarray(inertia, dtype=np.float64)
    # box of half extents (a, b, c): I1 = m (b^2 + c^2) / 3, so a^2 = 3 (sum(I) / 2 - I1) / m
    sq = 3.0 * (j.sum() / 2.0 - j) / mass
    half = np.sqrt(np.maximum(sq, 1e-4 * sq.max() if sq.max() > 0 else 1e-6))
    return "box", {"half_extents": half}


@dataclass(frozen=True)
class GeomShape:
    """A body drawn as its geoms: the shape record body_visuals reads."""

    kind: str
    params: dict
    offset: tuple = (0.0, 0.0, 0.0)
    axis: tuple = (0.0, 0.0, 1.0)
    color: object = None


def geom_parts(geoms):
    """The drawing parts (:data:`rtrigid.model.PART_TYPES`, and the viewer's ``hull``,
    ``ellipsoid`` and ``heightfield``) of geoms, in their body's frame."""
    parts = []
    for g in geoms:
        part = {"type": g.kind, "pos": np.asarray(g.pos, float),
                "quat": np.asarray(g.quat, float), "color": None}
        if g.kind in ("convex", "mesh"):
            part.update(type="hull", vertices=g.vertices, faces=g.faces)
        else:
            part.update(dict(g.params))
        parts.append(part)
    return parts


def body_visuals(sim, colors=None):
    """One visual per body of ``sim``; ``colors``: optional {body index or name: rgb}.  A body
    without a shape of its own is drawn as its geoms (``Model.add_geom``), if it has any."""
    out = []
    colors = {sim.body_index(k): v for k, v in (colors or {}).items()}
    geoms = {}
    for g in sim.model.geoms:
        if g.body is not None and g.source != "shape":
            geoms.setdefault(g.body, []).append(g)
    for i, body in enumerate(sim.model.bodies[:sim.nb]):
        shapes, drawn_geoms = body.shape, False
        if shapes is None and i in geoms:
            shapes = GeomShape("visuals", {"parts": geom_parts(geoms[i])})
            drawn_geoms = True
        if shapes is None:
            if sim.body_mass[i] == 0.0:  # a link between two joints
                kind, params = "sphere", {"radius": MASSLESS_RADIUS}
            else:
                kind, params = default_shape(sim.body_mass[i], sim.body_inertia[i])
            parts = [Part(kind, params, np.zeros(3), np.array([0.0, 0.0, 1.0]), None,
                          meshes.shape_mesh(kind, params))]
        else:
            parts = []
            for shape in (shapes if isinstance(shapes, (tuple, list)) else (shapes,)):
                offset = np.asarray(shape.offset, float)
                axis = np.asarray(getattr(shape, "axis", (0.0, 0.0, 1.0)), float)
                parts.append(Part(shape.kind, shape.params, offset, axis,
                                  getattr(shape, "color", None),
                                  meshes.shape_mesh(shape.kind, shape.params, offset, axis),
                                  drawn_geoms or shape_collides(body, shape)))
        mesh = merge([p.mesh for p in parts])
        radius = float(np.max(np.linalg.norm(mesh[0][:, :3], axis=1)))
        thickness = min(part_thickness(p.kind, p.params, p.mesh) for p in parts)
        color = PALETTE[i % len(PALETTE)]
        for p in parts:
            if p.kind == "visuals":  # the file's colour, where it gives one
                color = next((c["color"][:3] for c in p.params["parts"]
                              if c["color"] is not None), color)
        color = tuple(float(c) for c in colors.get(i, color))
        out.append(BodyVisual(i, sim.names[i], parts, color, mesh, radius, thickness))
    return out


def world_visual(sim):
    """(mesh, colour) of what a robot file draws on links welded to the world and of the
    world's geoms (static scenery), or None."""
    shape = getattr(sim.model, "world_shape", None)
    parts = list(shape.params["parts"]) if shape is not None else []
    drawn = parts + geom_parts([g for g in sim.model.geoms if g.body is None])
    if not drawn:
        return None
    color = next((p["color"][:3] for p in parts if p["color"] is not None), PALETTE[-1])
    return meshes.parts_mesh(drawn), tuple(float(c) for c in color)


def rotation(q):
    return quat.rotmat(np.asarray(q, dtype=np.float64), np.empty((3, 3)))


def pose_matrix(x, q):
    m = np.eye(4)
    m[:3, :3] = rotation(q)
    m[:3, 3] = x
    return m


def placed(x, rot, scale):
    """Matrix placing a unit mesh: rotation columns scaled by ``scale`` (3,), then at x."""
    m = np.eye(4)
    m[:3, :3] = rot * np.asarray(scale, dtype=np.float64)
    m[:3, 3] = x
    return m


frame_along = meshes.frame_along


def arrow_parts(start, end, radius):
    """(shaft matrix, head matrix) for an arrow from start to end; None if too short."""
    start = np.asarray(start, dtype=np.float64)
    d = np.asarray(end, dtype=np.float64) - start
    length = float(np.linalg.norm(d))
    if length < 1e-12:
        return None
    rot = frame_along(d)
    head = min(6.0 * radius, 0.5 * length)
    shaft = placed(start, rot, (radius, radius, length - head))
    tip = placed(start + d * (length - head) / length, rot, (2.5 * radius, 2.5 * radius, head))
    return shaft, tip


def joint_markers(joint, size):
    """Unit-mesh placements drawing one joint: a list of (mesh name, matrix, colour).

    Mesh names: "sphere" (radius 1), "cylinder" (radius 1, z in [-1, 1]), "box" (half
    extents 1).  Ball: a sphere; hinge: a pin along the axis; slider: a rail along it;
    cylindrical: pin and rail; planar: a flat plate across the axis; fixed: a cube.  An
    unknown kind is drawn as a ball, so new kinds are at least visible.
    """
    a = np.asarray(joint["anchor"], dtype=np.float64)
    kind = joint.get("kind")
    axis = joint.get("axis")
    out = []
    if axis is None or kind in ("spherical", "fixed"):
        if kind == "fixed":
            out.append(("box", placed(a, np.eye(3), (0.9 * size,) * 3), JOINT_COLOR))
        else:
            out.append(("sphere", placed(a, np.eye(3), (size,) * 3), JOINT_COLOR))
        return out
    rot = frame_along(axis)
    if kind in ("revolute", "cylindrical"):
        out.append(("cylinder", placed(a, rot, (0.6 * size, 0.6 * size, 2.5 * size)),
                    JOINT_AXIS_COLOR))
    if kind in ("prismatic", "cylindrical"):
        out.append(("box", placed(a, rot, (0.25 * size, 0.25 * size, 6.0 * size)), JOINT_COLOR))
    if kind == "planar":
        out.append(("cylinder", placed(a, rot, (3.0 * size, 3.0 * size, 0.15 * size)),
                    JOINT_AXIS_COLOR))
    if not out:
        out.append(("sphere", placed(a, np.eye(3), (size,) * 3), JOINT_COLOR))
    return out


def joint_links(joint, positions):
    """Line segments from the joint anchor to the centres of mass it connects."""
    a = np.asarray(joint["anchor"], dtype=np.float64)
    segs = []
    for b in (joint.get("parent", -1), joint.get("child", -1)):
        if b is not None and 0 <= b < len(positions):
            segs.append((a, positions[b]))
    return segs


def shadow_matrix(light_dir, z, normal=(0.0, 0.0, 1.0)):
    """Projects points along ``light_dir`` (towards the light) onto the plane
    ``normal . p = z`` (``normal`` unit; by default the level plane at height z):
    p -> p - l (n . p - z) / (n . l).  The light must be above the plane (n . l > 0)."""
    light = np.asarray(light_dir, dtype=np.float64)
    n = np.asarray(normal, dtype=np.float64)
    m = np.eye(4)
    m[:3, :3] -= np.outer(light, n) / (n @ light)
    m[:3, 3] = light * z / (n @ light)
    return m


def nice_spacing(length):
    """A round grid spacing (1, 2 or 5 times a power of ten) close to ``length``."""
    k = np.floor(np.log10(length))
    for m in (1.0, 2.0, 5.0, 10.0):
        if m * 10 ** k >= length:
            return float(m * 10 ** k)
    return float(10 ** (k + 1))
