"""``variational``: the quaternion variational integrator QUAT.VI of 000 Appendix E.

The scheme is the discrete Euler-Lagrange equations (E1) for the discrete Lagrangian
L_d(q_n, q_{n+1}) = T_d - h V((q_n + q_{n+1})/2) with T_d = 1/(2h) q_{n+1} . M4~(q_n) q_{n+1},
M4~(q) = 4 G(q)^T J G(q), together with |q_{n+1}| = 1.  It is run in its one-step
(position-momentum) form, which is the same map:

With c = conj(q_n) o q_{n+1} = (c0, xi) the relative rotation in body axes, and using
G(q_n) G(q_{n+1})^T a = c0 a + xi x a (all from 000 §2.5, App. A), the body components of the
discrete Legendre transforms are

    L_n     = 1/2 G(q_n) p-_{n,n+1}   = (2/h) (c0 J xi + xi x J xi) + (h/4) G(q_n) gV,
    L_{n+1} = 1/2 G(q_{n+1}) D2 L_d  = (2/h) (c0 J xi - xi x J xi) - (h/4) G(q_{n+1}) gV,

gV the gradient of V at the mid-point (q_n + q_{n+1})/2.  (E1) projected with G(q_n) says that
the L_n computed from the interval before equals the one from the interval after; its q_n
component only fixes the multiplier lambda_n.  So a step solves the first line for xi (three
unknowns, c0 = sqrt(1 - |xi|^2): the relative rotation stays below a half turn), sets
q_{n+1} = q_n o c and evaluates the second line.  The start-up of App. E from (q0, p0) is the
same solve with L_0 = 1/2 G(q_0) p_0 = J Omega_0: the state's L is the discrete body momentum
and needs no extra storage -- it carries exactly the information of q_{n-1}.

The discrete angular momentum of App. E, 1/2 E(q_n) p-_{n,n+1} = R(q_n) L_n, is what
``Simulation.momentum()`` reports, so its components along symmetry axes of the loads are
conserved to round-off.  The body velocity in the state is w = J^-1 L (a derived quantity; the
scheme does not conserve energy exactly, it keeps it bounded).

A free body's centre of mass follows the same variational rule with L_d's translational part
(m/2h)|x_{n+1} - x_n|^2: P_n = m (x_{n+1} - x_n)/h + (h/2) gV_x, P_{n+1} = m (x_{n+1} - x_n)/h
- (h/2) gV_x (explicit for gravity and applied forces; solved together with xi when a spring
couples x and q).  Loads enter through :func:`rtrigid.forces.discrete_gradient`: for gravity
and constant applied forces that is exactly grad V at the mid-point, as in App. E, and a
constant applied world torque adds its discrete work 2 tau . E(q_mid)(q_{n+1} - q_n); for
springs it is the symmetric (Gonzalez) discrete gradient rather than grad V(q_mid), which keeps
the map symmetric and momentum-conserving but is a departure from App. E.

Newton stops by the stall rule of :mod:`.implicit`; a failed step falls back to sub-steps.
000 §5.2 reports that QUAT.VI needed dt <= 0.007 to converge on the gyro top.
"""
import numpy as np

from rtrigid._jit import jit
from rtrigid.backends.newton import converged
from rtrigid.backends.bodies.forces import discrete_gradient
from rtrigid.backends.bodies import implicit
from rtrigid.backends.buffers import STAT_ITERS, STAT_MAX_ITERS
from rtrigid.backends.bodies.common import g_mul, has_springs, state_view, velocities_from_momenta
from rtrigid.maths.linalg import solve_inplace
from rtrigid.backends.bodies.layout import B_JREF, B_MASS, B_PIVOT, PIVOTED
from rtrigid.maths.quat import qmul_t

_DGW, _GRAD, _DGRAD, _ZZ, _JAC, _RES, _U, _END = 0, 128, 135, 184, 198, 234, 240, 246


def work_size(nb):
    """One body's Newton scratch (bodies are solved one after the other)."""
    return _END


