"""``energy_momentum_appd``: QUAT.EM of 000 (51), solved as 000 Appendix D does.

The reference solver of the scheme, and the one ``energy_momentum`` uses for bodies with
springs (whose position and orientation are coupled).

Unknowns per body and step: the incremental rotation vector theta with
q_{n+1} = exp((0, theta/2)) o q_n (000 (54)), the quaternion momentum p_{n+1}, and for a free
body its centre-of-mass position x_{n+1} (the linear momentum then follows from the mid-point
rule).  The residual is 000 (52)_1 together with (53): the momentum balance pre-multiplied by
the discrete null-space matrix G(q_{n+1/2}), which removes the unit-length multiplier.  Loads
enter through an exact discrete gradient (:func:`rtrigid.forces.discrete_gradient`), so energy
is conserved to round-off when no outside work is done, and so is the angular momentum about
every axis the loads are symmetric about (000 App. C).

Newton stops when the residual is exactly zero, or is below 1e-9 and has stalled (it no
longer falls by 4x) or followed an update at round-off size: stopping at a fixed tolerance
leaves an error of one sign per step, which accumulates.
Failure -- no convergence in ``max_iter`` iterations, a singular Jacobian, or a non-finite
value -- triggers the documented fallback: the step is redone from its start as 2, 4, ...,
2**max_halvings equal sub-steps.  If that fails too the kernel stops before the failed step
and returns FAILED; :class:`rtrigid.Simulation` then raises.  The step loop and that fallback
are shared with ``energy_momentum`` (:func:`.energy_momentum.step_appendix_d`).
"""
import numpy as np

from rtrigid._jit import jit
from rtrigid.backends.newton import converged
from rtrigid.backends.bodies.forces import discrete_gradient
from rtrigid.backends.buffers import STAT_ITERS, STAT_MAX_ITERS
from rtrigid.backends.bodies.common import body_velocities
from rtrigid.maths.linalg import matmul, matmul_nt, matvec, solve_inplace
from rtrigid.backends.bodies.layout import B_JINV, B_JREF, B_MASS, B_PIVOT, PIVOTED
from rtrigid.maths.quat import Emat, Gmat, Qleft, Qright, dexp_matrix, quat_from_rotvec, quat_mul



NEWTON_WORK = 128 + 100 + 10 + 7 + 49 + 14 + 192 + 40 + 12 + 9 + 24
BODY_BUFFERS = (3, 4, 3, 4, 3, 4, 4, 3)  # x0 q0 P0 p0 x1 q1 p1 theta


def work_size(nb):
    """Scratch for one body's Newton solve plus the per-body step buffers."""
    return NEWTON_WORK + sum(BODY_BUFFERS)


@jit
def carve(work):
    """Named views into the scratch array (see the comments for what each holds)."""
    o = 0
    dgw = work[o:o + 128]  # discrete-gradient scratch
    o += 128
    jac = work[o:o + 100].reshape((10, 10))  # Jacobian
    o += 100
    res = work[o:o + 10]  # residual, then Newton increment
    o += 10
    grad = work[o:o + 7]  # discrete gradient of the loads
    o += 7
    dgrad = work[o:o + 49].reshape((7, 7))  # its derivative w.r.t. z_{n+1}
    o += 49
    zz = work[o:o + 14].reshape((2, 7))  # z_n, z_{n+1}
    o += 14
    m4 = work[o:o + 192].reshape((12, 4, 4))  # 4x4 matrices
    o += 192
    v4 = work[o:o + 40].reshape((10, 4))  # quaternions
    o += 40
    dqdth = work[o:o + 12].reshape((4, 3))  # dq/dtheta
    o += 12
    dexp = work[o:o + 9].reshape((3, 3))  # H(theta)
    o += 9
    m34 = work[o:o + 24].reshape((2, 3, 4))  # G(q_mid), E(q1)
    o += 24
    newton = (dgw, jac, res, grad, dgrad, zz, m4, v4, dqdth, dexp, m34)
    buf = (work[o:o + 3], work[o + 3:o + 7], work[o + 7:o + 10], work[o + 10:o + 14],
           work[o + 14:o + 17], work[o + 17:o + 21], work[o + 21:o + 25], work[o + 25:o + 28])
    return newton, buf


