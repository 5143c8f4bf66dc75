"""Scene queries on a :class:`~rtrigid.simulation.Simulation`'s current state: ray casts, a
range finder, the closest distance between two bodies and the overlap of a shape with the
scene, over every geom (bodies' and the world's) and every ground; the distances and
overlaps leave heightfields out.

:class:`RaysMixin` holds these methods of ``Simulation``.  The geoms become the world rows of
:mod:`rtrigid.contact.support` (their poses from the bodies' current poses).  The compiled
:func:`rtrigid.contact.raycast.raycast_many` casts the rays: exact against every convex kind,
as MuJoCo's ``mj_ray`` (a ray that starts inside a geom meets its surface on the way out);
:func:`rtrigid.contact.fieldray.raycast_fields` then the heightfields, through the cells each
ray crosses.
Distances and overlaps are the general narrow phase's (:func:`rtrigid.contact.convex.collide`:
GJK, and EPA for a penetration), per pair of geoms whose bounding spheres could be nearer than
the best pair found so far.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rtrigid.geoms import check_params, hull, quat_matrix, unit_quat
from rtrigid.simulation_helpers import Handle, SimulationBase
from rtrigid.validate import as_scalar, as_vector


class Hit(NamedTuple):
    """What :meth:`RaysMixin.raycast` hit: ``body`` (index; None: the world's scenery or a
    ground), ``geom`` (handle into ``model.geoms``; None: a ground), ``distance`` (m, along
    the unit direction), ``point`` (3,) and the outward unit ``normal`` (3,) of the surface
    there, world."""

    body: int | None
    geom: int | None
    distance: float
    point: NDArray[np.float64]
    normal: NDArray[np.float64]


class Closest(NamedTuple):
    """What :meth:`RaysMixin.distance` found: ``distance`` (m; negative: how deep the two
    overlap), ``point`` on the first body's geom ``geom`` and ``other_point`` on the other
    side's ``other_geom`` (None: a ground), world; where they overlap, ``point`` is the first
    geom's deepest point in the other and ``other_point`` the other's in it."""

    distance: float
    point: NDArray[np.float64]
    other_point: NDArray[np.float64]
    geom: int
    other_geom: int | None


class Overlap(NamedTuple):
    """One geom or ground a shape overlaps (:meth:`RaysMixin.overlaps`): ``body`` (None: the
    world's scenery or a ground), ``geom`` (None: a ground), ``depth`` (m, > 0)."""

    body: int | None
    geom: int | None
    depth: float


_SIZES = {
    "sphere": ("radius",),
    "capsule": ("radius", "half_length"),
    "cylinder": ("radius", "half_length"),
    "cone": ("radius", "height"),
    "box": ("half_extents",),
    "ellipsoid": ("radii",),
}


class _RayScene:
    """The geoms as world rows (static ones once; moving ones refreshed per cast) and the
    grounds as planes; ``handles[i]``: the geom of row i."""

    def __init__(self, model: Any) -> None:
        from rtrigid.contact import convex
        from rtrigid.contact.geometry import GEOM_CODES

        from rtrigid.contact.fieldray import F_WIDTH, field_row

        rows, planes, handles, bodies, local = [], [np.zeros((0, 4))], [], [], []
        verts = [np.zeros((1, 3))]
        n_planes, n_verts = 0, 1
        fields, heights, field_handles = [], [np.zeros(0)], []
        n_heights = 0
        for h, g in enumerate(model.geoms):
            if g.kind == "heightfield":  # on the world only: placed once
                grid = np.asarray(g.params["heights"], float)
                fields.append(
                    field_row(grid, g.params["size"], g.pos, quat_matrix(g.quat), n_heights)
                )
                heights.append(grid.ravel())
                n_heights += grid.size
                field_handles.append(h)
                continue
            row = np.zeros(convex.W_WIDTH)
            if g.kind in _SIZES:
                size = np.concatenate(
                    [np.atleast_1d(np.asarray(g.params[k], float)) for k in _SIZES[g.kind]]
                )
                convex.world_geom(
                    row,
                    GEOM_CODES[g.kind],
                    np.pad(size, (0, 3 - len(size))),
                    np.zeros(3),
                    np.eye(3),
                )
            else:  # a hull: its vertices and face planes in the pools
                convex.world_geom(
                    row,
                    GEOM_CODES[g.kind],
                    np.zeros(3),
                    np.zeros(3),
                    np.eye(3),
                    g.vertices,
                    n_verts,
                    n_planes,
                    len(g.planes),
                )
                planes.append(np.asarray(g.planes, float))
                verts.append(np.asarray(g.vertices, float))
                n_planes += len(g.planes)
                n_verts += len(g.vertices)
            rows.append(row)
            handles.append(h)
            bodies.append(-1 if g.body is None else g.body)
            local.append((np.asarray(g.pos, float), quat_matrix(g.quat)))
        self.rows = np.array(rows).reshape(len(rows), convex.W_WIDTH)
        self.planes = np.concatenate(planes)
        self.verts = np.ascontiguousarray(np.concatenate(verts))
        self.handles = np.array(handles, np.int64)
        self.bodies = np.array(bodies, np.int64)
        self.local = local
        self.grounds = [(np.asarray(gr.normal, float), float(gr.height)) for gr in model.grounds]
        self.fields = np.array(fields).reshape(len(fields), F_WIDTH)
        self.heights = np.ascontiguousarray(np.concatenate(heights))
        self.field_handles = np.array(field_handles, np.int64)
        for i, b in enumerate(bodies):
            if b < 0:
                self._place(i, np.zeros(3), np.eye(3))

    def _place(self, i: int, x: NDArray[np.float64], R: NDArray[np.float64]) -> None:
        from rtrigid.contact.convex import W_POS, W_ROT

        pos, rot = self.local[i]
        self.rows[i, W_POS : W_POS + 3] = x + R @ pos
        self.rows[i, W_ROT : W_ROT + 9] = (R @ rot).ravel()

    def update(self, xs: NDArray[np.float64], qs: NDArray[np.float64]) -> None:
        """The moving geoms' rows at the bodies' poses xs (nb, 3), qs (nb, 4)."""
        for i, b in enumerate(self.bodies):
            if b >= 0:
                self._place(i, xs[b], quat_matrix(qs[b]))


class RaysMixin(SimulationBase):
    """Ray casts, for :class:`~rtrigid.simulation.Simulation`."""

    def _ray_scene(self) -> _RayScene:
        scene: _RayScene | None = getattr(self, "_rays", None)
        if scene is None:
            scene = _RayScene(self.model)
            self._rays = scene
        scene.update(np.asarray(self.backend.x), np.asarray(self.backend.q))
        return scene

    def _cast(
        self,
        scene: _RayScene,
        origins: NDArray[np.float64],
        directions: NDArray[np.float64],
        max_distance: float,
        keep: NDArray[np.bool_] | None = None,
    ) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.float64]]:
        """(distance, row (len(rows) + k: heightfield k; -1 - g: ground g; -1 -
        len(grounds): none), normal) per ray; ``keep``: the rows that count (None: all; the
        heightfields, on the world, always count)."""
        from rtrigid.contact.fieldray import raycast_fields
        from rtrigid.contact.raycast import raycast_many

        n = len(origins)
        dist, which, normals = np.empty(n), np.empty(n, np.int64), np.empty((n, 3))
        rows = scene.rows if keep is None else np.ascontiguousarray(scene.rows[keep])
        raycast_many(rows, scene.planes, origins, directions, max_distance, dist, which, normals)
        if keep is not None:
            hit = which >= 0
            which[hit] = np.flatnonzero(keep)[which[hit]]
        if len(scene.fields):
            raycast_fields(
                scene.fields,
                scene.heights,
                origins,
                directions,
                max_distance,
                dist,
                which,
                normals,
                len(scene.rows),
            )
        which[which < 0] = -1 - len(scene.grounds)
        for g, (normal, height) in enumerate(scene.grounds):  # the plane n . x = height
            den = directions @ normal
            with np.errstate(divide="ignore", invalid="ignore"):
                t = (height - origins @ normal) / den
            hit = (den != 0.0) & (t >= 0.0) & (t <= max_distance) & (t < dist)
            dist[hit], which[hit], normals[hit] = t[hit], -1 - g, normal
        return dist, which, normals

    def raycast(
        self, origin: ArrayLike, direction: ArrayLike, max_distance: float = np.inf
    ) -> Hit | None:
        """The first geom or ground the ray from ``origin`` along ``direction`` (any length,
        not zero) meets within ``max_distance`` (m), as a :class:`Hit`, or None."""
        o = as_vector(origin, 3, "origin")
        d = _unit(as_vector(direction, 3, "direction"), "direction")
        scene = self._ray_scene()
        dist, which, normals = self._cast(scene, o[None], d[None], _max(max_distance))
        if not np.isfinite(dist[0]):
            return None
        row = int(which[0])
        owner: int | None = None
        geom: int | None = None
        if row >= len(scene.rows):  # a heightfield: the world's
            geom = int(scene.field_handles[row - len(scene.rows)])
        elif row >= 0:
            body = int(scene.bodies[row])
            geom = int(scene.handles[row])
            owner = None if body < 0 else body
        return Hit(owner, geom, float(dist[0]), o + dist[0] * d, normals[0].copy())

    def raycast_many(
        self, origins: ArrayLike, directions: ArrayLike, max_distance: float = np.inf
    ) -> NDArray[np.float64]:
        """(n,) distances (m) along each ray (origins, directions (n, 3); the directions any
        length, not zero) to the first geom or ground it meets, ``inf`` where none within
        ``max_distance``.  Compiled: one call casts them all."""
        o = np.ascontiguousarray(origins, dtype=float)
        d = np.ascontiguousarray(directions, dtype=float)
        if o.ndim != 2 or o.shape[1] != 3 or d.shape != o.shape:
            raise ValueError(
                f"origins, directions: expected two (n, 3) arrays, got {o.shape} and {d.shape}"
            )
        if not (np.all(np.isfinite(o)) and np.all(np.isfinite(d))):
            raise ValueError("origins, directions: must be finite")
        length = _lengths(d)
        if np.any(length == 0.0):
            raise ValueError(f"directions: row {int(np.argmin(length))} is zero")
        return self._cast(self._ray_scene(), o, d / length[:, None], _max(max_distance))[0]

    def rangefinder(
        self,
        body: Handle,
        point_body: ArrayLike = (0.0, 0.0, 0.0),
        axis_body: ArrayLike = (0.0, 0.0, 1.0),
        max_distance: float = np.inf,
    ) -> float:
        """A range finder on ``body``: the distance (m) from its point ``point_body`` (body
        frame) along the direction ``axis_body`` (body axes, any length) to the first geom or
        ground it meets, the body's own geoms not counted (as MuJoCo's ``rangefinder``
        sensor), ``inf`` where none is within ``max_distance``."""
        b = self.body_index(body)
        p = as_vector(point_body, 3, "point_body")
        axis = _unit(as_vector(axis_body, 3, "axis_body"), "axis_body")
        limit = _max(max_distance)
        scene = self._ray_scene()
        R = quat_matrix(np.asarray(self.backend.q[b]))
        origin = np.asarray(self.backend.x[b]) + R @ p
        dist = self._cast(scene, origin[None], (R @ axis)[None], limit, scene.bodies != b)[0]
        return float(dist[0])

    def distance(
        self, body: Handle, other: Handle | None = None, max_distance: float = np.inf
    ) -> Closest | None:
        """The closest distance between the geoms of ``body`` and those of ``other`` (None:
        the world's scenery and grounds), as a :class:`Closest` (negative: the depth of
        their deepest overlap), or None when they are farther apart than ``max_distance``
        (m).  MuJoCo's ``mj_geomDistance`` over the two bodies' geoms; PyBullet's
        ``getClosestPoints``."""
        from rtrigid.contact.convex import R_DIST, R_PA, R_PB, R_WIDTH, W_POS, W_RADIUS
        from rtrigid.contact.convex import collide, workspace

        b = self.body_index(body)
        o = None if other is None else self.body_index(other)
        if o == b:
            raise ValueError(f"other: the same body as body ({self.names[b]!r})")
        limit = _max(max_distance)
        scene = self._ray_scene()
        mine = np.flatnonzero(scene.bodies == b)
        theirs = np.flatnonzero(scene.bodies == (-1 if o is None else o))
        for field, h, rows in (("body", b, mine), ("other", o, theirs)):
            if h is not None and len(rows) == 0:
                raise ValueError(f"{field}: body {self.names[h]!r} has no geoms")
        ws, res = workspace(), np.zeros(R_WIDTH)
        best: Closest | None = None
        bound = limit
        for i in mine:
            gi = scene.rows[i]
            for j in theirs:
                gj = scene.rows[j]
                gap = (
                    np.linalg.norm(gi[W_POS : W_POS + 3] - gj[W_POS : W_POS + 3])
                    - gi[W_RADIUS]
                    - gj[W_RADIUS]
                )
                if gap > bound:
                    continue
                collide(gi, gj, scene.verts, ws, res)
                if res[R_DIST] <= bound:
                    bound = float(res[R_DIST])
                    best = Closest(
                        bound,
                        res[R_PA : R_PA + 3].copy(),
                        res[R_PB : R_PB + 3].copy(),
                        int(scene.handles[i]),
                        int(scene.handles[j]),
                    )
            if o is None:
                for normal, height in scene.grounds:
                    d, point = _below(gi, scene.verts, normal, height)
                    if d <= bound:
                        bound = d
                        best = Closest(d, point, point - d * normal, int(scene.handles[i]), None)
        return best

    def overlaps(
        self,
        kind: str,
        pos: ArrayLike = (0.0, 0.0, 0.0),
        quat: ArrayLike = (1.0, 0.0, 0.0, 0.0),
        **params: Any,
    ) -> list[Overlap]:
        """Every geom and ground that a shape at ``pos``, ``quat`` (world) overlaps, each an
        :class:`Overlap` with its depth: the kinds and parameters of
        :meth:`rtrigid.Model.add_geom` (sphere, capsule, box, cylinder, cone, ellipsoid,
        convex), checked as it checks them.  Touching is not overlapping (depth > 0)."""
        from rtrigid.contact import convex
        from rtrigid.contact.geometry import GEOM_CODES

        if kind not in _SIZES and kind != "convex":
            raise ValueError(
                f"kind: a query shape is one of {sorted(_SIZES) + ['convex']}, not {kind!r}"
            )
        clean = check_params(kind, params)
        centre = as_vector(pos, 3, "pos")
        R = quat_matrix(unit_quat(quat))
        scene = self._ray_scene()
        row, verts = np.zeros(convex.W_WIDTH), scene.verts
        if kind == "convex":
            points = hull(clean["vertices"], "vertices")[0]
            verts = np.ascontiguousarray(np.concatenate([scene.verts, points]))
            convex.world_geom(
                row, GEOM_CODES[kind], np.zeros(3), centre, R, points, len(scene.verts)
            )
        else:
            size = np.concatenate(
                [np.atleast_1d(np.asarray(clean[k], float)) for k in _SIZES[kind]]
            )
            convex.world_geom(row, GEOM_CODES[kind], np.pad(size, (0, 3 - len(size))), centre, R)
        ws, res = convex.workspace(), np.zeros(convex.R_WIDTH)
        found = []
        for i, other in enumerate(scene.rows):
            gap = (
                np.linalg.norm(
                    row[convex.W_POS : convex.W_POS + 3] - other[convex.W_POS : convex.W_POS + 3]
                )
                - row[convex.W_RADIUS]
                - other[convex.W_RADIUS]
            )
            if gap >= 0.0:
                continue
            convex.collide(row, other, verts, ws, res)
            if res[convex.R_DIST] < 0.0:
                body = int(scene.bodies[i])
                found.append(
                    Overlap(
                        None if body < 0 else body,
                        int(scene.handles[i]),
                        -float(res[convex.R_DIST]),
                    )
                )
        for normal, height in scene.grounds:
            d = _below(row, verts, normal, height)[0]
            if d < 0.0:
                found.append(Overlap(None, None, -d))
        return found


def _below(
    row: NDArray[np.float64], verts: NDArray[np.float64], normal: NDArray[np.float64], height: float
) -> tuple[float, NDArray[np.float64]]:
    """(signed distance, point) of a geom's deepest point below the plane normal . p =
    height (negative: that far below it)."""
    from rtrigid.contact.convex import support

    p = np.array(support(row, verts, -normal[0], -normal[1], -normal[2]))
    return float(p @ normal - height), p


def _lengths(d: NDArray[np.float64]) -> NDArray[np.float64]:
    """The lengths of the vectors along ``d``'s last axis (3), in one fixed order of
    arithmetic, so that a ray cast alone and the same ray in a batch meet the same bits
    (numpy's ``norm`` of one vector and of rows sum in different orders)."""
    return np.sqrt(d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1] + d[..., 2] * d[..., 2])


def _unit(d: NDArray[np.float64], name: str) -> NDArray[np.float64]:
    size = float(_lengths(d))
    if size == 0.0:
        raise ValueError(f"{name}: must not be zero")
    return d / size


def _max(value: float) -> float:
    if value == np.inf:
        return np.inf
    return as_scalar(value, "max_distance", positive=True)