@jit
def carve(work):
    """(dgw, grad, dgrad, zz, jac, res, u): views into the scratch array.

    dgw (128,) discrete-gradient scratch; grad (7,), dgrad (7,7) its output; zz (2,7) the
    configurations z = (x_ref, q) at both ends; jac (6,6); res (6,) residual, then Newton
    increment; u (6,) unknowns (xi, x_{n+1}).
    """
    return (work[_DGW:_GRAD], work[_GRAD:_DGRAD], work[_DGRAD:_ZZ].reshape((7, 7)),
            work[_ZZ:_JAC].reshape((2, 7)), work[_JAC:_RES].reshape((6, 6)), work[_RES:_U],
            work[_U:_END])


@jit
def _jmul(bodyf, b, a0, a1, a2):
    r = bodyf[b]
    o = B_JREF
    return (r[o] * a0 + r[o + 1] * a1 + r[o + 2] * a2,
            r[o + 3] * a0 + r[o + 4] * a1 + r[o + 5] * a2,
            r[o + 6] * a0 + r[o + 7] * a1 + r[o + 8] * a2)


@jit
def residual(bm, b, h, z0, l0, p0, f_app, t_app, u,
             coupled, work):
    """Residual of the step equations at u = (xi, x_{n+1}), into ``carve(work)[5]``.

    Rows 0..2: (2/h)(c0 J xi + xi x J xi) + (h/4) G(q_n) gV - L_n; rows 3..5 (only when
    ``coupled``): m (x_{n+1} - x_n)/h + (h/2) gV_x - P_n.  Leaves z_{n+1} in zz[1] and the
    discrete gradient (and its derivative) in grad, dgrad.  Returns the scaled max-norm, or
    inf when |xi| >= 1.
    """
    gravity, bodyf, bodyi, springf, springi = bm
    dgw, grad, dgrad, zz, _, res, _ = carve(work)
    xi0, xi1, xi2 = u[0], u[1], u[2]
    s2 = xi0 * xi0 + xi1 * xi1 + xi2 * xi2
    if not s2 < 1.0:
        return np.inf
    c0 = np.sqrt(1.0 - s2)
    q = z0[3:7]
    q1 = qmul_t(q[0], q[1], q[2], q[3], c0, xi0, xi1, xi2)
    for k in range(4):
        zz[1, 3 + k] = q1[k]
    m = bodyf[b, B_MASS]
    for k in range(3):
        zz[1, k] = u[3 + k] if coupled else z0[k]
    discrete_gradient(bm, b, z0, zz[1], f_app, t_app, grad,
                      dgrad, dgw)
    jx = _jmul(bodyf, b, xi0, xi1, xi2)
    gv = g_mul(q, grad[3:7])
    k2 = 2.0 / h
    k4 = 0.25 * h
    a = (c0 * jx[0] + xi1 * jx[2] - xi2 * jx[1], c0 * jx[1] + xi2 * jx[0] - xi0 * jx[2],
         c0 * jx[2] + xi0 * jx[1] - xi1 * jx[0])
    scale = 1e-300
    rnorm = 0.0
    for k in range(3):
        res[k] = k2 * a[k] + k4 * gv[k] - l0[k]
        scale = max(scale, abs(l0[k]), k2 * abs(a[k]), k4 * abs(gv[k]))
    for k in range(3):
        rnorm = max(rnorm, abs(res[k]) / scale)
    if coupled:
        xscale = 1e-300
        for k in range(3):
            res[3 + k] = m * (u[3 + k] - z0[k]) / h + 0.5 * h * grad[k] - p0[k]
            xscale = max(xscale, abs(p0[k]), m * abs(u[3 + k] - z0[k]) / h,
                         0.5 * h * abs(grad[k]))
        for k in range(3):
            rnorm = max(rnorm, abs(res[3 + k]) / xscale)
    return rnorm


@jit
def _row_dot(dgrad, i, dq):
    """Row i of d grad / d q_{n+1} applied to dq."""
    return (dgrad[i, 3] * dq[0] + dgrad[i, 4] * dq[1] + dgrad[i, 5] * dq[2]
            + dgrad[i, 6] * dq[3])


