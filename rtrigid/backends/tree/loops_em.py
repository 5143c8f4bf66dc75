"""The compiled step of :class:`LoopEnergyMomentum`: ``energy_momentum`` (and, composed,
``energy_momentum4``) on a tree with loop joints, n steps in one call on the Simulation's
buffers F, I, the loop scratch (:func:`~.loops.carve_loop`) and this module's scratch
(:func:`carve_em`).  It raises nothing and allocates nothing: the dense solves are Cholesky,
LU with partial pivoting and one-sided Jacobi (:func:`~.loops.jacobi_rows`) in the scratch, and
a solve that fails is a status (the sub-step fallback first, then FAILED with the state of the
step before).  The mathematics is :class:`LoopEnergyMomentum`'s docstring; the same
kernel runs on a copy's row of a :class:`rtrigid.Batch` (:func:`em_loop_rows_step`).
"""
from collections import namedtuple

import numpy as np

from rtrigid._jit import jit
from rtrigid.backends.buffers import (FAILED, OK, SOLVER_HALVINGS, SOLVER_MAX_ITER,
                                      STAT_FALLBACKS, STAT_ITERS, STAT_MAX_ITERS, STAT_STEPS,
                                      USED_FALLBACK, view)
from rtrigid.backends.tree.dynamics import mass_matrix
from rtrigid.backends.tree.kinematics import (I_QOFF, I_VOFF, T_HI, T_LO, actuator_views,
                                              applied_views, carve, open_buffers,
                                              refresh_bodies, state_views)
from rtrigid.backends.tree.layout import Drive, TreeModel, TreeState
from rtrigid.backends.tree.limits import has_limits
from rtrigid.maths.dense import (
    chart_mass_matrix,
    chart_product,
    cholesky,
    cholesky_solve,
    jacobi_rows,
    lu_factor,
    lu_solve,
    rank_cut,
    row_space_projector,
    spd_solve,
)
from rtrigid.backends.tree.loops_rows import MassWork, RowWork, limit_rates, loop_rows
from rtrigid.backends.tree.loops_charts import (
    chart,
    em_actuator_work,
    em_hamiltonian,
    em_residual,
    spin_links,
)
from rtrigid.backends.tree.loops import LoopStepper, REFORMS, STALLED, carve_loop

EI_HEAD = 3  # the EM scratch's int part starts with the spin links', their children's and
#              the composition's weights' counts


def em_scratch_size(nb, nq, nv, m, na, ns, nc, nw):
    """(float, int) lengths of the EM loop step's scratch (:func:`carve_em`)."""
    n, mb = nv, m + nb
    rr = 2 * n + m + nb  # the residual's rows at most (every limited joint locked)
    nxf = (nw + 2 * (9 * ns + 3 * nc) + 7 * nb + 14 * n * n + 20 * n + 2 * m + mb * n + mb * mb
           + mb + 3 + 14 * n + 3 * rr + m + 2 * n * rr + 4 * n * n + 4 * n + 2 * m * n + m * m + nq
           + 2 * nq + 2 * n + na + 3 * nb)
    nxi = EI_HEAD + 2 * (3 * ns + 3 * nc) + n + mb + n + 2 * n + rr + m
    return nxf, nxi


# carve_em's groups by name: the Newton solve's arrays, the structured inverse's (a chart's
# mass matrix Km0, its factors, the chart T, ..., the chart's coordinates Q) and the
# residual's (see loops_charts.em_residual)
EmSolve = namedtuple("EmSolve", ("full", "z", "dz", "zk", "r", "rt", "rfull", "Bt", "Uq", "gq",
                                 "dcol", "tmp", "phi0"))
EmStructured = namedtuple("EmStructured", ("Km0", "L", "D", "Pn", "Kinv", "T", "g0", "gt", "th",
                                           "ev", "Jmk", "J1", "Um", "Q"))
# carve_em's arrays (spins: (sf, si, cf, ci) of spin_links; the loads' spins sp2 alike)
LoopEmScratch = namedtuple("LoopEmScratch", (
    "weights", "spins", "sp2", "x", "q", "hs", "rs", "sel", "selm", "solve", "structured",
    "advance", "Qs", "nus", "aws", "locks", "keep", "cols", "rows"))
EmResidualWork = namedtuple("EmResidualWork", ("Tm", "Km", "L", "thm", "pm", "gP", "gQ", "tha",
                                               "dP", "a", "ga", "phi1", "corr", "Jm", "Ub", "g",
                                               "p3"))


