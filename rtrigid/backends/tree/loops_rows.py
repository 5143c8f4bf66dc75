"""The loop joints' constraint rows on the tree's coordinates (positions, rates, accelerations),
the projections back onto the constraint manifold, the constrained acceleration, and the
limits held on a mechanism with loops (see :mod:`.loops` for the mathematics).
"""

from collections import namedtuple

import numpy as np
from rtrigid._jit import jit
from rtrigid.backends.tree.kinematics import (
    ACT_GEAR,
    ACT_Q,
    ACT_V,
    I_ORDER,
    I_PARENT,
    I_QOFF,
    I_VOFF,
    actuator_force,
    carry_acceleration,
    coordinate_rates,
    cross3,
    geometry,
    joint_velocities,
    normalize_coordinates,
)
from rtrigid.backends.tree.limits import clamp_limits
from rtrigid.backends.tree.dynamics import add_point_columns, forward_dynamics, mass_matrix
from rtrigid.maths.quat import qmul_t
from rtrigid.maths.dense import k_correction, least_k_norm, max_abs

CLOSED = 1e-13      # position projection stops below this residual (m, rad)
# a loop's float row: anchors, the parent's joint frame (rows e1, e2, u), the child axis, r0
L_AP, L_AC, L_FRAME, L_UC, L_R0, L_WIDTH = 0, 3, 6, 15, 18, 22
# its int row: parent, child, translation row count and directions, rotation kind, first row
L_PARENT, L_CHILD, L_NT, L_T, L_ROT, L_ROW, LI_WIDTH = 0, 1, 2, 3, 6, 7, 8
ROT_NONE, ROT_AXIS, ROT_FRAME = 0, 1, 2
# a joint coupling's row (Model.add_coupling): L_PARENT, L_CHILD the follower's and the
# source's bodies (their joints'), its floats (offset, ratio) at L_AP; no translation rows
ROT_COUPLE = 3

# The groups the loop kernels take: the loops' tables (rows lf, li), the mechanism's rank (-1:
# the free rates' least K-norm instead) and the dense solves' scratch (maths.dense.LoopWork);
# what the rows read and write (the tree's poses and motion, then the rows' own scratch:
# E (3, 3), J6 (6, nv), phi, J, gamma); the mass matrix's scratch (K, and the inertias it
# is assembled from).
LoopTables = namedtuple("LoopTables", ("lf", "li", "rank", "ws"))
RowWork = namedtuple("RowWork", ("x", "q", "R", "rj", "G", "V", "cb", "acc", "E", "J6", "phi",
                                 "J", "gam"))
MassWork = namedtuple("MassWork", ("IA", "I6", "F6", "K"))


@jit
def _body_point(x, R, b, a0, a1, a2):
    """World position of body b's point a (body axes, from the centre; world: a itself)."""
    if b < 0:
        return a0, a1, a2
    return (x[b, 0] + R[b, 0, 0] * a0 + R[b, 0, 1] * a1 + R[b, 0, 2] * a2,
            x[b, 1] + R[b, 1, 0] * a0 + R[b, 1, 1] * a1 + R[b, 1, 2] * a2,
            x[b, 2] + R[b, 2, 0] * a0 + R[b, 2, 1] * a1 + R[b, 2, 2] * a2)


@jit
def _coupling_row(ti, Qg, offset, ratio, a, b, row, phi, J, gam, what):
    """The row q_a - ratio q_b - offset of a coupling of the joints of bodies a and b (one
    coordinate each): constant Jacobian, so no acceleration term."""
    if what & 1:
        phi[row] = Qg[ti[a, I_QOFF]] - ratio * Qg[ti[b, I_QOFF]] - offset
    if what & 2:
        J[row, :] = 0.0
        J[row, ti[a, I_VOFF]] = 1.0
        J[row, ti[b, I_VOFF]] -= ratio
    if what & 4:
        gam[row] = 0.0


