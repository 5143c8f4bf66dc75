"""The Newton solve of one jointed ``energy_momentum`` step: damped, chord-refreshed iterations
with round-off-aware acceptance, joint limits locked as they are reached, and the explicit
start's solve.
"""

import numpy as np
from rtrigid._jit import jit, jit_inline
from rtrigid.backends.buffers import STAT_ITERS, STAT_MAX_ITERS, STAT_SPENT
from rtrigid.backends.tree.kinematics import (
    ACT_GEAR,
    I_KIND,
    I_QOFF,
    I_VOFF,
    PRISMATIC,
    REVOLUTE,
    T_ARM,
    T_FRIC,
    T_HI,
    T_J,
    T_LO,
    T_MASS,
    actuator_force,
    body_rates,
    carve,
    forward_kinematics,
    joint_velocities,
    normalize_coordinates,
)
from rtrigid.backends.tree.layout import limit_arrays, one_coordinate, pass_arrays
from rtrigid.backends import newton
from rtrigid.backends.tree.dynamics import momentum_rates
from rtrigid.backends.tree.friction import has_friction
from rtrigid.backends.tree.limits import limit_impulse
from rtrigid.maths.linalg import solve_inplace
from rtrigid.backends.newton import ACCEPT
from rtrigid.backends.tree.em_workspace import em_carve, jac_carve
from rtrigid.backends.tree.em_residual import (
    body_spin,
    canonical_roots,
    friction_force,
    load_start,
    residual,
    rotor_rates,
    servo_state,
)
from rtrigid.backends.tree.em_newton import (
    actuator_stiffness,
    add_cross,
    newton_matrix,
    tree_factor_inline,
    tree_solve,
    tree_solve_inline,
)
from rtrigid.backends.tree.em_start import choose_start, predict, work_of

TIGHT = 1e-11
STALLS = 2
STALL_THETA = 0.5
# The rule of rtrigid.backends.newton, extended: its ACCEPT, a tighter bound once the residual
# stalls twice, a floor at the residual's round-off, and updates measured on the largest joint
# increment against twice the single bodies' round-off bound (what the chain tests and the
# bench figures were measured with).
UPDATE_ROUNDOFF = 2.0 * newton.UPDATE_ROUNDOFF
FLOOR_MARGIN = 16.0  # the tolerances never go below this many times the residual's round-off
# Levenberg-Marquardt damping of a rejected update (see _solve_step): the first damping, its
# growth per rejection (and shrinking per accepted update), and the most before giving up
DAMP_FIRST = 0.5
DAMP_UP = 4.0
DAMP_MAX = 1e4
CONTRACTION = 1.0  # an update is kept when the next Newton correction is no larger
REFRESH = 1e-5
CHORD = 0.05  # a kept matrix is refreshed when an update shrank by less than this
CHORD_FIRST = 1e-3  # a first update below this fraction of mu keeps the matrix
QUICK = 8  # iterations the cheap start gets before the explicit start is computed
# what an explicit start (predict, choose_start: five articulated-body factorisations and
# three residuals) is charged to the step budget, in Newton iterations: sub-steps that
# converge in a few iterations each are paid mostly in starts (README, "The step budget")
PREDICT_CHARGE = 4
ROUNDS = 6  # rounds of locks of a step with limits (see _solve_with_limits)
FRICTION_ROUNDS = 12  # and of a step with joint friction
ROUNDOFF_BEYOND = 1e-12  # a joint released in a step is not locked again for passing its limit
# by less than this (relative to the limit, at least 1): see _solve_with_limits


@jit
def _factor(ti, work, nq, nv):
    """:func:`_tree_factor` of the Newton matrix in the flat scratch ``work`` (carved here,
    see :func:`residual`; the factorization inlined)."""
    scr = carve(work, ti.shape[0], nq, nv)
    mt, Nm, dc, xt, R0, SL, SR, Cb, ucol, pred, M3, aug, kd = jac_carve(work, ti.shape[0], nq, nv)
    return tree_factor_inline(ti, SL, SR, Cb, scr.IA, scr.U, scr.W, scr.Dinv, scr.I6, aug,
                              kd, dc)


