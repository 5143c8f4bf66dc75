"""Narrow phase against the ground: the points of a shape below a plane, exactly.

Every collision shape is convex, so its deepest point below a plane of normal n is its support
point in the direction -n.  A shape resting on a face or an edge touches along a segment or an
area; it gets the corners of that feature as contact points, so it rests without rocking:

- sphere: the one support point;
- capsule: each end sphere's support point (two when it lies flat);
- box: each of its 8 corners;
- cylinder: on each rim circle the deepest point and the three points 90, 180 and 270 degrees
  round from it (a flat face gives four, the cylinder on its side one per rim, a tilted one
  the one exact rim point);
- cone: the apex, and the base rim as the cylinder's;
- ellipsoid: the one support point;
- convex hull: its vertices below the plane, reduced to at most ``HULL_POINTS`` of them
  (the deepest, the one farthest from it and the two farthest either side of their line:
  the corners of the face it rests on).

The support point is exact for every pose (a tilted disc touches at its exact rim point, a cone
on its apex at its apex).  A point counts when it lies below the plane or within the
speculative margin above it (depth > -``MARGIN`` times the shape's bounding radius).  A geom
sits in its body's frame at ``pos`` from the centre of mass, turned by ``quat``; the kernels
take its world centre and orientation.  In its own frame its axis is z (cylinder, capsule,
cone: apex at -3 height / 4, base centre at +height / 4, as :meth:`rtrigid.Model.add_body`
draws it).

Kernels write into the contact table of :mod:`rtrigid.contact` and allocate nothing.  They
pass a pair's surface coefficients as a :class:`Surface`, a ground's plane as a :class:`Plane`
and a geom's world pose as a :class:`Pose`.
"""
from typing import NamedTuple

import numpy as np

from rtrigid._jit import jit
from rtrigid.maths.quat import rotate_t

NONE = -1
SPHERE = 0
CAPSULE = 1
BOX = 2
CYLINDER = 3
CONE = 4
ELLIPSOID = 5
HULL = 6
HEIGHTFIELD = 7
PRISM = 8  # a heightfield cell's triangle extruded downward: world rows only (contact.fieldcontact)
SHAPE_CODES = {"sphere": SPHERE, "capsule": CAPSULE, "box": BOX, "cylinder": CYLINDER,
               "cone": CONE}
# every geom kind (rtrigid.Model.add_geom): the body shapes', and the kinds only geoms have
GEOM_CODES = {**SHAPE_CODES, "ellipsoid": ELLIPSOID, "convex": HULL, "mesh": HULL,
              "heightfield": HEIGHTFIELD}
MAX_POINTS = 8  # most ground contacts one shape makes with one plane (box, cylinder)
HULL_POINTS = 4  # most ground contacts of a hull with many vertices on the plane
PAIR_POINTS = 16  # most contacts one pair test writes (box on box: every corner)
# speculative margin, a fraction of the shape's bounding radius: points this close to a plane
# (or to another shape) count as contacts before they touch (depth down to -margin), so a
# resting stack keeps its contacts -- and their warm-started impulses -- from step to step
MARGIN = 0.01

# per-geom float row
G_KIND = 0
G_P = 1        # 3 shape parameters: sphere r; capsule / cylinder r, half_length; box half
               # extents; cone r, height; ellipsoid radii; hull: half extents of its box
               # about the geom origin; heightfield: sx, sy, highest point
G_OFFSET = 4   # geom origin from the body's centre of mass, body axes (its pos)
G_MU = 7
G_E = 8
G_RADIUS = 9   # radius of a sphere about the geom origin that holds the shape
G_MUT = 10     # torsional friction (m): a torque about the normal up to G_MUT x normal force
G_MUR = 11     # rolling friction (m): a torque about the tangents up to G_MUR x normal force
G_QUAT = 12    # geom axes in body axes (its quat, unit, scalar first)
G_TIGHT = 16   # a sphere that holds the shape more tightly than G_RADIUS's about its origin:
               # its centre (geom axes; a hull's box's centre, others 0)
G_TIGHT_R = 19  # and its radius (others: G_RADIUS)
G_HALF = 20    # half extents of its box about G_TIGHT, geom axes (a hull's; others 0: none)
G_WIDTH = 23

