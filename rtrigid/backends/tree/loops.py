"""Closed loops on the tree: cut-joint constraints on the tree's coordinates, multipliers
eliminated by the null space of their Jacobian (002 §5), projection after each step (002 §6).

A model's loop-closing joints (:meth:`rtrigid.model.Model.add_loop_joint`) are left out of
the spanning tree; each becomes constraint rows on the tree's coordinates Qg and rates nu.
For a cut joint between a parent body P (or the world) and a child body C, let p_C be the
child's anchor (world), d = p_C - p_P the anchors' separation, and take the constrained
directions fixed in the parent (its joint frame e1, e2, u turned by R_P):

=========== =========================== =============================== =====
kind        translation rows (t . d)    rotation rows                   count
=========== =========================== =============================== =====
spherical   e1, e2, u                   --                              3
revolute    e1, e2, u                   -e2 . u_C, e1 . u_C             5
prismatic   e1, e2                      e1, e2, u on 2 vec(e)           5
cylindrical e1, e2                      -e2 . u_C, e1 . u_C             4
planar      u                           -e2 . u_C, e1 . u_C             3
fixed       e1, e2, u                   e1, e2, u on 2 vec(e)           6
=========== =========================== =============================== =====

(u_C the child's axis in world axes, e = q_C o (q_P o r0)^* the rotation error.)  Their
velocity rows are exact:  t . (v_C(p_C) - v_P(p_C)) for a translation row and r . (omega_C -
omega_P) for a rotation row (the rotation residuals have these derivatives on the
constraint manifold, which is what the position projection's Newton iteration needs), so
J(Q) nu = 0, and differentiating once more with nu' = 0 gives the acceleration terms

    gamma_t = t . (a_C(p_C) - a_P(p_C)) + 2 (omega_P x t) . (v_C(p_C) - v_P(p_C)),
    gamma_r = r . (alpha_C - alpha_P) + (omega_P x r) . (omega_C - omega_P),

with J nu' = -gamma.  The constrained acceleration is the tree's free acceleration a_f
(articulated-body recursion) projected in the metric of the joint-space mass matrix K onto
that affine set: with the singular value decomposition J = U S V^T truncated at the rank r
the mechanism has (rank-revealing: a planar four-bar of spatial revolute joints has five
rows of rank two), N = V[:, r:] spans the null space, p = V_r S_r^-1 U_r^T (-gamma) meets the
rows, and

    nu' = p + N (N^T K N)^-1 N^T K (a_f - p)                     (002 (7)-(11) on the tree).

That is the K-orthogonal projection of a_f onto the affine set, computed without the SVD and
without allocating (:func:`k_correction`): nu' = a_f - K^-1 J^T lambda with
(J K^-1 J^T) lambda = J a_f + gamma, K by Cholesky and J K^-1 J^T by Cholesky with diagonal
pivoting stopped at the rank (redundant rows drop out; J^T lambda is unique although lambda
is not).

After each step the coordinates are put back on the constraint manifold by Newton's
method on the residuals with the least K-norm correction, and the rates by the K-orthogonal
projection onto J nu = 0 (both :func:`least_k_norm`), so the loop closes to round-off.

Under ``energy_momentum`` (:class:`LoopEnergyMomentum`) a spin-free link -- one on ball joints
all anchored on a line through its centre, its inertia symmetric about that line, like the
delta robot's rods -- has its spin about that line charted as a cyclic coordinate
(:func:`spin_links`, :func:`spin_chart`): its momentum is held, the spin is no unknown of the
Newton solve, and energy and closure stay exact.
"""
from __future__ import annotations

import numpy as np

from rtrigid._jit import jit, jit_inline
from rtrigid.backends.tree.kinematics import (
    ACT_GEAR,
    ACT_Q,
    ACT_V,
    I_KIND,
    I_ORDER,
    I_PARENT,
    I_QOFF,
    I_VOFF,
    P_A,
    P_B,
    P_K,
    P_REST,
    SPHERICAL,
    T_AC,
    T_AP,
    T_HI,
    T_J,
    T_LO,
    T_MASS,
    T_R0,
    actuator_force,
    actuator_loads,
    actuator_views,
    applied_views,
    carry_acceleration,
    carve,
    cross3,
    coordinate_rates,
    coordinate_slots,
    geometry,
    joint_velocities,
    normalize_coordinates,
    open_buffers,
    refresh_bodies,
    rk4_stage_input,
    spring_point,
    state_views,
)
from rtrigid.backends.buffers import NONFINITE, OK, STAT_STEPS, all_finite, view
from rtrigid.backends.tree.limits import clamp_limits, has_limits
from rtrigid.backends.tree.nullspace_rk4 import RK4_WEIGHTS
from rtrigid.backends.tree.dynamics import (
    add_point_columns,
    forward_dynamics,
    mass_matrix,
    point_jacobian,
)
from rtrigid.joints import geometry as joint_geometry
from rtrigid.maths.quat import qmul_t, rotate_t

# rows per kind: (translation directions, rotation directions, rotation residual)
_ROWS = {
    "spherical": ((0, 1, 2), (), None),
    "revolute": ((0, 1, 2), (0, 1), "axis"),
    "prismatic": ((0, 1), (0, 1, 2), "frame"),
    "cylindrical": ((0, 1), (0, 1), "axis"),
    "planar": ((2,), (0, 1), "axis"),
    "fixed": ((0, 1, 2), (0, 1, 2), "frame"),
}

RANK_GAP = 1e-9     # a singular value below this fraction of the largest is round-off
SINGULAR = 1e-6     # one between RANK_GAP and this is a near-singular configuration
CLOSED = 1e-13      # position projection stops below this residual (m, rad)
STALLED = 1e-10     # an EM loop step whose residual stalls below this has converged
REFORMS = 3         # Newton matrices formed afresh in one EM loop step, past the first
DG_NOISE = 1e-13    # H's relative round-off, below which the discrete gradient's gap is noise
JACOBI_SWEEPS = 60  # least_k_norm's Jacobi sweeps (a few suffice: convergence is quadratic)


# a loop's float row: anchors, the parent's joint frame (rows e1, e2, u), the child axis, r0
L_AP, L_AC, L_FRAME, L_UC, L_R0, L_WIDTH = 0, 3, 6, 15, 18, 22
# its int row: parent, child, translation row count and directions, rotation kind, first row
L_PARENT, L_CHILD, L_NT, L_T, L_ROT, L_ROW, LI_WIDTH = 0, 1, 2, 3, 6, 7, 8
ROT_NONE, ROT_AXIS, ROT_FRAME = 0, 1, 2


@jit
def _body_point(x, R, b, a0, a1, a2):
    """World position of body b's point a (body axes, from the centre; world: a itself)."""
    if b < 0:
        return a0, a1, a2
    return (x[b, 0] + R[b, 0, 0] * a0 + R[b, 0, 1] * a1 + R[b, 0, 2] * a2,
            x[b, 1] + R[b, 1, 0] * a0 + R[b, 1, 1] * a1 + R[b, 1, 2] * a2,
            x[b, 2] + R[b, 2, 0] * a0 + R[b, 2, 1] * a1 + R[b, 2, 2] * a2)