@jit
def carve_em(ef, ei, nb, nq, nv, m, na):
    """The EM loop step's arrays, views of its float scratch ``ef`` and int scratch ``ei``
    (:func:`em_scratch_size`): (weights, spins (sf, si, cf, ci), the loads' spins (sf2, si2,
    cf2, ci2), x, q, hs, rs, sel, solve, structured, advance, locks) as :func:`em_loop_steps`
    takes them.  From Python call ``carve_em.py_func``."""
    n, mb = nv, m + nb
    rr = 2 * n + m + nb
    ns, nc, nw = ei[0], ei[1], ei[2]
    weights = view(ef, 0, (nw,))
    o = nw
    sf, cf = view(ef, o, (ns, 9)), view(ef, o + 9 * ns, (nc, 3))
    o += 9 * ns + 3 * nc
    sf2, cf2 = view(ef, o, (ns, 9)), view(ef, o + 9 * ns, (nc, 3))
    o += 9 * ns + 3 * nc
    x, q = view(ef, o, (nb, 3)), view(ef, o + 3 * nb, (nb, 4))
    o += 7 * nb
    sq = view(ef, o, (14, n, n))
    o += 14 * n * n
    vn = view(ef, o, (20, n))
    o += 20 * n
    hs_LU, hs_L, hs_P, hs_y = sq[0], sq[1], vn[0], vn[1]
    phi1, corr = view(ef, o, (m,)), view(ef, o + m, (m,))
    o += 2 * m
    Jm, Ub, g = view(ef, o, (mb, n)), view(ef, o + mb * n, (mb, mb)), view(ef, o + mb * n
                                                                             + mb * mb, (mb,))
    o += mb * n + mb * mb + mb
    p3 = view(ef, o, (3,))
    o += 3
    rs = EmResidualWork(sq[2], sq[3], sq[4], vn[2], vn[3], vn[4], vn[5], vn[6], vn[7], vn[8],
                        vn[9], phi1, corr, Jm, Ub, g, p3)
    v2 = view(ef, o, (7, 2 * n))
    o += 14 * n
    full, z, dz, zk, gq, dcol, z1 = v2[0], v2[1], v2[2], v2[3], v2[4], v2[5], v2[6]
    vr = view(ef, o, (3, rr))
    o += 3 * rr
    r, rt, rfull = vr[0], vr[1], vr[2]
    phi0 = view(ef, o, (m,))
    o += m
    Bt = view(ef, o, (2 * n, rr))
    o += 2 * n * rr
    Uq = view(ef, o, (2 * n, 2 * n))
    o += 4 * n * n
    tmp = view(ef, o, (2 * n,))
    o += 2 * n
    solve = EmSolve(full, z, dz, zk, r, rt, rfull, Bt, Uq, gq, dcol, tmp, phi0)
    Jmk, J1 = view(ef, o, (m, n)), view(ef, o + m * n, (m, n))
    o += 2 * m * n
    Um = view(ef, o, (m, m))
    o += m * m
    Qc = view(ef, o, (nq,))
    o += nq
    # structured: Km0, L, D, Pn, Kinv, T, g0, gt, th, ev, svm (m + nb), Jmk, J1, Um, Q
    structured = EmStructured(sq[5], sq[6], sq[7], sq[8], sq[9], sq[10], vn[10], vn[11], vn[12],
                              vn[13], Jmk, J1, Um, Qc)
    Q1, Qs = view(ef, o, (nq,)), view(ef, o + nq, (nq,))
    o += 2 * nq
    nus, aws = view(ef, o, (n,)), view(ef, o + n, (na,))
    o += n + na
    advance = (Q1, sq[11], vn[14], vn[15], vn[16], vn[17], z1, sq[12])
    locks = view(ef, o, (nb, 3))
    si, ci = view(ei, EI_HEAD, (ns, 3)), view(ei, EI_HEAD + 3 * ns, (nc, 3))
    o = EI_HEAD + 3 * ns + 3 * nc
    si2, ci2 = view(ei, o, (ns, 3)), view(ei, o + 3 * ns, (nc, 3))
    o += 3 * ns + 3 * nc
    piv, sel, keep = view(ei, o, (n,)), view(ei, o + n, (mb,)), view(ei, o + n + mb, (n,))
    o += 2 * n + mb
    cols, rows = view(ei, o, (2 * n,)), view(ei, o + 2 * n, (rr,))
    o += 2 * n + rr
    selm = view(ei, o, (m,))
    hs = (hs_LU, hs_L, hs_P, hs_y, piv)
    return LoopEmScratch(weights, (sf, si, cf, ci), (sf2, si2, cf2, ci2), x, q, hs, rs, sel,
                         selm, solve, structured, advance, Qs, nus, aws, locks, keep, cols, rows)


@jit
def spins_of_loads(t_app, held, spins, out):
    """The spin-free links (:func:`~.loops.spin_links`) whose spin the loads leave cyclic --
    no applied torque on the link, no held force on its rates or its counter-turned
    children's -- written into ``out``'s tables (children renumbered); their counts."""
    sf, si, cf, ci = spins
    sf2, si2, cf2, ci2 = out
    ns = nc = 0
    for k in range(si.shape[0]):
        bad = t_app[si[k, 0], 0] != 0.0 or t_app[si[k, 0], 1] != 0.0 or \
            t_app[si[k, 0], 2] != 0.0
        for i in range(3):
            bad |= held[si[k, 2] + i] != 0.0
        for j in range(ci.shape[0]):
            if ci[j, 0] == k:
                for i in range(3):
                    bad |= held[ci[j, 2] + i] != 0.0
        if bad:
            continue
        sf2[ns, :] = sf[k]
        si2[ns, :] = si[k]
        for j in range(ci.shape[0]):
            if ci[j, 0] == k:
                cf2[nc, :] = cf[j]
                ci2[nc, 0], ci2[nc, 1], ci2[nc, 2] = ns, ci[j, 1], ci[j, 2]
                nc += 1
        ns += 1
    return ns, nc


@jit
def _pinv_factor(Bt, nc, nr, U, g):
    """Bt[:nc, :nr] = (A D)^T, A's columns scaled to unit length (D): its rows turned
    orthogonal (A D = W^T U^T, :func:`jacobi_rows`) and g <- 1/|w|^2 on the rows above the
    rank cut (RANK_GAP of the largest singular value, as numpy's ``pinv``), 0 below."""
    jacobi_rows(Bt, nc, nr, U)
    cut = rank_cut(Bt, nc, nr, g)
    for c in range(nc):
        g[c] = 1.0 / g[c] if g[c] > cut else 0.0


