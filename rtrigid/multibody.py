"""Jointed multibody systems: the tree, its generalized coordinates and the compiled kinematics.

Each body has exactly one *inbound joint*: a joint to its parent body, to the world, or -- for a
body no joint holds -- a free joint (six degrees of freedom).  The bodies and their inbound
joints form a forest, stored in topological order so that a parent is always met before its
children.  Closed loops are refused for now (the arrays leave room for loop-closure rows).

Generalized coordinates, per inbound joint (``Qg``; the rates ``nu`` are the independent
velocities of the null-space method, 002 §5):

=========== ===================================== ===========================================
kind        Qg                                    nu
=========== ===================================== ===========================================
free        x (3, world), q (4)                   v (3, world), Omega (3, body)
spherical   s (4): relative unit quaternion       omega_rel (3, child body frame)
revolute    theta                                 theta_dot
prismatic   d                                     d_dot
cylindrical theta, d                              theta_dot, d_dot
planar      theta, d1, d2                         theta_dot, d1_dot, d2_dot
fixed       --                                    --
=========== ===================================== ===========================================

A joint carries an anchor point and an axis in each of its two bodies' frames (for the world,
world coordinates).  ``r0`` is the relative rotation at zero joint angle; it turns the child's
axis onto the parent's.  Forward kinematics (child c of parent p):

    q_c = q_p o r0 o s_rel,          s_rel = s, or the rotation by theta about the child axis
    r   = x_p + R_p (a_P + t),       t = d u_P, or d1 e1_P + d2 e2_P (planar), else 0
    x_c = r - R_c a_C.

Velocities are built by the rigid-body recursion V_c = V_p + S_c nu_c with spatial vectors
(angular, linear) taken at the world origin, so that no change of reference point is needed
between bodies.  The joints hold at position level by construction (positions are recomputed
from Qg) and at velocity level exactly (velocities come from nu).  The articulated-body
recursion below solves (T^T M T) a = f in O(n) without forming T.
"""
from __future__ import annotations

import numpy as np

from rtrigid._jit import jit
from rtrigid.quat import qmul_t

FREE6, SPHERICAL, REVOLUTE, PRISMATIC, CYLINDRICAL, PLANAR, FIXED = range(7)
KIND_CODES = {"free": FREE6, "spherical": SPHERICAL, "revolute": REVOLUTE,
              "prismatic": PRISMATIC, "cylindrical": CYLINDRICAL, "planar": PLANAR,
              "fixed": FIXED}
KIND_NAMES = {v: k for k, v in KIND_CODES.items()}
NQ = np.array([7, 4, 1, 1, 2, 3, 0], np.int64)
NV = np.array([6, 3, 1, 1, 2, 3, 0], np.int64)

# per-body float row
T_MASS = 0
T_J = 1        # principal moments (3)
T_AP = 4       # anchor in the parent frame (world for a world joint)
T_AC = 7       # anchor in the child frame
T_UP = 10      # axis in the parent frame
T_UC = 13      # axis in the child frame
T_E1P = 16     # parent-frame unit vectors completing u_P to a right-handed frame
T_E2P = 19
T_E1C = 22     # the same for the child axis
T_E2C = 25
T_R0 = 28      # relative rotation at zero joint coordinates (4)
T_K = 32       # joint spring stiffness (revolute, prismatic)
T_REST = 33    # its rest coordinate
T_DAMP = 34    # joint damper coefficient
T_WIDTH = 35

# per-body int row
I_ORDER = 0    # the body visited at this position of the topological order
I_PARENT = 1
I_KIND = 2
I_QOFF = 3
I_VOFF = 4
I_WIDTH = 5

# point-to-point springs (body -1 is the world)
P_A = 0        # point on body a (its frame) or world point
P_B = 3
P_K = 6
P_REST = 7
P_WIDTH = 8

HEADER = 4     # ints: nb, ns, nq, nv


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


# -- small dense helpers (no allocation) --------------------------------------------------------
@jit
def quat_to_rot(q0, q1, q2, q3, R):
    """R <- rotation matrix of the unit quaternion (rows, 3x3 array)."""
    R[0, 0] = 1.0 - 2.0 * (q2 * q2 + q3 * q3)
    R[0, 1] = 2.0 * (q1 * q2 - q0 * q3)
    R[0, 2] = 2.0 * (q1 * q3 + q0 * q2)
    R[1, 0] = 2.0 * (q1 * q2 + q0 * q3)
    R[1, 1] = 1.0 - 2.0 * (q1 * q1 + q3 * q3)
    R[1, 2] = 2.0 * (q2 * q3 - q0 * q1)
    R[2, 0] = 2.0 * (q1 * q3 - q0 * q2)
    R[2, 1] = 2.0 * (q2 * q3 + q0 * q1)
    R[2, 2] = 1.0 - 2.0 * (q1 * q1 + q2 * q2)


@jit
def _rv(R, a0, a1, a2):
    return (R[0, 0] * a0 + R[0, 1] * a1 + R[0, 2] * a2,
            R[1, 0] * a0 + R[1, 1] * a1 + R[1, 2] * a2,
            R[2, 0] * a0 + R[2, 1] * a1 + R[2, 2] * a2)