@jit
def _correction(h, ti, work, nq, nv, nlock):
    """dmu <- the Newton correction -(h/2) M^-1 res with the factored matrix (the locked
    joints kept, see :func:`_keep_locked`); False if that fails.  ``work``: the flat scratch
    (carved here, see :func:`residual`; the solve inlined)."""
    passes = pass_arrays(carve(work, ti.shape[0], nq, nv))
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = passes
    lim = limit_arrays(carve(work, ti.shape[0], nq, nv))
    em = em_carve(work, ti.shape[0], nq, nv)
    res, rhs, dmu = em.res, em.rhs, em.dmu
    jx = jac_carve(work, ti.shape[0], nq, nv)
    SL, SR, ucol = jx.SL, jx.SR, jx.ucol
    for j in range(res.shape[0]):
        rhs[j] = -0.5 * h * res[j]
    tree_solve_inline(ti, SL, SR, U, W, Dinv, rhs, pA, acc, ucol, dmu)
    return nlock == 0 or _keep_locked(ti, passes, jx, dmu, nlock, lim)


@jit
def _solve_step(h, max_iter, model, state, ws, rates, stats, drive, nlock, add_work):
    """One EM step of size h from the state in (Qg, x, q, v, L), starting from mu = h rates;
    False on failure.  The first ``nlock`` joints of the limit scratch Lv are locked: their
    increments are Lv[2] and their equations are left out (see :func:`_solve_with_limits`).
    With ``add_work`` the actuators' work over the step is added to ``awork``."""
    gravity, tf, ti, pf, pi, A, forces = model
    Qg, nu, x, q, v, w, L = state
    scr, em, jx = ws
    act, ctrl, awork = drive
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = pass_arrays(scr)
    (x0, v0, L0, x1, v1, L1, u, fw, q0, q1, rot, smid, Q1, mu, dmu, res, rhs, Fs,
     Y, c0, sl, fr) = em
    mt, Nm, dc, xt, R0, SL, SR, Cb, ucol, pred, M3, aug, kd = jx
    nb = ti.shape[0]
    nv = mu.shape[0]
    work = work_of(scr)
    load_start(x, v, L, q, x0, v0, L0, q0, R0)
    for j in range(nv):
        mu[j] = h * rates[j]
    if nlock > 0:  # (the limit scratch is touched only then: a view costs reference counts)
        _locked_increments(mu, scr.Lv, nlock)
    back = scr.nu0  # the last update taken (free during the solve: the predictor's nu_t)
    best = np.inf
    stalls = 0
    update = np.inf
    left = np.inf
    damp = 0.0
    damped = False
    rejected = False  # mu was just put back before an update that did not contract
    prev = np.inf  # the residual at the last iterate kept
    theta = 1.0  # the contraction of the last two updates
    last = np.inf  # the update before the last
    # the matrix may be kept while the iteration contracts fast (see below): on the cheap
    # start's few iterations only, so the solves of hard steps keep plain Newton
    chord = max_iter <= QUICK
    reused = False  # the last update was taken with a matrix factored at an earlier iterate
    done = False
    for it in range(max_iter + 1):
        rnorm, floor = residual(h, model, Qg, mu, x, q, work, act, ctrl)
        if nlock > 0:
            rnorm = _free_rows_norm(res, scr.Lv, nlock, rnorm)
        tight = max(TIGHT, FLOOR_MARGIN * floor)
        accept = max(ACCEPT, FLOOR_MARGIN * floor)
        grew = not np.isfinite(rnorm)  # (then the update left the domain)
        if grew and (it == 0 or rejected):
            return False
        have = False  # dmu holds the correction with the last factored matrix
        size = 1e-300
        for j in range(nv):
            size = max(size, abs(mu[j]))
        if not grew and not rejected:
            if rnorm < 0.5 * best:
                best = rnorm
                stalls = 0
            else:
                stalls += 1
            # (a stall counts only once the updates have stopped contracting fast: a linear
            # convergence, as with springs left out of the matrix, goes on to the floor)
            stalled = stalls >= STALLS and theta > STALL_THETA
            if rnorm == 0.0 or (best < tight and stalled) or (
                    best < accept and stalled and stalls > STALLS) or (
                    rnorm < accept and min(update, left) <= UPDATE_ROUNDOFF * size):
                stats[STAT_ITERS] += it
                stats[STAT_MAX_ITERS] = max(stats[STAT_MAX_ITERS], it)
                done = True
                break
            if it == max_iter:
                return False
            if it > 0 and rnorm > accept and rnorm > prev:
                # the residual grew.  Natural monotonicity (Deuflhard): the correction at the
                # new iterate with the matrix of the last update must be no larger than that
                # update; else the update went too far
                if not _correction(h, ti, work, Qg.shape[0], nv, nlock):
                    return False
                step = 0.0
                for j in range(nv):
                    step = max(step, abs(dmu[j]))
                grew = step > CONTRACTION * update
                have = True
        if grew:
            # back to the iterate before the last update, and an update of the matrix damped
            # in the kinetic-energy metric (Levenberg-Marquardt) at the next iteration
            if damp >= DAMP_MAX:
                return False
            for j in range(nv):
                mu[j] -= back[j]
            damp = DAMP_FIRST if damp == 0.0 else DAMP_UP * damp
            rejected = True
            left = np.inf
            continue
        if it == max_iter:
            return False
        prev = rnorm
        if not rejected and damp > 0.0:
            damp = 0.0 if damp < DAMP_FIRST * DAMP_UP else damp / DAMP_UP
        # chord Newton: the factored matrix is also kept when the iteration already contracts
        # fast (an update below 1/20 of the one before, or a first update below 1e-3 of mu),
        # until a rejected or damped update or a slow contraction with the kept matrix
        fresh = it == 0 or rejected or damp > 0.0 or damped
        chord = chord and not (fresh and it > 0) and not (reused and theta > CHORD)
        reused = not fresh and (update <= REFRESH * size or chord and (
            theta <= CHORD if last < np.inf else update <= CHORD_FIRST * size))
        if not reused:
            newton_matrix(h, tf, ti, q0, mu, work, Qg.shape[0])
            actuator_stiffness(h, tf, ti, act, ctrl, Qg, mu, c0, (R0, R, u), kd, Cb)
            if damp > 0.0:
                _add_metric(tf, ti, damp, x1, R, IA)
            damped = damp > 0.0
            if not _factor(ti, work, Qg.shape[0], nv):
                return False
            have = False
        if not have:
            if not _correction(h, ti, work, Qg.shape[0], nv, nlock):
                return False
        rejected = False
        last = update
        update = 0.0
        for j in range(nv):
            mu[j] += dmu[j]
            back[j] = dmu[j]
            update = max(update, abs(dmu[j]))
        # error left after this update, estimated from the contraction of the last two
        theta = update / last if last < np.inf else 1.0
        left = theta / (1.0 - theta) * update if theta < 1.0 else np.inf
    if not done:
        return False
    # accept: coordinates, poses, momenta; nu holds the mean rates mu / h of the step, on the
    # near root of every Cayley increment (independent of the branch Newton converged to)
    canonical_roots(ti, mu, Q1)
    if add_work:
        add_actuator_work(h, act, ctrl, Qg, mu, awork)
    for i in range(Q1.shape[0]):
        Qg[i] = Q1[i]
    normalize_coordinates(ti, Qg)
    forward_kinematics(tf, ti, Qg, x, q, R, rj)
    for b in range(nb):
        for k in range(3):
            v[b, k] = v1[b, k]
            L[b, k] = L1[b, k]
            w[b, k] = body_spin(L1[b, k], tf[b, T_J + k])
    for j in range(nv):
        nu[j] = mu[j] / h
    rotor_rates(h, tf, ti, mu, c0, nu)
    return True