@jit
def _pinv_step(Bt, U, g, d, nc, nr, r, tmp, dz):
    """dz[:nc] <- -D pinv(A D) r = -D U diag(g) W r (:func:`_pinv_factor`)."""
    for c in range(nc):
        t = 0.0
        for a in range(nr):
            t += Bt[c, a] * r[a]
        tmp[c] = t * g[c]
    for c in range(nc):
        t = 0.0
        for k in range(nc):
            t += U[c, k] * tmp[k]
        dz[c] = -d[c] * t


@jit
def _scale_columns(Bt, nc, nr, d):
    """Bt[c] /= |Bt[c]| (A's columns, stored as Bt's rows), d[c] <- the factor."""
    for c in range(nc):
        s = 0.0
        for a in range(nr):
            s += Bt[c, a] * Bt[c, a]
        d[c] = 1.0 / max(np.sqrt(s), 1e-300)
        for a in range(nr):
            Bt[c, a] *= d[c]


# what every pass of the step reads (the model, its loads, the loops' tables and the scratch),
# built once per call of :func:`em_loop_steps`
EmGeometry = namedtuple("EmGeometry", (
    "tf", "ti", "pf", "pi", "gravity", "f_app", "t_app", "held", "act", "ctrl", "lf", "li",
    "rank", "ws", "R", "rj", "G", "V", "cb", "IA", "I6", "F6", "K", "E", "J6", "phi", "J",
    "gam", "acc", "Lv", "x", "q", "sp", "hs", "rs", "sel", "selm", "solve", "structured",
    "keep", "cols", "rows", "stats", "max_iter", "locks"))


@jit
def em_loop_steps(n_steps, dt, model, S, S_prev, state, drive, solver, stats, lp, scr, em):
    """n_steps of :class:`LoopEnergyMomentum` (its docstring); OK (| USED_FALLBACK
    if a step needed sub-steps), or FAILED with the state of the step before the failed
    one.  ``model``, ``state``, ``drive``: the groups of :mod:`.layout` (TreeModel,
    TreeState, Drive); ``lp``: the loop scratch (:func:`~.loops.carve_loop`; its Lnew is
    the limits' Lv here); ``scr``: the tree's (:func:`~.layout.carve`); ``em``:
    :func:`carve_em`'s arrays."""
    gravity, tf, ti, pf, pi, A = model.gravity, model.tf, model.ti, model.pf, model.pi, model.A
    Qg, nu, xb, qb, vb, wb, Lb = state
    act, ctrl, awork = drive
    nb = ti.shape[0]
    f_app, t_app, held = applied_views(A, nb, nu.shape[0])
    R, rj, G, V, cb, IA, I6 = scr.R, scr.rj, scr.G, scr.V, scr.cb, scr.IA, scr.I6
    lf, li, rank, ws, F6, K, E, J6 = lp.lf, lp.li, lp.rank, lp.ws, lp.F6, lp.K, lp.E, lp.J6
    phi, J, gam, acc, Lv = lp.phi, lp.J, lp.gam, lp.acc, lp.Lnew
    (weights, spins, sp2, x, q, hs, rs, sel, selm, solve, structured, advance, Qs, nus, aws,
     locks, keep, cols, rows) = em
    n = nu.shape[0]
    ns, nc = spins_of_loads(t_app, held, spins, sp2)
    sp = (sp2[0][:ns], sp2[1][:ns], sp2[2][:nc], sp2[3][:nc])
    k = 0
    for i in range(n):  # the unknowns: every rate but the cyclic spins
        spin = False
        for j in range(ns):
            spin |= sp[1][j, 2] == i
        if not spin:
            keep[k] = i
            k += 1
    max_iter = int(solver[SOLVER_MAX_ITER])
    halvings = int(solver[SOLVER_HALVINGS])
    geo = EmGeometry(tf, ti, pf, pi, gravity, f_app, t_app, held, act, ctrl, lf, li, rank, ws, R,
                     rj, G, V, cb, IA, I6, F6, K, E, J6, phi, J, gam, acc, Lv, x, q, sp, hs, rs,
                     sel, selm, solve, structured, keep[:k], cols, rows, stats, max_iter, locks)
    status = OK
    for _ in range(n_steps):
        S_prev[:] = S
        ok = False
        halved = 0
        for h2 in range(halvings + 1):  # a failed step is redone as 2, 4, ... sub-steps
            Qs[:] = Qg
            nus[:] = nu
            aws[:] = awork
            ok = True
            for _ in range(2 ** h2):
                ok = _advance(Qs, nus, aws, dt / 2 ** h2, weights, geo, advance)
                if not ok:
                    break
            halved = h2
            if ok:
                break
        if not ok:
            S[:] = S_prev
            return FAILED | status
        if halved:
            stats[STAT_FALLBACKS] += 1
            status = USED_FALLBACK
        Qg[:] = Qs
        nu[:] = nus
        awork[:] = aws
        refresh_bodies(tf, ti, state, R, rj, G, V, cb)
        stats[STAT_STEPS] += 1
    return status


