"""The tree backend's contact step: contacts through joints.

After each step of the tree scheme, the contacts of every body with a collision shape -- links
of a tree, pivoted bodies and free bodies alike -- are found by the narrow and broad phases of
:mod:`rtrigid.contact` (bodies that a joint joins directly are left out) and solved by the
same impulse laws as the free bodies' (:mod:`rtrigid.contact.solver`: Coulomb's round cone,
restitution, speculative contacts, warm start, the fixed budget of contact updates), but in
the tree's rates: a contact k's rows J_k (its normal and two tangents, 3 x nv: the relative
velocity of its point per unit rate) act on the rates by

    dnu = M^-1 J_k^T lambda_k,        M = T^T M T, the joint-space inertia,

so an impulse on a foot moves the whole mechanism and the joints carry the reactions.  The
columns W_k = M^-1 J_k^T come from one factor M = L^T L of the joint-space inertia along the
tree (built by composite inertias; :func:`rtrigid.maths.dense.tree_factor`) per step, three
solves per contact; a contact's Delassus block is J_k W_k, and the Gauss-Seidel sweep re-reads
a contact's velocity J_k nu from the rates its predecessors changed -- which is how contacts
on one tree see each other (their coupling J_i W_k) -- or, for few contacts on many rates,
sweeps in their rows with J M^-1 J^T built once (:mod:`.contact_sweeps`).

Energy, as for free bodies: per island (the trees joined by contacts) the event may not end
with more kinetic energy plus the lift's potential energy than it began with; the excess is
taken from the island's rate changes (scaled back to their least-energy multiple when all its
contacts are inelastic), then from its rates, or its lift is shortened.  The kinetic energy
after is that of the new rates in the lifted configuration: a tree's inertia changes with its
coordinates (counted at the configuration before the lift, a falling chain whose end rolled
on the floor gained ~1e-4 of its energy per step).  Under a scheme whose flight does not
keep energy (``semi_implicit_euler``) the budget is taken from the step's start (S_prev), as
for free bodies (:func:`rtrigid.contact.solver.flight_allowance`).  The position
correction moves the tree's coordinates, not bodies independently, so the joints stay closed:
Gauss-Seidel over the contacts' normal rows of the mass-weighted displacement dq = M^-1 J_n^T mu
(mu >= 0) that takes the depths out, then the coordinates advance by it (quaternions by
q o (0, dq/2), normalized).

On a mechanism with loop joints or joint couplings (stepped by ``nullspace_rk4``), their rows
G (m x nv, written at the step's end configuration) constrain the impulses too: each column
W_k is projected in the mass metric onto G dnu = 0, W_k <- W_k - M^-1 G^T (G M^-1 G^T)^-1 G W_k
(rows that depend on others dropped), so the rates, the lift and the Delassus blocks are those
of the constrained mechanism; bodies that a row joins are one island.

Under a scheme whose rates are the step's mean rates (``MEAN_RATES``: energy_momentum), the
rates at the step's end are those of the bodies' momenta; a touched island's bodies then get
the velocities of the new rates, consistent with the joints.  Every sum over rates runs in the
order of the bodies' names, and the factor keeps separate trees apart (their blocks of M and of
its factor meet only in exact zeros), so results do not depend on the order in which trees and
free bodies were added.
"""
from typing import NamedTuple

import numpy as np

