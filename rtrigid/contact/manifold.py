"""The contacts of a step and their identity: ground contacts of every active body, the
sweep-and-prune broad phase and the pairs' narrow phase (:func:`detect`), and a key per
contact that finds it again the next step, so that its impulse starts that step's solve
(:func:`remember`, :func:`contact_key`, :func:`slot`).  The geoms they meet are passed as one
:class:`Scene`."""
from typing import NamedTuple

import numpy as np

from rtrigid._jit import jit
from rtrigid.contact.geometry import (
    C_ANCHOR,
    C_FEATURE,
    C_GEOM,
    C_GEOMB,
    C_HELD,
    C_LAMBDA,
    C_MUR,
    C_MUT,
    G_MUR,
    G_MUT,
    G_HALF,
    G_KIND,
    G_RADIUS,
    G_TIGHT,
    G_TIGHT_R,
    GI_BODY,
    GI_CONAFFINITY,
    GI_CONTYPE,
    GI_PAIRED,
    GI_SWEEP,
    HEIGHTFIELD,
    MARGIN,
    MAX_POINTS,
    P_MUR,
    P_MUT,
    PAIR_POINTS,
    W_CENTRE,
    W_HALF,
    W_LO,
    W_QUAT,
    W_TIGHT,
    Pose,
    clear_of,
    ground_contacts,
)
from rtrigid.contact.pairs import geom_pose, has_pair_test, pair_coefficients, pair_contacts
from rtrigid.maths.quat import rotate_t

# a contact's key: its geom row, the other side's (grounds after an offset) and its feature
_FEATURE_BITS = 12
_SIDE_BITS = 24
_GROUND_OFFSET = 1 << 23
# columns of the contacts' memory ``lam`` (see :func:`remember`): the impulses (normal, two
# tangents), the anchors (C_ANCHOR's six), 1 if it held
L_ANCHOR = 3
L_HELD = 9
LAM_WIDTH = 10
# ``active[b]`` of :func:`detect` and the solve: 0 a body that does not collide, DYNAMIC one
# that does, KINEMATIC one whose motion the user sets (:meth:`rtrigid.Simulation.set_kinematic_target`):
# it touches dynamic bodies only, as an infinite mass
DYNAMIC = 1
KINEMATIC = 2


class Scene(NamedTuple):
    """The geoms as the contact step takes them (:class:`rtrigid.contact.Contacts` builds it):
    ``geom`` (ng, G_WIDTH) the geom table, its rows in the order of their bodies' names,
    scenery last; ``geomi`` (ng, GI_WIDTH) its int rows; ``work`` (ng, W_WIDTH) the broad
    phase's scratch; ``verts`` (nv, 3) and ``planes`` (np, 4) the pools of hull vertices
    (and heightfield grids) and face planes; ``excluded`` the sorted keys a * 2^32 + b of the
    body pairs a < b that never collide; ``xf``, ``xi`` the general pairs' float and int
    scratch (:mod:`.general`; empty in a model without such pairs)."""
    geom: np.ndarray
    geomi: np.ndarray
    work: np.ndarray
    verts: np.ndarray
    planes: np.ndarray
    excluded: np.ndarray
    xf: np.ndarray
    xi: np.ndarray


# This form of detect has only the fast pairs; contact.general rebinds it with GENERAL True and
# general_pair bound to its general pair test (so models without such pairs never compile it).
GENERAL = False
# the world x the sweep sorts by: a geom's origin, or with the general pairs the centre of its
# tighter G_TIGHT sphere (a mesh's piece lies off its body's origin)
_SWEPT = W_CENTRE


@jit
def general_pair(table, k, cap, a, b, ga, gb, scene, pa, pb):
    """Stands for :func:`rtrigid.contact.general.general_pair`; never called here."""
    return k