@jit
def loop_rows(tf, ti, Qg, nu, lf, li, rw, what):
    """The loops' residual phi (what & 1), Jacobian J (what & 2) and acceleration terms
    gamma (what & 4) at (Qg, nu): the rows of the module's table, into ``rw`` (a
    :data:`RowWork`)."""
    x, q, R, rj, G, V, cb, acc, E, J6, phi, J, gam = rw
    geometry(tf, ti, Qg, x, q, R, rj, G)
    if what & 4:
        joint_velocities(ti, G, nu, V, cb)
        for i in range(ti.shape[0]):  # accelerations at nu' = 0, root to leaves
            b = ti[i, I_ORDER]
            carry_acceleration(G, cb, acc, b, ti[b, I_PARENT])
    for k in range(li.shape[0]):
        pb, cbody = li[k, L_PARENT], li[k, L_CHILD]
        row0, nt, rk = li[k, L_ROW], li[k, L_NT], li[k, L_ROT]
        if rk == ROT_COUPLE:
            _coupling_row(ti, Qg, lf[k, L_AP], lf[k, L_AP + 1], pb, cbody, row0, phi, J, gam,
                          what)
            continue
        pc = _body_point(x, R, cbody, lf[k, L_AC], lf[k, L_AC + 1], lf[k, L_AC + 2])
        pp = _body_point(x, R, pb, lf[k, L_AP], lf[k, L_AP + 1], lf[k, L_AP + 2])
        for i in range(3):  # the parent's joint frame in world axes, rows
            for j in range(3):
                if pb < 0:
                    E[i, j] = lf[k, L_FRAME + 3 * i + j]
                else:
                    E[i, j] = (R[pb, j, 0] * lf[k, L_FRAME + 3 * i]
                               + R[pb, j, 1] * lf[k, L_FRAME + 3 * i + 1]
                               + R[pb, j, 2] * lf[k, L_FRAME + 3 * i + 2])
        nr = 0 if rk == ROT_NONE else (2 if rk == ROT_AXIS else 3)
        if what & 1:
            for r in range(nt):
                t = li[k, L_T + r]
                phi[row0 + r] = (E[t, 0] * (pc[0] - pp[0]) + E[t, 1] * (pc[1] - pp[1])
                                 + E[t, 2] * (pc[2] - pp[2]))
            if rk == ROT_AXIS:
                u0 = _body_point(x, R, cbody, lf[k, L_UC], lf[k, L_UC + 1], lf[k, L_UC + 2])
                uc = (u0[0] - x[cbody, 0], u0[1] - x[cbody, 1], u0[2] - x[cbody, 2])
                phi[row0 + nt] = -(E[1, 0] * uc[0] + E[1, 1] * uc[1] + E[1, 2] * uc[2])
                phi[row0 + nt + 1] = E[0, 0] * uc[0] + E[0, 1] * uc[1] + E[0, 2] * uc[2]
            elif rk == ROT_FRAME:
                if pb < 0:
                    qp = (1.0, 0.0, 0.0, 0.0)
                else:
                    qp = (q[pb, 0], q[pb, 1], q[pb, 2], q[pb, 3])
                b0 = qmul_t(qp[0], qp[1], qp[2], qp[3], lf[k, L_R0], lf[k, L_R0 + 1],
                            lf[k, L_R0 + 2], lf[k, L_R0 + 3])
                e = qmul_t(q[cbody, 0], q[cbody, 1], q[cbody, 2], q[cbody, 3], b0[0], -b0[1],
                           -b0[2], -b0[3])
                s = 2.0 if e[0] >= 0.0 else -2.0
                for r in range(3):
                    phi[row0 + nt + r] = s * (E[r, 0] * e[1] + E[r, 1] * e[2] + E[r, 2] * e[3])
        if what & 2:
            J6[:, :] = 0.0
            add_point_columns(ti, G, rj, cbody, pc, 1.0, J6)
            add_point_columns(ti, G, rj, pb, pc, -1.0, J6)
            for col in range(J.shape[1]):
                for r in range(nt):
                    t = li[k, L_T + r]
                    J[row0 + r, col] = (E[t, 0] * J6[0, col] + E[t, 1] * J6[1, col]
                                        + E[t, 2] * J6[2, col])
                for r in range(nr):
                    J[row0 + nt + r, col] = (E[r, 0] * J6[3, col] + E[r, 1] * J6[4, col]
                                             + E[r, 2] * J6[5, col])
        if what & 4:
            # each side's (omega, alpha, velocity and acceleration of its point at pc)
            wc = ac_ = vc = a_c = (0.0, 0.0, 0.0)
            wp = ap_ = vp = a_p = (0.0, 0.0, 0.0)
            for side in range(2):
                b = cbody if side == 0 else pb
                if b < 0:
                    continue
                r = (pc[0] - rj[b, 0], pc[1] - rj[b, 1], pc[2] - rj[b, 2])
                om = (V[b, 0], V[b, 1], V[b, 2])
                al = (acc[b, 0], acc[b, 1], acc[b, 2])
                wr = cross3(om[0], om[1], om[2], r[0], r[1], r[2])
                ar = cross3(al[0], al[1], al[2], r[0], r[1], r[2])
                wwr = cross3(om[0], om[1], om[2], wr[0], wr[1], wr[2])
                vel = (V[b, 3] + wr[0], V[b, 4] + wr[1], V[b, 5] + wr[2])
                a = (acc[b, 3] + ar[0] + wwr[0], acc[b, 4] + ar[1] + wwr[1],
                     acc[b, 5] + ar[2] + wwr[2])
                if side == 0:
                    wc, ac_, vc, a_c = om, al, vel, a
                else:
                    wp, ap_, vp, a_p = om, al, vel, a
            for r in range(nt):
                t = li[k, L_T + r]
                e = (E[t, 0], E[t, 1], E[t, 2])
                wxt = cross3(wp[0], wp[1], wp[2], e[0], e[1], e[2])
                s = 0.0
                for m in range(3):
                    s += e[m] * (a_c[m] - a_p[m]) + 2.0 * wxt[m] * (vc[m] - vp[m])
                gam[row0 + r] = s
            for r in range(nr):
                e = (E[r, 0], E[r, 1], E[r, 2])
                wxr = cross3(wp[0], wp[1], wp[2], e[0], e[1], e[2])
                s = 0.0
                for m in range(3):
                    s += e[m] * (ac_[m] - ap_[m]) + wxr[m] * (wc[m] - wp[m])
                gam[row0 + nt + r] = s


