"""Jointed multibody systems: the tree, its generalized coordinates and the compiled kinematics.

Each body has exactly one *inbound joint*: a joint to its parent body, to the world, or -- for a
body no joint holds -- a free joint (six degrees of freedom).  The bodies and their inbound
joints form a forest, stored in topological order so that a parent is always met before its
children.  Loops are closed outside the tree by cut joints (:mod:`.loops`).

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

Velocities and accelerations are built from the root outwards, each body's taken at its own
joint point in world axes (angular velocity, velocity of the point; plain accelerations of the
point, see :func:`joint_velocities`).  Referring everything to the joint point keeps every
lever arm as short as a link, so a long chain far from the origin loses no precision (the
earlier world-origin form cancelled terms of size m |x|^2).  The joints hold at position level
by construction (positions are recomputed from Qg) and at velocity level exactly (velocities
come from nu).  The articulated-body recursion below solves (T^T M T) a = f in O(n) without
forming T and without allocating.
"""
from __future__ import annotations

import numpy as np

from rtrigid._jit import jit, jit_inline
from rtrigid.backends.buffers import sections, view
from rtrigid.joints import BY_CODE, KINDS
from rtrigid.joints import geometry as joint_geometry
from rtrigid.maths.quat import qmul_t

# the kernels branch on the codes of the joint-kind table
FREE6, SPHERICAL, REVOLUTE, PRISMATIC, CYLINDRICAL, PLANAR, FIXED = (
    KINDS[k].code for k in ("free", "spherical", "revolute", "prismatic", "cylindrical",
                            "planar", "fixed"))
NQ = np.array([BY_CODE[c].nq for c in range(len(BY_CODE))], np.int64)
NV = np.array([BY_CODE[c].nv for c in range(len(BY_CODE))], np.int64)

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
T_LO = 35      # joint limits of a revolute or prismatic coordinate (-inf, +inf: none)
T_HI = 36
T_BOUNCE = 37  # the limits' restitution
T_WIDTH = 38

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

# actuators (Model.add_actuator), one float row each
ACT_KIND = 0   # MOTOR, POSITION or VELOCITY
ACT_Q = 1      # its joint's coordinate offset in Qg
ACT_V = 2      # and rate offset in nu
ACT_GEAR = 3
ACT_KP = 4
ACT_KV = 5
ACT_LO = 6     # force_range (-inf, inf when none)
ACT_HI = 7
ACT_BODY = 8   # the child body of its joint
ACT_WIDTH = 9
MOTOR, POSITION, VELOCITY = 0, 1, 2
ACTUATOR_KINDS = {"motor": MOTOR, "position": POSITION, "velocity": VELOCITY}

HEADER = 5     # ints: nb, ns, nq, nv, na

# rows of a body's joint geometry (motion_columns): up to six column directions, then
ROW_D = 6      # its joint point minus its parent's joint point
ROW_C = 7      # its centre of mass minus its joint point
JOINT_ROWS = 8


# -- small dense helpers (no allocation) --------------------------------------------------------
@jit_inline
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


@jit_inline
def quat_to_rot_b(q0, q1, q2, q3, R, b):
    """R[b] <- rotation matrix of the unit quaternion (no view of R[b] made)."""
    R[b, 0, 0] = 1.0 - 2.0 * (q2 * q2 + q3 * q3)
    R[b, 0, 1] = 2.0 * (q1 * q2 - q0 * q3)
    R[b, 0, 2] = 2.0 * (q1 * q3 + q0 * q2)
    R[b, 1, 0] = 2.0 * (q1 * q2 + q0 * q3)
    R[b, 1, 1] = 1.0 - 2.0 * (q1 * q1 + q3 * q3)
    R[b, 1, 2] = 2.0 * (q2 * q3 - q0 * q1)
    R[b, 2, 0] = 2.0 * (q1 * q3 - q0 * q2)
    R[b, 2, 1] = 2.0 * (q2 * q3 + q0 * q1)
    R[b, 2, 2] = 1.0 - 2.0 * (q1 * q1 + q2 * q2)


@jit_inline
def rot_vec(R, a0, a1, a2):
    return (R[0, 0] * a0 + R[0, 1] * a1 + R[0, 2] * a2,
            R[1, 0] * a0 + R[1, 1] * a1 + R[1, 2] * a2,
            R[2, 0] * a0 + R[2, 1] * a1 + R[2, 2] * a2)


@jit_inline
def rot_t_vec(R, a0, a1, a2):
    return (R[0, 0] * a0 + R[1, 0] * a1 + R[2, 0] * a2,
            R[0, 1] * a0 + R[1, 1] * a1 + R[2, 1] * a2,
            R[0, 2] * a0 + R[1, 2] * a1 + R[2, 2] * a2)


@jit_inline
def rot_vec_b(R, b, a0, a1, a2):
    """R[b] a, without making a view of R[b] (a view costs a reference count)."""
    return (R[b, 0, 0] * a0 + R[b, 0, 1] * a1 + R[b, 0, 2] * a2,
            R[b, 1, 0] * a0 + R[b, 1, 1] * a1 + R[b, 1, 2] * a2,
            R[b, 2, 0] * a0 + R[b, 2, 1] * a1 + R[b, 2, 2] * a2)


@jit_inline
def rot_t_vec_b(R, b, a0, a1, a2):
    """R[b]^T a, without making a view of R[b]."""
    return (R[b, 0, 0] * a0 + R[b, 1, 0] * a1 + R[b, 2, 0] * a2,
            R[b, 0, 1] * a0 + R[b, 1, 1] * a1 + R[b, 2, 1] * a2,
            R[b, 0, 2] * a0 + R[b, 1, 2] * a1 + R[b, 2, 2] * a2)


