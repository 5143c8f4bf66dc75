"""``index1``: RK4 on the absolute quaternion index-1/0 form, 002 (37)-(40) = 001 (34)-(40).

Per body the unknowns are p (4 Euler parameters) and pdot (4); the unit-length constraint is
differentiated twice, <p, pddot> = -|pdot|^2, and the 5x5 mass-constraint system

    [ 4 G^T J G   p ] [ pddot  ]   [ gyro + Q    ]
    [ p^T         0 ] [ lambda ] = [ -|pdot|^2   ]

(G = G(p) of 000 §2.5, which is 001's L; J the inertia about the reference point) is solved in
closed form, 002 (39) / 001 (35): pddot = 1/(4|p|^4) G^T J^-1 G (gyro + Q) - |pdot|^2 p/|p|^2,
lambda = p.(gyro + Q)/|p|^2 (exact for any p != 0).  The forms differ in what lands in the
radial (p) direction, which moves only the multiplier:

* form 23 (001 (23)):  gyro = -8 G^T G Gdot^T J G pdot  -> lambda = p.Q;
* form 29 (001 (29)):  gyro = -8 Gdot^T J G pdot        -> lambda = p.Q + 2 Omega.J Omega
  (001 (30): -8 p^T Gdot^T J G pdot);
* Q_p1 (001 (59)): Q = 2 G^T n, n the body torque about the reference point  -> p.Q = 0;
* Q_p2 (001 (62)): Q = sum over forces B2^T f with B2 = d(R(p) u)/dp = 2 E(p) u^- (000 (13)),
  u the load point from the reference point, plus 2 G^T m for pure moments -> p.Q = 2 (R u).f.

So lambda = 0 exactly for form 23 with Q_p1, as 001 (24), (37) state.  The registered
``index1`` is 002 (40): form 29 with Q_p2 (there psi_p = -grad V + 8 Q(pdot) I Q(pdot)^T p);
``Simulation(..., integrator="index1", options={"form": 23, "torque": 1})`` picks one of
the four.  :func:`multipliers` gives lambda at the current state.

After every RK4 step the cheap projection 002 (63) puts the state back on the constraint
manifold: p <- p/|p| (P), pdot <- pdot - <p, pdot> p (V).  A projected pdot is tangent, so it is
stored as the body angular velocity w = 2 G(p) pdot and rebuilt as pdot = 1/2 p o (0, w) at the
next step: the state (x, q, v, w) carries exactly the projected (p, pdot), nothing extra.
Loads come from :func:`rtrigid.forces.body_loads` (Q_p1) or are resolved per force (Q_p2).
"""
import numpy as np

from rtrigid._jit import jit, jit_inline
from rtrigid.backends.bodies.forces import spring_force, body_loads
from rtrigid.backends.buffers import NONFINITE, OK, STAT_STEPS
from rtrigid.backends.bodies.common import (
    applied_view,
    g_mul,
    gt_mul,
    mat3_vec,
    open_buffers,
    rolled_back,
    runtime_int,
    settle_body,
    state_view,
)
from rtrigid.backends.bodies.layout import BodiesModel, B_COM, B_JINV, B_JREF, B_MASS, PIVOTED, S_POINT
from rtrigid.maths.quat import qmul_t, rotate_t

FORMS = (23, 29)
TORQUES = (1, 2)


def work_size(nb):
    """This scheme needs no scratch beyond the state."""
    return 1


@jit_inline
def _b2t(q, f0, f1, f2, u0, u1, u2):
    """B2(u)^T f = 2 (u^-)^T E(q)^T f = -2 ((0, f) o q) o (0, u), 001 (62) with 000 (13)."""
    a = qmul_t(0.0, f0, f1, f2, q[0], q[1], q[2], q[3])
    r = qmul_t(a[0], a[1], a[2], a[3], 0.0, u0, u1, u2)
    return (-2.0 * r[0], -2.0 * r[1], -2.0 * r[2], -2.0 * r[3])


