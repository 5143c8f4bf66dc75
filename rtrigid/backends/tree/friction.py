"""Joint Coulomb friction (``Model.add_joint(friction=...)``, MuJoCo's ``frictionloss``).

A revolute or prismatic joint with friction bound c takes a torque (force) f with |f| <= c:
f = -c sign(c_dot) while it slides, and whatever |f| <= c holds it still while it sticks.
Among several such joints of one tree the torques are coupled through the joint-space
inertia K (and, under ``semi_implicit_euler``, its implicit dampers): with the free response
b of the joints' rates (or accelerations) and A = (K⁻¹)_SS on those joints, the torques are
the solution of the box-constrained problem

    minimize 1/2 fᵀ A f + bᵀ f   subject to |f_a| <= c_a,

whose optimality conditions are exactly Coulomb's law (maximal dissipation): a joint whose
torque is inside its bound ends with (A f + b)_a = 0 -- it sticks -- and one on its bound
moves against it.  :func:`box_solve` solves it by projected Gauss-Seidel, then solves the
sticking joints' equations exactly, so a joint that sticks stays where it is to the bit.

How the schemes use it:

- ``semi_implicit_euler`` at velocity level, as MuJoCo's: b = the rates after the free
  update, bounds c h; the rates then advance the coordinates, so a stuck joint does not move
  (:func:`velocity_friction`).
- ``nullspace_rk4`` at acceleration level.  At a step's start a joint with friction slow
  enough for its friction to stop within the step (a nudge from a contact, the end of a
  swing) is stopped by a joint-space impulse (:func:`prestop`).  Over the step a sliding
  joint gets the constant torque -c sign(c_dot) (:func:`sliding_torques`), and the joints at
  rest get the box problem's torques on their accelerations at the first stage
  (:func:`start_friction`).  Those that stick are locked for the other stages: the factor
  takes their D as infinite (:func:`locked_factor`), so the recursion carries each such
  joint's child as welded to its parent -- the exact dynamics of a locked joint, at no extra
  cost.  A sliding joint whose rate ends the step against its friction turned within it: the
  joint-space impulse that stops it (and keeps the stuck joints still) ends the step
  (:func:`stop_turned`), and the box problem decides at the next step whether it sticks.

The scratch is the kernels' (``carve``): ``Ff`` the step's friction torques on the sliding
rates, ``Fs`` +inf on the rates held still (the locked factor's extra D), 0 elsewhere; the
joint limits' ``Lc``, ``La``, ``Lv``, ``Ld`` for the columns K⁻¹ e_a, their k x k matrix,
(rate index, b, bound, f) per joint, and a rate vector.
"""
import numpy as np

from rtrigid._jit import jit, jit_inline
from rtrigid.backends.tree.articulated import articulated_factor, articulated_solve
from rtrigid.backends.tree.kinematics import geometry
from rtrigid.backends.tree.layout import I_KIND, I_VOFF, PRISMATIC, REVOLUTE, T_FRIC
from rtrigid.backends.tree.limits import limit_impulse, response_columns
from rtrigid.maths.linalg import solve_inplace

SWEEPS = 100  # projected Gauss-Seidel sweeps at most (a joint alone needs one)

# The schemes' steps with friction are second compiled forms of their steps (``rebind``) in
# which the passes are called, not inlined as in the steps without: the step compiles in a
# few seconds instead of about a minute, for a model that has joint friction only
CALLED = dict(_articulated_factor=articulated_factor, _articulated_solve=articulated_solve)


