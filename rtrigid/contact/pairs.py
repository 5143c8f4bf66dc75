"""Narrow phase between two geoms: spheres, capsules and boxes.

A sphere is a capsule of zero length, so spheres and capsules meet by the closest points of
their segments (exact).  A sphere meets a box at the box's closest point to its centre (exact;
from inside, through the nearest face).  Two boxes: the
separating-axis test on all 15 axes; when a face axis has the least overlap (or an edge axis
not clearly less: faces are preferred) the contact normal is along it and the contact points
are every corner of either box that lies inside the other, each with its depth along the
normal -- the face-on-face manifold a stack stands on -- and, when those are fewer than
three, the points where an edge of one box passes through a side face of the other (two
boxes crossing face to face have no corner inside each other); when an edge-edge axis (the
cross product of an edge of each) has clearly the least overlap, one contact midway between
the two edges' closest points, with that overlap as its depth.  Other kinds (a capsule on a
box, cylinders, cones, ellipsoids, hulls) meet through :mod:`.general`; heightfields meet
only the ground so far.

Every test also takes pairs within the speculative margin (``geometry.MARGIN`` times the
smaller bounding radius) as contacts of negative depth.  Every contact is written with
``body`` the first geom's body, ``other`` the second's (negative: static scenery), the normal
pointing from the second into the first.  A geom is given by its row of the geom table and
its world pose (a :class:`~.geometry.Pose`: origin c, orientation q), the pair's friction,
restitution and margin as a :class:`~.geometry.Surface`, a box whose axes are known as a
:class:`Box`.  Nothing is allocated.
"""
from typing import NamedTuple

import numpy as np

from rtrigid._jit import jit
from rtrigid.contact.geometry import (
    BOX,
    CAPSULE,
    G_E,
    G_KIND,
    G_MU,
    G_OFFSET,
    G_P,
    G_QUAT,
    G_RADIUS,
    MARGIN,
    PAIR_POINTS,
    SPHERE,
    C_POINT,
    Surface,
    add_point,
)
from rtrigid.contact.support import clip_slab
from rtrigid.maths.quat import qmul_t, rotate_t


class Box(NamedTuple):
    """A box in the world: its centre ``c`` (3 floats), its three world ``axes`` (three
    triples, :func:`_axes`) and its half extents ``ext`` (3 floats)."""
    c: tuple
    axes: tuple
    ext: tuple


@jit
def geom_pose(geom, g, x, q, out):
    """out <- geom row g's world origin (out[0:3]) and orientation (out[3:7]) on a body at
    (x, q): its origin x + R(q) pos, its axes q o quat."""
    o = rotate_t(q[0], q[1], q[2], q[3], geom[g, G_OFFSET], geom[g, G_OFFSET + 1],
                 geom[g, G_OFFSET + 2], 1.0)
    out[0], out[1], out[2] = x[0] + o[0], x[1] + o[1], x[2] + o[2]
    r = qmul_t(q[0], q[1], q[2], q[3], geom[g, G_QUAT], geom[g, G_QUAT + 1],
               geom[g, G_QUAT + 2], geom[g, G_QUAT + 3])
    out[3], out[4], out[5], out[6] = r[0], r[1], r[2], r[3]


@jit
def _segment(geom, g, c, q):
    """(end, end, radius) of a sphere (both ends at its centre) or a capsule."""
    c = (c[0], c[1], c[2])
    if int(geom[g, G_KIND]) == SPHERE:
        return c, c, geom[g, G_P]
    hl = geom[g, G_P + 1]
    a = rotate_t(q[0], q[1], q[2], q[3], 0.0, 0.0, hl, 1.0)
    return ((c[0] + a[0], c[1] + a[1], c[2] + a[2]), (c[0] - a[0], c[1] - a[1], c[2] - a[2]),
            geom[g, G_P])


@jit
def _clamp01(t):
    return min(1.0, max(0.0, t))


