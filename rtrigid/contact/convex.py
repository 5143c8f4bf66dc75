"""General convex narrow phase: support mappings, GJK distance, EPA penetration.

Any two convex geoms meet through their support mappings alone (the point of a shape
farthest along a direction), so this is the fallback for every pair without an exact fast
path in :mod:`.pairs`:

- :func:`.support.support`: the exact support point of every kind (sphere, capsule, box,
  cylinder, cone, ellipsoid; a hull's farthest vertex);
- :func:`collide`: GJK (Gilbert, Johnson & Keerthi 1988; the closest point of a simplex by its
  Voronoi regions, Ericson, *Real-Time Collision Detection* 5.1) for the distance and witness
  points of separated geoms, and EPA (van den Bergen 2001) on the Minkowski difference for the
  depth, normal and points of overlapping ones; a simplex GJK leaves degenerate (touching,
  coincident centres) is grown to a tetrahedron round the origin first.  Both loops are
  bounded; a result that did not converge comes back with a status that says so, never NaN;
- :mod:`.clipping` builds the multi-point manifold of face-on contact from this result.

Geoms are world rows of :mod:`.support` (its names are re-exported here), and meet through
its support mappings alone.

The kernels allocate nothing: GJK and EPA work in a :class:`Workspace` (:func:`workspace`)
and write a result row ``res (R_WIDTH,)``.  Separated and overlapping geoms are reported in
one form: the signed distance (negative: the penetration depth), the unit normal pointing
from the second geom into the first (the direction that moves the first geom away), and the
witness points on each.
"""
from collections import namedtuple

import numpy as np

from rtrigid._jit import jit, jit_inline
from rtrigid.contact.geometry import BOX, HULL, PRISM
from rtrigid.contact.support import (  # noqa: F401  (the rows' layout, re-exported)
    W_KIND,
    W_NPLANE,
    W_NVERT,
    W_PLANE,
    W_POS,
    W_RADIUS,
    W_ROT,
    W_SIZE,
    W_VERT,
    W_WIDTH,
    bounding_radius,
    hull_pools,
    local_support,
    rotate_in,
    rotate_out,
    support,
    to_world,
    world_geom,
)

# result row of collide()
R_DIST = 0     # signed distance: > 0 apart, < 0 the penetration depth
R_NORMAL = 1   # unit normal from the second geom into the first
R_PA = 4       # witness point on the first geom (its deepest point in the second, overlapping)
R_PB = 7       # witness point on the second geom
R_WIDTH = 10

# collide() status
CONVERGED = 0
NOT_CONVERGED = 1  # an iteration or capacity bound was reached: the result is the best found

GJK_ITERATIONS = 128
EPA_VERTICES = 160   # EPA stops (NOT_CONVERGED) when its polytope has this many vertices
EPA_FACES = 640
EPA_EDGES = 160
TOLERANCE = 1e-10    # of GJK and EPA, relative to the two geoms' bounding radii
# EPA's tolerance when a geom is curved, looser than TOLERANCE: there its polytope grows slowly
# (every vertex of a sphere's is almost as near as the next), and Newton's method on the
# support function (newton_depth) sharpens the normal where A - B is smooth
CURVED_TOLERANCE = 1e-9
NEWTON_ITERATIONS = 12

Workspace = namedtuple("Workspace", "simplex epa_verts face_index face_data edges stack")
Workspace.__doc__ = """Scratch arrays of :func:`collide`: ``simplex (4, 9)`` (GJK's points of
the Minkowski difference and their support points on each geom), ``epa_verts (EPA_VERTICES,
9)`` (the same for EPA's polytope), ``face_index (EPA_FACES, 6)`` (its triangles' vertices
and, across each edge (vertex e to e + 1), the neighbouring face),
``face_data (EPA_FACES, 5)`` (outward normal, distance from the origin, alive flag),
``edges (EPA_EDGES, 4)`` (the horizon: its edges, and the kept face across each and that
face's edge index) and ``stack (EPA_FACES,)`` (the faces to remove)."""


def workspace():
    """A fresh :class:`Workspace` (one per thread)."""
    return Workspace(np.zeros((4, 9)), np.zeros((EPA_VERTICES, 9)),
                     np.zeros((EPA_FACES, 6), np.int64), np.zeros((EPA_FACES, 5)),
                     np.zeros((EPA_EDGES, 4), np.int64), np.zeros(EPA_FACES, np.int64))


# _support_pair, _depth_along and _turn are called, not inlined: GJK, EPA and the depth
# refinement call them at many places, and each inlined copy compiled every shape's support
# mapping again (the refinement alone held 16)
@jit
def _support_pair(ga, gb, verts, d0, d1, d2, row):
    """Support of the Minkowski difference A - B along d into ``row`` (w, a, b)."""
    a = support(ga, verts, d0, d1, d2)
    b = support(gb, verts, -d0, -d1, -d2)
    row[0], row[1], row[2] = a[0] - b[0], a[1] - b[1], a[2] - b[2]
    row[3], row[4], row[5] = a
    row[6], row[7], row[8] = b