@jit
def _add_metric(tf, ti, damp, x1, R1, IA):
    """IA[b] += damp times body b's spatial inertia at t_{n+1} about the origin (the blocks of
    B, in the same motion (theta, v_O) and wrench coordinates): the Newton matrix
    SL^T B SR + ... becomes ~ (1 + damp) times the joint-space mass matrix plus the step's
    gyroscopic and joint-point terms, whose updates are shorter and turned towards
    M^-1 r (the kinetic-energy metric's steepest descent)."""
    for b in range(ti.shape[0]):
        m = damp * tf[b, T_MASS]
        xb = (x1[b, 0], x1[b, 1], x1[b, 2])
        xx = xb[0] * xb[0] + xb[1] * xb[1] + xb[2] * xb[2]
        Ib = IA[b]
        for i in range(3):
            for j in range(3):
                s = 0.0
                for k in range(3):
                    s += R1[b, i, k] * tf[b, T_J + k] * R1[b, j, k]
                Ib[i, j] += damp * s - m * xb[i] * xb[j]
                Ib[3 + i, 3 + j] += m if i == j else 0.0
            Ib[i, i] += m * xx
        add_cross(Ib, 0, 3, m, xb)  # m [x]x against v_O
        add_cross(Ib, 3, 0, -m, xb)  # and -m [x]x against theta in the force rows