@jit
def loop_rows(tf, ti, Qg, nu, lf, li, x, q, R, rj, G, V, cb, acc, E, J6, phi, J, gam, what):
    """The loops' residual phi (what & 1), Jacobian J (what & 2) and acceleration terms
    gamma (what & 4) at (Qg, nu): the rows of the module's table.  E: (3, 3), J6: (6, nv)
    scratch."""
    geometry(tf, ti, Qg, x, q, R, rj, G)
    if what & 4:
        joint_velocities(ti, G, nu, V, cb)
        for i in range(ti.shape[0]):  # accelerations at nu' = 0, root to leaves
            b = ti[i, I_ORDER]
            carry_acceleration(G, cb, acc, b, ti[b, I_PARENT])
    for k in range(li.shape[0]):
        pb, cbody = li[k, L_PARENT], li[k, L_CHILD]
        row0, nt, rk = li[k, L_ROW], li[k, L_NT], li[k, L_ROT]
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
def k_correction(J, K, b, rank, L, A, G, piv, lam, w, out):
    """out <- K^-1 J^T lam with (J K^-1 J^T) lam = b solved on ``rank`` pivots: the least
    K-norm change c with J c = b (b consistent with the rows, as the loops' are).  Allocates
    nothing: K = L L^T (Cholesky), A = L^-1 J^T, G = A^T A factored by Cholesky with
    diagonal pivoting stopped after ``rank`` pivots (the mechanism's rank: redundant rows drop
    out), lam on the pivot rows, out = L^-T A lam.  Scratch L (n, n), A (n, m), G (m, m), piv
    (m,) ints, lam (m,), w (n,).  False if K is not positive definite."""
    m, n = J.shape
    if not cholesky(K, L, n):
        return False
    for r in range(m):  # A[:, r] = L^-1 J[r]
        for i in range(n):
            t = J[r, i]
            for k in range(i):
                t -= L[i, k] * A[k, r]
            A[i, r] = t / L[i, i]
    for r in range(m):
        piv[r] = r
        for c in range(r + 1):
            t = 0.0
            for i in range(n):
                t += A[i, r] * A[i, c]
            G[r, c] = t
            G[c, r] = t
    for k in range(rank):  # pivoted Cholesky of G (lower part), rank steps
        best = k
        for j in range(k + 1, m):
            if G[j, j] > G[best, best]:
                best = j
        if best != k:
            piv[k], piv[best] = piv[best], piv[k]
            for c in range(m):
                G[k, c], G[best, c] = G[best, c], G[k, c]
            for r in range(m):
                G[r, k], G[r, best] = G[r, best], G[r, k]
        if not G[k, k] > 0.0:
            return False
        d = np.sqrt(G[k, k])
        G[k, k] = d
        for i in range(k + 1, m):
            G[i, k] /= d
        for i in range(k + 1, m):
            for j in range(k + 1, i + 1):
                G[i, j] -= G[i, k] * G[j, k]
                G[j, i] = G[i, j]
    for k in range(rank):  # C y = b on the pivot rows, then C^T z = y
        t = b[piv[k]]
        for j in range(k):
            t -= G[k, j] * lam[j]
        lam[k] = t / G[k, k]
    _solve_lower_t(G, lam, lam, rank)
    for i in range(n):  # w = A lam (lam in pivot order), out = L^-T w
        t = 0.0
        for k in range(rank):
            t += A[i, piv[k]] * lam[k]
        w[i] = t
    _solve_lower_t(L, w, out, n)
    return True


@jit_inline
def cholesky(K, L, n):
    """L[:n, :n] <- the lower Cholesky factor of K[:n, :n]; False if K is not positive
    definite."""
    for j in range(n):
        s = K[j, j]
        for k in range(j):
            s -= L[j, k] * L[j, k]
        if not s > 0.0:
            return False
        L[j, j] = np.sqrt(s)
        for i in range(j + 1, n):
            t = K[i, j]
            for k in range(j):
                t -= L[i, k] * L[j, k]
            L[i, j] = t / L[j, j]
    return True


@jit
def _solve_lower_t(L, b, out, n):
    """out[:n] <- L[:n, :n]^-T b[:n], L lower triangular (b may be out)."""
    for i in range(n - 1, -1, -1):
        t = b[i]
        for k in range(i + 1, n):
            t -= L[k, i] * out[k]
        out[i] = t / L[i, i]


@jit
def least_k_norm(J, K, defect, free, delta, ws):
    """delta <- the least K-norm change of the ``free`` rates (a mask) with J delta = -defect,
    in the least-squares sense (rank cut at RANK_GAP of the largest singular value, as
    numpy's ``pinv``).  Allocates nothing: the scratch is ``ws``'s tail (see
    :func:`loop_scratch`).  K_f = L L^T (Cholesky), A = J_f L^-T, and the minimum-norm
    solution of A y = -defect from a one-sided Jacobi SVD of A^T (its rows turned until they
    are orthogonal, A = U W with W's rows orthogonal: pinv(A) = W^T diag(1/|w_i|^2) U^T),
    then delta_f = L^-T y.  False (delta untouched) if K_f is not positive definite."""
    m, n = J.shape
    idx, Lf, A, U, g, y, Kf = ws[8], ws[9], ws[10], ws[11], ws[12], ws[13], ws[17]
    nf = 0
    for i in range(n):
        if free[i]:
            idx[nf] = i
            nf += 1
    for a in range(nf):
        for b in range(nf):
            Kf[a, b] = K[idx[a], idx[b]]
    if not cholesky(Kf, Lf, nf):
        return False
    for r in range(m):  # A[r] = L^-1 J_f[r]
        for a in range(nf):
            t = J[r, idx[a]]
            for k in range(a):
                t -= Lf[a, k] * A[r, k]
            A[r, a] = t / Lf[a, a]
    jacobi_rows(A, m, nf, U)
    cut = rank_cut(A, m, nf, g)
    for r in range(m):  # g = diag(1/|w_r|^2) U^T (-defect), rows below the cut dropped
        s = 0.0
        if g[r] > cut:
            for k in range(m):
                s -= U[k, r] * defect[k]
            s /= g[r]
        g[r] = s
    for a in range(nf):  # y = W^T g
        t = 0.0
        for r in range(m):
            t += A[r, a] * g[r]
        y[a] = t
    _solve_lower_t(Lf, y, y, nf)
    for i in range(n):
        delta[i] = 0.0
    for a in range(nf):
        delta[idx[a]] = y[a]
    return True


@jit
def jacobi_rows(A, m, n, U):
    """One-sided Jacobi: the rows of A[:m, :n] turned in pairs until they are orthogonal,
    A_in = U W (U[:m, :m] orthogonal, accumulated; W the rows left in A), so |w_r| are the
    singular values and the rows with |w_r| > 0 span A_in's row space.  In place, allocating
    nothing."""
    for r in range(m):
        for c in range(m):
            U[r, c] = 1.0 if r == c else 0.0
    for _ in range(JACOBI_SWEEPS):
        turned = False
        for p in range(m - 1):
            for o in range(p + 1, m):
                al, be, ga = 0.0, 0.0, 0.0
                for a in range(n):
                    al += A[p, a] * A[p, a]
                    be += A[o, a] * A[o, a]
                    ga += A[p, a] * A[o, a]
                if not abs(ga) > 1e-15 * np.sqrt(al * be):
                    continue
                turned = True
                d = be - al
                if abs(d) > 1e150 * abs(ga):  # t = 1 / (2 zeta), zeta neither squared nor formed
                    t = ga / d
                else:
                    zeta = d / (2.0 * ga)
                    t = (1.0 if zeta >= 0.0 else -1.0) / (abs(zeta)
                                                          + np.sqrt(1.0 + zeta * zeta))
                c = 1.0 / np.sqrt(1.0 + t * t)
                sn = c * t
                for a in range(n):
                    ap, ao = A[p, a], A[o, a]
                    A[p, a] = c * ap - sn * ao
                    A[o, a] = sn * ap + c * ao
                for r in range(m):
                    up, uo = U[r, p], U[r, o]
                    U[r, p] = c * up - sn * uo
                    U[r, o] = sn * up + c * uo
        if not turned:
            break


@jit
def rank_cut(W, m, n, g):
    """g[:m] <- the squared norms of W[:m, :n]'s rows (orthogonal: :func:`jacobi_rows`' W, so
    the squared singular values); the cut below which one is round-off (RANK_GAP of the
    largest singular value, as numpy's ``pinv``)."""
    big = 0.0
    for r in range(m):
        s = 0.0
        for a in range(n):
            s += W[r, a] * W[r, a]
        g[r] = s
        big = max(big, s)
    return RANK_GAP * RANK_GAP * big


@jit
def _max_abs(a):
    out = 0.0
    for i in range(a.shape[0]):
        out = max(out, abs(a[i]))
    return out


@jit
def _k_change(J, K, defect, free, rank, ws, delta):
    """delta <- the least K-norm change with J delta = -defect: with ``rank`` >= 0 (the
    mechanism's, every rate free) by :func:`k_correction` in the scratch ``ws``, allocating
    nothing; with rank < 0 by :func:`least_k_norm` on the ``free`` rates.  False if K is
    not positive definite."""
    if rank < 0:
        return least_k_norm(J, K, defect, free, delta, ws)
    ok = k_correction(J, K, defect, rank, ws[0], ws[1], ws[2], ws[3], ws[4], ws[6], delta)
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
def close_positions(tf, ti, Qg, lf, li, free, rank, ws, max_iter, x, q, R, rj, G, V, cb, acc,
                    E, J6, phi, J, gam, IA, I6, F6, K, dQ, delta, nu0):
    """Newton's method on Phi(Qg) = 0, each correction the least K-norm change of the free
    rates (:func:`_k_change`), retracted to first order (quaternions normalised); the final
    |Phi|, or inf if K is not positive definite on the free rates (``rank`` < 0)."""
    for _ in range(max_iter):
        loop_rows(tf, ti, Qg, nu0, lf, li, x, q, R, rj, G, V, cb, acc, E, J6, phi, J, gam, 3)
        if _max_abs(phi) <= CLOSED:
            return _max_abs(phi)
        mass_matrix(tf, ti, Qg, x, q, R, rj, G, IA, I6, F6, K)
        if not _k_change(J, K, phi, free, rank, ws, delta):
            if rank < 0:
                return np.inf
            break
        coordinate_rates(ti, Qg, delta, dQ)
        for i in range(Qg.shape[0]):
            Qg[i] += dQ[i]
        normalize_coordinates(ti, Qg)
    loop_rows(tf, ti, Qg, nu0, lf, li, x, q, R, rj, G, V, cb, acc, E, J6, phi, J, gam, 1)
    return _max_abs(phi)


