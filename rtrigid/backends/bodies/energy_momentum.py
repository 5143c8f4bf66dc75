"""``energy_momentum``: QUAT.EM of 000 (51), solved in body angular momentum (3 unknowns).

The scheme is exactly 000 (51).  What changes is how its equations are solved.
:mod:`.energy_momentum_appd` solves 000 (52)_1 and (53) for (theta, p_{n+1}) as Appendix D
does: 7 unknowns, or 10 with a free body's position.  Here that system is reduced once more,
by hand:

On the manifold q.p = 0 (which the scheme preserves, 000 §4.4) write p = q o (0, 2L), with L
the body angular momentum about the reference point, and u = h/8 J^-1 (L_n + L_{n+1}).  Then
000 (52)_1 reads q_{n+1} - q_n = (q_n + q_{n+1}) o (0, u).  Its solution is the Cayley map
q_{n+1} = q_n o c, c = (1 - |u|², 2u) / (1 + |u|²), with q_mid = q_n o (1 + U)/(1 + |u|²),
U = (0, u).  Substituting this and p = q o (0, 2L) into (53), and multiplying by the
non-zero scalar (1 + |u|²)/2, leaves three equations for L_{n+1}:

    r = (1 - |u|²) (L1 - L0) + 2 u x (L1 + L0) + 2 (u.(L1 - L0)) u + h/2 Im[(1 - U) o y] = 0,
    y = conj(q_n) o grad V(q_mid),

where grad V is the exact discrete gradient of the loads.  For a force at a body point
(gravity, applied forces) it is y = 2/(1+|u|²) F_b o (1+U) o C, with F_b the world force seen
in the body frame at t_n (a pure quaternion) and C the load point.

An applied torque is not a potential's gradient, and enters as the jointed scheme enters it:
as the exact world balance R_{n+1} L_{n+1} - R_n L_n = h T of its moment.  In the body frame at
t_n that is R(c) L1 - L0 = h T_b, and since r above is (1 - U) o (R(c) L1 - L0) o (1 + U) for
the torque-free part, T contributes -h (1 - U) o T_b o (1 + U) = h/2 Im[(1 - U) o y_T] with
y_T = -2 T_b o (1 + U).  (Through the quaternion form, the discrete work 2 T.E(q_mid)(q1 - q0)
of 000 (51), the same term carries the factor |q_mid|² = 1/(1+|u|²) = cos²(phi/4): the
momentum fell short of h T by that factor, 2 % at 0.6 rad per step.)  Energy conservation is
untouched: it concerns the potential loads, and their terms are unchanged.

The Jacobian dr/dL1 below is analytic.  A free body's centre of mass moves under
constant loads by the exact mid-point rule.  Bodies with springs use the Appendix D solver,
which handles their x-q coupling.

Newton stops only when the residual is exactly zero, or is below 1e-9 and has either stalled
(it no longer falls by 4x) or followed an update at round-off size (<= 4 eps |L|): then the
iterate before that update was already converged.  A fixed residual tolerance -- even 4 eps
-- leaves a truncation error of the same sign in every step, which accumulates linearly
(measured: 1e-16 per step); and at the round-off floor the residual can drop 4x by chance,
which the update test catches.  Stopping at a fixed tolerance leaves ~1e-12 per step, which accumulates.
Failure means no convergence in ``max_iter`` iterations, a singular Jacobian, or a non-finite
value.  It triggers the documented fallback: the step is redone from its start as 2, 4, ...,
2**max_halvings equal sub-steps.  If that fails too, the kernel stops before the failed step
and returns FAILED, and :class:`rtrigid.Simulation` raises.
"""
import numpy as np

from rtrigid._jit import jit, jit_inline
from rtrigid.backends.newton import converged
from rtrigid.backends.bodies import energy_momentum_appd as appd
from rtrigid.backends.buffers import (
    FAILED,
    OK,
    SOLVER_HALVINGS,
    SOLVER_MAX_ITER,
    STAT_FALLBACKS,
    STAT_ITERS,
    STAT_MAX_ITERS,
    STAT_STEPS,
    USED_FALLBACK,
)
from rtrigid.backends.bodies.common import open_buffers, pivot_kinematics, restore_body, state_view
from rtrigid.backends.bodies.layout import BodiesModel, B_COM, B_JINV, B_MASS, PIVOTED
from rtrigid.maths.quat import qmul_t, rotate_t



