"""The EM loop step's mathematics: the charts of the coordinates (joint steps and the spin
links' cyclic coordinates), the Hamiltonian and actuator work in them, and the step's
residual (see :mod:`.loops_em` for the compiled step).
"""

import numpy as np
from rtrigid._jit import jit
from rtrigid.backends.tree.kinematics import (
    ACT_GEAR,
    ACT_Q,
    ACT_V,
    I_KIND,
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
    T_J,
    T_MASS,
    T_R0,
    actuator_force,
    coordinate_slots,
    cross3,
    spring_point,
)
from rtrigid.backends.tree.dynamics import mass_matrix, point_jacobian
from rtrigid.maths.quat import qmul_t, rotate_t
from rtrigid.maths.dense import (
    chart_mass_matrix,
    chart_product,
    jacobi_rows,
    lu_factor,
    lu_solve,
    row_space_projector,
    spd_solve,
)
from rtrigid.backends.tree.loops_rows import RowWork, loop_rows

DG_NOISE = 1e-13    # H's relative round-off, below which the discrete gradient's gap is noise


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
def em_hamiltonian(geo, Q0, theta, p, Q, T):
    """H(theta, p) = 1/2 P^T K(Q)^-1 P + V(Q) of :class:`LoopEnergyMomentum` in the step's
    chart at Q0 (Q, T of :func:`chart`; P = T^-T p the rates' momenta K nu): V gravity,
    the point springs, the applied forces at the centres and the held joint forces (as the
    potential -held . theta).  ``geo``: the step's :data:`~.loops_em.EmGeometry` (its hs:
    scratch (LU (n, n), L (n, n), P (n,), y (n,), pivots (n,))); NaN if T or K is
    singular."""
    tf, ti, pf, pi, gravity = geo.tf, geo.ti, geo.pf, geo.pi, geo.gravity
    f_app, held, sp, x, q = geo.f_app, geo.held, geo.sp, geo.x, geo.q
    R, rj, G, IA, I6, F6, K = geo.R, geo.rj, geo.G, geo.IA, geo.I6, geo.F6, geo.K
    LU, L, P, y, piv = geo.hs
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
def em_residual(h, Q0, P0, H0, phi0, z1, geo, locks, Q, T, out):
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
    nothing: ``geo`` is the step's :data:`~.loops_em.EmGeometry`: its hs is
    :func:`em_hamiltonian`'s scratch, its rs = (Tm, Km, L, thm, pm, gP, gQ, tha, dP, a, ga,
    phi1, corr, Jm (m + nb, nv), U (m + nb, m + nb), g (m + nb,), p3 (3,)), its sel (m + nb,)
    ints."""
    tf, ti, t_app, act, ctrl = geo.tf, geo.ti, geo.t_app, geo.act, geo.ctrl
    lf, li, rank, sp, x, q = geo.lf, geo.li, geo.rank, geo.sp, geo.x, geo.q
    R, rj, G, V, cb, acc = geo.R, geo.rj, geo.G, geo.V, geo.cb, geo.acc
    E, J6, phi, J, gam, K, sel = geo.E, geo.J6, geo.phi, geo.J, geo.gam, geo.K, geo.sel
    Tm, Km, L, thm, pm, gP, gQ, tha, dP, a, ga, phi1, corr, Jm, Ub, g, p3 = geo.rs
    n = P0.shape[0]
    m = phi.shape[0]
    for i in range(n):
        thm[i] = 0.5 * z1[i]
        pm[i] = 0.5 * (P0[i] + z1[n + i])
    em_hamiltonian(geo, Q0, thm, pm, Q, T)  # leaves K, T at the midpoint
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
            gs += wk * em_hamiltonian(geo, Q0, tha, pm, Q, T)
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
        H1 = em_hamiltonian(geo, Q0, z1[:n], z1[n:], Q, T)
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
    rw = RowWork(x, q, R, rj, G, V, cb, acc, E, J6, phi, J, gam)
    loop_rows(tf, ti, Q, z1, lf, li, rw, 1)
    phi1[:] = phi
    chart(ti, Q0, thm, Q, T, sp)
    loop_rows(tf, ti, Q, z1, lf, li, rw, 2)
    chart_product(J, Tm, Jm, m, n)
    if dq2 > 0.0:
        for r in range(m):
            t = phi1[r] - phi0[r]
            for c2 in range(n):
                t -= Jm[r, c2] * z1[c2]
            # a gap within the rows' round-off (metres, radians) is not corrected: near
            # rest that noise over |dq|^2 swamped the rows (a servo holding a coupled arm)
            corr[r] = t if abs(t) > DG_NOISE else 0.0
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
