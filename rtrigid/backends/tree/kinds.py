"""Joint kinds in the compiled kernels: every per-kind primitive in one place.

The kinds and their numbers are the table :data:`rtrigid.joints.KINDS` (codes, coordinate
and rate counts).  What a kind *does* in the tree's kernels is here, and the kernels only
call it: the relative rotation and translation its coordinates give
(:func:`joint_rotation`, :func:`joint_translation`), its motion-subspace columns
(:func:`joint_columns`) and the velocity products of its own rates
(:func:`add_own_rate_products`), and its terms in the jointed ``energy_momentum`` step: the
rows of the discrete null space in the residual (:func:`em_rows`), their columns and joint
rows in the Newton matrix (:func:`em_columns`), and the exact-work pairs of held joint forces
(:func:`joint_force_loads`).  The rate counts and which columns are turns or slides come
from :mod:`.layout` (:func:`nv_of`, :func:`col_block`), read from the table.  A new kind is
one table row plus one block in each function of this module.

The frames, the coordinates and the schemes are described in :mod:`.kinematics` and
:mod:`.energy_momentum`.
"""
import numpy as np

from rtrigid._jit import jit, jit_inline
from rtrigid.backends.tree.layout import (
    CYLINDRICAL,
    FREE6,
    FIXED,
    I_KIND,
    I_PARENT,
    I_VOFF,
    PLANAR,
    PRISMATIC,
    REVOLUTE,
    SPHERICAL,
    T_AC,
    T_AP,
    T_E1C,
    T_E1P,
    T_E2P,
    T_UC,
    T_UP,
    nv_of,
)
from rtrigid.backends.tree.rotations import cross3, quat_to_rot, rot_vec, rot_vec_b
from rtrigid.joints import KINDS
from rtrigid.maths.quat import qmul_t

UNIVERSAL = KINDS["universal"].code


# -- kinematics ---------------------------------------------------------------------------------


@jit_inline
def joint_rotation(tf, b, kind, Qg, qoff):
    """s_rel of the module docstring, as a tuple."""
    if kind == SPHERICAL:
        return Qg[qoff], Qg[qoff + 1], Qg[qoff + 2], Qg[qoff + 3]
    if kind == REVOLUTE or kind == CYLINDRICAL or kind == PLANAR:
        h = 0.5 * Qg[qoff]
        s = np.sin(h)
        return np.cos(h), s * tf[b, T_UC], s * tf[b, T_UC + 1], s * tf[b, T_UC + 2]
    if kind == UNIVERSAL:
        return universal_rotation(tf, b, Qg, qoff)
    return 1.0, 0.0, 0.0, 0.0


# A kind's block that is longer than a few lines is a compiled function of its own, called
# (not inlined) from the table's primitives: the hot kernels (every kinematics pass, the
# energy-momentum residual and Newton matrix) grow by a call, not by the block, for a kind
# that most trees do not have.
@jit
def universal_rotation(tf, b, Qg, qoff):
    """s_rel of universal joint b: about the first axis (T_E1C: the parent's axis in child
    axes), then about the second (T_UC)."""
    h1, h2 = 0.5 * Qg[qoff], 0.5 * Qg[qoff + 1]
    s1, s2 = np.sin(h1), np.sin(h2)
    return qmul_t(np.cos(h1), s1 * tf[b, T_E1C], s1 * tf[b, T_E1C + 1], s1 * tf[b, T_E1C + 2],
                  np.cos(h2), s2 * tf[b, T_UC], s2 * tf[b, T_UC + 1], s2 * tf[b, T_UC + 2])


@jit_inline
def joint_translation(tf, b, kind, Qg, qoff):
    """t of the module docstring (parent frame), as a tuple."""
    if kind == PRISMATIC:
        d = Qg[qoff]
        return d * tf[b, T_UP], d * tf[b, T_UP + 1], d * tf[b, T_UP + 2]
    if kind == CYLINDRICAL:
        d = Qg[qoff + 1]
        return d * tf[b, T_UP], d * tf[b, T_UP + 1], d * tf[b, T_UP + 2]
    if kind == PLANAR:
        d1, d2 = Qg[qoff + 1], Qg[qoff + 2]
        return (d1 * tf[b, T_E1P] + d2 * tf[b, T_E2P], d1 * tf[b, T_E1P + 1] + d2 * tf[b, T_E2P + 1],
                d1 * tf[b, T_E1P + 2] + d2 * tf[b, T_E2P + 2])
    return 0.0, 0.0, 0.0


