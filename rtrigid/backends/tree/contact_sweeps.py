"""The Gauss-Seidel sweeps of a tree's contact solve (:mod:`.contact`): the velocity sweeps
of the impulses and the lift's sweeps of the position correction, each either in the tree's
rates or, for few contacts on many rates, in the contacts' own rows (their J M^-1 J^T)."""
import numpy as np

from rtrigid._jit import jit, jit_inline
from rtrigid.backends.tree.contact_rows import axpy, axpy2, sdot, sdot2
from rtrigid.contact.geometry import (
    C_DEPTH,
    C_DRIFT,
    C_HELD,
    C_KN,
    C_KT,
    C_MU,
    C_T1,
    C_T2,
)
from rtrigid.contact.lift import LIFT_SWEEPS
from rtrigid.contact.pgs import friction_update, normal_update

# The sweeps of a tree's contacts stop early, where the free bodies'
# (:mod:`rtrigid.contact.solver`) run to round-off: the velocity sweeps at one whose largest
# impulse change is at most SWEEP_TOL of the momentum scale of the bodies in contact (mass x
# (|v| + 1 mm/s)): at rest they leave ~1e-13 m/s unsettled; the lift's at one that changes no
# multiplier by more than LIFT_TOL of the largest (a resting contact's lift takes out
# ~g dt^2 / 2 a step: this leaves ~1e-16 m).  Gauss-Seidel's error after such a sweep is of
# its change.
SWEEP_TOL = 1e-10
LIFT_TOL = 1e-10
# DUAL: few contacts on many rates (3 count <= nv: an A1's four feet on its 18 rates) are
# swept in their own rows: J M^-1 J^T once (9 count^2 sums over a contact's rates), then an
# update moves 3 count row velocities and reads no rate; the rates are rebuilt from the
# impulses after the sweeps.  More contacts are swept in the rates.


@jit
def rate_sweeps(table, count, rows, Jc, Wc, nz, nu1, sweeps, tol):
    """The velocity sweeps of :func:`.contact.after_step` in the rates nu1 (many contacts:
    see DUAL): each update reads its contact's rows' velocities from the rates it reads (nz,
    :func:`.contact_rows.read_rates`) and moves every rate by its columns Wc; they stop at a
    sweep whose largest change is at most tol."""
    for _ in range(sweeps):
        change = 0.0
        for i in range(count):
            k = rows[i]
            row = table[k]
            idx = nz[k, 1:1 + nz[k, 0]]
            dn = normal_update(row, sdot(Jc[k, 0], nu1, idx))
            axpy(nu1, dn, Wc[k, 0])
            u1, u2 = sdot2(Jc[k, 1], Jc[k, 2], nu1, idx)
            d1, d2 = friction_update(row, u1, u2)
            axpy2(nu1, d1, Wc[k, 1], d2, Wc[k, 2])
            change = max(change, abs(dn), abs(d1), abs(d2))
        if change <= tol:
            break


@jit
def _held(row, mu, k, g1, g2):
    """A held contact k's tangent multipliers after its lift-sweep step (g1, g2: the lift's
    slide of its point along its tangents): its anchors' drift apart less that slide, within
    its friction coefficient times its normal multiplier mu[k, 0]."""
    r1 = -(row[C_DRIFT] * row[C_T1] + row[C_DRIFT + 1] * row[C_T1 + 1]
           + row[C_DRIFT + 2] * row[C_T1 + 2]) - g1
    r2 = -(row[C_DRIFT] * row[C_T2] + row[C_DRIFT + 1] * row[C_T2 + 1]
           + row[C_DRIFT + 2] * row[C_T2 + 2]) - g2
    l1 = mu[k, 1] + row[C_KT] * r1 + row[C_KT + 1] * r2
    l2 = mu[k, 2] + row[C_KT + 2] * r1 + row[C_KT + 3] * r2
    bound = row[C_MU] * mu[k, 0]
    s = np.sqrt(l1 * l1 + l2 * l2)
    if s > bound:
        l1, l2 = l1 * bound / s, l2 * bound / s
    return l1, l2