@jit
def close_rates(tf, ti, Qg, nu, lf, li, free, rank, ws, x, q, R, rj, G, V, cb, acc, E, J6, phi,
                J, gam, IA, I6, F6, K, delta):
    """nu <- its K-orthogonal projection onto J nu = 0, changing the free rates only
    (:func:`_k_change`); the final |J nu| (phi is overwritten)."""
    loop_rows(tf, ti, Qg, nu, lf, li, x, q, R, rj, G, V, cb, acc, E, J6, phi, J, gam, 2)
    mass_matrix(tf, ti, Qg, x, q, R, rj, G, IA, I6, F6, K)
    _rows_times(J, nu, phi)
    if not _k_change(J, K, phi, free, rank, ws, delta):
        return np.inf
    for i in range(nu.shape[0]):
        nu[i] += delta[i]
    return _rows_times(J, nu, phi)


@jit
def constrained_acceleration(tf, ti, pf, pi, gravity, Qg, nu, f_app, t_app, held, lf, li,
                             rank, ws, x, q, R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6,
                             tau, F6, K, E, J6, phi, J, gam, acc2, out):
    """out <- nu' at (Qg, nu): the tree's free acceleration a_f (articulated recursion)
    projected in the metric K onto J nu' = -gamma, a_f - K^-1 J^T lambda with
    (J K^-1 J^T) lambda = J a_f + gamma (:func:`k_correction`, the mechanism's ``rank``;
    the module docstring's null-space form, without an SVD).  Allocates nothing (scratch
    ``ws``); False if the inertia is singular."""
    ok = forward_dynamics(tf, ti, pf, pi, gravity, Qg, nu, f_app, t_app, held, x, q, R, rj,
                          G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau, out)
    loop_rows(tf, ti, Qg, nu, lf, li, x, q, R, rj, G, V, cb, acc2, E, J6, phi, J, gam, 6)
    mass_matrix(tf, ti, Qg, x, q, R, rj, G, IA, I6, F6, K)
    bm, c = ws[5], ws[7]
    _rows_times(J, out, bm)
    for r in range(bm.shape[0]):
        bm[r] += gam[r]
    ok &= k_correction(J, K, bm, rank, ws[0], ws[1], ws[2], ws[3], ws[4], ws[6], c)
    for i in range(out.shape[0]):
        out[i] -= c[i]
    return ok


@jit
def rk4_steps(n, dt, tf, ti, pf, pi, gravity, S, S_prev, Qg, nu, x, q, v, w, L, f_app, t_app,
              held, act, ctrl, awork, lf, li, rank, ws, R, rj, G, V, cb, IA, U, Dinv, W, pA, acc,
              fext, I6, tau, F6, K, E, J6, phi, J, gam, acc2, Lv, Lnew, Q0, nu0, Qs, nus, dQ, dnu,
              sQ, snu, free, dQr, delta, zero, loads):
    """n RK4 steps with the loops (see :class:`LoopStepper`); the number of steps taken (a
    failed step leaves the state of the step before it).  The actuators act at every stage
    with the stage's coordinates and rates (``loads``: the held joint forces plus theirs);
    their work is RK4's quadrature of their power, as on trees."""
    limited = has_limits(tf, ti)
    for done in range(n):
        S_prev[:] = S
        Q0[:] = Qg
        nu0[:] = nu
        ok = True
        for st in range(4):
            rk4_stage_input(st, dt, Q0, nu0, dQ, dnu, Qs, nus)
            coordinate_rates(ti, Qs, nus, dQ)
            loads[:] = held
            if act.shape[0]:
                actuator_loads(act, ctrl, Qs, nus, loads, awork, dt * RK4_WEIGHTS[st])
            ok &= constrained_acceleration(tf, ti, pf, pi, gravity, Qs, nus, f_app, t_app,
                                           loads, lf, li, rank, ws, x, q, R, rj, G, V, cb,
                                           IA, U, Dinv, W, pA, acc, fext, I6, tau, F6, K, E,
                                           J6, phi, J, gam, acc2, dnu)
            wt = RK4_WEIGHTS[st]
            for i in range(Qg.shape[0]):
                sQ[i] = sQ[i] + wt * dQ[i] if st > 0 else wt * dQ[i]
            for i in range(nu.shape[0]):
                snu[i] = snu[i] + wt * dnu[i] if st > 0 else wt * dnu[i]
        for i in range(Qg.shape[0]):
            Qg[i] = Q0[i] + dt * sQ[i]
        for i in range(nu.shape[0]):
            nu[i] = nu0[i] + dt * snu[i]
        normalize_coordinates(ti, Qg)
        k = clamp_limits(tf, ti, Qg, nu, Lv) if limited else 0
        if k == 0:
            err = close_positions(tf, ti, Qg, lf, li, free, rank, ws, 12, x, q, R, rj, G, V,
                                  cb, acc2, E, J6, phi, J, gam, IA, I6, F6, K, dQr, delta, zero)
            ok &= close_rates(tf, ti, Qg, nu, lf, li, free, rank, ws, x, q, R, rj, G, V, cb,
                              acc2, E, J6, phi, J, gam, IA, I6, F6, K, delta) < np.inf
        else:
            err = hold_loop_limits(tf, ti, Qg, nu, act, ctrl, awork, lf, li, k, Lv, Lnew, free,
                                   ws, x, q, R, rj, G, V, cb, acc2, E, J6, phi, J, gam, IA, I6,
                                   F6, K, dQr, delta, zero, Qs)
        refresh_bodies(tf, ti, Qg, nu, x, q, v, w, L, R, rj, G, V, cb)
        if not (ok and err <= 1e-9 and all_finite(S)):
            S[:] = S_prev
            return done
    return n


XI_HEAD = 3  # the loop scratch's int part starts with m (rows), the loops' count, the rank


def loop_scratch_size(nb, nq, nv, m, nl):
    """(float, int) lengths of the loop stepper's scratch (:func:`carve_loop`)."""
    M = m + nb
    nxf = (nl * L_WIDTH + 4 * nv * nv + nv * m + m * m + 2 * m + 3 * nv + 2 * M * nv + M * M
           + 2 * M + 6 + 9 + 6 * nv + 2 * m + m * nv + 6 * nb + 4 * nb + 5 * nq + 7 * nv)
    return nxf, XI_HEAD + nl * LI_WIDTH + m + 3 * nv


@jit
def carve_loop(xf, xi, nb, nq, nv):
    """The loop stepper's arrays, views of its float scratch ``xf`` and int scratch ``xi``
    (:func:`loop_scratch_size`): (lf, li, rank, ws, F6, K, E, J6, phi, J, gam, acc, Lnew, Q0,
    nu0, Qs, nus, dQ, dnu, sQ, snu, free, dQr, delta, zero, loads) as :func:`rk4_steps` takes
    them.  ``ws``: :func:`k_correction`'s scratch L, A, G, pivots, lambda, a right side, w,
    the correction, then :func:`least_k_norm`'s (rate indices, L_f, A, U, g, y) and
    :func:`limit_rates`' (the stacked rows, their defect, a mask of every rate), then K_f, for
    up to m + nb rows.  From Python call ``carve_loop.py_func`` (see ``buffers.view``)."""
    m, nl, rank = xi[0], xi[1], xi[2]
    M = m + nb
    lf = view(xf, 0, (nl, L_WIDTH))
    o = nl * L_WIDTH
    square = view(xf, o, (4, nv, nv))
    L, Lf, K, Kf = square[0], square[1], square[2], square[3]
    o += 4 * nv * nv
    A, Gm = view(xf, o, (nv, m)), view(xf, o + nv * m, (m, m))
    o += (nv + m) * m
    by_row = view(xf, o, (4, m))
    lam, bm, phi, gam = by_row[0], by_row[1], by_row[2], by_row[3]
    o += 4 * m
    stacked = view(xf, o, (2, M, nv))
    Af, Ja = stacked[0], stacked[1]
    o += 2 * M * nv
    U, g, dfc = view(xf, o, (M, M)), view(xf, o + M * M, (M,)), view(xf, o + M * M + M, (M,))
    o += M * M + 2 * M
    F6, E = view(xf, o, (6,)), view(xf, o + 6, (3, 3))
    o += 15
    J6, J = view(xf, o, (6, nv)), view(xf, o + 6 * nv, (m, nv))
    o += (6 + m) * nv
    acc, Lnew = view(xf, o, (nb, 6)), view(xf, o + 6 * nb, (4, nb))
    o += 10 * nb
    coords = view(xf, o, (5, nq))
    Q0, Qs, dQ, sQ, dQr = coords[0], coords[1], coords[2], coords[3], coords[4]
    rates = view(xf, o + 5 * nq, (10, nv))
    w, c, y, nu0, nus, dnu, snu, delta, zero, loads = (rates[0], rates[1], rates[2], rates[3],
                                                       rates[4], rates[5], rates[6], rates[7],
                                                       rates[8], rates[9])
    li = view(xi, XI_HEAD, (nl, LI_WIDTH))
    o = XI_HEAD + nl * LI_WIDTH
    piv = view(xi, o, (m,))
    masks = view(xi, o + m, (3, nv))
    idx, every, free = masks[0], masks[1], masks[2]
    ws = (L, A, Gm, piv, lam, bm, w, c, idx, Lf, Af, U, g, y, Ja, dfc, every, Kf)
    return (lf, li, rank, ws, F6, K, E, J6, phi, J, gam, acc, Lnew, Q0, nu0, Qs, nus, dQ, dnu,
            sQ, snu, free, dQr, delta, zero, loads)