from rtrigid._jit import jit, jit_inline, rebind
from rtrigid.backends import contact_step
from rtrigid.backends.buffers import view
from rtrigid.backends.tree.contact_rows import (
    axpy,
    constrained_column,
    constraint_factor,
    constraint_tail,
    read_rates,
    sdot,
    sdot2,
)
from rtrigid.backends.tree.contact_sweeps import (
    SWEEP_TOL,
    add_columns,
    contact_lift_sweeps,
    contact_sweeps,
    delassus,
    lift_sweeps,
    rate_sweeps,
)
from rtrigid.backends.tree.dynamics import (
    add_point_columns,
    composite_mass_matrix,
    momentum_rates,
)
from rtrigid.backends.tree.kinematics import (
    body_rates,
    coordinate_rates,
    geometry,
    joint_velocities,
    normalize_coordinates,
)
from rtrigid.backends.tree.layout import (
    I_KIND,
    I_ORDER,
    I_PARENT,
    I_QOFF,
    I_VOFF,
    NQ,
    NV,
    T_ARM,
    T_HI,
    T_J,
    T_K,
    T_LO,
    T_MASS,
    T_REST,
    carve,
    one_coordinate,
    pass_arrays,
    open_buffers,
    state_views,
)
from rtrigid.contact.geometry import (
    C_BODY,
    C_LAMBDA,
    C_NORMAL,
    C_OTHER,
    C_POINT,
    C_SLIP,
    C_T1,
    C_T2,
)
from rtrigid.contact.general import detect_general
from rtrigid.contact.manifold import contact_key, detect, remember, slot
from rtrigid.contact.pgs import (
    by_level,
    set_response,
    set_target,
    tangents,
)
from rtrigid.contact.solver import (
    GAP,
    MIN_SWEEPS,
    START_BUDGET,
    UPDATE_BUDGET,
    anchors,
    elastic_islands,
    energy_scales,
    flight_allowance,
    flight_gap,
    island_root,
    islands,
    least_energy_scale,
    levels,
    scale_impulses,
)
from rtrigid.maths.dense import tree_factor, tree_solve, tree_solve3


def rate_tree(ti):
    """The rates' parents (of a joint's first rate: the last rate of the nearest ancestor
    body's joint; of its others: the one before; -1: none) followed by the rates in a
    topological order, as a list of 2 nv ints: how the joint-space inertia's factor
    (:func:`rtrigid.maths.dense.tree_factor`) walks the tree."""
    nb = len(ti)
    nv = sum(int(NV[ti[b, I_KIND]]) for b in range(nb))
    parent, order, last = [-1] * nv, [], [-1] * nb
    for i in range(nb):
        b = ti[i, I_ORDER]
        p = ti[b, I_PARENT]
        up = last[p] if p >= 0 else -1
        o = int(ti[b, I_VOFF])
        for j in range(o, o + int(NV[ti[b, I_KIND]])):
            parent[j] = up
            order.append(j)
            up = j
        last[b] = up
    return parent + order


def scratch_size(rows, nb, nq, nv):
    """Length of the float scratch of :func:`after_step` (see :func:`_carve`)."""
    return (6 * rows * nv + 3 * nv + 2 * nq + 3 * rows + 19 * nb + 6 * nv + 2 * nv * nv
            + 36 * nb + 6 + nv * nv + 5 * nv + nv * nv + nv)


class ContactScratch(NamedTuple):
    """The float scratch of :func:`after_step` by name (:func:`_carve`): per contact its rows
    ``Jc`` (rows, 3, nv) (normal, tangents) and columns ``Wc`` = M^-1 Jc^T; the rates ``nu0``
    at the step's end and ``nu1`` after the impulses, the lift ``dl`` in the rates; the
    coordinates ``Qs`` before the lift and the lift ``dQ`` in them; the lift's multipliers
    ``mu`` (rows, 3); the bodies' poses ``xk``, ``qk`` at the lifted configuration, their
    velocities before (``v0``, ``w0``) and after (``v1``, ``w1``) the impulses; a point's
    columns ``Jp`` (6, nv); the joint-space inertia ``Mj`` (nv, nv), its factor ``Lj``
    (:func:`rtrigid.maths.dense.tree_factor`) and the composite inertias ``Ic`` (nb, 6, 6)
    and a wrench ``F6`` that build it;
    the lift's rows of the joints' limits: their columns ``Wl`` (nv, nv), ``Wl[r]`` = M^-1 e_j,
    and per row ``ll`` (nv, 5) its rate index j, coordinate index, bound, side (+1 a lower
    bound, -1 an upper one) and multiplier; for a sweep in the contacts' rows (DUAL) their
    J M^-1 J^T ``D`` (nv, nv: 3 count rows at most) and velocities or slides ``ud`` (nv)."""
    Jc: np.ndarray
    Wc: np.ndarray
    nu0: np.ndarray
    nu1: np.ndarray
    dl: np.ndarray
    Qs: np.ndarray
    dQ: np.ndarray
    mu: np.ndarray
    xk: np.ndarray
    qk: np.ndarray
    v0: np.ndarray
    w0: np.ndarray
    v1: np.ndarray
    w1: np.ndarray
    Jp: np.ndarray
    Mj: np.ndarray
    Lj: np.ndarray
    Ic: np.ndarray
    F6: np.ndarray
    Wl: np.ndarray
    ll: np.ndarray
    D: np.ndarray
    ud: np.ndarray