@jit
def jacobian(bodyf, b, h, z0, u, coupled, work):
    """d residual / d u (after :func:`residual` at the same u), into ``carve(work)[4]``."""
    _, _, dgrad, _, jac, _, _ = carve(work)
    n = 6 if coupled else 3
    xi = (u[0], u[1], u[2])
    c0 = np.sqrt(1.0 - (xi[0] * xi[0] + xi[1] * xi[1] + xi[2] * xi[2]))
    q = z0[3:7]
    k2 = 2.0 / h
    k4 = 0.25 * h
    jx = _jmul(bodyf, b, xi[0], xi[1], xi[2])
    for j in range(3):
        ej = (1.0 if j == 0 else 0.0, 1.0 if j == 1 else 0.0, 1.0 if j == 2 else 0.0)
        jc = (bodyf[b, B_JREF + j], bodyf[b, B_JREF + 3 + j], bodyf[b, B_JREF + 6 + j])
        dc0 = -xi[j] / c0
        # d/dxi_j of c0 J xi + xi x J xi
        da = (dc0 * jx[0] + c0 * jc[0] + ej[1] * jx[2] - ej[2] * jx[1] + xi[1] * jc[2]
              - xi[2] * jc[1],
              dc0 * jx[1] + c0 * jc[1] + ej[2] * jx[0] - ej[0] * jx[2] + xi[2] * jc[0]
              - xi[0] * jc[2],
              dc0 * jx[2] + c0 * jc[2] + ej[0] * jx[1] - ej[1] * jx[0] + xi[0] * jc[1]
              - xi[1] * jc[0])
        # dq1/dxi_j = q_n o (dc0, e_j); the gradient moves with z1 through dgrad
        dq = qmul_t(q[0], q[1], q[2], q[3], dc0, ej[0], ej[1], ej[2])
        dgq = g_mul(q, (_row_dot(dgrad, 3, dq), _row_dot(dgrad, 4, dq), _row_dot(dgrad, 5, dq),
                        _row_dot(dgrad, 6, dq)))
        for k in range(3):
            jac[k, j] = k2 * da[k] + k4 * dgq[k]
            if coupled:
                jac[3 + k, j] = 0.5 * h * _row_dot(dgrad, k, dq)
    if coupled:
        m = bodyf[b, B_MASS]
        for j in range(3):
            col = (dgrad[3, j], dgrad[4, j], dgrad[5, j], dgrad[6, j])
            gq = g_mul(q, col)
            for k in range(3):
                jac[k, 3 + j] = k4 * gq[k]
                jac[3 + k, 3 + j] = 0.5 * h * dgrad[k, j] + (m / h if k == j else 0.0)
    return n


@jit
def solve_step(bm, b, h, z0, l0, p0, w0, f_app, t_app,
               coupled, max_iter, work):
    """Newton for one body's step; returns the iteration count or -1.  The converged unknowns
    are left in ``carve(work)[6]``, z_{n+1} in zz[1] and the gradient in grad."""
    gravity, bodyf, bodyi, springf, springi = bm
    _, _, _, _, jac, res, u = carve(work)
    m = bodyf[b, B_MASS]
    # initial guess: the relative rotation of the current spin, xi = h w / 2
    for k in range(3):
        u[k] = 0.5 * h * w0[k]
        u[3 + k] = z0[k] + h * p0[k] / m
    s2 = u[0] * u[0] + u[1] * u[1] + u[2] * u[2]
    if s2 > 0.25:
        shrink = 0.5 / np.sqrt(s2)
        for k in range(3):
            u[k] *= shrink
    previous = np.inf
    update = np.inf
    for it in range(max_iter + 1):
        rnorm = residual(bm, b, h, z0, l0, p0, f_app, t_app,
                         u, coupled, work)
        if not np.isfinite(rnorm):
            return -1
        if converged(rnorm, previous, update, 1.0):
            return it
        if it == max_iter:
            return -1
        previous = rnorm
        n = jacobian(bodyf, b, h, z0, u, coupled, work)
        for i in range(n):
            res[i] = -res[i]
        if not solve_inplace(jac, res, n):
            return -1
        xs = max(1e-300, abs(u[0]), abs(u[1]), abs(u[2]))
        update = 0.0
        for k in range(3):
            update = max(update, abs(res[k]) / xs)
        for k in range(n):
            u[k] += res[k]
    return -1


