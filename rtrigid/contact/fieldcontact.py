"""Heightfields against convex geoms: the contacts of a geom with the terrain, cell by cell.

A heightfield (:mod:`.fieldray` describes its grid: two triangles per cell, split along the
diagonal from (column c, row r) to (c + 1, r + 1)) meets a convex geom where the geom's box,
in the heightfield's axes, lies over its footprint.  Each triangle of the cells under that box
whose highest corner and whose plane the geom reaches is taken as a convex **prism**: the
triangle extruded down, below the geom and the triangle (as MuJoCo collides its hfields), a
world row of kind ``PRISM`` (:mod:`.support`).  The geom meets each prism through the general
narrow phase (:func:`.convex.collide`, and :func:`.clipping.manifold` for a face-on contact: a
box's face, a cylinder's base on the triangle), with the pair's speculative margin; a sphere
whose centre lies above the triangle's plane meets the triangle's closest point instead (the
same answer, without GJK and EPA).

A prism's sides and bottom are not the terrain's surface (between two cells they lie inside
it), so a normal that leaves a prism through them, or over an edge the terrain does not bend
down at, is turned (:func:`_settle`): a contact's normal is its triangle's, except over a ridge
(an edge whose neighbouring triangle falls away), where it stays the edge's as far as the
neighbour's normal and becomes the neighbour's beyond it, and over the heightfield's outer edge
(its side is real), where it stays.  A turned normal's depth is measured along it, from the
triangle's plane, when the geom's deepest point along it lies over the triangle, else it keeps
the depth the narrow phase found (the smaller).

The points of all the prisms are pooled (a point found twice, by two triangles sharing a
corner, once), and when more than ``FIELD_POINTS`` remain they are reduced: the four of
:func:`.clipping.reduce_points` (the deepest, the farthest from it, the two spanning the
largest area either side), then the deepest of the rest whose normals differ from those kept
(a geom across a ridge keeps both slopes).  A box resting across four cells of flat terrain
gets its four corners.  Contacts are written as the general pairs write theirs: the geom's
body, the normal out of the terrain into the geom, the point midway through the overlap.
Nothing is allocated: the scratch is a :class:`FieldSpace`.
"""
from typing import NamedTuple

import numpy as np

from rtrigid._jit import jit
from rtrigid.contact.clipping import MAX_POINTS, M_DEPTH, M_WIDTH, manifold, reduce_points
from rtrigid.contact.convex import R_DIST, R_NORMAL, R_PA, R_PB, closest_triangle, collide
from rtrigid.contact.geometry import (
    G_P,
    GI_BODY,
    GI_COLS,
    GI_ROWS,
    GI_VSTART,
    PRISM,
    SPHERE,
    add_point,
)
from rtrigid.contact.support import (
    T_BOTTOM,
    T_NORMAL,
    T_TOP,
    T_WIDTH,
    W_KIND,
    W_POS,
    W_RADIUS,
    W_ROT,
    W_SIZE,
    rotate_in,
    rotate_out,
    support,
)
from rtrigid.maths.quat import rotmat

FIELD_POINTS = 8    # most contacts of one geom with one heightfield
CANDIDATES = 64     # most points pooled from the prisms (beyond: the deepest are kept)
K_NORMAL = 3        # candidate row: point (world), normal (world), depth, kept
K_DEPTH = 6
K_KEPT = 7
K_WIDTH = 8
FACE_COS = 1.0 - 1e-9   # a prism's normal this close to its triangle's is taken as the triangle's
DISTINCT_COS = 0.999    # normals further apart than this (2.6 degrees) are different slopes


class FieldSpace(NamedTuple):
    """Scratch of :func:`field_pair`: ``prism (T_WIDTH,)`` the prism's world row, ``res``
    collide's result, ``out (MAX_POINTS, M_WIDTH)`` a prism's manifold, ``cand (CANDIDATES,
    K_WIDTH)`` the pooled points, ``pts (CANDIDATES, M_WIDTH)`` and ``best (MAX_POINTS,
    M_WIDTH)`` the reduction's, ``ws`` and ``cs`` the narrow phase's and the clipping's
    (:class:`.convex.Workspace`, :class:`.clipping.ClipSpace`)."""
    prism: np.ndarray
    res: np.ndarray
    out: np.ndarray
    cand: np.ndarray
    pts: np.ndarray
    best: np.ndarray
    ws: tuple
    cs: tuple