def work_size(nb):
    """Scratch of the Appendix D solver, used for bodies with springs."""
    return appd.work_size(nb)


@jit
def _solve3(a, r):
    """Solve the 3x3 system a x = r (a: 9-tuple, row-major) by Cramer's rule; None if singular."""
    a00, a01, a02, a10, a11, a12, a20, a21, a22 = a
    c00 = a11 * a22 - a12 * a21
    c01 = a12 * a20 - a10 * a22
    c02 = a10 * a21 - a11 * a20
    det = a00 * c00 + a01 * c01 + a02 * c02
    if not (abs(det) > 0.0) or not np.isfinite(det):
        return False, (0.0, 0.0, 0.0)
    inv = 1.0 / det
    x0 = (r[0] * c00 + a01 * (a12 * r[2] - r[1] * a22) + a02 * (r[1] * a21 - a11 * r[2])) * inv
    x1 = (a00 * (r[1] * a22 - a12 * r[2]) + r[0] * c01 + a02 * (a10 * r[2] - r[1] * a20)) * inv
    x2 = (a00 * (a11 * r[2] - r[1] * a21) + a01 * (r[1] * a20 - a10 * r[2]) + r[0] * c02) * inv
    return True, (x0, x1, x2)


@jit_inline
def _torque_free(tb):
    """Whether the body-frame torque tb is exactly zero (see :func:`_load_quaternion`)."""
    return tb[0] == 0.0 and tb[1] == 0.0 and tb[2] == 0.0


@jit
def _load_quaternion(fb, tb, c, u, n):
    """Y0 = F_b o (1+U) o C - n T_b o (1+U), with pure quaternions F_b, T_b, C, U = (0, u)
    and n = 1 + |u|², so that y = 2/n Y0 (the torque's term without the factor 2/n).

    ``tb`` (0, 0, 0): no applied torque, whose terms are then skipped, here and in the
    Jacobian (they cost ~3 % of a step).  One compiled version serves both cases: a None
    for "no torque" made numba compile the solve twice, ~2.5 s of a first run's start."""
    a = qmul_t(0.0, fb[0], fb[1], fb[2], 1.0, u[0], u[1], u[2])
    a = qmul_t(a[0], a[1], a[2], a[3], 0.0, c[0], c[1], c[2])
    if _torque_free(tb):
        return a
    t = qmul_t(0.0, tb[0], tb[1], tb[2], 1.0, u[0], u[1], u[2])
    return (a[0] - n * t[0], a[1] - n * t[1], a[2] - n * t[2], a[3] - n * t[3])


@jit
def _im_one_minus_u(u, y):
    """Im[(1 - U) o y] = w - s u - u x w for y = (s, w)."""
    s, w0, w1, w2 = y
    return (w0 - s * u[0] - (u[1] * w2 - u[2] * w1),
            w1 - s * u[1] - (u[2] * w0 - u[0] * w2),
            w2 - s * u[2] - (u[0] * w1 - u[1] * w0))


