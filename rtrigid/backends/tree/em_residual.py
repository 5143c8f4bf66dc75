"""The residual of the jointed ``energy_momentum`` step: the Cayley update of the coordinates,
the joint reactions at the mean arms (slides, revolute pairs), held joint forces, actuators and
point-to-point springs (see :mod:`.energy_momentum` for the scheme).
"""

import numpy as np
from rtrigid._jit import jit, jit_inline
from rtrigid.backends.tree.kinematics import (
    ACT_BODY,
    ACT_GEAR,
    ACT_Q,
    ACT_V,
    I_KIND,
    I_ORDER,
    I_PARENT,
    I_QOFF,
    I_VOFF,
    PRISMATIC,
    REVOLUTE,
    P_A,
    P_B,
    P_K,
    P_REST,
    T_AC,
    T_ARM,
    T_DAMP,
    T_FRIC,
    T_J,
    T_K,
    T_MASS,
    T_REST,
    actuator_force,
    carve,
    coordinate_slots,
    cross3,
    forward_kinematics,
    quat_to_rot,
    rot_vec,
)
from rtrigid.maths.quat import qmul_t
from rtrigid.backends.tree.em_workspace import em_carve, jac_carve
from rtrigid.backends.tree.kinds import (
    em_rows,
    joint_force_loads,
    parent_arm,
    revolute_pair,
    slide_pair,
)

EPS = np.finfo(np.float64).eps


@jit
def _cay(a0, a1, a2):
    """Cayley map: the unit quaternion (1 - |a|², 2a) / (1 + |a|²), a rotation by ~4|a|."""
    aa = a0 * a0 + a1 * a1 + a2 * a2
    n = 1.0 / (1.0 + aa)
    return (1.0 - aa) * n, 2.0 * a0 * n, 2.0 * a1 * n, 2.0 * a2 * n


@jit_inline
def body_spin(L, J):
    """A body's angular velocity about a principal axis from its momentum there, L / J; 0 for
    a massless link (no momentum: the joints on either side carry its motion)."""
    return L / J if J != 0.0 else 0.0


@jit
def update_coordinates(ti, Q0, mu, Q1):
    """Q1 = F(Q0, mu) of the module docstring."""
    for b in range(ti.shape[0]):
        n, qo, mo = coordinate_slots(ti, b)
        o = ti[b, I_QOFF]
        ov = ti[b, I_VOFF]
        for k in range(n):
            Q1[o + k] = Q0[o + k] + mu[ov + k]
        if qo < 0:
            continue
        c = _cay(0.25 * mu[mo], 0.25 * mu[mo + 1], 0.25 * mu[mo + 2])
        s = qmul_t(Q0[qo], Q0[qo + 1], Q0[qo + 2], Q0[qo + 3], c[0], c[1], c[2], c[3])
        for k in range(4):
            Q1[qo + k] = s[k]


@jit
def canonical_roots(ti, mu, Q1):
    """Every Cayley increment a = mu/4 of a quaternion coordinate on its near root |a| <= 1.

    cay is 2-to-1: a and -a/|a|² give the same rotation (the quaternion negated), and Newton
    may converge to either.  The step is the same physically, but the stored rates mu/h seed
    the next predictor and the fallback, and the far root's are huge (|a| > 1 means a turn of
    more than 180 degrees in one step); the near root also keeps the coordinate's quaternion
    in the hemisphere of the previous one.  Q1 = F(Q0, mu) is kept: its quaternion is negated
    with the root, so both stay consistent.
    """
    for b in range(ti.shape[0]):
        _, qo, mo = coordinate_slots(ti, b)
        if qo < 0:
            continue
        aa = (0.0625 * (mu[mo] * mu[mo] + mu[mo + 1] * mu[mo + 1] + mu[mo + 2] * mu[mo + 2]))
        if aa > 1.0:
            f = -1.0 / aa
            for k in range(3):
                mu[mo + k] *= f
            for k in range(4):
                Q1[qo + k] = -Q1[qo + k]


