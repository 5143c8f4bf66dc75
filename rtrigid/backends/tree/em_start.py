"""Starting guesses of the jointed ``energy_momentum`` step: the extrapolated rates, the explicit
RK4 start, and the step's mean rates.
"""

import numpy as np
from rtrigid._jit import jit, jit_inline
from rtrigid.backends.buffers import all_finite, flat, view
from rtrigid.backends.tree.layout import Drive, TreeTables, pass_arrays
from rtrigid.backends.tree.kinematics import (
    ACT_GEAR,
    ACT_Q,
    ACT_V,
    I_QOFF,
    I_VOFF,
    actuator_force,
    articulated_factor,
    articulated_solve,
    base_work_size,
    coordinate_rates,
    coordinate_slots,
    normalize_coordinates,
    rk4_stage_input,
)
from rtrigid.backends.tree.dynamics import momentum_rates
from rtrigid.backends.tree.nullspace_rk4 import RK4_WEIGHTS, loads as rk4_loads
from rtrigid.backends.tree.em_workspace import em_size, path_size
from rtrigid.backends.tree.em_residual import load_start, residual, update_coordinates



@jit
def predict(h, model, state, ws, drive, pred, change):
    """Explicit prediction of a step's mean rates: pred <- the mean rates of one RK4 step of
    the explicit dynamics from the present state (as ``nullspace_rk4`` steps, with every
    load acting), change <- h nudot at t_n; False if the inertia is singular or a value is
    not finite.

    The rates at t_n come from the bodies' momenta; the RK4 step's increments are turned into
    the solver's unknowns by :func:`mean_rates`.  It depends only on the present state, so a
    restored snapshot reproduces it.  Why RK4: on hard steps of the lively chains the Newton
    iteration's reach, not its matrix, limits it, and RK4 lands closer (README, "The
    energy-momentum solver").
    """
    gravity, tf, ti, pf, pi, A, forces = model
    Qg, nu, x, q, v, w, L = state
    scr, em, jx = ws
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = pass_arrays(scr)
    nu_t = scr.nu0
    xs, vs, us, qs, Q1 = em.x1, em.v1, em.u, em.q1, em.Q1  # (free until the solve starts)
    if not momentum_rates(tf, ti, Qg, v, L, nu, xs, qs, pass_arrays(scr), nu_t, vs, us):
        return False
    # (the end rates go to pred, which the mean rates then overwrite)
    if not rk4_step(h, True, model, Qg, nu_t, Q1, pred, ws, drive, change):
        return False
    normalize_coordinates(ti, Q1)
    mean_rates(ti, Qg, Q1, h, pred)
    return all_finite(pred) and all_finite(change)


@jit
def rk4_step(h, factored, model, Q0, nu0, Q1, nu1, ws, drive, change):
    """One RK4 step of size h of the explicit dynamics from (Q0, nu0), every load acting (as
    ``nullspace_rk4`` steps it, its stage inputs from ``nullspace_rk4.loads``): (Q1, nu1) <-
    its end (Q1 not yet normalised), change <- h nudot at the start; False if the inertia is
    singular.  ``factored``: the recursion is factored at Q0 already (by ``momentum_rates``).
    The actuators act at every stage; their work is not added here (the caller counts it by
    this scheme's rule)."""
    gravity, tf, ti, pf, pi, A, forces = model
    scr, em, jx = ws
    act, ctrl, awork = drive
    passes = pass_arrays(scr)
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = passes
    kQ, Qs, nus = scr.kQ, scr.Qs, scr.nus
    dQ, sQ, dnu, snu = kQ[0], kQ[1], scr.nudot, scr.knu[1]
    xs, qs = em.x1, em.q1
    nb = ti.shape[0]
    nv = nu0.shape[0]
    nq = Q0.shape[0]
    tables = TreeTables(tf, ti, pf, pi, gravity)
    applied = (view(A, 0, (nb, 3)), view(A, 3 * nb, (nb, 3)), A[6 * nb:6 * nb + nv])
    silent = Drive(act[:0], ctrl, ctrl)  # no actuator: their forces are added below
    for st in range(4):
        rk4_stage_input(st, h, Q0, nu0, dQ, dnu, Qs, nus)
        coordinate_rates(ti, Qs, nus, dQ)
        # nullspace_rk4's stage inputs; the actuators below, as their work is not wanted here
        rk4_loads(tables, Qs, nus, xs, qs, passes, applied, silent, 0.0)
        if (st > 0 or not factored) and not articulated_factor(tf, ti, R, G, IA, U, Dinv, W,
                                                               I6):
            return False
        for a in range(act.shape[0]):
            ov = int(act[a, ACT_V])
            tau[ov] += act[a, ACT_GEAR] * actuator_force(act, a, ctrl, Qs[int(act[a, ACT_Q])],
                                                         nus[ov])
        articulated_solve(ti, G, IA, U, Dinv, W, tau, cb, pA, acc, dnu)
        if st == 0:
            for j in range(nv):
                change[j] = h * dnu[j]
        wt = RK4_WEIGHTS[st]
        for i in range(nq):
            sQ[i] = sQ[i] + wt * dQ[i] if st > 0 else wt * dQ[i]
        for j in range(nv):
            snu[j] = snu[j] + wt * dnu[j] if st > 0 else wt * dnu[j]
    for i in range(nq):
        Q1[i] = Q0[i] + h * sQ[i]
    for j in range(nv):
        nu1[j] = nu0[j] + h * snu[j]
    return True


