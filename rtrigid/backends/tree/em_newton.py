"""The Newton matrix of the jointed ``energy_momentum`` step and its O(n) tree factorization and
solve; :func:`newton_probe` exposes one residual and one Newton solve for studies and tests.
"""

import numpy as np
from rtrigid._jit import inline_copy, jit, jit_inline
from rtrigid.backends.tree.layout import pass_arrays
from rtrigid.backends.tree.kinematics import (
    ACT_BODY,
    ACT_GEAR,
    ACT_HI,
    ACT_KIND,
    ACT_KP,
    ACT_KV,
    ACT_LO,
    CYLINDRICAL,
    FREE6,
    I_KIND,
    I_ORDER,
    I_PARENT,
    I_VOFF,
    MOTOR,
    PLANAR,
    POSITION,
    PRISMATIC,
    REVOLUTE,
    SPHERICAL,
    T_AC,
    T_J,
    T_MASS,
    T_UC,
    actuator_force,
    actuator_views,
    carve,
    cross3,
    nv_of,
    open_buffers,
    quat_to_rot,
    rot_vec,
    state_views,
)
from rtrigid.maths.quat import qmul_t
from rtrigid.backends.tree.em_workspace import em_carve, jac_carve
from rtrigid.backends.tree.layout import TreeModel
from rtrigid.backends.tree.em_residual import (
    first_slide,
    load_start,
    parent_beta,
    residual,
    servo_state,
    slide_axis,
    slide_row,
)


@jit
def actuator_stiffness(h, tf, ti, act, ctrl, Q0, mu, R0, R1, u, kd, Cb):
    """The actuators' terms of the Newton matrix (h/2) dres/dmu: kd <- its joint-space
    diagonal, and the joint rows of E (Cb) get the rest.

    A joint's residual row holds -h g f(mu) G, G = ratio (1 - t beta.a0) / (1 + |beta|²)
    the factor of the torque pair (:func:`_revolute_pair`; ~1).  f varies by
    -g (kp/2 + kv/h) per unit of the joint's mu (0 once saturated), ratio and t with it too;
    beta = R0_p w_p varies with the parent's turn theta as 1/2 (1 - [beta]x + beta beta^T)
    dtheta (see :func:`newton_matrix`).  That last term goes into the joint's E row, which
    multiplies the child's turn = the parent's + the joint's own (n1 dmu), so n1 times it
    is taken off the diagonal again.  Against finite differences: exact on planar chains,
    1e-2 relative off the diagonal on a skew 3-link chain with stiff servos (a term not
    found yet; Newton then converges linearly there, fast).
    """
    for j in range(kd.shape[0]):
        kd[j] = 0.0
    for a in range(act.shape[0]):
        kind = act[a, ACT_KIND]
        ov, c, cdot = servo_state(h, act, a, Q0, mu)
        g = act[a, ACT_GEAR]
        f = actuator_force(act, a, ctrl, c, cdot)
        df = 0.0
        if kind != MOTOR and act[a, ACT_LO] < f < act[a, ACT_HI]:
            kp = act[a, ACT_KP] if kind == POSITION else 0.0
            df = -g * (0.5 * kp + act[a, ACT_KV] / h)
        b = int(act[a, ACT_BODY])
        if ti[b, I_KIND] == PRISMATIC:  # the slide's row holds -h g f exactly (_slide_pair)
            kd[ov] -= 0.5 * h * h * g * df
            continue
        p = ti[b, I_PARENT]
        a0 = rot_vec(R0[b], tf[b, T_UC], tf[b, T_UC + 1], tf[b, T_UC + 2])
        beta = parent_beta(ti, b, R0, u)
        bb = beta[0] * beta[0] + beta[1] * beta[1] + beta[2] * beta[2]
        ba = beta[0] * a0[0] + beta[1] * a0[1] + beta[2] * a0[2]
        half = 0.5 * mu[ov]
        t = np.tan(half)
        if half == 0.0:
            ratio, dratio = 1.0, 0.0
        else:
            sn = np.sin(half)
            ratio = half / t
            dratio = 0.5 * (sn * np.cos(half) - half) / (sn * sn)
        G = ratio * (1.0 - t * ba) / (1.0 + bb)
        dG = (dratio * (1.0 - t * ba) - ratio * ba * 0.5 * (1.0 + t * t)) / (1.0 + bb)
        kd[ov] -= 0.5 * h * h * g * (df * G + f * dG)
        if p < 0 or f == 0.0:
            continue
        # dG/dbeta, then through dbeta = 1/2 (1 - [beta]x + beta beta^T) dtheta
        c = -0.5 * h * h * g * f * ratio / ((1.0 + bb) * (1.0 + bb))
        gb = (c * (-t * a0[0] * (1.0 + bb) - 2.0 * (1.0 - t * ba) * beta[0]),
              c * (-t * a0[1] * (1.0 + bb) - 2.0 * (1.0 - t * ba) * beta[1]),
              c * (-t * a0[2] * (1.0 + bb) - 2.0 * (1.0 - t * ba) * beta[2]))
        gx = cross3(beta[0], beta[1], beta[2], gb[0], gb[1], gb[2])  # (-[beta]x)^T gb
        gbb = gb[0] * beta[0] + gb[1] * beta[1] + gb[2] * beta[2]
        e = (0.5 * (gb[0] + gx[0] + gbb * beta[0]), 0.5 * (gb[1] + gx[1] + gbb * beta[1]),
             0.5 * (gb[2] + gx[2] + gbb * beta[2]))
        n1 = rot_vec(R1[b], tf[b, T_UC], tf[b, T_UC + 1], tf[b, T_UC + 2])
        for k in range(3):
            Cb[b, 0, k] += e[k]
        kd[ov] -= e[0] * n1[0] + e[1] * n1[1] + e[2] * n1[2]


