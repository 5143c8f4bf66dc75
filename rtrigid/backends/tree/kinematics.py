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
come from nu).

The rest of the tree's kernels live beside this module: the flat layout of the model, state
and scratch in :mod:`.layout`, the small dense helpers in :mod:`.dense`, the articulated-body
recursion that solves (T^T M T) a = f in O(n) in :mod:`.articulated`, the loads in
:mod:`.loads` and the actuators in :mod:`.actuators`.  This module re-exports their names.
"""
from __future__ import annotations

import numpy as np

from rtrigid._jit import jit, jit_inline
# the tree's other kernels, also importable from here as before
from rtrigid.backends.tree.actuators import (
    ACTUATOR_KINDS,
    ACT_BODY,
    ACT_GEAR,
    ACT_HI,
    ACT_KIND,
    ACT_KP,
    ACT_KV,
    ACT_LO,
    ACT_Q,
    ACT_V,
    ACT_WIDTH,
    MOTOR,
    POSITION,
    VELOCITY,
    actuator_force,
    actuator_loads,
)
from rtrigid.backends.tree.articulated import (
    articulated_factor,
    articulated_solve,
    invert_in_place,
    joint_point_inertia,
    shift_to_parent,
)
from rtrigid.backends.tree.rotations import (
    cross3,
    keep_alive,
    quat_to_rot,
    quat_to_rot_b,
    rot_t_vec_b,
    rot_vec,
    rot_vec_b,
)
from rtrigid.backends.tree.layout import (
    CYLINDRICAL,
    FIXED,
    FREE6,
    HEADER,
    I_KIND,
    I_ORDER,
    I_PARENT,
    I_QOFF,
    I_VOFF,
    I_WIDTH,
    JOINT_ROWS,
    NQ,
    NV,
    PLANAR,
    PRISMATIC,
    P_A,
    P_B,
    P_K,
    P_REST,
    P_WIDTH,
    REVOLUTE,
    ROW_C,
    ROW_D,
    SPHERICAL,
    T_AC,
    T_AP,
    T_ARM,
    T_FRIC,
    T_BOUNCE,
    T_DAMP,
    T_E1C,
    T_E1P,
    T_E2C,
    T_E2P,
    T_HI,
    T_J,
    T_K,
    T_LO,
    T_MASS,
    T_R0,
    T_REST,
    T_UC,
    T_UP,
    T_WIDTH,
    actuator_views,
    applied_size,
    applied_views,
    base_work_size,
    carve,
    col_block,
    coordinate_slots,
    model_sizes,
    nv_of,
    open_buffers,
    pass_arrays,
    state_size,
    state_views,
    work_layout,
    work_size,
)
from rtrigid.backends.tree.loads import (
    add_point_force,
    bias_forces,
    joint_forces,
    spring_point,
    world_loads,
)
from rtrigid.backends.tree.kinds import (
    add_own_rate_products,
    joint_columns,
    joint_rotation,
    joint_translation,
)
from rtrigid.joints import KINDS
from rtrigid.joints import geometry as joint_geometry
from rtrigid.maths.quat import qmul_t


# -- kinematics ---------------------------------------------------------------------------------
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
    return joint_columns(tf, b, kind, p, R, G)


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
            add_own_rate_products(kind, G, nu, o, cb, b)
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
        add_own_rate_products(kind, G, nu, o, cb, b)


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
def geometry(tf, ti, Qg, x, q, R, rj, G):
    """Poses and joint geometry at the configuration Qg."""
    forward_kinematics(tf, ti, Qg, x, q, R, rj)
    for b in range(ti.shape[0]):
        motion_columns(tf, ti, b, R, rj, x, G)
    keep_alive(tf, ti, Qg, x, q, R, rj, G)  # see keep_alive


@jit
def refresh_bodies(tf, ti, state, R, rj, G, V, cb):
    """Write the bodies' x, q, v, w, L of the :data:`~.layout.TreeState` ``state`` from its
    (Qg, nu) (R, rj, G, V, cb: scratch of carve)."""
    Qg, nu, x, q, v, w, L = state
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
            row[T_ARM] = j.armature
            row[T_FRIC] = j.friction
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
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = pass_arrays(scratch)
    geometry(tf, ti, Qg, x, q, R, rj, G)
    nb = ti.shape[0]
    if not articulated_factor(tf, ti, R, G, IA, U, Dinv, W, I6):
        return False
    pA[:, :] = 0.0
    fext[:, :] = 0.0
    add_point_force(fext, b, x, G, point, impulse, -1.0)
    for k in range(6):
        pA[b, k] = fext[b, k]
    cb[:, :] = 0.0
    tau[:] = 0.0
    articulated_solve(ti, G, IA, U, Dinv, W, tau, cb, pA, acc, dnu)
    joint_velocities(ti, G, dnu, V, cb)
    body_rates(ti, R, G, V, dv, dw)
    return nb > 0
