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
    I_KIND,
    I_ORDER,
    I_PARENT,
    I_VOFF,
    MOTOR,
    PLANAR,
    POSITION,
    PRISMATIC,
    SPHERICAL,
    T_J,
    T_MASS,
    T_UC,
    actuator_force,
    actuator_views,
    carve,
    cross3,
    nv_of,
    open_buffers,
    rot_vec,
    state_views,
)
from rtrigid.backends.tree.em_workspace import em_carve, jac_carve
from rtrigid.backends.tree.layout import TreeModel
from rtrigid.backends.tree.em_residual import (
    load_start,
    residual,
    joint_spring_force,
    servo_state,
)
from rtrigid.backends.tree.kinds import em_columns, parent_beta


@jit
def actuator_stiffness(h, tf, ti, act, ctrl, Q0, mu, rotor, frames, kd, Cb):
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
    found yet; Newton then converges linearly there, fast).  The joint springs, dampers and
    armatures enter as servos do (``rotor``: the rotors' rates at the step's start).
    ``frames``: (R0, R1, u) of the step.
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
        _joint_row_stiffness(
            h, tf, ti, int(act[a, ACT_BODY]), ov, g, f, df, mu, frames, (kd, Cb)
        )
    for b in range(ti.shape[0]):  # the joint springs, dampers and armatures, as servos
        ov, f, df = joint_spring_force(h, tf, ti, b, Q0, mu, rotor)
        if f != 0.0 or df != 0.0:
            _joint_row_stiffness(h, tf, ti, b, ov, 1.0, f, df, mu, frames, (kd, Cb))


@jit_inline
def _joint_row_stiffness(h, tf, ti, b, ov, g, f, df, mu, frames, out):
    """One joint force's terms of the Newton matrix (see :func:`actuator_stiffness`): the
    force g f on body b's joint (rate offset ov), varying by df per unit of its mu.
    ``frames``: (R0, R1, u) of the step; ``out``: (kd, Cb), added to."""
    R0, R1, u = frames
    kd, Cb = out
    if ti[b, I_KIND] == PRISMATIC:  # the slide's row holds -h g f exactly (_slide_pair)
        kd[ov] -= 0.5 * h * h * g * df
        return
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
        return
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
     Y, c0, sl, fr) = em
    mt, Nm, dc, xt, R0, SL, SR, Cb, ucol, pred, M3, aug, kd = jx
    nb = ti.shape[0]
    c = 0.5 * h
    Md, Y3, Z = M3[1], M3[2], M3[3]
    for b in range(nb):
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
        # gives, with y = x_mid - h phi / (4 m), [[- m [y]x [x1]x, m [y]x], [- m [x1]x, m 1]];
        # a massless link (m = 0) keeps m y = - h phi / 4 (the loads on it) as its y, scale 1
        xe = (x1[b, 0], x1[b, 1], x1[b, 2])
        ph = (m * (v1[b, 0] - v0[b, 0]) - h * fw[b, 0], m * (v1[b, 1] - v0[b, 1]) - h * fw[b, 1],
              m * (v1[b, 2] - v0[b, 2]) - h * fw[b, 2])
        if m > 0.0:
            my = m
            y = (0.5 * (x0[b, 0] + xe[0]) - 0.25 * h * ph[0] / m,
                 0.5 * (x0[b, 1] + xe[1]) - 0.25 * h * ph[1] / m,
                 0.5 * (x0[b, 2] + xe[2]) - 0.25 * h * ph[2] / m)
        else:
            my = 1.0
            y = (-0.25 * h * ph[0], -0.25 * h * ph[1], -0.25 * h * ph[2])
        yx = y[0] * xe[0] + y[1] * xe[1] + y[2] * xe[2]
        # [y]x [x1]x = x1 y^T - (y.x1) 1
        for i in range(3):
            for j in range(3):
                Bb[i, j] -= my * xe[i] * y[j]
                Bb[3 + i, 3 + j] = 0.0
            Bb[i, i] += my * yx
            Bb[3 + i, 3 + i] = m
        Bb[0, 3], Bb[0, 4], Bb[0, 5] = 0.0, -my * y[2], my * y[1]
        Bb[1, 3], Bb[1, 4], Bb[1, 5] = my * y[2], 0.0, -my * y[0]
        Bb[2, 3], Bb[2, 4], Bb[2, 5] = -my * y[1], my * y[0], 0.0
        Bb[3, 0], Bb[3, 1], Bb[3, 2] = 0.0, m * xe[2], -m * xe[1]
        Bb[4, 0], Bb[4, 1], Bb[4, 2] = -m * xe[2], 0.0, m * xe[0]
        Bb[5, 0], Bb[5, 1], Bb[5, 2] = m * xe[1], -m * xe[0], 0.0
        em_columns(h, tf, ti, b, mu, R, rj, em, jx)


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
    c0 = em.c0
    for j in range(nv):
        mu[j] = mu_in[j]
        c0[j] = nu[j]  # the rotors' rates at t_n, as a step from this state takes them
    act, ctrl = actuator_views(F, I)[:2]
    residual(dt, TreeModel(gravity, tf, ti, pf, pi, A, True), Qg, mu, x, q, work, act, ctrl)
    for j in range(nv):
        res_out[j] = res[j]
    newton_matrix(dt, tf, ti, q0, mu, work, nq)
    actuator_stiffness(dt, tf, ti, act, ctrl, Qg, mu, c0, (R0, scr.R, em.u), kd, Cb)
    if not _tree_factor(ti, SL, SR, Cb, IA, U, W, Dinv, I6, aug, kd, dc):
        return False
    tree_solve(ti, SL, SR, U, W, Dinv, g, pA, acc, ucol, sol_out)
    return True
