"""Force elements: gravity, springs/bushings to world points, applied forces and torques.

Two views of the same loads, one for each family of integrators:

* :func:`loads` gives, per body, the world force (used by free bodies) and the body-frame torque
  about the body's reference point -- the right-hand side of the null-space equations 002 (42).
* :func:`discrete_gradient` gives the exact discrete gradient of the potential (plus the discrete
  work of the applied loads) with respect to the configuration z = (x, q) of one body, and its
  derivative with respect to z_{n+1}, for the energy-momentum scheme.

Why the discrete gradient is exact.  Every body point y(z) = x_ref + R(q) c is a *quadratic*
function of z (R is quadratic in q, 000 (8)), so y_{n+1} - y_n = Dy(z_mid) (z_{n+1} - z_n) holds
exactly.  Gravity and constant applied forces are linear in y, so their mid-point gradient is an
exact discrete gradient (this is the choice of 000 (51)).  A spring's energy depends on y only
through s = |d|², d = y - anchor; with l = |d|,

    f(s1) - f(s0) = c (s1 - s0),   c = ½ k (1 - 2 L0 / (l0 + l1)),   s1 - s0 = (d0 + d1)·(d1 - d0),

which is free of cancellation and gives the discrete gradient c Dy(z_mid)^T (d0 + d1)
(Gonzalez's construction through an invariant, as 000 §4.3 does for the kinetic energy).

Layout of the per-body configuration vector used here: z[0:3] = x (reference point; only
free bodies move it), z[3:7] = q.
"""
import numpy as np

from rtrigid._jit import jit, jit_inline, query
from rtrigid.backends.bodies.layout import (
    B_COM,
    B_MASS,
    B_PIVOT,
    PIVOTED,
    S_ANCHOR,
    S_K,
    S_POINT,
    S_REST,
)
from rtrigid.maths.linalg import matmul
from rtrigid.maths.quat import Emat, minus4, plus4, rotate_t

# Model arguments, in this order everywhere: gravity (3,), bodyf (nb, B_WIDTH), bodyi (nb,)
# kinds, springf (ns, S_WIDTH), springi (ns,) -- see rtrigid.model.kernel_arrays.


@jit
def spring_vector(bodyf, bodyi, springf, s, b, x, q, arm, out):
    """d = (reference point + R(q) c) - anchor for spring s on body b; arm = R(q) c."""
    arm[0], arm[1], arm[2] = rotate_t(q[0], q[1], q[2], q[3], springf[s, S_POINT],
                                      springf[s, S_POINT + 1], springf[s, S_POINT + 2], 1.0)
    ref = bodyf[b, B_PIVOT:B_PIVOT + 3] if bodyi[b] == PIVOTED else x
    sq = 0.0
    for k in range(3):
        out[k] = ref[k] + arm[k] - springf[s, S_ANCHOR + k]
        sq += out[k] * out[k]
    return np.sqrt(sq)


@jit_inline
def spring_force(bodyf, bodyi, springf, s, b, x0, x1, x2, q0, q1, q2, q3):
    """World force of spring s on its body and its lever arm R(q) c, as two tuples."""
    c0, c1, c2 = rotate_t(q0, q1, q2, q3, springf[s, S_POINT], springf[s, S_POINT + 1],
                          springf[s, S_POINT + 2], 1.0)
    if bodyi[b] == PIVOTED:
        r0, r1, r2 = bodyf[b, B_PIVOT], bodyf[b, B_PIVOT + 1], bodyf[b, B_PIVOT + 2]
    else:
        r0, r1, r2 = x0, x1, x2
    d0 = r0 + c0 - springf[s, S_ANCHOR]
    d1 = r1 + c1 - springf[s, S_ANCHOR + 1]
    d2 = r2 + c2 - springf[s, S_ANCHOR + 2]
    scale = -springf[s, S_K]
    if springf[s, S_REST] > 0.0:
        length = np.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
        scale *= 1.0 - springf[s, S_REST] / max(length, 1e-300)
    return (scale * d0, scale * d1, scale * d2), (c0, c1, c2)