@jit
def cross3(a0, a1, a2, b0, b1, b2):
    return (a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0)


@jit
def keep_alive(*arrays):
    """A use of the arrays here, at the one exit of a kernel; does nothing.

    numba takes a reference to every array argument on entry and drops it right after the
    argument's last use.  LLVM's reference-count pruning removes such a pair only when the drop
    sits at the function's single exit and no call that takes the array stands between;
    otherwise every call pays two atomic operations per array.  So the kernels the step loops
    call are leaves (their helpers inlined), have one exit, and end with ``keep_alive`` of the
    arrays last used earlier.  Measured on a one-link chain with ``nullspace_rk4``: 4.8 us per
    step before, 1.1 us after, the arithmetic unchanged.
    """
    return None


@jit_inline
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
@jit_inline
def joint_rotation(tf, b, kind, Qg, qoff):
    """s_rel of the module docstring, as a tuple."""
    if kind == SPHERICAL:
        return Qg[qoff], Qg[qoff + 1], Qg[qoff + 2], Qg[qoff + 3]
    if kind == REVOLUTE or kind == CYLINDRICAL or kind == PLANAR:
        h = 0.5 * Qg[qoff]
        s = np.sin(h)
        return np.cos(h), s * tf[b, T_UC], s * tf[b, T_UC + 1], s * tf[b, T_UC + 2]
    return 1.0, 0.0, 0.0, 0.0


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
            quat_to_rot_b(q[b, 0], q[b, 1], q[b, 2], q[b, 3], R, b)
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
        quat_to_rot_b(qc[0], qc[1], qc[2], qc[3], R, b)
        t = joint_translation(tf, b, kind, Qg, o)
        a = (tf[b, T_AP] + t[0], tf[b, T_AP + 1] + t[1], tf[b, T_AP + 2] + t[2])
        if p >= 0:
            ra = rot_vec_b(R, p, a[0], a[1], a[2])
            r = (x[p, 0] + ra[0], x[p, 1] + ra[1], x[p, 2] + ra[2])
        else:
            r = a
        ac = rot_vec_b(R, b, tf[b, T_AC], tf[b, T_AC + 1], tf[b, T_AC + 2])
        for k in range(3):
            rj[b, k] = r[k]
            x[b, k] = r[k] - ac[k]


@jit_inline
def col_block(kind, c):
    """Where column c of a joint's motion subspace lives: 0 = a rotation axis, 3 = a slide.

    At the joint point every column of every lower pair is either a pure rotation about an
    axis through the point or a pure translation, so a column is stored as one direction.
    """
    if kind == FREE6:
        return 3 if c < 3 else 0
    if kind == PRISMATIC:
        return 3
    if (kind == CYLINDRICAL or kind == PLANAR) and c > 0:
        return 3
    return 0


@jit_inline
def motion_columns(tf, ti, b, R, rj, x, G):
    """Body b's joint geometry G[b] (JOINT_ROWS x 3, world axes); returns the number of columns k.

    Rows 0..k-1: the directions of the motion-subspace columns at the joint point (see
    :func:`col_block` for which are rotations and which slides; layout per kind follows
    ``nu`` of the module docstring -- a free body's joint point is its centre of mass, its
    first three columns move it, the last three turn it).  Row ``ROW_D``: the joint point
    minus the parent's joint point; row ``ROW_C``: the centre of mass minus the joint point.
    """
    kind = ti[b, I_KIND]
    p = ti[b, I_PARENT]
    for k in range(3):
        G[b, ROW_D, k] = rj[b, k] - rj[p, k] if p >= 0 else 0.0
        G[b, ROW_C, k] = x[b, k] - rj[b, k]
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
        d = _parent_axis(tf, b, p, R, T_UP)
        G[b, 0, 0], G[b, 0, 1], G[b, 0, 2] = d
        return 1
    # revolute, cylindrical, planar: a rotation about the child axis through the joint point
    a = rot_vec_b(R, b, tf[b, T_UC], tf[b, T_UC + 1], tf[b, T_UC + 2])
    G[b, 0, 0], G[b, 0, 1], G[b, 0, 2] = a
    if kind == REVOLUTE:
        return 1
    if kind == CYLINDRICAL:
        G[b, 1, 0], G[b, 1, 1], G[b, 1, 2] = a
        return 2
    G[b, 1, 0], G[b, 1, 1], G[b, 1, 2] = _parent_axis(tf, b, p, R, T_E1P)
    G[b, 2, 0], G[b, 2, 1], G[b, 2, 2] = _parent_axis(tf, b, p, R, T_E2P)
    return 3


@jit_inline
def _parent_axis(tf, b, p, R, col):
    """A direction stored in the parent's frame (the world's for a world joint), in world axes."""
    if p >= 0:
        return rot_vec_b(R, p, tf[b, col], tf[b, col + 1], tf[b, col + 2])
    return tf[b, col], tf[b, col + 1], tf[b, col + 2]


