"""The contact event's position correction: how far to move (and turn) each body so that no
contact stays deeper than it should, and each held contact is back at its anchors.

:func:`lift` works in Gauss-Seidel sweeps over the contacts; :func:`lift_energy` gives each
island's cost in gravity's potential; :func:`turning` and :func:`cheaper` choose, per island,
between a lift by translation and one that turns the bodies as the normal impulses would
(see :mod:`.solver`, whose :func:`~.solver.resolve` runs them).
"""
from rtrigid._jit import jit
from rtrigid.contact.geometry import (
    C_AN,
    C_ARM,
    C_ARMB,
    C_BN,
    C_BODY,
    C_DEPTH,
    C_DRIFT,
    C_HELD,
    C_LIFT,
    C_LIFTK,
    C_NORMAL,
    C_OTHER,
    C_T1,
    C_T2,
    dot3,
)
from rtrigid.contact.pgs import row3

LIFT_SWEEPS = 16  # Gauss-Seidel sweeps of the position correction
# an island whose lift by translation costs all but this fraction of the energy it had (or
# more than half of what its impulses left it) may turn about its contacts, and does if a
# lift that turns it as its normal impulses do costs TILTED less (:func:`turning`)
TURNING = 1e-3
TILTED = 1e-3
# columns of the per-body moves (the contact step's ``lift`` array): a translation, a turn (world axes), and the
# translation alone kept while a turning lift is tried
LIFT_WIDTH = 12


@jit
def _cross_dot(r, d, a):
    """(r x d) . a: the change along d of a point at arm r per unit turn response a."""
    return ((r[1] * d[2] - r[2] * d[1]) * a[0] + (r[2] * d[0] - r[0] * d[2]) * a[1]
            + (r[0] * d[1] - r[1] * d[0]) * a[2])


@jit
def _lift_responses(row, ma, mb, minv_a, minv_b, turns):
    """C_LIFTK of a contact: the inverse responses of its position correction, from the
    bodies it moves (ma, mb: 1 if a, b moves, else 0) -- 1 / K_nn, its normal row turning
    the bodies, and the inverse of its tangent rows' block, which translate them only (so
    K_tt = (1 / m_a + 1 / m_b) I there)."""
    n, ra, rb = row3(row, C_NORMAL), row3(row, C_ARM), row3(row, C_ARMB)
    knn = ma * minv_a + mb * minv_b
    if turns and ma:
        knn += _cross_dot(ra, n, row3(row, C_AN))
    if turns and mb:
        knn -= _cross_dot(rb, n, row3(row, C_BN))
    row[C_LIFTK + 2] = 1.0 if turns else 0.0
    row[C_LIFTK] = 1.0 / knn if knn > 0.0 else 0.0
    ktt = ma * minv_a + mb * minv_b
    row[C_LIFTK + 1] = 1.0 / ktt if ktt > 0.0 else 0.0


@jit
def _moved(moves, b, r):
    """How far the lift moved body b's point at arm r (b < 0: the ground, not at all)."""
    if b < 0:
        return (0.0, 0.0, 0.0)
    d = moves[b]
    return (d[0] + d[4] * r[2] - d[5] * r[1], d[1] + d[5] * r[0] - d[3] * r[2],
            d[2] + d[3] * r[1] - d[4] * r[0])


@jit
def _shift(moves, row, a, b, ma, mb, minv, s, d, turn):
    """Move body a by the position multiplier s along d and body b by -s d, each only if it
    moves at this contact (ma, mb); with ``turn``, each also turns as the contact's normal
    impulse turns it (C_AN, C_BN)."""
    if ma:
        for i in range(3):
            moves[a, i] += s * d[i] * minv[a]
            if turn:
                moves[a, 3 + i] += s * row[C_AN + i]
    if mb:
        for i in range(3):
            moves[b, i] -= s * d[i] * minv[b]
            if turn:
                moves[b, 3 + i] += s * row[C_BN + i]


