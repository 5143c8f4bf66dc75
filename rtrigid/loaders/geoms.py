"""A compiled MJCF model's geoms: drawing parts, grounds and collision geometry specs.

Every geom is drawn, as the bodies' ``visuals`` shape (:data:`rtrigid.model.PART_TYPES`; an
ellipsoid as its box, a mesh from its file where the asset has one).  Geoms that collide
(``contype`` or ``conaffinity`` not 0, and contacts not off) become:

- a plane on the world (or on a body welded to it): a ground (:meth:`Model.add_ground`),
  its normal the plane's z axis, its friction the geom's sliding friction;
- anything else: a collision geometry spec, the arguments of
  ``Model.add_geom(body, kind, pos=, quat=, friction=, restitution=, contype=, conaffinity=,
  **params)`` with ``body`` the body index (None: the world), ``pos``/``quat`` the geom's
  frame in the body frame (at the centre of mass, principal axes) and per kind: sphere
  ``radius``; capsule, cylinder ``radius``, ``half_length`` (axis z); box ``half_extents``;
  ellipsoid ``radii``; convex ``vertices`` (n, 3) (a mesh's convex hull vertices as MuJoCo
  compiled them, in the geom frame); heightfield ``heights`` (nrow, ncol: MuJoCo's data times
  its top height, in metres) and ``size`` (its x and y half extents), on the world only.

A model with ``add_geom`` gets them added; otherwise they are kept in
``model.load_report.geoms`` and reported as "collision geometry: not yet simulated".
"""

from __future__ import annotations

import os

import numpy as np

from rtrigid.loaders.assemble import compose, inverse, matrix_quat, quat_matrix, resolve

PLANE, HFIELD, SPHERE, CAPSULE, ELLIPSOID, CYLINDER, BOX, MESH = range(8)
KIND_NAMES = {
    PLANE: "plane",
    HFIELD: "heightfield",
    SPHERE: "sphere",
    CAPSULE: "capsule",
    ELLIPSOID: "ellipsoid",
    CYLINDER: "cylinder",
    BOX: "box",
    MESH: "convex",
}
DEFAULT_RGBA = (0.5, 0.5, 0.5, 1.0)


def add_mjcf_geoms(m, spec, lines, report, name_of, model, collision):
    """Draw every geom of compiled model ``m`` and add its collision geometry to ``model``
    (see the module docstring); ``collision=False``: drawing only."""
    meshes = _mesh_files(m, spec, lines)
    parts = {}
    can_add = callable(getattr(model, "add_geom", None))
    for g in range(m.ngeom):
        where = lines.where("geom", g, name_of("geom", g))
        b, p, q = model.links[name_of("body", int(m.geom_bodyid[g]))]
        frame = compose((p, quat_matrix(q)), (m.geom_pos[g].copy(), quat_matrix(m.geom_quat[g])))
        part = _part(m, g, frame, meshes, report, where)
        if part is not None:
            parts.setdefault(b, []).append(part)
        if not collision or not (m.geom_contype[g] or m.geom_conaffinity[g]):
            continue
        geom = _collision_spec(m, g, b, frame, report, where)
        if geom is None:
            continue
        if geom["kind"] == "plane":
            n = frame[1][:, 2]
            model.add_ground(height=float(n @ frame[0]), normal=n, friction=geom["friction"])
            report.add("mapped", "plane geom", "a ground", where)
        elif can_add:
            params = {k: v for k, v in geom.items() if k not in ("body", "kind", "where")}
            try:
                model.add_geom(geom["body"], geom["kind"], **params)
            except ValueError as e:
                raise ValueError(f"{where}: <geom>: {e}") from None
            report.add("mapped", "collision geom", geom["kind"], where)
        else:
            report.geoms.append(geom)
            report.add("ignored", "collision geometry", "not yet simulated", where)
    for b, body_parts in parts.items():
        shape = model.check_shape(("visuals", {"parts": body_parts}))
        if b < 0:
            model.world_shape = shape
        else:
            model.bodies[b].shape = shape


def _mesh_files(m, spec, lines):
    """Per compiled mesh: (file path or None, scale, raw-file frame in the compiled mesh
    frame).  MuJoCo re-centres a mesh on its centroid and principal axes; ``mesh_pos`` and
    ``mesh_quat`` are that re-centring, so the file's vertices are drawn through it."""
    folder = os.path.join(os.path.dirname(lines.path), spec.meshdir or "")
    out = []
    for k in range(m.nmesh):
        mesh = spec.meshes[k] if k < len(spec.meshes) else None
        path = None
        if mesh is not None and mesh.file:
            path = resolve(folder, mesh.file) or resolve(os.path.dirname(lines.path), mesh.file)
        raw = inverse((m.mesh_pos[k].copy(), quat_matrix(m.mesh_quat[k])))
        out.append((path, np.array(m.mesh_scale[k], float), raw))
    return out