@jit_inline
def joint_columns(tf, b, kind, p, R, G):
    """Rows 0..k-1 of body b's joint geometry G[b] (see :func:`.kinematics.motion_columns`):
    the directions of its joint's motion-subspace columns at the joint point, world axes, from
    the rotations R; returns k.  ``p``: the parent (-1: the world)."""
    if kind == FREE6:
        for c in range(3):
            for k in range(3):
                G[b, c, k] = 1.0 if c == k else 0.0
                G[b, 3 + c, k] = R[b, k, c]
        return 6
    if kind == SPHERICAL:
        for c in range(3):
            for k in range(3):
                G[b, c, k] = R[b, k, c]
        return 3
    if kind == FIXED:
        return 0
    if kind == PRISMATIC:
        d = parent_axis(tf, b, p, R, T_UP)
        G[b, 0, 0], G[b, 0, 1], G[b, 0, 2] = d
        return 1
    if kind == UNIVERSAL:  # the first axis turns with the parent, the second with the child
        G[b, 0, 0], G[b, 0, 1], G[b, 0, 2] = parent_axis(tf, b, p, R, T_UP)
        G[b, 1, 0], G[b, 1, 1], G[b, 1, 2] = rot_vec_b(R, b, tf[b, T_UC], tf[b, T_UC + 1],
                                                       tf[b, T_UC + 2])
        return 2
    # revolute, cylindrical, planar: a rotation about the child axis through the joint point
    a = rot_vec_b(R, b, tf[b, T_UC], tf[b, T_UC + 1], tf[b, T_UC + 2])
    G[b, 0, 0], G[b, 0, 1], G[b, 0, 2] = a
    if kind == REVOLUTE:
        return 1
    if kind == CYLINDRICAL:
        G[b, 1, 0], G[b, 1, 1], G[b, 1, 2] = a
        return 2
    G[b, 1, 0], G[b, 1, 1], G[b, 1, 2] = parent_axis(tf, b, p, R, T_E1P)
    G[b, 2, 0], G[b, 2, 1], G[b, 2, 2] = parent_axis(tf, b, p, R, T_E2P)
    return 3


@jit_inline
def parent_axis(tf, b, p, R, col):
    """A direction stored in the parent's frame (the world's for a world joint), in world axes."""
    if p >= 0:
        return rot_vec_b(R, p, tf[b, col], tf[b, col + 1], tf[b, col + 2])
    return tf[b, col], tf[b, col + 1], tf[b, col + 2]


@jit_inline
def add_own_rate_products(kind, G, nu, o, cb, b):
    """Add to cb[b] (see :func:`.kinematics.joint_velocities`) the velocity products of the
    joint's own rates nu[o:], at fixed rate derivatives.

    :func:`.kinematics.joint_velocities` takes every turn axis as fixed in the child and every
    slide as fixed in the parent; a kind whose axes are all so has no term here.  A universal
    joint's first axis a turns with the parent: its rate theta1' adds theta1' theta2' a x e
    (e the second axis) to the angular term.
    """
    if kind == UNIVERSAL:
        universal_rate_products(G, nu, o, cb, b)


@jit
def universal_rate_products(G, nu, o, cb, b):
    """The term theta1' theta2' a x e of universal joint b (see
    :func:`add_own_rate_products`), added to cb."""
    n = nu[o] * nu[o + 1]
    ae = cross3(G[b, 0, 0], G[b, 0, 1], G[b, 0, 2], G[b, 1, 0], G[b, 1, 1], G[b, 1, 2])
    for k in range(3):
        cb[b, k] += n * ae[k]


# -- the energy-momentum step's terms ---------------------------------------------------------


@jit_inline
def first_slide(kind):
    """Column of a joint's first slide (prismatic 0; cylindrical and planar 1, after the
    turn); a kind without slides gives 6, past its last column."""
    if kind == PRISMATIC:
        return 0
    if kind == CYLINDRICAL or kind == PLANAR:
        return 1
    return 6


@jit_inline
def slide_axis(kind, c):
    """The tf column of slide column c's direction (the parent's frame)."""
    if kind == PLANAR:
        return T_E1P if c == 1 else T_E2P
    return T_UP


@jit_inline
def parent_beta(ti, b, R0, u):
    """beta = R0_p w_p, half the spatial Cayley vector of the turn of body b's parent (0 for
    the world)."""
    p = ti[b, I_PARENT]
    if p < 0:
        return 0.0, 0.0, 0.0
    return rot_vec(R0[p], u[p, 0], u[p, 1], u[p, 2])