@jit
def translate(table, count, minv, level, moves, sweeps):
    """The lift by translations (moves[:, 0:3]; the turns moves[:, 3:6] zero) that take the
    contacts' depths out, and the held contacts' drifts (:func:`.solver.anchors`):
    Gauss-Seidel over the contacts, the ground immovable and, of two bodies, the one nearer a
    ground too (shock propagation: a stack is lifted level by level instead of its bottom
    being pushed back into the ground); two bodies as near share a depth by inverse mass.
    Every island's first lift (:func:`lift` is the turning one, for those that
    :func:`turning` marks).  The sweeps stop at one that moves nothing: each after it would
    repeat it."""
    for b in range(moves.shape[0]):
        for i in range(6):
            moves[b, i] = 0.0
    for _ in range(sweeps):
        moved = False
        for k in range(count):
            row = table[k]
            a, b = int(row[C_BODY]), int(row[C_OTHER])
            n = row3(row, C_NORMAL)
            rel = (moves[a, 0], moves[a, 1], moves[a, 2])
            wa = 1.0
            if b >= 0:
                rel = (rel[0] - moves[b, 0], rel[1] - moves[b, 1], rel[2] - moves[b, 2])
                if level[a] < level[b]:
                    wa = 0.0
                elif level[a] == level[b]:
                    wa = minv[a] / (minv[a] + minv[b])
            reln = rel[0] * n[0] + rel[1] * n[1] + rel[2] * n[2]
            move = (0.0, 0.0, 0.0)
            depth = row[C_DEPTH] - reln
            if depth > 0.0:
                move = (depth * n[0], depth * n[1], depth * n[2])
            if row[C_HELD] == 2.0:
                # the anchors' slide apart, less what the lifts already took out of it
                move = (move[0] - row[C_DRIFT] - rel[0] + reln * n[0],
                        move[1] - row[C_DRIFT + 1] - rel[1] + reln * n[1],
                        move[2] - row[C_DRIFT + 2] - rel[2] + reln * n[2])
            # a side of weight 0 is left alone: moves never holds -0.0 (it starts at +0.0
            # and only sums), so adding the +-0.0 of its share would change no bit
            if wa != 0.0:
                for i in range(3):
                    was = moves[a, i]
                    moves[a, i] += wa * move[i]
                    moved = moved or moves[a, i] != was
            if b >= 0 and wa != 1.0:
                wb = 1.0 - wa
                for i in range(3):
                    was = moves[b, i]
                    moves[b, i] -= wb * move[i]
                    moved = moved or moves[b, i] != was
        if not moved:
            break