@jit
def add_actuator_work(h, act, ctrl, Q0, mu, awork):
    """Add each actuator's work over a step from Q0 with increments mu (exact: the force at
    the mean coordinate and rate times the increment)."""
    for a in range(act.shape[0]):
        ov, c, cdot = servo_state(h, act, a, Q0, mu)
        awork[a] += act[a, ACT_GEAR] * actuator_force(act, a, ctrl, c, cdot) * mu[ov]


@jit
def _locked_increments(mu, Lv, nlock):
    """The locked joints' increments (Lv[2]) into mu."""
    for a in range(nlock):
        mu[int(Lv[0, a])] = Lv[2, a]


@jit
def _free_rows_norm(res, Lv, nlock, rnorm):
    """The residual norm ``rnorm`` (of every row) rescaled to the rows of unlocked joints."""
    full = 0.0
    for j in range(res.shape[0]):
        full = max(full, abs(res[j]))
    if full == 0.0:
        return rnorm
    free = 0.0
    for j in range(res.shape[0]):
        locked = False
        for a in range(nlock):
            locked = locked or int(Lv[0, a]) == j
        if not locked:
            free = max(free, abs(res[j]))
    return rnorm * free / full


@jit
def _keep_locked(ti, passes, jx, dmu, nlock, limits):
    """Make the Newton update ``dmu`` of the full system that of the system without the
    locked joints' rows and columns: dmu - Z c, Z the full inverse's columns of the locked
    joints, c such that the locked increments stay (dmu - Z c = 0 there).  ``passes``: the
    factored recursion's arrays (its ``tau`` is scratch here), ``jx``: the Newton matrix's
    (``jac_carve``), ``limits``: (Lc, La, Lv, Ld) of ``limit_arrays``, Ld scratch."""
    U, W, Dinv, pA, acc, unit = passes.U, passes.W, passes.Dinv, passes.pA, passes.acc, passes.tau
    SL, SR, ucol = jx.SL, jx.SR, jx.ucol
    Lc, La, Lv, rhs = limits
    nv = dmu.shape[0]
    for a in range(nlock):
        for i in range(nv):
            unit[i] = 0.0
        unit[int(Lv[0, a])] = 1.0
        tree_solve(ti, SL, SR, U, W, Dinv, unit, pA, acc, ucol, Lc[a])
    for r in range(nlock):
        for c in range(nlock):
            La[r, c] = Lc[c, int(Lv[0, r])]
        rhs[r] = dmu[int(Lv[0, r])]
    if not solve_inplace(La, rhs, nlock):  # (La is not symmetric: partial pivoting)
        return False
    for a in range(nlock):
        for i in range(nv):
            dmu[i] -= rhs[a] * Lc[a, i]
    for a in range(nlock):
        dmu[int(Lv[0, a])] = 0.0
    return True