@jit
def _set_column(S, k, a, r):
    """S[:, k] <- the spatial column (a, r x a) of a turn about the world point r."""
    m = cross3(r[0], r[1], r[2], a[0], a[1], a[2])
    for i in range(3):
        S[i, k] = a[i]
        S[3 + i, k] = m[i]


@jit
def _turn_axes(q1, b, mu, mo, out):
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
def newton_matrix(h, tf, ti, q0, mu, work, nq):
    """Blocks of the Newton matrix (h/2) dres/dmu at the last residual evaluation.

    dres/dmu = SL^T B SR + E SR over the tree: SL the joint columns of the residual (axes at
    the mean joint points), SR the motion of the t_{n+1} poses per unit of mu, B per body, E
    per joint row.  Written: B into IA, SL, SR, and E into Cb (a 6x6 block per joint, its
    rows the joint's residual rows).  ``work``: the flat scratch (see :func:`residual`), the
    configuration's size ``nq``.
    """
    scr = carve(work, ti.shape[0], nq, mu.shape[0])
    em = em_carve(work, ti.shape[0], nq, mu.shape[0])
    jx = jac_carve(work, ti.shape[0], nq, mu.shape[0])
    R, rj = scr.R, scr.rj
    IA = scr.IA
    (x0, v0, L0, x1, v1, L1, u, fw, q0_, q1, rot, smid, Q1, mu_, dmu, res, rhs, Fs,
     Y) = em
    mt, Nm, dc, xt, R0, SL, SR, Cb, ucol, pred, M3, aug, kd = jx
    nb = ti.shape[0]
    c = 0.5 * h
    Md, Y3, Z = M3[1], M3[2], M3[3]
    for b in range(nb):
        kind = ti[b, I_KIND]
        ov = ti[b, I_VOFF]
        m = tf[b, T_MASS]
        wb = (u[b, 0], u[b, 1], u[b, 2])
        # c drho/dtheta = R1 J (1 - [w]x + w w^T) R0^T - c [R1 L1]x, theta the world turn of
        # the pose at t1
        for i in range(3):
            for j in range(3):
                Md[i, j] = wb[i] * wb[j]
            Md[i, i] += 1.0
        Md[0, 1] += wb[2]
        Md[0, 2] -= wb[1]
        Md[1, 0] -= wb[2]
        Md[1, 2] += wb[0]
        Md[2, 0] += wb[1]
        Md[2, 1] -= wb[0]
        for i in range(3):
            for j in range(3):
                Y3[i, j] = tf[b, T_J + i] * Md[i, j]
        R0b = R0[b]
        for i in range(3):
            for j in range(3):
                Z[i, j] = Y3[i, 0] * R0b[j, 0] + Y3[i, 1] * R0b[j, 1] + Y3[i, 2] * R0b[j, 2]
        Bb = IA[b]
        R1b = R[b]
        for i in range(3):
            for j in range(3):
                Bb[i, j] = R1b[i, 0] * Z[0, j] + R1b[i, 1] * Z[1, j] + R1b[i, 2] * Z[2, j]
        add_cross(Bb, 0, 0, -c, (mt[b, 0], mt[b, 1], mt[b, 2]))
        # the centre: x_mid x phi with phi = m (v1 - v0) - h f the body's own force residual
        # gives, with y = x_mid - h phi / (4 m), [[- m [y]x [x1]x, m [y]x], [- m [x1]x, m 1]]
        xe = (x1[b, 0], x1[b, 1], x1[b, 2])
        ph = (m * (v1[b, 0] - v0[b, 0]) - h * fw[b, 0], m * (v1[b, 1] - v0[b, 1]) - h * fw[b, 1],
              m * (v1[b, 2] - v0[b, 2]) - h * fw[b, 2])
        y = (0.5 * (x0[b, 0] + xe[0]) - 0.25 * h * ph[0] / m,
             0.5 * (x0[b, 1] + xe[1]) - 0.25 * h * ph[1] / m,
             0.5 * (x0[b, 2] + xe[2]) - 0.25 * h * ph[2] / m)
        yx = y[0] * xe[0] + y[1] * xe[1] + y[2] * xe[2]
        # [y]x [x1]x = x1 y^T - (y.x1) 1
        for i in range(3):
            for j in range(3):
                Bb[i, j] -= m * xe[i] * y[j]
                Bb[3 + i, 3 + j] = 0.0
            Bb[i, i] += m * yx
            Bb[3 + i, 3 + i] = m
        Bb[0, 3], Bb[0, 4], Bb[0, 5] = 0.0, -m * y[2], m * y[1]
        Bb[1, 3], Bb[1, 4], Bb[1, 5] = m * y[2], 0.0, -m * y[0]
        Bb[2, 3], Bb[2, 4], Bb[2, 5] = -m * y[1], m * y[0], 0.0
        Bb[3, 0], Bb[3, 1], Bb[3, 2] = 0.0, m * xe[2], -m * xe[1]
        Bb[4, 0], Bb[4, 1], Bb[4, 2] = -m * xe[2], 0.0, m * xe[0]
        Bb[5, 0], Bb[5, 1], Bb[5, 2] = m * xe[1], -m * xe[0], 0.0
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
            _turn_axes(q1, b, mu, ov + 3, Z)
            for kk in range(3):
                _set_column(SL[b], 3 + kk, (1.0 if kk == 0 else 0.0, 1.0 if kk == 1 else 0.0,
                                            1.0 if kk == 2 else 0.0), xm)
                _set_column(SR[b], 3 + kk, (Z[0, kk], Z[1, kk], Z[2, kk]), r1)
        elif kind == SPHERICAL:
            _turn_axes(q1, b, mu, ov, Z)
            for kk in range(3):
                _set_column(SL[b], kk, (1.0 if kk == 0 else 0.0, 1.0 if kk == 1 else 0.0,
                                        1.0 if kk == 2 else 0.0), rm)
                _set_column(SR[b], kk, (Z[0, kk], Z[1, kk], Z[2, kk]), r1)
        elif kind == REVOLUTE or kind == CYLINDRICAL or kind == PLANAR:
            wt = rot_vec(rot[b], tf[b, T_UC], tf[b, T_UC + 1], tf[b, T_UC + 2])
            n1 = rot_vec(R[b], tf[b, T_UC], tf[b, T_UC + 1], tf[b, T_UC + 2])
            _set_column(SL[b], 0, wt, rm)
            _set_column(SR[b], 0, n1, r1)
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
        first = first_slide(kind)
        if first < 6:
            _slide_columns(tf, ti, b, first, R, u, F, e, jx)


