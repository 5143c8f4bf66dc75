"""The contact solve: Coulomb friction by velocity-level impulses, after each free-flight step.

A step is the integrator's conserving free flight (contacts play no part in it), then this
dissipative event: find where bodies lie below a ground (:mod:`.geometry`) or inside one
another (:mod:`.pairs`, after a sweep-and-prune broad phase), give them the impulses that stop
their contact points from approaching and from slipping as far as Coulomb's cone allows, then
move them apart along the contact normals by their depths.

Per contact (normal n, tangents t1, t2, arms r_a, r_b from the centres of mass) the impulse
lambda = (ln, lt1, lt2), on the first body and its opposite on the second, changes the
points' relative velocity by K lambda, K = K_a + K_b, K_i = I/m_i - [r_i]x I_i^-1 [r_i]x.
Projected Gauss-Seidel over all contacts, at most ``iters`` sweeps and at most
``UPDATE_BUDGET`` contact updates (never fewer than ``MIN_SWEEPS`` sweeps: bounded cost; a
sweep that changes no impulse beyond round-off ends them early): ln <- max(0, ln + (target - u.n) /
(n K n)), the target 0 (inelastic) or -e u0.n for an approach faster than ``rest_speed``
(restitution e); then the tangential impulse that stops slip by the 2x2 tangent block of K
if it lies inside the disc |lt| <= mu ln (sticking; the isotropic friction cone, not a
faceted one), else a push against the slip cut back onto the disc's rim (sliding; where the
sweeps settle the friction opposes the slip, Coulomb's maximum dissipation).

Energy.  Each normal update with target 0 minimises the kinetic energy along its row; the
sliding update is not an exact minimisation, so an island of touching bodies whose contacts
are all inelastic that would end with more kinetic energy than it had gets its net impulses
scaled back to their least-energy multiple.  Position correction then moves bodies out along
the normals (Gauss-Seidel sweeps of translations over the contacts, the ground immovable and
of two bodies the one nearer a ground too, two as near sharing a depth by inverse mass; no
velocity change), so a step ends
with no body below a ground.  That lift raises the potential energy, which the impulses do
not always pay for (a corner dug in by the turn of a spinning plate, not by a fall, gets
almost no impulse): so the whole event is made dissipative -- per island, kinetic energy
after plus the lift's potential energy may not exceed the kinetic energy before; the excess
is taken from the island's velocities (scaled down together), or, when they do not hold that
much, the island stops and its lift is shortened.  Gravity's potential is counted; springs'
is not.  Under a scheme whose free flight does not keep energy (``semi_implicit_euler``: its
flight lowers a resting body by g h^2 while its kinetic energy pays for only half of that
lift, so this rule alone let a resting stack sink g h^2 / 2 a step) the budget is taken from
the step's start: the event may end the step with the energy the step started with or the
flight left, whichever is more (:func:`flight_allowance`).  It adds no energy to the step,
and the flight's own error is not its to bound.

Order.  Every loop over bodies or contacts runs in the order of the bodies' names (``order``,
``rank``), and the broad phase's sweep breaks ties by it, so the result does not depend on the
order in which bodies were added.
"""
import numpy as np

from rtrigid._jit import jit
from rtrigid.contact.geometry import (
    C_AN,
    C_ARM,
    C_ARMB,
    C_BN,
    C_BODY,
    C_DEPTH,
    C_E,
    C_FEATURE,
    C_IMPULSE,
    C_KN,
    C_KS,
    C_KT,
    C_LAMBDA,
    C_MU,
    C_MUR,
    C_MUT,
    C_NORMAL,
    C_OTHER,
    C_POINT,
    C_SPIN,
    C_T1,
    C_T2,
    C_TARGET,
    CONE,
    CYLINDER,
    G_KIND,
    G_MUR,
    G_MUT,
    G_RADIUS,
    MARGIN,
    MAX_POINTS,
    P_MUR,
    P_MUT,
    ground_contacts,
)
from rtrigid.contact.pairs import pair_contacts, shape_centre
from rtrigid.maths.quat import rotate_t

LIFT_SWEEPS = 16  # Gauss-Seidel sweeps of the position correction
# the velocity solve's budget: at most this many contact updates per step (so at most
# ``iters`` sweeps, fewer when there are many contacts, but never fewer than MIN_SWEEPS)
UPDATE_BUDGET = 128
NO_PARENTS = np.empty(0, np.int64)  # free bodies: no joints, every pair may collide
MIN_SWEEPS = 4
# a backend's after_step flag (its int scratch's first entry): the scheme's free flight does
# not keep energy, so the event's energy budget is taken from the step's start
START_BUDGET = 2
# columns of the solver's per-body scratch ``vel`` (see :func:`resolve`; the last: the flight gap)
VEL_WIDTH = 17
GAP = VEL_WIDTH - 1  # the flight gap's column


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
def tangents(n):
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
def _point_velocity(vel, a, b, ra, rb):
    """Velocity of body a's point at arm ra relative to body b's at arm rb (b < 0: the
    ground); vel[i] = (v, omega world, ...)."""
    va = vel[a]
    u0 = va[0] + va[4] * ra[2] - va[5] * ra[1]
    u1 = va[1] + va[5] * ra[0] - va[3] * ra[2]
    u2 = va[2] + va[3] * ra[1] - va[4] * ra[0]
    if b >= 0:
        vb = vel[b]
        u0 -= vb[0] + vb[4] * rb[2] - vb[5] * rb[1]
        u1 -= vb[1] + vb[5] * rb[0] - vb[3] * rb[2]
        u2 -= vb[2] + vb[3] * rb[1] - vb[4] * rb[0]
    return (u0, u1, u2)