@jit
def _k_change(J, K, defect, free, rank, ws, delta):
    """delta <- the least K-norm change with J delta = -defect: with ``rank`` >= 0 (the
    mechanism's, every rate free) by :func:`k_correction` in the scratch ``ws``, allocating
    nothing; with rank < 0 by :func:`least_k_norm` on the ``free`` rates.  False if K is
    not positive definite."""
    if rank < 0:
        return least_k_norm(J, K, defect, free, delta, ws)
    ok = k_correction(J, K, defect, rank, ws.L, ws.A, ws.Gm, ws.piv, ws.lam, ws.w, delta)
    for i in range(delta.shape[0]):
        delta[i] = -delta[i]
    return ok


@jit
def _rows_times(J, v, out):
    """out <- J v; |J v|."""
    big = 0.0
    for r in range(J.shape[0]):
        t = 0.0
        for i in range(J.shape[1]):
            t += J[r, i] * v[i]
        out[r] = t
        big = max(big, abs(t))
    return big


@jit
def close_positions(tf, ti, Qg, lt, free, max_iter, rw, mw, dQ, delta, nu0):
    """Newton's method on Phi(Qg) = 0, each correction the least K-norm change of the free
    rates (:func:`_k_change`), retracted to first order (quaternions normalised); the final
    |Phi|, or inf if K is not positive definite on the free rates (``lt.rank`` < 0)."""
    lf, li, rank, ws = lt
    x, q, R, rj, G, V, cb, acc, E, J6, phi, J, gam = rw
    IA, I6, F6, K = mw
    for _ in range(max_iter):
        loop_rows(tf, ti, Qg, nu0, lf, li, rw, 3)
        if max_abs(phi) <= CLOSED:
            return max_abs(phi)
        mass_matrix(tf, ti, Qg, x, q, R, rj, G, IA, I6, F6, K)
        if not _k_change(J, K, phi, free, rank, ws, delta):
            if rank < 0:
                return np.inf
            break
        coordinate_rates(ti, Qg, delta, dQ)
        for i in range(Qg.shape[0]):
            Qg[i] += dQ[i]
        normalize_coordinates(ti, Qg)
    loop_rows(tf, ti, Qg, nu0, lf, li, rw, 1)
    return max_abs(phi)


