"""Geoms as world rows, and their support mappings: the shape data every convex query reads.

A geom is one row of ``W_WIDTH`` floats (:func:`world_geom` fills it): its kind code
(:mod:`.geometry`), three sizes, world position and rotation matrix (row-major, local to
world), for a hull its slice of a vertex pool ``verts (nv, 3)`` and of a plane pool
``planes (np, 4)`` (outward unit normal, offset; both in the geom's frame), and the radius of
a sphere about its position that holds it.  Sizes: sphere (r); capsule (r, half length) and
cylinder (r, half length) along local z; box half extents; cone (r, height), apex at
-3 height / 4 and base centre at +height / 4 on z; ellipsoid radii.  A prism (a heightfield's
triangle extruded down to a bottom, :mod:`.fieldcontact`) has no sizes: its row is longer
(``T_WIDTH``) and holds its triangle, its bottom and its triangle's normal.

:func:`support` is the exact support point of every kind (the point of the shape farthest
along a direction): GJK and EPA (:mod:`.convex`), the clipping (:mod:`.clipping`) and the ray
casts (:mod:`.raycast`) meet the shapes through it alone.
"""
import numpy as np

from rtrigid._jit import jit_inline
from rtrigid.contact.geometry import (
    BOX,
    CAPSULE,
    CONE,
    CYLINDER,
    ELLIPSOID,
    HULL,
    PRISM,
    SPHERE,
)

# world geom row
W_KIND = 0
W_SIZE = 1     # 3 sizes (see the module docstring)
W_POS = 4      # world position of the geom's frame
W_ROT = 7      # world rotation matrix, row-major (local -> world)
W_VERT = 16    # hull: first vertex in the pool, and their number
W_NVERT = 17
W_PLANE = 18   # hull: first plane in the pool, and their number
W_NPLANE = 19
W_RADIUS = 20  # radius of a sphere about W_POS that holds the geom
W_WIDTH = 21
# a prism's row (kind PRISM: a heightfield's triangle extruded down) goes on past W_WIDTH
T_TOP = W_WIDTH          # its triangle's three corners (x, y, z each), in its axes about W_POS
T_BOTTOM = W_WIDTH + 9   # the height of its bottom, in the same axes
T_NORMAL = W_WIDTH + 10  # the triangle's upward unit normal, in its axes
T_WIDTH = W_WIDTH + 13


def bounding_radius(kind, size, verts=None):
    """Radius of a sphere about the geom's frame origin that holds it."""
    r, h = float(size[0]), float(size[1])
    if kind == SPHERE:
        return r
    if kind == CAPSULE:
        return r + h
    if kind == BOX:
        return float(np.linalg.norm(size[:3]))
    if kind == CYLINDER:
        return float(np.hypot(r, h))
    if kind == CONE:
        return max(0.75 * h, float(np.hypot(r, 0.25 * h)))
    if kind == ELLIPSOID:
        return float(np.max(size[:3]))
    if kind == HULL:
        return float(np.max(np.linalg.norm(verts, axis=1)))
    raise ValueError(f"kind: no convex geom of code {kind}")


def world_geom(row, kind, size, pos, rot, verts=None, first_vert=0, first_plane=0,
               nplane=0):
    """Fill a world geom row (``W_WIDTH``) and return it.  ``rot``: rotation matrix (3, 3);
    for a hull, ``verts`` are its vertices (those of the pool from ``first_vert`` on) and
    ``first_plane``, ``nplane`` its planes' slice of the plane pool."""
    row[:] = 0.0
    row[W_KIND] = kind
    row[W_SIZE:W_SIZE + 3] = np.broadcast_to(np.asarray(size, float), 3) if np.ndim(size) == 0 \
        else np.asarray(size, float)[:3]
    row[W_POS:W_POS + 3] = pos
    row[W_ROT:W_ROT + 9] = np.asarray(rot, float).reshape(9)
    if kind == HULL:
        row[W_VERT], row[W_NVERT] = first_vert, len(verts)
        row[W_PLANE], row[W_NPLANE] = first_plane, nplane
    row[W_RADIUS] = bounding_radius(kind, row[W_SIZE:W_SIZE + 3], verts)
    return row


def hull_pools(points):
    """(vertices (n, 3), planes (m, 4)) of the convex hull of ``points`` by qhull (scipy):
    the hull's vertices and one outward plane (unit normal, offset) per face, coplanar
    triangles merged."""
    from rtrigid.geoms import optional

    ConvexHull = optional("scipy.spatial", "convex hulls").ConvexHull

    points = np.asarray(points, float)
    hull = ConvexHull(points)
    verts = points[hull.vertices]
    planes = []
    scale = float(np.max(np.abs(verts)))
    for eq in hull.equations:
        plane = np.array([eq[0], eq[1], eq[2], -eq[3]])
        if not any(np.all(np.abs(plane - p) <= 1e-9 * max(1.0, scale)) for p in planes):
            planes.append(plane)
    return verts, np.array(planes)