@jit
def _locked(Lv, nlock, ov):
    """Whether rate ov is among the first ``nlock`` locks of Lv."""
    for a in range(nlock):
        if int(Lv[0, a]) == ov:
            return True
    return False


@jit
def _hold(Lv, nlock, ov, sl):
    """Lock rate ov as held by its friction (increment 0; Lv[1] = 0 marks such a lock);
    returns the new number of locks."""
    Lv[0, nlock] = ov
    Lv[1, nlock] = 0.0
    Lv[2, nlock] = 0.0
    Lv[3, nlock] = 0.0
    sl[ov] = 0.0
    return nlock + 1


@jit
def friction_locks(tf, ti, rates, sl, Lv):
    """The joints with friction at a step's start (``rates``: the rates there): one at rest
    is held (locked, see :func:`_solve_with_limits`), one that moves slides the way it moves
    (sl = its sign).  Returns the number held, the first locks of Lv."""
    nlock = 0
    for b in range(ti.shape[0]):
        kind = ti[b, I_KIND]
        if (kind == REVOLUTE or kind == PRISMATIC) and tf[b, T_FRIC] > 0.0:
            ov = ti[b, I_VOFF]
            if rates[ov] == 0.0:
                nlock = _hold(Lv, nlock, ov, sl)
            else:
                sl[ov] = 1.0 if rates[ov] > 0.0 else -1.0
    return nlock


@jit
def limit_locks(tf, ti, Qg, rates, Lv, nlock):
    """Lock every joint that starts a step at rest on one of its limits (``Qg``, ``rates``:
    the coordinates and rates there; a joint that an earlier step stopped on its limit), as a
    step that ends beyond it would (increment 0): a knee resting on its stop under a standing
    robot's weight then takes one solve a step, not one to find the lock and another with it.
    A lock that pulls comes off after the first solve (:func:`_released`).  Returns the new
    number of locks, ``nlock`` before (friction's holds, which a joint keeps)."""
    for b in range(ti.shape[0]):
        o, ov = one_coordinate(ti, b)
        if o < 0:
            continue
        at_lo, at_hi = Qg[o] == tf[b, T_LO], Qg[o] == tf[b, T_HI]
        if rates[ov] != 0.0 or not (at_lo or at_hi) or _locked(Lv, nlock, ov):
            continue
        Lv[0, nlock] = ov
        Lv[1, nlock] = 1.0 if at_lo else -1.0
        Lv[2, nlock] = 0.0
        Lv[3, nlock] = 0.0
        nlock += 1
    return nlock


@jit
def _listed(Lv, cap, nrel, ov):
    """Where rate ov is on the list of the limits' locks released in this step
    (Lv[0, cap - nrel:], see :func:`_solve_with_limits`): r with Lv[0, cap - r] = ov, or 0."""
    for r in range(1, nrel + 1):
        if int(Lv[0, cap - r]) == ov:
            return r
    return 0


@jit
def _released(h, tf, ti, res, sl, Lv, a):
    """Whether lock a comes off after a solve (:func:`_solve_with_limits`): a limit's when it
    pulls (its torque res/h against the limit's side); a friction hold's when its torque
    passes the bound c -- the joint then slides off against it (sl = -sign(res))."""
    j = int(Lv[0, a])
    if Lv[1, a] != 0.0:
        return Lv[1, a] * res[j] * h < 0.0
    if abs(res[j]) > h * _friction_bound(tf, ti, j):
        sl[j] = -1.0 if res[j] > 0.0 else 1.0
        return True
    return False


@jit
def _turned(tf, ti, mu, sl, Lv, nlock):
    """Hold every sliding joint whose increment went against its sliding direction: it
    turned within the step.  Returns (the number of locks, whether any was added)."""
    changed = False
    for b in range(ti.shape[0]):
        ov = ti[b, I_VOFF]
        if sl[ov] * mu[ov] < 0.0 and tf[b, T_FRIC] > 0.0 and not _locked(Lv, nlock, ov):
            nlock = _hold(Lv, nlock, ov, sl)
            changed = True
    return nlock, changed