@jit_inline
def slide_row(tf, b, p, col, R0, beta):
    """(n0, m): a slide's direction at t_n (world) and its discrete counterpart
    m = (1 + [beta]x) n0, along which the reaction force of the slide does no work (see
    :func:`residual`)."""
    if p >= 0:
        n0 = rot_vec(R0[p], tf[b, col], tf[b, col + 1], tf[b, col + 2])
    else:
        n0 = (tf[b, col], tf[b, col + 1], tf[b, col + 2])
    bx = cross3(beta[0], beta[1], beta[2], n0[0], n0[1], n0[2])
    return n0, (n0[0] + bx[0], n0[1] + bx[1], n0[2] + bx[2])


@jit_inline
def parent_arm(tf, ti, b, x0, x1, rot):
    """From the parent's mean centre to body b's mean joint point (its reactions' point of
    action on the parent): Rbar_p a_P where the joint has no slide (both sides' mean joint
    points coincide), else the difference of the two points."""
    p = ti[b, I_PARENT]
    if first_slide(ti[b, I_KIND]) > 5:
        return rot_vec(rot[p], tf[b, T_AP], tf[b, T_AP + 1], tf[b, T_AP + 2])
    ac = rot_vec(rot[b], tf[b, T_AC], tf[b, T_AC + 1], tf[b, T_AC + 2])
    return (0.5 * (x0[b, 0] + x1[b, 0] - x0[p, 0] - x1[p, 0]) + ac[0],
            0.5 * (x0[b, 1] + x1[b, 1] - x0[p, 1] - x1[p, 1]) + ac[1],
            0.5 * (x0[b, 2] + x1[b, 2] - x0[p, 2] - x1[p, 2]) + ac[2])


@jit
def slide_pair(tf, ti, b, f1, f2, R0, rot, u, x0, x1, fw, Y):
    """The force pair +-lambda across the slides of joint b (on the child, and on the parent
    on the same line of action, through the child's mean joint point) that does the work
    f1 (s1 - s0) + f2 (s1' - s0') over the step exactly, into fw and Y.

    With K = (1 + [beta]x) R0_p the pair's work is lambda.K (delta1 - delta0), delta the
    joint's translation in the parent's frame (see :func:`residual`), so
    lambda = K^-T f = (1 - [beta]x)^-1 R0_p f, f = f1 t1 + f2 t2 the generalized forces along
    the slides' directions; (1 - [beta]x)^-1 v = (v + beta x v + beta (beta.v))/(1 + |beta|²).
    The pair has no net moment.
    """
    p = ti[b, I_PARENT]
    kind = ti[b, I_KIND]
    c = first_slide(kind)
    t = slide_axis(kind, c)
    f = (f1 * tf[b, t], f1 * tf[b, t + 1], f1 * tf[b, t + 2])
    if kind == PLANAR:
        f = (f[0] + f2 * tf[b, T_E2P], f[1] + f2 * tf[b, T_E2P + 1], f[2] + f2 * tf[b, T_E2P + 2])
    beta = parent_beta(ti, b, R0, u)
    if p >= 0:
        f = rot_vec(R0[p], f[0], f[1], f[2])
    bx = cross3(beta[0], beta[1], beta[2], f[0], f[1], f[2])
    bf = beta[0] * f[0] + beta[1] * f[1] + beta[2] * f[2]
    s = 1.0 / (1.0 + beta[0] * beta[0] + beta[1] * beta[1] + beta[2] * beta[2])
    lam = ((f[0] + bx[0] + bf * beta[0]) * s, (f[1] + bx[1] + bf * beta[1]) * s,
           (f[2] + bx[2] + bf * beta[2]) * s)
    ac = rot_vec(rot[b], tf[b, T_AC], tf[b, T_AC + 1], tf[b, T_AC + 2])
    mc = cross3(ac[0], ac[1], ac[2], lam[0], lam[1], lam[2])
    for k in range(3):
        fw[b, k] += lam[k]
        Y[b, k] += mc[k]
    if p < 0:
        return
    ap = parent_arm(tf, ti, b, x0, x1, rot)
    mp = cross3(ap[0], ap[1], ap[2], lam[0], lam[1], lam[2])
    for k in range(3):
        fw[p, k] -= lam[k]
        Y[p, k] -= mp[k]