@jit
def _push(vel, row, a, b, minv, d, s, col):
    """Apply the impulse s d to body a and -s d to body b (if any); row[col:col + 3] is a's
    turn per unit impulse, row[col + C_BN - C_AN:] b's."""
    va = vel[a]
    for i in range(3):
        va[i] += s * d[i] * minv[a]
        va[3 + i] += s * row[col + i]
    if b >= 0:
        vb = vel[b]
        o = col + C_BN - C_AN
        for i in range(3):
            vb[i] -= s * d[i] * minv[b]
            vb[3 + i] += s * row[o + i]


@jit
def contact_key(row, nb):
    """A contact's identity from step to step: its bodies (or body and ground) and feature."""
    other = int(row[C_OTHER])
    if other < 0:
        other = nb - 1 - other
    return (int(row[C_BODY]) * (nb + 64) + other) * 64 + int(row[C_FEATURE])


@jit
def slot(keys, key):
    """The slot of ``key`` in the open-addressed table ``keys`` (H, 2): its own, or the empty
    one where it would go."""
    mask = keys.shape[0] - 1
    h = (key * 2654435761) & mask
    while keys[h, 0] != -1 and keys[h, 0] != key:
        h = (h + 1) & mask
    return h


@jit
def remember(table, count, nb, keys, lam):
    """Keep this step's impulses, by contact identity, to start the next step's solve."""
    for h in range(keys.shape[0]):
        keys[h, 0] = -1
    for k in range(count):
        row = table[k]
        key = contact_key(row, nb)
        h = slot(keys, key)
        keys[h, 0], keys[h, 1] = key, k
        for i in range(3):
            lam[k, i] = row[C_LAMBDA + i]


@jit
def _warm_start(table, count, nb, keys, lam, minv, vel):
    """Start each contact from the normal impulse the same contact ended the last step with,
    and apply it (Box2D's and Bullet's warm start: a stack's load need not travel through it
    again every step).  Friction starts from zero: with more contacts than a body has
    freedoms, carried friction impulses can settle into a self-cancelling loop that grows
    from step to step (seen on a box resting on a box)."""
    for k in range(count):
        row = table[k]
        h = slot(keys, contact_key(row, nb))
        if keys[h, 0] == -1:
            continue
        j = keys[h, 1]
        a, b = int(row[C_BODY]), int(row[C_OTHER])
        ln = lam[j, 0]
        row[C_LAMBDA] = ln
        _push(vel, row, a, b, minv, _row3(row, C_NORMAL), ln, C_AN)


@jit
def _prepare(table, count, x, q, mass, inertia, vel, rest_speed, dt):
    """Per contact: arms, tangents, turn responses, the inverse blocks of K, the normal
    target; lambda = 0.  A speculative contact (depth < 0: a gap) may close its gap within
    the next step and no faster (target depth / dt), unless it is elastic and approaches
    faster than ``rest_speed`` -- then it is left free, so that it bounces when it touches."""
    for k in range(count):
        row = table[k]
        a, b = int(row[C_BODY]), int(row[C_OTHER])
        n = _row3(row, C_NORMAL)
        t1, t2 = tangents(n)
        ra = (row[C_POINT] - x[a, 0], row[C_POINT + 1] - x[a, 1], row[C_POINT + 2] - x[a, 2])
        inv = (1.0 / inertia[a, 0], 1.0 / inertia[a, 1], 1.0 / inertia[a, 2])
        kn, an = _k_times(q[a], 1.0 / mass[a], inv, ra, n)
        k1v, a1 = _k_times(q[a], 1.0 / mass[a], inv, ra, t1)
        k2v, a2 = _k_times(q[a], 1.0 / mass[a], inv, ra, t2)
        rb = (0.0, 0.0, 0.0)
        if b >= 0:
            rb = (row[C_POINT] - x[b, 0], row[C_POINT + 1] - x[b, 1], row[C_POINT + 2] - x[b, 2])
            inv = (1.0 / inertia[b, 0], 1.0 / inertia[b, 1], 1.0 / inertia[b, 2])
            m = (-n[0], -n[1], -n[2])
            s1 = (-t1[0], -t1[1], -t1[2])
            s2 = (-t2[0], -t2[1], -t2[2])
            knb, bn = _k_times(q[b], 1.0 / mass[b], inv, rb, m)
            k1b, b1 = _k_times(q[b], 1.0 / mass[b], inv, rb, s1)
            k2b, b2 = _k_times(q[b], 1.0 / mass[b], inv, rb, s2)
            kn = (kn[0] - knb[0], kn[1] - knb[1], kn[2] - knb[2])
            k1v = (k1v[0] - k1b[0], k1v[1] - k1b[1], k1v[2] - k1b[2])
            k2v = (k2v[0] - k2b[0], k2v[1] - k2b[1], k2v[2] - k2b[2])
            for i in range(3):
                row[C_BN + i] = bn[i]
                row[C_BN + 3 + i] = b1[i]
                row[C_BN + 6 + i] = b2[i]
        a11, a12, a22 = _dot(t1, k1v), _dot(t1, k2v), _dot(t2, k2v)
        for i in range(3):
            row[C_ARM + i] = ra[i]
            row[C_ARMB + i] = rb[i]
            row[C_T1 + i] = t1[i]
            row[C_T2 + i] = t2[i]
            row[C_LAMBDA + i] = 0.0
            row[C_SPIN + i] = 0.0
            row[C_AN + i] = an[i]
            row[C_AN + 3 + i] = a1[i]
            row[C_AN + 6 + i] = a2[i]
        set_response(row, _dot(n, kn), a11, a12, a22)
        set_target(row, _dot(n, _point_velocity(vel, a, b, ra, rb)), rest_speed, dt)