@jit
def _rtv(R, a0, a1, a2):
    return (R[0, 0] * a0 + R[1, 0] * a1 + R[2, 0] * a2,
            R[0, 1] * a0 + R[1, 1] * a1 + R[2, 1] * a2,
            R[0, 2] * a0 + R[1, 2] * a1 + R[2, 2] * a2)


@jit
def _cross(a0, a1, a2, b0, b1, b2):
    return (a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0)


@jit
def _set_col(Sc, k, a0, a1, a2, l0, l1, l2):
    Sc[0, k] = a0
    Sc[1, k] = a1
    Sc[2, k] = a2
    Sc[3, k] = l0
    Sc[4, k] = l1
    Sc[5, k] = l2


@jit
def _motion_cross(a, b, out):
    """out += a x b for spatial motion vectors (angular, linear)."""
    out[0] += a[1] * b[2] - a[2] * b[1]
    out[1] += a[2] * b[0] - a[0] * b[2]
    out[2] += a[0] * b[1] - a[1] * b[0]
    out[3] += a[1] * b[5] - a[2] * b[4] + a[4] * b[2] - a[5] * b[1]
    out[4] += a[2] * b[3] - a[0] * b[5] + a[5] * b[0] - a[3] * b[2]
    out[5] += a[0] * b[4] - a[1] * b[3] + a[3] * b[1] - a[4] * b[0]


@jit
def spd_inverse(D, k, out):
    """out[:k,:k] <- inverse of the symmetric positive definite D[:k,:k] (Cholesky).

    Returns False if D is not numerically positive definite.  k <= 6.
    """
    L = np.zeros((6, 6))
    for i in range(k):
        for j in range(i + 1):
            s = D[i, j]
            for m in range(j):
                s -= L[i, m] * L[j, m]
            if i == j:
                if not (s > 0.0):
                    return False
                L[i, i] = np.sqrt(s)
            else:
                L[i, j] = s / L[j, j]
    # invert L (lower triangular), then out = L^-T L^-1
    Li = np.zeros((6, 6))
    for i in range(k):
        Li[i, i] = 1.0 / L[i, i]
        for j in range(i):
            s = 0.0
            for m in range(j, i):
                s -= L[i, m] * Li[m, j]
            Li[i, j] = s / L[i, i]
    for i in range(k):
        for j in range(k):
            s = 0.0
            for m in range(max(i, j), k):
                s += Li[m, i] * Li[m, j]
            out[i, j] = s
    return True


@jit
def nv_of(kind):
    """Number of rates (= motion-subspace columns) of a joint kind."""
    if kind == FREE6:
        return 6
    if kind == SPHERICAL or kind == PLANAR:
        return 3
    if kind == CYLINDRICAL:
        return 2
    if kind == FIXED:
        return 0
    return 1


# -- kinematics ---------------------------------------------------------------------------------
@jit
def joint_rotation(tf, b, kind, Qg, qoff):
    """s_rel of the module docstring, as a tuple."""
    if kind == SPHERICAL:
        return Qg[qoff], Qg[qoff + 1], Qg[qoff + 2], Qg[qoff + 3]
    if kind == REVOLUTE or kind == CYLINDRICAL or kind == PLANAR:
        h = 0.5 * Qg[qoff]
        s = np.sin(h)
        return np.cos(h), s * tf[b, T_UC], s * tf[b, T_UC + 1], s * tf[b, T_UC + 2]
    return 1.0, 0.0, 0.0, 0.0


@jit
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


@jit
def forward_kinematics(tf, ti, Qg, x, q, R, rj):
    """Body poses x, q (and rotation matrices R, world joint points rj) from Qg."""
    nb = ti.shape[0]
    for i in range(nb):
        b = ti[i, I_ORDER]
        p = ti[b, I_PARENT]
        kind = ti[b, I_KIND]
        o = ti[b, I_QOFF]
        if kind == FREE6:
            for k in range(3):
                x[b, k] = Qg[o + k]
                rj[b, k] = Qg[o + k]
            for k in range(4):
                q[b, k] = Qg[o + 3 + k]
            quat_to_rot(q[b, 0], q[b, 1], q[b, 2], q[b, 3], R[b])
            continue
        if p >= 0:
            qp = (q[p, 0], q[p, 1], q[p, 2], q[p, 3])
        else:
            qp = (1.0, 0.0, 0.0, 0.0)
        base = qmul_t(qp[0], qp[1], qp[2], qp[3], tf[b, T_R0], tf[b, T_R0 + 1], tf[b, T_R0 + 2],
                      tf[b, T_R0 + 3])
        s = joint_rotation(tf, b, kind, Qg, o)
        qc = qmul_t(base[0], base[1], base[2], base[3], s[0], s[1], s[2], s[3])
        for k in range(4):
            q[b, k] = qc[k]
        quat_to_rot(qc[0], qc[1], qc[2], qc[3], R[b])
        t = joint_translation(tf, b, kind, Qg, o)
        a = (tf[b, T_AP] + t[0], tf[b, T_AP + 1] + t[1], tf[b, T_AP + 2] + t[2])
        if p >= 0:
            ra = _rv(R[p], a[0], a[1], a[2])
            r = (x[p, 0] + ra[0], x[p, 1] + ra[1], x[p, 2] + ra[2])
        else:
            r = a
        ac = _rv(R[b], tf[b, T_AC], tf[b, T_AC + 1], tf[b, T_AC + 2])
        for k in range(3):
            rj[b, k] = r[k]
            x[b, k] = r[k] - ac[k]