@jit_inline
def body_loads(bm, f_app, t_app, b, x0, x1, x2, q0, q1, q2,
               q3):
    """World force on body b's centre of mass and body-frame torque about its reference point.

    (x0, x1, x2): centre of mass, (q0..q3): orientation; f_app/t_app: (nb,3) applied world
    force at the centre of mass and world torque.  For a pivoted body the force is what the
    loads alone would do (the pivot reaction is not included); only the torque enters its
    equations.  Scalars in, a 6-tuple out: this is the innermost loop of the explicit schemes.
    The centre-of-mass load is taken to the body frame once (c x R^T f), and a world torque is
    rotated only when one is applied.
    """
    gravity, bodyf, bodyi, springf, springi = bm
    m = bodyf[b, B_MASS]
    f0 = m * gravity[0] + f_app[b, 0]
    f1 = m * gravity[1] + f_app[b, 1]
    f2 = m * gravity[2] + f_app[b, 2]
    fb0, fb1, fb2 = rotate_t(q0, q1, q2, q3, f0, f1, f2, -1.0)
    c0, c1, c2 = bodyf[b, B_COM], bodyf[b, B_COM + 1], bodyf[b, B_COM + 2]
    t0 = c1 * fb2 - c2 * fb1
    t1 = c2 * fb0 - c0 * fb2
    t2 = c0 * fb1 - c1 * fb0
    if t_app[b, 0] != 0.0 or t_app[b, 1] != 0.0 or t_app[b, 2] != 0.0:
        a = rotate_t(q0, q1, q2, q3, t_app[b, 0], t_app[b, 1], t_app[b, 2], -1.0)
        t0 += a[0]
        t1 += a[1]
        t2 += a[2]
    return add_spring_loads((bodyf, bodyi, springf, springi), b, (x0, x1, x2, q0, q1, q2, q3),
                            (f0, f1, f2, t0, t1, t2))


@jit_inline
def add_spring_loads(springs, b, pose, loads):
    """``loads`` (world force, body-frame torque about the reference point: a 6-tuple) plus
    those of the springs that pull body b, in the order of the springs.  ``springs``:
    (bodyf, bodyi, springf, springi); ``pose``: body b's (x0, x1, x2, q0, q1, q2, q3)."""
    bodyf, bodyi, springf, springi = springs
    x0, x1, x2, q0, q1, q2, q3 = pose
    f0, f1, f2, t0, t1, t2 = loads
    for s in range(springi.shape[0]):
        if springi[s] == b:
            fs, arm = spring_force(bodyf, bodyi, springf, s, b, x0, x1, x2, q0, q1, q2, q3)
            f0 += fs[0]
            f1 += fs[1]
            f2 += fs[2]
            a = rotate_t(q0, q1, q2, q3, arm[1] * fs[2] - arm[2] * fs[1],
                         arm[2] * fs[0] - arm[0] * fs[2], arm[0] * fs[1] - arm[1] * fs[0], -1.0)
            t0 += a[0]
            t1 += a[1]
            t2 += a[2]
    return f0, f1, f2, t0, t1, t2


def potential_energy(bm, x, q):
    """Gravity plus spring energy of all bodies; x are centre-of-mass positions.  The springs'
    kernel is compiled only for a model that has springs."""
    v = query(gravity_energy, x.shape[0])(bm.gravity, bm.bodyf, x)
    if bm.springi.shape[0]:
        v = add_spring_energy(bm, x, q, v)
    return v


@jit
def gravity_energy(gravity, bodyf, x):
    """-sum_b m_b g . x_b."""
    v = 0.0
    for b in range(x.shape[0]):
        for k in range(3):
            v -= bodyf[b, B_MASS] * gravity[k] * x[b, k]
    return v


@jit
def add_spring_energy(bm, x, q, v):
    """v plus the springs' energy, each spring's term added in turn."""
    gravity, bodyf, bodyi, springf, springi = bm
    arm = np.empty(3)
    d = np.empty(3)
    for s in range(springi.shape[0]):
        b = springi[s]
        stretch = spring_vector(bodyf, bodyi, springf, s, b, x[b], q[b], arm, d) - springf[s, S_REST]
        v += 0.5 * springf[s, S_K] * stretch * stretch
    return v


@jit
def point_jacobian(q, c, free, out, w):
    """Dy(z) (3x7) of the body point y = x_ref + R(q) c; the x block is I for free bodies.

    The q block is 2 E(q) c^-, from dR(q)c = 2 E(q) G(dq)^T c, 000 (13) and (A3).
    w: (2,4,4) scratch.
    """
    out[:, :] = 0.0
    if free:
        for k in range(3):
            out[k, k] = 1.0
    matmul(Emat(q, w[0, :3, :]), minus4(c, w[1]), out[:, 3:7], 2.0)
    return out


@jit
def add_point_load_hessian(c, f, scale, out, w):
    """out[3:7,3:7] += scale * (c^- f^+): derivative of -Dy_q(q)^T f with respect to q."""
    cm = minus4(c, w[0])
    fp = plus4(f, w[1])
    for i in range(4):
        for j in range(4):
            acc = 0.0
            for k in range(4):
                acc += cm[i, k] * fp[k, j]
            out[3 + i, 3 + j] += scale * acc