@jit
def _friction_bound(tf, ti, ov):
    """The friction bound c of the joint whose rate is ov."""
    for b in range(ti.shape[0]):
        kind = ti[b, I_KIND]
        if ti[b, I_VOFF] == ov and (kind == REVOLUTE or kind == PRISMATIC):
            return tf[b, T_FRIC]
    return 0.0


@jit
def slide_work(tf, ti, sl, mu):
    """The sliding joints' friction work over increments mu: sum of -c sl mu."""
    work = 0.0
    for b in range(ti.shape[0]):
        if tf[b, T_FRIC] != 0.0:
            work += friction_force(tf, ti, b, sl) * mu[ti[b, I_VOFF]]
    return work


@jit
def _solve_with_limits(h, max_iter, model, state, ws, rates, stats, drive, add_work):
    """:func:`_solve_step` with the joint limits (revolute and prismatic joints; see the
    README); the actuators' work over the step taken is added to ``awork`` with ``add_work``.

    The step is solved as if there were no limits; a joint that ends it beyond a limit is
    locked -- its increment fixed so that it lands on the limit, its equation left out, which
    is the exact step with an extra torque lambda on that joint, whose discrete work is
    lambda (theta1 - theta0) (as a held torque's: :func:`_joint_force_loads`) -- and the step
    is solved again; a locked joint whose lambda would pull (the sign of its equation's
    residual times h) is released; a joint released and then past its limit again by
    round-off only (ROUNDOFF_BEYOND) is left free (at rest on its stop under a load, both
    decisions rest on round-off, and the rounds would cycle between them).  A joint that
    starts the step at rest on a limit starts it locked.  At most six rounds, which share the
    ``max_iter`` iterations (so a solve's cap, and the step budget, hold with limits too).
    Then the locked joints' rates at t_{n+1} (from the momenta) are set to 0 by a joint-space
    impulse, which only takes energy out (the limits are inelastic: the registry refuses a
    restitution for this scheme).  The actuators' work is added once, for the step finally
    taken.

    Joint friction (Coulomb's law, bound c) by the same locks: a joint held by its friction
    is locked with increment 0 and released, to slide against the torque that held it, when
    that torque (its equation's residual / h) passes c; a sliding joint takes the constant
    force -c sign (see :func:`.em_residual.friction_force`, exact work -c |c1 - c0|) and is
    held when its increment goes against it (:func:`friction_locks`, :func:`_released`,
    :func:`_turned`; FRICTION_ROUNDS rounds).  A held joint's rate at t_{n+1} is set to 0
    by the end impulse too, whose energy it takes out (sum of the impulses times the rates
    before them, / 2, exact) counts as the friction's work, with the sliding joints'
    -c |c1 - c0|: em.fr[0], added to the friction's account (awork[na]) with ``add_work``.
    """
    gravity, tf, ti, pf, pi, A, forces = model
    Qg, nu, x, q, v, w, L = state
    scr, em, jx = ws
    act, ctrl, awork = drive
    start, guess, Lv = scr.Q0, scr.nus, scr.Lv
    x0, v0, L0, q0, res = em.x0, em.v0, em.L0, em.q0, em.res
    nb = ti.shape[0]
    nv = nu.shape[0]
    sl = em.sl
    made = stats[STAT_ITERS]
    for i in range(Qg.shape[0]):
        start[i] = Qg[i]
    fric = has_friction(tf, ti)
    rounds = FRICTION_ROUNDS if fric else ROUNDS
    nlock = friction_locks(tf, ti, em.c0, sl, Lv) if fric else 0
    nlock = limit_locks(tf, ti, start, em.c0, Lv, nlock)
    if not _solve_step(h, max_iter, model, state, ws, rates, stats, drive, nlock, False):
        return False
    nrel = 0  # the limits' locks released in this step, their rates in Lv[0]'s last columns
    cap = Lv.shape[1]
    for _ in range(rounds):
        changed = False
        a = 0
        while a < nlock:  # release a lock that pulls, or a friction hold past its bound
            if _released(h, tf, ti, res, sl, Lv, a):
                j, of_limit = Lv[0, a], Lv[1, a] != 0.0
                nlock -= 1
                for r in range(4):
                    Lv[r, a] = Lv[r, nlock]
                if of_limit:  # (after the locks: nlock + nrel <= the joints, Lv's columns)
                    nrel += 1
                    Lv[0, cap - nrel] = j
                changed = True
            else:
                a += 1
        if fric:
            nlock, turned = _turned(tf, ti, em.mu, sl, Lv, nlock)
            changed = changed or turned
        for b in range(nb):
            o, ov = one_coordinate(ti, b)
            if o < 0:
                continue
            sign = 1.0 if Qg[o] < tf[b, T_LO] else (-1.0 if Qg[o] > tf[b, T_HI] else 0.0)
            if sign == 0.0:
                continue
            if _locked(Lv, nlock, ov):
                continue
            limit = tf[b, T_LO] if sign > 0.0 else tf[b, T_HI]
            r = _listed(Lv, cap, nrel, ov)
            if r > 0:
                if abs(Qg[o] - limit) <= ROUNDOFF_BEYOND * max(1.0, abs(limit)):
                    # released in this step and past its limit by round-off only: both
                    # decisions rest on round-off (a knee on its stop under a standing
                    # robot's weight), and the rounds would cycle between them; it stays free
                    continue
                Lv[0, cap - r] = Lv[0, cap - nrel]  # off the list (locks and list: disjoint)
                nrel -= 1
            Lv[0, nlock] = ov
            Lv[1, nlock] = sign
            Lv[2, nlock] = limit - start[o]
            nlock += 1
            changed = True
        if not changed:
            break
        # again from the start of the step, from the last solution's rates
        for i in range(Qg.shape[0]):
            Qg[i] = start[i]
        for j in range(nv):
            guess[j] = nu[j]
        for b in range(nb):
            for k in range(3):
                x[b, k] = x0[b, k]
                v[b, k] = v0[b, k]
                L[b, k] = L0[b, k]
                w[b, k] = body_spin(L0[b, k], tf[b, T_J + k])
            for k in range(4):
                q[b, k] = q0[b, k]
        left = max_iter - (stats[STAT_ITERS] - made)
        if left < 1 or not _solve_step(h, left, model, state, ws, guess, stats, drive, nlock,
                                       False):
            return False
    fr = em.fr
    fr[0] = slide_work(tf, ti, sl, em.mu) if fric else 0.0
    if nlock > 0 and not _lock_impulse(model, state, ws, nlock):
        return False
    if add_work:
        add_actuator_work(h, act, ctrl, start, em.mu, awork)  # of the step taken, once
        awork[act.shape[0]] += fr[0]  # (the joint friction's account; 0 without friction)
    return True