@jit_inline
def joint_point_inertia(tf, b, R, G, out):
    """out[b] <- body b's spatial inertia about its joint point, world axes.

    With c = G[b, ROW_C] the centre of mass relative to the point: [[I_c + m([c]x)^T [c]x, m [c]x],
    [-m [c]x, m 1]], mapping (angular acceleration, acceleration of the point) to (moment
    about the point, force).
    """
    m = tf[b, T_MASS]
    j0, j1, j2 = tf[b, T_J], tf[b, T_J + 1], tf[b, T_J + 2]
    c0, c1, c2 = G[b, ROW_C, 0], G[b, ROW_C, 1], G[b, ROW_C, 2]
    cc = c0 * c0 + c1 * c1 + c2 * c2
    for i in range(3):
        for j in range(i, 3):
            s = R[b, i, 0] * j0 * R[b, j, 0] + R[b, i, 1] * j1 * R[b, j, 1] + R[b, i, 2] * j2 * R[b, j, 2]
            s += m * ((cc if i == j else 0.0) - G[b, ROW_C, i] * G[b, ROW_C, j])
            out[b, i, j] = s
            out[b, j, i] = s
            out[b, 3 + i, 3 + j] = m if i == j else 0.0
            out[b, 3 + j, 3 + i] = m if i == j else 0.0
    for i in range(3):
        out[b, i, 3 + i] = 0.0
        out[b, 3 + i, i] = 0.0
    out[b, 0, 4], out[b, 0, 5] = -m * c2, m * c1
    out[b, 1, 3], out[b, 1, 5] = m * c2, -m * c0
    out[b, 2, 3], out[b, 2, 4] = -m * c1, m * c0
    out[b, 4, 0], out[b, 5, 0] = -m * c2, m * c1
    out[b, 3, 1], out[b, 5, 1] = m * c2, -m * c0
    out[b, 3, 2], out[b, 4, 2] = -m * c1, m * c0


@jit
def joint_velocities(ti, G, nu, V, cb):
    """Velocities V = (omega, velocity of the joint point) and velocity-product terms cb.

    For a body b with parent p, joint-point offset d, relative rotation rate W_rel and
    relative slide rate L_rel (both in world axes, from the columns):

        omega_b = omega_p + W_rel,       v_b = v_p + omega_p x d + L_rel,

    and differentiating at fixed nu-dot = 0 (rotation axes are fixed in the child, slide axes
    in the parent, so they turn with omega_b and omega_p):

        cb = (omega_p x W_rel,  omega_p x (omega_p x d) + 2 omega_p x L_rel).

    The accelerations then obey a_b = X(d) a_p + S nu-dot + cb with plain (not spatial)
    accelerations of the joint points, X(d) a = (alpha, a + alpha x d).
    """
    nb = ti.shape[0]
    for i in range(nb):
        b = ti[i, I_ORDER]
        p = ti[b, I_PARENT]
        kind = ti[b, I_KIND]
        o = ti[b, I_VOFF]
        w0 = w1 = w2 = l0 = l1 = l2 = 0.0
        for c in range(nv_of(kind)):
            n = nu[o + c]
            if col_block(kind, c) == 0:
                w0 += G[b, c, 0] * n
                w1 += G[b, c, 1] * n
                w2 += G[b, c, 2] * n
            else:
                l0 += G[b, c, 0] * n
                l1 += G[b, c, 1] * n
                l2 += G[b, c, 2] * n
        if p < 0:
            V[b, 0], V[b, 1], V[b, 2] = w0, w1, w2
            V[b, 3], V[b, 4], V[b, 5] = l0, l1, l2
            for k in range(6):
                cb[b, k] = 0.0
            continue
        op = (V[p, 0], V[p, 1], V[p, 2])
        d = (G[b, ROW_D, 0], G[b, ROW_D, 1], G[b, ROW_D, 2])
        od = cross3(op[0], op[1], op[2], d[0], d[1], d[2])
        V[b, 0], V[b, 1], V[b, 2] = op[0] + w0, op[1] + w1, op[2] + w2
        V[b, 3], V[b, 4], V[b, 5] = V[p, 3] + od[0] + l0, V[p, 4] + od[1] + l1, V[p, 5] + od[2] + l2
        ca = cross3(op[0], op[1], op[2], w0, w1, w2)
        cc = cross3(op[0], op[1], op[2], od[0], od[1], od[2])
        cl = cross3(op[0], op[1], op[2], l0, l1, l2)
        for k in range(3):
            cb[b, k] = ca[k]
            cb[b, 3 + k] = cc[k] + 2.0 * cl[k]


@jit_inline
def carry_acceleration(G, cb, acc, b, p):
    """acc[b] <- X(d) acc[p] + cb[b] (p < 0: cb[b]): body b's (angular acceleration,
    acceleration of its joint point) with its own rates' accelerations left out."""
    for r in range(6):
        acc[b, r] = cb[b, r]
    if p >= 0:
        t = cross3(acc[p, 0], acc[p, 1], acc[p, 2], G[b, ROW_D, 0], G[b, ROW_D, 1],
                   G[b, ROW_D, 2])
        for r in range(3):
            acc[b, r] += acc[p, r]
            acc[b, 3 + r] += acc[p, 3 + r] + t[r]


@jit
def body_rates(ti, R, G, V, v, w):
    """Centre-of-mass velocity v (world) and body angular velocity w from V."""
    nb = ti.shape[0]
    for b in range(nb):
        om = (V[b, 0], V[b, 1], V[b, 2])
        c = cross3(om[0], om[1], om[2], G[b, ROW_C, 0], G[b, ROW_C, 1], G[b, ROW_C, 2])
        for k in range(3):
            v[b, k] = V[b, 3 + k] + c[k]
        wb = rot_t_vec_b(R, b, om[0], om[1], om[2])
        for k in range(3):
            w[b, k] = wb[k]


@jit_inline
def invert_in_place(A, b, k):
    """A[b, :k, :k] <- its inverse by Gauss-Jordan elimination without pivoting; False if a pivot
    is not positive.  Meant for symmetric positive definite matrices (joint-space inertias),
    for which elimination without pivoting is stable and every pivot is positive.
    """
    for c in range(k):
        piv = A[b, c, c]
        if not (piv > 0.0):
            return False
        inv = 1.0 / piv
        A[b, c, c] = 1.0
        for j in range(k):
            A[b, c, j] *= inv
        for r in range(k):
            if r != c:
                f = A[b, r, c]
                A[b, r, c] = 0.0
                for j in range(k):
                    A[b, r, j] -= f * A[b, c, j]
    return True