@jit
def motion_columns(tf, ti, b, R, rj, x, Sc):
    """Sc[:, :k] <- the joint's motion subspace (spatial, world origin); returns k.

    Column layout per kind follows ``nu`` of the module docstring.  For the free joint the
    first three columns move the centre of mass, the last three turn about it.
    """
    kind = ti[b, I_KIND]
    p = ti[b, I_PARENT]
    Rb = R[b]
    r = (rj[b, 0], rj[b, 1], rj[b, 2])
    if kind == FREE6:
        for k in range(3):
            _set_col(Sc, k, 0.0, 0.0, 0.0, 1.0 if k == 0 else 0.0, 1.0 if k == 1 else 0.0,
                     1.0 if k == 2 else 0.0)
            a = (Rb[0, k], Rb[1, k], Rb[2, k])
            m = _cross(x[b, 0], x[b, 1], x[b, 2], a[0], a[1], a[2])
            _set_col(Sc, 3 + k, a[0], a[1], a[2], m[0], m[1], m[2])
        return 6
    if kind == SPHERICAL:
        for k in range(3):
            a = (Rb[0, k], Rb[1, k], Rb[2, k])
            m = _cross(r[0], r[1], r[2], a[0], a[1], a[2])
            _set_col(Sc, k, a[0], a[1], a[2], m[0], m[1], m[2])
        return 3
    if kind == FIXED:
        return 0
    if kind == PRISMATIC:
        if p >= 0:
            d = _rv(R[p], tf[b, T_UP], tf[b, T_UP + 1], tf[b, T_UP + 2])
        else:
            d = (tf[b, T_UP], tf[b, T_UP + 1], tf[b, T_UP + 2])
        _set_col(Sc, 0, 0.0, 0.0, 0.0, d[0], d[1], d[2])
        return 1
    # revolute, cylindrical, planar: a rotation about the child axis through the joint point
    a = _rv(Rb, tf[b, T_UC], tf[b, T_UC + 1], tf[b, T_UC + 2])
    m = _cross(r[0], r[1], r[2], a[0], a[1], a[2])
    _set_col(Sc, 0, a[0], a[1], a[2], m[0], m[1], m[2])
    if kind == REVOLUTE:
        return 1
    if kind == CYLINDRICAL:
        _set_col(Sc, 1, 0.0, 0.0, 0.0, a[0], a[1], a[2])
        return 2
    for k in range(2):
        c = T_E1P if k == 0 else T_E2P
        if p >= 0:
            e = _rv(R[p], tf[b, c], tf[b, c + 1], tf[b, c + 2])
        else:
            e = (tf[b, c], tf[b, c + 1], tf[b, c + 2])
        _set_col(Sc, 1 + k, 0.0, 0.0, 0.0, e[0], e[1], e[2])
    return 3


@jit
def spatial_inertia(tf, b, R, x, out):
    """out <- spatial inertia at the world origin: [[Ic - m X X, m X], [-m X, m 1]], X = [x]x."""
    m = tf[b, T_MASS]
    Rb = R[b]
    for i in range(3):
        for j in range(3):
            out[i, j] = (Rb[i, 0] * tf[b, T_J] * Rb[j, 0] + Rb[i, 1] * tf[b, T_J + 1] * Rb[j, 1]
                         + Rb[i, 2] * tf[b, T_J + 2] * Rb[j, 2])
    c0, c1, c2 = x[b, 0], x[b, 1], x[b, 2]
    cc = c0 * c0 + c1 * c1 + c2 * c2
    c = (c0, c1, c2)
    for i in range(3):
        for j in range(3):
            out[i, j] += m * ((cc if i == j else 0.0) - c[i] * c[j])
            out[i, 3 + j] = 0.0
            out[3 + i, j] = 0.0
            out[3 + i, 3 + j] = m if i == j else 0.0
    # m X and -m X blocks
    out[0, 4] = -m * c2
    out[0, 5] = m * c1
    out[1, 3] = m * c2
    out[1, 5] = -m * c0
    out[2, 3] = -m * c1
    out[2, 4] = m * c0
    for i in range(3):
        for j in range(3):
            out[3 + i, j] = out[j, 3 + i]


@jit
def joint_velocities(tf, ti, Sc_all, nu, V, cb):
    """Spatial velocities V and velocity-product accelerations cb (S-dot nu) of every body."""
    nb = ti.shape[0]
    tmp = np.zeros(6)
    rot = np.zeros(6)
    for i in range(nb):
        b = ti[i, I_ORDER]
        p = ti[b, I_PARENT]
        kind = ti[b, I_KIND]
        o = ti[b, I_VOFF]
        k = nv_of(ti[b, I_KIND])
        Sc = Sc_all[b]
        for r in range(6):
            s = 0.0
            for c in range(k):
                s += Sc[r, c] * nu[o + c]
            tmp[r] = s
            V[b, r] = (V[p, r] if p >= 0 else 0.0) + s
            cb[b, r] = 0.0
        if kind == FREE6:
            # d/dt (x X w) at fixed nu = v x w
            w = (V[b, 0], V[b, 1], V[b, 2])
            vv = (nu[o], nu[o + 1], nu[o + 2])
            c = _cross(vv[0], vv[1], vv[2], w[0], w[1], w[2])
            cb[b, 3], cb[b, 4], cb[b, 5] = c
        elif kind == PRISMATIC:
            if p >= 0:
                _motion_cross(V[p], tmp, cb[b])
        elif kind == PLANAR:
            # the rotation column is fixed in the child, the two slides in the parent
            for r in range(6):
                rot[r] = Sc[r, 0] * nu[o]
                tmp[r] -= rot[r]
            _motion_cross(V[b], rot, cb[b])
            if p >= 0:
                _motion_cross(V[p], tmp, cb[b])
        else:
            _motion_cross(V[b], tmp, cb[b])