@jit
def _advance(Q, nu, work, dt, weights, geo, advance):
    """(Q, nu, work) <- one step of size dt (every composition stage), work the actuators'
    cumulative work; False if a solve fails (the arrays then hold no state)."""
    (tf, ti, pf, pi, gravity, f_app, t_app, held, act, ctrl, lf, li, rank, ws, R, rj, G, V, cb,
     IA, I6, F6, K, E, J6, phi, J, gam, acc, Lv, x, q, sp, hs, rs, sel, selm, solve, structured,
     keep, cols, rows, stats, max_iter, locks) = geo
    Q1, T, zero, P, p0, xs, z1h, LUa = advance
    LU, Lh, _, _, piv = hs
    n = nu.shape[0]
    mass_matrix(tf, ti, Q, x, q, R, rj, G, IA, I6, F6, K)
    for i in range(n):
        t = 0.0
        for j in range(n):
            t += K[i, j] * nu[j]
        P[i] = t
    for i in range(n):
        zero[i] = 0.0
    for wt in weights:
        h = wt * dt
        chart(ti, Q, zero, Q1, T, sp)
        for i in range(n):  # the chart's momenta at its base, and the predictor
            t = 0.0
            for j in range(n):
                t += T[j, i] * P[j]
            p0[i] = t
        if not lu_factor(T, False, LUa, piv, n):
            return False
        lu_solve(LUa, piv, nu, xs, n)
        for i in range(n):
            z1h[i] = h * xs[i]
            z1h[n + i] = p0[i]
        if not _solve_step(h, Q, p0, z1h, 0, geo):
            return False
        nk = 0
        if has_limits(tf, ti):
            nk = _lock_limits(h, Q, p0, z1h, geo, Q1, T)
            if nk < 0:
                return False
        chart(ti, Q, z1h[:n], Q1, T, sp)
        em_actuator_work(h, act, ctrl, Q, z1h[:n], work)
        if not lu_factor(T, True, LUa, piv, n):
            return False
        lu_solve(LUa, piv, z1h[n:], P, n)  # the momenta K nu at Q1
        mass_matrix(tf, ti, Q1, x, q, R, rj, G, IA, I6, F6, K)
        if not spd_solve(K, Lh, P, nu, n):
            return False
        if nk:
            for a in range(nk):  # the locked joints exactly on their limits, rates stopped
                Q1[_coordinate(ti, int(locks[a, 0]))] = locks[a, 2]
                Lv[0, a] = locks[a, 0]
                for r in range(1, 4):
                    Lv[r, a] = 0.0
            rw = RowWork(x, q, R, rj, G, V, cb, acc, E, J6, phi, J, gam)
            if limit_rates(tf, ti, Q1, nu, lf, li, nk, Lv, rw, MassWork(IA, I6, F6, K), zero,
                           ws) == np.inf:
                return False
            for i in range(n):
                zero[i] = 0.0
            for i in range(n):  # the next stage starts from the stopped rates' momenta
                t = 0.0
                for j in range(n):
                    t += K[i, j] * nu[j]
                P[i] = t
        Q[:] = Q1
    for i in range(Q.shape[0]):
        if not np.isfinite(Q[i]):
            return False
    for i in range(n):
        if not np.isfinite(nu[i]):
            return False
    return True


@jit
def _coordinate(ti, ov):
    """The coordinate of the limited joint whose rate is ov."""
    for b in range(ti.shape[0]):
        if ti[b, I_VOFF] == ov:
            return ti[b, I_QOFF]
    return -1


@jit
def _residual(h, Q0, p0, H0, phi0, full, nk, geo, out):
    """out <- :func:`~.loops.em_residual` at ``full`` with the first nk locks."""
    em_residual(h, Q0, p0, H0, phi0, full, geo, geo.locks[:nk], geo.structured.Q,
                geo.structured.T, out)


@jit
def _res(h, Q0, p0, H0, phi0, z, nk, geo, out):
    """out[:len rows] <- the residual's rows ``rows`` at the unknowns z (on ``cols``)."""
    cols, rows, solve = geo.cols, geo.rows, geo.solve
    full, rfull = solve.full, solve.rfull
    nz = 2 * geo.keep.shape[0]
    for i in range(nz):
        full[cols[i]] = z[i]
    _residual(h, Q0, p0, H0, phi0, full, nk, geo, rfull)
    nr = nz + geo.phi.shape[0] + nk
    big = 0.0
    for i in range(nr):
        out[i] = rfull[rows[i]]
        big = max(big, abs(out[i])) if np.isfinite(out[i]) else np.inf
    return big