@jit
def _dr_du(j, u, n, y0, yt, y, fb, tb, c, sd, hh):
    """Column j of dr/du at fixed L1 (sd = (S, D, u.D) flat, S = L1 + L0, D = L1 - L0;
    hh = h/2):

    -2 u_j D + 2 e_j x S + 2 D_j u + 2 (u.D) e_j + h/2 (Im[(1-U) o dy_j] - Im[E_j o y]),
    with dy_j = 2/n (F_b o E_j o C - n T_b o E_j - 2 u_j Y_T - 2 u_j / n Y0), Y0 of
    :func:`_load_quaternion` and Y_T = T_b o (1+U) (``yt``).
    """
    s0, s1, s2, d0, d1, d2, ud = sd
    e0 = 1.0 if j == 0 else 0.0
    e1 = 1.0 if j == 1 else 0.0
    e2 = 1.0 if j == 2 else 0.0
    z = qmul_t(0.0, fb[0], fb[1], fb[2], 0.0, e0, e1, e2)
    z = qmul_t(z[0], z[1], z[2], z[3], 0.0, c[0], c[1], c[2])
    g = 2.0 / n
    f = 2.0 * u[j] / n
    if _torque_free(tb):
        dy = (g * (z[0] - f * y0[0]), g * (z[1] - f * y0[1]), g * (z[2] - f * y0[2]),
              g * (z[3] - f * y0[3]))
    else:
        zt = qmul_t(0.0, tb[0], tb[1], tb[2], 0.0, e0, e1, e2)
        k = 2.0 * u[j]
        dy = (g * (z[0] - n * zt[0] - k * yt[0] - f * y0[0]),
              g * (z[1] - n * zt[1] - k * yt[1] - f * y0[1]),
              g * (z[2] - n * zt[2] - k * yt[2] - f * y0[2]),
              g * (z[3] - n * zt[3] - k * yt[3] - f * y0[3]))
    dti = _im_one_minus_u(u, dy)
    ey = qmul_t(0.0, e0, e1, e2, y[0], y[1], y[2], y[3])
    dj = e0 * d0 + e1 * d1 + e2 * d2
    uj = u[j]
    return (-2.0 * uj * d0 + 2.0 * (e1 * s2 - e2 * s1) + 2.0 * dj * u[0] + 2.0 * ud * e0
            + hh * (dti[0] - ey[1]),
            -2.0 * uj * d1 + 2.0 * (e2 * s0 - e0 * s2) + 2.0 * dj * u[1] + 2.0 * ud * e1
            + hh * (dti[1] - ey[2]),
            -2.0 * uj * d2 + 2.0 * (e0 * s1 - e1 * s0) + 2.0 * dj * u[2] + 2.0 * ud * e2
            + hh * (dti[2] - ey[3]))


@jit
def rotation_residual(h, b, l0, l1, c, fb, tb):
    """r(L1) of the module docstring and the intermediates its Jacobian needs.

    b: 9-tuple h/8 J^-1.  Returns (r, u, y0) with Y0 of :func:`_load_quaternion`.
    """
    s0, s1, s2 = l1[0] + l0[0], l1[1] + l0[1], l1[2] + l0[2]
    d0, d1, d2 = l1[0] - l0[0], l1[1] - l0[1], l1[2] - l0[2]
    u = (b[0] * s0 + b[1] * s1 + b[2] * s2, b[3] * s0 + b[4] * s1 + b[5] * s2,
         b[6] * s0 + b[7] * s1 + b[8] * s2)
    uu = u[0] * u[0] + u[1] * u[1] + u[2] * u[2]
    ud = u[0] * d0 + u[1] * d1 + u[2] * d2
    y0 = _load_quaternion(fb, tb, c, u, 1.0 + uu)
    g = 2.0 / (1.0 + uu)
    t = _im_one_minus_u(u, (g * y0[0], g * y0[1], g * y0[2], g * y0[3]))
    hh = 0.5 * h
    r = ((1.0 - uu) * d0 + 2.0 * (u[1] * s2 - u[2] * s1) + 2.0 * ud * u[0] + hh * t[0],
         (1.0 - uu) * d1 + 2.0 * (u[2] * s0 - u[0] * s2) + 2.0 * ud * u[1] + hh * t[1],
         (1.0 - uu) * d2 + 2.0 * (u[0] * s1 - u[1] * s0) + 2.0 * ud * u[2] + hh * t[2])
    return r, u, y0