@jit
def residual(h, model, Q0, mu, x, q, work, act, ctrl):
    """P^T r(mu) into ``res``; also writes x1, q1, v1, L1, w (into ``u``), the mean rotation
    matrices Rbar = (R0 + R1)/2 (into ``rot``), and for the Newton matrix each body's R1 L1
    (mt) and the moment about its joint point of its subtree's residuals (Nm).  Needs the
    rotation matrices at t_n in R0.  Returns the scaled norm and the scaled round-off floor
    of the translational rows: m (v1 - v0) takes x1 - x0 between positions of size |x|, which
    carries eps |x| 2m/h per body into the subtree sums (a long chain far from its root has a
    floor above a fixed relative tolerance).

    ``work``: the flat scratch (:func:`work_of`), carved here: numba copies every field of
    every array argument into a call, and the ~40 views of the scratch cost more than the
    arithmetic of a small tree that way (the profile of the 2-link arm).  ``model``: a
    :data:`~.em_workspace.TreeModel`."""
    gravity, tf, ti, pf, pi, A, forces = model
    scr = carve(work, ti.shape[0], Q0.shape[0], mu.shape[0])
    em = em_carve(work, ti.shape[0], Q0.shape[0], mu.shape[0])
    jx = jac_carve(work, ti.shape[0], Q0.shape[0], mu.shape[0])
    R, rj = scr.R, scr.rj
    (x0, v0, L0, x1, v1, L1, u, fw, q0, q1, rot, smid, Q1, mu_, dmu, res, rhs, Fs,
     Y, c0, sl, fr) = em
    mt, R0 = jx.mt, jx.R0
    nb = ti.shape[0]
    update_coordinates(ti, Q0, mu, Q1)
    forward_kinematics(tf, ti, Q1, x1, q1, R, rj)
    inv_h = 1.0 / h
    scale = 1e-300
    floor = 0.0
    for b in range(nb):
        # w = tan(phi/2) n of the turn q0* o q1 (body frame); Cayley vector 2 w = h/2 J^-1 (L0+L1)
        c = qmul_t(q0[b, 0], -q0[b, 1], -q0[b, 2], -q0[b, 3], q1[b, 0], q1[b, 1], q1[b, 2],
                   q1[b, 3])
        d = 1.0 / c[0]
        m = tf[b, T_MASS]
        for k in range(3):
            u[b, k] = c[1 + k] * d
            L1[b, k] = 4.0 * inv_h * tf[b, T_J + k] * u[b, k] - L0[b, k]
            v1[b, k] = 2.0 * (x1[b, k] - x0[b, k]) * inv_h - v0[b, k]
            fw[b, k] = m * gravity[k] + A[3 * b + k]  # A: applied loads (kinematics.applied_views)
            Y[b, k] = A[3 * (nb + b) + k]
        for i in range(3):
            for k in range(3):
                rot[b, i, k] = 0.5 * (R0[b, i, k] + R[b, i, k])
        floor += 2.0 * m * inv_h * EPS * (max(abs(x0[b, 0]), abs(x0[b, 1]), abs(x0[b, 2]))
                                          + max(abs(x1[b, 0]), abs(x1[b, 1]), abs(x1[b, 2])))
        scale = max(scale, m * max(abs(v0[b, 0]), abs(v0[b, 1]), abs(v0[b, 2])),
                    max(abs(L0[b, 0]), abs(L0[b, 1]), abs(L0[b, 2])),
                    h * max(abs(fw[b, 0]), abs(fw[b, 1]), abs(fw[b, 2])))
    # springs: discrete-gradient force on each end (pulling the ends together), at the mean arm
    for sp in range(pi.shape[0]):
        a, bb = pi[sp, 0], pi[sp, 1]
        d0 = _spring_vec(pf, sp, a, bb, x0, q0)
        d1 = _spring_vec(pf, sp, a, bb, x1, q1)
        l0 = np.sqrt(d0[0] ** 2 + d0[1] ** 2 + d0[2] ** 2)
        l1 = np.sqrt(d1[0] ** 2 + d1[1] ** 2 + d1[2] ** 2)
        rest = pf[sp, P_REST]
        coef = pf[sp, P_K] * (1.0 - 2.0 * rest / (l0 + l1)) if rest > 0.0 else pf[sp, P_K]
        f = (0.5 * coef * (d0[0] + d1[0]), 0.5 * coef * (d0[1] + d1[1]),
             0.5 * coef * (d0[2] + d1[2]))  # on end a, towards b
        if a >= 0:
            _point_load(pf, sp, P_A, a, f, 1.0, rot, fw, Y)
        if bb >= 0:
            _point_load(pf, sp, P_B, bb, f, -1.0, rot, fw, Y)
    if forces:  # some joint force is held (see step)
        joint_force_loads(tf, ti, A, mu, R0, rot, u, x0, x1, fw, Y)
    if act.shape[0]:
        _actuator_loads(h, tf, ti, (act, ctrl), Q0, mu, R0, em)
    _joint_spring_loads(h, tf, ti, Q0, mu, R0, em)
    # per-body residuals (world): R1 L1 - R0 L0 - h T and m (v1 - v0) - h f
    for b in range(nb):
        m = tf[b, T_MASS]
        a1 = rot_vec(R[b], L1[b, 0], L1[b, 1], L1[b, 2])
        a0 = rot_vec(R0[b], L0[b, 0], L0[b, 1], L0[b, 2])
        for k in range(3):
            Fs[b, 3 + k] = m * (v1[b, k] - v0[b, k]) - h * fw[b, k]
            Fs[b, k] = a1[k] - a0[k] - h * Y[b, k]
            mt[b, k] = a1[k]
    # P^T r: leaves to root, the reactions' arms Rbar a from the centres to the joint points
    rnorm = 0.0
    for i in range(nb - 1, -1, -1):
        b = ti[i, I_ORDER]
        p = ti[b, I_PARENT]
        ac = rot_vec(rot[b], tf[b, T_AC], tf[b, T_AC + 1], tf[b, T_AC + 2])
        f = (Fs[b, 3], Fs[b, 4], Fs[b, 5])
        mc = cross3(ac[0], ac[1], ac[2], f[0], f[1], f[2])
        mhat = (Fs[b, 0] - mc[0], Fs[b, 1] - mc[1], Fs[b, 2] - mc[2])
        em_rows(tf, ti, b, f, mhat, mu, em, jx)
        if p >= 0:
            ap = parent_arm(tf, ti, b, x0, x1, rot)
            mp = cross3(ap[0], ap[1], ap[2], f[0], f[1], f[2])
            for k in range(3):
                Fs[p, 3 + k] += f[k]
                Fs[p, k] += mhat[k] + mp[k]
    for j in range(res.shape[0]):
        rnorm = max(rnorm, abs(res[j]))
    return rnorm / scale, floor / scale


