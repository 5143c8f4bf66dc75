"""The contact solve: Coulomb friction by velocity-level impulses, after each free-flight step.

A step is the integrator's conserving free flight (contacts play no part in it), then this
dissipative event: find where bodies lie below a ground (:mod:`.geometry`) or inside one
another (:mod:`.pairs`, after a sweep-and-prune broad phase), give them the impulses that stop
their contact points from approaching and from slipping as far as Coulomb's cone allows, then
move them apart along the contact normals by their depths (by translation, or turning them
as the normal impulses would where that costs less: a box on a corner topples).

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
the normals (Gauss-Seidel sweeps over the contacts, the ground immovable and of two bodies
the one nearer a ground too; translations, or, for an island that a translation would cost
nearly all its energy, turning its bodies as the normal impulses would if that costs less;
no velocity change), so a step ends
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

The contacts' detection and identity live in :mod:`.manifold`, the velocity-level solve of
their rows in :mod:`.pgs`; this module holds the event (:func:`resolve`), the islands and
levels, the position correction and the energy rule, and re-exports the other two's names.
:func:`resolve` takes the bodies as one :class:`Bodies`, the contact step's arrays as one
:class:`ContactArrays` and its settings as one :class:`SolveSettings`.
"""
from typing import NamedTuple

import numpy as np

from rtrigid._jit import jit
from rtrigid.contact.geometry import (
    C_ANCHOR,
    C_ARM,
    C_ARMB,
    C_DRIFT,
    C_HELD,
    C_SLIP,
    CONE,
    CYLINDER,
    C_BODY,
    C_DEPTH,
    C_FEATURE,
    C_GEOM,
    C_IMPULSE,
    C_LAMBDA,
    C_MU,
    C_MUR,
    C_MUT,
    C_NORMAL,
    C_POINT,
    C_OTHER,
    C_SPIN,
    C_T1,
    C_T2,
    C_TARGET,
    G_KIND,
)
# the manifold's and the row solve's names, also importable from here as before
from rtrigid.contact.manifold import (
    KINEMATIC,
    L_ANCHOR,
    L_HELD,
    contact_key,
    detect,
    remember,
    slot,
)
from rtrigid.contact.pgs import (
    by_level,
    friction_update,
    normal_update,
    point_velocity,
    prepare_contacts,
    row3,
    set_response,
    set_target,
    sweep_contacts,
    tangents,
    warm_start,
)
from rtrigid.contact.lift import (  # noqa: F401  (LIFT_SWEEPS, LIFT_WIDTH: as before)
    LIFT_SWEEPS,
    LIFT_WIDTH,
    cheaper,
    lift_energy,
    translate,
    turning,
)
from rtrigid.contact.lift import lift as lift_moves
from rtrigid.maths.quat import rotate_t, turn_t

# a sticking contact holds where it stuck (:func:`anchors`) while its point stays this close to
# the same point of one of its bodies (a rolling contact moves on both) and its bodies' anchors
# slid no farther apart than ANCHOR_REACH
ANCHOR_SLACK = 1e-5  # m
ANCHOR_REACH = 5e-3  # m
# a contact that pushes and whose point slips after the velocity solve slower than SLIP_REST,
# or at most SLIP_LEFT of its slip before, holds (besides one whose friction lies inside the
# cone: of a box's four corners on a slope, the solve can leave some at the cone's rim, and
# their points with the solve's residual slip, while the box is at rest)
SLIP_REST = 1e-4  # m/s
SLIP_LEFT = 1e-2
# the velocity solve's budget: at most this many contact updates per step (so at most
# ``iters`` sweeps, fewer when there are many contacts, but never fewer than MIN_SWEEPS)
UPDATE_BUDGET = 128
MIN_SWEEPS = 4
# a backend's after_step flag (its int scratch's first entry): the scheme's free flight does
# not keep energy, so the event's energy budget is taken from the step's start
START_BUDGET = 2
# columns of the solver's per-body scratch ``vel`` (see :func:`resolve`; the last: the flight gap)
VEL_WIDTH = 17
GAP = VEL_WIDTH - 1  # the flight gap's column


class Bodies(NamedTuple):
    """The bodies as the contact solve takes them: centres of mass ``x`` (nb, 3),
    orientations ``q`` (nb, 4), velocities ``v`` (nb, 3) and angular velocities ``w`` (nb, 3,
    body axes) -- the solve writes x, v and w -- and masses ``mass`` (nb,) and principal
    moments ``inertia`` (nb, 3) (infinite for a kinematic body)."""
    x: np.ndarray
    q: np.ndarray
    v: np.ndarray
    w: np.ndarray
    mass: np.ndarray
    inertia: np.ndarray