@jit
def articulated_factor(tf, ti, R, G, IA, U, Dinv, W, Ia, arm=None):
    """Articulated inertias IA, U = IA S, W = S^T IA and D^-1 = (S^T IA S)^-1, leaves to root.

    ``arm`` (nv,), optional: a diagonal joint-space term ("armature") added to D, so the
    factor is that of T^T M T + diag(arm) -- how ``semi_implicit_euler`` takes its dampers
    implicitly, (M + h D).  Only the rates of non-spherical joints may carry one.

    Everything is taken about each body's joint point, world axes; a child's articulated
    inertia Ia = IA - U D^-1 W reaches its parent as X(d)^T Ia X(d) (``Ia``: a 6x6 scratch).
    A spherical joint is handled in world axes, where S = [1; 0]: then U and W are IA's own
    first three columns and rows (not stored), D^-1 is the inverse of IA's rotational block,
    and Ia keeps only its translational block C - E D^-1 B.
    Depends on the configuration only.  Returns False if some D is not numerically positive
    definite.
    """
    nb = ti.shape[0]
    for b in range(nb):
        joint_point_inertia(tf, b, R, G, IA)
    ok = True
    for i in range(nb - 1, -1, -1):
        b = ti[i, I_ORDER]
        p = ti[b, I_PARENT]
        kind = ti[b, I_KIND]
        if kind == SPHERICAL:
            for r in range(3):
                for c in range(3):
                    Dinv[b, r, c] = IA[b, r, c]
            if not invert_in_place(Dinv, b, 3):
                ok = False  # carry on to the single exit (see keep_alive)
            if p < 0:
                continue
            # Ia = [[0, 0], [0, C - E D^-1 B]]; W holds D^-1 B for the moment
            for r in range(3):
                for c in range(3):
                    W[b, r, c] = (Dinv[b, r, 0] * IA[b, 0, 3 + c] + Dinv[b, r, 1] * IA[b, 1, 3 + c]
                                  + Dinv[b, r, 2] * IA[b, 2, 3 + c])
            for r in range(3):
                for c in range(3):
                    Ia[r, c] = Ia[r, 3 + c] = Ia[3 + r, c] = 0.0
                    Ia[3 + r, 3 + c] = IA[b, 3 + r, 3 + c] - (
                        IA[b, 3 + r, 0] * W[b, 0, c] + IA[b, 3 + r, 1] * W[b, 1, c]
                        + IA[b, 3 + r, 2] * W[b, 2, c])
            shift_to_parent(Ia, G, b, IA, p)
            continue
        k = nv_of(kind)
        for c in range(k):
            o = col_block(kind, c)
            d0, d1, d2 = G[b, c, 0], G[b, c, 1], G[b, c, 2]
            for r in range(6):
                U[b, r, c] = IA[b, r, o] * d0 + IA[b, r, o + 1] * d1 + IA[b, r, o + 2] * d2
                W[b, c, r] = IA[b, o, r] * d0 + IA[b, o + 1, r] * d1 + IA[b, o + 2, r] * d2
        for r in range(k):
            o = col_block(kind, r)
            for c in range(k):
                Dinv[b, r, c] = (G[b, r, 0] * U[b, o, c] + G[b, r, 1] * U[b, o + 1, c]
                                 + G[b, r, 2] * U[b, o + 2, c])
        if arm is not None:
            ov = ti[b, I_VOFF]
            for r in range(k):
                Dinv[b, r, r] += arm[ov + r]
        if k > 0 and not invert_in_place(Dinv, b, k):
            ok = False
        if p < 0:
            continue
        # Ia = IA - (U D^-1) W; a joint with a parent has k <= 3 (free joints are roots)
        for r in range(6):
            t0 = t1 = t2 = 0.0
            for m in range(k):
                um = U[b, r, m]
                t0 += um * Dinv[b, m, 0]
                if k > 1:
                    t1 += um * Dinv[b, m, 1]
                if k > 2:
                    t2 += um * Dinv[b, m, 2]
            for c in range(6):
                s = IA[b, r, c]
                if k > 0:
                    s -= t0 * W[b, 0, c]
                if k > 1:
                    s -= t1 * W[b, 1, c]
                if k > 2:
                    s -= t2 * W[b, 2, c]
                Ia[r, c] = s
        shift_to_parent(Ia, G, b, IA, p)
    keep_alive(R)  # see keep_alive; and one exit only, for the same reason
    return ok


@jit_inline
def shift_to_parent(Ia, G, b, IA, p):
    """IA[p] += X(d)^T Ia X(d), d = G[b, ROW_D]: an inertia about body b's joint point, taken
    about its parent's.  With Ia = [[A, B], [E, C]]:  E' = E - C[d]x, B' = B + [d]x C,
    A' = A - B[d]x + [d]x E'  (rows of M[d]x are rows of M crossed with d)."""
    d0, d1, d2 = G[b, ROW_D, 0], G[b, ROW_D, 1], G[b, ROW_D, 2]
    for i in range(3):
        # row i of E' and of A - B[d]x
        ce = cross3(Ia[3 + i, 3], Ia[3 + i, 4], Ia[3 + i, 5], d0, d1, d2)
        bd = cross3(Ia[i, 3], Ia[i, 4], Ia[i, 5], d0, d1, d2)
        for j in range(3):
            Ia[3 + i, j] -= ce[j]
            Ia[i, j] -= bd[j]
    for j in range(3):
        # column j of B' = B + d x C[:, j] and of A' = (A - B[d]x) + d x E'[:, j]
        dc = cross3(d0, d1, d2, Ia[3, 3 + j], Ia[4, 3 + j], Ia[5, 3 + j])
        de = cross3(d0, d1, d2, Ia[3, j], Ia[4, j], Ia[5, j])
        for i in range(3):
            Ia[i, 3 + j] += dc[i]
            Ia[i, j] += de[i]
    for r in range(6):
        for c in range(6):
            IA[p, r, c] += Ia[r, c]