@jit_inline
def torque_p2(bm, f_app, t_app, b, x, q):
    """Q_p2 of 001 (62): every force through B2^T f at its point, pure moments as 2 G^T m."""
    gravity, bodyf, bodyi, springf, springi = bm
    m = bodyf[b, B_MASS]
    out = _b2t(q, m * gravity[0] + f_app[b, 0], m * gravity[1] + f_app[b, 1],
               m * gravity[2] + f_app[b, 2], bodyf[b, B_COM], bodyf[b, B_COM + 1],
               bodyf[b, B_COM + 2])
    if t_app[b, 0] != 0.0 or t_app[b, 1] != 0.0 or t_app[b, 2] != 0.0:
        mb = rotate_t(q[0], q[1], q[2], q[3], t_app[b, 0], t_app[b, 1], t_app[b, 2], -1.0)
        t = gt_mul(q, 2.0 * mb[0], 2.0 * mb[1], 2.0 * mb[2])
        out = (out[0] + t[0], out[1] + t[1], out[2] + t[2], out[3] + t[3])
    for s in range(springi.shape[0]):
        if springi[s] == b:
            fs, _ = spring_force(bodyf, bodyi, springf, s, b, x[0], x[1], x[2], q[0], q[1],
                                  q[2], q[3])
            t = _b2t(q, fs[0], fs[1], fs[2], springf[s, S_POINT], springf[s, S_POINT + 1],
                     springf[s, S_POINT + 2])
            out = (out[0] + t[0], out[1] + t[1], out[2] + t[2], out[3] + t[3])
    return out


@jit_inline
def quaternion_acceleration(bodyf, b, q, qd, Q, form):
    """(pddot, lambda) of the index-1 system for generalized torque Q (see the docstring)."""
    gq = g_mul(q, qd)  # G(p) pdot = Omega / 2
    jw = mat3_vec(bodyf, b, B_JREF, 2.0 * gq[0], 2.0 * gq[1], 2.0 * gq[2])
    w4 = qmul_t(qd[0], qd[1], qd[2], qd[3], 0.0, jw[0], jw[1], jw[2])  # Gdot^T J Omega
    nq = q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]
    if form == 23:
        # -8 G^T G Gdot^T J G pdot, with G^T G = |p|^2 I - p p^T (000 (A1))
        pw = q[0] * w4[0] + q[1] * w4[1] + q[2] * w4[2] + q[3] * w4[3]
        rhs = (Q[0] - 4.0 * (nq * w4[0] - pw * q[0]), Q[1] - 4.0 * (nq * w4[1] - pw * q[1]),
               Q[2] - 4.0 * (nq * w4[2] - pw * q[2]), Q[3] - 4.0 * (nq * w4[3] - pw * q[3]))
    else:
        rhs = (Q[0] - 4.0 * w4[0], Q[1] - 4.0 * w4[1], Q[2] - 4.0 * w4[2], Q[3] - 4.0 * w4[3])
    g = g_mul(q, rhs)
    a = mat3_vec(bodyf, b, B_JINV, g[0], g[1], g[2])
    t = gt_mul(q, a[0], a[1], a[2])
    c = 0.25 / (nq * nq)
    r = (qd[0] * qd[0] + qd[1] * qd[1] + qd[2] * qd[2] + qd[3] * qd[3]) / nq
    lam = (q[0] * rhs[0] + q[1] * rhs[1] + q[2] * rhs[2] + q[3] * rhs[3]) / nq
    return (c * t[0] - r * q[0], c * t[1] - r * q[1], c * t[2] - r * q[2],
            c * t[3] - r * q[3]), lam


@jit_inline
def generalized_torque(bm, f_app, t_app, b, x, q, torque):
    """(world force on the centre of mass, generalized quaternion torque Q_p1 or Q_p2)."""
    gravity, bodyf, bodyi, springf, springi = bm
    f0, f1, f2, n0, n1, n2 = body_loads(bm, f_app, t_app,
                                        b, x[0], x[1], x[2], q[0], q[1], q[2], q[3])
    if torque == 1:
        Q = gt_mul(q, 2.0 * n0, 2.0 * n1, 2.0 * n2)  # 2 G^T n, 001 (59)
    else:
        Q = torque_p2(bm, f_app, t_app, b, x, q)
    return (f0, f1, f2), Q