@jit
def lift(table, count, minv, level, moves, sweeps, island, sums):
    """The position correction: moves (a translation, then a turn in world axes, in
    moves[:, 0:6]) that take the contacts' depths out, and the held contacts' drifts
    (:func:`.solver.anchors`), by accumulated multipliers in Gauss-Seidel sweeps over the contacts.

    A depth's multiplier is never negative.  In an island marked to turn (sums[root, 2] <
    0, :func:`turning`) it moves its bodies as a normal impulse there would, by the inverse
    mass and inertia: a box lifted at one corner turns, its centre rises less than the
    corner, and the lift's potential energy is what the impulse's turn is worth; elsewhere
    it translates them.  A held contact's drift translates its bodies only: turning them
    too lets the sweeps over a face's redundant corners leave a tilt (a box resting offset
    on another tilted 0.3 degrees, the stack under it sinking 0.07 mm/s).  The ground is
    immovable and, of two bodies, the one nearer a ground too (shock propagation: a stack
    is lifted level by level instead of its bottom being pushed back into the ground); two
    bodies as near both move.  The sweeps stop at one that changes no multiplier: it moved
    nothing, and each after it would repeat it."""
    for b in range(moves.shape[0]):
        for i in range(6):
            moves[b, i] = 0.0
    for k in range(count):
        row = table[k]
        a, b = int(row[C_BODY]), int(row[C_OTHER])
        ma = 1 if b < 0 or level[a] >= level[b] else 0
        mb = 1 if b >= 0 and level[b] >= level[a] else 0
        turns = sums[island[a], 2] < 0.0
        _lift_responses(row, ma, mb, minv[a], minv[b] if b >= 0 else 0.0, turns)
        for i in range(3):
            row[C_LIFT + i] = 0.0
    for _ in range(sweeps):
        changed = False
        for k in range(count):
            row = table[k]
            a, b = int(row[C_BODY]), int(row[C_OTHER])
            ma = 1 if b < 0 or level[a] >= level[b] else 0
            mb = 1 if b >= 0 and level[b] >= level[a] else 0
            ra, rb = row3(row, C_ARM), row3(row, C_ARMB)
            n = row3(row, C_NORMAL)
            pa, pb = _moved(moves, a, ra), _moved(moves, b, rb)
            rel = (pa[0] - pb[0], pa[1] - pb[1], pa[2] - pb[2])
            m = max(0.0, row[C_LIFT] + (row[C_DEPTH] - dot3(rel, n)) * row[C_LIFTK])
            _shift(moves, row, a, b, ma, mb, minv, m - row[C_LIFT], n, row[C_LIFTK + 2] > 0.0)
            changed = changed or m != row[C_LIFT]
            row[C_LIFT] = m
            if row[C_HELD] != 2.0:
                continue
            # the anchors' slide apart along the tangents, less what the lifts took out of it
            pa, pb = _moved(moves, a, ra), _moved(moves, b, rb)
            rel = (pa[0] - pb[0], pa[1] - pb[1], pa[2] - pb[2])
            t1, t2, drift = row3(row, C_T1), row3(row, C_T2), row3(row, C_DRIFT)
            r1 = -dot3(drift, t1) - dot3(rel, t1)
            r2 = -dot3(drift, t2) - dot3(rel, t2)
            l1 = row[C_LIFT + 1] + row[C_LIFTK + 1] * r1
            l2 = row[C_LIFT + 2] + row[C_LIFTK + 1] * r2
            _shift(moves, row, a, b, ma, mb, minv, l1 - row[C_LIFT + 1], t1, False)
            _shift(moves, row, a, b, ma, mb, minv, l2 - row[C_LIFT + 2], t2, False)
            changed = changed or l1 != row[C_LIFT + 1] or l2 != row[C_LIFT + 2]
            row[C_LIFT + 1], row[C_LIFT + 2] = l1, l2
        if not changed:
            break


@jit
def lift_energy(order, touched, island, mass, gravity, moves, sums):
    """sums[root, 2] <- twice the potential energy the lift gives each island."""
    for b in range(sums.shape[0]):
        sums[b, 2] = 0.0
    for r in range(order.shape[0]):
        b = order[r]
        if touched[b]:
            sums[island[b], 2] -= 2.0 * mass[b] * (gravity[0] * moves[b, 0] + gravity[1]
                                                    * moves[b, 1] + gravity[2] * moves[b, 2])