@jit
def contact_key(row):
    """A contact's identity from step to step: its two geoms (or geom and ground) and the
    feature of the pair that made it."""
    other = int(row[C_GEOMB])
    if other < 0:
        other = _GROUND_OFFSET - 1 - other
    return (((int(row[C_GEOM]) << _SIDE_BITS) + other) << _FEATURE_BITS) + (
        int(row[C_FEATURE]) & ((1 << _FEATURE_BITS) - 1))


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
def remember(table, count, keys, lam):
    """Keep this step's impulses, by contact identity, to start the next step's solve, and
    where each contact holds (its anchors) if it sticks."""
    for h in range(keys.shape[0]):
        keys[h, 0] = -1
    for k in range(count):
        row = table[k]
        key = contact_key(row)
        h = slot(keys, key)
        keys[h, 0], keys[h, 1] = key, k
        for i in range(3):
            lam[k, i] = row[C_LAMBDA + i]
        for i in range(6):
            lam[k, L_ANCHOR + i] = row[C_ANCHOR + i]
        lam[k, L_HELD] = row[C_HELD]


@jit
def _insertion_sort(geomi, lo):
    """Sort the geom rows in geomi[:, GI_SWEEP] by (lo, row): nearly sorted from the last
    step, so about linear."""
    sweep = geomi[:, GI_SWEEP]
    for i in range(1, sweep.shape[0]):
        g = sweep[i]
        j = i - 1
        while j >= 0 and (lo[sweep[j]] > lo[g] or (lo[sweep[j]] == lo[g] and sweep[j] > g)):
            sweep[j + 1] = sweep[j]
            j -= 1
        sweep[j + 1] = g


@jit
def _finish_pair(table, k0, k, ga, gb, mu_t, mu_r):
    """Rows k0 to k of one pair: its geoms, torsional and rolling friction (the larger
    side's)."""
    for c in range(k0, k):
        table[c, C_GEOM], table[c, C_GEOMB] = ga, gb
        table[c, C_MUT], table[c, C_MUR] = mu_t, mu_r