@jit_inline
def _dot(s, i, j):
    return s[i, 0] * s[j, 0] + s[i, 1] * s[j, 1] + s[i, 2] * s[j, 2]


@jit
def closest_triangle(s, i, j, k):
    """Closest point to the origin of triangle (s[i], s[j], s[k]) (Ericson 5.1.5): (weights of
    i, j, k, distance squared); a weight of 0 drops its vertex."""
    a0, a1, a2 = s[i, 0], s[i, 1], s[i, 2]
    ab0, ab1, ab2 = s[j, 0] - a0, s[j, 1] - a1, s[j, 2] - a2
    ac0, ac1, ac2 = s[k, 0] - a0, s[k, 1] - a1, s[k, 2] - a2
    d1 = -(ab0 * a0 + ab1 * a1 + ab2 * a2)
    d2 = -(ac0 * a0 + ac1 * a1 + ac2 * a2)
    la, lb, lc = 1.0, 0.0, 0.0
    if not (d1 <= 0.0 and d2 <= 0.0):
        d3 = -(ab0 * s[j, 0] + ab1 * s[j, 1] + ab2 * s[j, 2])
        d4 = -(ac0 * s[j, 0] + ac1 * s[j, 1] + ac2 * s[j, 2])
        d5 = -(ab0 * s[k, 0] + ab1 * s[k, 1] + ab2 * s[k, 2])
        d6 = -(ac0 * s[k, 0] + ac1 * s[k, 1] + ac2 * s[k, 2])
        vc = d1 * d4 - d3 * d2
        vb = d5 * d2 - d1 * d6
        va = d3 * d6 - d5 * d4
        if d3 >= 0.0 and d4 <= d3:
            la, lb, lc = 0.0, 1.0, 0.0
        elif vc <= 0.0 and d1 >= 0.0 and d3 <= 0.0:
            v = d1 / (d1 - d3)
            la, lb, lc = 1.0 - v, v, 0.0
        elif d6 >= 0.0 and d5 <= d6:
            la, lb, lc = 0.0, 0.0, 1.0
        elif vb <= 0.0 and d2 >= 0.0 and d6 <= 0.0:
            w = d2 / (d2 - d6)
            la, lb, lc = 1.0 - w, 0.0, w
        elif va <= 0.0 and d4 - d3 >= 0.0 and d5 - d6 >= 0.0:
            w = (d4 - d3) / ((d4 - d3) + (d5 - d6))
            la, lb, lc = 0.0, 1.0 - w, w
        elif va + vb + vc > 0.0:
            den = 1.0 / (va + vb + vc)
            lb, lc = vb * den, vc * den
            la = 1.0 - lb - lc
        else:  # degenerate (flat) triangle that no edge test caught: its nearest vertex
            da, db, dc = _dot(s, i, i), _dot(s, j, j), _dot(s, k, k)
            if db <= da and db <= dc:
                la, lb = 0.0, 1.0
            elif dc <= da:
                la, lc = 0.0, 1.0
    p0 = la * s[i, 0] + lb * s[j, 0] + lc * s[k, 0]
    p1 = la * s[i, 1] + lb * s[j, 1] + lc * s[k, 1]
    p2 = la * s[i, 2] + lb * s[j, 2] + lc * s[k, 2]
    return la, lb, lc, p0 * p0 + p1 * p1 + p2 * p2


@jit
def _keep(s, n, w0, w1, w2, w3):
    """Drop the simplex points of zero weight, keeping the order; returns (count, the closest
    point v = the weighted sum, the kept points' weights)."""
    m = 0
    v0 = v1 = v2 = 0.0
    k0 = k1 = k2 = k3 = 0.0
    for i in range(n):
        w = w0 if i == 0 else (w1 if i == 1 else (w2 if i == 2 else w3))
        if w > 0.0:
            v0 += w * s[i, 0]
            v1 += w * s[i, 1]
            v2 += w * s[i, 2]
            if m != i:
                for c in range(9):
                    s[m, c] = s[i, c]
            if m == 0:
                k0 = w
            elif m == 1:
                k1 = w
            elif m == 2:
                k2 = w
            else:
                k3 = w
            m += 1
    return m, v0, v1, v2, k0, k1, k2, k3


@jit
def _weight_of(x, i, j, k, la, lb, lc):
    """The weight of simplex point x when i, j, k have weights la, lb, lc and the rest none."""
    return la if x == i else (lb if x == j else (lc if x == k else 0.0))


