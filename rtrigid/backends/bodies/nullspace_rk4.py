"""``nullspace_rk4``: classical RK4 on the quaternion null-space equations, 002 (42).

Per body the independent velocities are nu = (v, w) for a free body and nu = w for a pivoted
one, with w the body angular velocity; qdot = 1/2 q o (0, w) keeps qdot tangent to the unit
sphere by construction (T_p(p) = 1/2 G(p)^T, 002 (41)), so only the O(h^5) truncation error
moves |q| off 1.  After every step q is renormalised, the cheap projection 002 (63).
The torque on the null-space coordinate is the body-frame moment about the reference point,
T_p^T psi_p = 1/2 G(q) psi_p of 002 (42), written as cross products.

The bodies of a model are coupled only through the world, so each body is integrated on its
own through all n steps of a call: its loads and inertia are read once per call into scalars
(:func:`body_constants`), and its state lives in a tuple of scalars from step to step.  S and
S_prev are written once per call, not per step, and a body without springs touches no array in
its step loop (see :func:`derivative`).  A non-finite step rolls every body back to the start
of that step (:func:`step`).
"""
from collections import namedtuple

import numpy as np

from rtrigid._jit import jit, jit_inline
from rtrigid.backends.bodies.forces import add_spring_loads
from rtrigid.backends.buffers import NONFINITE, OK, STAT_STEPS
from rtrigid.backends.bodies.common import STATE_WIDTH, has_springs, open_buffers
from rtrigid.backends.bodies.layout import BodiesModel, B_COM, B_JINV, B_JREF, B_MASS, B_PIVOT, PIVOTED
from rtrigid.maths.quat import rotate_t

# One body's coefficients of 002 (42) for a call.  force: world force at the centre of mass
# (gravity plus applied), torque: applied world torque (used only when `torqued`), com: centre of
# mass from the reference point (body frame), pivot: world reference point of a pivoted body,
# jref / jinv: rotational inertia about the reference point and its inverse, row-major.
BodyConstants = namedtuple(
    "BodyConstants",
    ["pivoted", "springs", "torqued", "mass", "minv", "force", "torque", "com", "pivot", "jref",
     "jinv"])


def work_size(nb):
    """The state at entry, to run the bodies again when one of them fails (see :func:`step`)."""
    return STATE_WIDTH * nb


@jit
def _row3(r, col):
    """r[col:col + 3] as a tuple."""
    return (r[col], r[col + 1], r[col + 2])


@jit
def _row9(r, col):
    """r[col:col + 9] as a tuple."""
    return (r[col], r[col + 1], r[col + 2], r[col + 3], r[col + 4], r[col + 5], r[col + 6],
            r[col + 7], r[col + 8])


@jit
def body_constants(gravity, bodyf, bodyi, springi, f_app, t_app, b):
    """Body b's :data:`BodyConstants`: the loads and inertia that stay fixed over a call."""
    r = bodyf[b]
    m = r[B_MASS]
    return BodyConstants(
        pivoted=bodyi[b] == PIVOTED,
        springs=has_springs(springi, b),
        torqued=t_app[b, 0] != 0.0 or t_app[b, 1] != 0.0 or t_app[b, 2] != 0.0,
        mass=m,
        minv=1.0 / m,
        force=(m * gravity[0] + f_app[b, 0], m * gravity[1] + f_app[b, 1],
               m * gravity[2] + f_app[b, 2]),
        torque=(t_app[b, 0], t_app[b, 1], t_app[b, 2]),
        com=_row3(r, B_COM),
        pivot=_row3(r, B_PIVOT),
        jref=_row9(r, B_JREF),
        jinv=_row9(r, B_JINV),
    )


@jit_inline
def _mat3(a, v0, v1, v2):
    """Row-major 3x3 ``a`` (9-tuple) times (v0, v1, v2)."""
    return (a[0] * v0 + a[1] * v1 + a[2] * v2,
            a[3] * v0 + a[4] * v1 + a[5] * v2,
            a[6] * v0 + a[7] * v1 + a[8] * v2)


