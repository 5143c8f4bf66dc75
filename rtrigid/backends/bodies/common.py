"""What the single-body kernels share: the state layout and per-body bookkeeping.

S:       state, (STATE_WIDTH * nb,); :func:`state_view` gives (x, q, v, w, P, pq, L) -- per
         body x (nb,3) centre of mass, q (nb,4) unit quaternion (body -> world), v (nb,3)
         centre-of-mass velocity (world), w (nb,3) body angular velocity, P (nb,3) linear
         momentum, pq (nb,4) quaternion momentum of 000 §4.1, L (nb,3) body angular momentum
         about the reference point.  Each integrator advances its own primary variables and
         writes the others from them; it never reads a derived field back as a primary one
         (a round trip such as L -> J^-1 L -> J (J^-1 L) carries a fixed rounding matrix
         into every step: a systematic drift).

The buffers, status codes and counters are the contract of :mod:`rtrigid.backends.buffers`;
the model arrays are those of :mod:`.layout`.
"""
import numpy as np

from rtrigid._jit import jit, jit_inline
from rtrigid.backends.buffers import all_finite, field_offsets, sections, view
from rtrigid.backends.bodies.layout import (
    B_COM,
    B_JINV,
    B_JREF,
    B_MASS,
    B_PIVOT,
    B_WIDTH,
    PIVOTED,
    S_WIDTH,
    kernel_arrays,
)
from rtrigid.maths.quat import rotate_t

# the state of one body, field-major: field k of all bodies, then field k + 1
STATE_FIELDS = (("x", 3), ("q", 4), ("v", 3), ("w", 3), ("P", 3), ("pq", 4), ("L", 3))
STATE_WIDTH = sum(width for _, width in STATE_FIELDS)
_O = field_offsets(STATE_FIELDS, 1)
O_X, O_Q, O_V, O_W, O_P, O_PQ, O_L = (_O[name][0] for name, _ in STATE_FIELDS)


@jit_inline
def state_view(S, nb):
    """(x, q, v, w, P, pq, L) views into the flat state array (:data:`STATE_FIELDS`); in a
    kernel, :func:`~rtrigid.backends.buffers.view` s holding no reference (S is one)."""
    return (
        view(S, O_X * nb, (nb, 3)),
        view(S, O_Q * nb, (nb, 4)),
        view(S, O_V * nb, (nb, 3)),
        view(S, O_W * nb, (nb, 3)),
        view(S, O_P * nb, (nb, 3)),
        view(S, O_PQ * nb, (nb, 4)),
        view(S, O_L * nb, (nb, 3)),
    )


@jit_inline
def model_sizes(nb, ns):
    """(float model length, int model length) of :func:`layout.flatten`."""
    return 3 + B_WIDTH * nb + S_WIDTH * ns, 2 + nb + ns


@jit_inline
def open_buffers(F, I):
    """Everything a kernel needs from (F, I): the model arrays, nb, and the dynamic views.

    Returns (gravity, bodyf, bodyi, springf, springi, S, S_prev, f_app, t_app, solver, stats,
    work).
    """
    nb = I[0]
    nf_model, ni_model = model_sizes(nb, I[1])
    S, S_prev, A, solver, stats, work = sections(F, I, nf_model, ni_model, STATE_WIDTH * nb,
                                                 6 * nb)
    gravity, bodyf, bodyi, springf, springi = kernel_arrays(F[:nf_model], I[:ni_model])
    f_app, t_app = applied_view(A, nb)
    return (gravity, bodyf, bodyi, springf, springi, S, S_prev, f_app, t_app, solver, stats,
            work)


@jit
def restore_body(S, S_prev, nb, b):
    """Copy body b's entries of every state field from S_prev back into S."""
    o = 0
    for width in (3, 4, 3, 3, 3, 4, 3):  # STATE_FIELDS
        for k in range(width):
            S[o + b * width + k] = S_prev[o + b * width + k]
        o += width * nb


@jit_inline
def applied_view(A, nb):
    """(force, torque) views into the flat applied-load array."""
    return view(A, 0, (nb, 3)), view(A, 3 * nb, (nb, 3))


@jit
def g_mul(q, p):
    """G(q) p = -p0 qv + q0 pv - qv x pv (000 §2.5), as a tuple: no allocation."""
    return (
        -p[0] * q[1] + q[0] * p[1] - (q[2] * p[3] - q[3] * p[2]),
        -p[0] * q[2] + q[0] * p[2] - (q[3] * p[1] - q[1] * p[3]),
        -p[0] * q[3] + q[0] * p[3] - (q[1] * p[2] - q[2] * p[1]),
    )


@jit
def gt_mul(q, a0, a1, a2):
    """G(q)^T a = q o (0, a) (000 (A3)), as a tuple."""
    return (
        -(q[1] * a0 + q[2] * a1 + q[3] * a2),
        q[0] * a0 + q[2] * a2 - q[3] * a1,
        q[0] * a1 + q[3] * a0 - q[1] * a2,
        q[0] * a2 + q[1] * a1 - q[2] * a0,
    )


