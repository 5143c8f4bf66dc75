"""Joint kinds as holonomic constraints on the maximal coordinates (x, p) of two bodies.

The kernels never evaluate these: they step generalized coordinates, in which the joints hold
by construction.  These functions are the independent statement of what each joint means;
:meth:`Simulation.constraint_error` reports them and the tests differentiate them (complex
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
=========== ================================================================ =====

R(p) = E(p) G(p)^T is written as the quadratic form, so everything is a polynomial in (x, p):
the spherical part is quadratic and the rotational parts are bilinear in (p_p, p_c) (as in the
lower pairs of 002 Table 2, written with quaternions instead of directors).
"""
from __future__ import annotations

import numpy as np

COUNT = {"spherical": 3, "revolute": 5, "prismatic": 5, "cylindrical": 4, "planar": 3,
         "fixed": 6, "free": 0}


def qmul(a, b):
    """Hamilton product of two quaternions (any dtype, so complex steps go through)."""
    a0, a1, a2, a3 = a
    b0, b1, b2, b3 = b
    return np.array([a0 * b0 - a1 * b1 - a2 * b2 - a3 * b3,
                     a0 * b1 + a1 * b0 + a2 * b3 - a3 * b2,
                     a0 * b2 - a1 * b3 + a2 * b0 + a3 * b1,
                     a0 * b3 + a1 * b2 - a2 * b1 + a3 * b0])


def conj(a):
    return np.array([a[0], -a[1], -a[2], -a[3]])


def rot(p):
    """E(p) G(p)^T: the rotation matrix times |p|², a quadratic form in p."""
    p0, p1, p2, p3 = p
    return np.array([
        [p0 * p0 + p1 * p1 - p2 * p2 - p3 * p3, 2 * (p1 * p2 - p0 * p3), 2 * (p1 * p3 + p0 * p2)],
        [2 * (p1 * p2 + p0 * p3), p0 * p0 - p1 * p1 + p2 * p2 - p3 * p3, 2 * (p2 * p3 - p0 * p1)],
        [2 * (p1 * p3 - p0 * p2), 2 * (p2 * p3 + p0 * p1), p0 * p0 - p1 * p1 - p2 * p2 + p3 * p3],
    ])


def residual(kind, row, xp, pp, xc, pc):
    """Constraint residual of one joint; ``row`` is the body's row of the tree's float table."""
    from rtrigid.multibody import T_AC, T_AP, T_E1C, T_E1P, T_E2C, T_E2P, T_R0, T_UP

    if kind == "free":
        return np.zeros(0)
    ap, ac = row[T_AP:T_AP + 3], row[T_AC:T_AC + 3]
    Rp = rot(pp)
    d = xc + rot(pc) @ ac - xp - Rp @ ap
    sigma = qmul(conj(row[T_R0:T_R0 + 4]), qmul(conj(pp), pc))[1:]
    dl = Rp.T @ d
    e1p, e2p, up = row[T_E1P:T_E1P + 3], row[T_E2P:T_E2P + 3], row[T_UP:T_UP + 3]
    e1c, e2c = row[T_E1C:T_E1C + 3], row[T_E2C:T_E2C + 3]
    if kind == "spherical":
        parts = [d]
    elif kind == "revolute":
        parts = [d, [e1c @ sigma, e2c @ sigma]]
    elif kind == "prismatic":
        parts = [[e1p @ dl, e2p @ dl], sigma]
    elif kind == "cylindrical":
        parts = [[e1p @ dl, e2p @ dl], [e1c @ sigma, e2c @ sigma]]
    elif kind == "planar":
        parts = [[up @ dl], [e1c @ sigma, e2c @ sigma]]
    elif kind == "fixed":
        parts = [d, sigma]
    else:
        raise ValueError(f"kind: unknown joint kind {kind!r}")
    return np.concatenate([np.asarray(v) for v in parts])


def tree_residual(tree, x, q):
    """All joint residuals of a tree at body positions x (nb,3) and quaternions q (nb,4)."""
    out = []
    one = np.array([1.0, 0.0, 0.0, 0.0])
    for b, j in enumerate(tree.joints):
        p = j.parent
        xp, pp = (x[p], q[p]) if p >= 0 else (np.zeros(3, dtype=x.dtype), one.astype(q.dtype))
        out.append(residual(j.kind, tree.tf[b], xp, pp, x[b], q[b]))
    return np.concatenate(out) if out else np.zeros(0)
