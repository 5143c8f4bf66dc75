"""The loads on a tree's bodies and joints: gravity, applied loads and point-to-point
springs about each body's joint point, the joint springs and dampers added to the held
joint forces, and the velocity terms of each body's Newton-Euler equations."""
import numpy as np

from rtrigid._jit import jit, jit_inline
from rtrigid.backends.tree.rotations import cross3, rot_t_vec_b, rot_vec_b
from rtrigid.backends.tree.layout import (
    I_KIND,
    I_QOFF,
    I_VOFF,
    PRISMATIC,
    P_A,
    P_B,
    P_K,
    P_REST,
    REVOLUTE,
    ROW_C,
    T_DAMP,
    T_J,
    T_K,
    T_MASS,
    T_REST,
    nv_of,
)


@jit
def world_loads(tf, ti, pf, pi, gravity, x, R, G, f_app, t_app, fext):
    """fext <- every body's external load about its joint point (moment, force), world axes.

    Gravity and applied loads act at the centre of mass (applied torque as given); a
    point-to-point spring pulls its two points together, force k (l - L0) along the line.
    """
    nb = ti.shape[0]
    for b in range(nb):
        m = tf[b, T_MASS]
        f = (m * gravity[0] + f_app[b, 0], m * gravity[1] + f_app[b, 1],
             m * gravity[2] + f_app[b, 2])
        n = cross3(G[b, ROW_C, 0], G[b, ROW_C, 1], G[b, ROW_C, 2], f[0], f[1], f[2])
        for k in range(3):
            fext[b, k] = n[k] + t_app[b, k]
            fext[b, 3 + k] = f[k]
    for s in range(pi.shape[0]):
        a, bb = pi[s, 0], pi[s, 1]
        pa = spring_point(pf, s, P_A, a, x, R)
        pb = spring_point(pf, s, P_B, bb, x, R)
        d = (pb[0] - pa[0], pb[1] - pa[1], pb[2] - pa[2])
        ln = np.sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2])
        k = pf[s, P_K]
        rest = pf[s, P_REST]
        if ln > 0.0:
            c = k * (ln - rest) / ln
        elif rest == 0.0:
            c = k
        else:
            c = 0.0  # direction undefined at zero length with a rest length
        fa = (c * d[0], c * d[1], c * d[2])  # on the point of a, towards b
        if a >= 0:
            add_point_force(fext, a, x, G, pa, fa, 1.0)
        if bb >= 0:
            add_point_force(fext, bb, x, G, pb, fa, -1.0)


@jit_inline
def spring_point(pf, s, col, b, x, R):
    """World position of a spring end (body b's point, or a world point when b < 0)."""
    if b < 0:
        return pf[s, col], pf[s, col + 1], pf[s, col + 2]
    r = rot_vec_b(R, b, pf[s, col], pf[s, col + 1], pf[s, col + 2])
    return x[b, 0] + r[0], x[b, 1] + r[1], x[b, 2] + r[2]


@jit_inline
def add_point_force(fext, b, x, G, p, f, sign):
    """fext[b] += sign * (force f at the world point p), about b's joint point."""
    # joint point = x - c, so p - joint point = (p - x) + c
    r = (p[0] - x[b, 0] + G[b, ROW_C, 0], p[1] - x[b, 1] + G[b, ROW_C, 1],
         p[2] - x[b, 2] + G[b, ROW_C, 2])
    n = cross3(r[0], r[1], r[2], f[0], f[1], f[2])
    for k in range(3):
        fext[b, k] += sign * n[k]
        fext[b, 3 + k] += sign * f[k]


@jit
def joint_forces(tf, ti, Qg, nu, held, tau):
    """tau <- the held joint forces plus the joint springs and dampers (revolute, prismatic):
    held - k (c - c0) - d c_dot."""
    nb = ti.shape[0]
    for b in range(nb):
        kind = ti[b, I_KIND]
        ov = ti[b, I_VOFF]
        for k in range(nv_of(kind)):
            tau[ov + k] = held[ov + k]
        if kind == REVOLUTE or kind == PRISMATIC:
            o = ti[b, I_QOFF]
            tau[ov] += -tf[b, T_K] * (Qg[o] - tf[b, T_REST]) - tf[b, T_DAMP] * nu[ov]


@jit
def bias_forces(tf, ti, R, G, V, fext, pA):
    """pA <- (omega x I_J omega, m omega x (omega x c)) - f_ext per body, about the joint point.

    I_J is the inertia about the joint point and c the centre of mass relative to it: the
    velocity terms of the Newton-Euler equations of a body about one of its points.
    """
    nb = ti.shape[0]
    for b in range(nb):
        m = tf[b, T_MASS]
        om = (V[b, 0], V[b, 1], V[b, 2])
        c = (G[b, ROW_C, 0], G[b, ROW_C, 1], G[b, ROW_C, 2])
        wb = rot_t_vec_b(R, b, om[0], om[1], om[2])
        iw = rot_vec_b(R, b, tf[b, T_J] * wb[0], tf[b, T_J + 1] * wb[1], tf[b, T_J + 2] * wb[2])
        cc = c[0] * c[0] + c[1] * c[1] + c[2] * c[2]
        cw = c[0] * om[0] + c[1] * om[1] + c[2] * om[2]
        h = (iw[0] + m * (cc * om[0] - cw * c[0]), iw[1] + m * (cc * om[1] - cw * c[1]),
             iw[2] + m * (cc * om[2] - cw * c[2]))
        n = cross3(om[0], om[1], om[2], h[0], h[1], h[2])
        oc = cross3(om[0], om[1], om[2], c[0], c[1], c[2])
        f = cross3(om[0], om[1], om[2], oc[0], oc[1], oc[2])
        for k in range(3):
            pA[b, k] = n[k] - fext[b, k]
            pA[b, 3 + k] = m * f[k] - fext[b, 3 + k]