@jit
def extrapolate(dt, ti, Qg, nu, Qg_prev, nu_prev, Qs, pred):
    """The cheap start of a step (tried first, see :func:`step`): the last two steps' mean
    rates extrapolated, 2 nu - nu_prev, when the state before the last step (Qg_prev,
    nu_prev) and the present one are linked by one step of size dt with the present rates
    (nothing was set in between); else the present rates.  Both states are in every
    snapshot, so the start is too."""
    for j in range(nu.shape[0]):
        pred[j] = dt * nu[j]
    update_coordinates(ti, Qg_prev, pred, Qs)
    normalize_coordinates(ti, Qs)
    linked = True
    for i in range(Qg.shape[0]):
        if not (abs(Qs[i] - Qg[i]) <= 1e-12 * max(1.0, abs(Qg[i]))):
            linked = False
            break
    for j in range(nu.shape[0]):
        pred[j] = 2.0 * nu[j] - nu_prev[j] if linked else nu[j]


@jit
def choose_start(h, model, state, ws, drive, pred, change):
    """Of three starts -- the RK4 prediction in ``pred``, the Taylor one nu_t + change/2
    (nu_t in scr.nu0, the rates at t_n) and the stored rates ``nu`` (the last step's mean
    rates) -- leave in ``pred`` the one whose residual is smallest.  The stored rates win
    where the explicit dynamics is unstable at this step (a stiff servo, kp h²/m = 1e4)."""
    gravity, tf, ti, pf, pi, A, forces = model
    Qg, nu, x, q, v, w, L = state
    scr, em, jx = ws
    act, ctrl, awork = drive
    x0, v0, L0, q0, mu, alt = em.x0, em.v0, em.L0, em.q0, em.mu, em.rhs
    nu_t = scr.nu0
    nv = pred.shape[0]
    load_start(x, v, L, q, x0, v0, L0, q0, jx.R0)
    for j in range(nv):
        alt[j] = nu_t[j] + 0.5 * change[j]
    best = np.inf
    choice = 0
    for c in range(3):
        for j in range(nv):
            mu[j] = h * (pred[j] if c == 0 else (alt[j] if c == 1 else nu[j]))
        r = residual(h, model, Qg, mu, x, q, work_of(scr), act, ctrl)[0]
        if r < best:
            best = r
            choice = c
    if choice > 0:
        for j in range(nv):
            pred[j] = alt[j] if choice == 1 else nu[j]


@jit_inline
def work_of(scr):
    """The flat scratch that the kinematics scratch ``scr`` (and the solver's tuples after it)
    was carved from: :func:`kinematics.carve` puts scr.R at its start."""
    nb, nv, nq = scr.R.shape[0], scr.tau.shape[0], scr.Q0.shape[0]
    return flat(scr.R, base_work_size(nb, nq, nv) + em_size(nb, nq, nv)
                + path_size(nb, nq, nv))


@jit
def mean_rates(ti, Q0, Q1, h, nu):
    """nu <- the increments from Q0 to Q1 over h: the inverse of ``update_coordinates``
    (Cayley increment 4 a on the near root for quaternions)."""
    for b in range(ti.shape[0]):
        n, qo, mo = coordinate_slots(ti, b)
        o = ti[b, I_QOFF]
        ov = ti[b, I_VOFF]
        for k in range(n):
            nu[ov + k] = (Q1[o + k] - Q0[o + k]) / h
        if qo < 0:
            continue
        # d = conj(s0) o s1 = cay(a) = (1 - |a|², 2a)/(1 + |a|²)  =>  a = Im d / (1 + Re d)
        a0, a1, a2, a3 = Q0[qo], Q0[qo + 1], Q0[qo + 2], Q0[qo + 3]
        b0, b1, b2, b3 = Q1[qo], Q1[qo + 1], Q1[qo + 2], Q1[qo + 3]
        d0 = a0 * b0 + a1 * b1 + a2 * b2 + a3 * b3
        d1 = a0 * b1 - a1 * b0 - a2 * b3 + a3 * b2
        d2 = a0 * b2 + a1 * b3 - a2 * b0 - a3 * b1
        d3 = a0 * b3 - a1 * b2 + a2 * b1 - a3 * b0
        if d0 < 0.0:  # a turn of more than 180 degrees: the near root is that of -d
            d0, d1, d2, d3 = -d0, -d1, -d2, -d3
        f = 4.0 / ((1.0 + d0) * h)
        nu[mo] = d1 * f
        nu[mo + 1] = d2 * f
        nu[mo + 2] = d3 * f
