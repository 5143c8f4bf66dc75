"""Ray casts against convex geoms: the first surface a ray o + t d (t >= 0) crosses.

Each kind is exact: spheres and ellipsoids (a quadratic, the ellipsoid scaled to a unit
sphere), boxes and hulls (the ray clipped against their planes, Kay & Kajiya's slabs),
capsules, cylinders and cones (the roots of each surface piece's quadratic or plane that lie
on that piece; the least).  A ray that starts inside a geom meets its surface on the way out,
as MuJoCo's ``mj_ray`` does.  Distances are in units of the direction's length (metres for a
unit direction); ``inf`` where the ray misses within ``max_dist``.  Normals are the outward
unit normals of the surface hit, in world axes.

Geoms are the world geom rows of :mod:`.convex`; nothing is allocated.
"""
import numpy as np

from rtrigid._jit import jit
from rtrigid.contact.convex import (
    W_KIND,
    W_NPLANE,
    W_PLANE,
    W_POS,
    W_RADIUS,
    W_SIZE,
    rotate_in,
    rotate_out,
)
from rtrigid.contact.geometry import BOX, CAPSULE, CONE, CYLINDER, ELLIPSOID, HULL, SPHERE
from rtrigid.contact.support import clip_slab

MISS = (np.inf, 0.0, 0.0, 0.0)


@jit
def _roots(a, b, c):
    """Roots t1 <= t2 of a t^2 + 2 b t + c = 0 (NaN when none)."""
    if a == 0.0:
        if b == 0.0:
            return np.nan, np.nan
        t = -c / (2.0 * b)
        return t, t
    disc = b * b - a * c
    if disc < 0.0:
        return np.nan, np.nan
    sq = np.sqrt(disc)
    # the stable pair of formulas
    q = -(b + sq) if b >= 0.0 else -(b - sq)
    t1, t2 = q / a, (c / q if q != 0.0 else q / a)
    return (t1, t2) if t1 <= t2 else (t2, t1)


@jit
def _better(best, t, n0, n1, n2):
    """The nearer of the hit ``best`` and (t, n), counting only t >= 0."""
    if t >= 0.0 and t < best[0]:
        return (t, n0, n1, n2)
    return best


@jit
def _ellipsoid(o, d, r0, r1, r2):
    """Ray against the ellipsoid of radii r (sphere: all equal), local frame."""
    p0, p1, p2 = o[0] / r0, o[1] / r1, o[2] / r2
    q0, q1, q2 = d[0] / r0, d[1] / r1, d[2] / r2
    t1, t2 = _roots(q0 * q0 + q1 * q1 + q2 * q2, p0 * q0 + p1 * q1 + p2 * q2,
                    p0 * p0 + p1 * p1 + p2 * p2 - 1.0)
    if not t2 >= 0.0:
        return MISS
    t = t1 if t1 >= 0.0 else t2
    x0, x1, x2 = o[0] + t * d[0], o[1] + t * d[1], o[2] + t * d[2]
    return (t, x0 / (r0 * r0), x1 / (r1 * r1), x2 / (r2 * r2))


@jit
def _side(best, o, d, r, lo, hi):
    """Roots on the side of the cylinder of radius r about z with lo <= z <= hi."""
    t1, t2 = _roots(d[0] * d[0] + d[1] * d[1], o[0] * d[0] + o[1] * d[1],
                    o[0] * o[0] + o[1] * o[1] - r * r)
    for t in (t1, t2):
        z = o[2] + t * d[2]
        if t >= 0.0 and lo <= z <= hi:
            best = _better(best, t, o[0] + t * d[0], o[1] + t * d[1], 0.0)
    return best


@jit
def _cap(best, o, d, r, z, up):
    """The disc of radius r at height z, normal +z (up) or -z."""
    if d[2] == 0.0:
        return best
    t = (z - o[2]) / d[2]
    x, y = o[0] + t * d[0], o[1] + t * d[1]
    if x * x + y * y <= r * r:
        best = _better(best, t, 0.0, 0.0, 1.0 if up else -1.0)
    return best


@jit
def _ball(best, o, d, r, z, up):
    """The half of the sphere of radius r centred at (0, 0, z) beyond z (up: above)."""
    p = (o[0], o[1], o[2] - z)
    t1, t2 = _roots(d[0] * d[0] + d[1] * d[1] + d[2] * d[2], p[0] * d[0] + p[1] * d[1]
                    + p[2] * d[2], p[0] * p[0] + p[1] * p[1] + p[2] * p[2] - r * r)
    for t in (t1, t2):
        w = p[2] + t * d[2]
        if t >= 0.0 and ((w >= 0.0) if up else (w <= 0.0)):
            best = _better(best, t, p[0] + t * d[0], p[1] + t * d[1], w)
    return best


@jit
def _cone(best, o, d, r, h):
    """The cone's side: apex (0, 0, -3h/4), base rim of radius r at z = h/4."""
    k2 = (r / h) * (r / h)
    w0 = o[2] + 0.75 * h
    t1, t2 = _roots(d[0] * d[0] + d[1] * d[1] - k2 * d[2] * d[2],
                    o[0] * d[0] + o[1] * d[1] - k2 * w0 * d[2],
                    o[0] * o[0] + o[1] * o[1] - k2 * w0 * w0)
    for t in (t1, t2):
        w = w0 + t * d[2]
        if t >= 0.0 and 0.0 <= w <= h:
            x, y = o[0] + t * d[0], o[1] + t * d[1]
            if w > 0.0:
                best = _better(best, t, x, y, -k2 * w)
            else:
                best = _better(best, t, 0.0, 0.0, -1.0)
    return best