@jit_inline
def pivot_kinematics(bodyf, b, x, q, v, w, P):
    """Centre-of-mass position, velocity and momentum of a pivoted body from (q, w)."""
    q0, q1, q2, q3 = q[b, 0], q[b, 1], q[b, 2], q[b, 3]
    s0, s1, s2 = bodyf[b, B_COM], bodyf[b, B_COM + 1], bodyf[b, B_COM + 2]
    r = rotate_t(q0, q1, q2, q3, s0, s1, s2, 1.0)
    u = rotate_t(q0, q1, q2, q3, w[b, 1] * s2 - w[b, 2] * s1, w[b, 2] * s0 - w[b, 0] * s2,
                 w[b, 0] * s1 - w[b, 1] * s0, 1.0)
    m = bodyf[b, B_MASS]
    for k in range(3):
        x[b, k] = bodyf[b, B_PIVOT + k] + r[k]
        v[b, k] = u[k]
        P[b, k] = m * u[k]


@jit_inline
def body_velocities(bodyf, bodyi, b, x, q, v, w, P, pq, L):
    """Velocities from momenta: L = 1/2 G(q) pq (000 (46): Pi = 2 L), w = J^-1 L, v = P / m."""
    gp = g_mul(q[b], pq[b])
    for i in range(3):
        L[b, i] = 0.5 * gp[i]
    velocities_from_momenta(bodyf, bodyi, b, x, q, v, w, P, L)


@jit_inline
def velocities_from_momenta(bodyf, bodyi, b, x, q, v, w, P, L):
    """w = J^-1 L, and v = P / m (free) or the pivot kinematics (pivoted)."""
    for i in range(3):
        r = B_JINV + 3 * i
        w[b, i] = bodyf[b, r] * L[b, 0] + bodyf[b, r + 1] * L[b, 1] + bodyf[b, r + 2] * L[b, 2]
    if bodyi[b] == PIVOTED:
        pivot_kinematics(bodyf, b, x, q, v, w, P)
    else:
        for k in range(3):
            v[b, k] = P[b, k] / bodyf[b, B_MASS]


@jit
def mat3_vec(bodyf, b, col, v0, v1, v2):
    """Row-major 3x3 block of body b's row starting at ``col``, times (v0, v1, v2)."""
    r = bodyf[b]
    return (r[col] * v0 + r[col + 1] * v1 + r[col + 2] * v2,
            r[col + 3] * v0 + r[col + 4] * v1 + r[col + 5] * v2,
            r[col + 6] * v0 + r[col + 7] * v1 + r[col + 8] * v2)


@jit_inline
def body_momenta(bodyf, b, q, v, w, P, pq, L):
    """Momenta from velocities: L = J w, pq = 2 G(q)^T L (000 (31), qdot = 1/2 G^T w), P = m v."""
    jw = mat3_vec(bodyf, b, B_JREF, w[b, 0], w[b, 1], w[b, 2])
    for k in range(3):
        L[b, k] = jw[k]
    p = gt_mul(q[b], jw[0], jw[1], jw[2])
    for k in range(4):
        pq[b, k] = 2.0 * p[k]
    for k in range(3):
        P[b, k] = bodyf[b, B_MASS] * v[b, k]


@jit
def runtime_int(k):
    """``k`` as a run-time int64.  numba compiles a callee once per *literal* constant it is
    passed, so kernels that call one step loop with different constant flags would each
    compile the whole loop; passing ``runtime_int(flag)`` makes them share one compilation."""
    return k + 0


@jit
def has_springs(springi, b):
    """True when some spring pulls body b."""
    for s in range(springi.shape[0]):
        if springi[s] == b:
            return True
    return False


@jit_inline
def settle_body(bodyf, bodyi, b, x, q, v, w, P, pq, L):
    """After an explicit step set body b's (x, q, v, w): pivot kinematics and momenta.

    Returns w.L + v.P (twice the kinetic energy), which the caller sums for the finite-energy
    test of :func:`rolled_back`.
    """
    if bodyi[b] == PIVOTED:
        pivot_kinematics(bodyf, b, x, q, v, w, P)
    body_momenta(bodyf, b, q, v, w, P, pq, L)
    return (w[b, 0] * L[b, 0] + w[b, 1] * L[b, 1] + w[b, 2] * L[b, 2]
            + v[b, 0] * P[b, 0] + v[b, 1] * P[b, 1] + v[b, 2] * P[b, 2])


@jit
def rolled_back(energy, S, S_prev):
    """Roll S back to S_prev and return True if the step left a non-finite state or energy.

    Finite entries can still square to inf: a state whose energy overflows is no more usable
    than a NaN one (NaN also propagates into the energy sum).
    """
    if np.isfinite(energy) and all_finite(S):
        return False
    S[:] = S_prev
    return True
