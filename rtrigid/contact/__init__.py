"""Contact and friction: grounds, collision shapes, the contact table and its solve.

:class:`Contacts` freezes what a :class:`~rtrigid.Model` says about contact -- each body's
collision shape, friction and restitution, the grounds -- into flat arrays, owns the contact
table the kernels fill (no allocation in the step), and reads it back for
:meth:`rtrigid.Simulation.contacts`.  The narrow phase is :mod:`.geometry` (against a ground)
and :mod:`.pairs` (between bodies), the shape kinds' table :mod:`.shapes`, the solve
:mod:`.solver`; a backend runs :func:`.solver.resolve` after each free-flight step.
"""
from __future__ import annotations

import hashlib

import numpy as np

from rtrigid.contact.geometry import (
    C_BODY,
    C_DEPTH,
    C_GEOM,
    C_GEOMB,
    C_IMPULSE,
    C_NORMAL,
    C_OTHER,
    C_POINT,
    C_WIDTH,
    G_E,
    G_HALF,
    G_KIND,
    G_MU,
    G_MUR,
    G_MUT,
    G_OFFSET,
    G_P,
    G_QUAT,
    G_RADIUS,
    G_TIGHT,
    G_TIGHT_R,
    G_WIDTH,
    GEOM_CODES,
    GI_BODY,
    GI_COLS,
    GI_CONAFFINITY,
    GI_CONTYPE,
    GI_HANDLE,
    GI_KIND,
    GI_PAIRED,
    GI_PCOUNT,
    GI_PSTART,
    GI_ROWS,
    GI_SWEEP,
    GI_VCOUNT,
    GI_VSTART,
    GI_WIDTH,
    HULL_POINTS,
    P_E,
    P_HEIGHT,
    P_MU,
    P_MUR,
    P_MUT,
    P_NORMAL,
    P_WIDTH,
    W_CENTRE,
    W_QUAT,
    W_WIDTH,
)
from rtrigid.contact.general import needs_general, scratch
from rtrigid.contact.manifold import LAM_WIDTH, Scene, slot
from rtrigid.contact.pairs import has_pair_test
from rtrigid.contact.shapes import SHAPES as SHAPE_TABLE
from rtrigid.contact.solver import LIFT_WIDTH, VEL_WIDTH

SWEEPS = 16  # most Gauss-Seidel sweeps over the contacts per step: the solve's budget
PAIR_ROWS = 16  # table rows per geom for contacts between geoms, to start with (it grows)
GROUND_POINTS = {"ellipsoid": 1, "convex": HULL_POINTS, "mesh": HULL_POINTS, "heightfield": 0}


def has_contacts(model) -> bool:
    """True when the model has a ground, a kinematic body (the contact step moves it), or
    two geoms, one added with :meth:`rtrigid.Model.add_geom`, that may touch (on different bodies, or one static; the
    filter bits and the excluded pairs allowing): its geoms then collide with the grounds
    and with each other.  (A model whose only shapes come from ``add_body(shape=...)`` and
    that has no ground draws them only, as it always has.)"""
    if model.grounds or any(b.kinematic for b in model.bodies):
        return True
    # without a ground: whether two geoms, one of add_geom, may ever touch (a robot whose links
    # may not touch each other, alone in the world, has no contacts to step)
    geoms = model.geoms
    excluded = model.jointed_pairs() | set(getattr(model, "excluded", ()))
    for i, a in enumerate(geoms):
        for b in geoms[i + 1:]:
            if a.source == b.source == "shape" or a.body == b.body or (
                    a.body is None and b.body is None):
                continue
            if not ((a.contype & b.conaffinity) or (b.contype & a.conaffinity)):
                continue
            if a.body is not None and b.body is not None and (
                    min(a.body, b.body), max(a.body, b.body)) in excluded:
                continue
            return True
    return False


def _values(geom):
    """A geom's G_P values and bounding radius about its origin."""
    kind, p = geom.kind, geom.params
    if kind in SHAPE_TABLE:
        values = np.concatenate([np.atleast_1d(p[k]) for k in SHAPE_TABLE[kind].params])
        return values, SHAPE_TABLE[kind].bounding_radius(values)
    if kind == "ellipsoid":
        return np.asarray(p["radii"], float), float(np.max(p["radii"]))
    if kind == "heightfield":
        h = p["heights"]
        top = float(np.max(np.abs(h)))
        return np.array([*p["size"], float(np.max(h))]), float(np.sqrt(np.sum(np.square(
            p["size"])) + top * top))
    v = geom.vertices
    return np.max(np.abs(v), axis=0), float(np.max(np.linalg.norm(v, axis=1)))