@jit
def derivative(bm, f_app, t_app, b, y, form, torque):
    """Right-hand side of the index-0 system for body b at y = (x, p, v, pdot) (14-tuple)."""
    gravity, bodyf, bodyi, springf, springi = bm
    x = (y[0], y[1], y[2])
    q = (y[3], y[4], y[5], y[6])
    qd = (y[10], y[11], y[12], y[13])
    f, Q = generalized_torque(bm, f_app, t_app, b, x, q,
                              torque)
    a, _ = quaternion_acceleration(bodyf, b, q, qd, Q, form)
    if bodyi[b] == PIVOTED:
        return (0.0, 0.0, 0.0, qd[0], qd[1], qd[2], qd[3], 0.0, 0.0, 0.0, a[0], a[1], a[2],
                a[3])
    minv = 1.0 / bodyf[b, B_MASS]
    return (y[7], y[8], y[9], qd[0], qd[1], qd[2], qd[3], f[0] * minv, f[1] * minv,
            f[2] * minv, a[0], a[1], a[2], a[3])


@jit_inline
def _axpy(y, k, h):
    """y + h k on 14-tuples."""
    return (y[0] + h * k[0], y[1] + h * k[1], y[2] + h * k[2], y[3] + h * k[3],
            y[4] + h * k[4], y[5] + h * k[5], y[6] + h * k[6], y[7] + h * k[7],
            y[8] + h * k[8], y[9] + h * k[9], y[10] + h * k[10], y[11] + h * k[11],
            y[12] + h * k[12], y[13] + h * k[13])


@jit_inline
def _rk4(y, k1, k2, k3, k4, sixth):
    """y + h/6 (k1 + 2 k2 + 2 k3 + k4) on 14-tuples."""
    return (y[0] + sixth * (k1[0] + 2.0 * (k2[0] + k3[0]) + k4[0]),
            y[1] + sixth * (k1[1] + 2.0 * (k2[1] + k3[1]) + k4[1]),
            y[2] + sixth * (k1[2] + 2.0 * (k2[2] + k3[2]) + k4[2]),
            y[3] + sixth * (k1[3] + 2.0 * (k2[3] + k3[3]) + k4[3]),
            y[4] + sixth * (k1[4] + 2.0 * (k2[4] + k3[4]) + k4[4]),
            y[5] + sixth * (k1[5] + 2.0 * (k2[5] + k3[5]) + k4[5]),
            y[6] + sixth * (k1[6] + 2.0 * (k2[6] + k3[6]) + k4[6]),
            y[7] + sixth * (k1[7] + 2.0 * (k2[7] + k3[7]) + k4[7]),
            y[8] + sixth * (k1[8] + 2.0 * (k2[8] + k3[8]) + k4[8]),
            y[9] + sixth * (k1[9] + 2.0 * (k2[9] + k3[9]) + k4[9]),
            y[10] + sixth * (k1[10] + 2.0 * (k2[10] + k3[10]) + k4[10]),
            y[11] + sixth * (k1[11] + 2.0 * (k2[11] + k3[11]) + k4[11]),
            y[12] + sixth * (k1[12] + 2.0 * (k2[12] + k3[12]) + k4[12]),
            y[13] + sixth * (k1[13] + 2.0 * (k2[13] + k3[13]) + k4[13]))