@jit
def _closest_on_segments(p1, q1, p2, q2):
    """Closest points of segments p1q1 and p2q2 (Ericson, Real-Time Collision Detection 5.1.9)."""
    d1 = (q1[0] - p1[0], q1[1] - p1[1], q1[2] - p1[2])
    d2 = (q2[0] - p2[0], q2[1] - p2[1], q2[2] - p2[2])
    r = (p1[0] - p2[0], p1[1] - p2[1], p1[2] - p2[2])
    a = d1[0] * d1[0] + d1[1] * d1[1] + d1[2] * d1[2]
    e = d2[0] * d2[0] + d2[1] * d2[1] + d2[2] * d2[2]
    f = d2[0] * r[0] + d2[1] * r[1] + d2[2] * r[2]
    if a <= 1e-30 and e <= 1e-30:
        s, t = 0.0, 0.0
    elif a <= 1e-30:
        s, t = 0.0, _clamp01(f / e)
    else:
        c = d1[0] * r[0] + d1[1] * r[1] + d1[2] * r[2]
        if e <= 1e-30:
            s, t = _clamp01(-c / a), 0.0
        else:
            b = d1[0] * d2[0] + d1[1] * d2[1] + d1[2] * d2[2]
            den = a * e - b * b
            s = _clamp01((b * f - c * e) / den) if den > 1e-30 else 0.0
            t = (b * s + f) / e
            if t < 0.0:
                s, t = _clamp01(-c / a), 0.0
            elif t > 1.0:
                s, t = _clamp01((b - c) / a), 1.0
    return ((p1[0] + s * d1[0], p1[1] + s * d1[1], p1[2] + s * d1[2]),
            (p2[0] + t * d2[0], p2[1] + t * d2[1], p2[2] + t * d2[2]))


@jit
def _spheres(table, k, cap, a, b, ca, ra, cb, rb, surface):
    """Sphere (ca, ra) of body a against sphere (cb, rb) of body b (surface: the pair's
    :class:`~.geometry.Surface`)."""
    mu, e, margin = surface
    d0, d1, d2 = ca[0] - cb[0], ca[1] - cb[1], ca[2] - cb[2]
    dist = np.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
    depth = ra + rb - dist
    if depth <= -margin or k >= cap:
        return k
    if dist > 1e-12:
        n = (d0 / dist, d1 / dist, d2 / dist)
    else:
        n = (0.0, 0.0, 1.0)
    s = rb - 0.5 * depth
    return add_point(table, k, a, b, 0, cb[0] + s * n[0], cb[1] + s * n[1], cb[2] + s * n[2], n,
                      depth, mu, e)


@jit
def _sphere_box(table, k, cap, a, b, f, s, r, pose, ext, flip, surface):
    """Sphere (s, r) against the box (its :class:`~.geometry.Pose` (cb, qb), half extents
    ext); the normal points from the box into the sphere, or the other way with ``flip`` (the
    box is then body a).  surface: the pair's :class:`~.geometry.Surface`."""
    cb, qb = pose
    mu, e, margin = surface
    if k >= cap:
        return k
    l = rotate_t(qb[0], qb[1], qb[2], qb[3], s[0] - cb[0], s[1] - cb[1], s[2] - cb[2], -1.0)
    p0 = min(ext[0], max(-ext[0], l[0]))
    p1 = min(ext[1], max(-ext[1], l[1]))
    p2 = min(ext[2], max(-ext[2], l[2]))
    d0, d1, d2 = l[0] - p0, l[1] - p1, l[2] - p2
    dist = np.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
    if dist > 1e-12:
        depth = r - dist
        nl = (d0 / dist, d1 / dist, d2 / dist)
    else:  # the centre is inside: out through the nearest face
        best, axis = np.inf, 0
        for i in range(3):
            gap = ext[i] - abs(l[i])
            if gap < best:
                best, axis = gap, i
        sign = 1.0 if l[axis] >= 0.0 else -1.0
        nl = (sign if axis == 0 else 0.0, sign if axis == 1 else 0.0, sign if axis == 2 else 0.0)
        depth = r + best
        p0 = sign * ext[0] if axis == 0 else l[0]
        p1 = sign * ext[1] if axis == 1 else l[1]
        p2 = sign * ext[2] if axis == 2 else l[2]
    if depth <= -margin:
        return k
    n = rotate_t(qb[0], qb[1], qb[2], qb[3], nl[0], nl[1], nl[2], 1.0)
    p = rotate_t(qb[0], qb[1], qb[2], qb[3], p0, p1, p2, 1.0)
    point = (cb[0] + p[0], cb[1] + p[1], cb[2] + p[2])
    if flip:
        n = (-n[0], -n[1], -n[2])
    return add_point(table, k, a, b, f, point[0], point[1], point[2], n, depth, mu, e)