@jit
def articulated_solve(ti, G, IA, U, Dinv, W, tau, cb, pA, acc, nudot):
    """nudot <- solution of the articulated recursion for joint forces tau and bias forces pA.

    ``IA``, ``U``, ``Dinv``, ``W`` come from :func:`articulated_factor` (IA already includes
    the children's contributions); ``pA`` holds each body's own bias force about its joint
    point (overwritten: the children's contributions are added in), ``cb`` the
    velocity-product accelerations of :func:`joint_velocities`.  With cb = pA = 0 this solves
    (T^T M T) nudot = tau.  ``acc`` receives the accelerations (alpha, joint point).
    A spherical joint is solved in world axes (its rates are the columns G[b, :3] = R_b).
    """
    nb = ti.shape[0]
    # leaves to root: y = D^-1 (tau - S^T pA - W cb), parked in nudot; pA_p += X^T pa
    for i in range(nb - 1, -1, -1):
        b = ti[i, I_ORDER]
        p = ti[b, I_PARENT]
        kind = ti[b, I_KIND]
        o = ti[b, I_VOFF]
        if kind == SPHERICAL:
            k = 3
            for r in range(3):
                s = (G[b, 0, r] * tau[o] + G[b, 1, r] * tau[o + 1] + G[b, 2, r] * tau[o + 2]
                     - pA[b, r])
                for m in range(6):
                    s -= IA[b, r, m] * cb[b, m]
                acc[b, r] = s
        else:
            k = nv_of(kind)
            for c in range(k):
                off = col_block(kind, c)
                s = tau[o + c] - (G[b, c, 0] * pA[b, off] + G[b, c, 1] * pA[b, off + 1]
                                  + G[b, c, 2] * pA[b, off + 2])
                for m in range(6):
                    s -= W[b, c, m] * cb[b, m]
                acc[b, c] = s
        for c in range(k):
            s = 0.0
            for m in range(k):
                s += Dinv[b, c, m] * acc[b, m]
            nudot[o + c] = s
        if p < 0:
            continue
        # pa = pA + IA cb + U y  (Ia cb + U D^-1 u of the textbook, with Ia = IA - U D^-1 W)
        for r in range(6):
            s = pA[b, r]
            for m in range(6):
                s += IA[b, r, m] * cb[b, m]
            if kind == SPHERICAL:
                for c in range(3):
                    s += IA[b, r, c] * nudot[o + c]
            else:
                for c in range(k):
                    s += U[b, r, c] * nudot[o + c]
            acc[b, r] = s
        n = cross3(G[b, ROW_D, 0], G[b, ROW_D, 1], G[b, ROW_D, 2], acc[b, 3], acc[b, 4],
                   acc[b, 5])
        for r in range(3):
            pA[p, r] += acc[b, r] + n[r]
            pA[p, 3 + r] += acc[b, 3 + r]
    # root to leaves: a = X a_p + cb + S nudot, nudot = y - D^-1 W X a_p
    for i in range(nb):
        b = ti[i, I_ORDER]
        p = ti[b, I_PARENT]
        kind = ti[b, I_KIND]
        k = nv_of(kind)
        o = ti[b, I_VOFF]
        sph = kind == SPHERICAL
        if p >= 0:
            t = cross3(acc[p, 0], acc[p, 1], acc[p, 2], G[b, ROW_D, 0], G[b, ROW_D, 1],
                       G[b, ROW_D, 2])
            for r in range(3):
                acc[b, r] = acc[p, r]
                acc[b, 3 + r] = acc[p, 3 + r] + t[r]
            # w = W X a_p parked in pA[b] (no longer needed), then nudot = y - D^-1 w
            for c in range(k):
                s = 0.0
                for m in range(6):
                    s += (IA[b, c, m] if sph else W[b, c, m]) * acc[b, m]
                pA[b, c] = s
            for c in range(k):
                s = nudot[o + c]
                for m in range(k):
                    s -= Dinv[b, c, m] * pA[b, m]
                nudot[o + c] = s
            for r in range(6):
                acc[b, r] += cb[b, r]
        else:
            for r in range(6):
                acc[b, r] = cb[b, r]
        if sph:
            # nudot holds the world-axis relative angular acceleration: add it, then R^T
            y = (nudot[o], nudot[o + 1], nudot[o + 2])
            for m in range(3):
                acc[b, m] += y[m]
                nudot[o + m] = G[b, m, 0] * y[0] + G[b, m, 1] * y[1] + G[b, m, 2] * y[2]
            continue
        for c in range(k):
            off = col_block(kind, c)
            for m in range(3):
                acc[b, off + m] += G[b, c, m] * nudot[o + c]
    keep_alive(tau, U)  # see keep_alive


@jit_inline
def coordinate_slots(ti, b):
    """(n, qo, wo) of body b's inbound joint: n plain coordinates at its I_QOFF whose rates are
    at its I_VOFF, then a unit quaternion at qo whose angular rate is at wo (qo = -1: none)."""
    kind = ti[b, I_KIND]
    o = ti[b, I_QOFF]
    ov = ti[b, I_VOFF]
    if kind == FREE6:
        return 3, o + 3, ov + 3
    if kind == SPHERICAL:
        return 0, o, ov
    return nv_of(kind), -1, -1