@jit
def _qbar_t(p, out):
    """Qbar(p)^T = [p^T ; -G(p)], so that Qleft(dq)^T p = Qbar(p)^T dq."""
    Gmat(p, out[1:4, :])
    for j in range(4):
        out[0, j] = p[j]
        for i in range(1, 4):
            out[i, j] = -out[i, j]
    return out


@jit
def _jinv4(bodyf, b, out):
    """Inverse of the extended inertia J4 = diag(tr J / 2, J), 000 (32)."""
    r = bodyf[b]
    out[:, :] = 0.0
    out[0, 0] = 2.0 / (r[B_JREF] + r[B_JREF + 4] + r[B_JREF + 8])
    for i in range(3):
        for j in range(3):
            out[1 + i, 1 + j] = r[B_JINV + 3 * i + j]
    return out


@jit
def _ql_t_pair(a, b, c, d, qlbuf, out):
    """out = Qleft(a)^T b + Qleft(c)^T d (sums such as pi_n + pi_{n+1}, 000 (46))."""
    qa = Qleft(a, qlbuf[0])
    qc = Qleft(c, qlbuf[1])
    for i in range(4):
        acc = 0.0
        for k in range(4):
            acc += qa[k, i] * b[k] + qc[k, i] * d[k]
        out[i] = acc
    return out


@jit
def residual(bm, b, h, start, unknowns, applied, q1, work):
    """Residual of 000 (52)_1, (53) and the translational mid-point rule at the ``unknowns``
    (theta, p1, x1) from the step's ``start`` (x0, q0, P0, p0) under the ``applied`` loads
    (f_app, t_app).

    Writes q1 = exp((0, theta/2)) o q0 and the residual into work[2][:n] (n = 7 for a pivoted
    body, 10 for a free one) and keeps the intermediates the Jacobian needs.  Returns the
    scaled max-norm of the residual.
    """
    gravity, bodyf, bodyi, springf, springi = bm
    x0, q0, P0, p0 = start
    theta, p1, x1 = unknowns
    f_app, t_app = applied
    dgw, _, res, grad, dgrad, zz, m4, v4, _, _, m34 = work
    e, qm, pm, s, a, kk, k4, tmp, fp, _ = (v4[0], v4[1], v4[2], v4[3], v4[4], v4[5], v4[6],
                                           v4[7], v4[8], v4[9])
    c8 = 0.125 * h
    jinv4 = _jinv4(bodyf, b, m4[0])
    quat_from_rotvec(theta, e)
    quat_mul(e, q0, q1)
    for k in range(4):
        qm[k] = 0.5 * (q0[k] + q1[k])
        pm[k] = 0.5 * (p0[k] + p1[k])
    # S = pi_n + pi_{n+1} with pi = Qleft(q)^T p, 000 (46); a = J4^-1 S
    _ql_t_pair(q0, p0, q1, p1, m4[1:3], s)
    matvec(jinv4, s, a)
    quat_mul(qm, a, tmp)
    rnorm = 0.0
    for i in range(4):
        res[i] = q1[i] - q0[i] - c8 * tmp[i]
        rnorm = max(rnorm, abs(res[i]))
    zz[0, :3] = x0
    zz[0, 3:] = q0
    zz[1, :3] = x1
    zz[1, 3:] = q1
    discrete_gradient(bm, b, zz[0], zz[1], f_app, t_app, grad,
                      dgrad, dgw)
    # K = Qleft(p0)^T q0 + Qleft(p1)^T q1, k4 = J4^-1 K; F_p = p1 - p0 + h/8 pm o k4 + h grad_q
    _ql_t_pair(p0, q0, p1, q1, m4[1:3], kk)
    matvec(jinv4, kk, k4)
    quat_mul(pm, k4, tmp)
    for i in range(4):
        fp[i] = p1[i] - p0[i] + c8 * tmp[i] + h * grad[3 + i]
    gm = Gmat(qm, m34[0])
    pscale = 1e-300
    for i in range(4):
        pscale = max(pscale, abs(p0[i]), abs(p1[i]))
    for i in range(3):
        acc = 0.0
        for k in range(4):
            acc += gm[i, k] * fp[k]
        res[4 + i] = acc
        rnorm = max(rnorm, abs(acc) / pscale)
    if bodyi[b] != PIVOTED:
        m = bodyf[b, B_MASS]
        xscale = 1e-300
        for i in range(3):
            res[7 + i] = 2.0 * m * (x1[i] - x0[i]) / h - 2.0 * P0[i] + h * grad[i]
            xscale = max(xscale, abs(P0[i]), m * abs(x1[i] - x0[i]) / h)
        for i in range(3):
            rnorm = max(rnorm, abs(res[7 + i]) / xscale)
    return rnorm