@jit
def set_response(row, knn, a11, a12, a22):
    """A contact's inverse responses from its Delassus block K (relative velocity change per
    unit impulse, in the basis n, t1, t2): 1 / K_nn, the inverse of the tangent 2x2 block
    (a11, a12; a12, a22), and the scalar sliding response 1 / (its largest eigenvalue)."""
    det = a11 * a22 - a12 * a12
    row[C_KN] = 1.0 / knn
    row[C_KT], row[C_KT + 1], row[C_KT + 2], row[C_KT + 3] = (a22 / det, -a12 / det,
                                                             -a12 / det, a11 / det)
    row[C_KS] = 1.0 / (0.5 * (a11 + a22) + np.sqrt(0.25 * (a11 - a22) ** 2 + a12 * a12))


@jit
def set_target(row, un, rest_speed, dt):
    """The normal velocity the contact aims at, from its normal velocity un before the
    solve (see :func:`_prepare`)."""
    if row[C_DEPTH] >= 0.0:
        row[C_TARGET] = -row[C_E] * un if un < -rest_speed else 0.0
    elif row[C_E] > 0.0 and un < -rest_speed:
        row[C_TARGET] = -np.inf
    else:
        row[C_TARGET] = row[C_DEPTH] / dt


@jit
def normal_update(row, un):
    """The projected Gauss-Seidel step of the normal impulse, at normal velocity un: stores
    the new impulse, returns its change."""
    ln = max(0.0, row[C_LAMBDA] + (row[C_TARGET] - un) * row[C_KN])
    dn = ln - row[C_LAMBDA]
    row[C_LAMBDA] = ln
    return dn


@jit
def friction_update(row, u1, u2):
    """The friction impulse's step at tangential velocity (u1, u2), within the disc
    |lt| <= mu ln of the present normal impulse: stores it, returns its change."""
    l1 = row[C_LAMBDA + 1] - (row[C_KT] * u1 + row[C_KT + 1] * u2)
    l2 = row[C_LAMBDA + 2] - (row[C_KT + 2] * u1 + row[C_KT + 3] * u2)
    cap = row[C_MU] * row[C_LAMBDA]
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
    return d1, d2


@jit
def by_level(table, count, level, rows):
    """rows[:count]: the contacts ordered from the one farthest from a ground to the ground
    contacts (by the level of their upper body; a stable counting sort, so ties keep the
    table's order).  Sweeping a stack top down carries its weight to the ground in one
    sweep."""
    nb = level.shape[0]
    k = 0
    for lv in range(nb, -1, -1):
        for c in range(count):
            a, b = int(table[c, C_BODY]), int(table[c, C_OTHER])
            top = level[a] if b < 0 else max(level[a], level[b])
            if top == lv:
                rows[k] = c
                k += 1


@jit
def _sweep(table, count, rows, minv, vel, q, inertia):
    """One projected Gauss-Seidel sweep over the contacts in the order ``rows``; returns the
    largest change of an impulse (or, for torsional and rolling friction, of an angular
    impulse)."""
    change = 0.0
    for i in range(count):
        row = table[rows[i]]
        a, b = int(row[C_BODY]), int(row[C_OTHER])
        n = _row3(row, C_NORMAL)
        ra, rb = _row3(row, C_ARM), _row3(row, C_ARMB)
        dn = normal_update(row, _dot(n, _point_velocity(vel, a, b, ra, rb)))
        ln = row[C_LAMBDA]
        _push(vel, row, a, b, minv, n, dn, C_AN)
        t1, t2 = _row3(row, C_T1), _row3(row, C_T2)
        u = _point_velocity(vel, a, b, ra, rb)
        d1, d2 = friction_update(row, _dot(t1, u), _dot(t2, u))
        _push(vel, row, a, b, minv, t1, d1, C_AN + 3)
        _push(vel, row, a, b, minv, t2, d2, C_AN + 6)
        change = max(change, abs(dn), abs(d1), abs(d2))
        if row[C_MUT] > 0.0 or row[C_MUR] > 0.0:
            change = max(change, _spin(row, a, b, ln, vel, q, inertia))
    return change