SCRATCH = T_WIDTH + CANDIDATES * (K_WIDTH + M_WIDTH) + MAX_POINTS * M_WIDTH
"""Floats of the scratch that :func:`field_space` carves (beside collide's and the
clipping's, which the general pairs share)."""


@jit
def field_space(xf, res, out, ws, cs):
    """The :class:`FieldSpace` of the ``SCRATCH`` floats xf and the narrow phase's scratch."""
    o = T_WIDTH
    cand = xf[o:o + CANDIDATES * K_WIDTH].reshape((CANDIDATES, K_WIDTH))
    o += CANDIDATES * K_WIDTH
    pts = xf[o:o + CANDIDATES * M_WIDTH].reshape((CANDIDATES, M_WIDTH))
    o += CANDIDATES * M_WIDTH
    best = xf[o:o + MAX_POINTS * M_WIDTH].reshape((MAX_POINTS, M_WIDTH))
    return FieldSpace(xf[0:T_WIDTH], res, out, cand, pts, best, ws, cs)


@jit
def _extent(wa, verts, prism, cf, i):
    """The least and greatest coordinate of geom row wa along the heightfield's axis i."""
    d0, d1, d2 = prism[W_ROT + i], prism[W_ROT + 3 + i], prism[W_ROT + 6 + i]
    p = support(wa, verts, d0, d1, d2)
    hi = d0 * (p[0] - cf[0]) + d1 * (p[1] - cf[1]) + d2 * (p[2] - cf[2])
    p = support(wa, verts, -d0, -d1, -d2)
    lo = d0 * (p[0] - cf[0]) + d1 * (p[1] - cf[1]) + d2 * (p[2] - cf[2])
    return lo, hi


@jit
def _far(verts, grid, cell, e, o):
    """Whether the triangle across edge e of triangle ``cell`` (r, c, t) exists, and its corner
    off that edge (heightfield axes, about the point o)."""
    v0, nx, ny = grid
    r, c, t = cell
    if t == 0:  # (c, r), (c + 1, r), (c + 1, r + 1)
        ok, cc, rr = (r >= 1, c, r - 1) if e == 0 else (
            (c + 2 <= nx - 1, c + 2, r + 1) if e == 1 else (True, c, r + 1))
    else:       # (c, r), (c + 1, r + 1), (c, r + 1)
        ok, cc, rr = (True, c + 1, r) if e == 0 else (
            (r + 2 <= ny - 1, c + 1, r + 2) if e == 1 else (c >= 1, c - 1, r))
    if not ok:
        return False, 0.0, 0.0, 0.0
    i = v0 + rr * nx + cc
    return True, verts[i, 0] - o[0], verts[i, 1] - o[1], verts[i, 2] - o[2]


@jit
def _corner(prism, i):
    i = i % 3
    return prism[T_TOP + 3 * i], prism[T_TOP + 3 * i + 1], prism[T_TOP + 3 * i + 2]


@jit
def _over(prism, x, y):
    """Whether (x, y) (the prism's axes) lies over its triangle."""
    slack = 1e-9 * prism[W_RADIUS]
    for i in range(3):
        a0, a1, _ = _corner(prism, i)
        b0, b1, _ = _corner(prism, i + 1)
        c0, c1, _ = _corner(prism, i + 2)
        e0, e1 = b0 - a0, b1 - a1
        inner = 1.0 if e0 * (c1 - a1) - e1 * (c0 - a0) > 0.0 else -1.0
        if inner * (e0 * (y - a1) - e1 * (x - a0)) < -slack * np.sqrt(e0 * e0 + e1 * e1):
            return False
    return True