@jit
def jacobian(bodyi, bodyf, b, h, theta, p1, q1, work):
    """Analytic Jacobian of :func:`residual` w.r.t. (theta, p1, x1), into work[1][:n, :n].

    Must follow a call of :func:`residual` at the same point (it reuses the intermediates).
    Own derivation, matching 000 App. D (D1)-(D2): with dq1 = 1/2 E(q1)^T H(theta) dtheta,
      K_qq = I - h/8 (1/2 Qr(a) + Ql(qm) J4^-1 Qbar(p1)^T),   K_qp = -h/8 Ql(qm) J4^-1 Ql(q1)^T,
      K_pq = -1/2 G(F_p) + G(qm) (h/8 Ql(pm) J4^-1 Ql(p1)^T + h dgrad_qq),
      K_pp = G(qm) (I + h/8 (1/2 Qr(k4) + Ql(pm) J4^-1 Qbar(q1)^T)).
    """
    _, jac, _, _, dgrad, _, m4, v4, dqdth, dexp, m34 = work
    qm, pm, a, k4, fp = v4[1], v4[2], v4[4], v4[6], v4[8]
    free = bodyi[b] != PIVOTED
    n = 10 if free else 7
    c8 = 0.125 * h
    jinv4 = m4[0]
    gm = m34[0]
    jac[:n, :n] = 0.0
    e1 = Emat(q1, m34[1])
    dexp_matrix(theta, dexp)
    for i in range(4):
        for j in range(3):
            acc = 0.0
            for k in range(3):
                acc += e1[k, i] * dexp[k, j]
            dqdth[i, j] = 0.5 * acc
    # rows 0..3: R_q
    t_q = matmul(Qleft(qm, m4[1]), jinv4, m4[2])  # Ql(qm) J4^-1
    kqq = matmul(t_q, _qbar_t(p1, m4[3]), m4[4])
    qr = Qright(a, m4[5])
    for i in range(4):
        for j in range(4):
            kqq[i, j] = (1.0 if i == j else 0.0) - c8 * (0.5 * qr[i, j] + kqq[i, j])
    matmul(kqq, dqdth, jac[0:4, 0:3])
    matmul_nt(t_q, Qleft(q1, m4[6]), jac[0:4, 3:7], -c8)
    # rows 4..6: G(qm) F_p
    t_p = matmul(Qleft(pm, m4[1]), jinv4, m4[7])  # Ql(pm) J4^-1
    fq = matmul_nt(t_p, Qleft(p1, m4[8]), m4[9], c8)  # dF_p/dq1
    for i in range(4):
        for j in range(4):
            fq[i, j] += h * dgrad[3 + i, 3 + j]
    fpp = matmul(t_p, _qbar_t(q1, m4[3]), m4[10])  # dF_p/dp1
    qr = Qright(k4, m4[5])
    for i in range(4):
        for j in range(4):
            fpp[i, j] = (1.0 if i == j else 0.0) + c8 * (0.5 * qr[i, j] + fpp[i, j])
    kpq = matmul(gm, fq, m4[11][:3, :])
    gfp = Gmat(fp, m34[1])
    for i in range(3):
        for j in range(4):
            kpq[i, j] -= 0.5 * gfp[i, j]
    matmul(kpq, dqdth, jac[4:7, 0:3])
    matmul(gm, fpp, jac[4:7, 3:7])
    # a free body: coupling through x, and its translational balance (rows 7..9)
    if free:
        matmul(gm, dgrad[3:7, 0:3], jac[4:7, 7:10], h)
        matmul(dgrad[0:3, 3:7], dqdth, jac[7:10, 0:3], h)
        m = bodyf[b, B_MASS]
        for i in range(3):
            for j in range(3):
                jac[7 + i, 7 + j] = h * dgrad[i, j] + (2.0 * m / h if i == j else 0.0)
    return n