class ContactArrays(NamedTuple):
    """The contact step's arrays (:class:`rtrigid.contact.Contacts` owns them): ``table``
    (rows, C_WIDTH) the contacts found; ``touched`` (nb,) 1 for a body whose motion the solve
    changed; the scratch ``vel`` (nb, VEL_WIDTH), ``ints`` (nb, 5), ``lift`` (nb, 3) and
    ``rows`` (table rows,); ``keys`` (H, 2) and ``lam`` (table rows, LAM_WIDTH): the last
    step's impulses by contact (:func:`remember`), part of the state."""
    table: np.ndarray
    touched: np.ndarray
    vel: np.ndarray
    ints: np.ndarray
    lift: np.ndarray
    keys: np.ndarray
    lam: np.ndarray
    rows: np.ndarray


class SolveSettings(NamedTuple):
    """The contact solve's settings: ``iters``, the most Gauss-Seidel sweeps of a step, and
    ``rest_speed``, the approach speed above which a contact rebounds (restitution)."""
    iters: int
    rest_speed: float


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
def islands(table, count, order, rank, island, active):
    """island[b]: the root of b's island of touching bodies (the lowest-ranked body).  A
    kinematic body (``active[b] == KINEMATIC``) joins none: like a ground, it separates the
    bodies it carries."""
    for r in range(order.shape[0]):
        island[order[r]] = order[r]
    for k in range(count):
        b = int(table[k, C_OTHER])
        if b >= 0 and active[b] != KINEMATIC and active[int(table[k, C_BODY])] != KINEMATIC:
            i, j = island_root(island, int(table[k, C_BODY])), island_root(island, b)
            if i != j:
                if rank[i] < rank[j]:
                    island[j] = i
                else:
                    island[i] = j
    for r in range(order.shape[0]):
        island[order[r]] = island_root(island, order[r])


@jit
def levels(table, count, level, active):
    """level[b]: how many contacts lie between body b and a ground (0: it touches one; nb:
    none of its contacts reaches one); a kinematic body is level 0, as a ground."""
    nb = level.shape[0]
    for b in range(nb):
        level[b] = 0 if active[b] == KINEMATIC else nb
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
def sticks(row):
    """Whether a contact's friction impulse lies inside its cone (it holds its point)."""
    ln = row[C_LAMBDA]
    return ln > 0.0 and (row[C_LAMBDA + 1] ** 2 + row[C_LAMBDA + 2] ** 2
                         < (1.0 - 1e-9) * (row[C_MU] * ln) ** 2)


@jit
def _local(x, q, b, p):
    """The world point p in body b's frame (the world's, b < 0)."""
    if b < 0:
        return p[0], p[1], p[2]
    return rotate_t(q[b, 0], q[b, 1], q[b, 2], q[b, 3], p[0] - x[b, 0], p[1] - x[b, 1],
                    p[2] - x[b, 2], -1.0)


@jit
def _world(x, q, b, p):
    """Body b's point p (its frame; the world's, b < 0) in the world."""
    if b < 0:
        return p[0], p[1], p[2]
    r = rotate_t(q[b, 0], q[b, 1], q[b, 2], q[b, 3], p[0], p[1], p[2], 1.0)
    return r[0] + x[b, 0], r[1] + x[b, 1], r[2] + x[b, 2]