def _grid(geom):
    """A heightfield's grid points (ny * nx, 3), geom frame, row-major."""
    h = geom.params["heights"]
    ny, nx = h.shape
    sx, sy = geom.params["size"]
    xs = sx * (2.0 * np.arange(nx) / (nx - 1) - 1.0)
    ys = sy * (2.0 * np.arange(ny) / (ny - 1) - 1.0)
    gx, gy = np.meshgrid(xs, ys)
    return np.column_stack([gx.ravel(), gy.ravel(), h.ravel()])


def _may_touch(geomi, a, b, excluded):
    """(len(a), len(b)) bool: whether geom rows a[i] and b[j] may touch by
    :func:`.manifold.may_touch`'s rule (on another body, not both scenery, filter bits
    agreeing, the bodies not an excluded pair); excluded: the sorted keys of the excluded body
    pairs."""
    body = geomi[:, GI_BODY]
    ct, ca = geomi[:, GI_CONTYPE], geomi[:, GI_CONAFFINITY]
    ba, bb = body[a][:, None], body[b][None, :]
    ok = (ba != bb) & ((ba >= 0) | (bb >= 0))
    ok &= ((ct[a][:, None] & ca[b][None, :]) | (ct[b][None, :] & ca[a][:, None])) != 0
    lo, hi = np.minimum(ba, bb), np.maximum(ba, bb)
    return ok & ((lo < 0) | ~np.isin((lo << 32) + hi, excluded))


def _paired(geomi, excluded, chunk=1024):
    """Per geom row, 1 if some other geom may touch it (:func:`_may_touch`), else 0."""
    rows = np.arange(len(geomi))
    out = np.zeros(len(geomi), np.int64)
    for s in range(0, len(rows), chunk):
        out[s:s + chunk] = _may_touch(geomi, rows[s:s + chunk], rows, excluded).any(axis=1)
    return out