@jit_inline
def em_rows(tf, ti, b, f, mhat, mu, em, jx):
    """Joint b's rows of the residual P^T r (see :func:`.em_residual.residual`) into
    ``em.res``, and the moment its parent's rows read (into ``jx.Nm``): ``f`` the force and
    ``mhat`` the moment about the mean joint point of the subtree's residuals, ``mu`` the
    increments.  ``em``, ``jx``: the step's scratch (``em_carve``, ``jac_carve``)."""
    p = ti[b, I_PARENT]
    kind = ti[b, I_KIND]
    ov = ti[b, I_VOFF]
    Fs, res, rot, u = em.Fs, em.res, em.rot, em.u
    Nm, R0 = jx.Nm, jx.R0
    if kind == FREE6:
        for k in range(3):
            res[ov + k] = f[k]
            res[ov + 3 + k] = Fs[b, k]
            Nm[b, k] = Fs[b, k]
    else:
        for k in range(3):
            Nm[b, k] = mhat[k]
    if kind == SPHERICAL:
        for k in range(3):
            res[ov + k] = mhat[k]
    elif kind == REVOLUTE or kind == CYLINDRICAL or kind == PLANAR:
        wt = rot_vec(rot[b], tf[b, T_UC], tf[b, T_UC + 1], tf[b, T_UC + 2])
        res[ov] = wt[0] * mhat[0] + wt[1] * mhat[1] + wt[2] * mhat[2]
    elif kind == UNIVERSAL:
        universal_residual(tf, ti, b, mhat, mu, res, R0, u)
    first = first_slide(kind)
    if first < 6:
        beta = parent_beta(ti, b, R0, u)
        for c in range(first, nv_of(kind)):
            mv = slide_row(tf, b, p, slide_axis(kind, c), R0, beta)[1]
            res[ov + c] = mv[0] * f[0] + mv[1] * f[1] + mv[2] * f[2]


@jit_inline
def em_columns(h, tf, ti, b, mu, R, rj, em, jx):
    """Joint b's columns of the Newton matrix (see :func:`.em_newton.newton_matrix`): SL (the
    rows of P), SR (the motion of the poses at t_{n+1} per unit of mu) and the joint's rows of
    E (in Cb), at the last residual evaluation; R, rj the rotations and joint points at
    t_{n+1}, ``em``, ``jx`` the step's scratch."""
    kind = ti[b, I_KIND]
    ov = ti[b, I_VOFF]
    x0, x1, u, q1, rot, Fs = em.x0, em.x1, em.u, em.q1, em.rot, em.Fs
    Nm, SL, SR, Cb = jx.Nm, jx.SL, jx.SR, jx.Cb
    Z = jx.M3[3]
    c = 0.5 * h
    xe = (x1[b, 0], x1[b, 1], x1[b, 2])
    # E: the mean joint point moves with half the motion of the joint point at t1, and the
    # subtree force F acts there: c/2 [F]x (v_O - [r1]x theta), i.e. the rows
    # c/2 [(F.r1) 1 - r1 F^T | [F]x] against the body's motion (theta, v_O)
    F = (Fs[b, 3], Fs[b, 4], Fs[b, 5])
    r1 = (rj[b, 0], rj[b, 1], rj[b, 2])
    E = Cb[b]
    for i in range(nv_of(kind)):  # (the factor reads a joint's rows only)
        for j in range(6):
            E[i, j] = 0.0
    e = 0.5 * c
    fr = F[0] * r1[0] + F[1] * r1[1] + F[2] * r1[2]
    o = 3 if kind == FREE6 else 0
    if kind == FREE6 or kind == SPHERICAL:
        for i in range(3):
            for j in range(3):
                E[o + i, j] = -e * r1[i] * F[j]
            E[o + i, i] += e * fr
        E[o + 0, 4], E[o + 0, 5] = -e * F[2], e * F[1]
        E[o + 1, 3], E[o + 1, 5] = e * F[2], -e * F[0]
        E[o + 2, 3], E[o + 2, 4] = -e * F[1], e * F[0]
    # columns
    xm = (0.5 * (x0[b, 0] + xe[0]), 0.5 * (x0[b, 1] + xe[1]), 0.5 * (x0[b, 2] + xe[2]))
    ac = rot_vec(rot[b], tf[b, T_AC], tf[b, T_AC + 1], tf[b, T_AC + 2])
    rm = (xm[0] + ac[0], xm[1] + ac[1], xm[2] + ac[2])
    if kind == FREE6:
        for kk in range(3):
            for i in range(6):
                SL[b, i, kk] = 0.0
                SR[b, i, kk] = 0.0
            SL[b, 3 + kk, kk] = 1.0
            SR[b, 3 + kk, kk] = 1.0
        turn_axes(q1, b, mu, ov + 3, Z)
        for kk in range(3):
            set_column(SL[b], 3 + kk, (1.0 if kk == 0 else 0.0, 1.0 if kk == 1 else 0.0,
                                        1.0 if kk == 2 else 0.0), xm)
            set_column(SR[b], 3 + kk, (Z[0, kk], Z[1, kk], Z[2, kk]), r1)
    elif kind == SPHERICAL:
        turn_axes(q1, b, mu, ov, Z)
        for kk in range(3):
            set_column(SL[b], kk, (1.0 if kk == 0 else 0.0, 1.0 if kk == 1 else 0.0,
                                    1.0 if kk == 2 else 0.0), rm)
            set_column(SR[b], kk, (Z[0, kk], Z[1, kk], Z[2, kk]), r1)
    elif kind == REVOLUTE or kind == CYLINDRICAL or kind == PLANAR:
        wt = rot_vec(rot[b], tf[b, T_UC], tf[b, T_UC + 1], tf[b, T_UC + 2])
        n1 = rot_vec(R[b], tf[b, T_UC], tf[b, T_UC + 1], tf[b, T_UC + 2])
        set_column(SL[b], 0, wt, rm)
        set_column(SR[b], 0, n1, r1)
        # row w.N: the mean axis turns with half the child's turn, c/2 (n1 x N).theta, and the
        # joint point term of the spherical rows seen along w
        N = (Nm[b, 0], Nm[b, 1], Nm[b, 2])
        nN = cross3(n1[0], n1[1], n1[2], N[0], N[1], N[2])
        for j in range(3):
            E[0, j] = e * nN[j] + e * (fr * wt[j] - (wt[0] * r1[0] + wt[1] * r1[1]
                                                     + wt[2] * r1[2]) * F[j])
        fxw = cross3(F[0], F[1], F[2], wt[0], wt[1], wt[2])
        # w.(F x v) = (w x F).v = -(F x w).v
        for j in range(3):
            E[0, 3 + j] = -e * fxw[j]
    elif kind == UNIVERSAL:
        universal_columns(tf, ti, b, mu, R, (F, r1, rm, e), u, jx)
    first = first_slide(kind)
    if first < 6:
        slide_columns(tf, ti, b, first, R, u, F, e, jx)