@jit
def _weights(s, n):
    """Barycentric weights of the closest point to the origin of simplex s[:n] (points in
    columns 0:3), and whether the origin lies inside a tetrahedron (n == 4)."""
    if n == 1:
        return 1.0, 0.0, 0.0, 0.0, False
    if n == 2:
        e0, e1, e2 = s[1, 0] - s[0, 0], s[1, 1] - s[0, 1], s[1, 2] - s[0, 2]
        ee = e0 * e0 + e1 * e1 + e2 * e2
        t = -(s[0, 0] * e0 + s[0, 1] * e1 + s[0, 2] * e2) / ee if ee > 0.0 else 0.0
        if t <= 0.0:
            return 1.0, 0.0, 0.0, 0.0, False
        if t >= 1.0:
            return 0.0, 1.0, 0.0, 0.0, False
        return 1.0 - t, t, 0.0, 0.0, False
    if n == 3:
        la, lb, lc, _ = closest_triangle(s, 0, 1, 2)
        return la, lb, lc, 0.0, False
    # tetrahedron: the origin inside, or the closest point of the faces it is outside of
    best = np.inf
    w = (0.0, 0.0, 0.0, 0.0)
    inside = True
    for f in range(4):
        i, j, k = (f + 1) % 4, (f + 2) % 4, (f + 3) % 4
        u0, u1, u2 = s[j, 0] - s[i, 0], s[j, 1] - s[i, 1], s[j, 2] - s[i, 2]
        v0, v1, v2 = s[k, 0] - s[i, 0], s[k, 1] - s[i, 1], s[k, 2] - s[i, 2]
        n0, n1, n2 = u1 * v2 - u2 * v1, u2 * v0 - u0 * v2, u0 * v1 - u1 * v0
        origin_side = -(n0 * s[i, 0] + n1 * s[i, 1] + n2 * s[i, 2])
        vertex_side = (n0 * (s[f, 0] - s[i, 0]) + n1 * (s[f, 1] - s[i, 1])
                       + n2 * (s[f, 2] - s[i, 2]))
        if origin_side * vertex_side > 0.0:
            continue
        inside = False
        la, lb, lc, dd = closest_triangle(s, i, j, k)
        if dd < best:
            best = dd
            w = (_weight_of(0, i, j, k, la, lb, lc), _weight_of(1, i, j, k, la, lb, lc),
                 _weight_of(2, i, j, k, la, lb, lc), _weight_of(3, i, j, k, la, lb, lc))
    if inside:
        return 0.25, 0.25, 0.25, 0.25, True
    return w[0], w[1], w[2], w[3], False


@jit
def _write_separated(res, s, n, w0, w1, w2, w3, dist):
    """Result row of separated geoms from the final simplex and its weights."""
    for c in range(3):
        res[R_PA + c] = w0 * s[0, 3 + c] + (w1 * s[1, 3 + c] if n > 1 else 0.0) \
            + (w2 * s[2, 3 + c] if n > 2 else 0.0) + (w3 * s[3, 3 + c] if n > 3 else 0.0)
        res[R_PB + c] = w0 * s[0, 6 + c] + (w1 * s[1, 6 + c] if n > 1 else 0.0) \
            + (w2 * s[2, 6 + c] if n > 2 else 0.0) + (w3 * s[3, 6 + c] if n > 3 else 0.0)
    d0, d1, d2 = res[R_PA] - res[R_PB], res[R_PA + 1] - res[R_PB + 1], res[R_PA + 2] - res[R_PB + 2]
    size = np.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
    if size > 0.0:
        res[R_NORMAL], res[R_NORMAL + 1], res[R_NORMAL + 2] = d0 / size, d1 / size, d2 / size
    res[R_DIST] = dist


@jit
def gjk(ga, gb, verts, ws, res, tol):
    """GJK on A - B: returns (status, simplex size, overlap).  Apart, ``res`` gets the
    distance, normal and witness points; overlapping (the origin within ``tol`` of the
    simplex, or inside its tetrahedron), ``ws.simplex[:size]`` holds the simplex for EPA."""
    s = ws.simplex
    d0 = ga[W_POS] - gb[W_POS]
    d1 = ga[W_POS + 1] - gb[W_POS + 1]
    d2 = ga[W_POS + 2] - gb[W_POS + 2]
    if d0 * d0 + d1 * d1 + d2 * d2 <= 0.0:
        d0 = 1.0
    _support_pair(ga, gb, verts, -d0, -d1, -d2, s[0])
    n = 1
    v0, v1, v2 = s[0, 0], s[0, 1], s[0, 2]
    w0, w1, w2, w3 = 1.0, 0.0, 0.0, 0.0
    for _ in range(GJK_ITERATIONS):
        vv = v0 * v0 + v1 * v1 + v2 * v2
        if vv <= tol * tol:
            return CONVERGED, n, True
        row = s[n]
        _support_pair(ga, gb, verts, -v0, -v1, -v2, row)
        vw = v0 * row[0] + v1 * row[1] + v2 * row[2]
        vlen = np.sqrt(vv)
        if vv - vw <= tol * vlen:  # |v| exceeds the distance by at most tol
            _write_separated(res, s, n, w0, w1, w2, w3, vlen)
            return CONVERGED, n, False
        n += 1
        w0, w1, w2, w3, inside = _weights(s, n)
        if inside:
            return CONVERGED, n, True
        n, v0, v1, v2, w0, w1, w2, w3 = _keep(s, n, w0, w1, w2, w3)
    vv = v0 * v0 + v1 * v1 + v2 * v2
    _write_separated(res, s, n, w0, w1, w2, w3, np.sqrt(vv))
    return NOT_CONVERGED, n, False