@jit
def coordinate_rates(ti, Qg, nu, Qdot):
    """Qdot from nu: qdot = 1/2 q o (0, Omega) for quaternions (002 (42)), else the rate."""
    for b in range(ti.shape[0]):
        n, qo, wo = coordinate_slots(ti, b)
        o = ti[b, I_QOFF]
        ov = ti[b, I_VOFF]
        for k in range(n):
            Qdot[o + k] = nu[ov + k]
        if qo < 0:
            continue
        d = qmul_t(Qg[qo], Qg[qo + 1], Qg[qo + 2], Qg[qo + 3], 0.0, nu[wo], nu[wo + 1],
                   nu[wo + 2])
        for k in range(4):
            Qdot[qo + k] = 0.5 * d[k]


@jit_inline
def rk4_stage_input(st, dt, Q0, nu0, dQ, dnu, Qs, nus):
    """(Qs, nus) <- the input of classical RK4's stage ``st`` from the start (Q0, nu0) and the
    previous stage's derivative (dQ, dnu)."""
    c = 0.0 if st == 0 else (dt if st == 3 else 0.5 * dt)
    for i in range(Qs.shape[0]):
        Qs[i] = Q0[i] + c * dQ[i] if st > 0 else Q0[i]
    for i in range(nus.shape[0]):
        nus[i] = nu0[i] + c * dnu[i] if st > 0 else nu0[i]


@jit
def normalize_coordinates(ti, Qg):
    """The cheap projection 002 (63) on every quaternion among the coordinates."""
    for b in range(ti.shape[0]):
        _, o, _ = coordinate_slots(ti, b)
        if o < 0:
            continue
        n = np.sqrt(Qg[o] ** 2 + Qg[o + 1] ** 2 + Qg[o + 2] ** 2 + Qg[o + 3] ** 2)
        for k in range(4):
            Qg[o + k] /= n


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
            _add_point_force(fext, a, x, G, pa, fa, 1.0)
        if bb >= 0:
            _add_point_force(fext, bb, x, G, pb, fa, -1.0)


@jit_inline
def spring_point(pf, s, col, b, x, R):
    """World position of a spring end (body b's point, or a world point when b < 0)."""
    if b < 0:
        return pf[s, col], pf[s, col + 1], pf[s, col + 2]
    r = rot_vec_b(R, b, pf[s, col], pf[s, col + 1], pf[s, col + 2])
    return x[b, 0] + r[0], x[b, 1] + r[1], x[b, 2] + r[2]


@jit_inline
def _add_point_force(fext, b, x, G, p, f, sign):
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


@jit_inline
def actuator_force(act, a, ctrl, c, cdot):
    """Actuator a's force (before the gear) at joint coordinate c and rate cdot, MuJoCo's
    rule: motor u, position kp (u - g c) - kv g cdot, velocity kv (u - g cdot), clipped to
    force_range.  The joint receives g times it."""
    kind = act[a, ACT_KIND]
    g = act[a, ACT_GEAR]
    if kind == MOTOR:
        f = ctrl[a]
    elif kind == POSITION:
        f = act[a, ACT_KP] * (ctrl[a] - g * c) - act[a, ACT_KV] * g * cdot
    else:
        f = act[a, ACT_KV] * (ctrl[a] - g * cdot)
    return min(max(f, act[a, ACT_LO]), act[a, ACT_HI])


@jit
def actuator_loads(act, ctrl, Qg, nu, tau, work, weight):
    """tau += every actuator's generalized force at (Qg, nu); work[a] += weight times its
    power."""
    for a in range(act.shape[0]):
        o, ov = int(act[a, ACT_Q]), int(act[a, ACT_V])
        gf = act[a, ACT_GEAR] * actuator_force(act, a, ctrl, Qg[o], nu[ov])
        tau[ov] += gf
        work[a] += weight * gf * nu[ov]


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


def work_layout(nb, nq, nv):
    """Names and shapes of the per-step scratch arrays of the multibody kernels."""
    return (("R", (nb, 3, 3)), ("rj", (nb, 3)), ("G", (nb, JOINT_ROWS, 3)), ("V", (nb, 6)),
            ("cb", (nb, 6)), ("IA", (nb, 6, 6)), ("U", (nb, 6, 6)), ("Dinv", (nb, 6, 6)),
            ("W", (nb, 6, 6)), ("pA", (nb, 6)), ("acc", (nb, 6)), ("fext", (nb, 6)), ("I6", (6, 6)),
            ("tau", (nv,)), ("Q0", (nq,)), ("nu0", (nv,)), ("kQ", (2, nq)), ("knu", (2, nv)),
            ("Qs", (nq,)), ("nus", (nv,)), ("nudot", (nv,)),
            ("Lc", (nb, nv)), ("La", (nb, nb)), ("Lv", (4, nb)), ("Ld", (nv,)))


# -- the kernel buffers -------------------------------------------------------------------------
#   I = [nb, ns, nq, nv, na | ti (nb x I_WIDTH) | pi (ns x 2) | stats]
#   F = [gravity (3) | tf (nb x T_WIDTH) | pf (ns x P_WIDTH) | act (na x ACT_WIDTH) | S
#        | S_prev | A (6 nb + nv + na) | solver (2) | work]
#   A = [f_app (3 nb) | t_app (3 nb) | held joint forces (nv, on the rates nu, in nu's order)
#        | actuator controls (na)]
#   S = [Qg (nq) | nu (nv) | x (3 nb) | q (4 nb) | v (3 nb) | w (3 nb) | L (3 nb)
#        | actuator work (na, cumulative: part of the state, so a failed step rolls it back)]
# x, q, v, w, L are the bodies' maximal coordinates, written from (Qg, nu) by the explicit
# scheme; the energy-momentum scheme advances (Qg, v, L) and writes nu as the rates that best
# fit its velocities (see backends/tree/energy_momentum).