@jit
def anchors(table, count, x, q, keys, lam):
    """Static friction at the position level.  A step's free flight moves a body before its
    contacts act, so the impulse that stops a sticking contact stops its velocity but not the
    slide the flight already made (g sin(theta) dt^2 / 2 a step for a box at rest on a slope).
    A contact that sticks is anchored: the same point in each of its bodies' frames (the
    world's for a ground), C_ANCHOR, kept from step to step while it keeps sticking at the
    same material point of one of its bodies (a rolling contact moves on both, and takes a new
    anchor each step).  C_HELD: 0 it slips, 1 it sticks from here, 2 it held since an earlier
    step and C_DRIFT is the slide of its anchors apart along its tangents, which
    :func:`_lift` takes out with the depths.  C_SLIP: the speeds of its slip before and
    after the velocity solve, filled in by the caller."""
    for k in range(count):
        row = table[k]
        a, b = int(row[C_BODY]), int(row[C_OTHER])
        p = row3(row, C_POINT)
        pa, pb = _local(x, q, a, p), _local(x, q, b, p)
        row[C_HELD] = 0.0
        for i in range(3):
            row[C_ANCHOR + i], row[C_ANCHOR + 3 + i] = pa[i], pb[i]
            row[C_DRIFT + i] = 0.0
        rests = row[C_SLIP + 1] <= max(SLIP_REST, SLIP_LEFT * row[C_SLIP])
        if not (sticks(row) or (row[C_LAMBDA] > 0.0 and rests)):
            continue
        row[C_HELD] = 1.0
        h = slot(keys, contact_key(row))
        if keys[h, 0] == -1 or lam[keys[h, 1], L_HELD] == 0.0:
            continue
        old = lam[keys[h, 1], L_ANCHOR:L_ANCHOR + 6]
        da = db = 0.0
        for i in range(3):
            da += (pa[i] - old[i]) ** 2
            db += (pb[i] - old[3 + i]) ** 2
        if min(da, db) > ANCHOR_SLACK ** 2:
            continue  # rolling: a new anchor
        wa, wb = _world(x, q, a, old[0:3]), _world(x, q, b, old[3:6])
        n = row3(row, C_NORMAL)
        d = (wa[0] - wb[0], wa[1] - wb[1], wa[2] - wb[2])
        dn = d[0] * n[0] + d[1] * n[1] + d[2] * n[2]
        d = (d[0] - dn * n[0], d[1] - dn * n[1], d[2] - dn * n[2])
        if d[0] * d[0] + d[1] * d[1] + d[2] * d[2] > ANCHOR_REACH ** 2:
            continue  # torn loose: a new anchor
        row[C_HELD] = 2.0
        for i in range(6):
            row[C_ANCHOR + i] = old[i]
        for i in range(3):
            row[C_DRIFT + i] = d[i]


@jit
def _slip(vel, row):
    """The speed of a contact's slip at the velocities vel[:, 0:6] (linear, angular in world
    axes)."""
    u = point_velocity(vel, int(row[C_BODY]), int(row[C_OTHER]), row3(row, C_ARM),
                       row3(row, C_ARMB))
    n = row3(row, C_NORMAL)
    un = u[0] * n[0] + u[1] * n[1] + u[2] * n[2]
    return np.sqrt(max(0.0, u[0] * u[0] + u[1] * u[1] + u[2] * u[2] - un * un))