@jit
def _axes(q):
    """The box's three world axes."""
    return (rotate_t(q[0], q[1], q[2], q[3], 1.0, 0.0, 0.0, 1.0),
            rotate_t(q[0], q[1], q[2], q[3], 0.0, 1.0, 0.0, 1.0),
            rotate_t(q[0], q[1], q[2], q[3], 0.0, 0.0, 1.0, 1.0))


@jit
def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@jit
def _reach(axes, ext, l):
    """Half the box's extent along the direction l."""
    return (ext[0] * abs(_dot(axes[0], l)) + ext[1] * abs(_dot(axes[1], l))
            + ext[2] * abs(_dot(axes[2], l)))


@jit
def _near(table, first, k, v, tol):
    """Whether a contact of rows first..k-1 sits at v (within tol): aligned boxes of equal
    faces have each corner inside the other box, at the same place."""
    for j in range(first, k):
        if (abs(table[j, C_POINT] - v[0]) <= tol and abs(table[j, C_POINT + 1] - v[1]) <= tol
                and abs(table[j, C_POINT + 2] - v[2]) <= tol):
            return True
    return False


@jit
def _corners_inside(table, k, cap, a, b, f, first, box_i, box_o, n, sign, surface):
    """Corners of box i (a :class:`Box`: centre ci, axes ai, half extents ei) inside box o
    grown by the surface's ``margin`` along n, each a contact of depth along n: sign +1 for the
    corners of body a (the depth below o's support plane along n), -1 for those of body b; a
    corner where the pair has a contact from row ``first`` on already is skipped."""
    ci, ai, ei = box_i
    co, ao, eo = box_o
    mu, e, margin = surface
    tol = 1e-9 * (eo[0] + eo[1] + eo[2])
    reach_o = _reach(ao, eo, n)
    for i in range(8):
        s0 = ei[0] if i & 1 else -ei[0]
        s1 = ei[1] if i & 2 else -ei[1]
        s2 = ei[2] if i & 4 else -ei[2]
        v = (ci[0] + s0 * ai[0][0] + s1 * ai[1][0] + s2 * ai[2][0],
             ci[1] + s0 * ai[0][1] + s1 * ai[1][1] + s2 * ai[2][1],
             ci[2] + s0 * ai[0][2] + s1 * ai[1][2] + s2 * ai[2][2])
        r = (v[0] - co[0], v[1] - co[1], v[2] - co[2])
        if (abs(_dot(r, ao[0])) > eo[0] + tol + margin * abs(_dot(ao[0], n))
                or abs(_dot(r, ao[1])) > eo[1] + tol + margin * abs(_dot(ao[1], n))
                or abs(_dot(r, ao[2])) > eo[2] + tol + margin * abs(_dot(ao[2], n))):
            continue
        depth = reach_o - sign * _dot(n, r)
        if depth > -margin and k < cap and not _near(table, first, k, v, tol):
            k = add_point(table, k, a, b, f + i, v[0], v[1], v[2], n, depth, mu, e)
    return k


@jit
def _piercings(table, k, cap, a, b, f, first, box_i, box_o, n, sign, surface):
    """Where the edges of box i pass through the side faces of box o (its faces not facing
    along n), each a contact of depth along n as in :func:`_corners_inside` (which takes the
    same arguments): the corners of the overlap that are no corner of either box (two boxes
    crossing face to face, a bar across a plank).  Features f + 2 edge + end."""
    ci, ai, ei = box_i
    co, ao, eo = box_o
    mu, e, margin = surface
    tol = 1e-9 * (eo[0] + eo[1] + eo[2])
    reach_o = _reach(ao, eo, n)
    for edge in range(12):
        axis = edge // 4  # the edge runs along box i's axis ``axis``, at the signs of the others
        u, w = (axis + 1) % 3, (axis + 2) % 3
        su = ei[u] if edge & 1 else -ei[u]
        sw = ei[w] if edge & 2 else -ei[w]
        start = (ci[0] + su * ai[u][0] + sw * ai[w][0] - ei[axis] * ai[axis][0],
                 ci[1] + su * ai[u][1] + sw * ai[w][1] - ei[axis] * ai[axis][1],
                 ci[2] + su * ai[u][2] + sw * ai[w][2] - ei[axis] * ai[axis][2])
        d = (2.0 * ei[axis] * ai[axis][0], 2.0 * ei[axis] * ai[axis][1],
             2.0 * ei[axis] * ai[axis][2])
        r0 = (start[0] - co[0], start[1] - co[1], start[2] - co[2])
        # the part of the edge inside box o (its slabs), and the face each end leaves it by
        t0, t1, f0, f1 = 0.0, 1.0, -1, -1
        for m in range(3):
            p, dp = _dot(r0, ao[m]), _dot(d, ao[m])
            lim = eo[m] + tol
            if abs(dp) < 1e-12 * ei[axis]:
                if abs(p) > lim:
                    t0, t1 = 1.0, 0.0
                continue
            t0, t1, f0, f1 = clip_slab(p, dp, lim, t0, t1, f0, f1, m)
        if t0 > t1:
            continue
        for end in range(2):
            t, face = (t0, f0) if end == 0 else (t1, f1)
            if face < 0 or abs(_dot(ao[face], n)) > 0.5:
                continue  # a corner of box i, or a face of o that faces along n
            v = (start[0] + t * d[0], start[1] + t * d[1], start[2] + t * d[2])
            r = (v[0] - co[0], v[1] - co[1], v[2] - co[2])
            depth = reach_o - sign * _dot(n, r)
            if (depth > -margin and k < cap and k - first < PAIR_POINTS
                    and not _near(table, first, k, v, tol)):
                k = add_point(table, k, a, b, f + 2 * edge + end, v[0], v[1], v[2], n, depth,
                              mu, e)
    return k


