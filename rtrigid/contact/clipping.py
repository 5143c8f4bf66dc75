"""The contact manifold of face-on contact, by clipping one face against the other.

:func:`.convex.collide` gives one deepest point.  A box resting on a hull touches along a whole
face, and needs its corners as contacts to rest without rocking, so :func:`manifold` turns the
result into up to ``MAX_POINTS`` points, as Box2D and Jolt do:

1. each geom's feature facing the other along the normal (:func:`face`): a box's or a hull's
   face (a hull's from its plane pool; a heightfield prism's triangle), a cylinder's or a cone's base as a polygon of
   ``RIM_POINTS`` rim points, the straight line along a capsule's, a cylinder's or a cone's
   side; a sphere or an ellipsoid has none (one point);
2. the better aligned face (within ``FACE_COS`` of the normal) is the reference, the other
   geom's feature facing it the incident one;
3. the incident polygon is clipped against the side planes of the reference polygon
   (Sutherland-Hodgman); each remaining point below the reference plane, or within ``margin``
   above it, is a contact, its depth measured along the reference face's normal, its point
   midway between the incident point and the reference plane;
4. with the deepest point of ``collide`` when it is deeper than all of them (a tilted base's
   rim point between the polygon's), the candidates are reduced to at most four: the
   deepest, the farthest from it, and the two spanning the largest area on either side.

Without a reference face (curved pairs, edges) the manifold is the one deepest point.
Nothing is allocated: the polygons live in a :class:`ClipSpace`.
"""
from collections import namedtuple

import numpy as np

from rtrigid._jit import jit
from rtrigid.contact.convex import (
    R_DIST,
    R_NORMAL,
    R_PA,
    R_PB,
    W_KIND,
    W_NPLANE,
    W_NVERT,
    W_PLANE,
    W_RADIUS,
    W_SIZE,
    W_VERT,
    rotate_in,
    rotate_out,
    to_world,
)
from rtrigid.contact.geometry import BOX, CAPSULE, CONE, CYLINDER, HULL, PRISM
from rtrigid.contact.support import T_NORMAL, T_TOP

MAX_POINTS = 4
POLY = 16          # most vertices of a face polygon (a hull face with more keeps its first 16)
RIM_POINTS = 8     # a base disc as a polygon
FACE_COS = 0.95    # a face is used when its normal is within ~18 degrees of the contact's
M_POINT = 0        # manifold row: contact point (world), depth
M_DEPTH = 3
M_WIDTH = 4

ClipSpace = namedtuple("ClipSpace", "ref inc buf cand")
ClipSpace.__doc__ = """Scratch of :func:`manifold`: ``ref (POLY, 3)`` the reference polygon,
``inc``, ``buf (4 POLY, 3)`` the incident polygon as it is clipped, ``cand (4 POLY + 1,
M_WIDTH)`` the candidate contacts."""


def clip_space():
    """A fresh :class:`ClipSpace` (one per thread)."""
    return ClipSpace(np.zeros((POLY, 3)), np.zeros((4 * POLY, 3)), np.zeros((4 * POLY, 3)),
                     np.zeros((4 * POLY + 1, M_WIDTH)))


@jit
def _put(poly, k, g, l0, l1, l2):
    p = to_world(g, l0, l1, l2)
    poly[k, 0], poly[k, 1], poly[k, 2] = p
    return k + 1


@jit
def _order(poly, count, n0, n1, n2):
    """Sort a convex polygon's vertices by angle about their centroid, round the normal n."""
    c0 = c1 = c2 = 0.0
    for i in range(count):
        c0 += poly[i, 0] / count
        c1 += poly[i, 1] / count
        c2 += poly[i, 2] / count
    # u across n; v = n x u
    if abs(n0) < 0.57735:
        u0, u1, u2 = 0.0, n2, -n1
    else:
        u0, u1, u2 = -n2, 0.0, n0
    size = np.sqrt(u0 * u0 + u1 * u1 + u2 * u2)
    u0, u1, u2 = u0 / size, u1 / size, u2 / size
    v0, v1, v2 = n1 * u2 - n2 * u1, n2 * u0 - n0 * u2, n0 * u1 - n1 * u0
    for i in range(1, count):  # insertion sort by angle
        x0, x1, x2 = poly[i, 0], poly[i, 1], poly[i, 2]
        a = np.arctan2((x0 - c0) * v0 + (x1 - c1) * v1 + (x2 - c2) * v2,
                       (x0 - c0) * u0 + (x1 - c1) * u1 + (x2 - c2) * u2)
        j = i - 1
        while j >= 0:
            y0, y1, y2 = poly[j, 0], poly[j, 1], poly[j, 2]
            b = np.arctan2((y0 - c0) * v0 + (y1 - c1) * v1 + (y2 - c2) * v2,
                           (y0 - c0) * u0 + (y1 - c1) * u1 + (y2 - c2) * u2)
            if b <= a:
                break
            poly[j + 1, 0], poly[j + 1, 1], poly[j + 1, 2] = y0, y1, y2
            j -= 1
        poly[j + 1, 0], poly[j + 1, 1], poly[j + 1, 2] = x0, x1, x2