@jit
def _run(n, dt, F, I, form, torque):
    """The step loop for one (form, torque) variant."""
    (gravity, bodyf, bodyi, springf, springi, S, S_prev, f_app, t_app, _, stats,
     _) = open_buffers(F, I)
    bm = BodiesModel(gravity, bodyf, bodyi, springf, springi)
    nb = bodyi.shape[0]
    x, q, v, w, P, pq, L = state_view(S, nb)
    half = 0.5 * dt
    sixth = dt / 6.0
    for _ in range(n):
        for i in range(S.shape[0]):
            S_prev[i] = S[i]
        energy = 0.0
        for b in range(nb):
            qd = qmul_t(q[b, 0], q[b, 1], q[b, 2], q[b, 3], 0.0, 0.5 * w[b, 0], 0.5 * w[b, 1],
                        0.5 * w[b, 2])
            y = (x[b, 0], x[b, 1], x[b, 2], q[b, 0], q[b, 1], q[b, 2], q[b, 3],
                 v[b, 0], v[b, 1], v[b, 2], qd[0], qd[1], qd[2], qd[3])
            k1 = derivative(bm, f_app, t_app, b, y, form,
                            torque)
            k2 = derivative(bm, f_app, t_app, b,
                            _axpy(y, k1, half), form, torque)
            k3 = derivative(bm, f_app, t_app, b,
                            _axpy(y, k2, half), form, torque)
            k4 = derivative(bm, f_app, t_app, b,
                            _axpy(y, k3, dt), form, torque)
            y = _rk4(y, k1, k2, k3, k4, sixth)
            # projection 002 (63): (P) onto the unit sphere, (V) onto its tangent space
            inv = 1.0 / np.sqrt(y[3] * y[3] + y[4] * y[4] + y[5] * y[5] + y[6] * y[6])
            p = (y[3] * inv, y[4] * inv, y[5] * inv, y[6] * inv)
            radial = p[0] * y[10] + p[1] * y[11] + p[2] * y[12] + p[3] * y[13]
            pd = (y[10] - radial * p[0], y[11] - radial * p[1], y[12] - radial * p[2],
                  y[13] - radial * p[3])
            om = g_mul(p, pd)
            for i in range(4):
                q[b, i] = p[i]
            for i in range(3):
                x[b, i] = y[i]
                v[b, i] = y[7 + i]
                w[b, i] = 2.0 * om[i]
            energy += settle_body(bodyf, bodyi, b, x, q, v, w, P, pq, L)
        if rolled_back(energy, S, S_prev):
            return NONFINITE
        stats[STAT_STEPS] += 1
    return OK


@jit
def step(n, dt, F, I):
    """Advance ``n`` steps of size ``dt``: 002 (40), i.e. 001 form (29) with Q_p2."""
    return _run(n, dt, F, I, runtime_int(29), runtime_int(2))


@jit
def step_23_p1(n, dt, F, I):
    """001 form (23) with Q_p1 (lambda = 0)."""
    return _run(n, dt, F, I, runtime_int(23), runtime_int(1))


@jit
def step_23_p2(n, dt, F, I):
    """001 form (23) with Q_p2."""
    return _run(n, dt, F, I, runtime_int(23), runtime_int(2))


@jit
def step_29_p1(n, dt, F, I):
    """001 form (29) with Q_p1 (lambda = 001 (30))."""
    return _run(n, dt, F, I, runtime_int(29), runtime_int(1))


def _check_variant(form, torque):
    if form not in FORMS:
        raise ValueError(f"form: expected one of {FORMS} (001 (23) or (29)), got {form!r}")
    if torque not in TORQUES:
        raise ValueError(f"torque: expected 1 (Q_p1, 001 (59)) or 2 (Q_p2, 001 (62)), "
                         f"got {torque!r}")


@jit
def _multipliers(bm, f_app, t_app, x, q, w, form, torque, out):
    gravity, bodyf, bodyi, springf, springi = bm
    for b in range(bodyi.shape[0]):
        qd = qmul_t(q[b, 0], q[b, 1], q[b, 2], q[b, 3], 0.0, 0.5 * w[b, 0], 0.5 * w[b, 1],
                    0.5 * w[b, 2])
        qb = (q[b, 0], q[b, 1], q[b, 2], q[b, 3])
        _, Q = generalized_torque(bm, f_app, t_app, b,
                                  (x[b, 0], x[b, 1], x[b, 2]), qb, torque)
        _, out[b] = quaternion_acceleration(bodyf, b, qb, qd, Q, form)
    return out


def multipliers(sim, form=29, torque=2):
    """Lagrange multiplier lambda of the unit-length constraint, per body, at the current
    state of ``sim`` for 001 form ``form`` with torque Q_p``torque`` (defaults: ``index1``'s)."""
    _check_variant(form, torque)
    be = sim.backend
    f_app, t_app = applied_view(be.A, be.nb)
    return _multipliers(be.arrays, f_app, t_app, be.x, be.q, be.w, form, torque,
                        np.empty(be.nb))