@jit
def applied_size(nb, nv, na):
    """Length of the applied-load section A: world force and torque per body, then the joint
    forces held on the rates (:meth:`Simulation.set_joint_force`), then the actuators'
    controls."""
    return 6 * nb + nv + na


@jit_inline
def applied_views(A, nb, nv):
    """(f_app (nb, 3), t_app (nb, 3), held joint forces (nv,)) views of A."""
    return view(A, 0, (nb, 3)), view(A, 3 * nb, (nb, 3)), view(A, 6 * nb, (nv,))


@jit
def state_size(nb, nq, nv, na):
    return nq + nv + 16 * nb + na


@jit
def model_sizes(nb, ns, na):
    """(float model length, int model length)."""
    return 3 + T_WIDTH * nb + P_WIDTH * ns + ACT_WIDTH * na, HEADER + I_WIDTH * nb + 2 * ns


@jit
def base_work_size(nb, nq, nv):
    """Length of the scratch of :func:`work_layout` (its sum; a test checks the two agree)."""
    return (186 + 3 * JOINT_ROWS) * nb + 36 + 4 * nq + 6 * nv + nb * (nv + nb + 4) + nv


def work_size(nb, nq, nv):
    return int(base_work_size(nb, nq, nv))


@jit_inline
def state_views(S, nb, nq, nv):
    """(Qg, nu, x, q, v, w, L) views into a multibody state array."""
    o = nq + nv
    return (view(S, 0, (nq,)), view(S, nq, (nv,)), view(S, o, (nb, 3)),
            view(S, o + 3 * nb, (nb, 4)), view(S, o + 7 * nb, (nb, 3)),
            view(S, o + 10 * nb, (nb, 3)), view(S, o + 13 * nb, (nb, 3)))


@jit_inline
def open_buffers(F, I):
    """Views of the two kernel buffers: (gravity, tf, pf, ti, pi, S, S_prev, A, solver, stats,
    work, sizes) with sizes = (nb, ns, nq, nv)."""
    nb, ns, nq, nv, na = I[0], I[1], I[2], I[3], I[4]
    nf_model, ni_model = model_sizes(nb, ns, na)
    S, S_prev, A, solver, stats, work = sections(F, I, nf_model, ni_model,
                                                 state_size(nb, nq, nv, na),
                                                 applied_size(nb, nv, na))
    gravity = view(F, 0, (3,))
    tf = view(F, 3, (nb, T_WIDTH))
    pf = view(F, 3 + T_WIDTH * nb, (ns, P_WIDTH))
    ti = view(I, HEADER, (nb, I_WIDTH))
    pi = view(I, HEADER + I_WIDTH * nb, (ns, 2))
    return gravity, tf, pf, ti, pi, S, S_prev, A, solver, stats, work, (nb, ns, nq, nv)


@jit_inline
def actuator_views(F, I):
    """(act (na, ACT_WIDTH) table, controls (na,) in A, cumulative work (na,) in S)."""
    nb, ns, nq, nv, na = I[0], I[1], I[2], I[3], I[4]
    nf_model, ni_model = model_sizes(nb, ns, na)
    n_state = state_size(nb, nq, nv, na)
    S, S_prev, A, solver, stats, work = sections(F, I, nf_model, ni_model, n_state,
                                                 applied_size(nb, nv, na))
    act = view(F, nf_model - ACT_WIDTH * na, (na, ACT_WIDTH))
    return act, view(A, 6 * nb + nv, (na,)), view(S, n_state - na, (na,))


@jit_inline
def carve(work, nb, nq, nv):
    """The scratch arrays of :func:`work_layout`, in that order."""
    o = 0
    R = view(work, o, (nb, 3, 3))
    o += 9 * nb
    rj = view(work, o, (nb, 3))
    o += 3 * nb
    G = view(work, o, (nb, JOINT_ROWS, 3))
    o += 3 * JOINT_ROWS * nb
    V = view(work, o, (nb, 6))
    o += 6 * nb
    cb = view(work, o, (nb, 6))
    o += 6 * nb
    IA = view(work, o, (nb, 6, 6))
    o += 36 * nb
    U = view(work, o, (nb, 6, 6))
    o += 36 * nb
    Dinv = view(work, o, (nb, 6, 6))
    o += 36 * nb
    W = view(work, o, (nb, 6, 6))
    o += 36 * nb
    pA = view(work, o, (nb, 6))
    o += 6 * nb
    acc = view(work, o, (nb, 6))
    o += 6 * nb
    fext = view(work, o, (nb, 6))
    o += 6 * nb
    I6 = view(work, o, (6, 6))
    o += 36
    tau = view(work, o, (nv,))
    o += nv
    Q0 = view(work, o, (nq,))
    o += nq
    nu0 = view(work, o, (nv,))
    o += nv
    kQ = view(work, o, (2, nq))  # RK4: a stage's derivative, and the sum
    o += 2 * nq
    knu = view(work, o, (2, nv))
    o += 2 * nv
    Qs = view(work, o, (nq,))
    o += nq
    nus = view(work, o, (nv,))
    o += nv
    nudot = view(work, o, (nv,))
    o += nv
    # joint limits (see .limits): impulse columns, their k x k matrix, per active joint
    # (rate index, away sign, target rate, aux), the rate jump
    Lc = view(work, o, (nb, nv))
    o += nb * nv
    La = view(work, o, (nb, nb))
    o += nb * nb
    Lv = view(work, o, (4, nb))
    o += 4 * nb
    Ld = view(work, o, (nv,))
    return (R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau, Q0, nu0, kQ, knu, Qs, nus,
            nudot, Lc, La, Lv, Ld)