@jit
def loop_step(n, dt, F, I, xf, xi):
    """``nullspace_rk4`` with the loops: n steps of :func:`rk4_steps` on the Simulation's
    buffers F, I and the loop scratch xf, xi (:func:`carve_loop`); OK, or NONFINITE with the
    state of the step before the one that failed (a singular factorization, a loop that
    would not close, a non-finite state).  Raises nothing and allocates nothing."""
    gravity, tf, pf, ti, pi, S, S_prev, A, solver, stats, work, sizes = open_buffers(F, I)
    nb, ns, nq, nv = sizes
    Qg, nu, x, q, v, w, L = state_views(S, nb, nq, nv)
    f_app, t_app, held = applied_views(A, nb, nv)
    act, ctrl, awork = actuator_views(F, I)
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = carve(work, nb, nq, nv)[:14]
    Lv = carve(work, nb, nq, nv)[23]
    (lf, li, rank, ws, F6, K, E, J6, phi, J, gam, acc2, Lnew, Q0, nu0, Qs, nus, dQ, dnu, sQ,
     snu, free, dQr, delta, zero, loads) = carve_loop(xf, xi, nb, nq, nv)
    done = rk4_steps(n, dt, tf, ti, pf, pi, gravity, S, S_prev, Qg, nu, x, q, v, w, L, f_app,
                     t_app, held, act, ctrl, awork, lf, li, rank, ws, R, rj, G, V, cb, IA, U,
                     Dinv, W, pA, acc, fext, I6, tau, F6, K, E, J6, phi, J, gam, acc2, Lv, Lnew,
                     Q0, nu0, Qs, nus, dQ, dnu, sQ, snu, free, dQr, delta, zero, loads)
    stats[STAT_STEPS] += done
    return OK if done == n else NONFINITE


LOOP_ROW_SIZES = 2


@jit
def loop_rows_step(n, dt, F, I):
    """:func:`loop_step` as a kernel of the contract on a Batch's longer rows
    (:meth:`LoopStepper.rows`): F = the Simulation's F then the loop scratch xf, I = its I,
    the int scratch xi, then len F and len I."""
    m = I.shape[0] - LOOP_ROW_SIZES
    nf, ni = I[m], I[m + 1]
    return loop_step(n, dt, view(F, 0, (nf,)), view(I, 0, (ni,)),
                     view(F, nf, (F.shape[0] - nf,)), view(I, ni, (m - ni,)))


@jit
def hold_loop_limits(tf, ti, Qg, nu, act, ctrl, awork, lf, li, k, Lv, Lnew, free, ws, x, q, R,
                     rj, G, V, cb, acc, E, J6, phi, J, gam, IA, I6, F6, K, dQ, delta, zero, Qpre):
    """The joint limits of a step that ended with k coordinates beyond them (put on them by
    :func:`~.limits.clamp_limits`, recorded in Lv; Qpre: scratch): the loops closed
    with those coordinates held on their limits (more joints pushed past theirs by the
    closure are put on them too, up to 4 rounds), then the rates projected in the metric K
    onto J nu = 0 and the limited joints' targets at once (:func:`limit_rates`): the limits'
    impulse is a joint-space one that respects the loops.  The actuators' work over the
    motion the clamp and the closure took back is taken back (their force at the end of the
    step times it: exact for a constant force), as the tree's ``_hold_limits`` does.  The
    final |Phi| (inf if the rates cannot be projected)."""
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
        err = close_positions(tf, ti, Qg, lf, li, free, -1, ws, 12, x, q, R, rj, G, V, cb, acc,
                              E, J6, phi, J, gam, IA, I6, F6, K, dQ, delta, zero)
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
    if limit_rates(tf, ti, Qg, nu, lf, li, k, Lv, x, q, R, rj, G, V, cb, acc, E, J6, phi, J,
                   gam, IA, I6, F6, K, delta, ws) == np.inf:
        return np.inf
    return err


@jit
def limit_rates(tf, ti, Qg, nu, lf, li, k, Lv, x, q, R, rj, G, V, cb, acc, E, J6, phi, J, gam,
                IA, I6, F6, K, delta, ws):
    """nu <- its K-orthogonal projection onto J nu = 0 with the k limited rates of Lv at their
    targets Lv[2]: the least K-norm change, K^-1 (J^T lambda + S^T mu) -- the limits' impulse
    through the loops (:func:`least_k_norm` on the rows stacked).  With the targets 0 it is
    the projection onto a subspace, so it never adds kinetic energy.  The final |J nu|, or
    inf (nu untouched) if K is not positive definite.  Scratch: ``ws`` (:func:`loop_scratch`;
    the stacked rows in its tail), allocating nothing."""
    loop_rows(tf, ti, Qg, nu, lf, li, x, q, R, rj, G, V, cb, acc, E, J6, phi, J, gam, 2)
    mass_matrix(tf, ti, Qg, x, q, R, rj, G, IA, I6, F6, K)
    m, n = J.shape
    Ja, defect, every = ws[14][:m + k], ws[15][:m + k], ws[16]
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


@jit
def step_chart(ti, Q0, theta, Q, T):
    """Q <- Q0 moved by the chart coordinates theta (nv of them) of :class:`LoopEnergyMomentum`'s
    step: + theta on the plain coordinates, s0 o (1, a)/|(1, a)| with a = theta/2 on each unit
    quaternion (a Cayley chart, the turn 2 atan|a|); T <- d nu / d theta_dot there: the
    identity but on the quaternions' blocks, (1 - [a]x) / (1 + |a|^2), so T = 1 at theta = 0."""
    T[:, :] = 0.0
    for i in range(T.shape[0]):
        T[i, i] = 1.0
    for b in range(ti.shape[0]):
        n, qo, mo = coordinate_slots(ti, b)
        o, ov = ti[b, I_QOFF], ti[b, I_VOFF]
        for k in range(n):
            Q[o + k] = Q0[o + k] + theta[ov + k]
        if qo < 0:
            continue
        a0, a1, a2 = 0.5 * theta[mo], 0.5 * theta[mo + 1], 0.5 * theta[mo + 2]
        aa = a0 * a0 + a1 * a1 + a2 * a2
        s = 1.0 / np.sqrt(1.0 + aa)
        c = qmul_t(Q0[qo], Q0[qo + 1], Q0[qo + 2], Q0[qo + 3], s, a0 * s, a1 * s, a2 * s)
        for k in range(4):
            Q[qo + k] = c[k]
        d = 1.0 / (1.0 + aa)
        T[mo, mo], T[mo, mo + 1], T[mo, mo + 2] = d, a2 * d, -a1 * d
        T[mo + 1, mo], T[mo + 1, mo + 1], T[mo + 1, mo + 2] = -a2 * d, d, a0 * d
        T[mo + 2, mo], T[mo + 2, mo + 1], T[mo + 2, mo + 2] = a1 * d, -a0 * d, d