@jit
def _settle(wa, verts, prism, res, grid, cell, o, margin):
    """Turn the normal of ``res`` (a geom against a prism) to the terrain's (see the module's
    docstring), its depth with it; returns False when the contact falls outside the margin."""
    n0, n1, n2 = rotate_in(prism, res[R_NORMAL], res[R_NORMAL + 1], res[R_NORMAL + 2])
    t0, t1, t2 = prism[T_NORMAL], prism[T_NORMAL + 1], prism[T_NORMAL + 2]
    cos = n0 * t0 + n1 * t1 + n2 * t2
    if cos >= FACE_COS:  # the triangle's face: its normal exactly
        nw = rotate_out(prism, t0, t1, t2)
        for i in range(3):
            res[R_NORMAL + i] = nw[i]
        return True
    # the edge it leans over: the one whose side faces it most
    e, lean = 0, -np.inf
    for i in range(3):
        a0, a1, _ = _corner(prism, i)
        b0, b1, _ = _corner(prism, i + 1)
        c0, c1, _ = _corner(prism, i + 2)
        s0, s1 = b1 - a1, a0 - b0
        length = np.sqrt(s0 * s0 + s1 * s1)
        if s0 * (c0 - a0) + s1 * (c1 - a1) > 0.0:
            s0, s1 = -s0, -s1
        d = (n0 * s0 + n1 * s1) / length
        if d > lean:
            e, lean = i, d
    m0, m1, m2 = t0, t1, t2
    ok, f0, f1, f2 = _far(verts, grid, cell, e, o)
    if not ok:
        if lean >= -n2:
            return True  # the heightfield's outer side
    else:
        a0, a1, a2 = _corner(prism, e)
        b0, b1, b2 = _corner(prism, e + 1)
        u0, u1, u2 = b0 - a0, b1 - a1, b2 - a2
        v0, v1, v2 = f0 - a0, f1 - a1, f2 - a2
        w0, w1, w2 = u1 * v2 - u2 * v1, u2 * v0 - u0 * v2, u0 * v1 - u1 * v0
        s = np.sqrt(w0 * w0 + w1 * w1 + w2 * w2)
        if w2 < 0.0:
            s = -s
        w0, w1, w2 = w0 / s, w1 / s, w2 / s
        scale = np.sqrt(v0 * v0 + v1 * v1 + v2 * v2)
        if t0 * v0 + t1 * v1 + t2 * v2 < -1e-9 * scale:  # a ridge: the neighbour falls away
            if n2 > 0.0 and cos >= w0 * t0 + w1 * t1 + w2 * t2:
                return True  # between the two slopes: the ridge's own normal
            m0, m1, m2 = w0, w1, w2
    nw = rotate_out(prism, m0, m1, m2)
    p = support(wa, verts, -nw[0], -nw[1], -nw[2])
    l0, l1, l2 = rotate_in(prism, p[0] - prism[W_POS], p[1] - prism[W_POS + 1],
                           p[2] - prism[W_POS + 2])
    if _over(prism, l0, l1):
        top = -np.inf
        for i in range(3):
            a0, a1, a2 = _corner(prism, i)
            top = max(top, a0 * m0 + a1 * m1 + a2 * m2)
        depth = top - (l0 * m0 + l1 * m1 + l2 * m2)
        for i in range(3):
            res[R_PA + i] = p[i]
    else:
        depth = -res[R_DIST]
    if depth <= -margin:
        return False
    res[R_DIST] = -depth
    for i in range(3):
        res[R_NORMAL + i] = nw[i]
        res[R_PB + i] = res[R_PA + i] + depth * nw[i]
    return True


@jit
def _pool(cand, n, row, nw, tol):
    """Add the manifold point ``row`` (point, depth) with normal nw to the n pooled points;
    returns their number.  A point already there (within tol, the same normal) keeps the
    deeper depth; a full pool keeps the deepest."""
    for j in range(n):
        d = ((row[0] - cand[j, 0]) ** 2 + (row[1] - cand[j, 1]) ** 2
             + (row[2] - cand[j, 2]) ** 2)
        dot = (nw[0] * cand[j, K_NORMAL] + nw[1] * cand[j, K_NORMAL + 1]
               + nw[2] * cand[j, K_NORMAL + 2])
        if d <= tol * tol and dot >= FACE_COS:
            if row[M_DEPTH] > cand[j, K_DEPTH]:
                cand[j, K_DEPTH] = row[M_DEPTH]
            return n
    j = n
    if n == cand.shape[0]:
        j = 0
        for i in range(n):
            if cand[i, K_DEPTH] < cand[j, K_DEPTH]:
                j = i
        if cand[j, K_DEPTH] >= row[M_DEPTH]:
            return n
    for i in range(3):
        cand[j, i] = row[i]
        cand[j, K_NORMAL + i] = nw[i]
    cand[j, K_DEPTH] = row[M_DEPTH]
    cand[j, K_KEPT] = 0.0
    return max(n, j + 1)