class Contacts:
    """The frozen contact model of a Model and the contact table of the last step.

    scene (a :class:`~.manifold.Scene`: geom, geomi, work, verts, planes, excluded, xf, xi):
    the geom table, a row per geom in the order of their bodies' names (then handles), the
    world's geoms last -- geom (ng, G_WIDTH) the shape code, its parameters, pose in the body
    frame, friction and restitution; geomi (ng, GI_WIDTH) body, kind, filter bits, pool
    slices, handle and the sweep's order; work (ng, W_WIDTH) the broad phase's scratch (the
    world geoms' poses fixed); verts (nv, 3) and planes (np, 4) the pools of hull vertices and
    face planes (and heightfield grids); excluded, the sorted keys a * 2^32 + b of the body
    pairs a < b that never collide (joined by a joint, or excluded); xf, xi the general pairs'
    scratch (:mod:`.general`, empty when every pair that may meet has a fast test:
    ``general`` False).  grounds (ng, P_WIDTH): normal, height, friction, restitution.
    table: a row per contact found, ``count`` of them (see
    :class:`~rtrigid.backends.contact_step.ContactStepper` for its size).
    """

    def __init__(self, model):
        nb = len(model.bodies)
        names = [b.name for b in model.bodies]
        rank = {b: r for r, b in enumerate(sorted(range(nb), key=lambda b: names[b]))}
        geoms = model.geoms
        moving = sorted((h for h, g in enumerate(geoms) if g.body is not None),
                        key=lambda h: (rank[geoms[h].body], h))
        rows = moving + [h for h, g in enumerate(geoms) if g.body is None]
        ng = len(rows)
        geom = np.zeros((ng, G_WIDTH))
        geomi = np.zeros((ng, GI_WIDTH), np.int64)
        work = np.zeros((ng, W_WIDTH))
        verts, planes = [np.zeros((0, 3))], [np.zeros((0, 4))]
        nv = npl = 0
        for r, h in enumerate(rows):
            g = geoms[h]
            values, radius = _values(g)
            row = geom[r]
            row[G_KIND] = GEOM_CODES[g.kind]
            row[G_P:G_P + len(values)] = values
            row[G_OFFSET:G_OFFSET + 3] = g.pos
            row[G_QUAT:G_QUAT + 4] = g.quat
            row[G_MU], row[G_E] = g.friction, g.restitution
            row[G_MUT], row[G_MUR] = g.torsional_friction, g.rolling_friction
            row[G_RADIUS] = row[G_TIGHT_R] = radius
            if g.vertices is not None and g.kind != "heightfield":
                # a mesh's piece lies off the body's origin: its own box's centre holds it
                # more tightly
                lo, hi = g.vertices.min(axis=0), g.vertices.max(axis=0)
                centre = 0.5 * (lo + hi)
                row[G_TIGHT:G_TIGHT + 3] = centre
                row[G_HALF:G_HALF + 3] = 0.5 * (hi - lo)
                row[G_TIGHT_R] = np.max(np.linalg.norm(g.vertices - centre, axis=1))
            gi = geomi[r]
            gi[GI_BODY] = -1 if g.body is None else g.body
            gi[GI_KIND] = GEOM_CODES[g.kind]
            gi[GI_CONTYPE], gi[GI_CONAFFINITY] = g.contype, g.conaffinity
            gi[GI_HANDLE] = h
            gi[GI_SWEEP] = r
            points = _grid(g) if g.kind == "heightfield" else g.vertices
            if points is not None:
                gi[GI_VSTART], gi[GI_VCOUNT] = nv, len(points)
                verts.append(points)
                nv += len(points)
            if g.kind == "heightfield":
                gi[GI_ROWS], gi[GI_COLS] = g.params["heights"].shape
            if g.planes is not None:
                gi[GI_PSTART], gi[GI_PCOUNT] = npl, len(g.planes)
                planes.append(g.planes)
                npl += len(g.planes)
            if g.body is None:
                work[r, W_CENTRE:W_CENTRE + 3] = g.pos
                work[r, W_QUAT:W_QUAT + 4] = g.quat
        pairs = model.jointed_pairs() | set(getattr(model, "excluded", ()))
        excluded = np.array(sorted((a << 32) + b for a, b in pairs), np.int64)
        geomi[:, GI_PAIRED] = _paired(geomi, excluded)
        self.geom, self.geomi = geom, geomi
        # whether two geoms may meet with no fast pair test (contact.general)
        self.general = self._check_pairs(geoms, rows, excluded)
        self.scene = Scene(geom, geomi, work, np.concatenate(verts), np.concatenate(planes),
                           excluded, *scratch(self.general))
        self.collides = np.zeros(nb, bool)
        self.collides[geomi[:len(moving), GI_BODY]] = True
        # bodies whose motion the user sets (Simulation.set_kinematic_target)
        self.kinematic = np.array([b.kinematic for b in model.bodies], bool).reshape(nb)
        self.grounds = np.zeros((len(model.grounds), P_WIDTH))
        for g, ground in enumerate(model.grounds):
            self.grounds[g, P_NORMAL:P_NORMAL + 3] = ground.normal
            self.grounds[g, P_HEIGHT] = ground.height
            self.grounds[g, P_MU], self.grounds[g, P_E] = ground.friction, ground.restitution
            self.grounds[g, P_MUT] = ground.torsional_friction
            self.grounds[g, P_MUR] = ground.rolling_friction
        # room for every ground contact and PAIR_ROWS pair contacts per moving geom; a pair
        # that finds no room makes the table grow (ContactStepper)
        ground_rows = sum(GROUND_POINTS[geoms[h].kind] if geoms[h].kind in GROUND_POINTS
                          else SHAPE_TABLE[geoms[h].kind].ground_points for h in moving)
        size = max(1, ground_rows * len(model.grounds) + PAIR_ROWS * len(moving))
        self.table = np.zeros((size, C_WIDTH))
        self.count = 0
        self.touched = np.zeros(nb, np.int64)
        self.vel = np.zeros((nb, VEL_WIDTH))  # solver scratch; its last column: the flight gap
        self.lift = np.zeros((nb, LIFT_WIDTH))
        # order, rank (by body name: results do not depend on the order bodies were added
        # in), unused, islands, levels (see contact.solver)
        self.ints = np.zeros((nb, 5), np.int64)
        order = sorted(range(nb), key=lambda b: names[b])
        self.ints[:, 0] = order
        self.ints[order, 1] = np.arange(nb)
        # the last step's impulses by contact identity, which start the next solve (state:
        # snapshots keep them)
        self.keys = np.full((_hash_size(size), 2), -1, np.int64)
        self.lam = np.zeros((size, LAM_WIDTH))
        self.rows = np.zeros(size, np.int64)
        frozen = geomi[:, :GI_SWEEP]
        scene = self.scene
        self.digest = hashlib.sha256(b"".join(a.tobytes() for a in (
            geom, frozen, scene.verts, scene.planes, excluded, self.grounds))).digest()

    def _check_pairs(self, geoms, rows, excluded):
        """Whether two geoms may touch whose kinds have no fast pair test (they meet through
        :mod:`.general`, heightfields included); excluded: the sorted keys of the body pairs
        that never collide.  Refuses (``ValueError`` naming the kinds) a pair that has no
        contact test (none can touch today: two heightfields are both scenery)."""
        geomi = self.geomi
        kinds = geomi[:, GI_KIND]
        present = sorted(set(kinds.tolist()))
        general = False
        for i, ka in enumerate(present):
            for kb in present[i:]:
                if has_pair_test(ka, kb):
                    continue
                a = np.flatnonzero(kinds == ka)
                b = np.flatnonzero(kinds == kb)
                for x, y in zip(*np.nonzero(_may_touch(geomi, a, b, excluded))):
                    if needs_general(ka, kb):
                        general = True
                        break
                    ga, gb = geoms[rows[a[x]]], geoms[rows[b[y]]]
                    raise ValueError(
                        f"geoms: {ga.kind} against {gb.kind} (geoms {rows[a[x]]} and "
                        f"{rows[b[y]]}) has no contact test; keep them apart with "
                        "contype/conaffinity or exclude_contacts")
        return general

    def grow(self, size):
        """Make room for ``size`` contact rows, keeping the table, its count and the warm
        start."""
        if size <= len(self.table):
            return
        table = np.zeros((size, C_WIDTH))
        table[:len(self.table)] = self.table
        lam = np.zeros((size, LAM_WIDTH))
        lam[:len(self.lam)] = self.lam
        self.table, self.lam = table, lam
        self.rows = np.zeros(size, np.int64)
        self.keys = _rehash(self.keys, _hash_size(size))

    def state(self):
        """A copy of what a snapshot keeps: the table, its count, the warm-start impulses."""
        return self.table.copy(), self.count, self.keys.copy(), self.lam.copy()

    def set_state(self, state):
        table, self.count, keys, lam = state
        self.grow(len(table))
        self.table[:] = 0.0
        self.lam[:] = 0.0
        self.table[:len(table)], self.lam[:len(lam)] = table, lam
        self.keys[:] = keys if len(keys) == len(self.keys) else _rehash(keys, len(self.keys))

    def report(self, names):
        """The contacts of the last step, as :meth:`rtrigid.Simulation.contacts` gives them:
        those that touch (depth > 0) or pushed (a speculative one, within the margin, that
        took an impulse)."""
        out = []
        handle = self.geomi[:, GI_HANDLE]
        for row in self.table[:self.count]:
            if row[C_DEPTH] <= 0.0 and not row[C_IMPULSE:C_IMPULSE + 3].any():
                continue
            other = int(row[C_OTHER])
            gb = int(row[C_GEOMB])
            out.append({"body": int(row[C_BODY]), "name": names[int(row[C_BODY])],
                        "other": None if other < 0 else other,
                        "geom": int(handle[int(row[C_GEOM])]),
                        "other_geom": None if gb < 0 else int(handle[gb]),
                        "point": row[C_POINT:C_POINT + 3].copy(),
                        "normal": row[C_NORMAL:C_NORMAL + 3].copy(),
                        "depth": float(row[C_DEPTH]),
                        "impulse": row[C_IMPULSE:C_IMPULSE + 3].copy()})
        return out


def _hash_size(rows):
    return 1 << int(np.ceil(np.log2(2 * rows)))


def _rehash(keys, size):
    """The open-addressed warm-start keys (H, 2) in a table of ``size`` slots."""
    out = np.full((size, 2), -1, np.int64)
    for key, k in keys[keys[:, 0] != -1]:
        h = slot.py_func(out, int(key))
        out[h] = key, k
    return out