@jit
def lift_sweeps(table, count, Jc, Wc, mu, dl, nz, Qs, Wl, ll, nl):
    """LIFT_SWEEPS Gauss-Seidel sweeps of the lift dl over the contacts' rows (mu: their
    multipliers; nz: the rates their rows read, :func:`.contact_rows.read_rates`) and the nl rows of the
    joints' limits (``ContactScratch.Wl``, ``ll``; Qs: the coordinates before the lift);
    they stop at one that changes no multiplier by more than LIFT_TOL of the largest."""
    for _ in range(LIFT_SWEEPS):
        step = size = 0.0
        for k in range(count):
            row = table[k]
            idx = nz[k, 1:1 + nz[k, 0]]
            m = max(0.0, mu[k, 0] + (row[C_DEPTH] - sdot(Jc[k, 0], dl, idx)) * row[C_KN])
            axpy(dl, m - mu[k, 0], Wc[k, 0])
            step, size = max(step, abs(m - mu[k, 0])), max(size, m)
            mu[k, 0] = m
            if row[C_HELD] != 2.0:
                continue
            g1, g2 = sdot2(Jc[k, 1], Jc[k, 2], dl, idx)
            l1, l2 = _held(row, mu, k, g1, g2)
            axpy2(dl, l1 - mu[k, 1], Wc[k, 1], l2 - mu[k, 2], Wc[k, 2])
            step = max(step, abs(l1 - mu[k, 1]), abs(l2 - mu[k, 2]))
            size = max(size, abs(l1), abs(l2))
            mu[k, 1], mu[k, 2] = l1, l2
        for r in range(nl):
            j, o = int(ll[r, 0]), int(ll[r, 1])
            lam = ll[r, 4] + (ll[r, 2] - Qs[o] - dl[j]) / Wl[r, j]
            lam = max(0.0, lam) if ll[r, 3] > 0.0 else min(0.0, lam)
            axpy(dl, lam - ll[r, 4], Wl[r])
            step, size = max(step, abs(lam - ll[r, 4])), max(size, abs(lam))
            ll[r, 4] = lam
        if step <= LIFT_TOL * size:
            break


@jit
def delassus(count, Jc, Wc, nz, D):
    """D[3 j + s, 3 k + r] <- Jc[k, r] . Wc[j, s] over the contacts' rows (row 3 k + r:
    contact k's normal, r = 0, or a tangent): how far row 3 k + r's velocity (or lift) moves
    per unit multiplier on row 3 j + s, J M^-1 J^T.  It is symmetric: each pair is summed
    once, over the rates contact k's rows read (nz), and mirrored."""
    for k in range(count):
        idx = nz[k, 1:1 + nz[k, 0]]
        for r in range(3):
            a, Ja = 3 * k + r, Jc[k, r]
            for j in range(k, count):
                for s in range(r if j == k else 0, 3):
                    Wb = Wc[j, s]
                    t = 0.0
                    for i in range(idx.shape[0]):
                        t += Ja[idx[i]] * Wb[idx[i]]
                    D[3 * j + s, a] = t
                    D[a, 3 * j + s] = t


@jit_inline
def _move(u, n, d, col):
    """u[:n] += d col[:n] (nothing when d is 0)."""
    if d != 0.0:
        for a in range(n):
            u[a] += d * col[a]


@jit
def contact_sweeps(table, count, rows, D, u, sweeps, tol):
    """The velocity sweeps of :func:`.contact.after_step` in the contacts' rows (few contacts on many
    rates: see DUAL): u (3 count) their velocities, kept by the columns of D
    (:func:`delassus`) as the impulses in the table change; they stop at a sweep whose
    largest change is at most tol."""
    n = 3 * count
    for _ in range(sweeps):
        change = 0.0
        for i in range(count):
            k = rows[i]
            row = table[k]
            c = 3 * k
            dn = normal_update(row, u[c])
            _move(u, n, dn, D[c])
            d1, d2 = friction_update(row, u[c + 1], u[c + 2])
            _move(u, n, d1, D[c + 1])
            _move(u, n, d2, D[c + 2])
            change = max(change, abs(dn), abs(d1), abs(d2))
        if change <= tol:
            break


@jit
def contact_lift_sweeps(table, count, D, mu, g):
    """:func:`lift_sweeps` without limit rows in the contacts' rows: g (3 count) the lift's
    slides along them, kept by the columns of D (:func:`delassus`)."""
    n = 3 * count
    for a in range(n):
        g[a] = 0.0
    for _ in range(LIFT_SWEEPS):
        step = size = 0.0
        for k in range(count):
            row = table[k]
            c = 3 * k
            m = max(0.0, mu[k, 0] + (row[C_DEPTH] - g[c]) * row[C_KN])
            _move(g, n, m - mu[k, 0], D[c])
            step, size = max(step, abs(m - mu[k, 0])), max(size, m)
            mu[k, 0] = m
            if row[C_HELD] != 2.0:
                continue
            l1, l2 = _held(row, mu, k, g[c + 1], g[c + 2])
            _move(g, n, l1 - mu[k, 1], D[c + 1])
            _move(g, n, l2 - mu[k, 2], D[c + 2])
            step = max(step, abs(l1 - mu[k, 1]), abs(l2 - mu[k, 2]))
            size = max(size, abs(l1), abs(l2))
            mu[k, 1], mu[k, 2] = l1, l2
        if step <= LIFT_TOL * size:
            break


@jit
def add_columns(out, count, lam, Wc):
    """out += sum over the contacts k and their rows r of lam[k, r] Wc[k, r]."""
    for k in range(count):
        axpy(out, lam[k, 0], Wc[k, 0])
        axpy2(out, lam[k, 1], Wc[k, 1], lam[k, 2], Wc[k, 2])