@jit
def solve_body(bm, b, h, buf, w0, applied, max_iter, work):
    """Newton on one body's step of size h.  Returns the iteration count, or -1 on failure.

    ``buf``: (x0, q0, P0, p0, x1, q1, p1, theta), the step's start and its unknowns; x0 is the
    reference point (centre of mass of a free body), w0 the body angular velocity used for
    the initial guess theta = h R(q0) w0, p1 = exp(theta/2) o p0.  ``applied``: (f_app, t_app).
    """
    gravity, bodyf, bodyi, springf, springi = bm
    x0, q0, P0, p0, x1, q1, p1, theta = buf
    res = work[2]
    jac = work[1]
    e = work[7][0]
    # spatial angular velocity R(q0) w0 = 2 E(q0) qdot, with qdot = 1/2 G(q0)^T w0
    qd = work[7][9]
    g0 = Gmat(q0, work[10][0])
    e0 = Emat(q0, work[10][1])
    for k in range(4):
        acc = 0.0
        for i in range(3):
            acc += g0[i, k] * w0[i]
        qd[k] = 0.5 * acc
    for i in range(3):
        acc = 0.0
        for k in range(4):
            acc += e0[i, k] * qd[k]
        theta[i] = 2.0 * h * acc
    quat_mul(quat_from_rotvec(theta, e), p0, p1)
    for i in range(3):
        x1[i] = x0[i] + h * P0[i] / bodyf[b, B_MASS]
    previous = np.inf
    update = np.inf
    for it in range(max_iter + 1):
        r = residual(bm, b, h, (x0, q0, P0, p0), (theta, p1, x1), applied, q1, work)
        if not np.isfinite(r):
            return -1
        if converged(r, previous, update, 1.0):
            return it
        if it == max_iter:
            return -1
        previous = r
        n = jacobian(bodyi, bodyf, b, h, theta, p1, q1, work)
        for i in range(n):
            res[i] = -res[i]
        if not solve_inplace(jac, res, n):
            return -1
        pscale = 1e-300
        for i in range(4):
            pscale = max(pscale, abs(p1[i]))
        update = 0.0
        for i in range(3):
            theta[i] += res[i]
            update = max(update, abs(res[i]))
        for i in range(4):
            p1[i] += res[3 + i]
            update = max(update, abs(res[3 + i]) / pscale)
        if n == 10:
            for i in range(3):
                x1[i] += res[7 + i]
    return -1


@jit
def substeps(bm, b, h, m, state, prev, f_app, t_app, max_iter,
              work, buf, stats):
    """Advance body b by m sub-steps of size h/m; on failure restore it from ``prev``."""
    gravity, bodyf, bodyi, springf, springi = bm
    x, q, v, w, P, pq, L = state
    x0, q0, P0, p0, x1, q1, p1, theta = buf
    hs = h / m
    free = bodyi[b] != PIVOTED
    for _ in range(m):
        x0[:] = x[b] if free else bodyf[b, B_PIVOT:B_PIVOT + 3]
        q0[:] = q[b]
        P0[:] = P[b]
        p0[:] = pq[b]
        it = solve_body(bm, b, hs, buf, w[b], (f_app, t_app), max_iter, work)
        if it < 0:
            for now, start in zip(state, prev):
                now[b] = start[b]
            return False
        stats[STAT_ITERS] += it
        stats[STAT_MAX_ITERS] = max(stats[STAT_MAX_ITERS], it)
        q[b] = q1
        pq[b] = p1
        if free:
            for k in range(3):
                P[b, k] = 2.0 * bodyf[b, B_MASS] * (x1[k] - x0[k]) / hs - P0[k]
            x[b] = x1
        body_velocities(bodyf, bodyi, b, x, q, v, w, P, pq, L)
    return True