@jit
def _slabs(o, d, e0, e1, e2):
    """Ray against the box of half extents e (slabs)."""
    enter, leave = -np.inf, np.inf
    ein, eout = -1, -1
    for i in range(3):
        e = e0 if i == 0 else (e1 if i == 1 else e2)
        if d[i] == 0.0:
            if abs(o[i]) > e:
                return MISS
            continue
        enter, leave, ein, eout = clip_slab(o[i], d[i], e, enter, leave, ein, eout, i)
    if enter > leave or leave < 0.0:
        return MISS
    if enter >= 0.0:
        i, t, sign = ein, enter, -1.0
    else:
        i, t, sign = eout, leave, 1.0
    s = sign * (1.0 if d[i] > 0.0 else -1.0)
    return (t, s if i == 0 else 0.0, s if i == 1 else 0.0, s if i == 2 else 0.0)


@jit
def _planes(o, d, planes, first, count):
    """Ray against the hull n . x <= offset of planes[first:first + count]."""
    enter, leave = -np.inf, np.inf
    pin, pout = -1, -1
    for k in range(first, first + count):
        den = planes[k, 0] * d[0] + planes[k, 1] * d[1] + planes[k, 2] * d[2]
        num = planes[k, 3] - (planes[k, 0] * o[0] + planes[k, 1] * o[1] + planes[k, 2] * o[2])
        if den == 0.0:
            if num < 0.0:
                return MISS
            continue
        t = num / den
        if den < 0.0:
            if t > enter:
                enter, pin = t, k
        elif t < leave:
            leave, pout = t, k
    if enter > leave or leave < 0.0 or pin < 0 and pout < 0:
        return MISS
    k, t = (pin, enter) if enter >= 0.0 else (pout, leave)
    return (t, planes[k, 0], planes[k, 1], planes[k, 2])


@jit
def local_ray(g, planes, o, d):
    """(t, local normal, not unit) of the ray o + t d against geom row g, both in its
    frame; t = inf where it misses."""
    kind = int(g[W_KIND])
    a, b, c = g[W_SIZE], g[W_SIZE + 1], g[W_SIZE + 2]
    if kind == SPHERE:
        return _ellipsoid(o, d, a, a, a)
    if kind == ELLIPSOID:
        return _ellipsoid(o, d, a, b, c)
    if kind == BOX:
        return _slabs(o, d, a, b, c)
    if kind == HULL:
        return _planes(o, d, planes, int(g[W_PLANE]), int(g[W_NPLANE]))
    if kind == CAPSULE:
        best = _side(MISS, o, d, a, -b, b)
        best = _ball(best, o, d, a, b, True)
        return _ball(best, o, d, a, -b, False)
    if kind == CYLINDER:
        best = _side(MISS, o, d, a, -b, b)
        best = _cap(best, o, d, a, b, True)
        return _cap(best, o, d, a, -b, False)
    if kind == CONE:
        return _cap(_cone(MISS, o, d, a, b), o, d, a, 0.25 * b, True)
    return MISS


@jit
def ray_geom(g, planes, o0, o1, o2, d0, d1, d2, max_dist):
    """(distance, normal) of the ray from o along d against geom row g (world), the outward
    unit normal at the hit; (inf, 0, 0, 0) where it misses within max_dist."""
    p0, p1, p2 = o0 - g[W_POS], o1 - g[W_POS + 1], o2 - g[W_POS + 2]
    # the bounding sphere first: most rays of a scene miss most geoms, or meet it farther
    # than max_dist (the nearest hit so far, in raycast_many)
    r = g[W_RADIUS]
    dd = d0 * d0 + d1 * d1 + d2 * d2
    pd = p0 * d0 + p1 * d1 + p2 * d2
    pp = p0 * p0 + p1 * p1 + p2 * p2
    if pp > r * r:
        if pd >= 0.0 or pp - pd * pd / dd > r * r:
            return MISS
        if -pd - np.sqrt(pd * pd - dd * (pp - r * r)) > max_dist * dd:
            return MISS
    o = rotate_in(g, p0, p1, p2)
    d = rotate_in(g, d0, d1, d2)
    hit = local_ray(g, planes, o, d)
    if not hit[0] <= max_dist:
        return MISS
    n = rotate_out(g, hit[1], hit[2], hit[3])
    size = np.sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2])
    if size > 0.0:
        n = (n[0] / size, n[1] / size, n[2] / size)
    return (hit[0], n[0], n[1], n[2])


@jit
def ray_plane(n0, n1, n2, height, o0, o1, o2, d0, d1, d2, max_dist):
    """(distance, normal) of the ray against the plane n . x = height (n a unit normal, the
    solid below it)."""
    den = n0 * d0 + n1 * d1 + n2 * d2
    if den == 0.0:
        return MISS
    t = (height - (n0 * o0 + n1 * o1 + n2 * o2)) / den
    if t < 0.0 or t > max_dist:
        return MISS
    return (t, n0, n1, n2)


@jit
def raycast_many(geoms, planes, origins, directions, max_dist, dist, which, normals):
    """Cast ray i (origins[i] along directions[i]) against every geom row of ``geoms``
    (n, W_WIDTH): its nearest hit's distance into ``dist[i]`` (inf where none), geom index
    into ``which[i]`` (-1) and outward normal into ``normals[i]``."""
    for i in range(origins.shape[0]):
        best = MISS
        k = -1
        for j in range(geoms.shape[0]):
            hit = ray_geom(geoms[j], planes, origins[i, 0], origins[i, 1], origins[i, 2],
                           directions[i, 0], directions[i, 1], directions[i, 2],
                           min(max_dist, best[0]))
            if hit[0] < best[0]:
                best, k = hit, j
        dist[i] = best[0]
        which[i] = k
        normals[i, 0], normals[i, 1], normals[i, 2] = best[1], best[2], best[3]