@jit
def rotation_jacobian(h, b, l0, l1, c, fb, tb, u, y0):
    """dr/dL1 = A + M B as a row-major 9-tuple (A at fixed u, M = dr/du, B = h/8 J^-1)."""
    s0, s1, s2 = l1[0] + l0[0], l1[1] + l0[1], l1[2] + l0[2]
    d0, d1, d2 = l1[0] - l0[0], l1[1] - l0[1], l1[2] - l0[2]
    uu = u[0] * u[0] + u[1] * u[1] + u[2] * u[2]
    n = 1.0 + uu
    ud = u[0] * d0 + u[1] * d1 + u[2] * d2
    g = 2.0 / n
    y = (g * y0[0], g * y0[1], g * y0[2], g * y0[3])
    if _torque_free(tb):
        yt = y  # not read without a torque
    else:
        yt = qmul_t(0.0, tb[0], tb[1], tb[2], 1.0, u[0], u[1], u[2])
    hh = 0.5 * h
    sd = (s0, s1, s2, d0, d1, d2, ud)
    m0 = _dr_du(0, u, n, y0, yt, y, fb, tb, c, sd, hh)
    m1 = _dr_du(1, u, n, y0, yt, y, fb, tb, c, sd, hh)
    m2 = _dr_du(2, u, n, y0, yt, y, fb, tb, c, sd, hh)
    diag = 1.0 - uu
    return (
        diag + 2.0 * u[0] * u[0] + m0[0] * b[0] + m1[0] * b[3] + m2[0] * b[6],
        2.0 * u[0] * u[1] - 2.0 * u[2] + m0[0] * b[1] + m1[0] * b[4] + m2[0] * b[7],
        2.0 * u[0] * u[2] + 2.0 * u[1] + m0[0] * b[2] + m1[0] * b[5] + m2[0] * b[8],
        2.0 * u[1] * u[0] + 2.0 * u[2] + m0[1] * b[0] + m1[1] * b[3] + m2[1] * b[6],
        diag + 2.0 * u[1] * u[1] + m0[1] * b[1] + m1[1] * b[4] + m2[1] * b[7],
        2.0 * u[1] * u[2] - 2.0 * u[0] + m0[1] * b[2] + m1[1] * b[5] + m2[1] * b[8],
        2.0 * u[2] * u[0] - 2.0 * u[1] + m0[2] * b[0] + m1[2] * b[3] + m2[2] * b[6],
        2.0 * u[2] * u[1] + 2.0 * u[0] + m0[2] * b[1] + m1[2] * b[4] + m2[2] * b[7],
        diag + 2.0 * u[2] * u[2] + m0[2] * b[2] + m1[2] * b[5] + m2[2] * b[8],
    )


@jit
def solve_rotation(h, max_iter, jinv, l0, c, fb, tb):
    """Newton for L_{n+1} of one body on scalars (see the module docstring).

    jinv: 9-tuple J^-1 about the reference point; l0: L_n; c: load point (centre of mass)
    relative to the reference point; fb, tb: world force at c and world torque, in the body
    frame at t_n (tb (0, 0, 0): no torque).  Returns (iterations or -1, L_{n+1}, u).
    """
    k = 0.125 * h
    b = (k * jinv[0], k * jinv[1], k * jinv[2], k * jinv[3], k * jinv[4], k * jinv[5],
         k * jinv[6], k * jinv[7], k * jinv[8])
    # initial guess: the torque-free transport L1 = R(c)^T L0 with u from L0 alone
    u = (2.0 * (b[0] * l0[0] + b[1] * l0[1] + b[2] * l0[2]),
         2.0 * (b[3] * l0[0] + b[4] * l0[1] + b[5] * l0[2]),
         2.0 * (b[6] * l0[0] + b[7] * l0[1] + b[8] * l0[2]))
    uu = u[0] * u[0] + u[1] * u[1] + u[2] * u[2]
    n = 1.0 + uu
    l1 = rotate_t((1.0 - uu) / n, 2.0 * u[0] / n, 2.0 * u[1] / n, 2.0 * u[2] / n,
                  l0[0], l0[1], l0[2], -1.0)
    scale = max(1e-300, abs(l0[0]), abs(l0[1]), abs(l0[2]))
    previous = np.inf
    update = np.inf
    for it in range(max_iter + 1):
        r, u, y0 = rotation_residual(h, b, l0, l1, c, fb, tb)
        size = max(scale, abs(l1[0]), abs(l1[1]), abs(l1[2]))
        rnorm = max(abs(r[0]), abs(r[1]), abs(r[2])) / size
        if not np.isfinite(rnorm):
            return -1, l1, u
        if converged(rnorm, previous, update, size):
            return it, l1, u
        if it == max_iter:
            return -1, l1, u
        previous = rnorm
        ok, dl = _solve3(rotation_jacobian(h, b, l0, l1, c, fb, tb, u, y0), r)
        if not ok:
            return -1, l1, u
        l1 = (l1[0] - dl[0], l1[1] - dl[1], l1[2] - dl[2])
        update = max(abs(dl[0]), abs(dl[1]), abs(dl[2]))
    return -1, l1, u


