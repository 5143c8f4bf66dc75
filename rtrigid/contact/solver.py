"""The contact solve: Coulomb friction by velocity-level impulses, after each free-flight step.

A step is the integrator's conserving free flight (contacts play no part in it), then this
dissipative event: find where each body lies below a ground (:mod:`.geometry`), give it the
impulses that stop its contact points from approaching and from slipping as far as Coulomb's
cone allows, then move it out along the ground normal by its depth.

Per contact (normal n, tangents t1, t2, arm r from the centre of mass) the impulse lambda =
(ln, lt1, lt2) changes the point's velocity by K lambda, K = I/m - [r]x I_w^-1 [r]x.  Projected
Gauss-Seidel over a body's contacts, a fixed number of sweeps (bounded cost): ln <- max(0, ln +
(target - u.n) / (n K n)), the target 0 (inelastic) or -e u0.n for an approach faster than
``rest_speed`` (restitution e); then the tangential impulse that stops slip by the 2x2 tangent
block of K if it lies inside the disc |lt| <= mu ln (sticking; the isotropic friction cone,
not a faceted one), else a push against the slip cut back onto the disc's rim (sliding).  Each normal update with target 0 minimises the kinetic energy along its row, so
it cannot add energy; the sliding update is not an exact minimisation,
so after the sweeps a body whose contacts are all inelastic that would end with more kinetic
energy than it had gets its net impulse scaled back to the least-energy multiple of it (seen
never in the tests; it is the guarantee).

Bodies meet the ground independently of one another, so each body's contacts are solved
alone, in the order of its shape's features: the result does not depend on the order in which
bodies were added.  Position correction: each body is moved along each ground's normal by the
largest depth of its contacts with that ground (no velocity change), so a step ends with no
body below a ground.  That lift raises the potential energy, which the impulses do not always
pay for (a corner dug in by the turn of a spinning plate, not by a fall, gets almost no
impulse): so the whole event is made dissipative -- kinetic energy after plus the lift's
potential energy may not exceed the kinetic energy before, the excess is taken from the
body's velocities (:func:`_pay_for_lift`).  Gravity's potential is counted; springs' is not.
"""
import numpy as np

from rtrigid._jit import jit
from rtrigid.contact.geometry import (
    C_AN,
    C_ARM,
    C_DEPTH,
    C_E,
    C_IMPULSE,
    C_KN,
    C_KS,
    C_KT,
    C_LAMBDA,
    C_MU,
    C_NORMAL,
    C_OTHER,
    C_POINT,
    C_T1,
    C_T2,
    C_TARGET,
    P_NORMAL,
    ground_contacts,
)
from rtrigid.maths.quat import rotate_t


@jit
def _iw_inv(q, inv0, inv1, inv2, y0, y1, y2):
    """I_w^-1 y = R diag(1/I) R^T y."""
    b = rotate_t(q[0], q[1], q[2], q[3], y0, y1, y2, -1.0)
    return rotate_t(q[0], q[1], q[2], q[3], b[0] * inv0, b[1] * inv1, b[2] * inv2, 1.0)


@jit
def _k_times(q, minv, inv, r, d):
    """(K d, a): K d = d / m + a x r, the point's velocity change per unit impulse d, and
    a = I_w^-1 (r x d), the body's change of angular velocity."""
    c0 = r[1] * d[2] - r[2] * d[1]
    c1 = r[2] * d[0] - r[0] * d[2]
    c2 = r[0] * d[1] - r[1] * d[0]
    a = _iw_inv(q, inv[0], inv[1], inv[2], c0, c1, c2)
    return (d[0] * minv + a[1] * r[2] - a[2] * r[1],
            d[1] * minv + a[2] * r[0] - a[0] * r[2],
            d[2] * minv + a[0] * r[1] - a[1] * r[0]), a


@jit
def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@jit
def _tangents(n):
    """Two unit vectors completing n to a right-handed basis (a fixed choice per n)."""
    if abs(n[0]) < 0.57735:
        a = (1.0, 0.0, 0.0)
    else:
        a = (0.0, 1.0, 0.0)
    t0 = n[1] * a[2] - n[2] * a[1]
    t1 = n[2] * a[0] - n[0] * a[2]
    t2 = n[0] * a[1] - n[1] * a[0]
    s = 1.0 / np.sqrt(t0 * t0 + t1 * t1 + t2 * t2)
    t0, t1, t2 = t0 * s, t1 * s, t2 * s
    return (t0, t1, t2), (n[1] * t2 - n[2] * t1, n[2] * t0 - n[0] * t2, n[0] * t1 - n[1] * t0)


@jit
def _row3(row, c):
    return (row[c], row[c + 1], row[c + 2])


@jit
def _point_velocity(vel, r):
    """v + omega x r, vel = (v, omega) world."""
    return (vel[0] + vel[4] * r[2] - vel[5] * r[1],
            vel[1] + vel[5] * r[0] - vel[3] * r[2],
            vel[2] + vel[3] * r[1] - vel[4] * r[0])