@jit
def _prism(prism, verts, grid, cell, cf, zone):
    """Fill the prism row of triangle ``cell`` (r, c, t) of the grid (v0, nx, ny) for a geom
    whose heights (heightfield axes) span zone (lo, hi); returns its centre (heightfield
    axes), or an empty tuple's stand-in (inf) when the geom lies above its highest corner."""
    v0, nx, _ = grid
    r, c, t = cell
    i0 = v0 + r * nx + c
    i1 = i0 + 1 if t == 0 else i0 + nx + 1
    i2 = i0 + nx + 1 if t == 0 else i0 + nx
    zlo, zhi, margin = zone
    top = max(verts[i0, 2], verts[i1, 2], verts[i2, 2])
    if top < zlo - margin:
        return np.inf, 0.0, 0.0
    low = min(verts[i0, 2], verts[i1, 2], verts[i2, 2])
    wide = (max(verts[i0, 0], verts[i1, 0], verts[i2, 0]) - min(verts[i0, 0], verts[i1, 0],
                                                                 verts[i2, 0])
            + max(verts[i0, 1], verts[i1, 1], verts[i2, 1]) - min(verts[i0, 1], verts[i1, 1],
                                                                   verts[i2, 1]))
    bottom = min(zlo, low) - (zhi - zlo) - wide
    o0 = (verts[i0, 0] + verts[i1, 0] + verts[i2, 0]) / 3.0
    o1 = (verts[i0, 1] + verts[i1, 1] + verts[i2, 1]) / 3.0
    o2 = 0.5 * (top + bottom)
    radius = 0.0
    for k in range(3):
        i = i0 if k == 0 else (i1 if k == 1 else i2)
        x, y, z = verts[i, 0] - o0, verts[i, 1] - o1, verts[i, 2] - o2
        prism[T_TOP + 3 * k], prism[T_TOP + 3 * k + 1], prism[T_TOP + 3 * k + 2] = x, y, z
        radius = max(radius, np.sqrt(x * x + y * y + z * z),
                     np.sqrt(x * x + y * y + (bottom - o2) ** 2))
    prism[T_BOTTOM] = bottom - o2
    u0, u1, u2 = verts[i1, 0] - verts[i0, 0], verts[i1, 1] - verts[i0, 1], verts[i1, 2] - verts[i0, 2]
    w0, w1, w2 = verts[i2, 0] - verts[i0, 0], verts[i2, 1] - verts[i0, 1], verts[i2, 2] - verts[i0, 2]
    m0, m1, m2 = u1 * w2 - u2 * w1, u2 * w0 - u0 * w2, u0 * w1 - u1 * w0
    s = np.sqrt(m0 * m0 + m1 * m1 + m2 * m2)
    prism[T_NORMAL], prism[T_NORMAL + 1], prism[T_NORMAL + 2] = m0 / s, m1 / s, m2 / s
    prism[W_RADIUS] = radius
    p = rotate_out(prism, o0, o1, o2)
    for k in range(3):
        prism[W_POS + k] = cf[k] + p[k]
    return o0, o1, o2