@jit
def _lock_impulse(model, state, ws, nlock):
    """The end of a step with ``nlock`` locks (:func:`_solve_with_limits`): a joint locked on
    a limit is put exactly on it, and every locked joint's rate at t_{n+1} set to 0 by a
    joint-space impulse; the energy that takes out at the joints held by friction is added
    to em.fr[0].  False if singular."""
    gravity, tf, ti, pf, pi, A, forces = model
    Qg, nu, x, q, v, w, L = state
    scr, em, jx = ws
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = pass_arrays(scr)
    at_t = scr.nudot
    Lc, La, Lv, Ld = limit_arrays(scr)
    x1, u = em.x1, em.u
    nb = ti.shape[0]
    for a in range(nlock):  # exactly on the limit (start + increment may miss it by an ulp)
        j = int(Lv[0, a])
        if Lv[1, a] == 0.0:
            continue  # (held by friction: its increment is 0)
        for b in range(nb):
            if ti[b, I_VOFF] == j and (ti[b, I_KIND] == REVOLUTE or ti[b, I_KIND] == PRISMATIC):
                Qg[ti[b, I_QOFF]] = tf[b, T_LO] if Lv[1, a] > 0.0 else tf[b, T_HI]
    # the rates at t_{n+1} of the momenta, then the impulse on the locked joints
    if not momentum_rates(tf, ti, Qg, v, L, nu, x, q, pass_arrays(scr), at_t, x1, u):
        return False
    for a in range(nlock):
        Lv[2, a] = 0.0
    if not limit_impulse(ti, pass_arrays(scr), limit_arrays(scr), nlock, at_t):
        return False
    fr = em.fr
    for a in range(nlock):  # (the kinetic energy's change is sum of lambda (nu0 + nu1) / 2)
        if Lv[1, a] == 0.0:
            fr[0] += 0.5 * Lv[3, a] * at_t[int(Lv[0, a])]
    joint_velocities(ti, G, Ld, V, cb)
    body_rates(ti, R, G, V, x1, u)
    for b in range(nb):
        for k in range(3):
            v[b, k] += x1[b, k]
            L[b, k] += tf[b, T_J + k] * u[b, k]
            w[b, k] = body_spin(L[b, k], tf[b, T_J + k])
        if tf[b, T_ARM] != 0.0:  # and the rotors' momenta (momentum_rates took them in)
            nu[ti[b, I_VOFF]] += Ld[ti[b, I_VOFF]]
    return True


