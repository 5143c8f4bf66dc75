"""Ray casts against heightfields: the first point of a heightfield's solid that a ray
o + t d (t >= 0) meets, walking only the grid cells the ray crosses.

A heightfield (:mod:`rtrigid.geoms`: heights (ny, nx), size (sx, sy)) is, in its own frame,
the solid over the rectangle [-sx, sx] x [-sy, sy] between its bottom, the plane of its lowest
height, and its surface: grid point (r, c) at x = sx (2 c / (nx - 1) - 1), y = sy (2 r / (ny
- 1) - 1), z = heights[r, c], each cell split into the triangles (c, r), (c + 1, r), (c + 1,
r + 1) and (c, r), (c + 1, r + 1), (c, r + 1) (its diagonal from (c, r) to (c + 1, r + 1)),
as MuJoCo's hfield and the viewer's mesh.  Its four sides rise from the bottom to the
surface's edge.  MuJoCo's hfield is the same solid over a base of depth ``size[3]``; rtrigid's
has no base (its bottom is its lowest height).

The ray is clipped to the box of the footprint between the lowest and highest heights; a ray
that enters the box through the bottom, or through a side below the surface's edge, meets
that face; otherwise it walks the cells its shadow on the grid crosses, in order (Amanatides
& Woo's 2D DDA, as Bullet's ``btHeightfieldTerrainShape`` and MuJoCo's ``mj_rayHfield``),
and stops at the first cell whose triangle it crosses.  A ray that starts inside the solid
meets its surface on the way out (the surface, a side or the bottom), as every geom's ray cast
(:mod:`.raycast`).  The normal is the face's outward unit normal (a triangle's points up, out
of the solid, whichever side the ray comes from), in world axes.

A heightfield is a row of ``F_WIDTH`` floats: a world geom row of :mod:`.support` (its kind,
pose and sizes sx, sy and its lowest height in ``W_SIZE``) and ``F_HIGH``, ``F_NX``,
``F_NY``, ``F_START`` (its grid's first height in the heights pool, row-major).  Nothing is
allocated.
"""
import numpy as np

from rtrigid._jit import jit
from rtrigid.contact.geometry import HEIGHTFIELD
from rtrigid.contact.support import (
    W_KIND,
    W_POS,
    W_ROT,
    W_SIZE,
    W_WIDTH,
    clip_slab,
    rotate_in,
    rotate_out,
)

F_LOW = W_SIZE + 2   # its lowest height: the bottom
F_HIGH = W_WIDTH     # its highest height
F_NX = W_WIDTH + 1   # grid points along x (columns) and y (rows)
F_NY = W_WIDTH + 2
F_START = W_WIDTH + 3
F_WIDTH = W_WIDTH + 4
# how far outside a cell's triangle (in units of the cell) a crossing still counts: the
# rounding of the crossing point, so that a ray through an edge or a corner is not lost
SLACK = 1e-9
MISS = (np.inf, 0.0, 0.0, 0.0)


def field_row(heights, size, pos, rot, start):
    """The row (``F_WIDTH``) of a heightfield of ``heights`` (ny, nx) and ``size`` (sx, sy)
    whose frame is at ``pos`` with rotation matrix ``rot`` (local -> world), its heights from
    ``start`` on in the pool."""
    h = np.asarray(heights, float)
    row = np.zeros(F_WIDTH)
    row[W_KIND] = HEIGHTFIELD
    row[W_SIZE], row[W_SIZE + 1] = size
    row[F_LOW], row[F_HIGH] = h.min(), h.max()
    row[W_POS:W_POS + 3] = pos
    row[W_ROT:W_ROT + 9] = np.asarray(rot, float).reshape(9)
    row[F_NY], row[F_NX] = h.shape
    row[F_START] = start
    return row


@jit
def _corners(f, heights, c, r):
    """The heights (z00, z10, z01, z11) at the corners (c, r), (c + 1, r), (c, r + 1),
    (c + 1, r + 1) of a cell."""
    nx = int(f[F_NX])
    k = int(f[F_START]) + r * nx + c
    return heights[k], heights[k + 1], heights[k + nx], heights[k + nx + 1]


@jit
def _spacing(f):
    """The cells' width along x and y."""
    return (2.0 * f[W_SIZE] / (f[F_NX] - 1.0), 2.0 * f[W_SIZE + 1] / (f[F_NY] - 1.0))