@jit
def _above(wa, verts, prism):
    """How far geom row wa reaches below the plane of the prism's triangle (negative: it lies
    wholly above it, and so above the prism)."""
    t0, t1, t2 = prism[T_NORMAL], prism[T_NORMAL + 1], prism[T_NORMAL + 2]
    nw = rotate_out(prism, t0, t1, t2)
    p = support(wa, verts, -nw[0], -nw[1], -nw[2])
    l0, l1, l2 = rotate_in(prism, p[0] - prism[W_POS], p[1] - prism[W_POS + 1],
                           p[2] - prism[W_POS + 2])
    a0, a1, a2 = _corner(prism, 0)
    return (a0 - l0) * t0 + (a1 - l1) * t1 + (a2 - l2) * t2


@jit
def _sphere(wa, prism, tri, res):
    """A sphere (geom row wa) whose centre lies above the prism's triangle's plane against the
    prism: the closest point of the triangle, written to ``res`` as collide writes it; returns
    False (nothing written) for a centre on or below the plane, which collide takes."""
    c0, c1, c2 = rotate_in(prism, wa[W_POS] - prism[W_POS], wa[W_POS + 1] - prism[W_POS + 1],
                           wa[W_POS + 2] - prism[W_POS + 2])
    r = wa[W_SIZE]
    a0, a1, a2 = _corner(prism, 0)
    if ((c0 - a0) * prism[T_NORMAL] + (c1 - a1) * prism[T_NORMAL + 1]
            + (c2 - a2) * prism[T_NORMAL + 2]) <= 1e-9 * r:
        return False
    for i in range(3):
        x, y, z = _corner(prism, i)
        tri[i, 0], tri[i, 1], tri[i, 2] = x - c0, y - c1, z - c2
    la, lb, lc, d2 = closest_triangle(tri, 0, 1, 2)
    d = np.sqrt(d2)
    q0 = la * tri[0, 0] + lb * tri[1, 0] + lc * tri[2, 0]  # the closest point from the centre
    q1 = la * tri[0, 1] + lb * tri[1, 1] + lc * tri[2, 1]
    q2 = la * tri[0, 2] + lb * tri[1, 2] + lc * tri[2, 2]
    nw = rotate_out(prism, -q0 / d, -q1 / d, -q2 / d)
    qw = rotate_out(prism, q0, q1, q2)
    res[R_DIST] = d - r
    for i in range(3):
        res[R_NORMAL + i] = nw[i]
        res[R_PA + i] = wa[W_POS + i] - r * nw[i]
        res[R_PB + i] = wa[W_POS + i] + qw[i]
    return True


@jit
def _triangle(wa, scene, space, grid, cell, cf, zone, n):
    """Pool the contacts of geom row wa with one triangle's prism; returns the pool's count."""
    verts, planes, prism, res, out = scene.verts, scene.planes, space.prism, space.res, space.out
    margin = zone[2]
    o = _prism(prism, verts, grid, cell, cf, zone)
    if o[0] == np.inf or _above(wa, verts, prism) < -margin:
        return n
    if int(wa[W_KIND]) != SPHERE or not _sphere(wa, prism, space.best, res):
        collide(wa, prism, verts, space.ws, res)
    if res[R_DIST] >= margin or not _settle(wa, verts, prism, res, grid, cell, o, margin):
        return n
    m = manifold(wa, prism, verts, planes, res, margin, space.cs, out)
    nw = (res[R_NORMAL], res[R_NORMAL + 1], res[R_NORMAL + 2])
    tol = 1e-7 * wa[W_RADIUS]
    for i in range(m):
        n = _pool(space.cand, n, out[i], nw, tol)
    return n


@jit
def _write(table, k, cap, a, b, cand, j, f, surface):
    """Pooled point j as contact f of the pair; returns the next free row."""
    cand[j, K_KEPT] = 1.0
    if k >= cap:
        return k
    mu, e, _ = surface
    return add_point(table, k, a, b, f, cand[j, 0], cand[j, 1], cand[j, 2],
                     (cand[j, K_NORMAL], cand[j, K_NORMAL + 1], cand[j, K_NORMAL + 2]),
                     cand[j, K_DEPTH], mu, e)