@jit_inline
def derivative(c, springs, b, y):
    """Right-hand side of 002 (42) for body b at y = (x, q, v, w) (13-tuple); c: its constants.

    xdot = v, qdot = 1/2 q o (0, w), J wdot = mu - w x J w, vdot = F / m (free bodies).  mu is
    the body-frame moment about the reference point: c x R^T F of the centre-of-mass force,
    the applied torque R^T tau, the springs' moments (:func:`rtrigid.forces.body_loads`, in the
    same order of operations, so both give the same bits).

    springs: None when no spring pulls body b, else the model arrays (bodyf, bodyi, springf,
    springi).  None compiles a variant with no array in the step loop: every array handed to
    an inlined function costs reference-count calls at each stage, which were three quarters
    of the gyro top's step (~0.45 -> 0.11 us).
    """
    x0, x1, x2, q0, q1, q2, q3, v0, v1, v2, w0, w1, w2 = y
    f0, f1, f2 = c.force
    fb0, fb1, fb2 = rotate_t(q0, q1, q2, q3, f0, f1, f2, -1.0)
    s0, s1, s2 = c.com
    t0 = s1 * fb2 - s2 * fb1
    t1 = s2 * fb0 - s0 * fb2
    t2 = s0 * fb1 - s1 * fb0
    if c.torqued:
        a0, a1, a2 = rotate_t(q0, q1, q2, q3, c.torque[0], c.torque[1], c.torque[2], -1.0)
        t0 += a0
        t1 += a1
        t2 += a2
    if springs is not None:
        f0, f1, f2, t0, t1, t2 = add_spring_loads(springs, b, (x0, x1, x2, q0, q1, q2, q3),
                                                  (f0, f1, f2, t0, t1, t2))
    h0, h1, h2 = _mat3(c.jref, w0, w1, w2)
    a0, a1, a2 = _mat3(c.jinv, t0 - (w1 * h2 - w2 * h1), t1 - (w2 * h0 - w0 * h2),
                       t2 - (w0 * h1 - w1 * h0))
    dq0 = -0.5 * (q1 * w0 + q2 * w1 + q3 * w2)
    dq1 = 0.5 * (q0 * w0 + q2 * w2 - q3 * w1)
    dq2 = 0.5 * (q0 * w1 + q3 * w0 - q1 * w2)
    dq3 = 0.5 * (q0 * w2 + q1 * w1 - q2 * w0)
    if c.pivoted:
        return (0.0, 0.0, 0.0, dq0, dq1, dq2, dq3, 0.0, 0.0, 0.0, a0, a1, a2)
    return (v0, v1, v2, dq0, dq1, dq2, dq3, f0 * c.minv, f1 * c.minv, f2 * c.minv, a0, a1, a2)


@jit_inline
def _axpy(y, k, h):
    """y + h k on 13-tuples."""
    return (y[0] + h * k[0], y[1] + h * k[1], y[2] + h * k[2], y[3] + h * k[3],
            y[4] + h * k[4], y[5] + h * k[5], y[6] + h * k[6], y[7] + h * k[7],
            y[8] + h * k[8], y[9] + h * k[9], y[10] + h * k[10], y[11] + h * k[11],
            y[12] + h * k[12])


@jit_inline
def settle_body(c, y):
    """The full 23-scalar state (x, q, v, w, P, pq, L) after a step, from y = (x, q, v, w).

    q is renormalised (the cheap projection 002 (63, P)); a pivoted body's x, v follow from
    (q, w) as in :func:`~rtrigid.backends.bodies.common.pivot_kinematics`; the momenta are those of
    :func:`~rtrigid.backends.bodies.common.body_momenta`.  Also returns w.L + v.P (twice the kinetic
    energy) for the finiteness test.
    """
    x0, x1, x2, q0, q1, q2, q3, v0, v1, v2, w0, w1, w2 = y
    inv = 1.0 / np.sqrt(q0 * q0 + q1 * q1 + q2 * q2 + q3 * q3)
    q0 *= inv
    q1 *= inv
    q2 *= inv
    q3 *= inv
    if c.pivoted:
        s0, s1, s2 = c.com
        r0, r1, r2 = rotate_t(q0, q1, q2, q3, s0, s1, s2, 1.0)
        x0, x1, x2 = c.pivot[0] + r0, c.pivot[1] + r1, c.pivot[2] + r2
        v0, v1, v2 = rotate_t(q0, q1, q2, q3, w1 * s2 - w2 * s1, w2 * s0 - w0 * s2,
                              w0 * s1 - w1 * s0, 1.0)
    m = c.mass
    l0, l1, l2 = _mat3(c.jref, w0, w1, w2)
    pq0 = 2.0 * -(q1 * l0 + q2 * l1 + q3 * l2)  # pq = 2 G(q)^T L
    pq1 = 2.0 * (q0 * l0 + q2 * l2 - q3 * l1)
    pq2 = 2.0 * (q0 * l1 + q3 * l0 - q1 * l2)
    pq3 = 2.0 * (q0 * l2 + q1 * l1 - q2 * l0)
    p0, p1, p2 = m * v0, m * v1, m * v2
    energy2 = w0 * l0 + w1 * l1 + w2 * l2 + v0 * p0 + v1 * p1 + v2 * p2
    return ((x0, x1, x2, q0, q1, q2, q3, v0, v1, v2, w0, w1, w2, p0, p1, p2, pq0, pq1, pq2, pq3,
             l0, l1, l2), energy2)


@jit_inline
def finite_state(s, energy2):
    """True when energy2 and every entry of the 23-tuple s are finite.

    0 * a is 0 for finite a and NaN for NaN or +-inf, so one sum tests them all without a
    branch per entry.  Finite entries can still square to inf: a state whose energy overflows
    is no more usable than a NaN one, so energy2 is tested too.
    """
    acc = 0.0 * energy2
    for a in s:
        acc += 0.0 * a
    return acc == acc


