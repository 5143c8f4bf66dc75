"""What the jointed ``energy_momentum`` step does when its first solves fail: follow the path of
the solution in h from h = 0, then sub-steps, and, when a step budget is spent, the budget
outcome (a few RK4 steps projected back to the step's energy).
"""

import numpy as np
from rtrigid._jit import jit, jit_inline
from rtrigid.backends.buffers import STAT_BUDGET, STAT_ITERS, STAT_SPENT, all_finite
from rtrigid.backends.tree.layout import pass_arrays
from rtrigid.backends.tree.kinematics import (
    I_VOFF,
    T_ARM,
    T_J,
    T_MASS,
    normalize_coordinates,
    refresh_bodies,
    rot_vec,
)
from rtrigid.backends.tree.dynamics import momentum_rates
from rtrigid.backends.tree.limits import clamp_limits
from rtrigid.backends.tree.em_workspace import core_size
from rtrigid.backends.tree.em_residual import keep_rotor_rates, load_start, residual
from rtrigid.backends.tree.em_start import mean_rates, rk4_step, work_of
from rtrigid.backends.tree.em_solve import PREDICT_CHARGE, add_actuator_work, slide_work, solve

# path-following of a step whose explicit start failed (see follow): the most solves,
# iterations per solve, the first step in s = h / dt and the smallest, and the iterations
# below (above) which the step in s doubles (halves)
FOLLOW_SOLVES = 64
FOLLOW_ITER = 16
FOLLOW_FIRST = 0.25
FOLLOW_MIN = 1.0 / 4096.0
FOLLOW_EASY = 4
FOLLOW_HARD = 7
BUDGET_RK4 = 4  # RK4 steps the budget outcome takes over a step (see _budget_outcome)


@jit
def _whole_step_work(dt, act, ctrl, S, S_prev, nq, mu, awork, fr):
    """A whole step of size dt kept after tries that added no work (:func:`follow`):
    ``awork`` (the accounts at the end of S: the actuators', then the joint friction's) <-
    the work at the step's start plus the step's, as if the step had been taken directly
    (mu its increments; ``fr``: the joint friction's work over it)."""
    na = awork.shape[0]
    for a in range(na):
        awork[a] = S_prev[S.shape[0] - na + a]
    add_actuator_work(dt, act, ctrl, S_prev[:nq], mu, awork)
    awork[act.shape[0]] += fr[0]


@jit
def follow(dt, max_iter, end, limited, model, S, S_prev, state, ws, stats, drive, path):
    """The whole step of size dt from S_prev by following the path of its solution in h from
    h = 0 (path-following continuation); True: it converged and is in S, False: it did not
    and S is S_prev.

    The path is that of the step's mean rates nubar(s) = mu(s dt) / (s dt), s in [0, 1], from
    nubar(0) = the rates at t_n with the tangent dt nudot / 2 there (both from the explicit
    start, :func:`explicit_start`, in path[0] and path[3]).  Each point is a solve of size
    s dt from the line through the last two points, with at most min(FOLLOW_ITER,
    ``max_iter``) iterations; the step in s starts at FOLLOW_FIRST, doubles after a point that
    took at most FOLLOW_EASY iterations and halves after one that took more than FOLLOW_HARD
    or failed; at most FOLLOW_SOLVES solves, and none once the step in s is below FOLLOW_MIN
    or the budget is spent.  The kept step is one energy-momentum step of size dt, accepted by
    the same test as any other; the tries add no actuator work (the kept one adds the whole
    step's).
    """
    gravity, tf, ti, pf, pi, A, forces = model
    Qg, nu, x, q, v, w, L = state
    scr, em, jx = ws
    act, ctrl, awork = drive
    nu_t, start, lo, lo2 = path[0], path[1], path[2], path[3]
    nq = Qg.shape[0]
    nv = nu.shape[0]
    core = core_size(ti.shape[0], nq, nv)
    for j in range(nv):
        lo[j] = nu_t[j]
    s_lo, s_lo2, sigma = 0.0, -1.0, FOLLOW_FIRST
    for _ in range(FOLLOW_SOLVES):
        if stats[STAT_SPENT] >= end or sigma < FOLLOW_MIN:
            break
        target = min(1.0, s_lo + sigma)
        f = (target - s_lo) / (s_lo - s_lo2)
        for j in range(nv):
            start[j] = lo[j] + f * (lo[j] - lo2[j])
        for i in range(core):
            S[i] = S_prev[i]
        made = stats[STAT_ITERS]
        ok = solve(target * dt, min(FOLLOW_ITER, max_iter), end, limited, model, state, ws,
                   start, stats, drive, False) and all_finite(S)
        if ok and target == 1.0:
            _whole_step_work(dt, act, ctrl, S, S_prev, nq, em.mu, awork, em.fr)
            return True
        if ok:
            for j in range(nv):
                lo2[j] = lo[j]
                lo[j] = nu[j]
            s_lo2, s_lo = s_lo, target
            made = stats[STAT_ITERS] - made
            if made <= FOLLOW_EASY:
                sigma *= 2.0
            elif made > FOLLOW_HARD:
                sigma *= 0.5
        else:
            sigma *= 0.5
    for i in range(core):
        S[i] = S_prev[i]
    return False