@jit
def _slide_columns(tf, ti, b, first, R1, u, F, e, jx):
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


@jit
def _small_inverse(D, k, aug, out):
    """out[:k,:k] <- D[:k,:k]^-1 (Gauss-Jordan with partial pivoting); False if singular."""
    for i in range(k):
        for j in range(k):
            aug[i, j] = D[i, j]
            aug[i, k + j] = 1.0 if i == j else 0.0
    for col in range(k):
        piv = col
        for r in range(col + 1, k):
            if abs(aug[r, col]) > abs(aug[piv, col]):
                piv = r
        if not (abs(aug[piv, col]) > 0.0) or not np.isfinite(aug[piv, col]):
            return False
        if piv != col:
            for j in range(2 * k):
                aug[col, j], aug[piv, j] = aug[piv, j], aug[col, j]
        inv = 1.0 / aug[col, col]
        for j in range(2 * k):
            aug[col, j] *= inv
        for r in range(k):
            if r != col:
                f = aug[r, col]
                if f != 0.0:
                    for j in range(2 * k):
                        aug[r, j] -= f * aug[col, j]
    for i in range(k):
        for j in range(k):
            out[i, j] = aug[i, k + j]
    return True


@jit
def _inverse3(D, out):
    """out <- D^-1 for a 3x3 D by cofactors; False if singular."""
    c00 = D[1, 1] * D[2, 2] - D[1, 2] * D[2, 1]
    c01 = D[1, 2] * D[2, 0] - D[1, 0] * D[2, 2]
    c02 = D[1, 0] * D[2, 1] - D[1, 1] * D[2, 0]
    det = D[0, 0] * c00 + D[0, 1] * c01 + D[0, 2] * c02
    if not (abs(det) > 0.0) or not np.isfinite(det):
        return False
    inv = 1.0 / det
    out[0, 0] = c00 * inv
    out[1, 0] = c01 * inv
    out[2, 0] = c02 * inv
    out[0, 1] = (D[0, 2] * D[2, 1] - D[0, 1] * D[2, 2]) * inv
    out[1, 1] = (D[0, 0] * D[2, 2] - D[0, 2] * D[2, 0]) * inv
    out[2, 1] = (D[0, 1] * D[2, 0] - D[0, 0] * D[2, 1]) * inv
    out[0, 2] = (D[0, 1] * D[1, 2] - D[0, 2] * D[1, 1]) * inv
    out[1, 2] = (D[0, 2] * D[1, 0] - D[0, 0] * D[1, 2]) * inv
    out[2, 2] = (D[0, 0] * D[1, 1] - D[0, 1] * D[1, 0]) * inv
    return True


