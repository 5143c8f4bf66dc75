"""Ray casts into a :class:`~rtrigid.simulation.Simulation`'s scene, on its current state: every
geom (bodies' and the world's; a heightfield excepted) and every ground.

:class:`RaysMixin` holds these methods of ``Simulation``.  The geoms become the world rows of
:mod:`rtrigid.contact.support` (their poses from the bodies' current poses) and the compiled
:func:`rtrigid.contact.raycast.raycast_many` casts the rays: exact against every convex kind,
as MuJoCo's ``mj_ray`` (a ray that starts inside a geom meets its surface on the way out).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rtrigid.geoms import quat_matrix
from rtrigid.simulation_helpers import SimulationBase
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


_SIZES = {"sphere": ("radius",), "capsule": ("radius", "half_length"),
          "cylinder": ("radius", "half_length"), "cone": ("radius", "height"),
          "box": ("half_extents",), "ellipsoid": ("radii",)}


class _RayScene:
    """The geoms as world rows (static ones once; moving ones refreshed per cast) and the
    grounds as planes; ``handles[i]``: the geom of row i."""

    def __init__(self, model: Any) -> None:
        from rtrigid.contact import convex
        from rtrigid.contact.geometry import GEOM_CODES

        rows, planes, handles, bodies, local = [], [np.zeros((0, 4))], [], [], []
        n_planes = 0
        for h, g in enumerate(model.geoms):
            if g.kind == "heightfield":
                continue
            row = np.zeros(convex.W_WIDTH)
            if g.kind in _SIZES:
                size = np.concatenate([np.atleast_1d(np.asarray(g.params[k], float))
                                       for k in _SIZES[g.kind]])
                convex.world_geom(row, GEOM_CODES[g.kind], np.pad(size, (0, 3 - len(size))),
                                  np.zeros(3), np.eye(3))
            else:  # a hull: its face planes in the plane pool
                convex.world_geom(row, GEOM_CODES[g.kind], np.zeros(3), np.zeros(3), np.eye(3),
                                  g.vertices, 0, n_planes, len(g.planes))
                planes.append(np.asarray(g.planes, float))
                n_planes += len(g.planes)
            rows.append(row)
            handles.append(h)
            bodies.append(-1 if g.body is None else g.body)
            local.append((np.asarray(g.pos, float), quat_matrix(g.quat)))
        self.rows = np.array(rows).reshape(len(rows), convex.W_WIDTH)
        self.planes = np.concatenate(planes)
        self.handles = np.array(handles, np.int64)
        self.bodies = np.array(bodies, np.int64)
        self.local = local
        self.grounds = [(np.asarray(gr.normal, float), float(gr.height)) for gr in model.grounds]
        for i, b in enumerate(bodies):
            if b < 0:
                self._place(i, np.zeros(3), np.eye(3))

    def _place(self, i: int, x: NDArray[np.float64], R: NDArray[np.float64]) -> None:
        from rtrigid.contact.convex import W_POS, W_ROT

        pos, rot = self.local[i]
        self.rows[i, W_POS:W_POS + 3] = x + R @ pos
        self.rows[i, W_ROT:W_ROT + 9] = (R @ rot).ravel()

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

    def _cast(self, scene: _RayScene, origins: NDArray[np.float64],
              directions: NDArray[np.float64], max_distance: float
              ) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.float64]]:
        """(distance, row (-1 - g: ground g; -1 - len(grounds): none), normal) per ray."""
        from rtrigid.contact.raycast import raycast_many

        n = len(origins)
        dist, which, normals = np.empty(n), np.empty(n, np.int64), np.empty((n, 3))
        raycast_many(scene.rows, scene.planes, origins, directions, max_distance, dist, which,
                     normals)
        which[which < 0] = -1 - len(scene.grounds)
        for g, (normal, height) in enumerate(scene.grounds):  # the plane n . x = height
            den = directions @ normal
            with np.errstate(divide="ignore", invalid="ignore"):
                t = (height - origins @ normal) / den
            hit = (den != 0.0) & (t >= 0.0) & (t <= max_distance) & (t < dist)
            dist[hit], which[hit], normals[hit] = t[hit], -1 - g, normal
        return dist, which, normals

    def raycast(self, origin: ArrayLike, direction: ArrayLike,
                max_distance: float = np.inf) -> Hit | None:
        """The first geom or ground the ray from ``origin`` along ``direction`` (any length,
        not zero) meets within ``max_distance`` (m), as a :class:`Hit`, or None."""
        o = as_vector(origin, 3, "origin")
        d = _unit(as_vector(direction, 3, "direction"), "direction")
        scene = self._ray_scene()
        dist, which, normals = self._cast(scene, o[None], d[None], _max(max_distance))
        if not np.isfinite(dist[0]):
            return None
        row = int(which[0])
        if row >= 0:
            body = int(scene.bodies[row])
            geom: int | None = int(scene.handles[row])
            owner: int | None = None if body < 0 else body
        else:
            owner, geom = None, None
        return Hit(owner, geom, float(dist[0]), o + dist[0] * d, normals[0].copy())

    def raycast_many(self, origins: ArrayLike, directions: ArrayLike,
                     max_distance: float = np.inf) -> NDArray[np.float64]:
        """(n,) distances (m) along each ray (origins, directions (n, 3); the directions any
        length, not zero) to the first geom or ground it meets, ``inf`` where none within
        ``max_distance``.  Compiled: one call casts them all."""
        o = np.ascontiguousarray(origins, dtype=float)
        d = np.ascontiguousarray(directions, dtype=float)
        if o.ndim != 2 or o.shape[1] != 3 or d.shape != o.shape:
            raise ValueError(f"origins, directions: expected two (n, 3) arrays, got {o.shape} "
                             f"and {d.shape}")
        if not (np.all(np.isfinite(o)) and np.all(np.isfinite(d))):
            raise ValueError("origins, directions: must be finite")
        length = np.linalg.norm(d, axis=1)
        if np.any(length == 0.0):
            raise ValueError(f"directions: row {int(np.argmin(length))} is zero")
        return self._cast(self._ray_scene(), o, d / length[:, None], _max(max_distance))[0]


def _unit(d: NDArray[np.float64], name: str) -> NDArray[np.float64]:
    size = float(np.linalg.norm(d))
    if size == 0.0:
        raise ValueError(f"{name}: must not be zero")
    return d / size


def _max(value: float) -> float:
    if value == np.inf:
        return np.inf
    return as_scalar(value, "max_distance", positive=True)