@jit
def _off_line(s, i, j, p, tol):
    """Whether the point p lies farther than tol from the line through s[i] and s[j]."""
    e0, e1, e2 = s[j, 0] - s[i, 0], s[j, 1] - s[i, 1], s[j, 2] - s[i, 2]
    r0, r1, r2 = p[0] - s[i, 0], p[1] - s[i, 1], p[2] - s[i, 2]
    c0, c1, c2 = e1 * r2 - e2 * r1, e2 * r0 - e0 * r2, e0 * r1 - e1 * r0
    ee = e0 * e0 + e1 * e1 + e2 * e2
    return c0 * c0 + c1 * c1 + c2 * c2 > tol * tol * ee


@jit
def _enclose(ga, gb, verts, s, n, tol):
    """Grow the simplex s[:n], which holds the origin, to a tetrahedron of nonzero volume
    (as Bullet's EPA does); returns its size (4, or less when A - B is flat)."""
    if n == 1:
        for a in range(6):
            sign = 1.0 if a < 3 else -1.0
            _support_pair(ga, gb, verts, sign if a % 3 == 0 else 0.0,
                          sign if a % 3 == 1 else 0.0, sign if a % 3 == 2 else 0.0, s[1])
            e0, e1, e2 = s[1, 0] - s[0, 0], s[1, 1] - s[0, 1], s[1, 2] - s[0, 2]
            if e0 * e0 + e1 * e1 + e2 * e2 > tol * tol:
                n = 2
                break
    if n == 2:
        e0, e1, e2 = s[1, 0] - s[0, 0], s[1, 1] - s[0, 1], s[1, 2] - s[0, 2]
        # a unit vector u across the segment, and v = e x u / |e|
        if abs(e0) <= abs(e1) and abs(e0) <= abs(e2):
            u0, u1, u2 = 0.0, -e2, e1
        elif abs(e1) <= abs(e2):
            u0, u1, u2 = e2, 0.0, -e0
        else:
            u0, u1, u2 = -e1, e0, 0.0
        size = np.sqrt(u0 * u0 + u1 * u1 + u2 * u2)
        u0, u1, u2 = u0 / size, u1 / size, u2 / size
        el = np.sqrt(e0 * e0 + e1 * e1 + e2 * e2)
        v0, v1, v2 = (e1 * u2 - e2 * u1) / el, (e2 * u0 - e0 * u2) / el, (e0 * u1 - e1 * u0) / el
        for a in range(6):
            c, sn = np.cos(a * np.pi / 3.0), np.sin(a * np.pi / 3.0)
            _support_pair(ga, gb, verts, c * u0 + sn * v0, c * u1 + sn * v1, c * u2 + sn * v2,
                          s[2])
            if _off_line(s, 0, 1, (s[2, 0], s[2, 1], s[2, 2]), tol):
                n = 3
                break
    if n == 3:
        u0, u1, u2 = s[1, 0] - s[0, 0], s[1, 1] - s[0, 1], s[1, 2] - s[0, 2]
        v0, v1, v2 = s[2, 0] - s[0, 0], s[2, 1] - s[0, 1], s[2, 2] - s[0, 2]
        n0, n1, n2 = u1 * v2 - u2 * v1, u2 * v0 - u0 * v2, u0 * v1 - u1 * v0
        size = np.sqrt(n0 * n0 + n1 * n1 + n2 * n2)
        for sign in (1.0, -1.0):
            _support_pair(ga, gb, verts, sign * n0, sign * n1, sign * n2, s[3])
            h = (n0 * (s[3, 0] - s[0, 0]) + n1 * (s[3, 1] - s[0, 1])
                 + n2 * (s[3, 2] - s[0, 2]))
            if abs(h) > tol * size:
                return 4
    return n


@jit_inline
def _set_face(ws, f, i, j, k):
    """Face slot f := triangle (i, j, k) of the polytope, its normal by the right-hand rule."""
    v = ws.epa_verts
    fd = ws.face_data
    ws.face_index[f, 0], ws.face_index[f, 1], ws.face_index[f, 2] = i, j, k
    u0, u1, u2 = v[j, 0] - v[i, 0], v[j, 1] - v[i, 1], v[j, 2] - v[i, 2]
    w0, w1, w2 = v[k, 0] - v[i, 0], v[k, 1] - v[i, 1], v[k, 2] - v[i, 2]
    n0, n1, n2 = u1 * w2 - u2 * w1, u2 * w0 - u0 * w2, u0 * w1 - u1 * w0
    size = np.sqrt(n0 * n0 + n1 * n1 + n2 * n2)
    fd[f, 4] = 1.0
    if size > 1e-300:
        fd[f, 0], fd[f, 1], fd[f, 2] = n0 / size, n1 / size, n2 / size
        fd[f, 3] = (n0 * v[i, 0] + n1 * v[i, 1] + n2 * v[i, 2]) / size
    else:  # a sliver: never the closest face, never seen
        fd[f, 0], fd[f, 1], fd[f, 2], fd[f, 3] = 0.0, 0.0, 0.0, np.inf