@jit_inline
def _spherical_w(Sl, Ib, col, Wb):
    """Wb[col] <- Sl[:, col]^T Ib for a spherical joint's column (e_col, rm x e_col) of SL
    (see :func:`newton_matrix`): the sum of :func:`_tree_factor`'s dense product in the same
    order, its terms with the column's exact zeros (the unit's other two entries and the
    moment's entry col) left out and the unit's 1.0 * x taken as x -- the same value (up to
    the sign of an exact zero), 6 multiply-adds where the dense product takes 18."""
    for r in range(6):
        t = Ib[col, r]
        for m in range(3, 6):
            if m != 3 + col:
                t += Sl[m, col] * Ib[m, r]
        Wb[col, r] = t


@jit
def _tree_factor(ti, SL, SR, Cb, IA, U, W, Dinv, D, aug, kd, dc):
    """Factor SL^T B SR + E SR + diag(kd) - dc (B in IA on entry) leaves to root; False if a
    pivot is singular (dc: the cylindrical and planar slides' rows against their own turn's
    column, see :func:`_slide_columns`).

    The articulated-body recursion with different left and right columns: U = IA SR,
    W = SL^T IA + E, D = W SR + kd (a joint-space diagonal enters the pivot, as armature
    does), and each body passes IA - U D^-1 W on to its parent.
    """
    nb = ti.shape[0]
    for i in range(nb - 1, -1, -1):
        b = ti[i, I_ORDER]
        p = ti[b, I_PARENT]
        kind = ti[b, I_KIND]
        k = nv_of(kind)
        Ib = IA[b]
        Sr = SR[b]
        Sl = SL[b]
        Ub = U[b]
        Wb = W[b]
        Cbb = Cb[b]
        Db = Dinv[b]
        for col in range(k):
            for r in range(6):
                s = 0.0
                for m in range(6):
                    s += Ib[r, m] * Sr[m, col]
                Ub[r, col] = s
            if kind == SPHERICAL:
                _spherical_w(Sl, Ib, col, Wb)
            else:
                for r in range(6):
                    t = 0.0
                    for m in range(6):
                        t += Sl[m, col] * Ib[m, r]
                    Wb[col, r] = t
            for r in range(6):
                Wb[col, r] += Cbb[col, r]
        for r in range(k):
            for col in range(k):
                s = 0.0
                for m in range(6):
                    s += Wb[r, m] * Sr[m, col]
                D[r, col] = s
            D[r, r] += kd[ti[b, I_VOFF] + r]
        if kind == CYLINDRICAL or kind == PLANAR:
            for r in range(1, k):
                D[r, 0] -= dc[b, r]
        if k == 3:
            if not _inverse3(D, Db):
                return False
        elif k > 0 and not _small_inverse(D, k, aug, Db):
            return False
        if p < 0:
            continue
        # IA_p += IA_b - (U D^-1) W, with U D^-1 in aug as scratch
        for r in range(6):
            for col in range(k):
                s = 0.0
                for m in range(k):
                    s += Ub[r, m] * Db[m, col]
                aug[r, col] = s
        Ip = IA[p]
        for r in range(6):
            for col in range(6):
                s = Ib[r, col]
                for m in range(k):
                    s -= aug[r, m] * Wb[m, col]
                Ip[r, col] += s
    return True