@jit
def universal_residual(tf, ti, b, mhat, mu, res, R0, u):
    """Universal joint b's two rows of the residual: ``mhat`` along :func:`universal_rows`."""
    ov = ti[b, I_VOFF]
    w1, w2 = universal_rows(tf, ti, b, R0, u, mu)
    res[ov] = w1[0] * mhat[0] + w1[1] * mhat[1] + w1[2] * mhat[2]
    res[ov + 1] = w2[0] * mhat[0] + w2[1] * mhat[1] + w2[2] * mhat[2]


@jit
def universal_columns(tf, ti, b, mu, R, point, u, jx):
    """Universal joint b's columns of the Newton matrix and rows of E (see
    :func:`em_columns`; ``point``: the subtree force F, the joint point r1 at t1, the mean
    point rm and the factor e there): the rows w.N of :func:`universal_rows` against the
    joint's turns about its two axes at t1.  E takes the joint point term only (the rows' own
    turn with the parent's and with mu is left out: Newton then converges linearly, fast)."""
    F, r1, rm, e = point
    SL, SR, E = jx.SL, jx.SR, jx.Cb[b]
    fr = F[0] * r1[0] + F[1] * r1[1] + F[2] * r1[2]
    w = universal_rows(tf, ti, b, jx.R0, u, mu)
    set_column(SR[b], 0, parent_axis(tf, b, ti[b, I_PARENT], R, T_UP), r1)
    set_column(SR[b], 1, rot_vec(R[b], tf[b, T_UC], tf[b, T_UC + 1], tf[b, T_UC + 2]), r1)
    for i in range(2):
        wi = w[i]
        set_column(SL[b], i, wi, rm)
        wr = wi[0] * r1[0] + wi[1] * r1[1] + wi[2] * r1[2]
        fxw = cross3(F[0], F[1], F[2], wi[0], wi[1], wi[2])
        for j in range(3):
            E[i, j] = e * (fr * wi[j] - wr * F[j])
            E[i, 3 + j] = -e * fxw[j]


@jit
def set_column(S, k, a, r):
    """S[:, k] <- the spatial column (a, r x a) of a turn about the world point r."""
    m = cross3(r[0], r[1], r[2], a[0], a[1], a[2])
    for i in range(3):
        S[i, k] = a[i]
        S[3 + i, k] = m[i]