@jit
def _carve(xf, rows, nb, nq, nv):
    o = 0
    Jc = view(xf, o, (rows, 3, nv))
    o += 3 * rows * nv
    Wc = view(xf, o, (rows, 3, nv))
    o += 3 * rows * nv
    nu0 = xf[o:o + nv]
    nu1 = xf[o + nv:o + 2 * nv]
    dl = xf[o + 2 * nv:o + 3 * nv]
    o += 3 * nv
    Qs = xf[o:o + nq]
    dQ = xf[o + nq:o + 2 * nq]
    o += 2 * nq
    mu = view(xf, o, (rows, 3))  # the lift's multipliers: normal, tangents
    o += 3 * rows
    xk = view(xf, o, (nb, 3))
    qk = view(xf, o + 3 * nb, (nb, 4))
    v0 = view(xf, o + 7 * nb, (nb, 3))
    w0 = view(xf, o + 10 * nb, (nb, 3))
    v1 = view(xf, o + 13 * nb, (nb, 3))
    w1 = view(xf, o + 16 * nb, (nb, 3))
    o += 19 * nb
    Jp = view(xf, o, (6, nv))
    o += 6 * nv
    Mj = view(xf, o, (nv, nv))
    Lj = view(xf, o + nv * nv, (nv, nv))
    o += 2 * nv * nv
    Ic = view(xf, o, (nb, 6, 6))
    F6 = xf[o + 36 * nb:o + 36 * nb + 6]
    o += 36 * nb + 6
    Wl = view(xf, o, (nv, nv))
    ll = view(xf, o + nv * nv, (nv, 5))
    o += nv * nv + 5 * nv
    D = view(xf, o, (nv, nv))
    ud = xf[o + nv * nv:o + nv * nv + nv]
    return ContactScratch(Jc, Wc, nu0, nu1, dl, Qs, dQ, mu, xk, qk, v0, w0, v1, w1, Jp, Mj, Lj,
                          Ic, F6, Wl, ll, D, ud)


@jit
def _shorten(tf, ti, Qg, scr, passes, x, gravity, order, touched, island, sums, pe):
    """The shortened lifts of the islands that stop (solver.energy_scales: velocity scale 0,
    lift scale s = budget / the full lift's potential energy sums[root, 2]).  A lift is linear
    in the coordinates, the potential energy not (a joint's angle moves a centre of mass along
    an arc): so the shortened lift's potential energy is measured, and the scale cut until it
    is within the budget (at last to no lift, which costs none).  scr: the step's
    :class:`ContactScratch` (its coordinates Qs before the lift and the lift dQ; the poses xk,
    qk are written), passes: the tree's passes' scratch (a
    :data:`~rtrigid.backends.tree.layout.Passes`; geometry writes its R, rj, G); pe: per-body
    scratch."""
    Qs, dQ, xk, qk = scr.Qs, scr.dQ, scr.xk, scr.qk
    R, rj, G = passes.R, passes.rj, passes.G
    for r in range(order.shape[0]):
        b = order[r]
        if touched[b] and island[b] == b and sums[b, 0] == 0.0:
            sums[b, 2] *= sums[b, 1]  # the budget (it stops: its lift is what it may cost)
    for attempt in range(4):
        for b in range(tf.shape[0]):
            if touched[b]:
                s = sums[island[b], 1]
                o = ti[b, I_QOFF]
                for i in range(o, o + NQ[ti[b, I_KIND]]):
                    Qg[i] = Qs[i] + s * dQ[i]
        normalize_coordinates(ti, Qg)
        geometry(tf, ti, Qg, xk, qk, R, rj, G)
        for r in range(order.shape[0]):
            pe[order[r]] = 0.0
        for r in range(order.shape[0]):
            b = order[r]
            if touched[b]:
                pe[island[b]] += _twice_lift_energy(tf, ti, b, gravity, x, xk, Qs, Qg)
        over = False
        for r in range(order.shape[0]):
            b = order[r]
            if (touched[b] and island[b] == b and sums[b, 0] == 0.0 and sums[b, 1] > 0.0
                    and pe[b] > sums[b, 2] * (1.0 + 1e-12)):
                over = True
                sums[b, 1] = 0.0 if attempt == 2 else (
                    sums[b, 1] * max(0.0, sums[b, 2]) / pe[b])
        if not over:
            return