@jit
def geometry(tf, ti, Qg, x, q, R, rj, G):
    """Poses and joint geometry at the configuration Qg."""
    forward_kinematics(tf, ti, Qg, x, q, R, rj)
    for b in range(ti.shape[0]):
        motion_columns(tf, ti, b, R, rj, x, G)
    keep_alive(tf, ti, Qg, x, q, R, rj, G)  # see keep_alive


@jit
def refresh_bodies(tf, ti, Qg, nu, x, q, v, w, L, R, rj, G, V, cb):
    """Write the bodies' x, q, v, w, L from (Qg, nu) (R, rj, G, V, cb: scratch of carve)."""
    geometry(tf, ti, Qg, x, q, R, rj, G)
    joint_velocities(ti, G, nu, V, cb)
    body_rates(ti, R, G, V, v, w)
    for b in range(ti.shape[0]):
        for k in range(3):
            L[b, k] = tf[b, T_J + k] * w[b, k]
    keep_alive(tf, ti, Qg, nu, x, q, v, w, L, R, rj, G, V, cb)  # see keep_alive


# -- building the tree from a Model -------------------------------------------------------------
class Tree:
    """A model's tree, frozen: flat arrays for the kernels plus names for the Python side.

    ``joints[b]`` describes body b's inbound joint as a :class:`rtrigid.model.Joint` (a free
    body gets a ``"free"`` one, a body attached with ``attach_to_world`` a spherical one).
    """

    def __init__(self, model):
        nb = len(model.bodies)
        inbound = model.inbound_joints()
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
        assert len(order) == nb, "add_joint refuses loops, so every body is reached"
        self.nb, self.joints, self.order = nb, inbound, order
        self.tf = np.zeros((nb, T_WIDTH))
        self.ti = np.zeros((nb, I_WIDTH), np.int64)
        self.Q0 = []
        nq = nv = 0
        for i, b in enumerate(order):
            j = inbound[b]
            code = KINDS[j.kind].code
            g = joint_geometry(j)
            row = self.tf[b]
            row[T_MASS] = model.bodies[b].mass
            row[T_J:T_J + 3] = model.bodies[b].inertia
            row[T_AP:T_AP + 3], row[T_AC:T_AC + 3] = g.anchor_parent, g.anchor_child
            row[T_UP:T_UP + 3], row[T_UC:T_UC + 3] = g.axis_parent, g.axis_child
            row[T_E1P:T_E1P + 3], row[T_E2P:T_E2P + 3] = g.e1_parent, g.e2_parent
            row[T_E1C:T_E1C + 3], row[T_E2C:T_E2C + 3] = g.e1_child, g.e2_child
            row[T_R0:T_R0 + 4] = g.r0
            row[T_K], row[T_REST], row[T_DAMP] = j.stiffness, j.rest, j.damping
            row[T_LO], row[T_HI] = j.limits
            row[T_BOUNCE] = j.limit_restitution
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
                pose0 = model.bodies[b].pose0
                if pose0 is not None:
                    self.Q0[o:o + 3], self.Q0[o + 3:o + 7] = pose0
            elif code == SPHERICAL:
                self.Q0[o] = 1.0
            elif code in (REVOLUTE, PRISMATIC):  # zero, or the nearer limit (see add_joint)
                self.Q0[o] = min(max(0.0, self.tf[b, T_LO]), self.tf[b, T_HI])
            given = getattr(inbound[b], "position", None)
            if given is not None:
                self.Q0[o:o + len(given)] = given
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
        self.na = len(model.actuators)
        self.act = np.zeros((self.na, ACT_WIDTH))
        for a, ac in enumerate(model.actuators):
            b = model.joints[ac.joint].child
            row = self.act[a]
            row[ACT_KIND] = ACTUATOR_KINDS[ac.kind]
            row[ACT_Q], row[ACT_V] = self.ti[b, I_QOFF], self.ti[b, I_VOFF]
            row[ACT_GEAR], row[ACT_KP], row[ACT_KV] = ac.gear, ac.kp, ac.kv
            row[ACT_LO], row[ACT_HI] = ac.force_range
            row[ACT_BODY] = b

    def model_arrays(self):
        """(float model part, int model part) of the kernel buffers."""
        mf = np.concatenate([self.gravity, self.tf.ravel(), self.pf.ravel(), self.act.ravel()])
        mi = np.concatenate([np.array([self.nb, self.ns, self.nq, self.nv, self.na], np.int64),
                             self.ti.ravel(), self.pi.ravel()])
        return mf, mi


@jit
def impulse_response(tf, ti, Qg, x, q, b, point, impulse, scratch, dnu, dv, dw):
    """Rate and body-velocity jumps for an impulse at a world point of body b.

    The generalized impulse is T^T J-hat, J-hat the impulse and its moment about b's joint
    point; dnu = (T^T M T)^-1 T^T J-hat comes from the articulated recursion with J-hat as the
    only (negative) bias force; dv, dw are the resulting centre-of-mass velocity (world) and
    body angular velocity jumps.  False if the joint-space inertia is singular.
    """
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = scratch[:14]
    geometry(tf, ti, Qg, x, q, R, rj, G)
    nb = ti.shape[0]
    if not articulated_factor(tf, ti, R, G, IA, U, Dinv, W, I6):
        return False
    pA[:, :] = 0.0
    fext[:, :] = 0.0
    _add_point_force(fext, b, x, G, point, impulse, -1.0)
    for k in range(6):
        pA[b, k] = fext[b, k]
    cb[:, :] = 0.0
    tau[:] = 0.0
    articulated_solve(ti, G, IA, U, Dinv, W, tau, cb, pA, acc, dnu)
    joint_velocities(ti, G, dnu, V, cb)
    body_rates(ti, R, G, V, dv, dw)
    return nb > 0