@jit
def _rim(poly, g, r, z, start0, start1):
    """RIM_POINTS points of the circle of radius r at height z, from the direction start."""
    k = 0
    for i in range(RIM_POINTS):
        a = 2.0 * np.pi * i / RIM_POINTS
        c, s = np.cos(a), np.sin(a)
        k = _put(poly, k, g, r * (c * start0 - s * start1), r * (s * start0 + c * start1), z)
    return k


@jit
def face(g, verts, planes, d0, d1, d2, poly):
    """The feature of geom row g facing the world direction d: (count of its vertices written
    to ``poly`` in world coordinates -- 3 or more for a face, 2 for a straight line on the
    surface, 0 for none --, its outward unit normal (world), the cosine between the normal
    and d)."""
    kind = int(g[W_KIND])
    l0, l1, l2 = rotate_in(g, d0, d1, d2)
    size = np.sqrt(l0 * l0 + l1 * l1 + l2 * l2)
    l0, l1, l2 = l0 / size, l1 / size, l2 / size
    a, b, c = g[W_SIZE], g[W_SIZE + 1], g[W_SIZE + 2]
    if kind == BOX:
        i = 0
        if abs(l1) > abs(l0):
            i = 1
        if abs(l2) > max(abs(l0), abs(l1)):
            i = 2
        li = l0 if i == 0 else (l1 if i == 1 else l2)
        s = 1.0 if li >= 0.0 else -1.0
        j = (i + 1) % 3
        for m in range(4):
            sj = 1.0 if (m == 0 or m == 3) else -1.0
            sk = 1.0 if m < 2 else -1.0
            # axis i at s, the next axis (j) at sj, the one after at sk
            f0 = s if i == 0 else (sj if j == 0 else sk)
            f1 = s if i == 1 else (sj if j == 1 else sk)
            f2 = s if i == 2 else (sj if j == 2 else sk)
            _put(poly, m, g, f0 * a, f1 * b, f2 * c)
        n = rotate_out(g, s if i == 0 else 0.0, s if i == 1 else 0.0, s if i == 2 else 0.0)
        return 4, n[0], n[1], n[2], abs(li)
    if kind == HULL:
        first, count = int(g[W_PLANE]), int(g[W_NPLANE])
        best, p = -np.inf, first
        for k in range(first, first + count):
            s = planes[k, 0] * l0 + planes[k, 1] * l1 + planes[k, 2] * l2
            if s > best:
                best, p = s, k
        tol = 1e-7 * g[W_RADIUS]
        m = 0
        v0, nv = int(g[W_VERT]), int(g[W_NVERT])
        for i in range(v0, v0 + nv):
            h = planes[p, 0] * verts[i, 0] + planes[p, 1] * verts[i, 1] + planes[p, 2] * verts[i, 2]
            if abs(h - planes[p, 3]) <= tol and m < poly.shape[0]:
                m = _put(poly, m, g, verts[i, 0], verts[i, 1], verts[i, 2])
        n = rotate_out(g, planes[p, 0], planes[p, 1], planes[p, 2])
        _order(poly, m, n[0], n[1], n[2])
        return m, n[0], n[1], n[2], best
    if kind == PRISM:
        # its triangle, the one face that is the heightfield's surface
        cos = g[T_NORMAL] * l0 + g[T_NORMAL + 1] * l1 + g[T_NORMAL + 2] * l2
        if cos <= 0.0:
            return 0, 0.0, 0.0, 0.0, 0.0
        for i in range(3):
            _put(poly, i, g, g[T_TOP + 3 * i], g[T_TOP + 3 * i + 1], g[T_TOP + 3 * i + 2])
        n = rotate_out(g, g[T_NORMAL], g[T_NORMAL + 1], g[T_NORMAL + 2])
        return 3, n[0], n[1], n[2], cos
    rho = np.sqrt(l0 * l0 + l1 * l1)
    x, y = (l0 / rho, l1 / rho) if rho > 0.0 else (1.0, 0.0)
    if kind == CYLINDER and abs(l2) >= FACE_COS:
        z = b if l2 >= 0.0 else -b
        n = rotate_out(g, 0.0, 0.0, 1.0 if l2 >= 0.0 else -1.0)
        return _rim(poly, g, a, z, x, y), n[0], n[1], n[2], abs(l2)
    if kind == CYLINDER or kind == CAPSULE:
        if rho < FACE_COS:
            return 0, 0.0, 0.0, 0.0, 0.0
        _put(poly, 0, g, a * x, a * y, -b)
        _put(poly, 1, g, a * x, a * y, b)
        n = rotate_out(g, x, y, 0.0)
        return 2, n[0], n[1], n[2], rho
    if kind == CONE:
        if l2 >= FACE_COS:
            n = rotate_out(g, 0.0, 0.0, 1.0)
            return _rim(poly, g, a, 0.25 * b, x, y), n[0], n[1], n[2], l2
        # the side's outward normal along the line through the apex at this azimuth
        s = np.sqrt(a * a + b * b)
        m0, m1, m2 = b * x / s, b * y / s, -a / s
        cos = m0 * l0 + m1 * l1 + m2 * l2
        if cos < FACE_COS:
            return 0, 0.0, 0.0, 0.0, 0.0
        _put(poly, 0, g, 0.0, 0.0, -0.75 * b)
        _put(poly, 1, g, a * x, a * y, 0.25 * b)
        n = rotate_out(g, m0, m1, m2)
        return 2, n[0], n[1], n[2], cos
    return 0, 0.0, 0.0, 0.0, 0.0