@jit
def _turn(vel, q, inertia, a, b, d, s):
    """Apply the angular impulse s d to body a and -s d to body b (b < 0: the ground)."""
    ia = _iw_inv(q[a], 1.0 / inertia[a, 0], 1.0 / inertia[a, 1], 1.0 / inertia[a, 2],
                 d[0], d[1], d[2])
    for i in range(3):
        vel[a, 3 + i] += s * ia[i]
    if b >= 0:
        ib = _iw_inv(q[b], 1.0 / inertia[b, 0], 1.0 / inertia[b, 1], 1.0 / inertia[b, 2],
                     d[0], d[1], d[2])
        for i in range(3):
            vel[b, 3 + i] -= s * ib[i]


@jit
def _turn_response(q, inertia, a, b, d, e):
    """e . (I_a^-1 + I_b^-1) d: the relative turn about e per unit angular impulse along d."""
    ia = _iw_inv(q[a], 1.0 / inertia[a, 0], 1.0 / inertia[a, 1], 1.0 / inertia[a, 2],
                 d[0], d[1], d[2])
    k = _dot(e, ia)
    if b >= 0:
        ib = _iw_inv(q[b], 1.0 / inertia[b, 0], 1.0 / inertia[b, 1], 1.0 / inertia[b, 2],
                     d[0], d[1], d[2])
        k += _dot(e, ib)
    return k


@jit
def _relative_turn(vel, a, b, d):
    """d . (omega_a - omega_b) (b < 0: the ground)."""
    s = vel[a, 3] * d[0] + vel[a, 4] * d[1] + vel[a, 5] * d[2]
    if b >= 0:
        s -= vel[b, 3] * d[0] + vel[b, 4] * d[1] + vel[b, 5] * d[2]
    return s


@jit
def _spin(row, a, b, ln, vel, q, inertia):
    """The torsional and rolling friction rows of one contact (MuJoCo's condim 4 and 6):
    an angular impulse about the normal, |tau_n| <= mu_t ln, that stops the bodies' relative
    spin about it, and one about the tangents, |(tau_1, tau_2)| <= mu_r ln (a disc), that
    stops their relative rolling -- each the least-kinetic-energy value on its bound (a
    projected Gauss-Seidel step, like the sliding friction's).  Returns the largest change."""
    n, t1, t2 = _row3(row, C_NORMAL), _row3(row, C_T1), _row3(row, C_T2)
    change = 0.0
    if row[C_MUT] > 0.0:
        cap = row[C_MUT] * ln
        old = row[C_SPIN]
        tau = old - _relative_turn(vel, a, b, n) / _turn_response(q, inertia, a, b, n, n)
        tau = min(cap, max(-cap, tau))
        row[C_SPIN] = tau
        _turn(vel, q, inertia, a, b, n, tau - old)
        change = abs(tau - old)
    if row[C_MUR] > 0.0:
        cap = row[C_MUR] * ln
        o1, o2 = row[C_SPIN + 1], row[C_SPIN + 2]
        a11 = _turn_response(q, inertia, a, b, t1, t1)
        a12 = _turn_response(q, inertia, a, b, t2, t1)
        a22 = _turn_response(q, inertia, a, b, t2, t2)
        u1, u2 = _relative_turn(vel, a, b, t1), _relative_turn(vel, a, b, t2)
        det = a11 * a22 - a12 * a12
        l1 = o1 - (a22 * u1 - a12 * u2) / det
        l2 = o2 - (a11 * u2 - a12 * u1) / det
        s = np.sqrt(l1 * l1 + l2 * l2)
        if s > cap:
            # rolling: the push along -turn (scalar response), cut onto the disc's rim, so
            # the torque opposes the rolling (as the sliding friction does the slip)
            ks = 1.0 / (0.5 * (a11 + a22) + np.sqrt(0.25 * (a11 - a22) ** 2 + a12 * a12))
            l1, l2 = o1 - ks * u1, o2 - ks * u2
            s = np.sqrt(l1 * l1 + l2 * l2)
            if s > cap:
                l1, l2 = l1 * cap / s, l2 * cap / s
        row[C_SPIN + 1], row[C_SPIN + 2] = l1, l2
        _turn(vel, q, inertia, a, b, t1, l1 - o1)
        _turn(vel, q, inertia, a, b, t2, l2 - o2)
        change = max(change, abs(l1 - o1), abs(l2 - o2))
    return change


