"""Ray casts against the body shapes, analytic, in the shape's own frame (numpy, no GL).

Picking uses them for the parts that are drawn only (a torus, a robot file's visuals, a body
without geoms); it casts at the geoms through ``sim.raycast`` (:mod:`viewer.interaction`).
Each function takes a ray ``o + t d`` (``d`` need not be unit length) in the frame where the
shape is centred as :mod:`viewer.meshes` describes it and returns the smallest ``t >= 0``
where the ray enters (or, starting inside, leaves) the solid, or ``None``.
"""
from __future__ import annotations

import math

import numpy as np


def _roots(a, b, c):
    """Real roots of a t^2 + b t + c, ascending; none for a degenerate or negative case."""
    if abs(a) < 1e-300:
        return () if abs(b) < 1e-300 else (-c / b,)
    disc = b * b - 4.0 * a * c
    if disc < 0.0:
        return ()
    sq = math.sqrt(disc)
    # the numerically stable pair
    q = -0.5 * (b + math.copysign(sq, b))
    t1, t2 = q / a, (c / q if q != 0.0 else q / a)
    return tuple(sorted((t1, t2)))


def _first(candidates):
    hits = [t for t in candidates if t is not None and t >= 0.0]
    return min(hits) if hits else None


def ray_sphere(o, d, radius, centre=(0.0, 0.0, 0.0)):
    oc = o - np.asarray(centre)
    return _first(_roots(d @ d, 2.0 * (oc @ d), oc @ oc - radius * radius))


def ray_box(o, d, half_extents):
    """Slab test."""
    t_near, t_far = -math.inf, math.inf
    for i in range(3):
        h = half_extents[i]
        if abs(d[i]) < 1e-300:
            if abs(o[i]) > h:
                return None
            continue
        t0, t1 = (-h - o[i]) / d[i], (h - o[i]) / d[i]
        t_near, t_far = max(t_near, min(t0, t1)), min(t_far, max(t0, t1))
    if t_near > t_far or t_far < 0.0:
        return None
    return t_near if t_near >= 0.0 else t_far


def _ray_disc(o, d, radius, z):
    if abs(d[2]) < 1e-300:
        return None
    t = (z - o[2]) / d[2]
    p = o + t * d
    return t if p[0] * p[0] + p[1] * p[1] <= radius * radius else None


def _ray_tube(o, d, radius, z0, z1):
    """Side of the cylinder rho = radius, z0 <= z <= z1."""
    a = d[0] * d[0] + d[1] * d[1]
    b = 2.0 * (o[0] * d[0] + o[1] * d[1])
    c = o[0] * o[0] + o[1] * o[1] - radius * radius
    return [t for t in _roots(a, b, c) if z0 <= o[2] + t * d[2] <= z1]


def ray_cylinder(o, d, radius, half_length):
    h = half_length
    return _first(_ray_tube(o, d, radius, -h, h)
                  + [_ray_disc(o, d, radius, -h), _ray_disc(o, d, radius, h)])


def ray_capsule(o, d, radius, half_length):
    h = half_length
    return _first(_ray_tube(o, d, radius, -h, h)
                  + [ray_sphere(o, d, radius, (0.0, 0.0, -h)),
                     ray_sphere(o, d, radius, (0.0, 0.0, h))])


def ray_cone(o, d, radius, z_apex, z_base):
    """Cone about z: apex at z_apex, base disc of ``radius`` at z_base."""
    k = radius / (z_base - z_apex)
    oz, dz = o[2] - z_apex, d[2]
    a = d[0] * d[0] + d[1] * d[1] - k * k * dz * dz
    b = 2.0 * (o[0] * d[0] + o[1] * d[1] - k * k * oz * dz)
    c = o[0] * o[0] + o[1] * o[1] - k * k * oz * oz
    lo, hi = sorted((z_apex, z_base))
    side = [t for t in _roots(a, b, c) if lo <= o[2] + t * d[2] <= hi]
    return _first(side + [_ray_disc(o, d, radius, z_base)])


def ray_mesh(verts, idx, o, d, normal=False):
    """Smallest t >= 0 where the ray meets a triangle of the mesh (Moller-Trumbore), or None.

    For shapes without an analytic cast (a torus, a mesh loaded from a file).  With
    ``normal``: (t, the unit normal of the triangle met), or (None, None).
    """
    p = verts[:, :3].astype(np.float64)
    a, b, c = p[idx[:, 0]], p[idx[:, 1]], p[idx[:, 2]]
    e1, e2 = b - a, c - a
    h = np.cross(d, e2)
    det = np.einsum("ij,ij->i", e1, h)
    ok = np.abs(det) > 1e-14
    inv = np.where(ok, 1.0 / np.where(ok, det, 1.0), 0.0)
    s = o - a
    u = inv * np.einsum("ij,ij->i", s, h)
    qv = np.cross(s, e1)
    v = inv * (qv @ d)
    t = inv * np.einsum("ij,ij->i", e2, qv)
    hit = ok & (u >= 0) & (v >= 0) & (u + v <= 1) & (t >= 0)
    if not hit.any():
        return (None, None) if normal else None
    k = np.flatnonzero(hit)[np.argmin(t[hit])]
    if not normal:
        return float(t[k])
    n = np.cross(e1[k], e2[k])
    return float(t[k]), n / np.linalg.norm(n)


def ray_part(part, o, d):
    """First hit of a body-frame ray with a :class:`viewer.scene.Part` (its offset and axis)."""
    if part.kind not in ANALYTIC:
        return ray_mesh(*part.mesh, o, d)
    rot = part.rotation
    return ray_shape(part.kind, part.params, (0.0, 0.0, 0.0), rot.T @ (o - part.offset),
                     rot.T @ d)


ANALYTIC = ("box", "sphere", "cylinder", "capsule", "cone")


def ray_shape(kind, params, offset, o, d, mesh=None):
    """First hit of the ray with a body shape; ``o``, ``d`` in the body frame.  A robot
    file's ``visuals`` are hit through their drawn ``mesh``."""
    o = o - np.asarray(offset)
    if kind == "visuals":
        return ray_mesh(*mesh, o, d)
    if kind == "box":
        return ray_box(o, d, params["half_extents"])
    if kind == "sphere":
        return ray_sphere(o, d, params["radius"])
    if kind == "cylinder":
        return ray_cylinder(o, d, params["radius"], params["half_length"])
    if kind == "capsule":
        return ray_capsule(o, d, params["radius"], params["half_length"])
    if kind == "cone":
        h = params["height"]
        return ray_cone(o, d, params["radius"], -0.75 * h, 0.25 * h)
    raise ValueError(f"shape: cannot pick kind {kind!r}")