@jit
def body_rates(ti, R, x, V, v, w):
    """Centre-of-mass velocity v (world) and body angular velocity w from spatial V."""
    nb = ti.shape[0]
    for b in range(nb):
        om = (V[b, 0], V[b, 1], V[b, 2])
        c = _cross(om[0], om[1], om[2], x[b, 0], x[b, 1], x[b, 2])
        for k in range(3):
            v[b, k] = V[b, 3 + k] + c[k]
        wb = _rtv(R[b], om[0], om[1], om[2])
        for k in range(3):
            w[b, k] = wb[k]


@jit
def general_inverse(D, k, out):
    """out[:k,:k] <- inverse of D[:k,:k] (Gauss-Jordan, partial pivoting); False if singular."""
    a = np.zeros((6, 12))
    for i in range(k):
        for j in range(k):
            a[i, j] = D[i, j]
            a[i, k + j] = 1.0 if i == j else 0.0
    for c in range(k):
        piv = c
        for r in range(c + 1, k):
            if abs(a[r, c]) > abs(a[piv, c]):
                piv = r
        if not (abs(a[piv, c]) > 0.0):
            return False
        if piv != c:
            for j in range(2 * k):
                a[c, j], a[piv, j] = a[piv, j], a[c, j]
        inv = 1.0 / a[c, c]
        for j in range(2 * k):
            a[c, j] *= inv
        for r in range(k):
            if r != c:
                f = a[r, c]
                if f != 0.0:
                    for j in range(2 * k):
                        a[r, j] -= f * a[c, j]
    for i in range(k):
        for j in range(k):
            out[i, j] = a[i, k + j]
    return True


@jit
def articulated_factor(tf, ti, R, x, Sc_all, IA, U, Dinv, W, Kb, extra):
    """Articulated inertias IA, U = IA S, W = S^T IA and D^-1 = (S^T IA S)^-1, leaves to root.

    Depends on the configuration only.  With ``extra`` true, the rotational block of each
    body's inertia gets the 3x3 matrix ``Kb[b]`` (world axes) added -- a pure couple
    proportional to the angular velocity, so the same at every reference point; the
    energy-momentum scheme puts its per-body Jacobian terms there -- and the recursion runs in
    its non-symmetric form.  Returns False if some D is singular (not positive definite in
    the symmetric case).
    """
    nb = ti.shape[0]
    symmetric = not extra
    for b in range(nb):
        spatial_inertia(tf, b, R, x, IA[b])
        if extra:
            for r in range(3):
                for c in range(3):
                    IA[b, r, c] += Kb[b, r, c]
    D = np.zeros((6, 6))
    UD = np.zeros((6, 6))
    for i in range(nb - 1, -1, -1):
        b = ti[i, I_ORDER]
        p = ti[b, I_PARENT]
        k = nv_of(ti[b, I_KIND])
        Sc = Sc_all[b]
        Ib = IA[b]
        Ub = U[b]
        Wb = W[b]
        for r in range(6):
            for c in range(k):
                s = 0.0
                t = 0.0
                for m in range(6):
                    s += Ib[r, m] * Sc[m, c]
                    t += Sc[m, c] * Ib[m, r]
                Ub[r, c] = s
                Wb[c, r] = t
        for r in range(k):
            for c in range(k):
                s = 0.0
                for m in range(6):
                    s += Sc[m, r] * Ub[m, c]
                D[r, c] = s
        if k > 0:
            if symmetric:
                if not spd_inverse(D, k, Dinv[b]):
                    return False
            elif not general_inverse(D, k, Dinv[b]):
                return False
        if p < 0:
            continue
        # IA_p += IA_b - U D^-1 W
        for r in range(6):
            for c in range(k):
                s = 0.0
                for m in range(k):
                    s += Ub[r, m] * Dinv[b, m, c]
                UD[r, c] = s
        for r in range(6):
            for c in range(6):
                s = Ib[r, c]
                for m in range(k):
                    s -= UD[r, m] * Wb[m, c]
                IA[p, r, c] += s
    return True