@jit
def _emit(table, k, cap, a, b, space, n, tie, surface):
    """Write the pooled points, at most FIELD_POINTS of them (see the module's docstring);
    returns the next free row."""
    cand = space.cand
    if n <= FIELD_POINTS:
        for j in range(n):
            k = _write(table, k, cap, a, b, cand, j, j, surface)
        return k
    deep = 0
    for j in range(n):
        for i in range(M_WIDTH):
            space.pts[j, i] = cand[j, i] if i < 3 else cand[j, K_DEPTH]
        if cand[j, K_DEPTH] > cand[deep, K_DEPTH]:
            deep = j
    m = reduce_points(space.pts, n, cand[deep, K_NORMAL], cand[deep, K_NORMAL + 1],
                      cand[deep, K_NORMAL + 2], tie, space.best)
    f = 0
    for i in range(m):
        for j in range(n):
            if cand[j, K_KEPT] == 0.0 and (space.best[i, 0] == cand[j, 0]
                                           and space.best[i, 1] == cand[j, 1]
                                           and space.best[i, 2] == cand[j, 2]
                                           and space.best[i, M_DEPTH] == cand[j, K_DEPTH]):
                k = _write(table, k, cap, a, b, cand, j, f, surface)
                f += 1
                break
    while f < FIELD_POINTS:
        pick = -1
        for j in range(n):
            if cand[j, K_KEPT] != 0.0 or (pick >= 0 and cand[j, K_DEPTH] <= cand[pick, K_DEPTH]):
                continue
            distinct = True
            for i in range(n):
                if cand[i, K_KEPT] != 0.0 and (
                        cand[i, K_NORMAL] * cand[j, K_NORMAL]
                        + cand[i, K_NORMAL + 1] * cand[j, K_NORMAL + 1]
                        + cand[i, K_NORMAL + 2] * cand[j, K_NORMAL + 2]) >= DISTINCT_COS:
                    distinct = False
                    break
            if distinct:
                pick = j
        if pick < 0:
            break
        k = _write(table, k, cap, a, b, cand, pick, f, surface)
        f += 1
    return k


@jit
def field_pair(table, k, cap, a, gf, scene, pf, wa, surface, space):
    """Append the contacts of a convex geom (world row ``wa`` of :mod:`.support`, of body a)
    with heightfield geom row gf at world pose pf (:class:`~.geometry.Pose`) from row k, at
    most up to row ``cap``; returns the next free row.  surface: the pair's
    :class:`~.geometry.Surface`; space: a :class:`FieldSpace`."""
    geom, geomi, verts = scene.geom, scene.geomi, scene.verts
    margin = surface[2]
    cf, qf = pf
    prism = space.prism
    for i in range(T_WIDTH):
        prism[i] = 0.0
    prism[W_KIND] = PRISM
    rotmat(qf, prism[W_ROT:W_ROT + 9].reshape((3, 3)))
    xlo, xhi = _extent(wa, verts, prism, cf, 0)
    ylo, yhi = _extent(wa, verts, prism, cf, 1)
    zlo, zhi = _extent(wa, verts, prism, cf, 2)
    sx, sy = geom[gf, G_P], geom[gf, G_P + 1]
    if (xlo - margin > sx or xhi + margin < -sx or ylo - margin > sy or yhi + margin < -sy
            or zlo - margin > geom[gf, G_P + 2]):
        return k
    grid = (geomi[gf, GI_VSTART], geomi[gf, GI_COLS], geomi[gf, GI_ROWS])
    nx, ny = grid[1], grid[2]
    cx, cy = 2.0 * sx / (nx - 1), 2.0 * sy / (ny - 1)
    c0 = max(int(np.floor((xlo - margin + sx) / cx)), 0)
    c1 = min(int(np.floor((xhi + margin + sx) / cx)), nx - 2)
    r0 = max(int(np.floor((ylo - margin + sy) / cy)), 0)
    r1 = min(int(np.floor((yhi + margin + sy) / cy)), ny - 2)
    zone = (zlo, zhi, margin)
    n = 0
    for r in range(r0, r1 + 1):
        for c in range(c0, c1 + 1):
            for t in range(2):
                n = _triangle(wa, scene, space, grid, (r, c, t), cf, zone, n)
    return _emit(table, k, cap, a, geomi[gf, GI_BODY], space, n, 1e-9 * wa[W_RADIUS],
                 surface)