@jit
def _clip(src, count, dst, p0, p1, p2, m0, m1, m2):
    """Sutherland-Hodgman: the part of polygon src[:count] where m . (x - p) >= 0 into dst;
    returns its count (a 2-point polygon is a segment)."""
    k = 0
    if count == 0:
        return 0
    if count == 2:
        da = m0 * (src[0, 0] - p0) + m1 * (src[0, 1] - p1) + m2 * (src[0, 2] - p2)
        db = m0 * (src[1, 0] - p0) + m1 * (src[1, 1] - p1) + m2 * (src[1, 2] - p2)
        if da < 0.0 and db < 0.0:
            return 0
        for i in range(2):
            d_self, d_other = (da, db) if i == 0 else (db, da)
            j = 1 - i
            if d_self >= 0.0:
                dst[k, 0], dst[k, 1], dst[k, 2] = src[i, 0], src[i, 1], src[i, 2]
            else:
                t = d_self / (d_self - d_other)
                for c in range(3):
                    dst[k, c] = src[i, c] + t * (src[j, c] - src[i, c])
            k += 1
        return k
    for i in range(count):
        j = (i + 1) % count
        di = m0 * (src[i, 0] - p0) + m1 * (src[i, 1] - p1) + m2 * (src[i, 2] - p2)
        dj = m0 * (src[j, 0] - p0) + m1 * (src[j, 1] - p1) + m2 * (src[j, 2] - p2)
        if di >= 0.0 and k < dst.shape[0]:
            dst[k, 0], dst[k, 1], dst[k, 2] = src[i, 0], src[i, 1], src[i, 2]
            k += 1
        if (di >= 0.0) != (dj >= 0.0) and k < dst.shape[0]:
            t = di / (di - dj)
            for c in range(3):
                dst[k, c] = src[i, c] + t * (src[j, c] - src[i, c])
            k += 1
    return k


@jit
def reduce_points(cand, m, n0, n1, n2, tie, out):
    """At most MAX_POINTS of the m candidates into out: the deepest (the first of equal
    depth), the farthest from it, the largest areas on either side of those two."""
    if m <= MAX_POINTS:
        for i in range(m):
            for c in range(M_WIDTH):
                out[i, c] = cand[i, c]
        return m
    deepest = -np.inf
    for i in range(m):
        deepest = max(deepest, cand[i, M_DEPTH])
    i0 = 0
    while cand[i0, M_DEPTH] < deepest - tie:
        i0 += 1
    i1, far = i0, -1.0
    for i in range(m):
        d = ((cand[i, 0] - cand[i0, 0]) ** 2 + (cand[i, 1] - cand[i0, 1]) ** 2
             + (cand[i, 2] - cand[i0, 2]) ** 2)
        if d > far + tie * tie:
            i1, far = i, d
    e0, e1, e2 = cand[i1, 0] - cand[i0, 0], cand[i1, 1] - cand[i0, 1], cand[i1, 2] - cand[i0, 2]
    i2 = i3 = -1
    hi, lo = 0.0, 0.0
    for i in range(m):
        r0, r1, r2 = cand[i, 0] - cand[i0, 0], cand[i, 1] - cand[i0, 1], cand[i, 2] - cand[i0, 2]
        area = n0 * (e1 * r2 - e2 * r1) + n1 * (e2 * r0 - e0 * r2) + n2 * (e0 * r1 - e1 * r0)
        if area > hi + tie * tie:
            hi, i2 = area, i
        if area < lo - tie * tie:
            lo, i3 = area, i
    k = 0
    for i in (i0, i1, i2, i3):
        if i >= 0:
            dup = False
            for j in range(k):
                if (out[j, 0] == cand[i, 0] and out[j, 1] == cand[i, 1]
                        and out[j, 2] == cand[i, 2]):
                    dup = True
            if not dup:
                for c in range(M_WIDTH):
                    out[k, c] = cand[i, c]
                k += 1
    return k