@jit_inline
def servo_state(h, act, a, Q0, mu):
    """(joint, mean coordinate, mean rate) of actuator a over the step of increments mu."""
    o, ov = int(act[a, ACT_Q]), int(act[a, ACT_V])
    return ov, Q0[o] + 0.5 * mu[ov], mu[ov] / h


@jit_inline
def _actuator_loads(h, tf, ti, actuators, Q0, mu, R0, em):
    """Every actuator's force as a revolute torque pair (a prismatic joint's: the slide's
    force pair) doing exact discrete work (into fw, Y).

    The force is taken at the step's mean coordinate c = (c0 + c1)/2 and mean rate
    (c1 - c0)/h.  Its work over the step is then g f (c1 - c0) exactly; for a position servo
    kp g (u - g c)(c1 - c0) is minus the exact change of the spring energy
    kp (u - g c)²/2 (a discrete gradient), and the damper's -kv g² (c1 - c0)²/h is never
    positive: with a fixed target, energy plus servo spring energy never increases, at any
    gain and step.  A saturated force (force_range) is a constant force, whose work is exact
    too, but the spring energy is then no longer the servo's potential.  Inlined into
    :func:`residual`, its one caller (a call copies its 13 arrays field by field).
    ``actuators``: (act, ctrl); ``em``: the step's scratch (``em_carve``), whose mean
    rotations, arms and loads it reads and adds to.
    """
    act, ctrl = actuators
    for a in range(act.shape[0]):
        ov, c, cdot = servo_state(h, act, a, Q0, mu)
        gf = act[a, ACT_GEAR] * actuator_force(act, a, ctrl, c, cdot)
        if gf != 0.0:
            _joint_pair(tf, ti, int(act[a, ACT_BODY]), gf, mu[ov], R0, em)


@jit_inline
def _joint_pair(tf, ti, b, f, mu_b, R0, em):
    """Force f along body b's joint (increment mu_b over the step): a slide's force pair or a
    revolute joint's torque pair, into em's loads fw and Y."""
    if ti[b, I_KIND] == PRISMATIC:
        slide_pair(tf, ti, b, f, 0.0, R0, em.rot, em.u, em.x0, em.x1, em.fw, em.Y)
    else:
        revolute_pair(tf, ti, b, f, mu_b, R0, em.rot, em.u, em.Y)


@jit_inline
def joint_spring_force(h, tf, ti, b, Q0, mu, rotor):
    """(rate offset, force, its derivative per unit of the joint's mu) of the spring, damper
    and armature of body b's joint over the step of increments mu.

    Spring and damper: -k (c - rest) - d (c1 - c0)/h at the mean coordinate
    c = (c0 + c1)/2, as a position servo's (:func:`_actuator_loads`), so its work
    -k (c - rest)(c1 - c0) - d (c1 - c0)²/h is minus the exact change of the spring's energy
    k (c - rest)²/2 less the damper's dissipation, never negative.

    Armature a (a rotor on the joint, kinetic energy a r²/2 of its own rate r): the rotor's
    rate is a state of the step, r1 = 2 (c1 - c0)/h - r0 (the midpoint rule, as the bodies'
    momenta), with r0 = ``rotor`` at the joint's rate offset; it takes the force
    -a (r1 - r0)/h = -2 a ((c1 - c0)/h - r0)/h from the joint, whose work over the step is
    minus the exact change of a r²/2.  A joint that is not revolute or prismatic, or has
    none of these, gives force 0."""
    kind = ti[b, I_KIND]
    ov = ti[b, I_VOFF]
    if kind != REVOLUTE and kind != PRISMATIC:
        return ov, 0.0, 0.0
    k, d = tf[b, T_K], tf[b, T_DAMP]
    c = Q0[ti[b, I_QOFF]] + 0.5 * mu[ov]
    f = -k * (c - tf[b, T_REST]) - d * mu[ov] / h
    df = -(0.5 * k + d / h)
    a = tf[b, T_ARM]
    if a != 0.0:
        f -= 2.0 * a * (mu[ov] / h - rotor[ov]) / h
        df -= 2.0 * a / (h * h)
    return ov, f, df