# per-geom int row: frozen, then the broad phase's scratch
GI_BODY = 0     # its body, -1: the world (static scenery)
GI_KIND = 1
GI_CONTYPE = 2  # MuJoCo's filter bits: a and b may touch when
GI_CONAFFINITY = 3  # (contype_a & conaffinity_b) or (contype_b & conaffinity_a)
GI_VSTART = 4   # its rows of the vertex pool (hull vertices; a heightfield's grid points)
GI_VCOUNT = 5
GI_PSTART = 6   # its rows of the plane pool (hull faces: outward unit normal, offset)
GI_PCOUNT = 7
GI_ROWS = 8     # a heightfield's grid: rows (y) and columns (x) of the vertex pool's points
GI_COLS = 9
GI_HANDLE = 10  # its handle (index into Model.geoms); the table's rows are in body-name order
GI_SWEEP = 11   # scratch: the broad phase's sweep order (geom rows)
GI_PAIRED = 12  # 1 if some other geom may touch it (manifold.may_touch), else 0: not swept
GI_WIDTH = 13

# per-geom float scratch of the broad phase
W_LO = 0       # lower end of its reach along x (inf: not swept)
W_CENTRE = 1   # world position of its origin
W_QUAT = 4     # world orientation of its axes
W_TIGHT = 8    # world centre of its G_TIGHT sphere (the general pairs' form of the sweep)
W_HALF = 11    # half extents of the world box that holds its G_HALF box (when it has one)
W_WIDTH = 14

# per-ground row
P_NORMAL = 0
P_HEIGHT = 3
P_MU = 4
P_E = 5
P_MUT = 6
P_MUR = 7
P_WIDTH = 8

# contact table row: what contacts() reports, then the solver's per-contact data
C_BODY = 0
C_OTHER = 1    # -1 - g for ground g
C_POINT = 2
C_NORMAL = 5   # from the other side into the body
C_DEPTH = 8
C_IMPULSE = 9  # world impulse on the body at the point
C_MU = 12
C_E = 13
C_T1 = 14      # tangent basis
C_T2 = 17
C_ARM = 20     # point - centre of mass
C_KN = 23      # 1 / (n K n)
C_KT = 24      # inverse of the 2x2 tangent block of K, row-major
C_LAMBDA = 28  # accumulated impulse (normal, t1, t2)
C_TARGET = 31  # normal velocity the solve aims for
C_KS = 32      # 1 / the largest eigenvalue of the tangent block of K
C_AN = 33      # I_w^-1 (r x d) for d = n, t1, t2: the turn a unit impulse along d gives
C_ARMB = 42    # the other body's arm (point - its centre of mass)
C_BN = 45      # its turn per unit impulse -d along n, t1, t2
C_FEATURE = 54  # which feature of the pair made it (a corner, a rim point): warm starts
C_MUT = 55     # torsional friction of the pair (m): max of the two sides'
C_MUR = 56     # rolling friction of the pair (m): max of the two sides'
C_SPIN = 57    # accumulated angular impulse (about n, t1, t2) of the torsional/rolling rows
C_GEOM = 60    # the body's geom (row of the geom table)
C_GEOMB = 61   # the other side's geom row, or -1 - g for ground g
C_ANCHOR = 62  # where it holds (static friction): its point in the body's frame, then in the
#                other body's frame (the world's for a ground); see contact.solver.anchors
C_HELD = 68    # 1: it sticks (its friction inside the cone) and holds at C_ANCHOR
C_DRIFT = 69   # how far, along the tangents, the body's anchor slid from the other's
C_SLIP = 72    # the speed of its slip before the velocity solve, and after it
C_LIFT = 74    # the position correction's accumulated multipliers (normal, t1, t2)
C_LIFTK = 77   # its inverse responses: 1 / (n K n), and of its tangent rows (translations);
#                then 1 if its normal row turns the bodies (contact.solver._lift)
C_WIDTH = 80


class Surface(NamedTuple):
    """A pair's surface coefficients: friction ``mu``, restitution ``e``, and the speculative
    ``margin`` (m): a point counts as a contact down to depth -margin."""
    mu: float
    e: float
    margin: float


class Plane(NamedTuple):
    """A ground's plane n.p = h: unit normal ``n`` (3 floats), height ``h``."""
    n: tuple
    h: float


class Pose(NamedTuple):
    """A geom's world pose: its origin ``c`` (3,) and orientation ``q`` (4,: unit quaternion,
    scalar first)."""
    c: np.ndarray
    q: np.ndarray