@jit
def _kinetic(q, m, inertia, v):
    """Twice the kinetic energy of v = (v, omega world)."""
    wb = rotate_t(q[0], q[1], q[2], q[3], v[3], v[4], v[5], -1.0)
    return (m * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2])
            + inertia[0] * wb[0] * wb[0] + inertia[1] * wb[1] * wb[1]
            + inertia[2] * wb[2] * wb[2])


@jit
def island_root(island, b):
    while island[b] != b:
        b = island[b]
    return b


@jit
def islands(table, count, order, rank, island):
    """island[b]: the root of b's island of touching bodies (the lowest-ranked body)."""
    for r in range(order.shape[0]):
        island[order[r]] = order[r]
    for k in range(count):
        b = int(table[k, C_OTHER])
        if b >= 0:
            i, j = island_root(island, int(table[k, C_BODY])), island_root(island, b)
            if i != j:
                if rank[i] < rank[j]:
                    island[j] = i
                else:
                    island[i] = j
    for r in range(order.shape[0]):
        island[order[r]] = island_root(island, order[r])


@jit
def levels(table, count, level):
    """level[b]: how many contacts lie between body b and a ground (0: it touches one; nb:
    none of its contacts reaches one)."""
    nb = level.shape[0]
    for b in range(nb):
        level[b] = nb
    for k in range(count):
        if table[k, C_OTHER] < 0:
            level[int(table[k, C_BODY])] = 0
    changed = True
    rounds = 0
    while changed and rounds < nb:
        changed = False
        rounds += 1
        for k in range(count):
            b = int(table[k, C_OTHER])
            if b < 0:
                continue
            a = int(table[k, C_BODY])
            if level[b] + 1 < level[a]:
                level[a] = level[b] + 1
                changed = True
            elif level[a] + 1 < level[b]:
                level[b] = level[a] + 1
                changed = True


@jit
def _lift(table, count, minv, level, lift, sweeps):
    """Translations that take the contacts' depths out: Gauss-Seidel over the contacts, the
    ground immovable and, of two bodies, the one nearer a ground too (shock propagation: a
    stack is lifted level by level instead of its bottom being pushed back into the ground);
    two bodies as near share a depth by inverse mass."""
    for _ in range(sweeps):
        for k in range(count):
            row = table[k]
            a, b = int(row[C_BODY]), int(row[C_OTHER])
            n = _row3(row, C_NORMAL)
            rel = lift[a, 0] * n[0] + lift[a, 1] * n[1] + lift[a, 2] * n[2]
            wa = 1.0
            if b >= 0:
                rel -= lift[b, 0] * n[0] + lift[b, 1] * n[1] + lift[b, 2] * n[2]
                if level[a] < level[b]:
                    wa = 0.0
                elif level[a] == level[b]:
                    wa = minv[a] / (minv[a] + minv[b])
            depth = row[C_DEPTH] - rel
            if depth > 0.0:
                for i in range(3):
                    lift[a, i] += wa * depth * n[i]
                    if b >= 0:
                        lift[b, i] -= (1.0 - wa) * depth * n[i]


@jit
def _insertion_sort(sweep, lo, rank):
    """Sort ``sweep`` by (lo, rank): nearly sorted from the last step, so about linear."""
    for i in range(1, sweep.shape[0]):
        b = sweep[i]
        j = i - 1
        while j >= 0 and (lo[sweep[j]] > lo[b] or (lo[sweep[j]] == lo[b]
                                                    and rank[sweep[j]] > rank[b])):
            sweep[j + 1] = sweep[j]
            j -= 1
        sweep[j + 1] = b


@jit
def _spin_coefficients(table, k0, k, mu_t, mu_r):
    """Rows k0 to k of one pair: its torsional and rolling friction (the larger side's)."""
    for c in range(k0, k):
        table[c, C_MUT], table[c, C_MUR] = mu_t, mu_r


