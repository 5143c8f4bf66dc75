"""The contacts of a step and their identity: ground contacts of every active body, the
sweep-and-prune broad phase and the pairs' narrow phase (:func:`detect`), and a key per
contact that finds it again the next step, so that its impulse starts that step's solve
(:func:`remember`, :func:`contact_key`, :func:`slot`)."""
import numpy as np

from rtrigid._jit import jit
from rtrigid.contact.geometry import (
    C_BODY,
    C_FEATURE,
    C_LAMBDA,
    C_MUR,
    C_MUT,
    C_OTHER,
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