@jit
def _deepest(res, out):
    """The one contact of ``collide``'s result: midway between the witness points."""
    for c in range(3):
        out[0, c] = 0.5 * (res[R_PA + c] + res[R_PB + c])
    out[0, M_DEPTH] = -res[R_DIST]
    return 1


@jit
def manifold(ga, gb, verts, planes, res, margin, cs, out):
    """The contact points of geoms ga and gb from ``collide``'s result ``res`` into ``out``
    (MAX_POINTS, M_WIDTH): point (world) and depth (along the reference face's normal; of the
    one point of a pair without a face: ``res``'s depth); returns their number.  Points
    within ``margin`` above the reference face count (negative depth)."""
    n0, n1, n2 = res[R_NORMAL], res[R_NORMAL + 1], res[R_NORMAL + 2]  # from b into a
    ca, fa0, fa1, fa2, cos_a = face(ga, verts, planes, -n0, -n1, -n2, cs.ref)
    cb, fb0, fb1, fb2, cos_b = face(gb, verts, planes, n0, n1, n2, cs.inc)
    a_ref = ca >= 3 and cos_a >= FACE_COS and (cb < 3 or cos_a >= cos_b)
    b_ref = cb >= 3 and cos_b >= FACE_COS and not a_ref
    if not (a_ref or b_ref):
        return _deepest(res, out)
    if a_ref:
        ref_g, inc_g, r0, r1, r2 = ga, gb, fa0, fa1, fa2
    else:
        ref_g, inc_g, r0, r1, r2 = gb, ga, fb0, fb1, fb2
    count, _, _, _, _ = face(ref_g, verts, planes, r0, r1, r2, cs.ref)
    m, _, _, _, _ = face(inc_g, verts, planes, -r0, -r1, -r2, cs.inc)
    if m == 0:
        return _deepest(res, out)
    c0 = c1 = c2 = 0.0
    for i in range(count):
        c0 += cs.ref[i, 0] / count
        c1 += cs.ref[i, 1] / count
        c2 += cs.ref[i, 2] / count
    src, dst = cs.inc, cs.buf
    for i in range(count):
        j = (i + 1) % count
        e0 = cs.ref[j, 0] - cs.ref[i, 0]
        e1 = cs.ref[j, 1] - cs.ref[i, 1]
        e2 = cs.ref[j, 2] - cs.ref[i, 2]
        m0, m1, m2 = r1 * e2 - r2 * e1, r2 * e0 - r0 * e2, r0 * e1 - r1 * e0
        if m0 * (c0 - cs.ref[i, 0]) + m1 * (c1 - cs.ref[i, 1]) + m2 * (c2 - cs.ref[i, 2]) < 0.0:
            m0, m1, m2 = -m0, -m1, -m2
        m = _clip(src, m, dst, cs.ref[i, 0], cs.ref[i, 1], cs.ref[i, 2], m0, m1, m2)
        src, dst = dst, src
        if m == 0:
            break
    off = r0 * cs.ref[0, 0] + r1 * cs.ref[0, 1] + r2 * cs.ref[0, 2]
    k = 0
    for i in range(m):
        depth = off - (r0 * src[i, 0] + r1 * src[i, 1] + r2 * src[i, 2])
        if depth > -margin:
            cs.cand[k, 0] = src[i, 0] + 0.5 * depth * r0
            cs.cand[k, 1] = src[i, 1] + 0.5 * depth * r1
            cs.cand[k, 2] = src[i, 2] + 0.5 * depth * r2
            cs.cand[k, M_DEPTH] = depth
            k += 1
    if k == 0:
        return _deepest(res, out)
    tie = 1e-9 * (ga[W_RADIUS] + gb[W_RADIUS])
    # collide's deepest point joins when the polygons missed it (a tilted base's rim point)
    deepest = -np.inf
    for i in range(k):
        deepest = max(deepest, cs.cand[i, M_DEPTH])
    if -res[R_DIST] > deepest + tie:
        _deepest(res, cs.cand[k:k + 1])
        k += 1
    return reduce_points(cs.cand, k, r0, r1, r2, tie, out)