@jit
def tree_solve(ti, SL, SR, U, W, Dinv, tau, pA, acc, ucol, out):
    """out <- the solution for joint-space right-hand side tau of the factored matrix."""
    nb = ti.shape[0]
    for b in range(nb):
        for r in range(6):
            pA[b, r] = 0.0
    for i in range(nb - 1, -1, -1):
        b = ti[i, I_ORDER]
        p = ti[b, I_PARENT]
        k = nv_of(ti[b, I_KIND])
        o = ti[b, I_VOFF]
        spherical = ti[b, I_KIND] == SPHERICAL
        for col in range(k):
            s = tau[o + col]
            if spherical:  # SL's column (e_col, rm x e_col): its exact zeros and unit left out
                s -= pA[b, col]
                for m in range(3, 6):
                    if m != 3 + col:
                        s -= SL[b, m, col] * pA[b, m]
            else:
                for m in range(6):
                    s -= SL[b, m, col] * pA[b, m]
            ucol[b, col] = s
        if p < 0:
            continue
        # t = D^-1 ucol once, into acc[b] (free until the second pass sets it from acc[p])
        for col in range(k):
            t = 0.0
            for m in range(k):
                t += Dinv[b, col, m] * ucol[b, m]
            acc[b, col] = t
        for r in range(6):
            s = pA[b, r]
            for col in range(k):
                s += U[b, r, col] * acc[b, col]
            pA[p, r] += s
    for i in range(nb):
        b = ti[i, I_ORDER]
        p = ti[b, I_PARENT]
        k = nv_of(ti[b, I_KIND])
        o = ti[b, I_VOFF]
        for r in range(6):
            acc[b, r] = acc[p, r] if p >= 0 else 0.0
        for col in range(k):
            s = ucol[b, col]
            if p >= 0:
                for m in range(6):
                    s -= W[b, col, m] * acc[p, m]
            pA[b, col] = s  # scratch: pA[b] is not needed any more
        for col in range(k):
            s = 0.0
            for m in range(k):
                s += Dinv[b, col, m] * pA[b, m]
            out[o + col] = s
        for r in range(6):
            s = 0.0
            for col in range(k):
                s += SR[b, r, col] * out[o + col]
            acc[b, r] += s


tree_factor_inline = inline_copy(_tree_factor)
tree_solve_inline = inline_copy(tree_solve)


@jit_inline
def add_cross(M, r, c, s, v):
    """M[r:r+3, c:c+3] += s [v]x, [v]x the cross-product matrix of v."""
    M[r, c + 1] -= s * v[2]
    M[r, c + 2] += s * v[1]
    M[r + 1, c] += s * v[2]
    M[r + 1, c + 2] -= s * v[0]
    M[r + 2, c] -= s * v[1]
    M[r + 2, c + 1] += s * v[0]


@jit
def newton_probe(dt, F, I, mu_in, g, res_out, sol_out):
    """Test hook: from the present state, the residual P^T r(mu_in) into ``res_out`` and the
    Newton matrix (h/2) dres/dmu at mu_in applied inversely to ``g`` into ``sol_out``.

    Returns False if the matrix could not be factored.  Overwrites the scratch only.
    """
    gravity, tf, pf, ti, pi, S, S_prev, A, solver, stats, work, sizes = open_buffers(F, I)
    nb, ns, nq, nv = sizes
    Qg, nu, x, q, v, w, L = state_views(S, nb, nq, nv)
    scr = carve(work, nb, nq, nv)
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = pass_arrays(scr)
    em = em_carve(work, nb, nq, nv)
    jx = jac_carve(work, nb, nq, nv)
    x0, v0, L0, q0, mu, res = em.x0, em.v0, em.L0, em.q0, em.mu, em.res
    mt, Nm, dc, xt, R0, SL, SR, Cb, ucol, pred, M3, aug, kd = jx
    load_start(x, v, L, q, x0, v0, L0, q0, R0)
    for j in range(nv):
        mu[j] = mu_in[j]
    act, ctrl = actuator_views(F, I)[:2]
    residual(dt, TreeModel(gravity, tf, ti, pf, pi, A, True), Qg, mu, x, q, work, act, ctrl)
    for j in range(nv):
        res_out[j] = res[j]
    newton_matrix(dt, tf, ti, q0, mu, work, nq)
    actuator_stiffness(dt, tf, ti, act, ctrl, Qg, mu, R0, scr.R, em.u, kd, Cb)
    if not _tree_factor(ti, SL, SR, Cb, IA, U, W, Dinv, I6, aug, kd, dc):
        return False
    tree_solve(ti, SL, SR, U, W, Dinv, g, pA, acc, ucol, sol_out)
    return True