@jit
def advance_body(bm, f_app, t_app, b, h, m, S, S_prev,
                 max_iter, work, stats):
    """Move body b through m sub-steps of size h/m; False when a Newton solve fails."""
    gravity, bodyf, bodyi, springf, springi = bm
    nb = bodyi.shape[0]
    x, q, v, w, P, pq, L = state_view(S, nb)
    _, grad, _, zz, _, _, u = carve(work)
    hs = h / m
    free = bodyi[b] != PIVOTED
    coupled = free and has_springs(springi, b)
    mass = bodyf[b, B_MASS]
    for _ in range(m):
        z0 = zz[0]
        for k in range(3):
            z0[k] = x[b, k] if free else bodyf[b, B_PIVOT + k]
        for k in range(4):
            z0[3 + k] = q[b, k]
        it = solve_step(bm, b, hs, z0, L[b], P[b], w[b],
                        f_app, t_app, coupled, max_iter, work)
        if it < 0:
            return False
        stats[STAT_ITERS] += it
        stats[STAT_MAX_ITERS] = max(stats[STAT_MAX_ITERS], it)
        xi = (u[0], u[1], u[2])
        c0 = np.sqrt(1.0 - (xi[0] * xi[0] + xi[1] * xi[1] + xi[2] * xi[2]))
        q1 = zz[1, 3:7]
        gv = g_mul(q1, grad[3:7])
        jx = _jmul(bodyf, b, xi[0], xi[1], xi[2])
        k2 = 2.0 / hs
        k4 = 0.25 * hs
        l1 = (k2 * (c0 * jx[0] - (xi[1] * jx[2] - xi[2] * jx[1])) - k4 * gv[0],
              k2 * (c0 * jx[1] - (xi[2] * jx[0] - xi[0] * jx[2])) - k4 * gv[1],
              k2 * (c0 * jx[2] - (xi[0] * jx[1] - xi[1] * jx[0])) - k4 * gv[2])
        inv = 1.0 / np.sqrt(q1[0] * q1[0] + q1[1] * q1[1] + q1[2] * q1[2] + q1[3] * q1[3])
        for k in range(4):
            q[b, k] = q1[k] * inv  # c is unit; this only removes round-off
        for k in range(3):
            L[b, k] = l1[k]
        if free:
            # P_{n+1} from the mid-point rule: the discrete Legendre transform of the far end
            for k in range(3):
                x1 = u[3 + k] if coupled else z0[k] + hs / mass * (P[b, k] - 0.5 * hs * grad[k])
                P[b, k] = mass * (x1 - z0[k]) / hs - 0.5 * hs * grad[k]
                x[b, k] = x1
        # derived fields from (q, L): pq = 2 G^T L, w = J^-1 L, and the pivot kinematics
        _derive(bodyf, bodyi, b, x, q, v, w, P, pq, L)
    return True


@jit
def _derive(bodyf, bodyi, b, x, q, v, w, P, pq, L):
    """pq = q o (0, 2L) (000 (46)), w = J^-1 L, v from P or the pivot; L itself is untouched
    (reading it back as 1/2 G(q) pq would feed |q|^2 round-off into the next step)."""
    p = qmul_t(q[b, 0], q[b, 1], q[b, 2], q[b, 3], 0.0, 2.0 * L[b, 0], 2.0 * L[b, 1],
               2.0 * L[b, 2])
    for k in range(4):
        pq[b, k] = p[k]
    velocities_from_momenta(bodyf, bodyi, b, x, q, v, w, P, L)


@jit
def step(n, dt, F, I):
    """Advance ``n`` steps of size ``dt``; the common kernel signature (see rtrigid.backends.buffers)."""
    return implicit.run(n, dt, F, I, advance_body)