@jit
def _solve_step(h, Q0, p0, z1, nk, geo):
    """z1 <- (theta1, p1) solving the step from (0, p0) in the chart at Q0 (from the
    predictor z1), the first nk locks held; whether it converged.  Gauss-Newton on the
    unknowns (the spins' are held: their momenta p0's, their angles h dH_bar/dp of the
    converged step) with the structured Newton matrix (:func:`_structured_inverse`), or
    finite differences with locks and when the chord contracts too slowly
    (:func:`_newton_inverse`, at most REFORMS times)."""
    (tf, ti, pf, pi, gravity, f_app, t_app, held, act, ctrl, lf, li, rank, ws, R, rj, G, V, cb,
     IA, I6, F6, K, E, J6, phi, J, gam, acc, Lv, x, q, sp, hs, rs, sel, selm, solve, structured,
     keep, cols, rows, stats, max_iter, locks) = geo
    full, z, dz, zk, r, rt, rfull, Bt, Uq, gq, dcol, tmp, _ = solve
    Qc, Tc = structured.Q, structured.T
    n = p0.shape[0]
    m = phi.shape[0]
    k = keep.shape[0]
    nz, nr = 2 * k, 2 * k + m + nk
    th0 = structured.th
    th0[:] = 0.0
    H0 = em_hamiltonian(geo, Q0, th0, p0, Qc, Tc)
    phi0 = solve.phi0
    rw = RowWork(x, q, R, rj, G, V, cb, acc, E, J6, phi, J, gam)
    loop_rows(tf, ti, Q0, p0, lf, li, rw, 1)
    phi0[:] = phi
    for i in range(2 * n):
        full[i] = z1[i]
    for j in range(sp[1].shape[0]):
        s = sp[1][j, 2]
        full[s] = 0.0
        full[n + s] = p0[s]
    for i in range(k):
        cols[i] = keep[i]
        cols[k + i] = n + keep[i]
    for i in range(nz):
        rows[i] = cols[i]
    for i in range(m + nk):
        rows[nz + i] = 2 * n + i
    for i in range(nz):
        z[i] = full[cols[i]]
    _res(h, Q0, p0, H0, phi0, z, nk, geo, r)
    if nk:
        _newton_inverse(h, Q0, p0, H0, phi0, z, r, nk, geo)
    else:
        _structured_inverse(h, Q0, p0, full, geo)
    last = best = np.inf
    reforms = 0
    for it in range(1, max_iter + 1):
        _pinv_step(Bt, Uq, gq, dcol, nz, nr, r, tmp, dz)
        zmax = dmax = 0.0
        for i in range(nz):
            z[i] += dz[i]
            dmax = max(dmax, abs(dz[i]))
            zmax = max(zmax, abs(z[i]))
        norm = _res(h, Q0, p0, H0, phi0, z, nk, geo, r)
        size = dmax / max(1.0, zmax)
        # converged: no change left, or the residual stalls at its round-off floor (the
        # differences of dH leave ~1e-13, around which it then wanders)
        if size <= 1e-15 or (norm >= 0.5 * best and (size <= 1e-13 or norm <= STALLED)):
            stats[STAT_ITERS] += it
            stats[STAT_MAX_ITERS] = max(stats[STAT_MAX_ITERS], it)
            for i in range(nz):
                full[cols[i]] = z[i]
            if sp[1].shape[0]:
                _residual(h, Q0, p0, H0, phi0, full, nk, geo, rfull)
                for j in range(sp[1].shape[0]):
                    s = sp[1][j, 2]
                    full[s] = -rfull[s]  # theta - h dH/dp
            for i in range(2 * n):
                z1[i] = full[i]
            return True
        if not np.isfinite(norm):
            break
        if norm > 0.1 * last and norm > STALLED and reforms < REFORMS:
            _newton_inverse(h, Q0, p0, H0, phi0, z, r, nk, geo)  # the chord contracts slowly
            reforms += 1
        last, best = norm, min(best, norm)
    return False


@jit
def _rates(Q0, theta, pm, geo, Km, tmp, out):
    """Km <- the chart's mass matrix T^T K T at theta, out <- Km^-1 pm (dH/dp at (theta,
    pm)); tmp: (n, n) scratch.  False if Km is not positive definite."""
    tf, ti, R, rj, G, IA, I6, F6, K, x, q, sp = (geo.tf, geo.ti, geo.R, geo.rj, geo.G,
                                                geo.IA, geo.I6, geo.F6, geo.K, geo.x,
                                                geo.q, geo.sp)
    structured = geo.structured
    Qc, Tc, L = structured.Q, structured.T, structured.L
    n = pm.shape[0]
    chart(ti, Q0, theta, Qc, Tc, sp)
    mass_matrix(tf, ti, Qc, x, q, R, rj, G, IA, I6, F6, K)
    chart_mass_matrix(K, Tc, tmp, Km, n)
    return spd_solve(Km, L, pm, out, n)