# Helpers run once per call are ordinary calls: inlining them would cost compile time and save
# nothing.  Those in the step loop above are inlined (as ordinary calls LLVM left some out of
# line: 0.11 -> 0.32 us/step on the gyro top).
@jit
def _offsets(nb, b):
    """Start of body b's entries of each field (x, q, v, w, P, pq, L) in the flat state."""
    return (3 * b, 3 * nb + 4 * b, 7 * nb + 3 * b, 10 * nb + 3 * b, 13 * nb + 3 * b,
            16 * nb + 4 * b, 20 * nb + 3 * b)


@jit
def load_body(S, nb, b):
    """Body b's 23 state scalars (x, q, v, w, P, pq, L), see common.state_view."""
    x, q, v, w, p, pq, l = _offsets(nb, b)
    return (S[x], S[x + 1], S[x + 2], S[q], S[q + 1], S[q + 2], S[q + 3],
            S[v], S[v + 1], S[v + 2], S[w], S[w + 1], S[w + 2], S[p], S[p + 1], S[p + 2],
            S[pq], S[pq + 1], S[pq + 2], S[pq + 3], S[l], S[l + 1], S[l + 2])


@jit
def store_body(S, nb, b, s):
    """Inverse of :func:`load_body`."""
    x, q, v, w, p, pq, l = _offsets(nb, b)
    S[x], S[x + 1], S[x + 2] = s[0], s[1], s[2]
    S[q], S[q + 1], S[q + 2], S[q + 3] = s[3], s[4], s[5], s[6]
    S[v], S[v + 1], S[v + 2] = s[7], s[8], s[9]
    S[w], S[w + 1], S[w + 2] = s[10], s[11], s[12]
    S[p], S[p + 1], S[p + 2] = s[13], s[14], s[15]
    S[pq], S[pq + 1], S[pq + 2], S[pq + 3] = s[16], s[17], s[18], s[19]
    S[l], S[l + 1], S[l + 2] = s[20], s[21], s[22]


@jit
def advance_body(bm, f_app, t_app, S, S_prev, b, n, dt):
    """Take up to n steps of body b alone; returns how many were taken.

    Stops before a step that would leave a non-finite state.  Writes the body's entries of S
    (the state after the steps taken) and S_prev (the state before the last of them; the
    state at entry if none was taken).
    """
    gravity, bodyf, bodyi, springf, springi = bm
    c = body_constants(gravity, bodyf, bodyi, springi, f_app, t_app, b)
    nb = bodyi.shape[0]
    if c.springs:
        return advance_steps(c, (bodyf, bodyi, springf, springi), S, S_prev, nb, b, n, dt)
    return advance_steps(c, None, S, S_prev, nb, b, n, dt)


@jit
def advance_steps(c, springs, S, S_prev, nb, b, n, dt):
    """:func:`advance_body` for body b with constants c; springs: see :func:`derivative`.
    One step is :func:`_update` (another scheme compiles this loop again around its own:
    ``semi_implicit_euler``)."""
    s = load_body(S, nb, b)
    prev = s
    taken = 0
    while taken < n:
        new, energy2 = _update(c, springs, b, s[:13], dt)
        if not finite_state(new, energy2):
            break
        prev = s
        s = new
        taken += 1
    store_body(S, nb, b, s)
    store_body(S_prev, nb, b, prev)
    return taken


@jit_inline
def _update(c, springs, b, y, dt):
    """One RK4 step of body b from y (13 values), settled: (state, |L|^2 or energy)."""
    half = 0.5 * dt
    sixth = dt / 6.0
    k1 = derivative(c, springs, b, y)
    k2 = derivative(c, springs, b, _axpy(y, k1, half))
    k3 = derivative(c, springs, b, _axpy(y, k2, half))
    k4 = derivative(c, springs, b, _axpy(y, k3, dt))
    return settle_body(c, (
        y[0] + sixth * (k1[0] + 2.0 * (k2[0] + k3[0]) + k4[0]),
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
        y[12] + sixth * (k1[12] + 2.0 * (k2[12] + k3[12]) + k4[12])))


@jit
def step(n, dt, F, I):
    """Advance ``n`` steps of size ``dt``; the common kernel signature (see rtrigid.backends.buffers).

    The bodies are advanced one after the other, each through all n steps.  If one of them
    would turn non-finite in its step k + 1, the call stops every body after k steps (status
    NONFINITE, S and S_prev both the state at the start of the failed step): the bodies before
    it, which went further, are run again from the state at entry, kept in ``work``.
    """
    (gravity, bodyf, bodyi, springf, springi, S, S_prev, f_app, t_app, _, stats,
     work) = open_buffers(F, I)
    bm = BodiesModel(gravity, bodyf, bodyi, springf, springi)
    if n <= 0:
        return OK
    nb = bodyi.shape[0]
    entry = work[:S.shape[0]]
    if nb > 1:
        entry[:] = S
    done = n
    again = True
    while again:
        again = False
        for b in range(nb):
            taken = advance_body(bm, f_app, t_app, S,
                                 S_prev, b, done, dt)
            if taken < done:
                done = taken
                if b > 0:  # the bodies before b went further: all again, from the entry state
                    S[:] = entry
                    again = True
                    break
    stats[STAT_STEPS] += done
    if done < n:
        S_prev[:] = S
        return NONFINITE
    return OK