@jit_inline
def spent(stats, end):
    """The step budget is spent: what it leaves pays for no explicit start and a solve."""
    return end - stats[STAT_SPENT] <= PREDICT_CHARGE


@jit
def out_of_budget(dt, model, limited, S, S_prev, Q_start, state, ws, stats, drive):
    """A step that ran out of its budget (``step_budget``): from its start (S_prev, whose
    coordinates are Q_start) it takes the budget outcome (:func:`_budget_outcome`), or, if
    that has none, stops at its start: every rate and momentum zero, the configuration kept
    (the energy can only drop).  Counted in stats[STAT_BUDGET]."""
    Qg, nu, x, q, v, w, L = state
    for i in range(S.shape[0]):
        S[i] = S_prev[i]
    if not (_budget_outcome(dt, model, limited, Q_start, state, ws, drive) and all_finite(S)):
        for i in range(S.shape[0]):
            S[i] = S_prev[i]
        for j in range(nu.shape[0]):
            nu[j] = 0.0
        for b in range(v.shape[0]):
            for k in range(3):
                v[b, k] = 0.0
                w[b, k] = 0.0
                L[b, k] = 0.0
    stats[STAT_BUDGET] += 1


@jit
def _budget_outcome(dt, model, limited, Q_start, state, ws, drive):
    """The budget outcome of a step from the state at its start (in the state arrays; its
    coordinates also in Q_start): the explicit dynamics' motion over the step, its kinetic
    energy capped so that the energy does not grow by more than the loads' work.  False (the
    state arrays then undefined) if the explicit steps meet a singular inertia or a
    non-finite value, or if no kinetic energy meets the cap.

    The motion: BUDGET_RK4 RK4 steps of dt / BUDGET_RK4 (``nullspace_rk4``'s steps, every
    load acting) from the rates at t_n, coordinates (Q1) and rates (nu1) at t_{n+1}; a
    limited joint beyond its limit is put on it at rest.  The rates at t_n are the bodies'
    momenta projected on the joints (``momentum_rates``), scaled to the momenta's kinetic
    energy: the projection drops the part of the momenta that the mean-rate state leaves off
    the joints, up to ~6 % of the kinetic energy on hard steps (measured on the lively
    20-link chain at 1/60), which the outcome would otherwise lose.  Its increments mu (from Q_start to
    Q1, :func:`mean_rates`) give the step as this scheme's: the configuration is that of mu
    (Q1 to round-off), nu its mean rates mu / dt, the momenta those of nu1 there.

    The loads' work: W = sum over bodies of (x1 - x0).F + b.M with F, M every load on the
    body as :func:`residual` takes them at mu (gravity, springs, applied forces and torques,
    held joint forces and actuators, at their mean arms) and b = 2 R0 w the body's spatial
    Cayley vector: by the identity of the module docstring, the change of kinetic energy an
    energy-momentum step with these increments would have.  Gravity's and the springs' part
    is minus the change of their potential energy exactly (discrete gradients), so the cap
    T1 <= T0 + W is: energy(t_{n+1}) <= energy(t_n) + the work of the other loads over the
    step by this scheme's rule -- a constant force's F.(x1 - x0), a constant torque's M.b
    (b = 2 tan(phi/2) n for a turn phi about n: the exact work phi n.M to O(phi^3)), a
    revolute or slide joint's held force f (s1 - s0), a spherical joint's held torque
    tau.Rbar^T (b_c - b_p), an actuator's g f (c1 - c0) at the mean coordinate and rate,
    which is added to its work as a converged step adds it, and a joint's friction sliding
    against the way its increment went, -c |c1 - c0| (added to the friction's account; the
    RK4 motion leaves it out).  The armatures' forces are left
    out of W: their work is minus the change of the rotors' energy a r²/2, which T0 and T1
    hold.  When T1 exceeds the cap, the momenta are scaled by
    sqrt(cap / T1); T0 + W < 0 (the explicit motion climbs higher than the energy allows) has
    no outcome.
    """
    gravity, tf, ti, pf, pi, A, forces = model
    Qg, nu, x, q, v, w, L = state
    scr, em, jx = ws
    act, ctrl, awork = drive
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = pass_arrays(scr)
    Q0, nu0, Lv = scr.Q0, scr.nu0, scr.Lv
    x0, v0, L0, x1, v1 = em.x0, em.v0, em.L0, em.x1, em.v1
    u, fw, q0, q1 = em.u, em.fw, em.q0, em.q1
    mu, Y = em.mu, em.Y
    R0 = jx.R0
    nb = ti.shape[0]
    nv = nu.shape[0]
    nq = Qg.shape[0]
    load_start(x, v, L, q, x0, v0, L0, q0, R0)
    t0 = _kinetic(tf, v0, L0) + _rotor_kinetic(tf, ti, nu)
    c0 = em.c0  # (written through this name: written as em.c0[j], the writes were lost)
    for j in range(nv):
        c0[j] = nu[j]  # the armatures' rotor rates at t_n, as the residual takes them
    ok = momentum_rates(tf, ti, Qg, v, L, nu, x1, q1, pass_arrays(scr), nu, v1, u)
    # the momenta's projection on the joints drops the part that the mean-rate state leaves
    # off them (O(h^2), up to ~6 % of the kinetic energy on the hard steps of the lively
    # chains): the rates are scaled back to the momenta's kinetic energy
    tp = 0.0
    for b in range(nb):
        for k in range(3):
            tp += tf[b, T_MASS] * v1[b, k] * v1[b, k] + tf[b, T_J + k] * u[b, k] * u[b, k]
    tp += 2.0 * _rotor_kinetic(tf, ti, nu)
    if 0.0 < 0.5 * tp < t0:
        f = np.sqrt(t0 / (0.5 * tp))
        for j in range(nv):
            nu[j] *= f
    h = dt / BUDGET_RK4
    for k in range(BUDGET_RK4):
        if not ok:
            return False
        for i in range(nq):
            Q0[i] = Qg[i]
        for j in range(nv):
            nu0[j] = nu[j]
        ok = rk4_step(h, k == 0, model, Q0, nu0, Qg, nu, ws, drive, scr.knu[0])
        normalize_coordinates(ti, Qg)
        ok = ok and all_finite(Qg) and all_finite(nu)
    if not ok:
        return False
    if limited:
        for a in range(clamp_limits(tf, ti, Qg, nu, Lv)):
            nu[int(Lv[0, a])] = 0.0
    mean_rates(ti, Q_start, Qg, dt, mu)
    for j in range(nv):
        mu[j] *= dt
    sl = em.sl  # the joints with friction slide the way they moved (their work is in W)
    for j in range(nv):
        sl[j] = 1.0 if mu[j] > 0.0 else (-1.0 if mu[j] < 0.0 else 0.0)
    residual(dt, model, Q_start, mu, x, q, work_of(scr), act, ctrl)
    work = 0.0
    for b in range(nb):
        bw = rot_vec(R0[b], u[b, 0], u[b, 1], u[b, 2])
        for k in range(3):
            work += (x1[b, k] - x0[b, k]) * fw[b, k] + 2.0 * bw[k] * Y[b, k]
    work -= _rotor_work(dt, tf, ti, mu, c0)  # internal: the rotors' energy is in t0 and t1
    cap = t0 + work
    if not (cap >= 0.0 and np.isfinite(cap)):
        return False
    # the configuration of mu (the energy-momentum step's convention), the momenta of nu1
    for i in range(nq):
        Qg[i] = em.Q1[i]
    normalize_coordinates(ti, Qg)
    refresh_bodies(tf, ti, state, R, rj, G, V, cb)
    t1 = _kinetic(tf, v, L) + _rotor_kinetic(tf, ti, nu)
    f = 1.0
    if t1 > cap:
        f = np.sqrt(cap / t1)
        for b in range(nb):
            for k in range(3):
                v[b, k] *= f
                w[b, k] *= f
                L[b, k] *= f
    for j in range(nv):
        c0[j] = f * nu[j]
        nu[j] = mu[j] / dt
    keep_rotor_rates(tf, ti, c0, nu)
    add_actuator_work(dt, act, ctrl, Q_start, mu, awork)
    awork[act.shape[0]] += slide_work(tf, ti, sl, mu)  # (the joint friction's account)
    return True