@jit_inline
def _twice_lift_energy(tf, ti, b, gravity, x, xk, Qs, Qg):
    """Twice the potential energy the lift gives body b: gravity's, its centre moved from x
    to xk, and its joint spring's, the joint's coordinate moved from Qs to Qg."""
    e = -2.0 * tf[b, T_MASS] * (gravity[0] * (xk[b, 0] - x[b, 0]) + gravity[1] * (
        xk[b, 1] - x[b, 1]) + gravity[2] * (xk[b, 2] - x[b, 2]))
    k = tf[b, T_K]
    if k != 0.0:  # (a revolute or prismatic joint's: the only kinds with springs)
        o = ti[b, I_QOFF]
        rest = tf[b, T_REST]
        e += k * ((Qg[o] - rest) ** 2 - (Qs[o] - rest) ** 2)
    return e


@jit
def _limit_rows(tf, ti, Qs, dl, Lj, rates, rows_g, Wl, ll, nl):
    """Add a lift row for every revolute or prismatic joint the lift dl would take past one
    of its limits (or further past it, if it starts beyond); returns the number of rows.  The
    contacts' rows alone would push a joint through its stop, and the scheme would put it
    back at the next step (under ``energy_momentum`` a locked limit then does work).  A
    joint the constraints (loops, couplings) leave no freedom along gets no row."""
    nv = dl.shape[0]
    for b in range(ti.shape[0]):
        o, j = one_coordinate(ti, b)
        if o < 0 or dl[j] == 0.0:
            continue
        lo, hi = min(tf[b, T_LO], Qs[o]), max(tf[b, T_HI], Qs[o])
        c = Qs[o] + dl[j]
        if lo <= c <= hi:
            continue
        listed = False
        for r in range(nl):
            listed = listed or int(ll[r, 0]) == j
        if listed:
            continue
        for i in range(nv):
            Wl[nl, i] = 0.0
        Wl[nl, j] = 1.0
        tree_solve(Lj, rates, Wl[nl], Wl[nl], nv)
        free = Wl[nl, j]
        if rows_g[0].shape[0]:
            constrained_column(rows_g, Wl[nl])
        if not Wl[nl, j] > 1e-9 * free:
            continue
        ll[nl, 0], ll[nl, 1] = j, o
        ll[nl, 2], ll[nl, 3] = (lo, 1.0) if c < lo else (hi, -1.0)
        ll[nl, 4] = 0.0
        nl += 1
    return nl


@jit
def _join(island, rank, a, b):
    """Join the islands of bodies a and b (the lower-ranked root becomes the root)."""
    i, j = island_root(island, a), island_root(island, b)
    if i != j:
        if rank[i] < rank[j]:
            island[j] = i
        else:
            island[i] = j


@jit
def _twice_kinetic(tf, b, v, w):
    return (tf[b, T_MASS] * (v[b, 0] ** 2 + v[b, 1] ** 2 + v[b, 2] ** 2)
            + tf[b, T_J] * w[b, 0] ** 2 + tf[b, T_J + 1] * w[b, 1] ** 2
            + tf[b, T_J + 2] * w[b, 2] ** 2)


@jit_inline
def _twice_rotor(tf, ti, b, base, rates, s, keep=1.0):
    """Twice the kinetic energy a r² of the rotor (armature) on body b's joint at the rate
    r = keep base + s (rates - base), base and rates at its rate offset."""
    o = ti[b, I_VOFF]
    r = keep * base[o] + s * (rates[o] - base[o])
    return tf[b, T_ARM] * r * r


