"""The bodies backend's frozen model: flat arrays the kernels read and never write.

A body is either *free* (six degrees of freedom) or *pivoted*: one body point is held at a
fixed world point by a spherical joint (the top's tip).  The kernels treat a pivoted body as a
pure rotation about its *reference point* (the pivot), with the rotational inertia moved there
by the parallel-axis theorem; a free body's reference point is its centre of mass.  All
body-fixed points are stored relative to that reference point, so the kernels never branch on
which it is.
"""
from __future__ import annotations

from collections import namedtuple
from typing import NamedTuple

import numpy as np

from rtrigid._jit import jit_inline
from rtrigid.backends.buffers import view

FREE = 0
PIVOTED = 1


class FrozenModel(NamedTuple):
    """Flat arrays read by the step kernels (shapes given for ``nb`` bodies, ``ns`` springs).

    kind:      (nb,)    int64    FREE or PIVOTED
    mass:      (nb,)    float64
    inertia:   (nb, 3)  float64  principal moments about the centre of mass
    jref:      (nb, 3, 3)        rotational inertia about the reference point, body frame
    jref_inv:  (nb, 3, 3)        its inverse
    com:       (nb, 3)           centre of mass relative to the reference point, body frame
    pivot:     (nb, 3)           world position of the reference point (pivoted bodies)
    gravity:   (3,)
    spring_body:  (ns,)   int64
    spring_point: (ns, 3)        attachment point relative to the reference point, body frame
    spring_anchor:(ns, 3)        world anchor
    spring_k:     (ns,)
    spring_rest:  (ns,)
    """

    kind: np.ndarray
    mass: np.ndarray
    inertia: np.ndarray
    jref: np.ndarray
    jref_inv: np.ndarray
    com: np.ndarray
    pivot: np.ndarray
    gravity: np.ndarray
    spring_body: np.ndarray
    spring_point: np.ndarray
    spring_anchor: np.ndarray
    spring_k: np.ndarray
    spring_rest: np.ndarray


# Column layout of the per-body float rows and per-spring rows the kernels read.
B_MASS = 0
B_INERTIA = 1  # 3 principal moments about the centre of mass
B_JREF = 4  # 3x3 rotational inertia about the reference point, row-major
B_JINV = 13  # its inverse, row-major
B_COM = 22  # centre of mass relative to the reference point, body frame
B_PIVOT = 25  # world position of the reference point of a pivoted body
B_WIDTH = 28
S_POINT = 0  # attachment point relative to the reference point, body frame
S_ANCHOR = 3  # world anchor
S_K = 6
S_REST = 7
S_WIDTH = 8


def flatten(fm: FrozenModel):
    """Pack a FrozenModel into one float64 and one int64 array for the kernels.

    Kernels unpack them with :func:`kernel_arrays` into five plain arrays rather than a
    namedtuple: numba pays ~0.35 us per call site that passes a 13-array namedtuple along
    (measured), and a step makes many such calls.
    """
    nb, ns = len(fm.mass), len(fm.spring_k)
    bodyf = np.zeros((nb, B_WIDTH))
    bodyf[:, B_MASS] = fm.mass
    bodyf[:, B_INERTIA:B_INERTIA + 3] = fm.inertia
    bodyf[:, B_JREF:B_JREF + 9] = fm.jref.reshape(nb, 9)
    bodyf[:, B_JINV:B_JINV + 9] = fm.jref_inv.reshape(nb, 9)
    bodyf[:, B_COM:B_COM + 3] = fm.com
    bodyf[:, B_PIVOT:B_PIVOT + 3] = fm.pivot
    springf = np.zeros((ns, S_WIDTH))
    springf[:, S_POINT:S_POINT + 3] = fm.spring_point
    springf[:, S_ANCHOR:S_ANCHOR + 3] = fm.spring_anchor
    springf[:, S_K] = fm.spring_k
    springf[:, S_REST] = fm.spring_rest
    floats = np.concatenate([fm.gravity, bodyf.ravel(), springf.ravel()])
    ints = np.concatenate([[nb, ns], fm.kind, fm.spring_body]).astype(np.int64)
    return floats, ints


# the frozen model as the kernels pass it along (what :func:`kernel_arrays` gives, named); a
# kernel unpacks what it uses
BodiesModel = namedtuple("BodiesModel", ("gravity", "bodyf", "bodyi", "springf", "springi"))


@jit_inline
def kernel_arrays(mf, mi):
    """Inverse of :func:`flatten`: (gravity, bodyf, bodyi, springf, springi) views.

    gravity (3,); bodyf (nb, B_WIDTH); bodyi (nb,) kinds; springf (ns, S_WIDTH);
    springi (ns,) the body each spring pulls.  In a kernel they are :func:`view` s holding no
    reference to the buffers: an array that holds one costs two atomic reference-count
    operations at every call that takes it, and the schemes' right-hand sides take these at
    every stage (``director_nullspace`` stepped a body 12 % slower for it, measured).
    """
    nb = mi[0]
    ns = mi[1]
    o = 3 + B_WIDTH * nb
    return (view(mf, 0, (3,)), view(mf, 3, (nb, B_WIDTH)), view(mi, 2, (nb,)),
            view(mf, o, (ns, S_WIDTH)), view(mi, 2 + nb, (ns,)))


def freeze(model) -> FrozenModel:
    """The flat-array form of a model whose bodies are free or attached to the world."""
    nb = len(model.bodies)
    kind = np.zeros(nb, np.int64)
    mass = np.zeros(nb)
    inertia = np.zeros((nb, 3))
    jref = np.zeros((nb, 3, 3))
    jref_inv = np.zeros((nb, 3, 3))
    com = np.zeros((nb, 3))
    pivot = np.zeros((nb, 3))
    for i, b in enumerate(model.bodies):
        mass[i] = b.mass
        inertia[i] = b.inertia
        j = np.diag(b.inertia)
        if b.pivot_body is not None:
            kind[i] = PIVOTED
            s = -b.pivot_body
            com[i] = s
            pivot[i] = b.pivot_world
            j = j + b.mass * (np.dot(s, s) * np.eye(3) - np.outer(s, s))
        jref[i] = j
        jref_inv[i] = np.linalg.inv(j)
    ns = len(model.springs)
    spring_body = np.array([s.body for s in model.springs], np.int64).reshape(ns)
    spring_point = np.zeros((ns, 3))
    for k, s in enumerate(model.springs):
        spring_point[k] = s.point_body + com[s.body]
    return FrozenModel(
        kind=kind,
        mass=mass,
        inertia=inertia,
        jref=jref,
        jref_inv=jref_inv,
        com=com,
        pivot=pivot,
        gravity=model.gravity.copy(),
        spring_body=spring_body,
        spring_point=spring_point,
        spring_anchor=np.array([s.anchor_world for s in model.springs]).reshape(ns, 3),
        spring_k=np.array([s.stiffness for s in model.springs]).reshape(ns),
        spring_rest=np.array([s.rest_length for s in model.springs]).reshape(ns),
    )