@jit
def add_point(table, k, body, other, feature, p0, p1, p2, n, depth, mu, e):
    """Write a contact in row k of the table; returns k + 1."""
    row = table[k]
    row[C_FEATURE] = feature
    row[C_BODY] = body
    row[C_OTHER] = other
    row[C_POINT], row[C_POINT + 1], row[C_POINT + 2] = p0, p1, p2
    row[C_NORMAL], row[C_NORMAL + 1], row[C_NORMAL + 2] = n[0], n[1], n[2]
    row[C_DEPTH] = depth
    row[C_MU] = mu
    row[C_E] = e
    return k + 1


@jit
def _point(table, k, body, other, f, p, radius, plane, surface):
    """A contact at the support point of a sphere of ``radius`` (0: a corner) centred at p (3
    floats), if it lies below the :class:`Plane` n.p = h + margin (margin of the
    :class:`Surface`); returns the next free row."""
    p0, p1, p2 = p
    n, h = plane
    mu, e, margin = surface
    depth = h - (n[0] * p0 + n[1] * p1 + n[2] * p2) + radius
    if depth > -margin:
        return add_point(table, k, body, other, f, p0 - radius * n[0], p1 - radius * n[1],
                          p2 - radius * n[2], n, depth, mu, e)
    return k


@jit
def _circle(table, k, body, other, f, c, a, ex, radius, plane, surface, lead):
    """The deepest point of the circle (centre c, unit axis a, radius) below the plane and the
    three a quarter turn apart from it (ex: a unit vector across a, used when the circle lies
    flat and has no deepest point); plane, surface: as :func:`_point` takes them.  ``lead``:
    the plane's normal as the body will see it half a step ahead (see
    :func:`ground_contacts`); the deepest point is picked for it."""
    c0, c1, c2 = c
    d = lead[0] * a[0] + lead[1] * a[1] + lead[2] * a[2]
    u0, u1, u2 = -lead[0] + d * a[0], -lead[1] + d * a[1], -lead[2] + d * a[2]
    s = np.sqrt(u0 * u0 + u1 * u1 + u2 * u2)
    if s > 1e-9:
        u0, u1, u2 = u0 / s, u1 / s, u2 / s
    else:
        u0, u1, u2 = ex
    v0 = a[1] * u2 - a[2] * u1
    v1 = a[2] * u0 - a[0] * u2
    v2 = a[0] * u1 - a[1] * u0
    k = _point(table, k, body, other, f + 0,
               (c0 + radius * u0, c1 + radius * u1, c2 + radius * u2), 0.0, plane, surface)
    k = _point(table, k, body, other, f + 1,
               (c0 + radius * v0, c1 + radius * v1, c2 + radius * v2), 0.0, plane, surface)
    k = _point(table, k, body, other, f + 2,
               (c0 - radius * u0, c1 - radius * u1, c2 - radius * u2), 0.0, plane, surface)
    return _point(table, k, body, other, f + 3,
                  (c0 - radius * v0, c1 - radius * v1, c2 - radius * v2), 0.0, plane, surface)


@jit
def _lead(n, w, ahead):
    """n turned by -w ahead (Rodrigues): the normal as a body turning at w (world) will see it
    after ``ahead`` seconds, in today's axes."""
    s = np.sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2])
    if s * ahead < 1e-12:
        return n
    k0, k1, k2 = w[0] / s, w[1] / s, w[2] / s
    c, sn = np.cos(s * ahead), -np.sin(s * ahead)
    kn = k0 * n[0] + k1 * n[1] + k2 * n[2]
    x0 = k1 * n[2] - k2 * n[1]
    x1 = k2 * n[0] - k0 * n[2]
    x2 = k0 * n[1] - k1 * n[0]
    return (n[0] * c + x0 * sn + k0 * kn * (1.0 - c), n[1] * c + x1 * sn + k1 * kn * (1.0 - c),
            n[2] * c + x2 * sn + k2 * kn * (1.0 - c))