@jit
def turn_axes(q1, b, mu, mo, out):
    """out <- R(q1_b o conj(h)) / (1 + |a|²), h = (1 + a)/|1 + a|, a = mu[mo:mo+3] / 4: the
    world rotation of the body at t_{n+1} per unit of mu (the Cayley map's differential)."""
    a0, a1, a2 = 0.25 * mu[mo], 0.25 * mu[mo + 1], 0.25 * mu[mo + 2]
    aa = a0 * a0 + a1 * a1 + a2 * a2
    c = qmul_t(q1[b, 0], q1[b, 1], q1[b, 2], q1[b, 3], 1.0, -a0, -a1, -a2)
    n = 1.0 / np.sqrt(1.0 + aa)
    quat_to_rot(c[0] * n, c[1] * n, c[2] * n, c[3] * n, out)
    f = 1.0 / (1.0 + aa)
    for i in range(3):
        for j in range(3):
            out[i, j] *= f


@jit
def slide_columns(tf, ti, b, first, R1, u, F, e, jx):
    """The slide columns of joint b in SL (0, m), SR (0, n1: the slide at t_{n+1} moves the
    child along the parent's axis then) and their E rows (in Cb[b]), and dc[b] (see
    :func:`_tree_factor`); SL, SR, Cb, dc and the rotations R0 at t_n are those of ``jx``
    (``jac_carve``), R1 the rotations at t_{n+1}, u the bodies' Cayley vectors.

    A slide's row m.F turns with the parent's turn: dm = dbeta x n0 with
    dbeta = 1/2 (1 - [beta]x + beta beta^T) dtheta_p, so the row's E part is
    c/2 (g + beta x g + beta (beta.g)).theta_p, g = n0 x F.  E multiplies the child's turn,
    which is the parent's for a prismatic joint, and the parent's plus n1 dmu_0 (the joint's
    own turn) for a cylindrical or planar one: that part, E_row.n1, goes into dc[b] to be taken
    off the matrix in the turn's column again.
    """
    R0, SL, SR, dc = jx.R0, jx.SL, jx.SR, jx.dc
    E = jx.Cb[b]
    p = ti[b, I_PARENT]
    kind = ti[b, I_KIND]
    beta = parent_beta(ti, b, R0, u)
    nr = rot_vec(R1[b], tf[b, T_UC], tf[b, T_UC + 1], tf[b, T_UC + 2])
    for c in range(first, nv_of(kind)):
        col = slide_axis(kind, c)
        n0, mv = slide_row(tf, b, p, col, R0, beta)
        if p >= 0:
            n1 = rot_vec(R1[p], tf[b, col], tf[b, col + 1], tf[b, col + 2])
        else:
            n1 = (tf[b, col], tf[b, col + 1], tf[b, col + 2])
        for i in range(3):
            SL[b, i, c] = 0.0
            SR[b, i, c] = 0.0
            SL[b, 3 + i, c] = mv[i]
            SR[b, 3 + i, c] = n1[i]
        dc[b, c] = 0.0
        if p < 0:
            continue
        g = cross3(n0[0], n0[1], n0[2], F[0], F[1], F[2])
        gx = cross3(beta[0], beta[1], beta[2], g[0], g[1], g[2])
        gb = beta[0] * g[0] + beta[1] * g[1] + beta[2] * g[2]
        for j in range(3):
            E[c, j] = e * (g[j] + gx[j] + gb * beta[j])
        if kind != PRISMATIC:
            dc[b, c] = E[c, 0] * nr[0] + E[c, 1] * nr[1] + E[c, 2] * nr[2]