@jit
def _push(vel, row, minv, d, s, col):
    """Apply the impulse s d to vel = (v, omega); row[col:col + 3]: its turn per unit."""
    vel[0] += s * d[0] * minv
    vel[1] += s * d[1] * minv
    vel[2] += s * d[2] * minv
    vel[3] += s * row[col]
    vel[4] += s * row[col + 1]
    vel[5] += s * row[col + 2]


@jit
def _prepare(table, k0, k1, x, q, minv, inv, vel, rest_speed):
    """Per contact: arm, tangents, the inverse blocks of K, the normal target; lambda = 0."""
    for k in range(k0, k1):
        row = table[k]
        n = _row3(row, C_NORMAL)
        r = (row[C_POINT] - x[0], row[C_POINT + 1] - x[1], row[C_POINT + 2] - x[2])
        t1, t2 = _tangents(n)
        kn, an = _k_times(q, minv, inv, r, n)
        k1v, a1 = _k_times(q, minv, inv, r, t1)
        k2v, a2 = _k_times(q, minv, inv, r, t2)
        a, bb, d = _dot(t1, k1v), _dot(t1, k2v), _dot(t2, k2v)
        det = a * d - bb * bb
        for i in range(3):
            row[C_ARM + i] = r[i]
            row[C_T1 + i] = t1[i]
            row[C_T2 + i] = t2[i]
            row[C_LAMBDA + i] = 0.0
            row[C_AN + i] = an[i]
            row[C_AN + 3 + i] = a1[i]
            row[C_AN + 6 + i] = a2[i]
        row[C_KN] = 1.0 / _dot(n, kn)
        row[C_KS] = 1.0 / (0.5 * (a + d) + np.sqrt(0.25 * (a - d) ** 2 + bb * bb))
        row[C_KT], row[C_KT + 1], row[C_KT + 2], row[C_KT + 3] = (d / det, -bb / det,
                                                                 -bb / det, a / det)
        un = _dot(n, _point_velocity(vel, r))
        row[C_TARGET] = -row[C_E] * un if un < -rest_speed else 0.0


@jit
def _sweep(table, k0, k1, minv, vel):
    """One projected Gauss-Seidel sweep over contacts k0..k1-1; returns the largest change
    of an impulse."""
    change = 0.0
    for k in range(k0, k1):
        row = table[k]
        n = _row3(row, C_NORMAL)
        r = _row3(row, C_ARM)
        u = _point_velocity(vel, r)
        ln = max(0.0, row[C_LAMBDA] + (row[C_TARGET] - _dot(n, u)) * row[C_KN])
        dn = ln - row[C_LAMBDA]
        row[C_LAMBDA] = ln
        _push(vel, row, minv, n, dn, C_AN)
        t1, t2 = _row3(row, C_T1), _row3(row, C_T2)
        u = _point_velocity(vel, r)
        u1, u2 = _dot(t1, u), _dot(t2, u)
        l1 = row[C_LAMBDA + 1] - (row[C_KT] * u1 + row[C_KT + 1] * u2)
        l2 = row[C_LAMBDA + 2] - (row[C_KT + 2] * u1 + row[C_KT + 3] * u2)
        cap = row[C_MU] * ln
        s = np.sqrt(l1 * l1 + l2 * l2)
        if s > cap:
            # sliding: the push along -slip (scalar effective mass), onto the cone's rim, so
            # that where the sweeps settle the friction opposes the slip (Coulomb's maximum
            # dissipation); the exact 2x2 step, cut radially, would tilt it by K's anisotropy
            l1 = row[C_LAMBDA + 1] - row[C_KS] * u1
            l2 = row[C_LAMBDA + 2] - row[C_KS] * u2
            s = np.sqrt(l1 * l1 + l2 * l2)
            if s > cap:
                l1, l2 = l1 * cap / s, l2 * cap / s
        d1, d2 = l1 - row[C_LAMBDA + 1], l2 - row[C_LAMBDA + 2]
        row[C_LAMBDA + 1], row[C_LAMBDA + 2] = l1, l2
        _push(vel, row, minv, t1, d1, C_AN + 3)
        _push(vel, row, minv, t2, d2, C_AN + 6)
        change = max(change, abs(dn), abs(d1), abs(d2))
    return change


@jit
def _kinetic(q, m, inertia, vel):
    """Twice the kinetic energy of vel = (v, omega world)."""
    wb = rotate_t(q[0], q[1], q[2], q[3], vel[3], vel[4], vel[5], -1.0)
    return (m * (vel[0] * vel[0] + vel[1] * vel[1] + vel[2] * vel[2])
            + inertia[0] * wb[0] * wb[0] + inertia[1] * wb[1] * wb[1]
            + inertia[2] * wb[2] * wb[2])


