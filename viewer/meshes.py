"""Triangle meshes generated for the body shapes, arrows and joint markers (numpy, no GL).

A mesh is ``(vertices, indices)``: ``vertices`` float32 ``(n, 6)`` rows of position and unit
outward normal, ``indices`` uint32 ``(m, 3)`` counter-clockwise triangles seen from outside.
Every round solid is a *lathe*: a profile in the (rho, z) half-plane revolved about the z axis.
A sharp edge is two profile points at the same place with different normals.

Shape conventions (body frame, origin at the centre of mass, see ``rtrigid.model.Model.add_body``):

- box: ``half_extents``; sphere: ``radius``;
- cylinder: axis z, ``radius``, ``half_length``;
- capsule: axis z, ``radius``, cylindrical part of ``half_length`` either side plus
  hemispherical caps (the total length is 2 (half_length + radius));
- cone: axis z, ``radius`` of the base, ``height``; apex at -3/4 height and base centre at
  +1/4 height, i.e. a solid cone with its centre of mass at the origin, standing on its apex
  (the gyro top pivots on the body point (0, 0, -3H/4));
- torus: axis z, ``radius`` of the centre circle, ``tube_radius``;
- visuals: the ``parts`` of a robot file's drawing (boxes, spheres, cylinders, capsules and
  mesh files read by trimesh, each at its pose; a file that cannot be read is a warning and
  a small cube).

Every shape is then turned so that its z axis lies along the shape's ``axis`` and shifted by
its ``offset``.
"""
from __future__ import annotations

import numpy as np

SEGMENTS = 48


def frame_along(axis):
    """A rotation whose third column is the unit vector ``axis`` (the identity for +z)."""
    z = np.asarray(axis, dtype=np.float64)
    z = z / np.linalg.norm(z)
    helper = np.array([0.0, 1.0, 0.0]) if abs(z[1]) < 0.9 else np.array([1.0, 0.0, 0.0])
    x = np.cross(helper, z)
    x /= np.linalg.norm(x)
    return np.column_stack([x, np.cross(z, x), z])


def lathe(profile, segments=SEGMENTS):
    """Revolve a profile of ``(rho, z, n_rho, n_z)`` rows about the z axis."""
    profile = np.asarray(profile, dtype=np.float64)
    angles = np.linspace(0.0, 2.0 * np.pi, segments + 1)
    c, s = np.cos(angles), np.sin(angles)
    rings = []
    for rho, z, nr, nz in profile:
        pos = np.stack([rho * c, rho * s, np.full_like(c, z)], axis=1)
        nrm = np.stack([nr * c, nr * s, np.full_like(c, nz)], axis=1)
        rings.append(np.hstack([pos, nrm]))
    verts = np.vstack(rings)
    tris = []
    width = segments + 1
    for k in range(len(profile) - 1):
        (r0, z0, _, _), (r1, z1, _, _) = profile[k], profile[k + 1]
        if r0 == r1 and z0 == z1:
            continue  # the two normals of a sharp edge: no band between them
        a = k * width + np.arange(segments)
        b = a + width
        tris.append(np.stack([a, a + 1, b + 1], axis=1))
        tris.append(np.stack([a, b + 1, b], axis=1))
    idx = np.vstack(tris)
    # a band whose profile runs towards -z winds clockwise; make every triangle face outwards
    idx = _orient_outwards(verts, idx)
    return verts.astype(np.float32), idx.astype(np.uint32)


def _orient_outwards(verts, idx):
    p = verts[:, :3]
    n = verts[:, 3:]
    a, b, c = p[idx[:, 0]], p[idx[:, 1]], p[idx[:, 2]]
    face = np.cross(b - a, c - a)
    mean_normal = n[idx[:, 0]] + n[idx[:, 1]] + n[idx[:, 2]]
    flip = np.einsum("ij,ij->i", face, mean_normal) < 0.0
    idx = idx.copy()
    idx[flip] = idx[flip][:, [0, 2, 1]]
    degenerate = np.linalg.norm(face, axis=1) < 1e-14
    return idx[~degenerate]


def _arc(rho0, z0, radius, theta_from, theta_to, n):
    """Profile rows of a circular arc centred at (rho0, z0); theta from the +z axis."""
    rows = []
    for th in np.linspace(theta_from, theta_to, n):
        nr, nz = np.sin(th), np.cos(th)
        rows.append((rho0 + radius * nr, z0 + radius * nz, nr, nz))
    return rows