@jit
def _structured_inverse(h, Q0, p0, full, geo):
    """The pseudo-inverse (:func:`_pinv_factor`) of the step's Newton matrix without its
    terms in h^2 dH/dtheta^2, at the predictor ``full``: rows theta1 - h dH/dp,
    P(p1 - p0 + h dH/dtheta), Phi(Q1) (P the projector off the rows of Phi_bar), columns
    theta1 and p1 on ``keep``:

        [[1 - h/2 D, -h/2 K_m^-1], [0, P (1 + h/2 D^T)], [J(Q1) T(theta1), 0]],

    at the midpoint theta_m = theta1/2, p_m: K_m = T^T K T, D = d(K_m^-1 p_m)/d theta_m (by
    forward differences of the mass matrix, the mixed second derivative of H).  Its
    columns are scaled to unit length before the rank cut, as :func:`_newton_inverse`'s.
    False if the chart's mass matrix is not positive definite."""
    (tf, ti, pf, pi, gravity, f_app, t_app, held, act, ctrl, lf, li, rank, ws, R, rj, G, V, cb,
     IA, I6, F6, K, E, J6, phi, J, gam, acc, Lv, x, q, sp, hs, rs, sel, selm, solve, structured,
     keep, cols, rows, stats, max_iter, locks) = geo
    Km0, L, D, Pn, Kinv, Tc, g0, gt, th, ev, Jmk, J1, Um, Qc = structured
    Bt, Uq, gq, dcol = solve.Bt, solve.Uq, solve.gq, solve.dcol
    thm, pm, g = rs.thm, rs.pm, rs.g
    n, m, k = p0.shape[0], phi.shape[0], keep.shape[0]
    for i in range(n):
        thm[i] = 0.5 * full[i]
        pm[i] = 0.5 * (p0[i] + full[n + i])
    if not _rates(Q0, thm, pm, geo, Km0, Pn, g0):
        return False
    rw = RowWork(x, q, R, rj, G, V, cb, acc, E, J6, phi, J, gam)
    loop_rows(tf, ti, Qc, p0, lf, li, rw, 2)
    chart_product(J, Tc, J1, m, n)
    for r in range(m):
        for c in range(k):
            Jmk[r, c] = J1[r, keep[c]]
    for c in range(k):
        j = keep[c]
        eps = 1e-7 * max(1.0, abs(thm[j]))
        th[:] = thm
        th[j] += eps
        if not _rates(Q0, th, pm, geo, Kinv, Pn, gt):
            return False
        for i in range(k):
            D[i, c] = (gt[keep[i]] - g0[keep[i]]) / eps
    chart(ti, Q0, full[:n], Qc, Tc, sp)
    loop_rows(tf, ti, Qc, p0, lf, li, rw, 2)
    chart_product(J, Tc, J1, m, n)
    jacobi_rows(Jmk, m, k, Um)
    row_space_projector(Jmk, m, k, rank, g, selm)
    for i in range(k):  # Pn = 1 - Vr Vr^T
        for j in range(k):
            t = 1.0 if i == j else 0.0
            for r in range(m):
                if selm[r]:
                    t -= Jmk[r, i] * Jmk[r, j] / g[r]
            Pn[i, j] = t
    if not cholesky(Km0, L, n):
        return False
    for c in range(k):  # K_m^-1's columns on keep
        for i in range(n):
            ev[i] = 0.0
        ev[keep[c]] = 1.0
        cholesky_solve(L, ev, gt, n)
        for i in range(k):
            Kinv[i, c] = gt[keep[i]]
    nz, nr = 2 * k, 2 * k + m
    for c in range(k):  # Bt = A^T
        for i in range(k):
            Bt[c, i] = (1.0 if i == c else 0.0) - 0.5 * h * D[i, c]
            Bt[k + c, i] = -0.5 * h * Kinv[i, c]
            Bt[c, k + i] = 0.0
            t = 0.0
            for l in range(k):
                t += Pn[i, l] * ((1.0 if l == c else 0.0) + 0.5 * h * D[c, l])
            Bt[k + c, k + i] = t
        for r in range(m):
            Bt[c, 2 * k + r] = J1[r, keep[c]]
            Bt[k + c, 2 * k + r] = 0.0
    _scale_columns(Bt, nz, nr, dcol)
    _pinv_factor(Bt, nz, nr, Uq, gq)
    return True


@jit
def _newton_inverse(h, Q0, p0, H0, phi0, z, r, nk, geo):
    """The pseudo-inverse (:func:`_pinv_factor`) of the residual's Jacobian at z (r its
    residual), by forward differences, its columns scaled to unit length first: a light
    rod's spin (were it an unknown) leaves columns 1e-8 of the largest, which the rank cut
    would otherwise drop."""
    solve, keep, phi = geo.solve, geo.keep, geo.phi
    zk, rt, Bt, Uq, gq, dcol = solve.zk, solve.rt, solve.Bt, solve.Uq, solve.gq, solve.dcol
    nz = 2 * keep.shape[0]
    nr = nz + phi.shape[0] + nk
    for c in range(nz):
        eps = 1e-7 * max(1.0, abs(z[c]))
        for i in range(nz):
            zk[i] = z[i]
        zk[c] += eps
        _res(h, Q0, p0, H0, phi0, zk, nk, geo, rt)
        for a in range(nr):
            Bt[c, a] = (rt[a] - r[a]) / eps
    _scale_columns(Bt, nz, nr, dcol)
    _pinv_factor(Bt, nz, nr, Uq, gq)


@jit
def _lock_limits(h, Q, p0, z1, geo, Q1, T):
    """The step solved again with each joint that ended it beyond a limit held on it (its
    increment fixed, its reaction doing the work mu theta1_j / h <= 0), up to 6 rounds as
    more joints go past theirs: the number of locks (rows of geo's ``locks``: rate index,
    increment, limit), or -1 if a solve fails or a locked solve stalls off the loops
    (1.6e-8 m, seen on the four-bar resting on a limit; sub-steps follow).  A lock that
    would pull is kept (not released)."""
    tf, ti, lf, li, sp, locks = geo.tf, geo.ti, geo.lf, geo.li, geo.sp, geo.locks
    x, q, R, rj, G, V, cb = geo.x, geo.q, geo.R, geo.rj, geo.G, geo.V, geo.cb
    acc, E, J6, phi, J, gam = geo.acc, geo.E, geo.J6, geo.phi, geo.J, geo.gam
    rw = RowWork(x, q, R, rj, G, V, cb, acc, E, J6, phi, J, gam)
    n = p0.shape[0]
    nk = 0
    for _ in range(6):
        chart(ti, Q, z1[:n], Q1, T, sp)
        more = 0
        for b in range(ti.shape[0]):
            lo, hi = tf[b, T_LO], tf[b, T_HI]
            if not (np.isfinite(lo) or np.isfinite(hi)):
                continue
            o, ov = ti[b, I_QOFF], ti[b, I_VOFF]
            held = False
            for a in range(nk):
                held |= int(locks[a, 0]) == ov
            if not held and not (lo <= Q1[o] and Q1[o] <= hi):
                at = lo if Q1[o] < lo else hi
                locks[nk + more, 0] = ov
                locks[nk + more, 1] = at - Q[o]
                locks[nk + more, 2] = at
                more += 1
        if more == 0:
            break
        nk += more
        ok = _solve_step(h, Q, p0, z1, nk, geo)
        chart(ti, Q, z1[:n], Q1, T, sp)
        loop_rows(tf, ti, Q1, p0, lf, li, rw, 1)
        err = 0.0
        for r in range(phi.shape[0]):
            err = max(err, abs(phi[r]))
        if not (ok and err <= 1e-10):
            return -1
    return nk


