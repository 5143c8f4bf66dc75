"""``nullspace_rk4``: classical RK4 on the quaternion null-space equations, 002 (42).

Per body the independent velocities are nu = (v, w) for a free body and nu = w for a pivoted
one, with w the body angular velocity; qdot = 1/2 q o (0, w) keeps qdot tangent to the unit
sphere by construction (T_p(p) = 1/2 G(p)^T, 002 (41)), so only the O(h^5) truncation error
moves |q| off 1.  After every step q is renormalised, the cheap projection 002 (63).
The torque on the null-space coordinate is the body-frame moment about the reference point,
T_p^T psi_p = 1/2 G(q) psi_p of 002 (42) written as cross products.
"""
import numpy as np

from rtrigid._jit import jit
from rtrigid.forces import loads
from rtrigid.integrators.common import (
    NONFINITE,
    OK,
    STAT_STEPS,
    all_finite,
    applied_view,
    body_momenta,
    mat3_vec,
    pivot_kinematics,
    state_view,
)
from rtrigid.model import B_JINV, B_JREF, B_MASS, PIVOTED, kernel_arrays
from rtrigid.quat import quat_normalize


def work_size(nb):
    """Four stage derivatives and one stage state of (x, q, v, w), loads, scratch."""
    return 5 * 13 * nb + 6 * nb + 12


@jit
def _carve(work, nb):
    """Named views: stage derivatives k* (4, nb, .), stage state y*, loads, scratch."""
    kx = work[0:12 * nb].reshape((4, nb, 3))
    kq = work[12 * nb:28 * nb].reshape((4, nb, 4))
    kv = work[28 * nb:40 * nb].reshape((4, nb, 3))
    kw = work[40 * nb:52 * nb].reshape((4, nb, 3))
    yx = work[52 * nb:55 * nb].reshape((nb, 3))
    yq = work[55 * nb:59 * nb].reshape((nb, 4))
    yv = work[59 * nb:62 * nb].reshape((nb, 3))
    yw = work[62 * nb:65 * nb].reshape((nb, 3))
    force = work[65 * nb:68 * nb].reshape((nb, 3))
    torque = work[68 * nb:71 * nb].reshape((nb, 3))
    scratch = work[71 * nb:71 * nb + 9].reshape((3, 3))
    return kx, kq, kv, kw, yx, yq, yv, yw, force, torque, scratch


@jit
def derivative(gravity, bodyf, bodyi, springf, springi, x, q, v, w, f_app, t_app, dx, dq, dv, dw,
               force, torque, scratch):
    """Right-hand side of 002 (42) for all bodies: xdot = v, qdot = 1/2 q o w, J wdot = mu."""
    loads(gravity, bodyf, bodyi, springf, springi, x, q, f_app, t_app, force, torque, scratch)
    for b in range(x.shape[0]):
        q0, q1, q2, q3 = q[b, 0], q[b, 1], q[b, 2], q[b, 3]
        w0, w1, w2 = w[b, 0], w[b, 1], w[b, 2]
        dq[b, 0] = -0.5 * (q1 * w0 + q2 * w1 + q3 * w2)
        dq[b, 1] = 0.5 * (q0 * w0 + q2 * w2 - q3 * w1)
        dq[b, 2] = 0.5 * (q0 * w1 + q3 * w0 - q1 * w2)
        dq[b, 3] = 0.5 * (q0 * w2 + q1 * w1 - q2 * w0)
        h0, h1, h2 = mat3_vec(bodyf, b, B_JREF, w0, w1, w2)
        m0 = torque[b, 0] - (w1 * h2 - w2 * h1)
        m1 = torque[b, 1] - (w2 * h0 - w0 * h2)
        m2 = torque[b, 2] - (w0 * h1 - w1 * h0)
        dw[b, 0], dw[b, 1], dw[b, 2] = mat3_vec(bodyf, b, B_JINV, m0, m1, m2)
        if bodyi[b] == PIVOTED:
            dx[b, :] = 0.0
            dv[b, :] = 0.0
        else:
            for k in range(3):
                dx[b, k] = v[b, k]
                dv[b, k] = force[b, k] / bodyf[b, B_MASS]


@jit
def _stage(y, k, h, out):
    """out = y + h k (element-wise over a (nb, m) array)."""
    for b in range(y.shape[0]):
        for i in range(y.shape[1]):
            out[b, i] = y[b, i] + h * k[b, i]


@jit
def _combine(y, k, h):
    """y += h/6 (k1 + 2 k2 + 2 k3 + k4)."""
    c = h / 6.0
    for b in range(y.shape[0]):
        for i in range(y.shape[1]):
            y[b, i] += c * (k[0, b, i] + 2.0 * (k[1, b, i] + k[2, b, i]) + k[3, b, i])


@jit
def step(n, dt, mf, mi, S, S_prev, A, solver, stats, work):
    """Advance ``n`` steps of size ``dt``; the common kernel signature (see integrators/common)."""
    gravity, bodyf, bodyi, springf, springi = kernel_arrays(mf, mi)
    nb = bodyi.shape[0]
    x, q, v, w, P, pq = state_view(S, nb)
    f_app, t_app = applied_view(A, nb)
    kx, kq, kv, kw, yx, yq, yv, yw, force, torque, scratch = _carve(work, nb)
    half = 0.5 * dt
    for _ in range(n):
        S_prev[:] = S
        derivative(gravity, bodyf, bodyi, springf, springi, x, q, v, w, f_app, t_app, kx[0],
                   kq[0], kv[0], kw[0], force, torque, scratch)
        for s in range(1, 4):
            h = dt if s == 3 else half
            _stage(x, kx[s - 1], h, yx)
            _stage(q, kq[s - 1], h, yq)
            _stage(v, kv[s - 1], h, yv)
            _stage(w, kw[s - 1], h, yw)
            derivative(gravity, bodyf, bodyi, springf, springi, yx, yq, yv, yw, f_app, t_app,
                       kx[s], kq[s], kv[s], kw[s], force, torque, scratch)
        _combine(x, kx, dt)
        _combine(q, kq, dt)
        _combine(v, kv, dt)
        _combine(w, kw, dt)
        for b in range(x.shape[0]):
            quat_normalize(q[b], q[b])
            if bodyi[b] == PIVOTED:
                pivot_kinematics(bodyf, b, x, q, v, w, P)
            body_momenta(bodyf, b, q, v, w, P, pq)
        if not all_finite(S):
            S[:] = S_prev
            return NONFINITE
        stats[STAT_STEPS] += 1
    return OK