def sphere(radius, segments=SEGMENTS):
    rows = _arc(0.0, 0.0, radius, np.pi, 0.0, segments // 2 + 1)
    return lathe(rows, segments)


def capsule(radius, half_length, segments=SEGMENTS):
    n = segments // 4 + 1
    rows = _arc(0.0, -half_length, radius, np.pi, np.pi / 2, n)
    rows += _arc(0.0, half_length, radius, np.pi / 2, 0.0, n)
    return lathe(rows, segments)


def cylinder(radius, z0, z1, segments=SEGMENTS):
    """Closed cylinder about the z axis from z0 to z1."""
    r = radius
    rows = [(0, z0, 0, -1), (r, z0, 0, -1), (r, z0, 1, 0), (r, z1, 1, 0), (r, z1, 0, 1),
            (0, z1, 0, 1)]
    return lathe(rows, segments)


def cone(radius, z_apex, z_base, segments=SEGMENTS):
    """Closed cone about the z axis, apex at z_apex, base disc at z_base (either order)."""
    h = z_base - z_apex
    # outward side normal: perpendicular to the slant line (radius, h) in the (rho, z) plane
    nr, nz = abs(h), -np.sign(h) * radius
    norm = np.hypot(nr, nz)
    nr, nz = nr / norm, nz / norm
    cap = np.sign(h)
    rows = [(0, z_apex, nr, nz), (radius, z_base, nr, nz), (radius, z_base, 0, cap),
            (0, z_base, 0, cap)]
    return lathe(rows, segments)


def torus(radius, tube_radius, segments=SEGMENTS):
    """Ring about the z axis: a circle of ``tube_radius`` swept round one of ``radius``."""
    rows = _arc(radius, 0.0, tube_radius, 0.0, 2.0 * np.pi, segments // 2 + 1)
    return lathe(rows, segments)


def box(half_extents):
    h = np.asarray(half_extents, dtype=np.float64)
    verts, idx = [], []
    for axis in range(3):
        for sign in (-1.0, 1.0):
            n = np.zeros(3)
            n[axis] = sign
            u = np.zeros(3)
            u[(axis + 1) % 3] = h[(axis + 1) % 3]
            v = np.zeros(3)
            v[(axis + 2) % 3] = h[(axis + 2) % 3]
            centre = n * h[axis]
            corners = [centre - u - v, centre + u - v, centre + u + v, centre - u + v]
            base = len(verts)
            verts += [np.concatenate([c, n]) for c in corners]
            tri = [(base, base + 1, base + 2), (base, base + 2, base + 3)]
            idx += tri if sign > 0 else [t[::-1] for t in tri]
    return np.array(verts, np.float32), np.array(idx, np.uint32)


def shape_mesh(kind, params, offset=(0.0, 0.0, 0.0), axis=(0.0, 0.0, 1.0)):
    """Mesh of a body shape (see the module docstring), in the body frame."""
    if kind == "box":
        verts, idx = box(params["half_extents"])
    elif kind == "sphere":
        verts, idx = sphere(params["radius"])
    elif kind == "cylinder":
        h = params["half_length"]
        verts, idx = cylinder(params["radius"], -h, h)
    elif kind == "capsule":
        verts, idx = capsule(params["radius"], params["half_length"])
    elif kind == "cone":
        h = params["height"]
        verts, idx = cone(params["radius"], -0.75 * h, 0.25 * h)
    elif kind == "torus":
        verts, idx = torus(params["radius"], params["tube_radius"])
    elif kind == "visuals":
        verts, idx = parts_mesh(params["parts"])
    else:
        raise ValueError(f"shape: no mesh for kind {kind!r}")
    rot = frame_along(axis).astype(np.float32)
    verts = verts.copy()
    verts[:, :3] = verts[:, :3] @ rot.T + np.asarray(offset, dtype=np.float32)
    verts[:, 3:] = verts[:, 3:] @ rot.T
    return verts, idx


def arrow_shaft():
    """Unit shaft: radius 1 from z = 0 to z = 1 (scaled per draw)."""
    return cylinder(1.0, 0.0, 1.0, 16)


def arrow_head():
    """Unit head: base radius 1 at z = 0, apex at z = 1."""
    return cone(1.0, 1.0, 0.0, 16)


def checker_floor(centre_xy, half_size, spacing, z, light, dark):
    """Triangle-list vertices ``(n, 7)`` (position, RGBA) of a checkered floor in the plane z:
    :func:`checker_plane` with the world x and y axes as the plane's."""
    return checker_plane(centre_xy, half_size, spacing, (0.0, 0.0, z), (1.0, 0.0, 0.0),
                         (0.0, 1.0, 0.0), light, dark)


def checker_plane(centre_ab, half_size, spacing, origin, u, v, light, dark):
    """Triangle-list vertices ``(n, 7)`` (position, RGBA) of a checkered plane: the points
    ``origin + a u + b v`` (``u``, ``v`` orthonormal, in the plane).

    Tiles of ``spacing`` aligned with the plane's (a, b) grid, around ``centre_ab``; their
    opacity falls off with the distance from the centre, so the plane fades out instead of
    ending at a hard edge and aliasing in the distance.
    """
    n = int(round(half_size / spacing))
    cx = np.round(np.asarray(centre_ab, dtype=np.float64) / spacing)
    i, j = np.meshgrid(np.arange(-n, n) + cx[0], np.arange(-n, n) + cx[1], indexing="ij")
    i, j = i.ravel(), j.ravel()
    x0, y0 = i * spacing, j * spacing
    frame = np.array([u, v, origin], dtype=np.float64)   # (a, b, 1) -> world
    corners = [(0, 0), (1, 0), (1, 1), (0, 0), (1, 1), (0, 1)]
    rows = np.zeros((len(i), 6, 7))
    colour = np.where(((i + j) % 2 == 0)[:, None], np.asarray(light), np.asarray(dark))
    for k, (a, b) in enumerate(corners):
        x, y = x0 + a * spacing, y0 + b * spacing
        r = np.hypot(x - cx[0] * spacing, y - cx[1] * spacing)
        rows[:, k, :3] = np.stack([x, y, np.ones_like(x)], axis=1) @ frame
        rows[:, k, 3:] = colour
        rows[:, k, 6] *= np.clip(1.0 - r / half_size, 0.0, 1.0) ** 0.7
    return rows.reshape(-1, 7).astype(np.float32)


SMOOTH_ANGLE = np.radians(35.0)   # faces meeting at less than this are shaded as one surface


def smooth(vertices, faces, angle=SMOOTH_ANGLE):
    """Normals averaged over faces that meet at less than ``angle`` and kept sharp across
    larger creases (trimesh's smooth_shade): a CAD mesh's round parts read as round, its
    edges stay edges."""
    import trimesh

    mesh = trimesh.Trimesh(vertices, faces, process=False)
    shaded = trimesh.graph.smooth_shade(mesh, angle=angle)
    rows = np.hstack([np.asarray(shaded.vertices), np.asarray(shaded.vertex_normals)])
    return rows.astype(np.float32), np.asarray(shaded.faces, dtype=np.uint32)


PLACEHOLDER_HALF = 0.03  # half edge of the cube drawn for a mesh file that cannot be read


def mesh_file(path, scale):
    """A mesh file (STL, OBJ, DAE, ... read by trimesh) as a flat-shaded mesh, or None and a
    warning if it cannot be read."""
    import warnings

    try:
        import trimesh

        mesh = trimesh.load(path, force="mesh")
        vertices, faces = np.asarray(mesh.vertices), np.asarray(mesh.faces)
        if len(faces) == 0:
            raise ValueError("no triangles")
    except ImportError:
        warnings.warn(f"{path}: drawing meshes needs trimesh (pip install trimesh); drawing a "
                      "placeholder", stacklevel=3)
        return None
    except Exception as e:  # trimesh raises many kinds; any of them means: no mesh here
        warnings.warn(f"{path}: cannot read the mesh ({e}); drawing a placeholder",
                      stacklevel=3)
        return None
    return smooth(vertices * np.asarray(scale, dtype=np.float64), faces)


def heightfield(heights, size):
    """A height field's surface (heights (ny, nx), metres, over [-sx, sx] x [-sy, sy])."""
    h = np.asarray(heights, dtype=np.float64)
    ny, nx = h.shape
    xs = size[0] * (2.0 * np.arange(nx) / (nx - 1) - 1.0)
    ys = size[1] * (2.0 * np.arange(ny) / (ny - 1) - 1.0)
    gx, gy = np.meshgrid(xs, ys)
    vertices = np.column_stack([gx.ravel(), gy.ravel(), h.ravel()])
    k = np.arange(ny * nx).reshape(ny, nx)
    a, b, c, d = k[:-1, :-1].ravel(), k[:-1, 1:].ravel(), k[1:, :-1].ravel(), k[1:, 1:].ravel()
    faces = np.concatenate([np.column_stack([a, b, d]), np.column_stack([a, d, c])])
    return smooth(vertices, faces)


def parts_mesh(parts):
    """One mesh of the parts of a ``visuals`` shape (see :data:`rtrigid.model.PART_TYPES`),
    each placed at its ``pos``/``quat`` in the body frame."""
    from rtrigid.maths import quat

    verts, idx, n = [], [], 0
    for part in parts:
        kind = part["type"]
        if kind == "mesh":
            mesh = None if part.get("missing") else mesh_file(part["file"], part["scale"])
            if mesh is None:
                mesh = box((PLACEHOLDER_HALF,) * 3)
        elif kind == "hull":   # a convex geom: its hull's triangles, flat faces
            mesh = smooth(np.asarray(part["vertices"], float), np.asarray(part["faces"]),
                          angle=0.0)
        elif kind == "ellipsoid":   # a unit sphere stretched; normals by the inverse
            unit = sphere(1.0)
            radii = np.asarray(part["radii"], dtype=np.float32)
            normals = unit[0][:, 3:] / radii
            normals /= np.linalg.norm(normals, axis=1, keepdims=True)
            mesh = (np.hstack([unit[0][:, :3] * radii, normals]).astype(np.float32), unit[1])
        elif kind == "heightfield":
            mesh = heightfield(part["heights"], part["size"])
        else:
            mesh = shape_mesh(kind, part)
        v = mesh[0].astype(np.float64)
        R = quat.rotmat(np.asarray(part["quat"], dtype=np.float64), np.empty((3, 3)))
        v[:, :3] = v[:, :3] @ R.T + part["pos"]
        v[:, 3:] = v[:, 3:] @ R.T
        verts.append(v.astype(np.float32))
        idx.append(mesh[1] + n)
        n += len(v)
    return np.concatenate(verts), np.concatenate(idx).astype(np.uint32)