@jit_inline
def _edge_of(fi, g, i, j):
    """The index e of face g's edge from vertex i to j (-1 if it has none)."""
    for e in range(3):
        if fi[g, e] == i and fi[g, (e + 1) % 3] == j:
            return e
    return -1


@jit_inline
def _horizon(ws, best, w):
    """Remove the faces seen from the point w, from face ``best`` on through neighbours (so the
    removed set is connected and its boundary one loop); returns the number of horizon edges
    written to ws.edges, or -1 when they do not fit or the polytope's links are broken."""
    fd, fi, stack, v = ws.face_data, ws.face_index, ws.stack, ws.epa_verts
    fd[best, 4] = 0.0
    stack[0] = best
    top, ne = 1, 0
    while top > 0:
        top -= 1
        f = stack[top]
        for e in range(3):
            g = fi[f, 3 + e]
            if fd[g, 4] == 0.0:  # removed already: an inner edge
                continue
            k = fi[g, 0]
            if (fd[g, 0] * (w[0] - v[k, 0]) + fd[g, 1] * (w[1] - v[k, 1])
                    + fd[g, 2] * (w[2] - v[k, 2])) > 0.0:
                fd[g, 4] = 0.0
                stack[top] = g
                top += 1
                continue
            i, j = fi[f, e], fi[f, (e + 1) % 3]
            eg = _edge_of(fi, g, j, i)
            if eg < 0 or ne == ws.edges.shape[0]:
                return -1
            ws.edges[ne, 0], ws.edges[ne, 1], ws.edges[ne, 2], ws.edges[ne, 3] = i, j, g, eg
            ne += 1
    return ne


@jit_inline
def _link_tetrahedron(fi):
    """The neighbours of the tetrahedron's four faces (slots 0-3)."""
    for f in range(4):
        for e in range(3):
            i, j = fi[f, e], fi[f, (e + 1) % 3]
            for g in range(4):
                if g != f and _edge_of(fi, g, j, i) >= 0:
                    fi[f, 3 + e] = g


@jit
def epa(ga, gb, verts, ws, n, res, tol):
    """EPA from GJK's simplex ws.simplex[:n] (holding the origin): the depth, normal and
    witness points of overlapping A and B into ``res``; returns the status."""
    s = ws.simplex
    n = _enclose(ga, gb, verts, s, n, tol)
    v = ws.epa_verts
    fd = ws.face_data
    fi = ws.face_index
    if n < 4:  # flat A - B (cannot happen for solid geoms): report touching along s's span
        _write_separated(res, s, 1, 1.0, 0.0, 0.0, 0.0, 0.0)
        return NOT_CONVERGED
    for i in range(4):
        for c in range(9):
            v[i, c] = s[i, c]
    nv = 4
    # orient the tetrahedron's faces outwards
    u0, u1, u2 = v[1, 0] - v[0, 0], v[1, 1] - v[0, 1], v[1, 2] - v[0, 2]
    w0, w1, w2 = v[2, 0] - v[0, 0], v[2, 1] - v[0, 1], v[2, 2] - v[0, 2]
    t0, t1, t2 = v[3, 0] - v[0, 0], v[3, 1] - v[0, 1], v[3, 2] - v[0, 2]
    vol = t0 * (u1 * w2 - u2 * w1) + t1 * (u2 * w0 - u0 * w2) + t2 * (u0 * w1 - u1 * w0)
    if vol < 0.0:
        _set_face(ws, 0, 0, 1, 2)
        _set_face(ws, 1, 0, 3, 1)
        _set_face(ws, 2, 0, 2, 3)
        _set_face(ws, 3, 1, 3, 2)
    else:
        _set_face(ws, 0, 0, 2, 1)
        _set_face(ws, 1, 0, 1, 3)
        _set_face(ws, 2, 0, 3, 2)
        _set_face(ws, 3, 1, 2, 3)
    _link_tetrahedron(fi)
    nf = 4
    status = NOT_CONVERGED
    best = 0
    for _ in range(EPA_VERTICES):
        best, dmin = -1, np.inf
        for f in range(nf):
            if fd[f, 4] != 0.0 and fd[f, 3] < dmin:
                best, dmin = f, fd[f, 3]
        if best < 0:
            break
        n0, n1, n2 = fd[best, 0], fd[best, 1], fd[best, 2]
        if nv == v.shape[0]:
            break
        row = v[nv]
        _support_pair(ga, gb, verts, n0, n1, n2, row)
        if n0 * row[0] + n1 * row[1] + n2 * row[2] - dmin <= tol:
            status = CONVERGED
            break
        ne = _horizon(ws, best, row)
        if ne < 3:
            break
        # a cone of new faces from the horizon to the new vertex, linked all round
        free = 0
        for e in range(ne):
            while free < nf and fd[free, 4] != 0.0:
                free += 1
            if free == fi.shape[0]:
                ne = -1
                break
            _set_face(ws, free, ws.edges[e, 0], ws.edges[e, 1], nv)
            g, eg = ws.edges[e, 2], ws.edges[e, 3]
            fi[free, 3] = g
            fi[g, 3 + eg] = free
            ws.stack[e] = free
            if free == nf:
                nf += 1
        if ne < 0:
            break
        for e in range(ne):
            f = ws.stack[e]
            nxt = prv = -1
            for m in range(ne):
                if ws.edges[m, 0] == ws.edges[e, 1]:
                    nxt = ws.stack[m]
                if ws.edges[m, 1] == ws.edges[e, 0]:
                    prv = ws.stack[m]
            if nxt < 0 or prv < 0:
                ne = -1
                break
            fi[f, 4] = nxt
            fi[f, 5] = prv
        nv += 1
        if ne < 0:
            break
    if best < 0:
        _write_separated(res, s, 1, 1.0, 0.0, 0.0, 0.0, 0.0)
        return NOT_CONVERGED
    if fd[best, 4] == 0.0:  # left mid-update: the closest alive face
        dmin = np.inf
        for f in range(nf):
            if fd[f, 4] != 0.0 and fd[f, 3] < dmin:
                best, dmin = f, fd[f, 3]
    _write_penetration(res, ws, best)
    return status