@jit
def box_solve(La, Lc, Lv, k):
    """The friction torques f = Lv[3, :k] of the box problem (module docstring) with
    A = La[:k, :k] (filled here from the columns Lc), b = Lv[1] and bounds Lv[2] > 0; returns
    False if A is singular.  First every joint sticking: A f = -b solved exactly, kept if
    inside the bounds (the common case, joints held still).  Else projected Gauss-Seidel from
    f = 0, then the equations of the joints strictly inside their bounds solved exactly with
    the others' torques fixed (kept only if that solution stays inside the bounds)."""
    for a in range(k):
        for c in range(k):
            La[a, c] = Lc[c, int(Lv[0, a])]
        Lv[3, a] = 0.0  # inside every bound: all taken as sticking
        if not La[a, a] > 0.0:
            return False
    if _refine(La, Lv, k):
        return True
    big = 0.0
    for a in range(k):
        big = max(big, abs(Lv[1, a]))
    for _ in range(SWEEPS):
        change = 0.0
        for a in range(k):
            r = Lv[1, a]
            for c in range(k):
                r += La[a, c] * Lv[3, c]
            f = min(max(Lv[3, a] - r / La[a, a], -Lv[2, a]), Lv[2, a])
            change = max(change, abs(f - Lv[3, a]) * La[a, a])
            Lv[3, a] = f
        if change <= 1e-10 * big:  # the active set found: _refine makes it exact
            break
    _refine(La, Lv, k)
    return True


@jit
def _refine(La, Lv, k):
    """Solve the equations of the joints whose torques Lv[3] are strictly inside their bounds
    exactly, the others' torques fixed; the solution replaces theirs only if it stays inside
    the bounds (returns whether it did; False when no joint is inside)."""
    m = 0
    for a in range(k):
        if abs(Lv[3, a]) < Lv[2, a]:
            m += 1
    if m == 0:
        return False
    stick = np.empty(m, np.int64)
    sub = np.empty((m, m))
    rhs = np.empty(m)
    m = 0
    for a in range(k):
        if abs(Lv[3, a]) < Lv[2, a]:
            stick[m] = a
            m += 1
    for i in range(m):
        a = stick[i]
        r = -Lv[1, a]
        for c in range(k):
            if not abs(Lv[3, c]) < Lv[2, c]:
                r -= La[a, c] * Lv[3, c]
        rhs[i] = r
        for j in range(m):
            sub[i, j] = La[a, stick[j]]
    if not solve_inplace(sub, rhs, m):
        return False
    for i in range(m):
        if not abs(rhs[i]) < Lv[2, stick[i]]:
            return False  # the exact solution leaves a bound: keep the iterate
    for i in range(m):
        Lv[3, stick[i]] = rhs[i]
    return True


@jit
def has_friction(tf, ti):
    """True when some revolute or prismatic joint of the tree has friction."""
    for b in range(ti.shape[0]):
        kind = ti[b, I_KIND]
        if (kind == REVOLUTE or kind == PRISMATIC) and tf[b, T_FRIC] > 0.0:
            return True
    return False


@jit
def friction_rates(tf, ti, Lv):
    """Lv[0, a], Lv[2, a] <- the rate index and friction bound of every joint with friction;
    returns how many."""
    k = 0
    for b in range(ti.shape[0]):
        kind = ti[b, I_KIND]
        if (kind == REVOLUTE or kind == PRISMATIC) and tf[b, T_FRIC] > 0.0:
            Lv[0, k] = ti[b, I_VOFF]
            Lv[2, k] = tf[b, T_FRIC]
            k += 1
    return k


@jit
def rate_impulses(tf, ti, passes, limits, rates, h):
    """The box problem of the rates of every joint with friction: b = their ``rates``,
    bounds c h, A from the factor in ``passes``; the impulses in Lv[3, :k] (``limits``:
    (Lc, La, Lv, Ld)).  Returns k, or -1 if singular."""
    Lc, La, Lv, Ld = limits
    k = friction_rates(tf, ti, Lv)
    for a in range(k):
        Lv[1, a] = rates[int(Lv[0, a])]
        Lv[2, a] *= h
    response_columns(ti, passes, Lc, Lv, k, Ld)
    if not box_solve(La, Lc, Lv, k):
        return -1
    return k