@jit
def spin_chart(Q0, theta, Q, T, sp):
    """Q, T of :func:`step_chart` changed for the spin-free links ``sp`` (:func:`spin_links`):
    such a link's quaternion is s0 o c(a) o e(psi) with psi = theta_0 its spin about its axis
    u and a = (theta_1 v + theta_2 w)/2 across it (c the Cayley map, e(psi) = (cos psi/2,
    sin psi/2 u); u, v, w orthonormal, body axes), and each of its counter-turned children's
    is e(-psi, u_c) o (its own chart's), u_c the axis in the child's joint frame; so turning
    psi moves no point of the model: the spin is cyclic.  T's columns follow:
    the link's u, R(psi)^T Tc v, R(psi)^T Tc w (Tc of :func:`step_chart`), a child's
    -R(child's own chart)^T u_c in the column of psi."""
    sf, si, cf, ci = sp
    for k in range(si.shape[0]):
        qo, mo = si[k, 1], si[k, 2]
        psi = theta[mo]
        a = (0.5 * (theta[mo + 1] * sf[k, 3] + theta[mo + 2] * sf[k, 6]),
             0.5 * (theta[mo + 1] * sf[k, 4] + theta[mo + 2] * sf[k, 7]),
             0.5 * (theta[mo + 1] * sf[k, 5] + theta[mo + 2] * sf[k, 8]))
        aa = a[0] * a[0] + a[1] * a[1] + a[2] * a[2]
        s = 1.0 / np.sqrt(1.0 + aa)
        c = qmul_t(Q0[qo], Q0[qo + 1], Q0[qo + 2], Q0[qo + 3], s, a[0] * s, a[1] * s, a[2] * s)
        ch, sh = np.cos(0.5 * psi), np.sin(0.5 * psi)
        e = qmul_t(c[0], c[1], c[2], c[3], ch, sh * sf[k, 0], sh * sf[k, 1], sh * sf[k, 2])
        for i in range(4):
            Q[qo + i] = e[i]
        d = 1.0 / (1.0 + aa)
        cp, sn = np.cos(psi), np.sin(psi)
        for col in range(3):
            x = (sf[k, 3 * col], sf[k, 3 * col + 1], sf[k, 3 * col + 2])
            if col > 0:  # Tc x = (x - a x x) / (1 + |a|^2), then turned by -psi about u
                ax = cross3(a[0], a[1], a[2], x[0], x[1], x[2])
                x = (d * (x[0] - ax[0]), d * (x[1] - ax[1]), d * (x[2] - ax[2]))
                ux = cross3(sf[k, 0], sf[k, 1], sf[k, 2], x[0], x[1], x[2])
                du = (1.0 - cp) * (sf[k, 0] * x[0] + sf[k, 1] * x[1] + sf[k, 2] * x[2])
                x = (cp * x[0] - sn * ux[0] + du * sf[k, 0],
                     cp * x[1] - sn * ux[1] + du * sf[k, 1],
                     cp * x[2] - sn * ux[2] + du * sf[k, 2])
            for i in range(3):
                T[mo + i, mo + col] = x[i]
    for j in range(ci.shape[0]):
        psi = theta[si[ci[j, 0], 2]]
        qc, mc, mo = ci[j, 1], ci[j, 2], si[ci[j, 0], 2]
        b = (Q[qc], Q[qc + 1], Q[qc + 2], Q[qc + 3])
        t = qmul_t(b[0], -b[1], -b[2], -b[3], 0.0, cf[j, 0], cf[j, 1], cf[j, 2])
        t = qmul_t(t[0], t[1], t[2], t[3], b[0], b[1], b[2], b[3])  # R(b)^T u_c
        for i in range(3):
            T[mc + i, mo] = -t[i + 1]
        ch, sh = np.cos(0.5 * psi), -np.sin(0.5 * psi)
        e = qmul_t(ch, sh * cf[j, 0], sh * cf[j, 1], sh * cf[j, 2], b[0], b[1], b[2], b[3])
        for i in range(4):
            Q[qc + i] = e[i]


@jit
def chart(ti, Q0, theta, Q, T, sp):
    """Q, T of the EM loop step's chart at Q0: :func:`step_chart`, then :func:`spin_chart`."""
    step_chart(ti, Q0, theta, Q, T)
    spin_chart(Q0, theta, Q, T, sp)


@jit
def lu_factor(A, transpose, LU, piv, n):
    """LU[:n, :n], piv <- the LU factors with partial pivoting of A (or A^T if ``transpose``);
    False if A is singular."""
    for i in range(n):
        for j in range(n):
            LU[i, j] = A[j, i] if transpose else A[i, j]
    for k in range(n):
        best = k
        for i in range(k + 1, n):
            if abs(LU[i, k]) > abs(LU[best, k]):
                best = i
        piv[k] = best
        if best != k:
            for j in range(n):
                LU[k, j], LU[best, j] = LU[best, j], LU[k, j]
        if not LU[k, k] != 0.0:
            return False
        for i in range(k + 1, n):
            LU[i, k] /= LU[k, k]
            for j in range(k + 1, n):
                LU[i, j] -= LU[i, k] * LU[k, j]
    return True


@jit
def lu_solve(LU, piv, b, out, n):
    """out[:n] <- A^-1 b[:n] from :func:`lu_factor`'s LU, piv (b may be out)."""
    for i in range(n):
        out[i] = b[i]
    for k in range(n):
        j = piv[k]
        if j != k:
            out[k], out[j] = out[j], out[k]
    for i in range(n):
        t = out[i]
        for k in range(i):
            t -= LU[i, k] * out[k]
        out[i] = t
    _solve_lower_t(LU.T, out, out, n)  # U x = y


@jit
def spd_solve(K, L, b, out, n):
    """out[:n] <- K^-1 b[:n] by Cholesky (L: scratch; b may be out); False if K is not
    positive definite."""
    if not cholesky(K, L, n):
        return False
    cholesky_solve(L, b, out, n)
    return True


@jit
def cholesky_solve(L, b, out, n):
    """out[:n] <- (L L^T)^-1 b[:n] (b may be out)."""
    for i in range(n):
        t = b[i]
        for k in range(i):
            t -= L[i, k] * out[k]
        out[i] = t / L[i, i]
    _solve_lower_t(L, out, out, n)


@jit
def em_hamiltonian(tf, ti, pf, pi, gravity, Q0, theta, p, f_app, held, Q, T, sp, x, q, R, rj,
                   G, IA, I6, F6, K, hs):
    """H(theta, p) = 1/2 P^T K(Q)^-1 P + V(Q) of :class:`LoopEnergyMomentum` in the step's
    chart at Q0 (Q, T of :func:`chart`; P = T^-T p the rates' momenta K nu): V gravity,
    the point springs, the applied forces at the centres and the held joint forces (as the
    potential -held . theta).  hs: scratch (LU (n, n), L (n, n), P (n,), y (n,), pivots
    (n,)); NaN if T or K is singular."""
    LU, L, P, y, piv = hs
    n = theta.shape[0]
    chart(ti, Q0, theta, Q, T, sp)
    mass_matrix(tf, ti, Q, x, q, R, rj, G, IA, I6, F6, K)  # also the bodies' poses
    if not lu_factor(T, True, LU, piv, n):
        return np.nan
    lu_solve(LU, piv, p, P, n)
    if not spd_solve(K, L, P, y, n):
        return np.nan
    H = 0.0
    for i in range(n):
        H += P[i] * y[i]
    H *= 0.5
    for b in range(ti.shape[0]):
        for k in range(3):
            H -= (tf[b, T_MASS] * gravity[k] + f_app[b, k]) * x[b, k]
    for i in range(n):
        H -= held[i] * theta[i]
    for s in range(pi.shape[0]):
        pa = spring_point(pf, s, P_A, pi[s, 0], x, R)
        pb = spring_point(pf, s, P_B, pi[s, 1], x, R)
        d = np.sqrt((pb[0] - pa[0]) ** 2 + (pb[1] - pa[1]) ** 2 + (pb[2] - pa[2]) ** 2)
        H += 0.5 * pf[s, P_K] * (d - pf[s, P_REST]) ** 2
    return H


@jit
def em_actuator_forces(h, act, ctrl, Q0, theta1, out):
    """out <- the actuators' generalized forces over a step of :class:`LoopEnergyMomentum`
    from Q0 by the chart increments theta1 (an actuated joint's coordinate is plain: theta1
    is its increment), each at the step's mean coordinate and mean rate as the tree scheme
    takes them (``energy_momentum._servo_state``): its work g f theta1 over the step is then
    exact, and a servo's is minus the exact change of its spring energy plus its damper's
    -kv g^2 theta1^2 / h <= 0."""
    for i in range(out.shape[0]):
        out[i] = 0.0
    for a in range(act.shape[0]):
        o, ov = int(act[a, ACT_Q]), int(act[a, ACT_V])
        out[ov] += act[a, ACT_GEAR] * actuator_force(act, a, ctrl, Q0[o] + 0.5 * theta1[ov],
                                                     theta1[ov] / h)


