"""Joint kinds: the one table of what each kind is, and what each means as a constraint.

:data:`KINDS` is the table every other part reads: the model builder (which kinds exist,
which take an axis or a spring), the tree backend (coordinate and rate counts, the integer
codes its kernels branch on), the integrator registry (which scheme supports which kind) and
the simulation's joint queries.  Adding a kind is one entry here (with its residual and axis
rules below) plus one block in each function of :mod:`rtrigid.backends.tree.kinds`, where the
kernels' per-kind primitives live.

Generalized coordinates and rates per kind (the frames are those of the tree backend):

=========== ==== ==== ==================================== ==================================
kind        nq   nv   coordinates                          rates
=========== ==== ==== ==================================== ==================================
free        7    6    x (world), q (unit quaternion)       v (world), Omega (body frame)
spherical   4    3    relative unit quaternion             relative angular velocity (child)
revolute    1    1    angle about the axis                 its rate
prismatic   1    1    slide along the axis                 its rate
cylindrical 2    2    angle, slide                         their rates
planar      3    3    angle about the normal, 2 slides     their rates
fixed       0    0    --                                   --
universal   2    2    angle about the first axis, then     their rates
                      about the second
=========== ==== ==== ==================================== ==================================

A universal joint (Hooke's joint, a gimbal) turns about two perpendicular axes through its
point: ``axis_parent``, fixed in the parent, then ``axis_child``, fixed in the child -- two
hinges in one body, as MuJoCo writes it.  At zero coordinates the child is turned by its
``rotation`` (default none) and the two axes must be perpendicular.

The residual functions below are the independent statement of each joint as a holonomic
constraint on the maximal coordinates (x, p) of two bodies.  The kernels never evaluate them:
they step generalized coordinates in which the joints hold by construction.
:meth:`Simulation.constraint_error` reports them, and the tests differentiate them (complex
step) to check that the kernels' null-space matrices annihilate their gradients.

For parent p (the world: x = 0, p = 1) and child c, with anchors a_P, a_C and the joint frames
(e1, e2, u) of the parent and the child:

    d     = x_c + R(p_c) a_C - x_p - R(p_p) a_P          the anchors' separation, world
    sigma = r0* o p_p* o p_c                              the relative rotation, less r0

=========== ================================================================ =====
kind        residual                                                         count
=========== ================================================================ =====
spherical   d                                                                3
revolute    d, e1_C . vec(sigma), e2_C . vec(sigma)                          5
prismatic   e1_P . R_p^T d, e2_P . R_p^T d, vec(sigma)                       5
cylindrical e1_P . R_p^T d, e2_P . R_p^T d, e1_C . vec(sigma), e2_C . vec     4
planar      u_P . R_p^T d, e1_C . vec(sigma), e2_C . vec(sigma)              3
fixed       d, vec(sigma)                                                    6
universal   d, (R_p u_P) . (R_c u_C)                                         4
=========== ================================================================ =====

R(p) = E(p) G(p)^T is written as the quadratic form, so everything is a polynomial in (x, p):
the spherical part is quadratic and the rotational parts are bilinear in (p_p, p_c) (as in the
lower pairs of 002 Table 2, written with quaternions instead of directors).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class JointKind(NamedTuple):
    """One row of the joint-kind table."""

    name: str
    code: int  # the integer the compiled kernels branch on
    nq: int  # generalized coordinates
    nv: int  # rates
    axial: bool  # defined by an axis (or a plane normal) in each body
    spring: bool  # takes a joint spring and damper on its coordinate
    residuals: int  # scalar constraint equations (6 - nv)
    quaternion: int  # offset of a unit quaternion in the coordinates, -1 if there is none


KINDS = {
    k.name: k
    for k in (
        JointKind("free", 0, 7, 6, False, False, 0, 3),
        JointKind("spherical", 1, 4, 3, False, False, 3, 0),
        JointKind("revolute", 2, 1, 1, True, True, 5, -1),
        JointKind("prismatic", 3, 1, 1, True, True, 5, -1),
        JointKind("cylindrical", 4, 2, 2, True, False, 4, -1),
        JointKind("planar", 5, 3, 3, True, False, 3, -1),
        JointKind("fixed", 6, 0, 0, False, False, 6, -1),
        JointKind("universal", 7, 2, 2, True, False, 4, -1),
    )
}

# the kinds a user joins bodies with; "free" is what a body with no joint has
USER_KINDS = tuple(k for k in KINDS if k != "free")
BY_CODE = {k.code: k for k in KINDS.values()}


class Geometry(NamedTuple):
    """A joint's fixed geometry: anchors and axis frames in each body (the world: world axes).

    ``r0`` is the relative rotation at zero joint coordinates: it turns the child's axis onto
    the parent's, by default by the smallest rotation (the identity for kinds without an
    axis), or as the joint's ``rotation`` says.
    """

    anchor_parent: np.ndarray
    anchor_child: np.ndarray
    axis_parent: np.ndarray
    axis_child: np.ndarray
    e1_parent: np.ndarray
    e2_parent: np.ndarray
    e1_child: np.ndarray
    e2_child: np.ndarray
    r0: np.ndarray


def orthonormal_pair(u):
    """Two unit vectors completing the unit vector ``u`` to a right-handed frame (e1, e2, u)."""
    a = np.array([1.0, 0.0, 0.0]) if abs(u[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    e1 = a - np.dot(a, u) * u
    e1 /= np.linalg.norm(e1)
    return e1, np.cross(u, e1)


def shortest_arc(a, b):
    """Unit quaternion of the smallest rotation turning unit vector ``a`` onto ``b``."""
    c = float(np.dot(a, b))
    if c < -1.0 + 1e-12:
        e1, _ = orthonormal_pair(a)
        return np.array([0.0, *e1])
    q = np.array([1.0 + c, *np.cross(a, b)])
    return q / np.linalg.norm(q)


def check_axes(kind, axis_parent, axis_child, rotation):
    """Refuse (ValueError naming the field) axes and a ``rotation`` at zero coordinates (a
    unit quaternion, or None for the kind's default) that do not fit the joint: an axial
    kind's rotation must turn the child's axis onto the parent's; a universal joint's two axes
    must be perpendicular once the rotation has turned the child's."""
    if kind == "universal":
        r = np.array([1.0, 0.0, 0.0, 0.0]) if rotation is None else rotation
        if abs(axis_parent @ (rot(r) @ axis_child)) > 1e-9:
            raise ValueError(
                "axis_child: a universal joint's second axis must be perpendicular "
                "to its first (axis_parent) at zero coordinates (give both axes)"
            )
        return
    if rotation is None:
        return
    if KINDS[kind].axial and np.linalg.norm(rot(rotation) @ axis_child - axis_parent) > 1e-9:
        raise ValueError("rotation: must turn axis_child onto axis_parent")


def geometry(joint) -> Geometry:
    """The :class:`Geometry` of a :class:`rtrigid.model.Joint`."""
    up, uc = joint.axis_parent, joint.axis_child
    e1p, e2p = orthonormal_pair(up)
    e1c, e2c = orthonormal_pair(uc)
    r0 = getattr(joint, "rotation", None)
    if r0 is None:
        axial = KINDS[joint.kind].axial and joint.kind != "universal"
        r0 = shortest_arc(uc, up) if axial else np.array([1.0, 0.0, 0.0, 0.0])
    if joint.kind == "universal":  # the child's frame (e1, e2, u): e1 the first axis at zero
        e1c = rot(r0).T @ up
        e2c = np.cross(uc, e1c)
    return Geometry(joint.anchor_parent, joint.anchor_child, up, uc, e1p, e2p, e1c, e2c, r0)


def qmul(a, b):
    """Hamilton product of two quaternions (any dtype, so complex steps go through)."""
    a0, a1, a2, a3 = a
    b0, b1, b2, b3 = b
    return np.array(
        [
            a0 * b0 - a1 * b1 - a2 * b2 - a3 * b3,
            a0 * b1 + a1 * b0 + a2 * b3 - a3 * b2,
            a0 * b2 - a1 * b3 + a2 * b0 + a3 * b1,
            a0 * b3 + a1 * b2 - a2 * b1 + a3 * b0,
        ]
    )


def conj(a):
    return np.array([a[0], -a[1], -a[2], -a[3]])


def rot(p):
    """E(p) G(p)^T: the rotation matrix times |p|², a quadratic form in p."""
    p0, p1, p2, p3 = p
    return np.array(
        [
            [
                p0 * p0 + p1 * p1 - p2 * p2 - p3 * p3,
                2 * (p1 * p2 - p0 * p3),
                2 * (p1 * p3 + p0 * p2),
            ],
            [
                2 * (p1 * p2 + p0 * p3),
                p0 * p0 - p1 * p1 + p2 * p2 - p3 * p3,
                2 * (p2 * p3 - p0 * p1),
            ],
            [
                2 * (p1 * p3 - p0 * p2),
                2 * (p2 * p3 + p0 * p1),
                p0 * p0 - p1 * p1 - p2 * p2 + p3 * p3,
            ],
        ]
    )


def residual(kind, g: Geometry, xp, pp, xc, pc):
    """Constraint residual of one joint of geometry ``g`` (see the table above)."""
    if kind not in KINDS:
        raise ValueError(f"kind: unknown joint kind {kind!r}")
    if kind == "free":
        return np.zeros(0)
    Rp = rot(pp)
    d = xc + rot(pc) @ g.anchor_child - xp - Rp @ g.anchor_parent
    sigma = qmul(conj(g.r0), qmul(conj(pp), pc))[1:]
    dl = Rp.T @ d
    tilt = [g.e1_child @ sigma, g.e2_child @ sigma]
    off_axis = [g.e1_parent @ dl, g.e2_parent @ dl]
    parts = {
        "spherical": [d],
        "revolute": [d, tilt],
        "prismatic": [off_axis, sigma],
        "cylindrical": [off_axis, tilt],
        "planar": [[g.axis_parent @ dl], tilt],
        "fixed": [d, sigma],
        "universal": [d, [(Rp @ g.axis_parent) @ (rot(pc) @ g.axis_child)]],
    }[kind]
    return np.concatenate([np.asarray(v) for v in parts])