@jit
def _edges(table, k, cap, a, b, box_a, i, box_b, j, n, depth, surface):
    """Edge on edge: box a's edge along its axis i deepest against n meets box b's edge along
    its axis j deepest along n (boxes: :class:`Box`); one contact midway between their closest
    points, of the surface's friction and restitution."""
    ca, aa, ea = box_a
    cb, ab, eb = box_b
    mu, e = surface.mu, surface.e
    if k >= cap:
        return k
    pa = ca
    pb = cb
    for m in range(3):
        if m != i:
            s = -ea[m] if _dot(aa[m], n) >= 0.0 else ea[m]
            pa = (pa[0] + s * aa[m][0], pa[1] + s * aa[m][1], pa[2] + s * aa[m][2])
        if m != j:
            s = eb[m] if _dot(ab[m], n) >= 0.0 else -eb[m]
            pb = (pb[0] + s * ab[m][0], pb[1] + s * ab[m][1], pb[2] + s * ab[m][2])
    u, w = aa[i], ab[j]
    c1, c2 = _closest_on_segments(
        (pa[0] - ea[i] * u[0], pa[1] - ea[i] * u[1], pa[2] - ea[i] * u[2]),
        (pa[0] + ea[i] * u[0], pa[1] + ea[i] * u[1], pa[2] + ea[i] * u[2]),
        (pb[0] - eb[j] * w[0], pb[1] - eb[j] * w[1], pb[2] - eb[j] * w[2]),
        (pb[0] + eb[j] * w[0], pb[1] + eb[j] * w[1], pb[2] + eb[j] * w[2]))
    return add_point(table, k, a, b, 16 + 3 * i + j, 0.5 * (c1[0] + c2[0]),
                     0.5 * (c1[1] + c2[1]), 0.5 * (c1[2] + c2[2]), n, depth, mu, e)