@jit
def _hull_points(table, k, b, other, verts, v0, nv, pose, plane, surface):
    """A hull's vertices below the plane (or within the margin), at most ``HULL_POINTS``:
    when more lie there, the deepest, the one farthest from it along the plane, and the two
    farthest either side of their line (the corners of the face it rests on).  Feature: the
    vertex's index in the hull.  pose: the hull's :class:`Pose`; plane, surface: as
    :func:`_point` takes them."""
    c, qg = pose
    n, h = plane
    margin = surface.margin
    q0, q1, q2, q3 = qg[0], qg[1], qg[2], qg[3]
    m = rotate_t(q0, q1, q2, q3, n[0], n[1], n[2], -1.0)  # the normal in geom axes
    below, deepest, best = 0, -1, -np.inf
    for i in range(nv):
        v = verts[v0 + i]
        depth = h - (n[0] * c[0] + n[1] * c[1] + n[2] * c[2]) - (m[0] * v[0] + m[1] * v[1]
                                                                  + m[2] * v[2])
        if depth > -margin:
            below += 1
            if depth > best:
                best, deepest = depth, i
    if below == 0:
        return k
    if below <= HULL_POINTS:
        for i in range(nv):
            k = _hull_vertex(table, k, b, other, verts, v0, i, pose, plane, surface)
        return k
    # reduce: in geom axes, distances across the normal m
    p = verts[v0 + deepest]
    far, second = -1.0, deepest
    for i in range(nv):
        v = verts[v0 + i]
        if h - (n[0] * c[0] + n[1] * c[1] + n[2] * c[2]) - dot3(m, v) <= -margin:
            continue
        d0, d1, d2 = v[0] - p[0], v[1] - p[1], v[2] - p[2]
        t = d0 * m[0] + d1 * m[1] + d2 * m[2]
        s = d0 * d0 + d1 * d1 + d2 * d2 - t * t
        if s > far:
            far, second = s, i
    u = verts[v0 + second]
    e0, e1, e2 = u[0] - p[0], u[1] - p[1], u[2] - p[2]
    # side of the line p-u across the normal: (e x (v - p)) . m
    lo, hi, left, right = 0.0, 0.0, deepest, deepest
    for i in range(nv):
        v = verts[v0 + i]
        if h - (n[0] * c[0] + n[1] * c[1] + n[2] * c[2]) - dot3(m, v) <= -margin:
            continue
        d0, d1, d2 = v[0] - p[0], v[1] - p[1], v[2] - p[2]
        side = ((e1 * d2 - e2 * d1) * m[0] + (e2 * d0 - e0 * d2) * m[1]
                + (e0 * d1 - e1 * d0) * m[2])
        if side > hi:
            hi, left = side, i
        if side < lo:
            lo, right = side, i
    picks = (deepest, second, left, right)
    for j in range(4):
        i = picks[j]
        fresh = True
        for jj in range(j):
            if picks[jj] == i:
                fresh = False
        if fresh:
            k = _hull_vertex(table, k, b, other, verts, v0, i, pose, plane, surface)
    return k


@jit
def dot3(a, b):
    """a . b of two 3-vectors (tuples or arrays)."""
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@jit
def _hull_vertex(table, k, b, other, verts, v0, i, pose, plane, surface):
    """Hull vertex i as a contact with the plane, if within the margin (the arguments as
    :func:`_hull_points` takes them)."""
    c, qg = pose
    v = verts[v0 + i]
    r = rotate_t(qg[0], qg[1], qg[2], qg[3], v[0], v[1], v[2], 1.0)
    return _point(table, k, b, other, i, (c[0] + r[0], c[1] + r[1], c[2] + r[2]), 0.0, plane,
                  surface)


@jit
def clear_of(plane, c, radius):
    """Whether a geom held by the sphere of ``radius`` about c lies so far above the plane
    that no point of it comes within its contact margin (MARGIN x radius): then
    :func:`ground_contacts` would find nothing.  (Tested with a margin of twice that, far
    beyond the round-off of its points.)"""
    return (plane[P_NORMAL] * c[0] + plane[P_NORMAL + 1] * c[1] + plane[P_NORMAL + 2] * c[2]
            - plane[P_HEIGHT]) > (1.0 + 2.0 * MARGIN) * radius