@jit
def em_actuator_work(h, act, ctrl, Q0, theta1, work):
    """work[a] += actuator a's work over the step of :func:`em_actuator_forces`: its force at
    the mean coordinate and rate times g theta1 (exact)."""
    for a in range(act.shape[0]):
        o, ov = int(act[a, ACT_Q]), int(act[a, ACT_V])
        work[a] += act[a, ACT_GEAR] * actuator_force(
            act, a, ctrl, Q0[o] + 0.5 * theta1[ov], theta1[ov] / h) * theta1[ov]


@jit
def chart_mass_matrix(K, T, tmp, out, n):
    """out <- T^T K T, the chart's mass matrix (tmp: (n, n) scratch)."""
    chart_product(K, T, tmp, n, n)
    chart_product(T.T, tmp, out, n, n)


@jit
def chart_product(J, T, out, m, n):
    """out[:m, :n] <- J T (T: (n, n))."""
    for r in range(m):
        for c in range(n):
            t = 0.0
            for k in range(n):
                t += J[r, k] * T[k, c]
            out[r, c] = t


@jit
def row_space_projector(W, nr, n, ra, g, sel):
    """g[:nr] <- the squared norms of W[:nr, :n]'s rows (orthogonal: :func:`jacobi_rows`'
    W), sel[:nr] <- 1 on the ``ra`` largest (nonzero) of them, 0 elsewhere: the rows that
    span the leading ra-dimensional row space; :func:`rank_cut`'s cut."""
    cut = rank_cut(W, nr, n, g)
    for r in range(nr):
        sel[r] = 0
    for _ in range(ra):
        best = -1
        for r in range(nr):
            if sel[r] == 0 and g[r] > 0.0 and (best < 0 or g[r] > g[best]):
                best = r
        if best < 0:
            break
        sel[best] = 1
    return cut


@jit
def em_residual(h, Q0, P0, H0, phi0, z1, tf, ti, pf, pi, gravity, f_app, t_app, held, act, ctrl,
                locks, lf, li, rank, Q, T, sp, x, q, R, rj, G, V, cb, acc, E, J6, phi, J, gam, IA,
                I6, F6, K, hs, rs, sel, out):
    """out <- the residual of one discrete-gradient step of :class:`LoopEnergyMomentum` at
    z1 = (theta1, p1), the step's chart coordinates and their momenta (theta0 = 0, p0 = P0):
    (theta1 - h dH_bar/dp, the momentum equation projected off the rows of Phi_bar,
    Phi(Q(theta1)), theta1 - the locked increments); dH(mid)/dtheta by a fourth-order central
    stencil (none for the spins of ``sp``, which H does not depend on; Phi_bar's columns of the
    spins are dropped), the applied torques' generalized force at the mean configuration, the
    actuators' of :func:`em_actuator_forces`.  ``locks`` (k, 3): rate index and increment of
    each joint held on a limit for the step (a third column is not read); its reaction e_j mu
    joins the rows the momentum equation is projected off, doing the discrete work
    mu theta1_j / h.  The projection: Phi_bar's rows (with the locks') turned orthogonal
    (:func:`jacobi_rows`), the leading ``rank`` (with locks: those of the leading rank + k
    above RANK_GAP of the largest) spanning its row space.  out: 2 nv + m + k.  Allocates
    nothing: hs is :func:`em_hamiltonian`'s scratch, rs = (Tm, Km, L, thm, pm, gP, gQ, tha,
    dP, a, ga, phi1, corr, Jm (m + nb, nv), U (m + nb, m + nb), g (m + nb,), p3 (3,)), sel
    (m + nb,) ints."""
    Tm, Km, L, thm, pm, gP, gQ, tha, dP, a, ga, phi1, corr, Jm, Ub, g, p3 = rs
    n = P0.shape[0]
    m = phi.shape[0]
    for i in range(n):
        thm[i] = 0.5 * z1[i]
        pm[i] = 0.5 * (P0[i] + z1[n + i])
    em_hamiltonian(tf, ti, pf, pi, gravity, Q0, thm, pm, f_app, held, Q, T, sp, x, q, R, rj, G,
                   IA, I6, F6, K, hs)  # leaves K, T at the midpoint
    Tm[:, :] = T
    chart_mass_matrix(K, Tm, L, Km, n)  # at the midpoint
    if not spd_solve(Km, L, pm, gP, n):
        out[:] = np.nan
        return
    nsp = sp[1].shape[0]
    for i in range(n):
        gQ[i] = 0.0
        tha[i] = thm[i]
    for i in range(n):
        cyclic = False  # the spins, which H does not depend on
        for k in range(nsp):
            cyclic |= sp[1][k, 2] == i
        if cyclic:
            continue
        eps = 1e-3 * max(1.0, abs(thm[i]))
        gs = 0.0
        for st in range(4):
            kk = (1.0, -1.0, 2.0, -2.0)[st]
            wk = (8.0, -8.0, -1.0, 1.0)[st]
            tha[i] = thm[i] + kk * eps
            gs += wk * em_hamiltonian(tf, ti, pf, pi, gravity, Q0, tha, pm, f_app, held, Q, T,
                                      sp, x, q, R, rj, G, IA, I6, F6, K, hs)
        tha[i] = thm[i]
        gQ[i] = gs / (12.0 * eps)
    dz2 = 0.0
    dq2 = 0.0
    for i in range(n):
        dP[i] = z1[n + i] - P0[i]
        dq2 += z1[i] * z1[i]
    for i in range(n):
        dz2 += dP[i] * dP[i]
    dz2 += dq2
    if dz2 > 0.0:
        H1 = em_hamiltonian(tf, ti, pf, pi, gravity, Q0, z1[:n], z1[n:], f_app, held, Q, T, sp,
                            x, q, R, rj, G, IA, I6, F6, K, hs)
        num = H1 - H0
        for i in range(n):
            num -= gQ[i] * z1[i] + gP[i] * dP[i]
        # a gap within H's round-off is not corrected: near rest (dz ~ 1e-8, a servo
        # holding its target) that noise over |dz|^2 swamped the gradient
        if abs(num) > DG_NOISE * (abs(H0) + abs(H1)):
            c = num / dz2
            for i in range(n):
                gQ[i] += c * z1[i]
                gP[i] += c * dP[i]
    # Phi(Q1), then its chart Jacobian J(Qm) Tm at the midpoint (the rates are not used)
    chart(ti, Q0, z1[:n], Q, T, sp)
    loop_rows(tf, ti, Q, z1, lf, li, x, q, R, rj, G, V, cb, acc, E, J6, phi, J, gam, 1)
    phi1[:] = phi
    chart(ti, Q0, thm, Q, T, sp)
    loop_rows(tf, ti, Q, z1, lf, li, x, q, R, rj, G, V, cb, acc, E, J6, phi, J, gam, 2)
    chart_product(J, Tm, Jm, m, n)
    if dq2 > 0.0:
        for r in range(m):
            t = phi1[r] - phi0[r]
            for c2 in range(n):
                t -= Jm[r, c2] * z1[c2]
            corr[r] = t
        for r in range(m):
            for c2 in range(n):
                Jm[r, c2] += corr[r] * z1[c2] / dq2
    for k in range(nsp):  # the spins are no unknowns (their momenta are held), nor the rows'
        for r in range(m):
            Jm[r, sp[1][k, 2]] = 0.0
    for i in range(n):
        a[i] = dP[i] + h * gQ[i]
    p3[:] = 0.0
    for b in range(ti.shape[0]):  # the applied torques' generalized force at the midpoint
        if t_app[b, 0] != 0.0 or t_app[b, 1] != 0.0 or t_app[b, 2] != 0.0:
            point_jacobian(tf, ti, Q, b, p3, x, q, R, rj, G, J6)
            for c2 in range(n):
                t = 0.0
                for k in range(n):
                    t += (J6[3, k] * t_app[b, 0] + J6[4, k] * t_app[b, 1]
                          + J6[5, k] * t_app[b, 2]) * Tm[k, c2]
                a[c2] -= h * t
    if act.shape[0]:
        em_actuator_forces(h, act, ctrl, Q0, z1[:n], ga)
        for i in range(n):
            a[i] -= h * ga[i]
    nk = locks.shape[0]
    for r in range(nk):  # the locked joints' rows join the loops'
        for c2 in range(n):
            Jm[m + r, c2] = 0.0
        Jm[m + r, int(locks[r, 0])] = 1.0
    jacobi_rows(Jm, m + nk, n, Ub)
    ra = rank
    if nk:
        cut = row_space_projector(Jm, m + nk, n, min(rank + nk, m + nk, n), g, sel)
        ra = 0
        for r in range(m + nk):
            if sel[r] and g[r] > cut:
                ra += 1
    row_space_projector(Jm, m + nk, n, ra, g, sel)
    for i in range(n):
        out[i] = z1[i] - h * gP[i]
        out[n + i] = a[i]
    for r in range(m + nk):  # a projected off the row space
        if sel[r]:
            t = 0.0
            for c2 in range(n):
                t += Jm[r, c2] * a[c2]
            t /= g[r]
            for c2 in range(n):
                out[n + c2] -= Jm[r, c2] * t
    for r in range(m):
        out[2 * n + r] = phi1[r]
    for r in range(nk):
        out[2 * n + m + r] = z1[int(locks[r, 0])] - locks[r, 1]


