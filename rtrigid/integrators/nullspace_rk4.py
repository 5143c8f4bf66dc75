"""``nullspace_rk4``: classical RK4 on the quaternion null-space equations, 002 (42).

Per body the independent velocities are nu = (v, w) for a free body and nu = w for a pivoted
one, with w the body angular velocity; qdot = 1/2 q o (0, w) keeps qdot tangent to the unit
sphere by construction (T_p(p) = 1/2 G(p)^T, 002 (41)), so only the O(h^5) truncation error
moves |q| off 1.  After every step q is renormalised, the cheap projection 002 (63).
The torque on the null-space coordinate is the body-frame moment about the reference point,
T_p^T psi_p = 1/2 G(q) psi_p of 002 (42), written as cross products.

The bodies of a model are coupled only through the world, so each body is integrated on its
own 13 local scalars (x, q, v, w): no array crosses a call in the hot loop.
"""
import numpy as np

from rtrigid._jit import jit, jit_inline
from rtrigid.forces import body_loads
from rtrigid.integrators.common import (
    NONFINITE,
    OK,
    STAT_STEPS,
    all_finite,
    body_momenta,
    open_buffers,
    mat3_vec,
    pivot_kinematics,
    state_view,
)
from rtrigid.model import B_JINV, B_JREF, B_MASS, PIVOTED


def work_size(nb):
    """This scheme needs no scratch beyond the state."""
    return 1


@jit_inline
def derivative(gravity, bodyf, bodyi, springf, springi, f_app, t_app, b, y):
    """Right-hand side of 002 (42) for body b at y = (x, q, v, w) (13-tuple).

    xdot = v, qdot = 1/2 q o (0, w), J wdot = mu - w x J w, vdot = F / m (free bodies).
    """
    x0, x1, x2, q0, q1, q2, q3, v0, v1, v2, w0, w1, w2 = y
    f0, f1, f2, t0, t1, t2 = body_loads(gravity, bodyf, bodyi, springf, springi, f_app, t_app, b,
                                        x0, x1, x2, q0, q1, q2, q3)
    h0, h1, h2 = mat3_vec(bodyf, b, B_JREF, w0, w1, w2)
    a0, a1, a2 = mat3_vec(bodyf, b, B_JINV, t0 - (w1 * h2 - w2 * h1), t1 - (w2 * h0 - w0 * h2),
                          t2 - (w0 * h1 - w1 * h0))
    dq0 = -0.5 * (q1 * w0 + q2 * w1 + q3 * w2)
    dq1 = 0.5 * (q0 * w0 + q2 * w2 - q3 * w1)
    dq2 = 0.5 * (q0 * w1 + q3 * w0 - q1 * w2)
    dq3 = 0.5 * (q0 * w2 + q1 * w1 - q2 * w0)
    if bodyi[b] == PIVOTED:
        return (0.0, 0.0, 0.0, dq0, dq1, dq2, dq3, 0.0, 0.0, 0.0, a0, a1, a2)
    minv = 1.0 / bodyf[b, B_MASS]
    return (v0, v1, v2, dq0, dq1, dq2, dq3, f0 * minv, f1 * minv, f2 * minv, a0, a1, a2)


@jit_inline
def _axpy(y, k, h):
    """y + h k on 13-tuples."""
    return (y[0] + h * k[0], y[1] + h * k[1], y[2] + h * k[2], y[3] + h * k[3],
            y[4] + h * k[4], y[5] + h * k[5], y[6] + h * k[6], y[7] + h * k[7],
            y[8] + h * k[8], y[9] + h * k[9], y[10] + h * k[10], y[11] + h * k[11],
            y[12] + h * k[12])


@jit
def step(n, dt, F, I):
    """Advance ``n`` steps of size ``dt``; the common kernel signature (see integrators/common)."""
    (gravity, bodyf, bodyi, springf, springi, S, S_prev, f_app, t_app, _, stats,
     _) = open_buffers(F, I)
    nb = bodyi.shape[0]
    x, q, v, w, P, pq, L = state_view(S, nb)
    half = 0.5 * dt
    sixth = dt / 6.0
    for _ in range(n):
        for i in range(S.shape[0]):
            S_prev[i] = S[i]
        energy = 0.0
        for b in range(nb):
            y = (x[b, 0], x[b, 1], x[b, 2], q[b, 0], q[b, 1], q[b, 2], q[b, 3],
                 v[b, 0], v[b, 1], v[b, 2], w[b, 0], w[b, 1], w[b, 2])
            k1 = derivative(gravity, bodyf, bodyi, springf, springi, f_app, t_app, b, y)
            k2 = derivative(gravity, bodyf, bodyi, springf, springi, f_app, t_app, b,
                            _axpy(y, k1, half))
            k3 = derivative(gravity, bodyf, bodyi, springf, springi, f_app, t_app, b,
                            _axpy(y, k2, half))
            k4 = derivative(gravity, bodyf, bodyi, springf, springi, f_app, t_app, b,
                            _axpy(y, k3, dt))
            for i in range(3):
                x[b, i] = y[i] + sixth * (k1[i] + 2.0 * (k2[i] + k3[i]) + k4[i])
                v[b, i] = y[7 + i] + sixth * (k1[7 + i] + 2.0 * (k2[7 + i] + k3[7 + i]) + k4[7 + i])
                w[b, i] = y[10 + i] + sixth * (k1[10 + i] + 2.0 * (k2[10 + i] + k3[10 + i])
                                               + k4[10 + i])
            for i in range(4):
                q[b, i] = y[3 + i] + sixth * (k1[3 + i] + 2.0 * (k2[3 + i] + k3[3 + i])
                                              + k4[3 + i])
            inv = 1.0 / np.sqrt(q[b, 0] * q[b, 0] + q[b, 1] * q[b, 1] + q[b, 2] * q[b, 2]
                                + q[b, 3] * q[b, 3])
            for i in range(4):
                q[b, i] *= inv  # the cheap projection 002 (63, P)
            if bodyi[b] == PIVOTED:
                pivot_kinematics(bodyf, b, x, q, v, w, P)
            body_momenta(bodyf, b, q, v, w, P, pq, L)
            energy += (w[b, 0] * L[b, 0] + w[b, 1] * L[b, 1] + w[b, 2] * L[b, 2]
                       + v[b, 0] * P[b, 0] + v[b, 1] * P[b, 1] + v[b, 2] * P[b, 2])
        # finite entries can still square to inf: a state whose energy overflows is no more
        # usable than a NaN one (NaN also propagates into this sum), so both fail the step
        if not np.isfinite(energy) or not all_finite(S):
            S[:] = S_prev
            return NONFINITE
        stats[STAT_STEPS] += 1
    return OK