@jit
def detect(table, x, q, w, active, parent, geom, grounds, order, rank, sweep, lo, centre, dt):
    """Ground contacts of every active body, then the pairs the sweep over x finds; returns
    the number of contacts.  w: body angular velocities (body axes), for the rims' contact
    points half a step ahead (:func:`.geometry.ground_contacts`).  parent: each body's parent
    in its tree (-1 for none), or empty for free bodies: two bodies a joint joins directly do
    not collide (the pair is skipped before the narrow phase)."""
    cap = table.shape[0]
    k = 0
    for r in range(order.shape[0]):
        b = order[r]
        if active[b]:
            om = rotate_t(q[b, 0], q[b, 1], q[b, 2], q[b, 3], w[b, 0], w[b, 1], w[b, 2], 1.0)
            for g in range(grounds.shape[0]):
                if k + MAX_POINTS <= cap:
                    k0 = k
                    k = ground_contacts(table, k, b, geom, x[b], q[b], g, grounds[g], om,
                                        0.5 * dt)
                    _spin_coefficients(table, k0, k, max(geom[b, G_MUT], grounds[g, P_MUT]),
                                       max(geom[b, G_MUR], grounds[g, P_MUR]))
    nb = x.shape[0]
    for b in range(nb):
        c = shape_centre(geom, b, x[b], q[b])
        centre[b, 0], centre[b, 1], centre[b, 2] = c
        lo[b] = c[0] - (1.0 + MARGIN) * geom[b, G_RADIUS] if active[b] else np.inf
    _insertion_sort(sweep, lo, rank)
    for i in range(nb):
        a = sweep[i]
        if not active[a]:
            break  # the inactive ones sort last (lo = inf)
        hi = centre[a, 0] + (1.0 + MARGIN) * geom[a, G_RADIUS]
        for j in range(i + 1, nb):
            b = sweep[j]
            if lo[b] > hi:
                break
            if parent.shape[0] and (parent[a] == b or parent[b] == a):
                continue
            d0 = centre[a, 0] - centre[b, 0]
            d1 = centre[a, 1] - centre[b, 1]
            d2 = centre[a, 2] - centre[b, 2]
            reach = (1.0 + MARGIN) * (geom[a, G_RADIUS] + geom[b, G_RADIUS])
            if d0 * d0 + d1 * d1 + d2 * d2 > reach * reach:
                continue
            k0 = k
            if rank[a] < rank[b]:
                k = pair_contacts(table, k, cap, a, b, geom, x[a], q[a], x[b], q[b])
            else:
                k = pair_contacts(table, k, cap, b, a, geom, x[b], q[b], x[a], q[a])
            _spin_coefficients(table, k0, k, max(geom[a, G_MUT], geom[b, G_MUT]),
                               max(geom[a, G_MUR], geom[b, G_MUR]))
    return k


@jit
def _rolling_rims(table, count, geom, keys, nb, island, flag, vel, spent):
    """flag[root] = 1 for an island that is one body rolling on a ground on the rim of a
    cylinder or cone: every contact of it a rim's deepest point (:func:`.geometry._circle`'s
    first), already a contact last step, and sticking (its friction inside the cone).  Such a
    contact does no work in the continuous motion (its point is at rest), but the point runs
    round the rim: each step's contact is a new material point, which the free flight (turning
    about the last one) brought to it at a speed ~ |w|^2 a dt, and the impulse that stops it
    takes 1/2 u K^-1 u, an O(dt) loss that is the splitting's, not the physics'
    (26 % of the energy per second for the 4 cm disc rolling at 0.4 rad, dt = 0.5 ms).
    spent[root]: twice the energy the island's torsional and rolling friction took (their
    angular impulses against the mean of the spin before and after the solve), the modelled
    loss that stays."""
    for b in range(nb):
        flag[b] = 2
    for k in range(count):
        row = table[k]
        a, o = int(row[C_BODY]), int(row[C_OTHER])
        root = island[a]
        kind, f = int(geom[a, G_KIND]), int(row[C_FEATURE])
        rim = o < 0 and ((kind == CYLINDER and (f == 0 or f == 4)) or (kind == CONE and f == 1))
        ln = row[C_LAMBDA]
        stick = ln > 0.0 and (row[C_LAMBDA + 1] ** 2 + row[C_LAMBDA + 2] ** 2
                              < (1.0 - 1e-9) * (row[C_MU] * ln) ** 2)
        known = keys[slot(keys, contact_key(row, nb)), 0] != -1
        if flag[root] == 2:
            flag[root] = 1
            spent[root] = 0.0
        if not (rim and stick and known):
            flag[root] = 0
        if row[C_MUT] > 0.0 or row[C_MUR] > 0.0:
            for i in range(3):
                d = (row[C_NORMAL + i], row[C_T1 + i], row[C_T2 + i])
                w = 0.5 * (vel[a, 3 + i] + vel[a, 9 + i])  # the spin, mid-solve
                spent[root] -= 2.0 * w * (row[C_SPIN] * d[0] + row[C_SPIN + 1] * d[1]
                                          + row[C_SPIN + 2] * d[2])
    for b in range(nb):
        if flag[b] == 2:
            flag[b] = 0


@jit
def elastic_islands(table, count, island, sums):
    """sums (nb, 3) <- 0, and sums[root, 2] = 1 for each island with an elastic contact (one
    whose target normal velocity is a rebound): the energy rule's per-island sums."""
    for b in range(sums.shape[0]):
        sums[b, 0] = 0.0
        sums[b, 1] = 0.0
        sums[b, 2] = 0.0
    for k in range(count):
        if table[k, C_TARGET] > 0.0:
            sums[island[int(table[k, C_BODY])], 2] = 1.0


@jit
def least_energy_scale(before, after, change):
    """The multiple s in [0, 1] of an island's impulses that leaves it the least kinetic
    energy, from twice its kinetic energy before them, after them, and of their velocity
    change alone (C): twice the energy change of s times them is f(s) = s A + s^2 C with
    A = after - before - C."""
    a = after - before - change
    return min(1.0, max(0.0, -a / (2.0 * change))) if change > 0.0 else 0.0