@jit
def _write_penetration(res, ws, f):
    """Result row from EPA's closest face f: the origin's projection on it, in barycentric
    weights of its vertices, gives the witness points."""
    v = ws.epa_verts
    i, j, k = ws.face_index[f, 0], ws.face_index[f, 1], ws.face_index[f, 2]
    n0, n1, n2, d = ws.face_data[f, 0], ws.face_data[f, 1], ws.face_data[f, 2], ws.face_data[f, 3]
    p0, p1, p2 = d * n0, d * n1, d * n2
    # barycentric weights of p in (i, j, k) by the sub-triangle areas along the normal
    a0, a1, a2 = v[i, 0] - p0, v[i, 1] - p1, v[i, 2] - p2
    b0, b1, b2 = v[j, 0] - p0, v[j, 1] - p1, v[j, 2] - p2
    c0, c1, c2 = v[k, 0] - p0, v[k, 1] - p1, v[k, 2] - p2
    la = n0 * (b1 * c2 - b2 * c1) + n1 * (b2 * c0 - b0 * c2) + n2 * (b0 * c1 - b1 * c0)
    lb = n0 * (c1 * a2 - c2 * a1) + n1 * (c2 * a0 - c0 * a2) + n2 * (c0 * a1 - c1 * a0)
    lc = n0 * (a1 * b2 - a2 * b1) + n1 * (a2 * b0 - a0 * b2) + n2 * (a0 * b1 - a1 * b0)
    total = la + lb + lc
    if total > 0.0:
        la, lb, lc = la / total, lb / total, lc / total
    else:
        la, lb, lc = 1.0, 0.0, 0.0
    for c in range(3):
        res[R_PA + c] = la * v[i, 3 + c] + lb * v[j, 3 + c] + lc * v[k, 3 + c]
        res[R_PB + c] = la * v[i, 6 + c] + lb * v[j, 6 + c] + lc * v[k, 6 + c]
    res[R_NORMAL], res[R_NORMAL + 1], res[R_NORMAL + 2] = -n0, -n1, -n2
    res[R_DIST] = -d


@jit
def collide(ga, gb, verts, ws, res):
    """Distance or penetration of geom rows ga and gb into ``res`` (R_WIDTH); returns
    CONVERGED or NOT_CONVERGED (``res`` then holds the best estimate)."""
    scale = ga[W_RADIUS] + gb[W_RADIUS]
    status, n, overlap = gjk(ga, gb, verts, ws, res, TOLERANCE * scale)
    if not overlap:
        return status
    flat_a = int(ga[W_KIND]) == BOX or int(ga[W_KIND]) == HULL
    flat_b = int(gb[W_KIND]) == BOX or int(gb[W_KIND]) == HULL or int(gb[W_KIND]) == PRISM
    if flat_a and flat_b:
        return epa(ga, gb, verts, ws, n, res, TOLERANCE * scale)
    status = epa(ga, gb, verts, ws, n, res, CURVED_TOLERANCE * scale)
    newton_depth(ga, gb, verts, res, TOLERANCE * scale)
    return status


@jit
def _depth_along(ga, gb, verts, n0, n1, n2):
    """h(n) = support of A - B along the unit n: the depth of A in B measured along n (the
    translation -h n separates them); with the two support points."""
    a = support(ga, verts, n0, n1, n2)
    b = support(gb, verts, -n0, -n1, -n2)
    return (a[0] - b[0]) * n0 + (a[1] - b[1]) * n1 + (a[2] - b[2]) * n2, a, b


@jit
def _across(n0, n1, n2):
    """Two unit vectors across the unit n, making a right-handed frame with it."""
    if abs(n0) < 0.57735:
        t0, t1, t2 = 0.0, n2, -n1
    else:
        t0, t1, t2 = -n2, 0.0, n0
    size = np.sqrt(t0 * t0 + t1 * t1 + t2 * t2)
    t0, t1, t2 = t0 / size, t1 / size, t2 / size
    return (t0, t1, t2), (n1 * t2 - n2 * t1, n2 * t0 - n0 * t2, n0 * t1 - n1 * t0)