@jit_inline
def rotor_rates(h, tf, ti, mu, rotor, nu):
    """nu <- the armatures' rotor rates at the step's end, r1 = 2 mu/h - r0 (r0 = ``rotor``),
    on the joints that have one (:func:`joint_spring_force`); nu's other rates are left."""
    for b in range(ti.shape[0]):
        if tf[b, T_ARM] != 0.0:
            ov = ti[b, I_VOFF]
            nu[ov] = 2.0 * mu[ov] / h - rotor[ov]


@jit_inline
def keep_rotor_rates(tf, ti, rotor, nu):
    """nu <- ``rotor`` on the joints that have an armature: their rates are the rotors' state,
    which a scheme keeping mean rates in nu keeps there (:func:`rotor_rates`)."""
    for b in range(ti.shape[0]):
        if tf[b, T_ARM] != 0.0:
            nu[ti[b, I_VOFF]] = rotor[ti[b, I_VOFF]]


@jit_inline
def friction_force(tf, ti, b, slide):
    """The friction force of body b's joint while it slides: -c ``slide`` at its rate offset
    (+-1 the way it slides, 0 while it is held; see :func:`.em_solve.friction_locks`), a
    constant over the step, whose work is exactly -c |c1 - c0| when the joint slides the way
    it is taken to.  0 on a joint without friction."""
    c = tf[b, T_FRIC]
    kind = ti[b, I_KIND]
    if c == 0.0 or (kind != REVOLUTE and kind != PRISMATIC):
        return 0.0
    return -c * slide[ti[b, I_VOFF]]


@jit_inline
def _joint_spring_loads(h, tf, ti, Q0, mu, R0, em):
    """The joint springs', dampers' and sliding friction's torque (force) pairs, doing their
    exact discrete work (:func:`joint_spring_force`, :func:`friction_force`), into fw and Y,
    as an actuator's (:func:`_actuator_loads`)."""
    for b in range(ti.shape[0]):
        ov, f, _ = joint_spring_force(h, tf, ti, b, Q0, mu, em.c0)
        if tf[b, T_FRIC] != 0.0:
            f += friction_force(tf, ti, b, em.sl)
        if f != 0.0:
            _joint_pair(tf, ti, b, f, mu[ov], R0, em)


@jit
def _spring_vec(pf, sp, a, bb, x, q):
    """d = (end b) - (end a), world, with R(q) for the given quaternions."""
    pa = _spring_end(pf, sp, P_A, a, x, q)
    pb = _spring_end(pf, sp, P_B, bb, x, q)
    return pb[0] - pa[0], pb[1] - pa[1], pb[2] - pa[2]


@jit
def _spring_end(pf, sp, col, b, x, q):
    if b < 0:
        return pf[sp, col], pf[sp, col + 1], pf[sp, col + 2]
    c = qmul_t(q[b, 0], q[b, 1], q[b, 2], q[b, 3], 0.0, pf[sp, col], pf[sp, col + 1],
               pf[sp, col + 2])
    c = qmul_t(c[0], c[1], c[2], c[3], q[b, 0], -q[b, 1], -q[b, 2], -q[b, 3])
    return x[b, 0] + c[1], x[b, 1] + c[2], x[b, 2] + c[3]


@jit
def _point_load(pf, sp, col, b, f, sign, rot, fw, Y):
    """A world force sign*f at body b's spring point: into fw, its moment at the mean arm
    Rbar a (Rbar = (R0 + R1)/2 in ``rot``) into Y."""
    a = rot_vec(rot[b], pf[sp, col], pf[sp, col + 1], pf[sp, col + 2])
    m = cross3(a[0], a[1], a[2], sign * f[0], sign * f[1], sign * f[2])
    for k in range(3):
        fw[b, k] += sign * f[k]
        Y[b, k] += m[k]


@jit
def load_start(x, v, L, q, x0, v0, L0, q0, R0):
    """The state at t_n, copied where the residual and the Newton matrix read it."""
    for b in range(x.shape[0]):
        for k in range(3):
            x0[b, k] = x[b, k]
            v0[b, k] = v[b, k]
            L0[b, k] = L[b, k]
        for k in range(4):
            q0[b, k] = q[b, k]
        quat_to_rot(q[b, 0], q[b, 1], q[b, 2], q[b, 3], R0[b])