@jit
def turning(table, count, order, touched, island, sums, gravity, keep, moves):
    """Mark the islands that may turn about their contacts (sums[root, 2] <- -1; returns
    whether any may), after a lift by translation (``moves``; its potential sums[root, 2],
    kept in keep[root]; all energies twice their values, sums[root, 0] the island's before
    the event and sums[root, 1] what its impulses left it).  Two kinds may: one with a body
    touching at one or two points (deeper than TILTED of the island's deepest point: the
    boxes of a stack, which fall together, touch each other at depths of round-off, some
    above zero and some below) that the rule would stop although its impulses left it
    moving -- the lift costs more than half of what they left (a box on a corner or an
    edge, which they turn) -- and one at rest
    (the lift costs all but TURNING of its energy) that the translation left standing off a
    point it touched, by more than TILTED of the island's deepest depth (a box tilted on a
    face or an edge: each point dug in as deep as it fell, the deepest's lift lifts the rest
    off; a turn saves about that spread, so a smaller one -- the round-off of the depths
    between boxes of a resting stack, which fall together -- is not worth trying).
    Their translations are kept in moves[:, 6:12] (see :func:`cheaper`).  Others keep their
    translation: a body resting on a face, whose points are all as deep, and one whose lift
    costs little of its energy -- a turning lift would tilt a spinning top, whose spin turns
    an impulse's torque into precession, not into a tilt."""
    if gravity[0] == 0.0 and gravity[1] == 0.0 and gravity[2] == 0.0:
        return False
    for b in range(keep.shape[0]):
        keep[b] = 0.0
        # its points touching, its island on a point or line, its island's deepest point
        moves[b, 6] = moves[b, 7] = moves[b, 8] = 0.0
    for k in range(count):
        root = island[int(table[k, C_BODY])]
        moves[root, 8] = max(moves[root, 8], table[k, C_DEPTH])
    for k in range(count):
        row = table[k]
        if row[C_DEPTH] <= 0.0:
            continue
        a, o = int(row[C_BODY]), int(row[C_OTHER])
        deepest = moves[island[a], 8]
        if row[C_DEPTH] > TILTED * deepest:  # not a depth of round-off only
            moves[a, 6] += 1.0
            if o >= 0:
                moves[o, 6] += 1.0
        if row[C_DEPTH] - _lifted(moves, row, a, o, 0) < -TILTED * deepest:
            keep[island[a]] = 1.0  # lifted off this point
    for b in range(keep.shape[0]):
        if touched[b] and 1.0 <= moves[b, 6] <= 2.0:
            moves[island[b], 7] = 1.0
    any_may = False
    for r in range(order.shape[0]):
        b = order[r]
        if not touched[b] or island[b] != b or sums[b, 2] <= 0.0:
            keep[b] = 0.0
            continue
        left = sums[b, 0] - sums[b, 2]  # what the rule would leave of its kinetic energy
        moving = (moves[b, 7] == 1.0 and 2.0 * left < sums[b, 1]
                  and sums[b, 1] > TURNING * sums[b, 0])
        tilted = left <= TURNING * sums[b, 0] and keep[b] == 1.0
        keep[b] = sums[b, 2] if moving or tilted else 0.0
        any_may = any_may or moving or tilted
    if any_may:
        for b in range(moves.shape[0]):
            sums[b, 2] = -1.0 if keep[b] > 0.0 else 0.0
            for i in range(6):
                moves[b, 6 + i] = moves[b, i]
    return any_may


@jit
def _lifted(moves, row, a, o, col):
    """How far the moves moves[:, col:col + 6] part contact row's points along its normal."""
    pa = _moved(moves[:, col:col + 6], a, row3(row, C_ARM))
    pb = _moved(moves[:, col:col + 6], o, row3(row, C_ARMB))
    return dot3((pa[0] - pb[0], pa[1] - pb[1], pa[2] - pb[2]), row3(row, C_NORMAL))


@jit
def cheaper(table, count, order, touched, island, sums, keep, moves):
    """After the turning lift of the marked islands (keep[root] > 0: the potential of their
    lift by translation; sums[root, 2] now the turning lift's): keep it only where it costs
    less than TILTED short of the translation's -- a box on a corner or an edge, or tilted on
    a face (each point then comes out by its own depth, not all by the deepest's) -- and
    leaves no point of the island's contacts deeper (or nearer) than the translation does,
    by more than TILTED of its depth: a turn that lowers the centre by swinging another
    point into the ground is not cheaper (a box on bumpy terrain sank 1.6 mm so).  Every
    other body gets its translation back (moves[:, 6:12], :func:`turning`); the islands'
    potentials are to be taken again (:func:`lift_energy`)."""
    for k in range(count):
        row = table[k]
        a, o = int(row[C_BODY]), int(row[C_OTHER])
        root = island[a]
        if keep[root] <= 0.0:
            continue
        depth = row[C_DEPTH]
        turned = depth - _lifted(moves, row, a, o, 0)
        translated = depth - _lifted(moves, row, a, o, 6)
        if turned > max(translated, 0.0) + TILTED * abs(depth):
            keep[root] = 0.0
    for r in range(order.shape[0]):
        b = order[r]
        root = island[b]
        if touched[b] and keep[root] > 0.0 and sums[root, 2] < (1.0 - TILTED) * keep[root]:
            continue
        for i in range(6):
            moves[b, i] = moves[b, 6 + i]