@jit
def velocity_friction(tf, ti, passes, limits, nu, h):
    """``semi_implicit_euler``: nu (the rates after the free update, with the step's factor
    in ``passes``) <- nu + K⁻¹ Sᵀ p, p the friction impulses of the box problem with b = nu_S
    and bounds c h; the rates of the joints it holds are set to exactly zero.  ``limits``:
    (Lc, La, Lv, Ld).  False if singular."""
    Lc, La, Lv, Ld = limits
    k = rate_impulses(tf, ti, passes, limits, nu, h)
    if k < 0:
        return False
    _add_columns(Lc, Lv, k, nu)
    for a in range(k):
        if abs(Lv[3, a]) < Lv[2, a]:
            nu[int(Lv[0, a])] = 0.0
    return True


@jit
def _add_columns(Lc, Lv, k, nu):
    """nu += sum over a < k of Lv[3, a] Lc[a]."""
    for i in range(nu.shape[0]):
        s = 0.0
        for a in range(k):
            s += Lv[3, a] * Lc[a, i]
        nu[i] += s


@jit
def start_friction(tf, ti, passes, limits, nu0, dnu, Ff, Fs):
    """``nullspace_rk4``, at a step's first stage (its factor in ``passes``, its
    accelerations in ``dnu`` computed with the torques Ff of the sliding joints, which
    :func:`sliding_torques` set): the joints at rest get the box problem's torques on their
    accelerations (b = dnu_S, bounds c); those inside their bounds stick (Fs = +inf, their
    accelerations exactly zero), the others slide off with their bound's torque, kept in Ff
    for the step; dnu gets every such torque's response.  False if singular."""
    Lc, La, Lv, Ld = limits
    k = 0
    for b in range(ti.shape[0]):
        kind = ti[b, I_KIND]
        ov = ti[b, I_VOFF]
        if (kind == REVOLUTE or kind == PRISMATIC) and tf[b, T_FRIC] > 0.0 and nu0[ov] == 0.0:
            Lv[0, k] = ov
            Lv[1, k] = dnu[ov]
            Lv[2, k] = tf[b, T_FRIC]
            k += 1
    if k == 0:
        return True
    response_columns(ti, passes, Lc, Lv, k, Ld)
    if not box_solve(La, Lc, Lv, k):
        return False
    _add_columns(Lc, Lv, k, dnu)
    for a in range(k):
        ov = int(Lv[0, a])
        if abs(Lv[3, a]) < Lv[2, a]:
            Fs[ov] = np.inf
            dnu[ov] = 0.0
        else:
            Ff[ov] = Lv[3, a]
    return True


@jit
def sliding_torques(tf, ti, nu0, Ff, Fs):
    """Ff <- -c sign(rate) on every sliding joint with friction (0 on the others), Fs <- 0."""
    for i in range(Ff.shape[0]):
        Ff[i] = 0.0
        Fs[i] = 0.0
    for b in range(ti.shape[0]):
        kind = ti[b, I_KIND]
        if (kind == REVOLUTE or kind == PRISMATIC) and tf[b, T_FRIC] > 0.0:
            ov = ti[b, I_VOFF]
            if nu0[ov] > 0.0:
                Ff[ov] = -tf[b, T_FRIC]
            elif nu0[ov] < 0.0:
                Ff[ov] = tf[b, T_FRIC]


@jit
def zero_rates(ti, passes, limits, k, x):
    """x <- x + K⁻¹ Sᵀ λ with λ such that x is exactly zero at the k rates Lv[0, :k] (the
    articulated factor in ``passes`` current): the joint limits' impulse with targets zero.
    x: rates, or accelerations.  False if singular."""
    Lc, La, Lv, Ld = limits
    if k == 0:
        return True
    for a in range(k):
        Lv[2, a] = 0.0
    if not limit_impulse(ti, passes, limits, k, x):
        return False
    for i in range(x.shape[0]):
        x[i] += Ld[i]
    for a in range(k):
        x[int(Lv[0, a])] = 0.0
    return True