@jit
def _turn(ga, gb, verts, n0, n1, n2, e, step):
    """The support point of A - B's change between the normals n -+ step e (e across n)."""
    _, ap, bp = _depth_along(ga, gb, verts, n0 + step * e[0], n1 + step * e[1], n2 + step * e[2])
    _, am, bm = _depth_along(ga, gb, verts, n0 - step * e[0], n1 - step * e[1], n2 - step * e[2])
    return (ap[0] - bp[0] - am[0] + bm[0], ap[1] - bp[1] - am[1] + bm[1],
            ap[2] - bp[2] - am[2] + bm[2])


@jit
def _on_arc(n0, n1, n2, t, u, d1, d2):
    """The unit vector along n + d1 t + d2 u (t, u across the unit n)."""
    m0 = n0 + d1 * t[0] + d2 * u[0]
    m1 = n1 + d1 * t[1] + d2 * u[1]
    m2 = n2 + d1 * t[2] + d2 * u[2]
    size = np.sqrt(m0 * m0 + m1 * m1 + m2 * m2)
    return m0 / size, m1 / size, m2 / size


@jit
def _depth_on_arc(ga, gb, verts, n0, n1, n2, t, u, d1, d2):
    """h at :func:`_on_arc`'s unit vector."""
    return _depth_along(ga, gb, verts, *_on_arc(n0, n1, n2, t, u, d1, d2))[0]


@jit
def _line_minimum(ga, gb, verts, n0, n1, n2, t, u, d1, d2):
    """The least h (:func:`_depth_along`) on the arc from the unit n towards n + (d1, d2)
    (in the frame t, u across n), by golden-section search: the fraction of the step that
    reaches it and h there.  h is unimodal along the arc, and this finds its least value
    also where it is a kink (a ridge the step crosses), which Newton's model cannot."""
    r = 0.6180339887498949
    lo, hi = 0.0, 1.0
    x1, x2 = hi - r * (hi - lo), lo + r * (hi - lo)
    f1 = _depth_on_arc(ga, gb, verts, n0, n1, n2, t, u, x1 * d1, x1 * d2)
    f2 = _depth_on_arc(ga, gb, verts, n0, n1, n2, t, u, x2 * d1, x2 * d2)
    for _ in range(40):
        if f1 <= f2:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - r * (hi - lo)
            f1 = _depth_on_arc(ga, gb, verts, n0, n1, n2, t, u, x1 * d1, x1 * d2)
        else:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + r * (hi - lo)
            f2 = _depth_on_arc(ga, gb, verts, n0, n1, n2, t, u, x2 * d1, x2 * d2)
    best, fbest = (x1, f1) if f1 <= f2 else (x2, f2)
    return best, fbest