@jit
def articulated_solve(ti, Sc_all, IA, U, Dinv, W, tau, cb, pA, acc, nudot):
    """nudot <- solution of the articulated recursion for joint forces tau and bias forces pA.

    ``IA``, ``U``, ``Dinv``, ``W`` come from :func:`articulated_factor` (IA already includes
    the children's contributions); ``pA`` holds each body's own bias force (overwritten: the
    children's contributions are added in), ``cb`` the velocity-product accelerations.  With
    cb = pA = 0 this solves (T^T M T) nudot = tau.
    """
    nb = ti.shape[0]
    uvec = np.zeros(6)
    ucol = np.zeros((nb, 6))
    for i in range(nb - 1, -1, -1):
        b = ti[i, I_ORDER]
        p = ti[b, I_PARENT]
        k = nv_of(ti[b, I_KIND])
        o = ti[b, I_VOFF]
        Sc = Sc_all[b]
        for c in range(k):
            s = tau[o + c]
            for m in range(6):
                s -= Sc[m, c] * pA[b, m]
            ucol[b, c] = s
        if p < 0:
            continue
        # pa = pA + Ia cb + U D^-1 u with Ia = IA - U D^-1 W
        for c in range(k):
            s = ucol[b, c]
            for m in range(6):
                s -= W[b, c, m] * cb[b, m]
            uvec[c] = s
        for r in range(6):
            s = pA[b, r]
            for m in range(6):
                s += IA[b, r, m] * cb[b, m]
            for c in range(k):
                t = 0.0
                for m in range(k):
                    t += Dinv[b, c, m] * uvec[m]
                s += U[b, r, c] * t
            pA[p, r] += s
    for i in range(nb):
        b = ti[i, I_ORDER]
        p = ti[b, I_PARENT]
        k = nv_of(ti[b, I_KIND])
        o = ti[b, I_VOFF]
        for r in range(6):
            acc[b, r] = (acc[p, r] if p >= 0 else 0.0) + cb[b, r]
        for c in range(k):
            s = ucol[b, c]
            for m in range(6):
                s -= W[b, c, m] * acc[b, m]
            uvec[c] = s
        for c in range(k):
            s = 0.0
            for m in range(k):
                s += Dinv[b, c, m] * uvec[m]
            nudot[o + c] = s
        Sc = Sc_all[b]
        for r in range(6):
            s = 0.0
            for c in range(k):
                s += Sc[r, c] * nudot[o + c]
            acc[b, r] += s


@jit
def coordinate_rates(ti, Qg, nu, Qdot):
    """Qdot from nu: qdot = 1/2 q o (0, Omega) for quaternions (002 (42)), else the rate."""
    nb = ti.shape[0]
    for b in range(nb):
        kind = ti[b, I_KIND]
        o = ti[b, I_QOFF]
        ov = ti[b, I_VOFF]
        if kind == FREE6:
            for k in range(3):
                Qdot[o + k] = nu[ov + k]
            qo, wo = o + 3, ov + 3
        elif kind == SPHERICAL:
            qo, wo = o, ov
        else:
            for k in range(nv_of(kind)):
                Qdot[o + k] = nu[ov + k]
            continue
        d = qmul_t(Qg[qo], Qg[qo + 1], Qg[qo + 2], Qg[qo + 3], 0.0, nu[wo], nu[wo + 1],
                   nu[wo + 2])
        for k in range(4):
            Qdot[qo + k] = 0.5 * d[k]


@jit
def normalize_coordinates(ti, Qg):
    """The cheap projection 002 (63) on every quaternion among the coordinates."""
    nb = ti.shape[0]
    for b in range(nb):
        kind = ti[b, I_KIND]
        if kind == FREE6:
            o = ti[b, I_QOFF] + 3
        elif kind == SPHERICAL:
            o = ti[b, I_QOFF]
        else:
            continue
        n = np.sqrt(Qg[o] ** 2 + Qg[o + 1] ** 2 + Qg[o + 2] ** 2 + Qg[o + 3] ** 2)
        for k in range(4):
            Qg[o + k] /= n


@jit
def world_loads(tf, ti, pf, pi, gravity, x, q, R, V, f_app, t_app, fext):
    """fext <- every body's external spatial force at the world origin (torque, force).

    Gravity and applied loads act at the centre of mass (applied torque as given); a
    point-to-point spring pulls its two points together, force k (l - L0) along the line.
    """
    nb = ti.shape[0]
    for b in range(nb):
        m = tf[b, T_MASS]
        f = (m * gravity[0] + f_app[b, 0], m * gravity[1] + f_app[b, 1],
             m * gravity[2] + f_app[b, 2])
        n = _cross(x[b, 0], x[b, 1], x[b, 2], f[0], f[1], f[2])
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
            _add_point_force(fext, a, pa, fa, 1.0)
        if bb >= 0:
            _add_point_force(fext, bb, pb, fa, -1.0)


@jit
def spring_point(pf, s, col, b, x, R):
    """World position of a spring end (body b's point, or a world point when b < 0)."""
    if b < 0:
        return pf[s, col], pf[s, col + 1], pf[s, col + 2]
    r = _rv(R[b], pf[s, col], pf[s, col + 1], pf[s, col + 2])
    return x[b, 0] + r[0], x[b, 1] + r[1], x[b, 2] + r[2]


@jit
def _add_point_force(fext, b, p, f, sign):
    n = _cross(p[0], p[1], p[2], f[0], f[1], f[2])
    for k in range(3):
        fext[b, k] += sign * n[k]
        fext[b, 3 + k] += sign * f[k]


@jit
def joint_forces(tf, ti, Qg, nu, tau):
    """tau <- joint spring and damper forces (revolute, prismatic): -k (c - c0) - d c_dot."""
    nb = ti.shape[0]
    for b in range(nb):
        kind = ti[b, I_KIND]
        ov = ti[b, I_VOFF]
        for k in range(nv_of(kind)):
            tau[ov + k] = 0.0
        if kind == REVOLUTE or kind == PRISMATIC:
            o = ti[b, I_QOFF]
            tau[ov] = -tf[b, T_K] * (Qg[o] - tf[b, T_REST]) - tf[b, T_DAMP] * nu[ov]