@jit
def _index(u, n):
    """The cell (0 .. n - 2) that holds the grid coordinate u (in cells from the edge)."""
    return min(max(int(np.floor(u)), 0), n - 2)


@jit
def _slopes(z00, z10, z01, z11, upper, cx, cy):
    """The slopes dz/dx, dz/dy of a cell's lower triangle (below its diagonal, v <= u) or
    its upper one."""
    if upper:
        return (z11 - z01) / cx, (z01 - z00) / cy
    return (z10 - z00) / cx, (z11 - z10) / cy


@jit
def surface(f, heights, x, y):
    """The surface's height at (x, y) of the footprint, heightfield frame."""
    cx, cy = _spacing(f)
    u, v = (x + f[W_SIZE]) / cx, (y + f[W_SIZE + 1]) / cy
    c, r = _index(u, int(f[F_NX])), _index(v, int(f[F_NY]))
    z00, z10, z01, z11 = _corners(f, heights, c, r)
    a, b = _slopes(z00, z10, z01, z11, v - r > u - c, cx, cy)
    return z00 + a * (x - (c * cx - f[W_SIZE])) + b * (y - (r * cy - f[W_SIZE + 1]))


@jit
def _cell(f, heights, o, d, c, r, lo, hi):
    """(t, local normal) of the nearest crossing, lo <= t <= hi, of the ray with the
    triangles of cell (c, r); MISS where none."""
    cx, cy = _spacing(f)
    x0, y0 = c * cx - f[W_SIZE], r * cy - f[W_SIZE + 1]
    z00, z10, z01, z11 = _corners(f, heights, c, r)
    best = MISS
    for upper in (False, True):
        a, b = _slopes(z00, z10, z01, z11, upper, cx, cy)
        # the plane z = z00 + a (x - x0) + b (y - y0), both triangles through (c, r)
        den = d[2] - a * d[0] - b * d[1]
        if den == 0.0:
            continue
        t = (z00 + a * (o[0] - x0) + b * (o[1] - y0) - o[2]) / den
        if not (lo <= t <= hi and t < best[0]):
            continue
        u, v = (o[0] + t * d[0] - x0) / cx, (o[1] + t * d[1] - y0) / cy
        if u < -SLACK or u > 1.0 + SLACK or v < -SLACK or v > 1.0 + SLACK:
            continue
        if (v < u - SLACK) if upper else (v > u + SLACK):
            continue
        best = (t, -a, -b, 1.0)
    return best


@jit
def _next(o, d, k, size, step):
    """The t at which the ray crosses the next grid line along one axis from cell k (inf
    when it does not move along it)."""
    if step > 0:
        return ((k + 1) * size - o) / d
    if step < 0:
        return (k * size - o) / d
    return np.inf


@jit
def _walk(f, heights, o, d, lo, hi):
    """The first crossing, lo <= t <= hi, of the ray with the surface: the cells its shadow
    crosses, in order, from the one under o + lo d."""
    nx, ny = int(f[F_NX]), int(f[F_NY])
    cx, cy = _spacing(f)
    # the ray from the grid's corner (-sx, -sy)
    g = (o[0] + f[W_SIZE], o[1] + f[W_SIZE + 1], o[2])
    c, r = _index((g[0] + lo * d[0]) / cx, nx), _index((g[1] + lo * d[1]) / cy, ny)
    sc = 1 if d[0] > 0.0 else (-1 if d[0] < 0.0 else 0)
    sr = 1 if d[1] > 0.0 else (-1 if d[1] < 0.0 else 0)
    while True:
        hit = _cell(f, heights, o, d, c, r, lo, hi)
        if hit[0] < np.inf:
            return hit
        tx, ty = _next(g[0], d[0], c, cx, sc), _next(g[1], d[1], r, cy, sr)
        if min(tx, ty) > hi:
            return MISS
        if tx < ty:
            c += sc
        else:
            r += sr
        if c < 0 or c > nx - 2 or r < 0 or r > ny - 2:
            return MISS