@jit
def close_rates(tf, ti, Qg, nu, lt, free, rw, mw, delta):
    """nu <- its K-orthogonal projection onto J nu = 0, changing the free rates only
    (:func:`_k_change`); the final |J nu| (phi is overwritten)."""
    lf, li, rank, ws = lt
    x, q, R, rj, G, V, cb, acc, E, J6, phi, J, gam = rw
    IA, I6, F6, K = mw
    loop_rows(tf, ti, Qg, nu, lf, li, rw, 2)
    mass_matrix(tf, ti, Qg, x, q, R, rj, G, IA, I6, F6, K)
    _rows_times(J, nu, phi)
    if not _k_change(J, K, phi, free, rank, ws, delta):
        return np.inf
    for i in range(nu.shape[0]):
        nu[i] += delta[i]
    return _rows_times(J, nu, phi)


@jit
def constrained_acceleration(tables, Qg, nu, applied, lt, passes, rw, mw, out):
    """out <- nu' at (Qg, nu): the tree's free acceleration a_f (articulated recursion)
    projected in the metric K onto J nu' = -gamma, a_f - K^-1 J^T lambda with
    (J K^-1 J^T) lambda = J a_f + gamma (:func:`k_correction`, the mechanism's ``rank``;
    the module docstring's null-space form, without an SVD).  Allocates nothing (scratch
    ``lt.ws``); False if the inertia is singular.  ``tables``, ``applied`` and ``passes`` as
    :func:`~.dynamics.forward_dynamics` takes them; the rows' acceleration scratch ``rw.acc``
    is not the tree's ``passes.acc``."""
    tf, ti = tables.tf, tables.ti
    lf, li, rank, ws = lt
    x, q, R, rj, G = rw.x, rw.q, rw.R, rw.rj, rw.G
    J, gam = rw.J, rw.gam
    IA, I6, F6, K = mw
    ok = forward_dynamics(tables, Qg, nu, applied, x, q, passes, out)
    loop_rows(tf, ti, Qg, nu, lf, li, rw, 6)
    mass_matrix(tf, ti, Qg, x, q, R, rj, G, IA, I6, F6, K)
    bm, c = ws.bm, ws.c
    _rows_times(J, out, bm)
    for r in range(bm.shape[0]):
        bm[r] += gam[r]
    ok &= k_correction(J, K, bm, rank, ws.L, ws.A, ws.Gm, ws.piv, ws.lam, ws.w, c)
    for i in range(out.shape[0]):
        out[i] -= c[i]
    return ok