@jit
def solve_body(table, k0, k1, x, q, v, w, m, inertia, vel, iters, rest_speed):
    """Solve body b's contacts (rows k0..k1-1); writes v, w (w in body axes, as the state)
    and each row's world impulse.  vel: scratch of 12."""
    minv = 1.0 / m
    inv = (1.0 / inertia[0], 1.0 / inertia[1], 1.0 / inertia[2])
    om = rotate_t(q[0], q[1], q[2], q[3], w[0], w[1], w[2], 1.0)
    for i in range(3):
        vel[i] = v[i]
        vel[3 + i] = om[i]
        vel[6 + i] = v[i]
        vel[9 + i] = om[i]
    _prepare(table, k0, k1, x, q, minv, inv, vel, rest_speed)
    for _ in range(iters):
        # a sweep that changed no impulse beyond round-off of the body's momentum ends it
        if _sweep(table, k0, k1, minv, vel) <= 1e-15 * m * (abs(vel[6]) + abs(vel[7])
                                                             + abs(vel[8]) + 1e-3):
            break
    scale = 1.0
    elastic = False
    for k in range(k0, k1):
        elastic = elastic or table[k, C_TARGET] > 0.0
    if not elastic:
        before = _kinetic(q, m, inertia, vel[6:12])
        after = _kinetic(q, m, inertia, vel[0:6])
        if after > before:
            # f(s) = s a + s^2 c: the kinetic energy change of s times the net impulse
            for i in range(6):
                vel[i] -= vel[6 + i]
            c = _kinetic(q, m, inertia, vel[0:6])
            a = after - before - c
            scale = min(1.0, max(0.0, -a / (2.0 * c))) if c > 0.0 else 0.0
            for i in range(6):
                vel[i] = vel[6 + i] + scale * vel[i]
    for k in range(k0, k1):
        row = table[k]
        for i in range(3):
            row[C_IMPULSE + i] = scale * (row[C_LAMBDA] * row[C_NORMAL + i]
                                          + row[C_LAMBDA + 1] * row[C_T1 + i]
                                          + row[C_LAMBDA + 2] * row[C_T2 + i])
    wb = rotate_t(q[0], q[1], q[2], q[3], vel[3], vel[4], vel[5], -1.0)
    for i in range(3):
        v[i] = vel[i]
        w[i] = wb[i]


@jit
def _pay_for_lift(q, v, w, m, inertia, vel, gravity, lift):
    """Make the contact event dissipative: if the kinetic energy after the impulses plus the
    potential energy the lift adds exceeds the kinetic energy before, take the excess out of
    the velocities (scaled down together), or -- when they do not hold that much -- stop the
    body and shorten the lift.  Returns the lift's scale (1 unless shortened)."""
    k0 = 0.5 * _kinetic(q, m, inertia, vel[6:12])
    k1 = 0.5 * _kinetic(q, m, inertia, vel[0:6])
    dpe = -m * (gravity[0] * lift[0] + gravity[1] * lift[1] + gravity[2] * lift[2])
    excess = k1 + dpe - k0
    if not excess > 0.0:
        return 1.0
    if excess < k1:
        s = np.sqrt((k1 - excess) / k1)
        for i in range(3):
            v[i] *= s
            w[i] *= s
        return 1.0
    for i in range(3):
        v[i] = 0.0
        w[i] = 0.0
    return k0 / dpe


@jit
def resolve(table, x, q, v, w, mass, inertia, active, geom, grounds, gravity, touched, vel,
            iters, rest_speed):
    """Detect and solve every active body's ground contacts; returns the number of contacts
    (rows of ``table``).  ``touched[b]`` is set to 1 for a body whose velocities or position
    changed (its momenta must be re-derived), else 0."""
    k = 0
    for b in range(x.shape[0]):
        touched[b] = 0
        if not active[b]:
            continue
        k0 = k
        for g in range(grounds.shape[0]):
            k = ground_contacts(table, k, b, geom, x[b], q[b], g, grounds[g])
        if k == k0:
            continue
        touched[b] = 1
        solve_body(table, k0, k, x[b], q[b], v[b], w[b], mass[b], inertia[b], vel, iters,
                   rest_speed)
        l0, l1, l2 = 0.0, 0.0, 0.0
        for g in range(grounds.shape[0]):
            depth = 0.0
            for c in range(k0, k):
                if table[c, C_OTHER] == -1 - g:
                    depth = max(depth, table[c, C_DEPTH])
            l0 += depth * grounds[g, P_NORMAL]
            l1 += depth * grounds[g, P_NORMAL + 1]
            l2 += depth * grounds[g, P_NORMAL + 2]
        s = _pay_for_lift(q[b], v[b], w[b], mass[b], inertia[b], vel, gravity, (l0, l1, l2))
        x[b, 0] += s * l0
        x[b, 1] += s * l1
        x[b, 2] += s * l2
    return k