NO_SPINS = (np.zeros((0, 9)), np.zeros((0, 3), np.int64), np.zeros((0, 3)),
            np.zeros((0, 3), np.int64))


def spin_links(tree, loops):
    """The spin-free links of a tree with loop joints, as :func:`spin_chart`'s tables
    (sf, si, cf, ci): each body on a spherical joint whose every attachment (its joint, its
    tree children's joints, the loop joints at it) is a spherical joint anchored on one line
    through its centre of mass, with its inertia symmetric about that line, and no point
    spring on it (the delta robot's rods).  Turning such a link about the line (its tree
    children on spherical joints turned back) moves no point of the model, so its spin is a
    cyclic coordinate.  sf: (u, v, w) per link, u the line, body axes; si: (body, quaternion
    offset, rate offset); cf: u in each tree child's joint frame; ci: (link row, the child's
    quaternion offset, rate offset)."""
    tf, ti = tree.tf, tree.ti
    sph = SPHERICAL
    sf, si, cf, ci = [], [], [], []
    sprung = set(tree.pi.ravel().tolist())
    for b in range(ti.shape[0]):
        if ti[b, I_KIND] != sph or b in sprung:
            continue
        children = [c for c in range(ti.shape[0]) if ti[c, I_PARENT] == b]
        points = [tf[b, T_AC:T_AC + 3]] + [tf[c, T_AP:T_AP + 3] for c in children]
        kinds = [ti[c, I_KIND] for c in children]
        for lp in loops:
            for side, at in ((lp.parent, lp.anchor_parent), (lp.child, lp.anchor_child)):
                if side == b:
                    points.append(np.asarray(at, float))
                    kinds.append(sph if lp.joint.kind == "spherical" else -1)
        if len(points) < 2 or any(k != sph for k in kinds):
            continue
        far = max(points, key=np.linalg.norm)
        scale = float(np.linalg.norm(far))
        if scale == 0.0:
            continue
        u = far / scale
        if any(np.linalg.norm(np.cross(pt, u)) > 1e-12 * scale for pt in points):
            continue
        Jb = tf[b, T_J:T_J + 3]
        ax = float(u @ (Jb * u))
        across = 0.5 * (float(np.sum(Jb)) - ax)
        sym = across * np.eye(3) + (ax - across) * np.outer(u, u)
        if np.max(np.abs(np.diag(Jb) - sym)) > 1e-12 * np.max(Jb):
            continue
        v = np.cross(u, np.eye(3)[int(np.argmin(np.abs(u)))])
        v /= np.linalg.norm(v)
        k = len(si)
        sf.append(np.concatenate([u, v, np.cross(u, v)]))
        n, qo, wo = coordinate_slots.py_func(ti, b)
        si.append((b, qo, wo))
        for c in children:
            r0 = tf[c, T_R0:T_R0 + 4]
            n, qc, wc = coordinate_slots.py_func(ti, c)
            cf.append(rotate_t.py_func(*r0, *u, -1.0))
            ci.append((k, qc, wc))
    if not si:
        return NO_SPINS
    return (np.array(sf), np.array(si, np.int64), np.array(cf).reshape(-1, 3),
            np.array(ci, np.int64).reshape(-1, 3))


def _raising(err):
    """err, or ``LinAlgError`` for the inf the compiled projections return when the mass
    matrix is not positive definite on the rates they may change (the Python-side calls
    report it as numpy's factorizations do)."""
    if err == np.inf:
        raise np.linalg.LinAlgError("the joint-space inertia is not positive definite on the "
                                    "free rates")
    return err


class Loop:
    """One cut joint as constraint rows: its kind, bodies and joint frame in the parent."""

    def __init__(self, joint):
        self.joint = joint
        self.name = joint.name
        g = joint_geometry(joint)
        self.parent, self.child = joint.parent, joint.child
        self.anchor_parent, self.anchor_child = g.anchor_parent, g.anchor_child
        self.frame = np.array([g.e1_parent, g.e2_parent, g.axis_parent])  # rows, parent axes
        self.axis_child = g.axis_child
        self.r0 = g.r0
        self.trans, self.rots, self.rot_kind = _ROWS[joint.kind]
        self.m = len(self.trans) + len(self.rots)