@jit
def _blend(ti, island, root, s, base, out):
    """out <- base + s (out - base) on the rates of the island ``root``'s bodies."""
    for b in range(ti.shape[0]):
        if island[b] == root:
            o = ti[b, I_VOFF]
            for i in range(o, o + NV[ti[b, I_KIND]]):
                out[i] = base[i] + s * (out[i] - base[i])


@jit
def after_step(F, I, scene, grounds, active, arrays, settings, dt, xf, xi, stats):
    """The contact solve after a step of a tree scheme; returns the number of contacts.
    ``scene``: the geoms (a :class:`rtrigid.contact.manifold.Scene`, see
    :func:`rtrigid.contact.manifold.detect`); ``arrays``: the contact step's
    :class:`rtrigid.contact.solver.ContactArrays` (its ``lift`` unused here), ``settings``
    its :class:`~rtrigid.contact.solver.SolveSettings`; stats[1] counts the pairs left out
    for want of table rows.  ``xf``: float scratch (:func:`scratch_size`); ``xi``: [1 if the
    scheme keeps mean rates, ``START_BUDGET`` if its flight does not keep energy (the energy
    budget is then taken from the step's start, S_prev:
    :func:`rtrigid.contact.solver.flight_allowance`), else 0; then the rate indices in the
    order of their bodies' names; the number of loop and coupling rows at xf's end; the
    rates' tree (:func:`rate_tree`); then (:func:`.contact_rows.int_scratch_size`) per
    table row nv + 1 ints of scratch]."""
    table, touched, vel, ints = arrays.table, arrays.touched, arrays.vel, arrays.ints
    keys, lam, rows = arrays.keys, arrays.lam, arrays.rows
    iters, rest_speed = settings
    gravity, tf, pf, ti, pi, S, S_prev, A, solver, _scheme_stats, work, sizes = open_buffers(F, I)
    nb, ns, nq, nv = sizes
    Qg, nu, x, q, v, w, L = state_views(S, nb, nq, nv)
    passes = pass_arrays(carve(work, nb, nq, nv))
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = passes
    cap = table.shape[0]
    scr = _carve(xf, cap, nb, nq, nv)
    Jc, Wc, nu0, nu1, dl, Qs, dQ, mu, xk, qk, v0, w0, v1, w1, Jp, Mj, Lj, Ic, F6, Wl, ll, D, \
        ud = scr
    mean_rates = xi[0] == 1
    start_budget = xi[0] == START_BUDGET
    perm = xi[1:1 + nv]
    m = xi[1 + nv]  # loops' and couplings' rows (xf's tail)
    rtree = view(xi, 2 + nv, (2, nv))  # the rates' parents and a topological order
    nz = view(xi, 2 + 3 * nv, (cap, nv + 1))  # per contact the rates its rows read
    order, rank, island = ints[:, 0], ints[:, 1], ints[:, 3]
    # no rim look-ahead (dt 0): the rates at the step's end are not known yet under the mean-rate
    # schemes; see geometry.ground_contacts
    count = detect(table, x, q, w, active, scene, grounds, 0.0, stats)
    for b in range(nb):
        touched[b] = 0
    if count == 0:
        remember(table, 0, keys, lam)
        return 0
    if start_budget:  # before the solve changes the state
        x0, _, v0s, w0s = state_views(S_prev, nb, nq, nv)[2:6]
        flight_gap(tf[:, T_MASS], tf[:, T_J:T_J + 3], gravity, x0, v0s, w0s, x, v, w,
                   vel[:, GAP])
    # the rates at the step's end (from the bodies' momenta under the mean-rate schemes) and
    # the geometry of its configuration
    if mean_rates:
        if not momentum_rates(tf, ti, Qg, v, L, nu, xk, qk, passes, nu0, v0, w0):
            remember(table, 0, keys, lam)
            return 0
    else:
        for i in range(nv):
            nu0[i] = nu[i]
        geometry(tf, ti, Qg, xk, qk, R, rj, G)
        joint_velocities(ti, G, nu0, V, cb)
        body_rates(ti, R, G, V, v0, w0)
    composite_mass_matrix(tf, ti, R, G, Ic, I6, F6, Mj)
    if not tree_factor(Mj, Lj, rtree, nv):
        remember(table, 0, keys, lam)
        return 0
    rows_g = constraint_tail(xf, m, nv)
    if m and not constraint_factor(Lj, rtree, rows_g):
        remember(table, 0, keys, lam)
        return 0
    # per contact: its rows J (normal, tangents), the columns M^-1 J^T, its Delassus block
    for k in range(count):
        row = table[k]
        a, b = int(row[C_BODY]), int(row[C_OTHER])
        n = (row[C_NORMAL], row[C_NORMAL + 1], row[C_NORMAL + 2])
        t1, t2 = tangents(n)
        pw = (row[C_POINT], row[C_POINT + 1], row[C_POINT + 2])
        for r in range(6):
            for c in range(nv):
                Jp[r, c] = 0.0
        add_point_columns(ti, G, rj, a, pw, 1.0, Jp)
        if b >= 0:
            add_point_columns(ti, G, rj, b, pw, -1.0, Jp)
        for c in range(nv):
            Jc[k, 0, c] = n[0] * Jp[0, c] + n[1] * Jp[1, c] + n[2] * Jp[2, c]
            Jc[k, 1, c] = t1[0] * Jp[0, c] + t1[1] * Jp[1, c] + t1[2] * Jp[2, c]
            Jc[k, 2, c] = t2[0] * Jp[0, c] + t2[1] * Jp[1, c] + t2[2] * Jp[2, c]
        tree_solve3(Lj, rtree, Jc[k], Wc[k], nv)
        if m:
            for r in range(3):
                constrained_column(rows_g, Wc[k, r])
        for i in range(3):
            row[C_T1 + i] = t1[i]
            row[C_T2 + i] = t2[i]
            row[C_LAMBDA + i] = 0.0
        # a tree can lack the freedom to move the point along some direction (a pendulum
        # along its hinge): the block is then singular.  A regularization far below the
        # lightest body's own response keeps it invertible; the velocities it acts on lie in
        # K's range, so the impulses stay bounded.  A point that cannot move along the normal
        # takes no normal impulse (K_nn below the floor: 1 / inf).
        heavy = tf[a, T_MASS] if b < 0 else max(tf[a, T_MASS], tf[b, T_MASS])
        floor = 1e-9 / heavy
        read_rates(Jc[k], perm, nz[k])
        idx = nz[k, 1:1 + nz[k, 0]]
        knn = sdot(Jc[k, 0], Wc[k, 0], idx)
        set_response(row, knn if knn > floor else np.inf, sdot(Jc[k, 1], Wc[k, 1], idx)
                     + floor, sdot(Jc[k, 1], Wc[k, 2], idx),
                     sdot(Jc[k, 2], Wc[k, 2], idx) + floor)
        set_target(row, sdot(Jc[k, 0], nu0, idx), rest_speed, dt)
    # warm start from the normal impulses the same contacts ended the last step with
    for i in range(nv):
        nu1[i] = nu0[i]
    for k in range(count):
        h = slot(keys, contact_key(table[k]))
        if keys[h, 0] != -1:
            ln = lam[keys[h, 1], 0]
            table[k, C_LAMBDA] = ln
            axpy(nu1, ln, Wc[k, 0])
    levels(table, count, ints[:, 4], active)
    by_level(table, count, ints[:, 4], rows)
    scale_ref = 0.0
    for k in range(count):
        for side in (C_BODY, C_OTHER):
            b = int(table[k, side])
            if b >= 0:
                scale_ref = max(scale_ref, tf[b, T_MASS] * (abs(v0[b, 0]) + abs(v0[b, 1])
                                                            + abs(v0[b, 2]) + 1e-3))
    sweeps = min(iters, max(MIN_SWEEPS, (UPDATE_BUDGET + count - 1) // count))
    dual = 3 * count <= nv
    if dual:
        delassus(count, Jc, Wc, nz, D)
        for k in range(count):
            for r in range(3):
                ud[3 * k + r] = sdot(Jc[k, r], nu1, nz[k, 1:1 + nz[k, 0]])
        contact_sweeps(table, count, rows, D, ud, sweeps, SWEEP_TOL * scale_ref)
        for i in range(nv):
            nu1[i] = nu0[i]
        add_columns(nu1, count, table[:, C_LAMBDA:C_LAMBDA + 3], Wc)
    else:
        rate_sweeps(table, count, rows, Jc, Wc, nz, nu1, sweeps, SWEEP_TOL * scale_ref)
    # islands: bodies joined by contacts or joints; touched: those of an island with contacts
    islands(table, count, order, rank, island, active)
    for b in range(nb):
        p = ti[b, I_PARENT]
        if p >= 0:
            _join(island, rank, b, p)
    for r in range(m):  # and by loops and couplings: the bodies whose rates a row reads
        first = -1
        for b in range(nb):
            o = ti[b, I_VOFF]
            for i in range(o, o + NV[ti[b, I_KIND]]):
                if rows_g[0][r, i] != 0.0:
                    if first < 0:
                        first = b
                    else:
                        _join(island, rank, b, first)
                    break
    for r in range(nb):
        island[order[r]] = island_root(island, order[r])
    for k in range(count):
        touched[island[int(table[k, C_BODY])]] = 1
    for b in range(nb):
        touched[b] = touched[island[b]]
    # the energy rule on the velocities: per island 0 twice the kinetic energy before,
    # 1 after, 2 elastic / the scale of its impulses
    joint_velocities(ti, G, nu1, V, cb)
    body_rates(ti, R, G, V, v1, w1)
    sums = vel[:, 13:16]
    elastic_islands(table, count, island, sums)
    for r in range(nb):
        b = order[r]
        if touched[b]:
            sums[island[b], 0] += _twice_kinetic(tf, b, v0, w0)
            sums[island[b], 1] += _twice_kinetic(tf, b, v1, w1)
            if tf[b, T_ARM] != 0.0:  # and its joint's rotor (armature)
                sums[island[b], 0] += _twice_rotor(tf, ti, b, nu0, nu0, 1.0)
                sums[island[b], 1] += _twice_rotor(tf, ti, b, nu0, nu1, 1.0)
    for r in range(nb):
        b = order[r]
        if not touched[b] or island[b] != b:
            continue
        scale = 1.0
        if sums[b, 2] == 0.0 and sums[b, 1] > sums[b, 0]:
            c = 0.0
            for r2 in range(nb):
                o = order[r2]
                if island[o] == b:
                    for i in range(3):
                        v1[o, i] -= v0[o, i]
                        w1[o, i] -= w0[o, i]
                    c += _twice_kinetic(tf, o, v1, w1)
                    if tf[o, T_ARM] != 0.0:
                        c += _twice_rotor(tf, ti, o, nu0, nu1, 1.0, 0.0)
            scale = least_energy_scale(sums[b, 0], sums[b, 1], c)
            sums[b, 1] = 0.0
            for r2 in range(nb):
                o = order[r2]
                if island[o] == b:
                    for i in range(3):
                        v1[o, i] = v0[o, i] + scale * v1[o, i]
                        w1[o, i] = w0[o, i] + scale * w1[o, i]
                    sums[b, 1] += _twice_kinetic(tf, o, v1, w1)
                    if tf[o, T_ARM] != 0.0:
                        sums[b, 1] += _twice_rotor(tf, ti, o, nu0, nu1, scale)
            _blend(ti, island, b, scale, nu0, nu1)
        sums[b, 2] = scale
    scale_impulses(table, count, island, sums)
    # the lift in the tree's coordinates: dl = M^-1 J_n^T mu, mu >= 0, J_n dl >= depth
    for i in range(nv):
        dl[i] = 0.0
    for k in range(count):
        for i in range(3):
            mu[k, i] = 0.0
    # and a contact held since an earlier step is brought back to its anchors along its
    # tangents (solver.anchors): J_t dl = -drift, within mu times its normal multiplier (a
    # joint can tie the point's slide to its depth)
    for k in range(count):
        for i, rates in enumerate((nu0, nu1)):
            u1, u2 = sdot2(Jc[k, 1], Jc[k, 2], rates, nz[k, 1:1 + nz[k, 0]])
            table[k, C_SLIP + i] = np.hypot(u1, u2)
    anchors(table, count, x, q, keys, lam)
    for i in range(nq):
        Qs[i] = Qg[i]
    if dual:
        contact_lift_sweeps(table, count, D, mu, ud)
        add_columns(dl, count, mu, Wc)
    else:
        lift_sweeps(table, count, Jc, Wc, mu, dl, nz, Qs, Wl, ll, 0)
    nl = 0
    for _ in range(nv):  # rows for the limits the lift would cross, until it crosses none
        added = _limit_rows(tf, ti, Qs, dl, Lj, rtree, rows_g, Wl, ll, nl)
        if added == nl:
            break
        nl = added
        lift_sweeps(table, count, Jc, Wc, mu, dl, nz, Qs, Wl, ll, nl)
    for r in range(nl):  # what the sweeps leave of a crossing (round-off, their convergence)
        j, o = int(ll[r, 0]), int(ll[r, 1])
        if ll[r, 3] > 0.0:
            dl[j] = max(dl[j], ll[r, 2] - Qs[o])
        else:
            dl[j] = min(dl[j], ll[r, 2] - Qs[o])
    coordinate_rates(ti, Qs, dl, dQ)
    for i in range(nq):
        Qg[i] = Qs[i] + dQ[i]
    normalize_coordinates(ti, Qg)
    geometry(tf, ti, Qg, xk, qk, R, rj, G)
    # the lift's potential energy, per island, paid from its kinetic energy -- that of the
    # new rates in the lifted configuration (a tree's inertia changes with it)
    joint_velocities(ti, G, nu1, V, cb)
    body_rates(ti, R, G, V, v1, w1)
    for b in range(nb):
        sums[b, 1] = 0.0
        sums[b, 2] = 0.0
    for r in range(nb):
        b = order[r]
        if touched[b]:
            sums[island[b], 1] += _twice_kinetic(tf, b, v1, w1)
            if tf[b, T_ARM] != 0.0:
                sums[island[b], 1] += _twice_rotor(tf, ti, b, nu0, nu1, 1.0)
            sums[island[b], 2] += _twice_lift_energy(tf, ti, b, gravity, x, xk, Qs, Qg)
    for b in range(nb):
        ints[b, 4] = 0  # no island rolls on a rim here (solver._rolling_rims: free bodies)
    if start_budget:
        flight_allowance(order, touched, island, sums, vel[:, GAP])
    if energy_scales(order, touched, island, sums, ints[:, 4], vel[:, 12]):
        _shorten(tf, ti, Qg, scr, passes, x, gravity, order, touched, island, sums,
                 vel[:, 12])
    # write the touched islands' rates and bodies
    for b in range(nb):
        if touched[b]:
            s = sums[island[b], 0]
            o = ti[b, I_VOFF]
            for i in range(o, o + NV[ti[b, I_KIND]]):
                nu[i] = s * nu1[i]
    joint_velocities(ti, G, nu, V, cb)
    body_rates(ti, R, G, V, v1, w1)
    for b in range(nb):
        if touched[b]:
            for i in range(3):
                x[b, i] = xk[b, i]
                v[b, i] = v1[b, i]
                w[b, i] = w1[b, i]
                L[b, i] = tf[b, T_J + i] * w1[b, i]
            for i in range(4):
                q[b, i] = qk[b, i]
    remember(table, count, keys, lam)
    return count


# the contact step of a model with pairs that meet through the general narrow phase
after_step_general = rebind(after_step, "general", __name__, detect=detect_general)

# the contact step and its Batch rows around this solve (rtrigid.backends.contact_step)
run = rebind(contact_step.run, "tree", __name__, after_step=after_step)
run_general = rebind(contact_step.run, "tree_general", __name__, after_step=after_step_general)
rows_step = rebind(contact_step.rows_step, "tree", __name__, run=run)
rows_step_general = rebind(contact_step.rows_step, "tree_general", __name__, run=run_general)