@jit
def em_loop_step(n, dt, F, I, xf, xi, ef, ei):
    """:class:`LoopEnergyMomentum`'s n steps (:func:`em_loop_steps`) on the
    Simulation's buffers F, I, the loop scratch xf, xi (:func:`~.loops.carve_loop`) and the
    EM scratch ef, ei (:func:`carve_em`).  Raises nothing and allocates nothing."""
    gravity, tf, pf, ti, pi, S, S_prev, A, solver, stats, work, sizes = open_buffers(F, I)
    nb, _, nq, nv = sizes
    Qg, nu, x, q, v, w, L = state_views(S, nb, nq, nv)
    act, ctrl, awork = actuator_views(F, I)
    lp = carve_loop(xf, xi, nb, nq, nv)
    em = carve_em(ef, ei, nb, nq, nv, lp.phi.shape[0], act.shape[0])
    return em_loop_steps(n, dt, TreeModel(gravity, tf, ti, pf, pi, A, False), S, S_prev,
                         TreeState(Qg, nu, x, q, v, w, L), Drive(act, ctrl, awork), solver,
                         stats, lp, carve(work, nb, nq, nv), em)


EM_ROW_SIZES = 4


@jit
def em_loop_rows_step(n, dt, F, I):
    """:func:`em_loop_step` as a kernel of the contract on a Batch's longer rows
    (:meth:`LoopEnergyMomentum.rows`): F = the Simulation's F, the loop scratch xf,
    the EM scratch ef; I = its I, xi, ei, then len F, len I, len xf, len xi."""
    m = I.shape[0] - EM_ROW_SIZES
    nf, ni, nxf, nxi = I[m], I[m + 1], I[m + 2], I[m + 3]
    return em_loop_step(n, dt, view(F, 0, (nf,)), view(I, 0, (ni,)), view(F, nf, (nxf,)),
                        view(I, ni, (nxi,)), view(F, nf + nxf, (F.shape[0] - nf - nxf,)),
                        view(I, ni + nxi, (m - ni - nxi,)))


def em_scratch(tree, closure, weights):
    """(ef, ei): a new EM scratch for ``closure``'s tree (:func:`carve_em`), the
    composition's ``weights`` and the spin-free links (:func:`~.loops.spin_links`) written
    in."""
    tables = spin_links(tree, [lp for lp in closure.loops if lp.joint is not None])
    ns, nc, nw = tables[1].shape[0], tables[3].shape[0], len(weights)
    nxf, nxi = em_scratch_size(tree.nb, tree.nq, tree.nv, closure.m, tree.na, ns, nc, nw)
    ef, ei = np.zeros(nxf), np.zeros(nxi, np.int64)
    ei[:EI_HEAD] = ns, nc, nw
    arrays = carve_em.py_func(ef, ei, tree.nb, tree.nq, tree.nv, closure.m, tree.na)
    arrays.weights[:] = weights
    for a, b in zip(arrays.spins, tables):
        a[:] = b
    return ef, ei