class LoopClosure:
    """The loop constraints of a model on its tree (:class:`~.kinematics.Tree`): residuals,
    Jacobian, acceleration terms, constrained accelerations and projections."""

    def __init__(self, tree, loop_joints, scratch):
        self.tree = tree
        self.loops = [Loop(j) for j in loop_joints]
        self.m = sum(lp.m for lp in self.loops)
        self.nv = tree.nv
        nb = tree.nb
        self._x, self._q = np.zeros((nb, 3)), np.zeros((nb, 4))
        self._scr = scratch
        self._M = np.zeros((tree.nv, tree.nv))
        self._F6 = np.zeros(6)
        self._acc = np.zeros((nb, 6))
        self._dQ = np.zeros(tree.nq)
        self.rank = None  # the mechanism's constraint rank, fixed by :meth:`assemble`
        # the compiled rows' tables (see loop_rows)
        self.lf = np.zeros((len(self.loops), L_WIDTH))
        self.li = np.zeros((len(self.loops), LI_WIDTH), np.int64)
        row = 0
        for k, lp in enumerate(self.loops):
            f, i = self.lf[k], self.li[k]
            f[L_AP:L_AP + 3], f[L_AC:L_AC + 3] = lp.anchor_parent, lp.anchor_child
            f[L_FRAME:L_FRAME + 9] = lp.frame.ravel()
            f[L_UC:L_UC + 3], f[L_R0:L_R0 + 4] = lp.axis_child, lp.r0
            i[L_PARENT], i[L_CHILD], i[L_NT] = lp.parent, lp.child, len(lp.trans)
            i[L_T:L_T + len(lp.trans)] = lp.trans
            i[L_ROT] = {None: ROT_NONE, "axis": ROT_AXIS, "frame": ROT_FRAME}[lp.rot_kind]
            i[L_ROW] = row
            row += lp.m
        self._E, self._J6 = np.zeros((3, 3)), np.zeros((6, tree.nv))
        self._phi, self._J, self._gam = np.zeros(self.m), np.zeros((self.m, self.nv)), \
            np.zeros(self.m)
        self._nu0 = np.zeros(tree.nv)
        # the dense solves' scratch (k_correction's, least_k_norm's: carve_loop's ws)
        self.ws = self.scratch()[1][3]

    def scratch(self):
        """(xf, xi, arrays): a new loop scratch for this closure's tree -- the float and
        int buffers of :func:`carve_loop`, its sizes, tables and rank written in, the masks
        set to every rate -- and the arrays carved from it."""
        tree = self.tree
        nxf, nxi = loop_scratch_size(tree.nb, tree.nq, tree.nv, self.m, len(self.loops))
        xf, xi = np.zeros(nxf), np.zeros(nxi, np.int64)
        xi[:XI_HEAD] = self.m, len(self.loops), -1 if self.rank is None else self.rank
        arrays = carve_loop.py_func(xf, xi, tree.nb, tree.nq, tree.nv)
        arrays[0][:], arrays[1][:] = self.lf, self.li
        arrays[3][16][:] = 1
        arrays[21][:] = 1
        return (xf, xi), arrays

    def rows(self, Qg, nu=None, what=7):
        """(phi, J, gamma) at (Qg, nu), computed as ``what`` asks (bits 1, 2, 4; see
        :func:`loop_rows`); views of scratch, valid until the next call."""
        R, rj, G, V, cb = self._scr[:5]
        loop_rows(self.tree.tf, self.tree.ti, Qg, self._nu0 if nu is None else nu, self.lf,
                  self.li, self._x, self._q, R, rj, G, V, cb, self._acc, self._E, self._J6,
                  self._phi, self._J, self._gam, what)
        return self._phi, self._J, self._gam

    # -- kinematics of the cut joints -------------------------------------------------------
    def residual(self, Qg):
        """Phi(Qg): every loop's residual rows (see the module's table); a new array."""
        return self.rows(Qg, what=1)[0].copy()

    def jacobian(self, Qg):
        """J(Qg): (m, nv), J nu = the rows' rates; a new array."""
        return self.rows(Qg, what=2)[1].copy()

    def mass_matrix(self, Qg):
        R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6 = self._scr[:13]
        mass_matrix(self.tree.tf, self.tree.ti, Qg, self._x, self._q, R, rj, G, IA, I6,
                    self._F6, self._M)
        return self._M

    # -- the null space ---------------------------------------------------------------------
    def _free(self, free):
        """The mask of the rates a projection may change, as the kernels take it (int64)."""
        return np.ones(self.nv, np.int64) if free is None else np.asarray(free, np.int64)

    def acceleration(self, Qg, nu, loads, out):
        """out <- nu' = p + N (N^T K N)^-1 N^T K (a_f - p) (the module's docstring, computed
        as :func:`constrained_acceleration` does); False if the tree's inertia is singular."""
        tree = self.tree
        f_app, t_app, held = loads
        return constrained_acceleration(
            tree.tf, tree.ti, tree.pf, tree.pi, tree.gravity, Qg, nu, f_app, t_app, held,
            self.lf, self.li, self.rank, self.ws, self._x, self._q, *self._scr[:14], self._F6,
            self._M, self._E, self._J6, self._phi, self._J, self._gam, self._acc, out)

    def retract(self, Qg, delta):
        """Qg moved by the rate-space increment delta (first order), quaternions normalised."""
        coordinate_rates(self.tree.ti, Qg, delta, self._dQ)
        Qg += self._dQ
        normalize_coordinates(self.tree.ti, Qg)

    def _common(self):
        R, rj, G, V, cb, IA = self._scr[:6]
        return (self._x, self._q, R, rj, G, V, cb, self._acc, self._E, self._J6, self._phi,
                self._J, self._gam, IA, self._scr[12], self._F6, self._M)

    def close_positions(self, Qg, free=None, max_iter=12):
        """Newton's method on Phi(Qg) = 0 with least K-norm corrections of the free rates
        (a bool mask; None: all); the final |Phi|.  ``LinAlgError`` if the mass matrix is not
        positive definite on the free rates."""
        return _raising(close_positions(self.tree.tf, self.tree.ti, Qg, self.lf, self.li,
                                        self._free(free), -1, self.ws, max_iter, *self._common(),
                                        self._dQ, np.zeros(self.nv), self._nu0))

    def close_rates(self, Qg, nu, free=None):
        """nu <- its K-orthogonal projection onto J nu = 0 (changing only the free rates);
        the final |J nu|; ``LinAlgError`` as :meth:`close_positions`."""
        return _raising(close_rates(self.tree.tf, self.tree.ti, Qg, nu, self.lf, self.li,
                                    self._free(free), -1, self.ws, *self._common(),
                                    np.zeros(self.nv)))

    def reactions(self, Qg, dnu, f_app, t_app):
        """The loop joints' reactions when they change the tree's accelerations by dnu
        (nudot - the tree's own): K dnu = J^T lambda gives the multipliers lambda, the
        least-norm ones where rows are redundant (there the reactions are statically
        indeterminate); each loop's rows are a force lambda_t t at the child's anchor p_C and
        a torque lambda_r r on the child, their opposites on the parent, added to the loads
        f_app (at the centres) and t_app in place.  Returns per loop joint (force, torque
        about p_C) on its child, world axes."""
        K = self.mass_matrix(Qg).copy()
        J = self.jacobian(Qg)  # also leaves the bodies' poses in _x and R (scratch)
        lam = np.linalg.lstsq(J.T, K @ dnu, rcond=RANK_GAP)[0]
        x, R = self._x, self._scr[0]
        out = []
        row = 0
        for lp in self.loops:
            pc = x[lp.child] + R[lp.child] @ lp.anchor_child
            E = lp.frame if lp.parent < 0 else lp.frame @ R[lp.parent].T  # rows, world
            nt = len(lp.trans)
            force = lam[row:row + nt] @ E[list(lp.trans)]
            torque = lam[row + nt:row + lp.m] @ E[:lp.m - nt]
            row += lp.m
            out.append((force, torque))
            for b, sign in ((lp.child, 1.0), (lp.parent, -1.0)):
                if b >= 0:
                    f_app[b] += sign * force
                    t_app[b] += sign * (torque + np.cross(pc - x[b], force))
        return out

    # -- mobility -----------------------------------------------------------------------------
    def mobility_at(self, Qg):
        """(singular values of J at Qg, its numerical rank)."""
        s = np.linalg.svd(self.jacobian(Qg), compute_uv=False)
        if s.size == 0 or s[0] == 0.0:
            return s, 0
        return s, int(np.sum(s > RANK_GAP * s[0]))

    def assemble(self, Qg):
        """Close the loops from Qg (in place) and fix the mechanism's rank; ``ValueError``
        if they cannot be closed, if the mechanism is locked (zero mobility) or if Qg is a
        singular configuration (the rank of J differs from that of nearby closed ones)."""
        err = self.close_positions(Qg, max_iter=50)
        if not err <= 1e-9:
            raise ValueError(f"loop joints: cannot close the loops {self.names()} from the "
                             f"initial coordinates (residual {err:.3g}); set joint positions "
                             "near a closed configuration")
        s, r = self.mobility_at(Qg)
        dof = self.nv - r
        if dof == 0:
            raise ValueError(f"loop joints: the mechanism is locked (zero mobility): its "
                             f"{self.nv} tree rates are all fixed by the {self.m} loop rows "
                             f"of {self.names()} (rank {r})")
        near = [v for v in s if SINGULAR * s[0] >= v > RANK_GAP * s[0]]
        # a redundant row stays redundant at nearby closed configurations; a singular
        # configuration is isolated: move along each free direction, close, compare ranks
        N = np.linalg.svd(self.jacobian(Qg))[2][r:].T
        ranks = []
        for k in range(N.shape[1]):
            Qn = Qg.copy()
            self.retract(Qn, 1e-3 * N[:, k] / max(1e-300, np.max(np.abs(N[:, k]))))
            if self.close_positions(Qn, max_iter=50) <= 1e-9:
                ranks.append(self.mobility_at(Qn)[1])
        if near or any(rk != r for rk in ranks):
            raise ValueError(f"loop joints: the configuration is singular for "
                             f"{self.names()} (constraint rank {r} here, "
                             f"{sorted(set(ranks))} nearby; singular values "
                             f"{np.array2string(s / s[0], precision=2)} of the largest); "
                             "start the mechanism away from its dead points")
        self.rank = r
        return dof

    def names(self):
        return [lp.name for lp in self.loops]


class LoopStepper:
    """``nullspace_rk4`` on a tree with loop joints: classical RK4 on (Qg, nu) with the
    constrained accelerations of :meth:`LoopClosure.acceleration` at every stage, then the
    quaternions normalised (002 (63)), the loops closed at position level and the rates
    projected onto J nu = 0.  The kernel signature ``(n, dt, F, I) -> status`` of
    :mod:`rtrigid.backends`, on the backend's buffers and the stepper's loop scratch: one
    compiled call (:func:`loop_step`, :func:`rk4_steps`) runs the n steps, raising nothing
    and allocating nothing (the dense factorizations of :func:`k_correction` and
    :func:`least_k_norm` work in the scratch, carved once; a singular one fails the step:
    NONFINITE, the state of the step before).  Actuators and held joint forces enter every
    stage's constrained acceleration.  Joint limits: a step that ends with a coordinate
    beyond its limit puts it on the limit, closes the loops with it held there, and projects
    the rates onto the loops and the limit's target at once (:func:`hold_loop_limits`)."""

    def __init__(self, backend, closure):
        self.be = backend
        self.closure = closure
        (self._xf, self._xi), _ = closure.scratch()

    def __call__(self, n, dt, F, I):
        return loop_step(n, dt, F, I, self._xf, self._xi)

    def rows(self, F, I):
        """This step as a kernel of the contract on longer rows, for :class:`rtrigid.Batch`:
        ``(step, Fx, Ix)`` with ``step(n, dt, Fx, Ix)`` = :func:`loop_rows_step`, Fx = F
        followed by the loop scratch (the tables lf, the dense solves' scratch, the RK4
        stages), Ix = I followed by the int scratch (sizes, rank, li, pivots, masks) and
        len F, len I.  The same compiled :func:`loop_step` runs on a copy's row as on the
        Simulation's buffers."""
        Fx = np.concatenate([F, self._xf])
        Ix = np.concatenate([I, self._xi, [len(F), len(I)]]).astype(np.int64)
        return loop_rows_step, Fx, Ix