@jit
def _excluded(excluded, a, b):
    """Whether the body pair (a, b), a < b, is in the sorted keys ``excluded`` (a * 2^32 + b)."""
    key = (a << 32) + b
    lo, hi = 0, excluded.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if excluded[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    return lo < excluded.shape[0] and excluded[lo] == key


@jit
def may_touch(geomi, excluded, ga, gb):
    """Whether geom rows ga and gb may collide: on different bodies, not both scenery, their
    filter bits agreeing (MuJoCo's rule) and their bodies not an excluded pair."""
    a, b = geomi[ga, GI_BODY], geomi[gb, GI_BODY]
    if a == b:
        return False
    if not ((geomi[ga, GI_CONTYPE] & geomi[gb, GI_CONAFFINITY])
            or (geomi[gb, GI_CONTYPE] & geomi[ga, GI_CONAFFINITY])):
        return False
    if a < 0 or b < 0:
        return True
    return not _excluded(excluded, min(a, b), max(a, b))


@jit
def _moves(geomi, active, g):
    """Whether geom g is on a dynamic body (scenery and kinematic bodies touch only those)."""
    b = geomi[g, GI_BODY]
    return b >= 0 and active[b] == DYNAMIC


@jit
def _reach(geom, g, tight):
    """How far geom row g may reach from the centre it is swept by (``tight``: W_TIGHT's,
    with the general pairs; else its origin), its margin included."""
    r = geom[g, G_RADIUS]
    if not tight or geom[g, G_TIGHT_R] == r:
        return (1.0 + MARGIN) * r
    return geom[g, G_TIGHT_R] + MARGIN * r


@jit
def _tight_centre(geom, g, w):
    """w[W_TIGHT:W_TIGHT + 3] <- the world centre of geom row g's G_TIGHT sphere, and
    w[W_HALF:W_HALF + 3] <- the half extents of the world box that holds its G_HALF box, its
    pose in w (its row of the broad phase's scratch)."""
    if geom[g, G_HALF] == 0.0:  # no box of its own: its origin's sphere
        for i in range(3):
            w[W_TIGHT + i] = w[W_CENTRE + i]
            w[W_HALF + i] = 0.0
        return
    q0, q1, q2, q3 = w[W_QUAT], w[W_QUAT + 1], w[W_QUAT + 2], w[W_QUAT + 3]
    c = rotate_t(q0, q1, q2, q3, geom[g, G_TIGHT], geom[g, G_TIGHT + 1], geom[g, G_TIGHT + 2],
                 1.0)
    for i in range(3):
        w[W_TIGHT + i] = w[W_CENTRE + i] + c[i]
        w[W_HALF + i] = 0.0
    # |R| h: each world axis's reach is the sum over the box's axes of |R_ij| h_j
    for j in range(3):
        e = rotate_t(q0, q1, q2, q3, 1.0 if j == 0 else 0.0, 1.0 if j == 1 else 0.0,
                     1.0 if j == 2 else 0.0, 1.0)
        h = geom[g, G_HALF + j]
        for i in range(3):
            w[W_HALF + i] += abs(e[i]) * h


@jit
def _apart(geom, work, ga, gb):
    """Whether geoms ga and gb, which would meet through the general narrow phase, lie
    farther apart than their pair's margin by their G_TIGHT spheres or their boxes' world
    boxes (so that the narrow phase would find no contact: a mesh's pieces share their body's
    origin, about which each one's G_RADIUS sphere holds the whole mesh)."""
    ka, kb = int(geom[ga, G_KIND]), int(geom[gb, G_KIND])
    if has_pair_test(ka, kb) or ka == HEIGHTFIELD or kb == HEIGHTFIELD:
        return False
    d0 = work[ga, W_TIGHT] - work[gb, W_TIGHT]
    d1 = work[ga, W_TIGHT + 1] - work[gb, W_TIGHT + 1]
    d2 = work[ga, W_TIGHT + 2] - work[gb, W_TIGHT + 2]
    # the margin general_pair takes, and more than the narrow phase's tolerance beyond it
    slack = pair_coefficients(geom, ga, gb).margin + 1e-9 * (geom[ga, G_RADIUS]
                                                            + geom[gb, G_RADIUS])
    reach = geom[ga, G_TIGHT_R] + geom[gb, G_TIGHT_R] + slack
    if d0 * d0 + d1 * d1 + d2 * d2 > reach * reach:
        return True
    if geom[ga, G_HALF] == 0.0 or geom[gb, G_HALF] == 0.0:
        return False
    # the two world boxes, apart along an axis by more than the margin
    return (abs(d0) > work[ga, W_HALF] + work[gb, W_HALF] + slack
            or abs(d1) > work[ga, W_HALF + 1] + work[gb, W_HALF + 1] + slack
            or abs(d2) > work[ga, W_HALF + 2] + work[gb, W_HALF + 2] + slack)


@jit
def detect(table, x, q, w, active, scene, grounds, dt, stats):
    """Ground contacts of every active body's geoms, then the geom pairs the sweep finds;
    returns the number of contacts.  scene: the geoms (a :class:`Scene`: the geom table, its
    int rows, the broad phase's scratch, the vertex and plane pools, the excluded body pairs
    (joined by a joint, or :meth:`rtrigid.Model.exclude_contacts`), the general pairs'
    scratch, empty in this form, which has only the fast pairs).  w: body angular
    velocities (body axes), for the rims' contact points half a step ahead
    (:func:`.geometry.ground_contacts`).  A pair that would not fit in the table is left out
    and counted in stats[1]."""
    geom, geomi, work, verts, excluded = (scene.geom, scene.geomi, scene.work, scene.verts,
                                          scene.excluded)
    cap = table.shape[0]
    ng = geom.shape[0]
    k = 0
    # world poses of the geoms; the sweep's lower ends (inf: a body that does not collide, or
    # a geom no other may touch -- a robot's links, its self-collisions excluded)
    for g in range(ng):
        b = geomi[g, GI_BODY]
        if b >= 0:
            geom_pose(geom, g, x[b], q[b], work[g, W_CENTRE:W_CENTRE + 7])
        if GENERAL:
            _tight_centre(geom, g, work[g])
        lo = work[g, _SWEPT] - _reach(geom, g, GENERAL)
        work[g, W_LO] = lo if (b < 0 or active[b]) and geomi[g, GI_PAIRED] != 0 else np.inf
    for g in range(ng):
        b = geomi[g, GI_BODY]
        if b < 0:
            break  # scenery sorts last
        if active[b] != DYNAMIC or not (geomi[g, GI_CONTYPE] & 1
                                        or geomi[g, GI_CONAFFINITY] & 1):
            continue
        om = rotate_t(q[b, 0], q[b, 1], q[b, 2], q[b, 3], w[b, 0], w[b, 1], w[b, 2], 1.0)
        pose = Pose(work[g, W_CENTRE:W_CENTRE + 3], work[g, W_QUAT:W_QUAT + 4])
        for p in range(grounds.shape[0]):
            if clear_of(grounds[p], pose.c, geom[g, G_RADIUS]):
                continue
            if k + MAX_POINTS > cap:
                stats[1] += 1
                continue
            k0 = k
            k = ground_contacts(table, k, b, g, geom, geomi, verts, pose, p, grounds[p], om,
                                0.5 * dt)
            _finish_pair(table, k0, k, g, -1 - p, max(geom[g, G_MUT], grounds[p, P_MUT]),
                         max(geom[g, G_MUR], grounds[p, P_MUR]))
    lo = work[:, W_LO]
    _insertion_sort(geomi, lo)
    sweep = geomi[:, GI_SWEEP]
    for i in range(ng):
        ga = sweep[i]
        if lo[ga] == np.inf:
            break  # those that do not collide sort last
        hi = work[ga, _SWEPT] + _reach(geom, ga, GENERAL)
        for j in range(i + 1, ng):
            gb = sweep[j]
            if lo[gb] > hi:
                break
            if not may_touch(geomi, excluded, ga, gb) or not (
                    _moves(geomi, active, ga) or _moves(geomi, active, gb)):
                continue
            d0 = work[ga, W_CENTRE] - work[gb, W_CENTRE]
            d1 = work[ga, W_CENTRE + 1] - work[gb, W_CENTRE + 1]
            d2 = work[ga, W_CENTRE + 2] - work[gb, W_CENTRE + 2]
            reach = (1.0 + MARGIN) * (geom[ga, G_RADIUS] + geom[gb, G_RADIUS])
            if d0 * d0 + d1 * d1 + d2 * d2 > reach * reach:
                continue
            if GENERAL and _apart(geom, work, ga, gb):
                continue
            if k + PAIR_POINTS > cap:
                stats[1] += 1
                continue
            # the first geom: the lower row (body-name order; scenery rows come last)
            g1, g2 = (ga, gb) if ga < gb else (gb, ga)
            k0 = k
            pa = Pose(work[g1, W_CENTRE:W_CENTRE + 3], work[g1, W_QUAT:W_QUAT + 4])
            pb = Pose(work[g2, W_CENTRE:W_CENTRE + 3], work[g2, W_QUAT:W_QUAT + 4])
            if GENERAL:
                k = general_pair(table, k, cap, geomi[g1, GI_BODY], geomi[g2, GI_BODY], g1,
                                 g2, scene, pa, pb)
            else:
                k = pair_contacts(table, k, cap, geomi[g1, GI_BODY], geomi[g2, GI_BODY], g1,
                                  g2, geom, pa, pb)
            _finish_pair(table, k0, k, g1, g2, max(geom[g1, G_MUT], geom[g2, G_MUT]),
                         max(geom[g1, G_MUR], geom[g2, G_MUR]))
    return k