@jit
def ground_contacts(table, k, b, gr, geom, geomi, verts, pose, g, plane, w, ahead):
    """Append the contacts of geom row ``gr`` (of body b) with ground g (row ``plane``) to the
    table from row k; returns the next free row.  pose: the geom's world origin and
    orientation (a :class:`Pose`); w: its body's angular velocity (world), ahead: half the
    step; verts: the vertex pool (a hull's vertices, geom axes).

    A rim (cylinder, cone) rolling on the plane touches it at a point that runs round the rim.
    Its contact is the rim point that will be lowest half a step ahead (the body turned by
    w * ahead), not the lowest now: the next free flight then turns the rim about an axis
    through the middle of the arc it rolls over, which dips into the plane only at third
    order in dt.  Taking today's lowest point, the free flight's turn about the fixed axis
    through it dips the next one into the plane by ~ a (w dt)^2 cos^2(alpha) / (2 sin alpha);
    the push-out lifts the disc by that every step and the energy rule takes the lift's
    potential energy from its motion: the rolling disc rose and slowed (Euler's disk ran
    backwards)."""
    row = geom[gr]
    kind = int(row[G_KIND])
    if kind == NONE or kind == HEIGHTFIELD:
        return k
    c, qg = pose
    q0, q1, q2, q3 = qg[0], qg[1], qg[2], qg[3]
    n = (plane[P_NORMAL], plane[P_NORMAL + 1], plane[P_NORMAL + 2])
    h = plane[P_HEIGHT]
    mu = np.sqrt(row[G_MU] * plane[P_MU])
    e = max(row[G_E], plane[P_E])
    other = -1 - g
    margin = MARGIN * row[G_RADIUS]
    ground, surface = Plane(n, h), Surface(mu, e, margin)
    c0, c1, c2 = c[0], c[1], c[2]
    p0, p1, p2 = row[G_P], row[G_P + 1], row[G_P + 2]
    if kind == SPHERE:
        return _point(table, k, b, other, 0, (c0, c1, c2), p0, ground, surface)
    if kind == HULL:
        return _hull_points(table, k, b, other, verts, geomi[gr, GI_VSTART],
                            geomi[gr, GI_VCOUNT], pose, ground, surface)
    if kind == ELLIPSOID:
        # the support point in -n: -D^2 m / |D m|, m the normal in geom axes
        m = rotate_t(q0, q1, q2, q3, n[0], n[1], n[2], -1.0)
        s = np.sqrt((p0 * m[0]) ** 2 + (p1 * m[1]) ** 2 + (p2 * m[2]) ** 2)
        r = rotate_t(q0, q1, q2, q3, -p0 * p0 * m[0] / s, -p1 * p1 * m[1] / s,
                     -p2 * p2 * m[2] / s, 1.0)
        return _point(table, k, b, other, 0, (c0 + r[0], c1 + r[1], c2 + r[2]), 0.0, ground,
                      surface)
    if kind == BOX:
        for i in range(8):
            s0 = p0 if i & 1 else -p0
            s1 = p1 if i & 2 else -p1
            s2 = p2 if i & 4 else -p2
            r = rotate_t(q0, q1, q2, q3, s0, s1, s2, 1.0)
            k = _point(table, k, b, other, i, (c0 + r[0], c1 + r[1], c2 + r[2]), 0.0, ground,
                       surface)
        return k
    a = rotate_t(q0, q1, q2, q3, 0.0, 0.0, 1.0, 1.0)
    if kind == CAPSULE:
        k = _point(table, k, b, other, 0, (c0 + p1 * a[0], c1 + p1 * a[1], c2 + p1 * a[2]), p0,
                   ground, surface)
        return _point(table, k, b, other, 1, (c0 - p1 * a[0], c1 - p1 * a[1], c2 - p1 * a[2]),
                      p0, ground, surface)
    ex = rotate_t(q0, q1, q2, q3, 1.0, 0.0, 0.0, 1.0)
    lead = _lead(n, w, ahead)
    if kind == CYLINDER:
        k = _circle(table, k, b, other, 0, (c0 + p1 * a[0], c1 + p1 * a[1], c2 + p1 * a[2]), a,
                    ex, p0, ground, surface, lead)
        return _circle(table, k, b, other, 4, (c0 - p1 * a[0], c1 - p1 * a[1], c2 - p1 * a[2]),
                       a, ex, p0, ground, surface, lead)
    # cone: apex at -3/4 height, base rim at +1/4 height
    k = _point(table, k, b, other, 0, (c0 - 0.75 * p1 * a[0], c1 - 0.75 * p1 * a[1],
                                       c2 - 0.75 * p1 * a[2]), 0.0, ground, surface)
    return _circle(table, k, b, other, 1, (c0 + 0.25 * p1 * a[0], c1 + 0.25 * p1 * a[1],
                                           c2 + 0.25 * p1 * a[2]), a, ex, p0, ground, surface,
                   lead)