@jit
def newton_depth(ga, gb, verts, res, tol):
    """Refine the overlap in ``res`` (EPA's) by Newton's method on the unit sphere.

    The depth is the least h(n) over unit n (:func:`_depth_along`), reached where the support
    point of A - B lies along n.  The gradient of h on the sphere is the support point's part
    across n; its Hessian, the support point's turn rate (central differences) less h.  Where
    the support point jumps across a ridge of h (a capsule's side meeting its end, a rim) the
    step is taken along the ridge only, where it is smooth; along the Hessian's positive
    directions only (flat patches: EPA is exact there).  A step is kept only if it lowers h.
    ``res`` is rewritten only when the gradient along the smooth directions fell below tol
    (returned True); otherwise EPA's face, a lower bound of the depth, stands."""
    n0, n1, n2 = -res[R_NORMAL], -res[R_NORMAL + 1], -res[R_NORMAL + 2]
    f, a, b = _depth_along(ga, gb, verts, n0, n1, n2)
    done = False
    step = 1e-7
    scale = ga[W_RADIUS] + gb[W_RADIUS]
    jump = 1e3 * step * scale   # a change of the support point no curvature gives
    floor = 1e-9 * scale
    for _ in range(NEWTON_ITERATIONS):
        s0, s1, s2 = a[0] - b[0], a[1] - b[1], a[2] - b[2]
        t, u = _across(n0, n1, n2)
        dt = _turn(ga, gb, verts, n0, n1, n2, t, step)
        du = _turn(ga, gb, verts, n0, n1, n2, u, step)
        jt = np.sqrt(dt[0] * dt[0] + dt[1] * dt[1] + dt[2] * dt[2]) > jump
        ju = np.sqrt(du[0] * du[0] + du[1] * du[1] + du[2] * du[2]) > jump
        d1 = d2 = 0.0
        gg = 0.0
        if jt or ju:
            # a ridge: step along it, across the jump
            dj = dt if jt else du
            c1 = dj[0] * t[0] + dj[1] * t[1] + dj[2] * t[2]
            c2 = dj[0] * u[0] + dj[1] * u[1] + dj[2] * u[2]
            size = np.sqrt(c1 * c1 + c2 * c2)
            if size == 0.0:
                break
            e1, e2 = -c2 / size, c1 / size
            e = (e1 * t[0] + e2 * u[0], e1 * t[1] + e2 * u[1], e1 * t[2] + e2 * u[2])
            de = _turn(ga, gb, verts, n0, n1, n2, e, step)
            if np.sqrt(de[0] * de[0] + de[1] * de[1] + de[2] * de[2]) > jump:
                break  # a corner of h: EPA's answer stands
            k = (de[0] * e[0] + de[1] * e[1] + de[2] * e[2]) / (2.0 * step) - f
            ge = s0 * e[0] + s1 * e[1] + s2 * e[2]
            if k > floor:
                d1, d2 = -ge / k * e1, -ge / k * e2
                gg = ge * ge
        else:
            h11 = (dt[0] * t[0] + dt[1] * t[1] + dt[2] * t[2]) / (2.0 * step) - f
            h22 = (du[0] * u[0] + du[1] * u[1] + du[2] * u[2]) / (2.0 * step) - f
            h12 = 0.25 * ((dt[0] * u[0] + dt[1] * u[1] + dt[2] * u[2])
                          + (du[0] * t[0] + du[1] * t[1] + du[2] * t[2])) / step
            g1 = s0 * t[0] + s1 * t[1] + s2 * t[2]
            g2 = s0 * u[0] + s1 * u[1] + s2 * u[2]
            # eigen-decomposition of the 2x2 Hessian
            mid = 0.5 * (h11 + h22)
            rad = np.sqrt(0.25 * (h11 - h22) * (h11 - h22) + h12 * h12)
            l1, l2 = mid + rad, mid - rad
            if abs(h12) > 0.0:
                e0, e1 = l1 - h22, h12
                size = np.sqrt(e0 * e0 + e1 * e1)
                e0, e1 = e0 / size, e1 / size
            elif h11 >= h22:
                e0, e1 = 1.0, 0.0
            else:
                e0, e1 = 0.0, 1.0
            if l1 > floor:
                c = -(g1 * e0 + g2 * e1) / l1
                d1, d2 = c * e0, c * e1
                gg += (g1 * e0 + g2 * e1) ** 2
            if l2 > floor:
                c = -(-g1 * e1 + g2 * e0) / l2
                d1, d2 = d1 - c * e1, d2 + c * e0
                gg += (-g1 * e1 + g2 * e0) ** 2
        if gg <= tol * tol:
            done = True
            break
        size = np.sqrt(d1 * d1 + d2 * d2)
        if size > 0.5:
            d1, d2 = 0.5 * d1 / size, 0.5 * d2 / size
        better = False
        for trial in range(30):
            m0, m1, m2 = _on_arc(n0, n1, n2, t, u, d1, d2)
            fm, am, bm = _depth_along(ga, gb, verts, m0, m1, m2)
            if fm < f:
                better = True
                break
            if trial == 0:
                # the step went too far: the least h along it, by a line search (which also
                # stops on a ridge the step crossed, where h has a kink)
                x, fx = _line_minimum(ga, gb, verts, n0, n1, n2, t, u, d1, d2)
                if fx < f:
                    d1, d2 = x * d1, x * d2
                    continue
                # the step crossed a ridge if the support point jumped (curvature moves it
                # by at most the size times the turn): keep the step's part along the ridge
                j0 = am[0] - bm[0] - s0
                j1 = am[1] - bm[1] - s1
                j2 = am[2] - bm[2] - s2
                if j0 * j0 + j1 * j1 + j2 * j2 > 100.0 * scale * scale * (d1 * d1 + d2 * d2):
                    c1 = j0 * t[0] + j1 * t[1] + j2 * t[2]
                    c2 = j0 * u[0] + j1 * u[1] + j2 * u[2]
                    size = np.sqrt(c1 * c1 + c2 * c2)
                    if size > 0.0:
                        e1, e2 = -c2 / size, c1 / size
                        along = d1 * e1 + d2 * e2
                        d1, d2 = along * e1, along * e2
                        continue
            d1, d2 = 0.5 * d1, 0.5 * d2
        if not better:
            done = gg <= 1e6 * tol * tol
            break
        n0, n1, n2, f, a, b = m0, m1, m2, fm, am, bm
    if not done:  # a flat patch or a corner of h: EPA's face (a lower bound) is the answer
        return False
    # on a flat face or a rim the support point is any of the face's points: then the
    # witness points are EPA's, on the refined normal
    r0, r1, r2 = a[0] - b[0] - f * n0, a[1] - b[1] - f * n1, a[2] - b[2] - f * n2
    if r0 * r0 + r1 * r1 + r2 * r2 > 1e6 * tol * tol:
        a = (res[R_PA], res[R_PA + 1], res[R_PA + 2])
        b = (a[0] - f * n0, a[1] - f * n1, a[2] - f * n2)
    res[R_DIST] = -f
    res[R_NORMAL], res[R_NORMAL + 1], res[R_NORMAL + 2] = -n0, -n1, -n2
    res[R_PA], res[R_PA + 1], res[R_PA + 2] = a
    res[R_PB], res[R_PB + 1], res[R_PB + 2] = b
    return done