@jit
def hold_loop_limits(tf, ti, Qg, nu, drive, lt, k, limits, free, rw, mw, corr):
    """The joint limits of a step that ended with k coordinates beyond them (put on them by
    :func:`~.limits.clamp_limits`, recorded in Lv; Qpre: scratch): the loops closed
    with those coordinates held on their limits (more joints pushed past theirs by the
    closure are put on them too, up to 4 rounds), then the rates projected in the metric K
    onto J nu = 0 and the limited joints' targets at once (:func:`limit_rates`): the limits'
    impulse is a joint-space one that respects the loops.  The actuators' work over the
    motion the clamp and the closure took back is taken back (their force at the end of the
    step times it: exact for a constant force), as the tree's ``_hold_limits`` does.  The
    final |Phi| (inf if the rates cannot be projected).  ``drive``: (act, ctrl, awork);
    ``lt``: the loops' tables (its rank is not used); ``limits``: (Lv, Lnew); ``corr``: the
    corrections' scratch (dQ, delta, zero rates, Qpre)."""
    act, ctrl, awork = drive
    lf, li, rank, ws = lt
    Lv, Lnew = limits
    dQ, delta, zero, Qpre = corr
    for i in range(Qg.shape[0]):
        Qpre[i] = Qg[i]
    for a in range(k):  # Lv[3]: how far beyond; Qpre the coordinates before the clamp
        for b in range(ti.shape[0]):
            if ti[b, I_VOFF] == int(Lv[0, a]):
                Qpre[ti[b, I_QOFF]] += Lv[3, a]
    err = np.inf
    for _ in range(4):
        for i in range(free.shape[0]):
            free[i] = True
        for a in range(k):
            free[int(Lv[0, a])] = False
        err = close_positions(tf, ti, Qg, LoopTables(lf, li, -1, ws), free, 12, rw, mw, dQ,
                              delta, zero)
        if err == np.inf:  # singular: the step fails (its caller puts S back)
            return err
        more = clamp_limits(tf, ti, Qg, nu, Lnew)
        if more == 0 or k + more > Lv.shape[1]:
            break
        for a in range(more):
            for r in range(4):
                Lv[r, k + a] = Lnew[r, a]
        k += more
    for i in range(free.shape[0]):
        free[i] = True
    for a in range(act.shape[0]):
        o, ov = int(act[a, ACT_Q]), int(act[a, ACT_V])
        awork[a] += act[a, ACT_GEAR] * actuator_force(act, a, ctrl, Qpre[o], nu[ov]) * (
            Qg[o] - Qpre[o])
    if limit_rates(tf, ti, Qg, nu, lf, li, k, Lv, rw, mw, delta, ws) == np.inf:
        return np.inf
    return err


@jit
def limit_rates(tf, ti, Qg, nu, lf, li, k, Lv, rw, mw, delta, ws):
    """nu <- its K-orthogonal projection onto J nu = 0 with the k limited rates of Lv at their
    targets Lv[2]: the least K-norm change, K^-1 (J^T lambda + S^T mu) -- the limits' impulse
    through the loops (:func:`least_k_norm` on the rows stacked).  With the targets 0 it is
    the projection onto a subspace, so it never adds kinetic energy.  The final |J nu|, or
    inf (nu untouched) if K is not positive definite.  Scratch: ``ws`` (:func:`loop_scratch`;
    the stacked rows in its tail), allocating nothing.  ``rw``, ``mw``: :data:`RowWork`,
    :data:`MassWork`."""
    x, q, R, rj, G, V, cb, acc, E, J6, phi, J, gam = rw
    IA, I6, F6, K = mw
    loop_rows(tf, ti, Qg, nu, lf, li, rw, 2)
    mass_matrix(tf, ti, Qg, x, q, R, rj, G, IA, I6, F6, K)
    m, n = J.shape
    Ja, defect, every = ws.Ja[:m + k], ws.dfc[:m + k], ws.every
    for r in range(m + k):
        for c in range(n):
            Ja[r, c] = J[r, c] if r < m else 0.0
    _rows_times(J, nu, defect)
    for a in range(k):
        j = int(Lv[0, a])
        Ja[m + a, j] = 1.0
        defect[m + a] = nu[j] - Lv[2, a]
    if not least_k_norm(Ja, K, defect, every, delta, ws):
        return np.inf
    for i in range(n):
        nu[i] += delta[i]
    return _rows_times(J, nu, phi)