@jit
def _boxes(table, k, cap, a, b, ca, qa, ea, cb, qb, eb, surface):
    """Box of body a (centre ca, orientation qa, half extents ea) against box of body b (see
    the module docstring); surface: the pair's :class:`~.geometry.Surface`."""
    margin = surface.margin
    aa, ab = _axes(qa), _axes(qb)
    t = (ca[0] - cb[0], ca[1] - cb[1], ca[2] - cb[2])
    best, n = np.inf, (0.0, 0.0, 1.0)
    for i in range(6):
        l = aa[i] if i < 3 else ab[i - 3]
        gap = _reach(aa, ea, l) + _reach(ab, eb, l) - abs(_dot(t, l))
        if gap < -margin:
            return k
        if gap < best:
            best = gap
            n = l if _dot(t, l) >= 0.0 else (-l[0], -l[1], -l[2])
    edge, edge_i, edge_j, edge_n = np.inf, -1, -1, n
    for i in range(3):
        for j in range(3):
            u, w = aa[i], ab[j]
            l = (u[1] * w[2] - u[2] * w[1], u[2] * w[0] - u[0] * w[2], u[0] * w[1] - u[1] * w[0])
            size = np.sqrt(_dot(l, l))
            if size < 1e-9:
                continue
            l = (l[0] / size, l[1] / size, l[2] / size)
            gap = _reach(aa, ea, l) + _reach(ab, eb, l) - abs(_dot(t, l))
            if gap < -margin:
                return k
            if gap < edge:
                edge, edge_i, edge_j = gap, i, j
                edge_n = l if _dot(t, l) >= 0.0 else (-l[0], -l[1], -l[2])
    # an edge axis wins only clearly (faces are preferred: a face-on-face manifold is stable)
    size = ea[0] + ea[1] + ea[2] + eb[0] + eb[1] + eb[2]
    box_a, box_b = Box(ca, aa, ea), Box(cb, ab, eb)
    if edge_i >= 0 and edge < best - 0.05 * abs(best) - 1e-6 * size:
        return _edges(table, k, cap, a, b, box_a, edge_i, box_b, edge_j, edge_n, edge, surface)
    first = k
    k = _corners_inside(table, k, cap, a, b, 0, first, box_a, box_b, n, 1.0, surface)
    k = _corners_inside(table, k, cap, a, b, 8, first, box_b, box_a, n, -1.0, surface)
    if k - first < 3:  # no face of corners: the overlap's other corners, where edges cross faces
        k = _piercings(table, k, cap, a, b, 32, first, box_a, box_b, n, 1.0, surface)
        k = _piercings(table, k, cap, a, b, 64, first, box_b, box_a, n, -1.0, surface)
    return k


@jit
def pair_coefficients(geom, ga, gb):
    """The :class:`~.geometry.Surface` (friction, restitution, speculative margin) of the pair
    of geom rows ga, gb."""
    return Surface(np.sqrt(geom[ga, G_MU] * geom[gb, G_MU]), max(geom[ga, G_E], geom[gb, G_E]),
                   MARGIN * min(geom[ga, G_RADIUS], geom[gb, G_RADIUS]))


@jit
def pair_contacts(table, k, cap, a, b, ga, gb, geom, pa, pb):
    """Append the contacts of geom rows ga (of body a) and gb (of body b, negative: static)
    at world poses pa = (ca, qa), pb = (cb, qb) (:class:`~.geometry.Pose`) from row k, at most
    up to row ``cap``; returns the next free row."""
    ca, qa = pa
    cb, qb = pb
    ka, kb = int(geom[ga, G_KIND]), int(geom[gb, G_KIND])
    surface = pair_coefficients(geom, ga, gb)
    round_a = ka == SPHERE or ka == CAPSULE
    round_b = kb == SPHERE or kb == CAPSULE
    if round_a and round_b:
        p1, q1, ra = _segment(geom, ga, ca, qa)
        p2, q2, rb = _segment(geom, gb, cb, qb)
        c1, c2 = _closest_on_segments(p1, q1, p2, q2)
        return _spheres(table, k, cap, a, b, c1, ra, c2, rb, surface)
    if ka == BOX and kb == BOX:
        return _boxes(table, k, cap, a, b, (ca[0], ca[1], ca[2]), qa,
                      (geom[ga, G_P], geom[ga, G_P + 1], geom[ga, G_P + 2]),
                      (cb[0], cb[1], cb[2]), qb,
                      (geom[gb, G_P], geom[gb, G_P + 1], geom[gb, G_P + 2]), surface)
    if ka == SPHERE and kb == BOX:
        return _sphere_box(table, k, cap, a, b, 0, (ca[0], ca[1], ca[2]), geom[ga, G_P], pb,
                           (geom[gb, G_P], geom[gb, G_P + 1], geom[gb, G_P + 2]), False,
                           surface)
    if ka == BOX and kb == SPHERE:
        return _sphere_box(table, k, cap, a, b, 0, (cb[0], cb[1], cb[2]), geom[gb, G_P], pa,
                           (geom[ga, G_P], geom[ga, G_P + 1], geom[ga, G_P + 2]), True,
                           surface)
    return k


@jit
def has_pair_test(ka, kb):
    """Whether :func:`pair_contacts` has a test for geom kinds (codes) ka and kb."""
    fast = (SPHERE, CAPSULE, BOX)
    # a capsule meets a box through the general narrow phase: its two end spheres (the fast
    # test it had) miss a capsule whose middle lies across the box
    return ka in fast and kb in fast and not ((ka == CAPSULE and kb == BOX)
                                              or (ka == BOX and kb == CAPSULE))