@jit_inline
def _rotor_kinetic(tf, ti, nu):
    """The armatures' kinetic energy a r²/2 over the joints that have one (rates r in nu)."""
    t = 0.0
    for b in range(ti.shape[0]):
        if tf[b, T_ARM] != 0.0:
            t += 0.5 * tf[b, T_ARM] * nu[ti[b, I_VOFF]] ** 2
    return t


@jit_inline
def _rotor_work(h, tf, ti, mu, rotor):
    """The work over increments mu of the armatures' forces in the residual, with rotor rates
    ``rotor`` at the step's start (:func:`.em_residual.joint_spring_force`)."""
    work = 0.0
    for b in range(ti.shape[0]):
        a = tf[b, T_ARM]
        if a != 0.0:
            ov = ti[b, I_VOFF]
            work -= 2.0 * a * (mu[ov] / h - rotor[ov]) / h * mu[ov]
    return work


@jit_inline
def _kinetic(tf, v, L):
    """The kinetic energy of the momenta: m |v|²/2 + L.J^-1 L/2 per body (L in body axes; a
    massless link's are 0)."""
    t = 0.0
    for b in range(v.shape[0]):
        if tf[b, T_MASS] == 0.0:
            continue
        for k in range(3):
            t += tf[b, T_MASS] * v[b, k] * v[b, k] + L[b, k] * L[b, k] / tf[b, T_J + k]
    return 0.5 * t