@jit
def slips(table, count, vel):
    """C_SLIP of each contact: the speeds of its slip before the velocity solve
    (vel[:, 6:12]) and after it (vel[:, 0:6])."""
    for k in range(count):
        row = table[k]
        row[C_SLIP], row[C_SLIP + 1] = _slip(vel[:, 6:], row), _slip(vel, row)


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
        kind, f = int(geom[int(row[C_GEOM]), G_KIND]), int(row[C_FEATURE])
        rim = o < 0 and ((kind == CYLINDER and (f == 0 or f == 4)) or (kind == CONE and f == 1))
        stick = sticks(row)
        known = keys[slot(keys, contact_key(row)), 0] != -1
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
def driven_islands(table, count, active, island, vel, driven):
    """driven[root] = 1 for each island that touches a moving kinematic body (vel[:, 0:6]
    not zero), else 0: such a body does work on what it carries (a platform that speeds up
    speeds its load up), so the energy rule, which bounds an island's energy by what it had,
    does not apply to that island."""
    for b in range(driven.shape[0]):
        driven[b] = 0
    for k in range(count):
        a, b = int(table[k, C_BODY]), int(table[k, C_OTHER])
        if b < 0:
            continue
        if active[a] == KINEMATIC:
            a, b = b, a
        if active[b] != KINEMATIC:
            continue
        for i in range(6):
            if vel[b, i] != 0.0:
                driven[island[a]] = 1
                break


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
def resolve(bodies, active, scene, grounds, gravity, arrays, settings, dt, stats):
    """Detect and solve every active body's contacts; returns the number of contacts (rows
    of ``table``).  bodies: their state and masses (a :class:`Bodies`); arrays: the
    :class:`ContactArrays` -- ``touched[b]`` is set to 1 for a body whose velocities or
    position changed (its momenta must be re-derived), else 0 (always 0 for a kinematic body:
    the solve moves it not at all, and its energy counts in no island).  Scratch: vel (nb,
    17), whose column 16 the caller fills with each body's flight gap (:func:`flight_gap`, or
    zeros: the budget of an energy-keeping flight), ints (nb, 5) -- columns order, rank,
    driven (:func:`driven_islands`), island, level -- and lift (nb, 3).  keys (H, 2), lam
    (rows, 3): the last step's impulses by contact (see :func:`remember`), part of the state;
    rows (table rows,) int scratch.  settings: the :class:`SolveSettings` (iters,
    rest_speed).  scene: the geoms (a :class:`.manifold.Scene`, see
    :func:`.manifold.detect`); stats[1] counts the pairs left out for want of table rows."""
    x, q, v, w, mass, inertia = bodies
    table, touched, vel, ints, lift, keys, lam, rows = arrays
    iters, rest_speed = settings
    nb = x.shape[0]
    order, rank, island = ints[:, 0], ints[:, 1], ints[:, 3]
    minv = vel[:, 12]
    count = detect(table, x, q, w, active, scene, grounds, dt, stats)
    for b in range(nb):
        touched[b] = 0
    if count == 0:
        remember(table, 0, keys, lam)
        return 0
    for k in range(count):
        touched[int(table[k, C_BODY])] = 1
        if table[k, C_OTHER] >= 0:
            touched[int(table[k, C_OTHER])] = 1
    for b in range(nb):
        if active[b] == KINEMATIC:
            touched[b] = 0
    for b in range(nb):
        minv[b] = 1.0 / mass[b]
        om = rotate_t(q[b, 0], q[b, 1], q[b, 2], q[b, 3], w[b, 0], w[b, 1], w[b, 2], 1.0)
        for i in range(3):
            vel[b, i] = v[b, i]
            vel[b, 3 + i] = om[i]
            vel[b, 6 + i] = v[b, i]
            vel[b, 9 + i] = om[i]
    prepare_contacts(table, count, x, q, mass, inertia, vel, rest_speed, dt)
    warm_start(table, count, keys, lam, minv, vel)
    levels(table, count, ints[:, 4], active)
    by_level(table, count, ints[:, 4], rows)
    scale_ref = 0.0
    for b in range(nb):
        if touched[b]:
            scale_ref = max(scale_ref, mass[b] * (abs(vel[b, 6]) + abs(vel[b, 7])
                                                  + abs(vel[b, 8]) + 1e-3))
    sweeps = min(iters, max(MIN_SWEEPS, (UPDATE_BUDGET + count - 1) // count))
    for _ in range(sweeps):
        # a sweep that changed no impulse beyond round-off of the momenta ends them
        if sweep_contacts(table, count, rows, minv, vel, q, inertia) <= 1e-15 * scale_ref:
            break
    islands(table, count, order, rank, island, active)
    driven = ints[:, 2]
    driven_islands(table, count, active, island, vel, driven)
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
        if sums[b, 2] == 0.0 and sums[b, 1] > sums[b, 0] and not driven[b]:
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
    slips(table, count, vel)
    anchors(table, count, x, q, keys, lam)
    # the lift, by translations; its potential energy, per island, paid from its kinetic
    # energy (the step's start's under a flight that does not keep energy)
    translate(table, count, minv, ints[:, 4], lift, LIFT_SWEEPS)
    lift_energy(order, touched, island, mass, gravity, lift, sums)
    flight_allowance(order, touched, island, sums, vel[:, GAP])
    keep = vel[:, GAP]  # spent by flight_allowance
    if turning(table, count, order, touched, island, sums, gravity, keep, lift):  # again, turning
        lift_moves(table, count, minv, ints[:, 4], lift, LIFT_SWEEPS, island, sums)
        lift_energy(order, touched, island, mass, gravity, lift, sums)
        cheaper(table, count, order, touched, island, sums, keep, lift)
        lift_energy(order, touched, island, mass, gravity, lift, sums)
    _rolling_rims(table, count, scene.geom, keys, nb, island, ints[:, 4], vel, minv)
    energy_scales(order, touched, island, sums, ints[:, 4], minv)
    for b in range(nb):
        if driven[b]:  # a moving kinematic body's work: the energy rule does not apply
            sums[b, 0], sums[b, 1] = 1.0, 1.0
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
        if lift[b, 3] == 0.0 and lift[b, 4] == 0.0 and lift[b, 5] == 0.0:
            continue
        # the lift's turn (world axes) in body axes; the body's rates turn with it
        t = rotate_t(q[b, 0], q[b, 1], q[b, 2], q[b, 3], lift[b, 3], lift[b, 4], lift[b, 5], -1.0)
        q[b, 0], q[b, 1], q[b, 2], q[b, 3] = turn_t(q[b, 0], q[b, 1], q[b, 2], q[b, 3], t[0],
                                                    t[1], t[2], lift_scale)
    remember(table, count, keys, lam)
    return count