@jit
def bias_forces(tf, ti, R, x, V, fext, IA_own, pA):
    """pA <- V x* (I V) - f_ext per body (IA_own: scratch for one spatial inertia)."""
    nb = ti.shape[0]
    iv = np.zeros(6)
    for b in range(nb):
        spatial_inertia(tf, b, R, x, IA_own)
        for r in range(6):
            s = 0.0
            for c in range(6):
                s += IA_own[r, c] * V[b, c]
            iv[r] = s
        om = (V[b, 0], V[b, 1], V[b, 2])
        vl = (V[b, 3], V[b, 4], V[b, 5])
        a = _cross(om[0], om[1], om[2], iv[0], iv[1], iv[2])
        c = _cross(vl[0], vl[1], vl[2], iv[3], iv[4], iv[5])
        e = _cross(om[0], om[1], om[2], iv[3], iv[4], iv[5])
        for k in range(3):
            pA[b, k] = a[k] + c[k] - fext[b, k]
            pA[b, 3 + k] = e[k] - fext[b, 3 + k]


def work_layout(nb, nq, nv):
    """Names and shapes of the per-step scratch arrays of the multibody kernels."""
    return (("R", (nb, 3, 3)), ("rj", (nb, 3)), ("Sc", (nb, 6, 6)), ("V", (nb, 6)),
            ("cb", (nb, 6)), ("IA", (nb, 6, 6)), ("U", (nb, 6, 6)), ("Dinv", (nb, 6, 6)),
            ("W", (nb, 6, 6)), ("Kb", (nb, 3, 3)), ("pA", (nb, 6)), ("acc", (nb, 6)), ("fext", (nb, 6)), ("I6", (6, 6)),
            ("tau", (nv,)), ("Q0", (nq,)), ("nu0", (nv,)), ("kQ", (4, nq)), ("knu", (4, nv)),
            ("Qs", (nq,)), ("nus", (nv,)), ("nudot", (nv,)))


# -- the kernel buffers -------------------------------------------------------------------------
#   I = [nb, ns, nq, nv | ti (nb x I_WIDTH) | pi (ns x 2) | stats]
#   F = [gravity (3) | tf (nb x T_WIDTH) | pf (ns x P_WIDTH) | S | S_prev | A (6 nb) | solver (2)
#        | work]
#   S = [Qg (nq) | nu (nv) | x (3 nb) | q (4 nb) | v (3 nb) | w (3 nb) | L (3 nb)]
# x, q, v, w, L are the bodies' maximal coordinates, written from (Qg, nu) by the explicit
# scheme; the energy-momentum scheme advances (Qg, v, L) and writes nu as the rates that best
# fit its velocities (see integrators/multibody_em).

def state_size(nb, nq, nv):
    return nq + nv + 16 * nb


def model_sizes(nb, ns):
    """(float model length, int model length)."""
    return 3 + T_WIDTH * nb + P_WIDTH * ns, HEADER + I_WIDTH * nb + 2 * ns


@jit
def base_work_size(nb, nq, nv):
    """Length of the scratch of :func:`work_layout` (its sum; a test checks the two agree)."""
    return 231 * nb + 36 + 6 * nq + 8 * nv


def work_size(nb, nq, nv):
    return int(base_work_size(nb, nq, nv))


@jit
def state_views(S, nb, nq, nv):
    """(Qg, nu, x, q, v, w, L) views into a multibody state array."""
    o = nq + nv
    return (S[:nq], S[nq:o], S[o:o + 3 * nb].reshape((nb, 3)),
            S[o + 3 * nb:o + 7 * nb].reshape((nb, 4)), S[o + 7 * nb:o + 10 * nb].reshape((nb, 3)),
            S[o + 10 * nb:o + 13 * nb].reshape((nb, 3)), S[o + 13 * nb:o + 16 * nb].reshape((nb, 3)))


@jit
def open_buffers(F, I):
    """Views of the two kernel buffers: (gravity, tf, pf, ti, pi, S, S_prev, A, solver, stats,
    work, sizes) with sizes = (nb, ns, nq, nv)."""
    nb, ns, nq, nv = I[0], I[1], I[2], I[3]
    o = 3
    gravity = F[0:3]
    tf = F[o:o + T_WIDTH * nb].reshape((nb, T_WIDTH))
    o += T_WIDTH * nb
    pf = F[o:o + P_WIDTH * ns].reshape((ns, P_WIDTH))
    o += P_WIDTH * ns
    n_state = nq + nv + 16 * nb
    S = F[o:o + n_state]
    o += n_state
    S_prev = F[o:o + n_state]
    o += n_state
    A = F[o:o + 6 * nb]
    o += 6 * nb
    solver = F[o:o + 2]
    o += 2
    work = F[o:]
    oi = HEADER
    ti = I[oi:oi + I_WIDTH * nb].reshape((nb, I_WIDTH))
    oi += I_WIDTH * nb
    pi = I[oi:oi + 2 * ns].reshape((ns, 2))
    oi += 2 * ns
    stats = I[oi:]
    return gravity, tf, pf, ti, pi, S, S_prev, A, solver, stats, work, (nb, ns, nq, nv)