class LoopEnergyMomentum:
    """``energy_momentum`` (and, composed, ``energy_momentum4``) on a tree with loop joints: a
    discrete-gradient step in a chart of the tree's coordinates at the step's start and the
    chart's momenta, the loops held at t_{n+1} by the solve.

    The chart (:func:`~.loops.step_chart`): theta (nv of them) added to the plain coordinates, and
    each unit quaternion (spherical and free joints) turned as s0 o (1, theta/2)/|.| (a
    Cayley map), so Q(theta) is a unit-quaternion configuration for every theta and
    nu = T(theta) theta_dot, T = 1 at theta = 0; its momenta are p = T^T K nu, so p0 = P0 =
    K(Q0) nu0 and, after the step, P1 = T(theta1)^-T p1, nu1 = K(Q1)^-1 P1.  On a tree of
    plain coordinates theta = Q - Q0 and this is the step in the tree's coordinates.

    H(theta, p) = 1/2 p^T K_theta^-1 p + V(Q(theta)), K_theta = T^T K T, V gravity, springs,
    the applied forces at the centres and the held joint forces as potentials.  One step
    (Gonzalez's discrete gradient, the bar; z = (theta, p), mid = z1/2 + z0/2, z0 = (0, P0)):

        theta1 = h dH_bar/dp,   p1 - P0 = -h dH_bar/dtheta + Phi_bar^T lambda,   Phi(Q1) = 0,

    dH_bar = dH(mid) + (H(z1) - H(z0) - dH(mid).dz) dz / |dz|^2 (so dH_bar.dz = H1 - H0
    exactly) and Phi_bar likewise row by row (so Phi_bar theta1 = Phi(Q1) - Phi(Q0) = 0).  Then
    H1 - H0 = lambda . (Phi(Q1) - Phi(Q0)) / h = 0: the reactions do no work, and H is the
    energy whatever the chart.  The multipliers are eliminated by the discrete null space: the
    momentum equation is projected onto the null space of Phi_bar (its rank truncated at the
    mechanism's, so redundant rows are harmless), and the overdetermined, consistent system is
    solved by Gauss-Newton with a rank-revealing least-squares step.  dH(mid)/dtheta by a
    fourth-order central stencil of step 1e-3 (its round-off noise, ~1e-15/step, is what
    limits the residual, and with it the energy: ~ nu . (the momentum rows' residual) a
    step; the second-order stencil at 1e-5 left 1e-11 a step on the whirling delta robot).
    The Newton matrix is structured (:func:`_structured_inverse`: the exact rows of the
    closure, the mass matrix and the mixed second derivative of H, no h^2 d^2H/dtheta^2), at
    the step's predictor, kept while the iteration contracts well, and replaced by forward
    differences of the residual (:func:`_newton_inverse`, at most REFORMS times) when it
    does not (a chord iteration; formed afresh every step, so a restored snapshot repeats
    bit for bit).  A step whose solve fails is redone as 2, 4, ... sub-steps, as the tree
    scheme does.  Rates at t_{n+1}:
    nu1 = K(Q1)^-1 P1, which meets J nu = 0 only to O(h^2) (as the tree scheme's).  Applied
    torques enter as the generalized force of the mean configuration (their work is then not
    exact), held forces on a quaternion's rates as the potential -held . theta.  Actuators
    (:func:`em_actuator_forces`) act in the momentum equation with their force at the step's
    mean coordinate and rate, as in the tree scheme: H1 - H0 = g f theta1, their exact work,
    which :func:`em_actuator_work` adds to ``actuator_work()``; a servo only dissipates.
    Joint limits (:func:`_lock_limits`): a joint that ends the step beyond a limit
    is held on it for the step (its increment fixed, its reaction e_j mu added to the rows the
    momentum equation is projected off, doing the work mu theta1_j / h <= 0) and the step is
    solved again; then its rate at t_{n+1} is set to 0 by the projection of :func:`limit_rates`
    (an impulse through the loops, which never adds kinetic energy), and a later stage of a
    composition starts from the momenta of those stopped rates.  The whole step is one
    compiled kernel (:func:`em_loop_step`; H and the residual are
    :func:`em_hamiltonian`, :func:`em_residual`), allocation-free in its scratch: the dense
    solves are Cholesky, LU with partial pivoting and one-sided Jacobi (the rank-revealing
    SVD of the null-space projection and of the pseudo-inverses, :func:`jacobi_rows`), and a
    failed solve is a status (FAILED, the state of the step before), so a :class:`rtrigid.Batch`
    runs it per copy (:meth:`rows`) and copy i is its single Simulation bit for bit.

    Spin-free links (:func:`~.loops.spin_links`: a link on ball joints all anchored on one
    line through its centre, its inertia symmetric about it, like the delta robot's rods) are no unknowns
    of the solve.  Their spins about their own axes would be: light (the rods' axial inertia
    is 1/1350 of the transverse), they made the Newton system so badly conditioned that the
    falling delta robot failed at step 293.  The chart (:func:`~.loops.spin_chart`) makes each such
    spin psi a cyclic coordinate (turning it moves no point of the model; the link's tree
    children on ball joints are turned back), so H does not depend on it and its momentum
    p_psi = I_axial omega . u is conserved: the step holds p_psi, solves for the other
    unknowns with psi = 0 (the residual's rows do not depend on psi; the momentum equation is
    projected off Phi_bar's rows without their psi columns, which only round-off and the
    midpoint's O(h^2) gap make nonzero) and then sets psi1 = h dH_bar/dp_psi.  Energy: the
    reduced step is the same discrete gradient on (theta without psi, p without p_psi), so
    H1 = H0 exactly, and psi does not enter H; closure: Phi does not depend on psi.  A link
    whose spin an applied torque or a held joint force would drive stays an unknown
    (:func:`spins_of_loads`, per call).
    """

    def __init__(self, backend, closure, weights=(1.0,)):
        self.be, self.lc = backend, closure
        (self._xf, self._xi), _ = closure.scratch()
        self._ef, self._ei = em_scratch(backend.tree, closure, weights)

    def __call__(self, n, dt, F, I):
        return em_loop_step(n, dt, F, I, self._xf, self._xi, self._ef, self._ei)

    def rows(self, F, I):
        """This step as a kernel of the contract on longer rows, for :class:`rtrigid.Batch`:
        ``(step, Fx, Ix)`` with ``step`` = :func:`em_loop_rows_step`, Fx = F, the
        loop scratch, the EM scratch; Ix = I, their int scratch, then len F, len I and the
        loop scratch's lengths.  The same compiled :func:`em_loop_step` runs on
        a copy's row as on the Simulation's buffers."""
        Fx = np.concatenate([F, self._xf, self._ef])
        Ix = np.concatenate([I, self._xi, self._ei,
                             [len(F), len(I), len(self._xf), len(self._xi)]]).astype(np.int64)
        return em_loop_rows_step, Fx, Ix


def stepper(integrator, options, backend):
    """The step callable (kernel signature) of ``integrator`` for a tree with loop joints;
    ``ValueError`` naming ``integrator`` for a model its loop scheme cannot step."""
    closure = backend.loops
    if integrator == "nullspace_rk4":
        return LoopStepper(backend, closure)
    if integrator == "energy_momentum":
        return LoopEnergyMomentum(backend, closure)
    from rtrigid.backends.compositions import COMPOSITIONS

    return LoopEnergyMomentum(backend, closure, COMPOSITIONS[options["composition"]])