def _part(m, g, frame, meshes, report, where):
    """The drawing part of geom g in its body frame, or None (planes, height fields, meshes
    without a file)."""
    kind = int(m.geom_type[g])
    size = m.geom_size[g]
    rgba = tuple(float(c) for c in m.geom_rgba[g])
    part = {"color": None if rgba == DEFAULT_RGBA else np.array(rgba)}
    if kind == SPHERE:
        part.update(type="sphere", radius=float(size[0]))
    elif kind in (CAPSULE, CYLINDER):
        part.update(
            type="capsule" if kind == CAPSULE else "cylinder",
            radius=float(size[0]),
            half_length=float(size[1]),
        )
    elif kind in (BOX, ELLIPSOID):
        part.update(type="box", half_extents=np.array(size[:3], float))
    elif kind == MESH:
        path, scale, raw = meshes[int(m.geom_dataid[g])]
        if path is None:
            report.add(
                "approximated",
                "mesh given by inline vertices",
                "inline vertices not drawn (the viewer draws mesh files)",
                where,
            )
            return None
        frame = compose(frame, raw)
        part.update(type="mesh", file=path, missing=False, scale=scale)
    else:
        return None
    part.update(pos=frame[0], quat=matrix_quat(frame[1]))
    return part


def _collision_spec(m, g, b, frame, report, where):
    """The collision spec of geom g (see the module docstring), or None if reported."""
    kind = int(m.geom_type[g])
    size = m.geom_size[g]
    friction = float(m.geom_friction[g, 0]) if m.geom_condim[g] > 1 else 0.0
    if m.geom_condim[g] > 3 and np.any(m.geom_friction[g, 1:]):
        report.add(
            "approximated",
            "geom condim",
            f"condim {int(m.geom_condim[g])}: the "
            "torsional and rolling friction are not passed to the geometry",
            where,
        )
    offset = float(m.geom_margin[g] - m.geom_gap[g])
    if offset > 0.0:
        report.add(
            "approximated",
            "geom margin",
            f"margin {offset:g} m: MuJoCo's contacts of the geom act from that far off "
            "(a pair's margins add) and hold it off what it touches; rtrigid's at touch",
            where,
        )
    if kind == PLANE:
        if b >= 0:
            report.add("ignored", "plane geom", "a plane on a moving body is not simulated", where)
            return None
        return {"kind": "plane", "friction": friction}
    spec = {
        "body": None if b < 0 else b,
        "kind": KIND_NAMES.get(kind, str(kind)),
        "pos": frame[0],
        "quat": matrix_quat(frame[1]),
        "friction": friction,
        "restitution": 0.0,
        "contype": int(m.geom_contype[g]),
        "conaffinity": int(m.geom_conaffinity[g]),
        "where": where,
    }
    if kind == SPHERE:
        spec["radius"] = float(size[0])
    elif kind in (CAPSULE, CYLINDER):
        spec.update(radius=float(size[0]), half_length=float(size[1]))
    elif kind == BOX:
        spec["half_extents"] = np.array(size[:3], float)
    elif kind == ELLIPSOID:
        spec["radii"] = np.array(size[:3], float)
    elif kind == MESH:
        spec["vertices"] = _hull_vertices(m, int(m.geom_dataid[g]))
    elif kind == HFIELD:
        if b >= 0:
            report.add(
                "ignored",
                "heightfield geom",
                "a heightfield on a moving body is not simulated (terrain goes on the world)",
                where,
            )
            return None
        h = int(m.geom_dataid[g])
        nrow, ncol = int(m.hfield_nrow[h]), int(m.hfield_ncol[h])
        adr = int(m.hfield_adr[h])
        # MuJoCo's size: x and y half extents, the top's height (the data are 0..1 of it)
        # and the base's depth; rtrigid's heightfield takes heights in metres and (sx, sy)
        sx, sy, top = (float(v) for v in m.hfield_size[h][:3])
        spec.update(
            heights=top
            * np.array(m.hfield_data[adr : adr + nrow * ncol], float).reshape(nrow, ncol),
            size=(sx, sy),
        )
    else:
        report.add("ignored", "geom", f"type {kind} (an SDF or plugin) is not simulated", where)
        return None
    return spec


def _hull_vertices(m, k):
    """Mesh k's convex hull vertices as MuJoCo compiled them (its hull graph where it has
    one, else every vertex), in the geom frame, float64."""
    start, n = int(m.mesh_vertadr[k]), int(m.mesh_vertnum[k])
    verts = np.array(m.mesh_vert[start : start + n], float)
    adr = int(m.mesh_graphadr[k])
    if adr >= 0:
        numvert = int(m.mesh_graph[adr])
        ids = np.array(m.mesh_graph[adr + 2 + numvert : adr + 2 + 2 * numvert], int)
        if ids.size and ids.min() >= 0 and ids.max() < n:
            return verts[ids]
    return verts