@jit
def _has_springs(springi, b):
    for s in range(springi.shape[0]):
        if springi[s] == b:
            return True
    return False


# The stages of one step, as fractions of it: one, for this scheme.  :mod:`.energy_momentum4`
# runs the same loops with the stages of a symmetric composition.
ONE_STAGE = (1.0,)


@jit
def _fast_substeps(bm, b, h, m, max_iter, state, applied, stats, stages):
    """Advance body b (no springs) by m sub-steps of size h/m, each made of the ``stages``
    (fractions of it, summing to 1), every stage its own solve; False on a failed solve.
    ``bm``: the :data:`~.layout.BodiesModel`; ``state``: the state's views (x, q, v, w, P,
    pq, L) of ``state_view``; ``applied``: (f_app, t_app)."""
    gravity, bodyf, bodyi = bm.gravity, bm.bodyf, bm.bodyi
    x, q, v, w, P, pq, L = state
    f_app, t_app = applied
    hm = h / m
    jinv = (bodyf[b, B_JINV], bodyf[b, B_JINV + 1], bodyf[b, B_JINV + 2],
            bodyf[b, B_JINV + 3], bodyf[b, B_JINV + 4], bodyf[b, B_JINV + 5],
            bodyf[b, B_JINV + 6], bodyf[b, B_JINV + 7], bodyf[b, B_JINV + 8])
    c = (bodyf[b, B_COM], bodyf[b, B_COM + 1], bodyf[b, B_COM + 2])
    mass = bodyf[b, B_MASS]
    f = (mass * gravity[0] + f_app[b, 0], mass * gravity[1] + f_app[b, 1],
         mass * gravity[2] + f_app[b, 2])
    torqued = t_app[b, 0] != 0.0 or t_app[b, 1] != 0.0 or t_app[b, 2] != 0.0
    for i in range(m * len(stages)):
        hs = stages[i % len(stages)] * hm  # bitwise hm for the single stage 1.0
        q0, q1, q2, q3 = q[b, 0], q[b, 1], q[b, 2], q[b, 3]
        # L is this solver's primary variable; reading it back from pq (1/2 G(q) pq) or from
        # w (J J^-1 L) instead drifts systematically (measured: ~1e-16 per step).
        l0 = (L[b, 0], L[b, 1], L[b, 2])
        fb = rotate_t(q0, q1, q2, q3, f[0], f[1], f[2], -1.0)
        tb = (0.0, 0.0, 0.0)
        if torqued:
            tb = rotate_t(q0, q1, q2, q3, t_app[b, 0], t_app[b, 1], t_app[b, 2], -1.0)
        it, l1, u = solve_rotation(hs, max_iter, jinv, l0, c, fb, tb)
        if it < 0:
            return False
        stats[STAT_ITERS] += it
        stats[STAT_MAX_ITERS] = max(stats[STAT_MAX_ITERS], it)
        uu = u[0] * u[0] + u[1] * u[1] + u[2] * u[2]
        n = 1.0 + uu
        qn = qmul_t(q0, q1, q2, q3, (1.0 - uu) / n, 2.0 * u[0] / n, 2.0 * u[1] / n,
                    2.0 * u[2] / n)
        # The Cayley factor is unit, but round-off lets |q| wander by ~1e-15; L is read back
        # as 1/2 G(q) pq = |q|^2 L, so that wander would feed a systematic energy drift
        # (measured: 9e-15 per step).  The cheap projection 002 (63) removes it.
        inv = 1.0 / np.sqrt(qn[0] * qn[0] + qn[1] * qn[1] + qn[2] * qn[2] + qn[3] * qn[3])
        qn = (qn[0] * inv, qn[1] * inv, qn[2] * inv, qn[3] * inv)
        pn = qmul_t(qn[0], qn[1], qn[2], qn[3], 0.0, 2.0 * l1[0], 2.0 * l1[1], 2.0 * l1[2])
        for k in range(4):
            q[b, k] = qn[k]
            pq[b, k] = pn[k]
        for k in range(3):
            L[b, k] = l1[k]
        for k in range(3):
            w[b, k] = jinv[3 * k] * l1[0] + jinv[3 * k + 1] * l1[1] + jinv[3 * k + 2] * l1[2]
        if bodyi[b] == PIVOTED:
            pivot_kinematics(bodyf, b, x, q, v, w, P)
        else:
            for k in range(3):
                p_new = P[b, k] + hs * f[k]
                x[b, k] += hs * (P[b, k] + p_new) / (2.0 * mass)
                P[b, k] = p_new
                v[b, k] = p_new / mass
    return True