@jit_inline
def hold_rotors(state, ws):
    """The rates at the start of a step (the armatures' rotor rates among them) into its
    scratch, where its residual reads them (:func:`.em_residual.joint_spring_force`)."""
    nu, c0 = state.nu, ws.em.c0
    for j in range(nu.shape[0]):
        c0[j] = nu[j]


@jit_inline
def solve(h, max_iter, end, limited, model, state, ws, pred, stats, drive, add_work=True):
    """One step of size h from the start ``pred`` (with the limits if the tree has any); the
    actuators' work is added to ``awork`` with ``add_work``.

    At most ``max_iter`` iterations, and no more than the step budget leaves: the iterations
    handed out (stats[STAT_SPENT]) never pass ``end``.  A converged solve is charged the
    iterations it made, a failed one all it was handed (what it made, at most).  Inlined
    into its callers: a call would copy its ~60 arrays once more per solve."""
    cap = min(max_iter, end - stats[STAT_SPENT])
    if cap < 1:
        return False
    hold_rotors(state, ws)
    made = stats[STAT_ITERS]
    if limited:
        ok = _solve_with_limits(h, cap, model, state, ws, pred, stats, drive, add_work)
    else:
        ok = _solve_step(h, cap, model, state, ws, pred, stats, drive, 0, add_work)
    stats[STAT_SPENT] += stats[STAT_ITERS] - made if ok else cap
    return ok


@jit
def explicit_start(h, end, model, state, ws, stats, drive, pred, change, path):
    """The explicit start of a step of size h (:func:`predict`, :func:`choose_start`) in
    ``pred``; path[0] <- the rates at t_n, path[3] <- nu_t - h nudot / 2, the point at s = -1
    of the tangent at t_n of the path of the step's mean rates in s = h / dt (see
    :func:`follow`).  False if there is none or the step budget leaves too little; the start
    is charged PREDICT_CHARGE iterations, and made only if the budget leaves more."""
    scr, em, jx = ws
    if end - stats[STAT_SPENT] <= PREDICT_CHARGE:
        return False
    stats[STAT_SPENT] += PREDICT_CHARGE
    hold_rotors(state, ws)  # (choose_start evaluates the residual)
    if not predict(h, model, state, ws, drive, pred, change):
        return False
    nu_t, back = path[0], path[3]
    for j in range(nu_t.shape[0]):
        nu_t[j] = scr.nu0[j]
        back[j] = nu_t[j] - 0.5 * change[j]
    choose_start(h, model, state, ws, drive, pred, change)
    return True


@jit
def explicit_solve(h, max_iter, end, limited, model, state, ws, stats, drive, pred, change, path):
    """One step of size h from the explicit start (:func:`explicit_start`).  False (state
    unchanged) if there is none, the step budget is spent or the solve fails."""
    return explicit_start(h, end, model, state, ws, stats, drive, pred, change, path) and solve(
        h, max_iter, end, limited, model, state, ws, pred, stats, drive)