@jit_inline
def joint_force_loads(tf, ti, A, mu, R0, rot, u, x0, x1, fw, Y):
    """The held joint forces as equal and opposite loads on child and parent (into fw, Y).

    A body's kinetic energy changes over the step by b.T for a torque T (b = 2 R0 w its
    spatial Cayley vector), so a torque pair +-T does the work T.(b_c - b_p), and has no net
    moment.  Revolute: the child turns by C_p Rot(a0, dtheta), a0 = R0_c u_C the axis at t_n;
    composing Cayley vectors (beta = b/2 = R0 w, Rot(a0, dtheta) = Cay(t a0), t = tan(dtheta/2))
    gives b_c - b_p = 2 t (1 + |beta_p|²) / (1 - t beta_p.a0) mbar along the mean axis
    mbar = Rbar u_C.  So the pair kappa mbar with
        kappa = tau (dtheta/2) / tan(dtheta/2) (1 - t beta_p.a0) / ((1 + |beta_p|²) |mbar|²)
    does the work tau (theta1 - theta0) exactly: a constant joint torque enters the energy
    balance as exact discrete work.  (kappa depends on mu; its derivative, O(h tau), is left
    out of the Newton matrix, like the spring forces'.)
    Slides (prismatic, cylindrical, planar): the force pair of :func:`slide_pair`, whose
    work is the force times the slide's increment, exactly; a cylindrical or planar joint's
    turn takes the revolute torque pair.
    Spherical joints and a free body's turn: the torque given in child axes acts as Rbar tau
    (its work is tau.Rbar^T (b_c - b_p), the discrete counterpart of tau.omega_rel dt); a free
    body's force acts at its centre of mass (work (x1 - x0).f, exact).
    """
    nb = ti.shape[0]
    held = 6 * nb  # where the held joint forces start in A (they are read in place: a view
    # passed along costs reference counts in every residual evaluation, measurable here)
    for b in range(nb):
        kind = ti[b, I_KIND]
        ov = ti[b, I_VOFF]
        p = ti[b, I_PARENT]
        if kind == REVOLUTE or kind == CYLINDRICAL or kind == PLANAR:
            tau = A[held + ov]
            if tau != 0.0:
                revolute_pair(tf, ti, b, tau, mu[ov], R0, rot, u, Y)
        if kind == PRISMATIC or kind == CYLINDRICAL or kind == PLANAR:
            c = first_slide(kind)
            f1 = A[held + ov + c]
            f2 = A[held + ov + 2] if kind == PLANAR else 0.0
            if f1 != 0.0 or f2 != 0.0:
                slide_pair(tf, ti, b, f1, f2, R0, rot, u, x0, x1, fw, Y)
        elif kind == UNIVERSAL:
            if A[held + ov] != 0.0 or A[held + ov + 1] != 0.0:
                universal_pair(tf, ti, b, (A[held + ov], A[held + ov + 1]), mu, R0, u, Y)
        elif kind == SPHERICAL or kind == FREE6:
            n = 6 if kind == FREE6 else 3
            idle = True
            for k in range(n):
                idle = idle and A[held + ov + k] == 0.0
            if idle:
                continue
            o = ov
            if kind == FREE6:
                for k in range(3):
                    fw[b, k] += A[held + ov + k]
                o = ov + 3
            T = rot_vec(rot[b], A[held + o], A[held + o + 1], A[held + o + 2])
            for k in range(3):
                Y[b, k] += T[k]
                if p >= 0:
                    Y[p, k] -= T[k]


@jit_inline
def revolute_pair(tf, ti, b, tau, dtheta, R0, rot, u, Y):
    """The torque pair +-kappa mbar across revolute joint b (child b, its parent) that does
    the work tau dtheta over the step (see :func:`joint_force_loads`), into Y."""
    p = ti[b, I_PARENT]
    m = rot_vec(rot[b], tf[b, T_UC], tf[b, T_UC + 1], tf[b, T_UC + 2])
    a0 = rot_vec(R0[b], tf[b, T_UC], tf[b, T_UC + 1], tf[b, T_UC + 2])
    beta = parent_beta(ti, b, R0, u)
    half = 0.5 * dtheta
    t = np.tan(half)
    ratio = 1.0 if half == 0.0 else half / t
    mm = m[0] * m[0] + m[1] * m[1] + m[2] * m[2]
    bb = beta[0] * beta[0] + beta[1] * beta[1] + beta[2] * beta[2]
    ba = beta[0] * a0[0] + beta[1] * a0[1] + beta[2] * a0[2]
    kappa = tau * ratio * (1.0 - t * ba) / ((1.0 + bb) * mm)
    for k in range(3):
        Y[b, k] += kappa * m[k]
        if p >= 0:
            Y[p, k] -= kappa * m[k]


@jit_inline
def _kv(beta, v):
    """K v = v + beta x v + beta (beta.v), K = 1 + [beta]x + beta beta^T."""
    bx = cross3(beta[0], beta[1], beta[2], v[0], v[1], v[2])
    bv = beta[0] * v[0] + beta[1] * v[1] + beta[2] * v[2]
    return v[0] + bx[0] + bv * beta[0], v[1] + bx[1] + bv * beta[1], v[2] + bx[2] + bv * beta[2]