@jit
def carve(work, nb, nq, nv):
    """The scratch arrays of :func:`work_layout`, in that order."""
    o = 0
    R = work[o:o + 9 * nb].reshape((nb, 3, 3))
    o += 9 * nb
    rj = work[o:o + 3 * nb].reshape((nb, 3))
    o += 3 * nb
    Sc = work[o:o + 36 * nb].reshape((nb, 6, 6))
    o += 36 * nb
    V = work[o:o + 6 * nb].reshape((nb, 6))
    o += 6 * nb
    cb = work[o:o + 6 * nb].reshape((nb, 6))
    o += 6 * nb
    IA = work[o:o + 36 * nb].reshape((nb, 6, 6))
    o += 36 * nb
    U = work[o:o + 36 * nb].reshape((nb, 6, 6))
    o += 36 * nb
    Dinv = work[o:o + 36 * nb].reshape((nb, 6, 6))
    o += 36 * nb
    W = work[o:o + 36 * nb].reshape((nb, 6, 6))
    o += 36 * nb
    Kb = work[o:o + 9 * nb].reshape((nb, 3, 3))
    o += 9 * nb
    pA = work[o:o + 6 * nb].reshape((nb, 6))
    o += 6 * nb
    acc = work[o:o + 6 * nb].reshape((nb, 6))
    o += 6 * nb
    fext = work[o:o + 6 * nb].reshape((nb, 6))
    o += 6 * nb
    I6 = work[o:o + 36].reshape((6, 6))
    o += 36
    tau = work[o:o + nv]
    o += nv
    Q0 = work[o:o + nq]
    o += nq
    nu0 = work[o:o + nv]
    o += nv
    kQ = work[o:o + 4 * nq].reshape((4, nq))
    o += 4 * nq
    knu = work[o:o + 4 * nv].reshape((4, nv))
    o += 4 * nv
    Qs = work[o:o + nq]
    o += nq
    nus = work[o:o + nv]
    o += nv
    nudot = work[o:o + nv]
    return (R, rj, Sc, V, cb, IA, U, Dinv, W, Kb, pA, acc, fext, I6, tau, Q0, nu0, kQ, knu, Qs, nus,
            nudot)


@jit
def geometry(tf, ti, Qg, x, q, R, rj, Sc):
    """Poses and motion subspaces at the configuration Qg."""
    forward_kinematics(tf, ti, Qg, x, q, R, rj)
    for b in range(ti.shape[0]):
        motion_columns(tf, ti, b, R, rj, x, Sc[b])


@jit
def accelerations(gravity, tf, pf, ti, pi, Qg, nu, x, q, f_app, t_app, scratch, nudot):
    """nudot of the null-space equations (T^T M T) nudot = T^T (f - M Tdot nu), by recursion.

    Returns False when a joint-space inertia block is not positive definite.
    """
    R, rj, Sc, V, cb, IA, U, Dinv, W, Kb, pA, acc, fext, I6, tau = scratch[:15]
    geometry(tf, ti, Qg, x, q, R, rj, Sc)
    joint_velocities(tf, ti, Sc, nu, V, cb)
    world_loads(tf, ti, pf, pi, gravity, x, q, R, V, f_app, t_app, fext)
    bias_forces(tf, ti, R, x, V, fext, I6, pA)
    joint_forces(tf, ti, Qg, nu, tau)
    if not articulated_factor(tf, ti, R, x, Sc, IA, U, Dinv, W, Kb, False):
        return False
    articulated_solve(ti, Sc, IA, U, Dinv, W, tau, cb, pA, acc, nudot)
    return True


@jit
def refresh_bodies(tf, ti, Qg, nu, x, q, v, w, L, scratch):
    """Write the bodies' x, q, v, w, L from (Qg, nu)."""
    R, rj, Sc, V, cb = scratch[:5]
    geometry(tf, ti, Qg, x, q, R, rj, Sc)
    joint_velocities(tf, ti, Sc, nu, V, cb)
    body_rates(ti, R, x, V, v, w)
    for b in range(ti.shape[0]):
        for k in range(3):
            L[b, k] = tf[b, T_J + k] * w[b, k]