@jit
def locked_factor(tf, ti, R, G, IA, U, Dinv, W, I6, Fs):
    """A stage's articulated factor with the joints of Fs locked: their D made infinite (Fs
    holds +inf on their rates), so D⁻¹ = 0 -- the recursion then carries a locked joint's
    child as welded to its parent and gives it exactly zero acceleration, with no further
    solve (at the first stage Fs is all zero: the factor as without friction)."""
    return articulated_factor(tf, ti, R, G, IA, U, Dinv, W, I6, Fs)


@jit
def stop_turned(tf, ti, Qg, x, q, passes, limits, Ff, Fs, nu):
    """At a step's end: the sliding joints that end it moving the way their friction pushes
    turned within it; nu <- nu + K⁻¹ Sᵀ λ that stops them and keeps the stuck ones still
    (their rates then exactly zero), with the factor of the step's end (computed here, into
    ``passes``; x, q get the bodies' poses).  False if singular."""
    Lv = limits[2]
    turned = False
    k = 0
    for i in range(nu.shape[0]):
        if Ff[i] * nu[i] > 0.0:
            turned = True
        if Fs[i] != 0.0 or Ff[i] * nu[i] > 0.0:
            Lv[0, k] = i
            k += 1
    if not turned:
        return True  # the stuck joints' rates are zero already
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = passes
    geometry(tf, ti, Qg, x, q, R, rj, G)
    if not articulated_factor(tf, ti, R, G, IA, U, Dinv, W, I6):
        return False
    return zero_rates(ti, passes, limits, k, nu)


@jit
def prestop(tf, ti, Qg, x, q, passes, limits, nu0, h):
    """At a step's start: the joints with friction whose rates it can stop within the step
    (those inside their bounds in the box problem of the rates, bounds c h) are stopped by the
    joint-space impulse that zeros their rates, so they start it at rest -- as a joint that
    has just turned, or one a contact nudged, should.  The factor of (Qg) is computed here
    when some joint with friction moves.  False if singular."""
    Lc, La, Lv, Ld = limits
    moving = False
    for b in range(ti.shape[0]):
        kind = ti[b, I_KIND]
        if (kind == REVOLUTE or kind == PRISMATIC) and tf[b, T_FRIC] > 0.0:
            if nu0[ti[b, I_VOFF]] != 0.0:
                moving = True
    if not moving:
        return True
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = passes
    geometry(tf, ti, Qg, x, q, R, rj, G)
    if not articulated_factor(tf, ti, R, G, IA, U, Dinv, W, I6):
        return False
    k = rate_impulses(tf, ti, passes, limits, nu0, h)
    if k < 0:
        return False
    m = 0
    for a in range(k):
        if abs(Lv[3, a]) < Lv[2, a]:
            Lv[0, m] = Lv[0, a]
            m += 1
    return zero_rates(ti, passes, limits, m, nu0)


@jit
def rk4_begin(tf, ti, Qg, x, q, passes, limits, nu0, Ff, Fs, h):
    """``nullspace_rk4``'s start of a step: :func:`prestop`, then the sliding joints' torques
    (:func:`sliding_torques`).  False if singular."""
    if not prestop(tf, ti, Qg, x, q, passes, limits, nu0, h):
        return False
    sliding_torques(tf, ti, nu0, Ff, Fs)
    return True


@jit_inline
def rk4_load(Ff, tau):
    """A stage's joint forces: tau += the sliding joints' friction torques."""
    for i in range(tau.shape[0]):
        tau[i] += Ff[i]


@jit
def rk4_stage(st, tf, ti, passes, limits, nu0, dnu, Ff, Fs):
    """A stage's accelerations dnu: at the first, the joints at rest stick or slide off
    (:func:`start_friction`); at the others the stuck ones are locked by the factor
    (:func:`locked_factor`).  False if singular."""
    if st == 0:
        return start_friction(tf, ti, passes, limits, nu0, dnu, Ff, Fs)
    return True