@jit_inline
def _universal_axes(tf, ti, b, R0, u):
    """(a0, e0, a0 x e0, beta): universal joint b's axes at t_n (world) and the parent's beta."""
    a0 = parent_axis(tf, b, ti[b, I_PARENT], R0, T_UP)
    e0 = rot_vec(R0[b], tf[b, T_UC], tf[b, T_UC + 1], tf[b, T_UC + 2])
    n = cross3(a0[0], a0[1], a0[2], e0[0], e0[1], e0[2])
    return a0, e0, n, parent_beta(ti, b, R0, u)


@jit_inline
def universal_rows(tf, ti, b, R0, u, mu):
    """(w1, w2): the rows of universal joint b in the residual, moments along which its
    reaction does no work over the step of increments mu.

    Its spatial turn over the step is the parent's (Rodrigues vector beta) then the relative
    Rot(a0, dtheta1) Rot(e0, dtheta2) about its axes at t_n (a0 with the parent, e0 with the
    child), whose Rodrigues vector is g = t1 a0 + t2 e0 + t1 t2 a0 x e0 (t = tan(dtheta/2),
    a0 . e0 = 0).  Composing, the child's Rodrigues vector less the parent's is
    K g / (1 - beta.g), K = 1 + [beta]x + beta beta^T; so with
    w1 = K (a0 + t2/2 a0 x e0), w2 = K (e0 + t1/2 a0 x e0) (t1 w1 + t2 w2 = K g) a reaction
    moment orthogonal to both does no work (for a revolute joint, K a0 is the mean axis times
    1 + |beta|^2).
    """
    ov = ti[b, I_VOFF]
    a0, e0, n, beta = _universal_axes(tf, ti, b, R0, u)
    h1, h2 = 0.5 * np.tan(0.5 * mu[ov]), 0.5 * np.tan(0.5 * mu[ov + 1])
    w1 = _kv(beta, (a0[0] + h2 * n[0], a0[1] + h2 * n[1], a0[2] + h2 * n[2]))
    w2 = _kv(beta, (e0[0] + h1 * n[0], e0[1] + h1 * n[1], e0[2] + h1 * n[2]))
    return w1, w2


@jit_inline
def _half_ratio(dtheta):
    """(t, r): t = tan(dtheta/2) and r = (dtheta/2) / t (1 at 0)."""
    half = 0.5 * dtheta
    t = np.tan(half)
    return t, (1.0 if half == 0.0 else half / t)


@jit
def universal_pair(tf, ti, b, tau, mu, R0, u, Y):
    """The torque pair +-M across universal joint b (into Y) that does the work
    tau1 dtheta1 + tau2 dtheta2 over the step exactly (``tau``: (tau1, tau2)).

    The child's spatial Cayley vector less the parent's is 2 (t1 w1 + t2 w2) / (1 - beta.g)
    (see :func:`universal_rows`), so M = alpha1 w1 + alpha2 w2 with
    M.w_i = tau_i (dtheta_i / 2) / t_i (1 - beta.g) does it.  (M depends on mu; its
    derivative is left out of the Newton matrix, as a revolute joint's torque pair's is.)
    """
    ov = ti[b, I_VOFF]
    p = ti[b, I_PARENT]
    a0, e0, n, beta = _universal_axes(tf, ti, b, R0, u)
    w1, w2 = universal_rows(tf, ti, b, R0, u, mu)
    t1, r1 = _half_ratio(mu[ov])
    t2, r2 = _half_ratio(mu[ov + 1])
    bg = (t1 * (beta[0] * a0[0] + beta[1] * a0[1] + beta[2] * a0[2])
          + t2 * (beta[0] * e0[0] + beta[1] * e0[1] + beta[2] * e0[2])
          + t1 * t2 * (beta[0] * n[0] + beta[1] * n[1] + beta[2] * n[2]))
    s1, s2 = tau[0] * r1 * (1.0 - bg), tau[1] * r2 * (1.0 - bg)
    g11 = w1[0] * w1[0] + w1[1] * w1[1] + w1[2] * w1[2]
    g12 = w1[0] * w2[0] + w1[1] * w2[1] + w1[2] * w2[2]
    g22 = w2[0] * w2[0] + w2[1] * w2[1] + w2[2] * w2[2]
    det = g11 * g22 - g12 * g12
    al1, al2 = (s1 * g22 - s2 * g12) / det, (s2 * g11 - s1 * g12) / det
    for k in range(3):
        m = al1 * w1[k] + al2 * w2[k]
        Y[b, k] += m
        if p >= 0:
            Y[p, k] -= m