@jit_inline
def clip_slab(start, rate, half, t0, t1, f0, f1, axis):
    """The part [t0, t1] of the line x(t) = start + t rate (one coordinate along a box's
    ``axis``; rate not zero) that lies within the slab |x| <= half, and the axis by which each
    end was last cut (f0, f1): one step of clipping a segment or a ray to a box."""
    lo, hi = (-half - start) / rate, (half - start) / rate
    if lo > hi:
        lo, hi = hi, lo
    if lo > t0:
        t0, f0 = lo, axis
    if hi < t1:
        t1, f1 = hi, axis
    return t0, t1, f0, f1


@jit_inline
def to_world(g, l0, l1, l2):
    """The local point l of geom row g in world coordinates."""
    return (g[W_POS] + g[W_ROT] * l0 + g[W_ROT + 1] * l1 + g[W_ROT + 2] * l2,
            g[W_POS + 1] + g[W_ROT + 3] * l0 + g[W_ROT + 4] * l1 + g[W_ROT + 5] * l2,
            g[W_POS + 2] + g[W_ROT + 6] * l0 + g[W_ROT + 7] * l1 + g[W_ROT + 8] * l2)


@jit_inline
def rotate_in(g, d0, d1, d2):
    """The world vector d in the axes of geom row g (R^T d)."""
    return (g[W_ROT] * d0 + g[W_ROT + 3] * d1 + g[W_ROT + 6] * d2,
            g[W_ROT + 1] * d0 + g[W_ROT + 4] * d1 + g[W_ROT + 7] * d2,
            g[W_ROT + 2] * d0 + g[W_ROT + 5] * d1 + g[W_ROT + 8] * d2)


@jit_inline
def rotate_out(g, l0, l1, l2):
    """The vector l of the axes of geom row g in world axes (R l)."""
    return (g[W_ROT] * l0 + g[W_ROT + 1] * l1 + g[W_ROT + 2] * l2,
            g[W_ROT + 3] * l0 + g[W_ROT + 4] * l1 + g[W_ROT + 5] * l2,
            g[W_ROT + 6] * l0 + g[W_ROT + 7] * l1 + g[W_ROT + 8] * l2)


@jit_inline
def local_support(g, verts, l0, l1, l2):
    """Support point of geom row g along the direction l, both in the geom's axes."""
    kind = int(g[W_KIND])
    a, b, c = g[W_SIZE], g[W_SIZE + 1], g[W_SIZE + 2]
    if kind == BOX:
        return (a if l0 >= 0.0 else -a, b if l1 >= 0.0 else -b, c if l2 >= 0.0 else -c)
    if kind == HULL:
        first, n = int(g[W_VERT]), int(g[W_NVERT])
        best, k = -np.inf, first
        for i in range(first, first + n):
            s = verts[i, 0] * l0 + verts[i, 1] * l1 + verts[i, 2] * l2
            if s > best:
                best, k = s, i
        return (verts[k, 0], verts[k, 1], verts[k, 2])
    if kind == SPHERE or kind == CAPSULE:
        s = np.sqrt(l0 * l0 + l1 * l1 + l2 * l2)
        if s > 0.0:
            p = (a * l0 / s, a * l1 / s, a * l2 / s)
        else:
            p = (0.0, 0.0, a)
        if kind == SPHERE:
            return p
        return (p[0], p[1], p[2] + (b if l2 >= 0.0 else -b))
    if kind == ELLIPSOID:
        u0, u1, u2 = a * a * l0, b * b * l1, c * c * l2
        s = np.sqrt(u0 * l0 + u1 * l1 + u2 * l2)
        if s > 0.0:
            return (u0 / s, u1 / s, u2 / s)
        return (0.0, 0.0, c)
    if kind == PRISM:
        best, k = -np.inf, 0
        for i in range(3):
            z = g[T_TOP + 3 * i + 2] if l2 >= 0.0 else g[T_BOTTOM]
            s = g[T_TOP + 3 * i] * l0 + g[T_TOP + 3 * i + 1] * l1 + z * l2
            if s > best:
                best, k = s, i
        return (g[T_TOP + 3 * k], g[T_TOP + 3 * k + 1],
                g[T_TOP + 3 * k + 2] if l2 >= 0.0 else g[T_BOTTOM])
    rho = np.sqrt(l0 * l0 + l1 * l1)
    x, y = (a * l0 / rho, a * l1 / rho) if rho > 0.0 else (0.0, 0.0)
    if kind == CYLINDER:
        return (x, y, b if l2 >= 0.0 else -b)
    # cone: the apex or the base rim's farthest point
    if -0.75 * b * l2 > x * l0 + y * l1 + 0.25 * b * l2:
        return (0.0, 0.0, -0.75 * b)
    return (x, y, 0.25 * b)


@jit_inline
def support(g, verts, d0, d1, d2):
    """World support point of geom row g along the world direction d (any length)."""
    l = rotate_in(g, d0, d1, d2)
    p = local_support(g, verts, l[0], l[1], l[2])
    return to_world(g, p[0], p[1], p[2])