# -- building the tree from a Model -------------------------------------------------------------
class Tree:
    """A model's tree, frozen: flat arrays for the kernels plus names for the Python side.

    ``joints[b]`` describes body b's inbound joint as a :class:`rtrigid.model.Joint` (a free
    body gets a ``"free"`` one, a body attached with ``attach_to_world`` a spherical one).
    """

    def __init__(self, model):
        from rtrigid.model import Joint

        nb = len(model.bodies)
        if nb == 0:
            raise ValueError("bodies: the model has no bodies")
        inbound = [None] * nb
        for j in model.joints:
            inbound[j.child] = j
        zero, ez = np.zeros(3), np.array([0.0, 0.0, 1.0])
        for b, body in enumerate(model.bodies):
            if inbound[b] is None:
                if body.pivot_body is not None:
                    inbound[b] = Joint(f"pivot_{body.name}", "spherical", -1, b,
                                       body.pivot_world.copy(), body.pivot_body.copy(), ez, ez)
                else:
                    inbound[b] = Joint(f"free_{body.name}", "free", -1, b, zero, zero, ez, ez)
        children = [[] for _ in range(nb)]
        roots = []
        for b in range(nb):
            (children[inbound[b].parent] if inbound[b].parent >= 0 else roots).append(b)
        order = []
        stack = list(reversed(roots))
        while stack:  # depth first: a chain is stored root to tip
            b = stack.pop()
            order.append(b)
            stack.extend(reversed(children[b]))
        assert len(order) == nb, "the builder refuses loops, so every body is reached"
        self.nb, self.joints, self.order = nb, inbound, order
        self.tf = np.zeros((nb, T_WIDTH))
        self.ti = np.zeros((nb, I_WIDTH), np.int64)
        self.Q0 = []
        nq = nv = 0
        for i, b in enumerate(order):
            j = inbound[b]
            code = KIND_CODES[j.kind]
            row = self.tf[b]
            row[T_MASS] = model.bodies[b].mass
            row[T_J:T_J + 3] = model.bodies[b].inertia
            row[T_AP:T_AP + 3] = j.anchor_parent
            row[T_AC:T_AC + 3] = j.anchor_child
            row[T_UP:T_UP + 3] = j.axis_parent
            row[T_UC:T_UC + 3] = j.axis_child
            e1, e2 = orthonormal_pair(j.axis_parent)
            row[T_E1P:T_E1P + 3], row[T_E2P:T_E2P + 3] = e1, e2
            e1, e2 = orthonormal_pair(j.axis_child)
            row[T_E1C:T_E1C + 3], row[T_E2C:T_E2C + 3] = e1, e2
            row[T_R0:T_R0 + 4] = (shortest_arc(j.axis_child, j.axis_parent)
                                  if j.kind in ("revolute", "prismatic", "cylindrical", "planar")
                                  else (1.0, 0.0, 0.0, 0.0))
            row[T_K], row[T_REST], row[T_DAMP] = j.stiffness, j.rest, j.damping
            self.ti[i, I_ORDER] = b
            self.ti[b, I_PARENT] = j.parent
            self.ti[b, I_KIND] = code
            self.ti[b, I_QOFF] = nq
            self.ti[b, I_VOFF] = nv
            nq += int(NQ[code])
            nv += int(NV[code])
        self.nq, self.nv = nq, nv
        self.Q0 = np.zeros(nq)
        for b in range(nb):
            code = self.ti[b, I_KIND]
            o = self.ti[b, I_QOFF]
            if code == FREE6:
                self.Q0[o + 3] = 1.0
            elif code == SPHERICAL:
                self.Q0[o] = 1.0
        ns = len(model.springs)
        self.pf = np.zeros((ns, P_WIDTH))
        self.pi = np.zeros((ns, 2), np.int64)
        for s, sp in enumerate(model.springs):
            self.pi[s] = (sp.body, sp.other)
            self.pf[s, P_A:P_A + 3] = sp.point_body
            self.pf[s, P_B:P_B + 3] = sp.anchor_world
            self.pf[s, P_K], self.pf[s, P_REST] = sp.stiffness, sp.rest_length
        self.gravity = model.gravity.copy()
        self.ns = ns

    def model_arrays(self):
        """(float model part, int model part) of the kernel buffers."""
        mf = np.concatenate([self.gravity, self.tf.ravel(), self.pf.ravel()])
        mi = np.concatenate([np.array([self.nb, self.ns, self.nq, self.nv], np.int64),
                             self.ti.ravel(), self.pi.ravel()])
        return mf, mi


@jit
def subtree_forces(ti, Sc, F, tau):
    """tau <- T^T F: each joint's share of the spatial forces F (nb, 6) of its subtree.

    F is overwritten with the subtree sums (leaves to root).
    """
    nb = ti.shape[0]
    for i in range(nb - 1, -1, -1):
        b = ti[i, I_ORDER]
        p = ti[b, I_PARENT]
        o = ti[b, I_VOFF]
        for c in range(nv_of(ti[b, I_KIND])):
            s = 0.0
            for m in range(6):
                s += Sc[b, m, c] * F[b, m]
            tau[o + c] = s
        if p >= 0:
            for m in range(6):
                F[p, m] += F[b, m]


@jit
def impulse_response(tf, ti, Qg, x, q, b, point, impulse, scratch, dnu, dv, dw):
    """Rate and body-velocity jumps for an impulse at a world point of body b.

    The generalized impulse is T^T J-hat, with J-hat = (point x J, J) at the world origin;
    dnu = (T^T M T)^-1 T^T J-hat; dv, dw are the resulting centre-of-mass velocity (world)
    and body angular velocity jumps.  False if the joint-space inertia is singular.
    """
    R, rj, Sc, V, cb, IA, U, Dinv, W, Kb, pA, acc, fext, I6, tau = scratch[:15]
    geometry(tf, ti, Qg, x, q, R, rj, Sc)
    nb = ti.shape[0]
    fext[:, :] = 0.0
    n = _cross(point[0], point[1], point[2], impulse[0], impulse[1], impulse[2])
    for k in range(3):
        fext[b, k] = n[k]
        fext[b, 3 + k] = impulse[k]
    subtree_forces(ti, Sc, fext, tau)
    if not articulated_factor(tf, ti, R, x, Sc, IA, U, Dinv, W, Kb, False):
        return False
    cb[:, :] = 0.0
    pA[:, :] = 0.0
    articulated_solve(ti, Sc, IA, U, Dinv, W, tau, cb, pA, acc, dnu)
    joint_velocities(tf, ti, Sc, dnu, V, cb)
    body_rates(ti, R, x, V, dv, dw)
    return nb > 0