@jit
def _spring_body_substeps(bm, b, h, m, S, S_prev, f_app,
                          t_app, max_iter, work, stats, stages):
    """The Appendix D solver for body b: bodies with springs, whose x and q are coupled."""
    gravity, bodyf, bodyi, springf, springi = bm
    nb = bodyi.shape[0]
    state = state_view(S, nb)
    prev = state_view(S_prev, nb)
    newton, buf = appd.carve(work)
    if len(stages) == 1:
        return appd.substeps(bm, b, h, m, state, prev,
                             f_app, t_app, max_iter, newton, buf, stats)
    for i in range(m * len(stages)):
        if not appd.substeps(bm, b,
                             stages[i % len(stages)] * (h / m), 1, state, prev, f_app, t_app,
                             max_iter, newton, buf, stats):
            return False
    return True


@jit_inline
def step_loop(n, dt, F, I, all_appendix_d, stages):
    """The step loop with the sub-step fallback of :mod:`.implicit` (see ``run`` there: a
    function handed to a loop is a real call, whose array arguments cost reference counts,
    0.3 us a step here, so this loop calls its solvers directly).

    ``all_appendix_d``: True sends every body through the Appendix D solver, False only those
    that springs pull; None (a model without springs) none -- numba then prunes that branch
    by type and never compiles the Appendix D solver.  ``stages``: the fractions of a step
    that are solved one after the other (:data:`ONE_STAGE` here); the fallback redoes the
    whole step, all stages, as 2, 4, ... equal sub-steps.
    """
    (gravity, bodyf, bodyi, springf, springi, S, S_prev, f_app, t_app, solver, stats,
     work) = open_buffers(F, I)
    bm = BodiesModel(gravity, bodyf, bodyi, springf, springi)
    nb = bodyi.shape[0]
    state = state_view(S, nb)
    applied = (f_app, t_app)
    max_iter = int(solver[SOLVER_MAX_ITER])
    most = 2 ** int(solver[SOLVER_HALVINGS])
    flags = OK
    for _ in range(n):
        for i in range(S.shape[0]):
            S_prev[i] = S[i]
        for b in range(nb):
            m = 1
            while True:
                if all_appendix_d is not None and (all_appendix_d or _has_springs(springi, b)):
                    ok = _spring_body_substeps(bm, b, dt, m,
                                               S, S_prev, f_app, t_app, max_iter, work, stats,
                                               stages)
                else:
                    ok = _fast_substeps(bm, b, dt, m, max_iter, state, applied, stats, stages)
                if ok or m >= most:
                    break
                restore_body(S, S_prev, nb, b)
                m *= 2
            if not ok:
                for i in range(S.shape[0]):
                    S[i] = S_prev[i]
                return FAILED | flags
            if m > 1:
                stats[STAT_FALLBACKS] += 1
                flags = USED_FALLBACK
        stats[STAT_STEPS] += 1
    return flags


@jit
def step_rigid(n, dt, F, I):
    """Advance ``n`` steps of a model without springs (the kernel contract of
    rtrigid.backends.buffers); the Appendix D solver is not compiled."""
    return step_loop(n, dt, F, I, None, ONE_STAGE)


@jit
def step(n, dt, F, I):
    """Advance ``n`` steps of size ``dt`` (the kernel contract of rtrigid.backends.buffers)."""
    return step_loop(n, dt, F, I, False, ONE_STAGE)


@jit
def step_appendix_d(n, dt, F, I):
    """The same scheme with every body solved as 000 App. D does (``energy_momentum_appd``)."""
    return step_loop(n, dt, F, I, True, ONE_STAGE)
