"""The velocity-level solve of the contact rows, projected Gauss-Seidel (see
:mod:`.solver`): each contact's responses to unit impulses, its normal target, the warm
start, the normal and Coulomb friction updates within their bounds, the torsional and
rolling friction rows, and the sweep over the contacts in their order by level."""
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
)
from rtrigid.contact.manifold import contact_key, slot
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
def row3(row, c):
    return (row[c], row[c + 1], row[c + 2])


@jit
def point_velocity(vel, a, b, ra, rb):
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
def warm_start(table, count, keys, lam, minv, vel):
    """Start each contact from the normal impulse the same contact ended the last step with,
    and apply it (Box2D's and Bullet's warm start: a stack's load need not travel through it
    again every step).  Friction starts from zero: with more contacts than a body has
    freedoms, carried friction impulses can settle into a self-cancelling loop that grows
    from step to step (seen on a box resting on a box)."""
    for k in range(count):
        row = table[k]
        h = slot(keys, contact_key(row))
        if keys[h, 0] == -1:
            continue
        j = keys[h, 1]
        a, b = int(row[C_BODY]), int(row[C_OTHER])
        ln = lam[j, 0]
        row[C_LAMBDA] = ln
        _push(vel, row, a, b, minv, row3(row, C_NORMAL), ln, C_AN)


@jit
def prepare_contacts(table, count, x, q, mass, inertia, vel, rest_speed, dt):
    """Per contact: arms, tangents, turn responses, the inverse blocks of K, the normal
    target; lambda = 0.  A speculative contact (depth < 0: a gap) may close its gap within
    the next step and no faster (target depth / dt), unless it is elastic and approaches
    faster than ``rest_speed`` -- then it is left free, so that it bounces when it touches."""
    for k in range(count):
        row = table[k]
        a, b = int(row[C_BODY]), int(row[C_OTHER])
        n = row3(row, C_NORMAL)
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
        set_target(row, _dot(n, point_velocity(vel, a, b, ra, rb)), rest_speed, dt)


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
    solve (see :func:`prepare_contacts`)."""
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
def sweep_contacts(table, count, rows, minv, vel, q, inertia):
    """One projected Gauss-Seidel sweep over the contacts in the order ``rows``; returns the
    largest change of an impulse (or, for torsional and rolling friction, of an angular
    impulse)."""
    change = 0.0
    for i in range(count):
        row = table[rows[i]]
        a, b = int(row[C_BODY]), int(row[C_OTHER])
        n = row3(row, C_NORMAL)
        ra, rb = row3(row, C_ARM), row3(row, C_ARMB)
        dn = normal_update(row, _dot(n, point_velocity(vel, a, b, ra, rb)))
        ln = row[C_LAMBDA]
        _push(vel, row, a, b, minv, n, dn, C_AN)
        t1, t2 = row3(row, C_T1), row3(row, C_T2)
        u = point_velocity(vel, a, b, ra, rb)
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
    n, t1, t2 = row3(row, C_NORMAL), row3(row, C_T1), row3(row, C_T2)
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