@jit
def _edge(f, heights, axis, side, w):
    """The surface's height on the side x = side sx (axis 0) or y = side sy (axis 1) at w
    (its y or x): the grid's boundary row or column, linear between its points."""
    nx, ny = int(f[F_NX]), int(f[F_NY])
    cx, cy = _spacing(f)
    start = int(f[F_START])
    if axis == 0:
        u = (w + f[W_SIZE + 1]) / cy
        k = _index(u, ny)
        first, stride = start + k * nx + (nx - 1 if side > 0 else 0), nx
    else:
        u = (w + f[W_SIZE]) / cx
        k = _index(u, nx)
        first, stride = start + k + ((ny - 1) * nx if side > 0 else 0), 1
    s = u - k
    return heights[first] * (1.0 - s) + heights[first + stride] * s


@jit
def _face(axis, sign):
    """(0, local normal) of the box face on ``axis`` whose outward normal is ``sign``."""
    return (0.0, sign if axis == 0 else 0.0, sign if axis == 1 else 0.0,
            sign if axis == 2 else 0.0)


@jit
def local_field(f, heights, o, d, max_dist):
    """(t, local normal, not unit) of the ray o + t d against heightfield row f, both in
    its frame; t = inf where it misses within max_dist."""
    low, high = f[F_LOW], f[F_HIGH]
    centre = (0.0, 0.0, 0.5 * (low + high))
    half = (f[W_SIZE], f[W_SIZE + 1], 0.5 * (high - low))
    enter, leave, ein, eout = -np.inf, np.inf, -1, -1
    for i in range(3):
        if d[i] == 0.0:
            if abs(o[i] - centre[i]) > half[i]:
                return MISS
            continue
        enter, leave, ein, eout = clip_slab(o[i] - centre[i], d[i], half[i], enter, leave,
                                            ein, eout, i)
    if enter > leave or leave < 0.0 or enter > max_dist:
        return MISS
    inside = False
    if enter >= 0.0:   # from outside the box, through its face on axis ein
        sign = -1.0 if d[ein] > 0.0 else 1.0
        p = (o[0] + enter * d[0], o[1] + enter * d[1], o[2] + enter * d[2])
        if ein == 2 and sign < 0.0:   # the bottom
            face = _face(2, -1.0)
            return (enter, face[1], face[2], face[3])
        if ein < 2 and p[2] <= _edge(f, heights, ein, sign, p[1 - ein]):   # a side
            face = _face(ein, sign)
            return (enter, face[1], face[2], face[3])
        lo = enter
    else:
        lo = 0.0
        inside = o[2] < surface(f, heights, o[0], o[1])
    hit = _walk(f, heights, o, d, lo, min(leave, max_dist))
    if hit[0] < np.inf or not inside or leave > max_dist:
        return hit
    # from inside, out through the box's side or bottom without crossing the surface
    face = _face(eout, 1.0 if d[eout] > 0.0 else -1.0)
    return (leave, face[1], face[2], face[3])


@jit
def ray_field(f, heights, o0, o1, o2, d0, d1, d2, max_dist):
    """(distance, normal) of the ray from o along d against heightfield row f (world), the
    outward unit normal at the hit; (inf, 0, 0, 0) where it misses within max_dist."""
    o = rotate_in(f, o0 - f[W_POS], o1 - f[W_POS + 1], o2 - f[W_POS + 2])
    d = rotate_in(f, d0, d1, d2)
    hit = local_field(f, heights, o, d, max_dist)
    if not hit[0] <= max_dist:
        return MISS
    n = rotate_out(f, hit[1], hit[2], hit[3])
    size = np.sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2])
    return (hit[0], n[0] / size, n[1] / size, n[2] / size)


@jit
def raycast_fields(fields, heights, origins, directions, max_dist, dist, which, normals,
                   first):
    """Ray i (origins[i] along directions[i]) against every heightfield row of ``fields``
    (n, F_WIDTH), their grids in ``heights``: where one is nearer than ``dist[i]`` (the
    nearest hit so far, inf where none) and within max_dist, its distance into ``dist[i]``,
    ``first`` + its index into ``which[i]`` and its outward normal into ``normals[i]``."""
    for i in range(origins.shape[0]):
        for j in range(fields.shape[0]):
            hit = ray_field(fields[j], heights, origins[i, 0], origins[i, 1], origins[i, 2],
                            directions[i, 0], directions[i, 1], directions[i, 2],
                            min(max_dist, dist[i]))
            if hit[0] < dist[i]:
                dist[i], which[i] = hit[0], first + j
                normals[i, 0], normals[i, 1], normals[i, 2] = hit[1], hit[2], hit[3]