@jit
def scale_impulses(table, count, island, sums):
    """Each contact's impulses times its island's scale sums[root, 2], and its world impulse
    (normal and friction parts) into C_IMPULSE."""
    for k in range(count):
        row = table[k]
        s = sums[island[int(row[C_BODY])], 2]
        for i in range(3):
            row[C_IMPULSE + i] = s * (row[C_LAMBDA] * row[C_NORMAL + i]
                                      + row[C_LAMBDA + 1] * row[C_T1 + i]
                                      + row[C_LAMBDA + 2] * row[C_T2 + i])
        for i in range(3):
            row[C_LAMBDA + i] *= s


@jit
def energy_scales(order, touched, island, sums, rolling, spent):
    """Per touched island (root b), from twice its kinetic energy before the event
    sums[b, 0], after the impulses sums[b, 1] and the lift's potential energy sums[b, 2]:
    (velocity scale, lift scale) into sums[b, 0:2] -- the excess of after plus lift over
    before comes out of the velocities, or, when they do not hold that much, the island stops
    and its lift is shortened.  An island with rolling[b] == 1 (one body rolling on a rim
    without slip, :func:`_rolling_rims`) that lost energy gets back what its impulses took
    beyond the lift and spent[b] (twice its torsional and rolling friction's work), never
    more than it had.  Returns True if some lift was shortened."""
    shortened = False
    for r in range(order.shape[0]):
        b = order[r]
        if not touched[b] or island[b] != b:
            continue
        excess = sums[b, 1] + sums[b, 2] - sums[b, 0]
        velocity_scale, lift_scale = 1.0, 1.0
        if rolling[b] == 1 and excess < 0.0 and sums[b, 1] > 0.0:
            # a rim rolling without slip: its contact does no work (see _rolling_rims); what
            # the impulses took beyond the modelled rolling resistance goes back to its motion
            velocity_scale = np.sqrt(max(0.0, sums[b, 0] - sums[b, 2] - spent[b]) / sums[b, 1])
            velocity_scale = max(1.0, velocity_scale)
        elif excess > 0.0:
            if excess < sums[b, 1]:
                velocity_scale = np.sqrt((sums[b, 1] - excess) / sums[b, 1])
            else:
                velocity_scale, lift_scale = 0.0, sums[b, 0] / sums[b, 2]
                shortened = True
        sums[b, 0], sums[b, 1] = velocity_scale, lift_scale
    return shortened


@jit
def flight_gap(mass, inertia, gravity, x0, v0, w0, x1, v1, w1, gap):
    """gap[b] <- twice body b's energy at the step's start (x0, v0, w0: its centre, velocity
    and body angular velocity) minus twice that at the free flight's end (x1, v1, w1): kinetic
    plus gravity's potential, what the energy rule counts (the input of
    :func:`flight_allowance` under a scheme whose free flight does not keep energy)."""
    for b in range(gap.shape[0]):
        e = 0.0
        for i in range(3):
            e += (mass[b] * (v0[b, i] ** 2 - v1[b, i] ** 2) + inertia[b, i]
                  * (w0[b, i] ** 2 - w1[b, i] ** 2)
                  - 2.0 * mass[b] * gravity[i] * (x0[b, i] - x1[b, i]))
        gap[b] = e


@jit
def flight_allowance(order, touched, island, sums, gap):
    """The energy budget taken from the step's start.  gap[b]: twice the energy body b lost
    in the free flight (:func:`flight_gap`; zero under a scheme whose flight keeps energy);
    per touched island, the positive part of its bodies' sum is added to sums[root, 0], twice
    its kinetic energy before the event.  So the event may end the step with the energy the
    step started with or the flight left, whichever is more: it never adds energy to the
    step, and does not bound the flight's own error (semi-implicit Euler's flight lowers a
    resting body by g h^2 with kinetic energy for only half of that lift)."""
    for r in range(order.shape[0]):
        b = order[r]
        if touched[b] and island[b] != b:
            gap[island[b]] += gap[b]
    for r in range(order.shape[0]):
        b = order[r]
        if touched[b] and island[b] == b and gap[b] > 0.0:
            sums[b, 0] += gap[b]