@jit
def discrete_gradient(bm, b, z0, z1, f_app, t_app, grad,
                      dgrad, work):
    """Exact discrete gradient of body b's potential minus the discrete work of applied loads.

    z0, z1: (7,) configurations at t_n, t_{n+1} (x = reference point for free bodies).
    grad: (7,) output, so that V(z1) - V(z0) - W = grad · (z1 - z0) holds to round-off.
    dgrad: (7,7) output, d grad / d z1 (analytic; used by Newton).
    work: (128,) float scratch, carved into views below (no allocation).
    """
    gravity, bodyf, bodyi, springf, springi = bm
    free = bodyi[b] != PIVOTED
    zm = work[0:7]
    load = work[7:10]
    xref0 = work[10:13]  # scratch for spring arms
    xref1 = work[13:16]
    d0 = work[16:19]
    d1 = work[19:22]
    dsum = work[22:25]
    dy = work[32:53].reshape((3, 7))
    dy1 = work[53:74].reshape((3, 7))
    w = work[96:128].reshape((2, 4, 4))
    for k in range(7):
        zm[k] = 0.5 * (z0[k] + z1[k])
    qm = zm[3:7]
    grad[:] = 0.0
    dgrad[:, :] = 0.0
    # Gravity and the applied force both act at the centre of mass with constant world value.
    for k in range(3):
        load[k] = bodyf[b, B_MASS] * gravity[k] + f_app[b, k]
    com = bodyf[b, B_COM:B_COM + 3]
    point_jacobian(qm, com, free, dy, w)
    for j in range(7):
        for k in range(3):
            grad[j] -= dy[k, j] * load[k]
    add_point_load_hessian(com, load, 1.0, dgrad, w)
    # Applied torque: discrete work 2 tau · E(q_mid)(q1 - q0) / |q_mid|².  Without the
    # division (000 (51) taken literally) the angular momentum changes by |q_mid|² h tau =
    # cos²(phi/4) h tau per step instead of h tau; with it the torque's moment is exact, as in
    # the jointed scheme and the reduced solver of .energy_momentum.
    tau = t_app[b]
    tp = plus4(tau, w[0])
    inv = 1.0 / (qm[0] * qm[0] + qm[1] * qm[1] + qm[2] * qm[2] + qm[3] * qm[3])
    for i in range(4):
        tq = 0.0
        for j in range(4):
            tq += tp[i, j] * qm[j]
        grad[3 + i] -= 2.0 * tq * inv
        for j in range(4):
            dgrad[3 + i, 3 + j] -= (tp[i, j] - 2.0 * tq * qm[j] * inv) * inv
    # Springs, through the invariant s = |d|^2.
    for s in range(springi.shape[0]):
        if springi[s] != b:
            continue
        c = springf[s, S_POINT:S_POINT + 3]
        l0 = spring_vector(bodyf, bodyi, springf, s, b, z0[:3], z0[3:7], xref0, d0)
        l1 = spring_vector(bodyf, bodyi, springf, s, b, z1[:3], z1[3:7], xref1, d1)
        for k in range(3):
            dsum[k] = d0[k] + d1[k]
        k_s = springf[s, S_K]
        rest = springf[s, S_REST]
        lsum = max(l0 + l1, 1e-300)
        coef = 0.5 * k_s * (1.0 - 2.0 * rest / lsum)
        point_jacobian(qm, c, free, dy, w)
        for j in range(7):
            acc = 0.0
            for k in range(3):
                acc += dy[k, j] * dsum[k]
            grad[j] += coef * acc
        # d/dz1 of coef * Dy(z_mid)^T (d0 + d1):
        point_jacobian(z1[3:7], c, free, dy1, w)
        for i in range(7):
            for j in range(7):
                acc = 0.0
                for k in range(3):
                    acc += dy[k, i] * dy1[k, j]
                dgrad[i, j] += coef * acc
        add_point_load_hessian(c, dsum, -coef, dgrad, w)
        if rest > 0.0:
            dc = k_s * rest / (lsum * lsum * max(l1, 1e-300))
            for j in range(7):
                acc = 0.0
                for k in range(3):
                    acc += dy1[k, j] * d1[k]
                tmp_j = dc * acc
                for i in range(7):
                    acc2 = 0.0
                    for k in range(3):
                        acc2 += dy[k, i] * dsum[k]
                    dgrad[i, j] += acc2 * tmp_j
    return grad