@jit
def resolve(table, x, q, v, w, mass, inertia, active, geom, grounds, gravity, touched, vel,
            ints, lift, keys, lam, rows, iters, rest_speed, dt):
    """Detect and solve every active body's contacts; returns the number of contacts (rows
    of ``table``).  ``touched[b]`` is set to 1 for a body whose velocities or position
    changed (its momenta must be re-derived), else 0.  Scratch: vel (nb, 17), whose column 16
    the caller fills with each body's flight gap (:func:`flight_gap`, or zeros: the budget of
    an energy-keeping flight), ints (nb, 5)
    -- columns order, rank, sweep, island, level -- and lift (nb, 3).  keys (H, 2), lam (rows, 3):
    the last step's impulses by contact (see :func:`remember`), part of the state; rows
    (table rows,) int scratch."""
    nb = x.shape[0]
    order, rank, sweep, island = ints[:, 0], ints[:, 1], ints[:, 2], ints[:, 3]
    minv = vel[:, 12]
    count = detect(table, x, q, w, active, NO_PARENTS, geom, grounds, order, rank, sweep,
                   vel[:, 13], lift, dt)
    for b in range(nb):
        touched[b] = 0
    if count == 0:
        remember(table, 0, nb, keys, lam)
        return 0
    for k in range(count):
        touched[int(table[k, C_BODY])] = 1
        if table[k, C_OTHER] >= 0:
            touched[int(table[k, C_OTHER])] = 1
    for b in range(nb):
        minv[b] = 1.0 / mass[b]
        om = rotate_t(q[b, 0], q[b, 1], q[b, 2], q[b, 3], w[b, 0], w[b, 1], w[b, 2], 1.0)
        for i in range(3):
            vel[b, i] = v[b, i]
            vel[b, 3 + i] = om[i]
            vel[b, 6 + i] = v[b, i]
            vel[b, 9 + i] = om[i]
    _prepare(table, count, x, q, mass, inertia, vel, rest_speed, dt)
    _warm_start(table, count, nb, keys, lam, minv, vel)
    levels(table, count, ints[:, 4])
    by_level(table, count, ints[:, 4], rows)
    scale_ref = 0.0
    for b in range(nb):
        if touched[b]:
            scale_ref = max(scale_ref, mass[b] * (abs(vel[b, 6]) + abs(vel[b, 7])
                                                  + abs(vel[b, 8]) + 1e-3))
    sweeps = min(iters, max(MIN_SWEEPS, (UPDATE_BUDGET + count - 1) // count))
    for _ in range(sweeps):
        # a sweep that changed no impulse beyond round-off of the momenta ends them
        if _sweep(table, count, rows, minv, vel, q, inertia) <= 1e-15 * scale_ref:
            break
    islands(table, count, order, rank, island)
    # per island: 0 twice the kinetic energy before, 1 after, 2 elastic, 3 the scale
    sums = vel[:, 13:16]
    elastic_islands(table, count, island, sums)
    for r in range(nb):
        b = order[r]
        if touched[b]:
            sums[island[b], 0] += _kinetic(q[b], mass[b], inertia[b], vel[b, 6:12])
            sums[island[b], 1] += _kinetic(q[b], mass[b], inertia[b], vel[b, 0:6])
    for r in range(nb):
        b = order[r]
        if not touched[b] or island[b] != b:
            continue
        scale = 1.0
        if sums[b, 2] == 0.0 and sums[b, 1] > sums[b, 0]:
            c = 0.0
            for o in range(nb):
                if touched[o] and island[o] == b:
                    for i in range(6):
                        vel[o, i] -= vel[o, 6 + i]
                    c += _kinetic(q[o], mass[o], inertia[o], vel[o, 0:6])
            scale = least_energy_scale(sums[b, 0], sums[b, 1], c)
            sums[b, 1] = 0.0
            for o in range(nb):
                if touched[o] and island[o] == b:
                    for i in range(6):
                        vel[o, i] = vel[o, 6 + i] + scale * vel[o, i]
                    sums[b, 1] += _kinetic(q[o], mass[o], inertia[o], vel[o, 0:6])
        sums[b, 2] = scale
    scale_impulses(table, count, island, sums)
    for b in range(nb):
        for i in range(3):
            lift[b, i] = 0.0
    _lift(table, count, minv, ints[:, 4], lift, LIFT_SWEEPS)
    # the lift's potential energy, per island, paid from its kinetic energy
    for b in range(nb):
        sums[b, 2] = 0.0
    for r in range(nb):
        b = order[r]
        if touched[b]:
            sums[island[b], 2] -= 2.0 * mass[b] * (gravity[0] * lift[b, 0] + gravity[1]
                                                    * lift[b, 1] + gravity[2] * lift[b, 2])
    _rolling_rims(table, count, geom, keys, nb, island, ints[:, 4], vel, minv)
    flight_allowance(order, touched, island, sums, vel[:, GAP])
    energy_scales(order, touched, island, sums, ints[:, 4], minv)
    for b in range(nb):
        if not touched[b]:
            continue
        velocity_scale, lift_scale = sums[island[b], 0], sums[island[b], 1]
        wb = rotate_t(q[b, 0], q[b, 1], q[b, 2], q[b, 3], vel[b, 3], vel[b, 4], vel[b, 5],
                      -1.0)
        for i in range(3):
            v[b, i] = velocity_scale * vel[b, i]
            w[b, i] = velocity_scale * wb[i]
            x[b, i] += lift_scale * lift[b, i]
    remember(table, count, nb, keys, lam)
    return count
