"""``energy_momentum`` for jointed systems: a Cayley energy-momentum step per body, joints by
the discrete null space.

The scheme.  Each body turns by one Cayley step in its body frame and balances its spatial
angular momentum against the moment M of its loads; its centre of mass follows the mid-point
rule:

    R1 = R0 (1 - [w]x)^-1 (1 + [w]x),   w = h/4 J^-1 (L0 + L1),   R1 L1 - R0 L0 = h M,
    x1 - x0 = h/2 (v0 + v1),            m (v1 - v0) = h F.

w are the Rodrigues parameters n tan(phi/2) of the step's turn (003 (180)-(185)); with
quaternions q1 = q0 o (1, w) / |(1, w)|.  Energy: since the Cayley turn fixes w,
w.(L1 - L0) = w.(R0^T R1 L1 - L0) = h/2 b.M with b = 2 R0 w the turn's spatial Cayley vector,
so the kinetic energy changes by exactly b.M + (x1 - x0).F.  A joint's reaction is a force
lambda acting on each side at the mean arm Rbar a, Rbar = (R0 + R1)/2, a the anchor:

- no work: (R1 - R0) a = b x Rbar a (003 (181) rearranged: (1 - [b/2]x) R1 = (1 + [b/2]x) R0),
  so the pair's work is lambda times the change of the joint point, which is the same for
  both bodies because the joint holds at t_n and t_{n+1};
- no moment: x_mid + Rbar a = (r0 + r1)/2, the mean of the joint point, is the same point
  seen from either body, so the pair's moment about any point vanishes.

Revolute joints add reaction moments across the mean axis Rbar u_C (the same from both
sides); on the joint manifold the Cayley vectors of child and parent differ by a multiple of
that axis (compose the parent's Cayley turn with the relative one about the axis), so these
moments do no work; fixed joints turn both bodies alike.

Slides (prismatic, cylindrical, planar joints).  The child's joint point is the parent's plus
R_p delta, delta the joint's translation in the parent's frame (linear in the slide
coordinates), so the two sides' mean joint points differ by (R0_p delta0 + R1_p delta1)/2.
The reaction force then acts on both sides on one line, through the child's mean joint point
(no net moment); on the parent it does the work of a force at its mean arm plus the moment of
the offset, and with (1 - [beta]x) R1_p = (1 + [beta]x) R0_p (beta = R0_p w_p, half the
parent's spatial Cayley vector) the pair's work is lambda.K (delta1 - delta0),
K = (1 + [beta]x) R0_p: the reaction does no work when it is orthogonal to m = K t for every
slide direction t.  That is the linear coordinate's discrete gradient: the slide's row of the
null space is m.F (F the subtree's force), and a generalized force f along a slide acts as the
pair lambda = K^-T f, whose work is f (s1 - s0) exactly.  The reaction moments of a prismatic
joint (both bodies turn alike) and of a cylindrical or planar one (across the mean axis, as
revolute) do no work, as above.  Total energy is therefore kept
exactly, and the angular momentum about any fixed point changes only by the moment of the
external loads (gravity, applied forces and torques, springs to the world), as does the
linear momentum by their sum.  Spring ends are handled alike: the discrete-gradient force
k_bar (d0 + d1)/2 at the mean arms, whose work is the exact change of the spring energy and
whose pair moment vanishes.

This is not 000 (51) literally: QUAT.EM turns by the quaternion Cayley map, w replaced by
u = n tan(phi/4) = h/8 J^-1 (L0 + L1), which is also energy- and momentum-conserving for a
single body (:mod:`.energy_momentum` uses it), but the work of a reaction at x_mid + a' then
vanishes only for a' = R(q_mid) a (q_mid = (q0 + q1)/2 unnormalised), and those joint points
differ between the two sides by O(h^2): the reaction pairs leaked a moment of that order,
e.g. 2e-8 of the vertical angular momentum of a swinging 3-link chain over 2000 steps, 1.5e-4
on the lively 10-link chain over 10 s.  No choice of arms fixes that within QUAT.EM's update
(a pivoted link would need both arms at once).

Solving.  The unknowns are the joint-coordinate increments mu (nv of them): the new
configuration z1 = F(z0, mu) is built by forward kinematics (free bodies: x + mu_x and
q o cay(mu_w / 4); spherical joints: s o cay(mu / 4); revolute, prismatic, cylindrical and
planar coordinates: + mu), so the joints
hold at t_{n+1} by construction.  The multipliers are eliminated by the discrete null space
P, whose columns are the turns that the reactions cannot resist: about the world axes through
the mean joint point r_mid = x_mid + Rbar a_C (spherical), about the mean axis Rbar u_C
through it (revolute, and the turn of cylindrical and planar joints), translations along the
discrete slide directions m (prismatic, cylindrical, planar), and the free body's translations
and turns about x_mid.  The nv
equations are P^T r(mu) = 0 with r per body (R1 L1 - R0 L0 - h M, m (v1 - v0) - h F), the
reactions left out; P^T r is evaluated by one sweep from the leaves to the root, carrying the
subtree's moment about the joint point from child to parent with the mean arms.

Newton matrix.  The iteration is Newton's method with the analytic Jacobian, applied in
O(n) by an articulated-body recursion of its own (:func:`_tree_factor`,
:func:`_tree_solve`).  Write P^T r as a sum over bodies d of SL_j^T w_d (j a joint above d)
with w_d = (rho_d + x_mid,d x phi_d, phi_d), the body's residuals as a wrench at the origin
(rho its moment residual, phi its force residual), and SL_j the columns of P.  Varying mu
moves the poses at t_{n+1}; per unit of mu that motion is SR, the joint columns of the new
configuration: a spherical or free turn Cayley-differentiates to R(q1 o conj(h)) / (1 + |a|²)
with h = (1 + a)/|1 + a|, a = mu/4, about the new joint point.  Then

    d(P^T r)/dmu = SL^T B SR + E SR,

B per body: drho/dtheta = 2/h R1 J (1 - [w]x + w w^T) R0^T - [R1 L1]x for a world turn theta
of the pose at t_{n+1} (dw = 1/2 (1 - [w]x + w w^T) R0^T dtheta), and from x_mid x phi, with
y = x_mid - h phi / (4 m), the blocks (h/2 scaled) [[-m [y]x [x1]x, m [y]x], [-m [x1]x, m 1]]
-- the force residual moves with x1 and acts at x_mid, a non-symmetric 6x6 block.  E per
joint row: the mean joint point moves by half the motion of the joint point at t_{n+1}, against
the subtree's force F; a revolute row's mean axis turns by half the child's turn against the
subtree's moment N.  The recursion is the usual one with U = IA SR, W = SL^T IA + E and
D = W SR; a spherical joint's columns of SL are (e_k, r_mid x e_k), and the factorization and
the solve leave out their exact zeros and unit (the same sums in the same order, so the same
numbers).  Applied forces and torques are constant in the world frame and drop out.  Left
out (the iteration then converges linearly, fast): the derivatives of the spring forces and of
their arms.  Checked against finite differences in the tests (models without springs).

Why all of it: the links of a chain are slender (axial inertia 1/17 of the transverse one);
a mid-point frame off by a few per cent feeds the transverse inertia into the axial rows, and
a matrix with the leading gyroscopic term only, at a predicted mid-point, contracted by 0.1
to 1.9 per iteration on a lively chain (measured): ~80 iterations a step, and sub-steps.

Iteration.  A step first tries the cheap start (:func:`_extrapolate`): the last two steps' mean
rates extrapolated, 2 nu - nu_prev (the present rates if something was set between steps), for
at most QUICK = 8 iterations.  Most steps converge there in 2-4 iterations, at no extra cost.
If it fails, the state is put back and the step is solved again, with the full ``max_iter``,
from the explicit start; if that fails too, along the path of its solution in h (below).
The explicit start (:func:`_predict`, :func:`_choose_start`) takes
the explicit dynamics from the present state: the rates at t_n (from the bodies' momenta) and
the accelerations there (the articulated-body recursion), and from them two candidates for the
step's mean rates -- one RK4 step's increments, and the Taylor estimate nu + h/2 nudot -- and
starts from the one with the smallest residual among them and the last step's mean rates (which
win where the explicit dynamics is unstable at the step, e.g. a stiff servo).  It reads the
present state only, so a restored snapshot reproduces it bit for bit, and it does not care what
was set between steps. (The previous step's mean rates, or their extrapolation, were too far
off at game-sized steps: measured on the 50-link chain at dt = 1/60, 0.7 to 9e-2 from the
solution against |mu| ~ 0.07, and plain Newton diverged from there on most steps; see the
README for the figures.)

The matrix is refactored at every iterate until the updates are small (below 1e-5 of mu), then
reused; it is also kept earlier, as in a chord (simplified) Newton method, once the iteration
contracts fast (an update below 1/20 of the one before, or a first update below 1e-3 of mu): an
iteration is then a residual and a back-substitution, without the matrix and its factorization
(~2.6 of ~3.8 us on the lively 10-link chain).  A kept matrix whose update shrank by less than
1/20, a rejected or a damped update end that for the step.  This is done on the cheap start's
QUICK iterations only: the solves from the explicit start, of sub-steps and along the path
keep plain Newton (with it there too, the random chains at dt = 1/60 needed sub-steps on 254 of
12 000 steps instead of 188).  Only the path changes: a step is accepted by the same test
either way.  An update is kept when the residual does not grow, or
else when the correction it leads to, taken with the matrix of that update (Deuflhard's natural
monotonicity test: one more back-substitution, only then), is no larger than the update itself;
else the solve returns to the iterate before it and takes an update of the matrix damped in
the kinetic-energy metric, SL^T (B + d M_b) SR + ... with M_b each body's spatial inertia at
t_{n+1} (Levenberg-Marquardt, :func:`_add_metric`): B is M_b plus O(h) gyroscopic terms, so
the damped update is shorter and turned from Newton's direction towards M^-1 r.  d starts at
1/2, grows 4x per rejection and shrinks 4x per kept update (back to plain Newton); a rejection
past d = 1e4 fails the solve.
(The test was first on the residual's norm, rejecting an update that doubled it.  That norm is
a poor measure here: its rows sum the loads of whole subtrees, and from a start near the
solution on the 50-link chain at dt = 1/60 the residual grew 1e3-fold on an update after which
plain Newton converged in four more; the corrections shrank 2.5e-2, 2.7e-3, 2.0e-3, 2e-7.)
Only the path changes: a step is accepted by the same test, so a converged step keeps energy
and momenta as before.

The iteration stops only at the round-off floor: when the error left after the last update,
estimated from the contraction of the last two updates as theta/(1-theta) |update|, is below 8
eps |mu| and the residual is below 1e-9 (relative to the momenta); or, as before, when the
residual has stalled (the best below 1e-11 and two more iterations have not halved it; three
when it is only below 1e-9) and the updates no longer halve (a linear convergence, as with
springs, whose derivatives the matrix leaves out, goes on to the floor: energy over 1e4 steps
of the slide chains 1.5e-11 instead of 1.9e-10).  The accepted increments are put on the near
root of every Cayley map (:func:`_canonical_roots`), so the stored rates never depend on the
branch Newton found.
Failure of the path too (no convergence in ``max_iter``, a non-finite value, a singular
pivot) triggers the same fallback as the single-body scheme: the step is redone as 2, 4,
..., 2**max_halvings sub-steps, each predicted afresh (counted in ``solver_stats()``
``fallback_steps``; every sub-step is an energy-momentum step, so energy and momenta are kept
through it); if that fails too the kernel stops before the step, state unchanged bit for bit,
status FAILED (``SimulationError``).  With the path following below, a step makes at most
2**(max_halvings + 1) + FOLLOW_SOLVES solves of at most max_iter iterations each (the cheap
and the explicit start's solves, the path's, the sub-steps of every level), and no outcome is
NaN or gains energy.

Step budget (``Simulation(step_budget=...)``, the real-time contract).  The step's solves
share a budget of Newton iterations, counted in stats[STAT_SPENT] (``charged_iterations``): a
solve is handed min(max_iter, what is left) (:func:`_solve`), and charged what it made if it
converged, all it was handed if not; an explicit start is charged PREDICT_CHARGE.  A step whose solves run out takes the budget outcome
(:func:`out_of_budget`, :func:`_budget_outcome`): the explicit dynamics' motion over the step
by RK4, its kinetic energy capped at the start's plus the loads' work by this scheme's rule,
so the energy never grows by more than that work (for a conservative model: never).  It is
not an energy-momentum step (momenta are not kept; energy is lost where RK4 loses it),
counted in stats[STAT_BUDGET] (``budget_steps``, not a fallback), and it depends only on the
state at the step's start, so snapshots reproduce it bit for bit.  ``energy_momentum4``
shares it.

Path following (:func:`_follow`).  A step whose explicit start fails is solved whole by
following the path of its own solution as h grows from 0, where it is known: the step's mean
rates nubar(s) = mu(s dt) / (s dt) start at the rates at t_n, with the tangent dt nudot / 2
(both from the explicit start).  Each point of the path is a solve of size s dt from the line
through the last two; the step in s starts at 1/4, doubles after a point that converged in
at most FOLLOW_EASY = 4 iterations, halves after one that took more than FOLLOW_HARD = 7 or
failed; at most FOLLOW_SOLVES = 64 solves of at most FOLLOW_ITER = 16 iterations (and
``max_iter``).  The kept step is one energy-momentum step of size dt, accepted by the same
round-off test as any other; it is counted in stats[STAT_PATH] (``path_steps``), not as a
fallback.  Why: on the lively chains the explicit start is often as far from the solution as
the solution from zero (rates of the wrong sign at single joints), yet the path from h = 0 is
smooth (no fold: the smallest singular value of (h/2) dr/dmu stays at 3e-4 along it, README,
"How far from resolved the hard steps are"), and from a point on it Newton reaches the next
in a few iterations.  Sub-steps on the lively 50-link chain at dt = 1/60: 78.5 % of steps
before (with the whole step tried again from the sub-steps' path, which it replaces), 0.3 %
now; at 1/120 0.7 % -> 0 (README, "Path following").  It depends only on the state at the
step's start, so snapshots still reproduce runs bit for bit.

Joint limits (revolute and prismatic joints): :func:`_solve_with_limits` -- a joint that would
end the step beyond a limit is locked on it for the step, its reaction doing the exact discrete work
lambda (theta1 - theta0) <= 0, and an impulse then sets its rate at t_{n+1} to zero (see the
README; no restitution).

Supported joints: every kind (spherical, revolute, prismatic, cylindrical, planar, fixed),
free bodies; gravity, applied loads, held joint forces, actuators and point-to-point springs
(exact discrete gradient through |d|², as for single bodies).  Joint springs/dampers are
refused when the Simulation is built (not worked out for this scheme; see the README).
"""
import numpy as np

from rtrigid._jit import inline_copy, jit, jit_inline
from rtrigid.backends.buffers import (
    FAILED,
    OK,
    SOLVER_BUDGET,
    SOLVER_HALVINGS,
    SOLVER_MAX_ITER,
    STAT_BUDGET,
    STAT_FALLBACKS,
    STAT_ITERS,
    STAT_MAX_ITERS,
    STAT_PATH,
    STAT_SPENT,
    STAT_STEPS,
    USED_BUDGET,
    USED_FALLBACK,
    all_finite,
    flat,
    view,
)
from rtrigid.backends.tree.kinematics import (
    ACT_BODY,
    ACT_GEAR,
    ACT_HI,
    ACT_KIND,
    ACT_KP,
    ACT_KV,
    ACT_LO,
    ACT_Q,
    ACT_V,
    MOTOR,
    PLANAR,
    POSITION,
    PRISMATIC,
    CYLINDRICAL,
    actuator_force,
    actuator_views,
    articulated_factor,
    articulated_solve,
    FREE6,
    I_KIND,
    I_ORDER,
    I_PARENT,
    I_QOFF,
    I_VOFF,
    P_A,
    P_B,
    P_K,
    P_REST,
    REVOLUTE,
    SPHERICAL,
    T_AC,
    T_AP,
    T_E1P,
    T_E2P,
    T_HI,
    T_J,
    T_LO,
    T_MASS,
    T_UC,
    T_UP,
    cross3,
    rot_vec,
    base_work_size,
    body_rates,
    carve,
    coordinate_rates,
    coordinate_slots,
    forward_kinematics,
    joint_velocities,
    normalize_coordinates,
    nv_of,
    open_buffers,
    quat_to_rot,
    refresh_bodies,
    rk4_stage_input,
    state_views,
)
from rtrigid.backends import newton
from rtrigid.backends.tree.dynamics import momentum_rates
from rtrigid.backends.tree.nullspace_rk4 import loads as rk4_loads
from rtrigid.backends.tree.limits import clamp_limits, has_limits, limit_impulse
from rtrigid.maths.linalg import solve_inplace
from rtrigid.backends.newton import ACCEPT
from rtrigid.maths.quat import qmul_t

TIGHT = 1e-11
STALLS = 2
STALL_THETA = 0.5
EPS = np.finfo(np.float64).eps
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
# path-following of a step whose explicit start failed (see _follow): on or off, the most
# solves, iterations per solve, the first step in s = h / dt and the smallest, and the
# iterations below (above) which the step in s doubles (halves)
FOLLOW = True
FOLLOW_SOLVES = 64
FOLLOW_ITER = 16
FOLLOW_FIRST = 0.25
FOLLOW_MIN = 1.0 / 4096.0
FOLLOW_EASY = 4
FOLLOW_HARD = 7
BUDGET_RK4 = 4  # RK4 steps the budget outcome takes over a step (see _budget_outcome)
# what an explicit start (_predict, _choose_start: five articulated-body factorisations and
# three residuals) is charged to the step budget, in Newton iterations: sub-steps that
# converge in a few iterations each are paid mostly in starts (README, "The step budget")
PREDICT_CHARGE = 4
UNBUDGETED = 1 << 62  # the end of a step's iterations without a step budget (never reached)
RK4_WEIGHTS = (1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0)
SUPPORTED = ("free", "spherical", "revolute", "prismatic", "cylindrical", "planar", "fixed")
# After a step nu holds the step's mean rates mu / h (the predictor's input) and the bodies'
# momenta meet the joints' velocity constraints only to O(h^2): the backend derives the rates
# at t_{n+1} from those momenta (tree.backend.TreeBackend.rates)
MEAN_RATES = True


def work_size(nb, nq, nv):
    return (int(base_work_size(nb, nq, nv)) + int(_em_size(nb, nq, nv))
            + int(_path_size(nb, nq, nv)))


@jit
def _path_size(nb, nq, nv):
    return 4 * nv


@jit
def _core_size(nb, nq, nv):
    """The part of the state a solve writes: (Qg, nu, x, q, v, w, L)."""
    return nq + nv + 16 * nb


@jit_inline
def _path_carve(work, nb, nq, nv):
    """Scratch of the step driver (:func:`step`): the path (4, nv) of :func:`_follow`."""
    o = base_work_size(nb, nq, nv) + _em_size(nb, nq, nv)
    return view(work, o, (4, nv))


@jit
def _em_size(nb, nq, nv):
    return (3 * nb * 8 + 4 * nb * 2 + 9 * nb + nb + nq + 4 * nv + 6 * nb * 2
            + _jac_size(nb, nv))


@jit
def _jac_size(nb, nv):
    return 12 * nb + 9 * nb + 36 * nb * 2 + 36 * nb + 6 * nb + nv + 36 + 72 + nv


@jit_inline
def _em_carve(work, nb, nq, nv):
    o = base_work_size(nb, nq, nv)
    # (no list: the passes carve this on every call, and a list is allocated)
    x0 = view(work, o, (nb, 3))
    v0 = view(work, o + 3 * nb, (nb, 3))
    L0 = view(work, o + 6 * nb, (nb, 3))
    x1 = view(work, o + 9 * nb, (nb, 3))
    v1 = view(work, o + 12 * nb, (nb, 3))
    L1 = view(work, o + 15 * nb, (nb, 3))
    u = view(work, o + 18 * nb, (nb, 3))
    fw = view(work, o + 21 * nb, (nb, 3))
    o += 24 * nb
    q0 = view(work, o, (nb, 4))
    o += 4 * nb
    q1 = view(work, o, (nb, 4))
    o += 4 * nb
    rot = view(work, o, (nb, 3, 3))
    o += 9 * nb
    smid = view(work, o, (nb,))
    o += nb
    Q1 = view(work, o, (nq,))
    o += nq
    mu = view(work, o, (nv,))
    o += nv
    dmu = view(work, o, (nv,))
    o += nv
    res = view(work, o, (nv,))
    o += nv
    rhs = view(work, o, (nv,))
    o += nv
    Fs = view(work, o, (nb, 6))
    o += 6 * nb
    Y = view(work, o, (nb, 6))
    return x0, v0, L0, x1, v1, L1, u, fw, q0, q1, rot, smid, Q1, mu, dmu, res, rhs, Fs, Y


@jit_inline
def _jac_carve(work, nb, nq, nv):
    """Scratch of the Newton matrix: (mt, Nm, dc, xt, R0, SL, SR, Cb, ucol, pred, M3, aug,
    kd)."""
    o = base_work_size(nb, nq, nv) + _em_size(nb, nq, nv) - _jac_size(nb, nv)
    mt = view(work, o, (nb, 3))
    Nm = view(work, o + 3 * nb, (nb, 3))
    dc = view(work, o + 6 * nb, (nb, 3))
    xt = view(work, o + 9 * nb, (nb, 3))
    o += 12 * nb
    R0 = view(work, o, (nb, 3, 3))
    o += 9 * nb
    SL = view(work, o, (nb, 6, 6))
    o += 36 * nb
    SR = view(work, o, (nb, 6, 6))
    o += 36 * nb
    Cb = view(work, o, (nb, 6, 6))
    o += 36 * nb
    ucol = view(work, o, (nb, 6))
    o += 6 * nb
    pred = view(work, o, (nv,))
    o += nv
    M3 = view(work, o, (4, 3, 3))
    o += 36
    aug = view(work, o, (6, 12))
    o += 72
    kd = view(work, o, (nv,))
    return mt, Nm, dc, xt, R0, SL, SR, Cb, ucol, pred, M3, aug, kd


@jit
def _cay(a0, a1, a2):
    """Cayley map: the unit quaternion (1 - |a|², 2a) / (1 + |a|²), a rotation by ~4|a|."""
    aa = a0 * a0 + a1 * a1 + a2 * a2
    n = 1.0 / (1.0 + aa)
    return (1.0 - aa) * n, 2.0 * a0 * n, 2.0 * a1 * n, 2.0 * a2 * n


@jit
def _update_coordinates(ti, Q0, mu, Q1):
    """Q1 = F(Q0, mu) of the module docstring."""
    for b in range(ti.shape[0]):
        n, qo, mo = coordinate_slots(ti, b)
        o = ti[b, I_QOFF]
        ov = ti[b, I_VOFF]
        for k in range(n):
            Q1[o + k] = Q0[o + k] + mu[ov + k]
        if qo < 0:
            continue
        c = _cay(0.25 * mu[mo], 0.25 * mu[mo + 1], 0.25 * mu[mo + 2])
        s = qmul_t(Q0[qo], Q0[qo + 1], Q0[qo + 2], Q0[qo + 3], c[0], c[1], c[2], c[3])
        for k in range(4):
            Q1[qo + k] = s[k]


@jit
def _canonical_roots(ti, mu, Q1):
    """Every Cayley increment a = mu/4 of a quaternion coordinate on its near root |a| <= 1.

    cay is 2-to-1: a and -a/|a|² give the same rotation (the quaternion negated), and Newton
    may converge to either.  The step is the same physically, but the stored rates mu/h seed
    the next predictor and the fallback, and the far root's are huge (|a| > 1 means a turn of
    more than 180 degrees in one step); the near root also keeps the coordinate's quaternion
    in the hemisphere of the previous one.  Q1 = F(Q0, mu) is kept: its quaternion is negated
    with the root, so both stay consistent.
    """
    for b in range(ti.shape[0]):
        _, qo, mo = coordinate_slots(ti, b)
        if qo < 0:
            continue
        aa = (0.0625 * (mu[mo] * mu[mo] + mu[mo + 1] * mu[mo + 1] + mu[mo + 2] * mu[mo + 2]))
        if aa > 1.0:
            f = -1.0 / aa
            for k in range(3):
                mu[mo + k] *= f
            for k in range(4):
                Q1[qo + k] = -Q1[qo + k]


@jit_inline
def _first_slide(kind):
    """Column of a joint's first slide (prismatic 0; cylindrical and planar 1, after the
    turn); a kind without slides gives 6, past its last column."""
    if kind == PRISMATIC:
        return 0
    if kind == CYLINDRICAL or kind == PLANAR:
        return 1
    return 6


@jit_inline
def _slide_axis(kind, c):
    """The tf column of slide column c's direction (the parent's frame)."""
    if kind == PLANAR:
        return T_E1P if c == 1 else T_E2P
    return T_UP


@jit_inline
def _parent_beta(ti, b, R0, u):
    """beta = R0_p w_p, half the spatial Cayley vector of the turn of body b's parent (0 for
    the world)."""
    p = ti[b, I_PARENT]
    if p < 0:
        return 0.0, 0.0, 0.0
    return rot_vec(R0[p], u[p, 0], u[p, 1], u[p, 2])


@jit_inline
def _slide_row(tf, b, p, col, R0, beta):
    """(n0, m): a slide's direction at t_n (world) and its discrete counterpart
    m = (1 + [beta]x) n0, along which the reaction force of the slide does no work (see
    :func:`_residual`)."""
    if p >= 0:
        n0 = rot_vec(R0[p], tf[b, col], tf[b, col + 1], tf[b, col + 2])
    else:
        n0 = (tf[b, col], tf[b, col + 1], tf[b, col + 2])
    bx = cross3(beta[0], beta[1], beta[2], n0[0], n0[1], n0[2])
    return n0, (n0[0] + bx[0], n0[1] + bx[1], n0[2] + bx[2])


@jit_inline
def _parent_arm(tf, ti, b, x0, x1, rot):
    """From the parent's mean centre to body b's mean joint point (its reactions' point of
    action on the parent): Rbar_p a_P where the joint has no slide (both sides' mean joint
    points coincide), else the difference of the two points."""
    p = ti[b, I_PARENT]
    if _first_slide(ti[b, I_KIND]) > 5:
        return rot_vec(rot[p], tf[b, T_AP], tf[b, T_AP + 1], tf[b, T_AP + 2])
    ac = rot_vec(rot[b], tf[b, T_AC], tf[b, T_AC + 1], tf[b, T_AC + 2])
    return (0.5 * (x0[b, 0] + x1[b, 0] - x0[p, 0] - x1[p, 0]) + ac[0],
            0.5 * (x0[b, 1] + x1[b, 1] - x0[p, 1] - x1[p, 1]) + ac[1],
            0.5 * (x0[b, 2] + x1[b, 2] - x0[p, 2] - x1[p, 2]) + ac[2])


@jit
def _slide_pair(tf, ti, b, f1, f2, R0, rot, u, x0, x1, fw, Y):
    """The force pair +-lambda across the slides of joint b (on the child, and on the parent
    on the same line of action, through the child's mean joint point) that does the work
    f1 (s1 - s0) + f2 (s1' - s0') over the step exactly, into fw and Y.

    With K = (1 + [beta]x) R0_p the pair's work is lambda.K (delta1 - delta0), delta the
    joint's translation in the parent's frame (see :func:`_residual`), so
    lambda = K^-T f = (1 - [beta]x)^-1 R0_p f, f = f1 t1 + f2 t2 the generalized forces along
    the slides' directions; (1 - [beta]x)^-1 v = (v + beta x v + beta (beta.v))/(1 + |beta|²).
    The pair has no net moment.
    """
    p = ti[b, I_PARENT]
    kind = ti[b, I_KIND]
    c = _first_slide(kind)
    t = _slide_axis(kind, c)
    f = (f1 * tf[b, t], f1 * tf[b, t + 1], f1 * tf[b, t + 2])
    if kind == PLANAR:
        f = (f[0] + f2 * tf[b, T_E2P], f[1] + f2 * tf[b, T_E2P + 1], f[2] + f2 * tf[b, T_E2P + 2])
    beta = _parent_beta(ti, b, R0, u)
    if p >= 0:
        f = rot_vec(R0[p], f[0], f[1], f[2])
    bx = cross3(beta[0], beta[1], beta[2], f[0], f[1], f[2])
    bf = beta[0] * f[0] + beta[1] * f[1] + beta[2] * f[2]
    s = 1.0 / (1.0 + beta[0] * beta[0] + beta[1] * beta[1] + beta[2] * beta[2])
    lam = ((f[0] + bx[0] + bf * beta[0]) * s, (f[1] + bx[1] + bf * beta[1]) * s,
           (f[2] + bx[2] + bf * beta[2]) * s)
    ac = rot_vec(rot[b], tf[b, T_AC], tf[b, T_AC + 1], tf[b, T_AC + 2])
    mc = cross3(ac[0], ac[1], ac[2], lam[0], lam[1], lam[2])
    for k in range(3):
        fw[b, k] += lam[k]
        Y[b, k] += mc[k]
    if p < 0:
        return
    ap = _parent_arm(tf, ti, b, x0, x1, rot)
    mp = cross3(ap[0], ap[1], ap[2], lam[0], lam[1], lam[2])
    for k in range(3):
        fw[p, k] -= lam[k]
        Y[p, k] -= mp[k]


@jit
def _residual(h, gravity, tf, ti, pf, pi, A, forces, Q0, mu, x, q, work, act, ctrl):
    """P^T r(mu) into ``res``; also writes x1, q1, v1, L1, w (into ``u``), the mean rotation
    matrices Rbar = (R0 + R1)/2 (into ``rot``), and for the Newton matrix each body's R1 L1
    (mt) and the moment about its joint point of its subtree's residuals (Nm).  Needs the
    rotation matrices at t_n in R0.  Returns the scaled norm and the scaled round-off floor
    of the translational rows: m (v1 - v0) takes x1 - x0 between positions of size |x|, which
    carries eps |x| 2m/h per body into the subtree sums (a long chain far from its root has a
    floor above a fixed relative tolerance).

    ``work``: the flat scratch (:func:`_work_of`), carved here: numba copies every field of
    every array argument into a call, and the ~40 views of the scratch cost more than the
    arithmetic of a small tree that way (the profile of the 2-link arm)."""
    scr = carve(work, ti.shape[0], Q0.shape[0], mu.shape[0])
    em = _em_carve(work, ti.shape[0], Q0.shape[0], mu.shape[0])
    jx = _jac_carve(work, ti.shape[0], Q0.shape[0], mu.shape[0])
    R, rj = scr[0], scr[1]
    (x0, v0, L0, x1, v1, L1, u, fw, q0, q1, rot, smid, Q1, mu_, dmu, res, rhs, Fs,
     Y) = em
    mt, Nm, R0 = jx[0], jx[1], jx[4]
    nb = ti.shape[0]
    _update_coordinates(ti, Q0, mu, Q1)
    forward_kinematics(tf, ti, Q1, x1, q1, R, rj)
    inv_h = 1.0 / h
    scale = 1e-300
    floor = 0.0
    for b in range(nb):
        # w = tan(phi/2) n of the turn q0* o q1 (body frame); Cayley vector 2 w = h/2 J^-1 (L0+L1)
        c = qmul_t(q0[b, 0], -q0[b, 1], -q0[b, 2], -q0[b, 3], q1[b, 0], q1[b, 1], q1[b, 2],
                   q1[b, 3])
        d = 1.0 / c[0]
        m = tf[b, T_MASS]
        for k in range(3):
            u[b, k] = c[1 + k] * d
            L1[b, k] = 4.0 * inv_h * tf[b, T_J + k] * u[b, k] - L0[b, k]
            v1[b, k] = 2.0 * (x1[b, k] - x0[b, k]) * inv_h - v0[b, k]
            fw[b, k] = m * gravity[k] + A[3 * b + k]  # A: applied loads (kinematics.applied_views)
            Y[b, k] = A[3 * (nb + b) + k]
        for i in range(3):
            for k in range(3):
                rot[b, i, k] = 0.5 * (R0[b, i, k] + R[b, i, k])
        floor += 2.0 * m * inv_h * EPS * (max(abs(x0[b, 0]), abs(x0[b, 1]), abs(x0[b, 2]))
                                          + max(abs(x1[b, 0]), abs(x1[b, 1]), abs(x1[b, 2])))
        scale = max(scale, m * max(abs(v0[b, 0]), abs(v0[b, 1]), abs(v0[b, 2])),
                    max(abs(L0[b, 0]), abs(L0[b, 1]), abs(L0[b, 2])),
                    h * max(abs(fw[b, 0]), abs(fw[b, 1]), abs(fw[b, 2])))
    # springs: discrete-gradient force on each end (pulling the ends together), at the mean arm
    for sp in range(pi.shape[0]):
        a, bb = pi[sp, 0], pi[sp, 1]
        d0 = _spring_vec(pf, sp, a, bb, x0, q0)
        d1 = _spring_vec(pf, sp, a, bb, x1, q1)
        l0 = np.sqrt(d0[0] ** 2 + d0[1] ** 2 + d0[2] ** 2)
        l1 = np.sqrt(d1[0] ** 2 + d1[1] ** 2 + d1[2] ** 2)
        rest = pf[sp, P_REST]
        coef = pf[sp, P_K] * (1.0 - 2.0 * rest / (l0 + l1)) if rest > 0.0 else pf[sp, P_K]
        f = (0.5 * coef * (d0[0] + d1[0]), 0.5 * coef * (d0[1] + d1[1]),
             0.5 * coef * (d0[2] + d1[2]))  # on end a, towards b
        if a >= 0:
            _point_load(pf, sp, P_A, a, f, 1.0, rot, fw, Y)
        if bb >= 0:
            _point_load(pf, sp, P_B, bb, f, -1.0, rot, fw, Y)
    if forces:  # some joint force is held (see step)
        _joint_force_loads(tf, ti, A, mu, R0, rot, u, x0, x1, fw, Y)
    if act.shape[0]:
        _actuator_loads(h, tf, ti, act, ctrl, Q0, mu, R0, rot, u, x0, x1, fw, Y)
    # per-body residuals (world): R1 L1 - R0 L0 - h T and m (v1 - v0) - h f
    for b in range(nb):
        m = tf[b, T_MASS]
        a1 = rot_vec(R[b], L1[b, 0], L1[b, 1], L1[b, 2])
        a0 = rot_vec(R0[b], L0[b, 0], L0[b, 1], L0[b, 2])
        for k in range(3):
            Fs[b, 3 + k] = m * (v1[b, k] - v0[b, k]) - h * fw[b, k]
            Fs[b, k] = a1[k] - a0[k] - h * Y[b, k]
            mt[b, k] = a1[k]
    # P^T r: leaves to root, the reactions' arms Rbar a from the centres to the joint points
    rnorm = 0.0
    for i in range(nb - 1, -1, -1):
        b = ti[i, I_ORDER]
        p = ti[b, I_PARENT]
        kind = ti[b, I_KIND]
        ov = ti[b, I_VOFF]
        ac = rot_vec(rot[b], tf[b, T_AC], tf[b, T_AC + 1], tf[b, T_AC + 2])
        f = (Fs[b, 3], Fs[b, 4], Fs[b, 5])
        mc = cross3(ac[0], ac[1], ac[2], f[0], f[1], f[2])
        mhat = (Fs[b, 0] - mc[0], Fs[b, 1] - mc[1], Fs[b, 2] - mc[2])
        if kind == FREE6:
            for k in range(3):
                res[ov + k] = f[k]
                res[ov + 3 + k] = Fs[b, k]
                Nm[b, k] = Fs[b, k]
        else:
            for k in range(3):
                Nm[b, k] = mhat[k]
        if kind == SPHERICAL:
            for k in range(3):
                res[ov + k] = mhat[k]
        elif kind == REVOLUTE or kind == CYLINDRICAL or kind == PLANAR:
            wt = rot_vec(rot[b], tf[b, T_UC], tf[b, T_UC + 1], tf[b, T_UC + 2])
            res[ov] = wt[0] * mhat[0] + wt[1] * mhat[1] + wt[2] * mhat[2]
        first = _first_slide(kind)
        if first < 6:
            beta = _parent_beta(ti, b, R0, u)
            for c in range(first, nv_of(kind)):
                mv = _slide_row(tf, b, p, _slide_axis(kind, c), R0, beta)[1]
                res[ov + c] = mv[0] * f[0] + mv[1] * f[1] + mv[2] * f[2]
        if p >= 0:
            ap = _parent_arm(tf, ti, b, x0, x1, rot)
            mp = cross3(ap[0], ap[1], ap[2], f[0], f[1], f[2])
            for k in range(3):
                Fs[p, 3 + k] += f[k]
                Fs[p, k] += mhat[k] + mp[k]
    for j in range(res.shape[0]):
        rnorm = max(rnorm, abs(res[j]))
    return rnorm / scale, floor / scale


@jit_inline
def _joint_force_loads(tf, ti, A, mu, R0, rot, u, x0, x1, fw, Y):
    """The held joint forces as equal and opposite loads on child and parent (into fw, Y).

    A body's kinetic energy changes over the step by b.T for a torque T (b = 2 R0 w its
    spatial Cayley vector), so a torque pair +-T does the work T.(b_c - b_p), and has no net
    moment.  Revolute: the child turns by C_p Rot(a0, dtheta), a0 = R0_c u_C the axis at t_n;
    composing Cayley vectors (beta = b/2 = R0 w, Rot(a0, dtheta) = Cay(t a0), t = tan(dtheta/2))
    gives b_c - b_p = 2 t (1 + |beta_p|²) / (1 - t beta_p.a0) mbar along the mean axis
    mbar = Rbar u_C.  So the pair kappa mbar with
        kappa = tau (dtheta/2) / tan(dtheta/2) (1 - t beta_p.a0) / ((1 + |beta_p|²) |mbar|²)
    does the work tau (theta1 - theta0) exactly: a constant joint torque enters the energy
    balance as exact discrete work.  (kappa depends on mu; its derivative, O(h tau), is left
    out of the Newton matrix, like the spring forces'.)
    Slides (prismatic, cylindrical, planar): the force pair of :func:`_slide_pair`, whose
    work is the force times the slide's increment, exactly; a cylindrical or planar joint's
    turn takes the revolute torque pair.
    Spherical joints and a free body's turn: the torque given in child axes acts as Rbar tau
    (its work is tau.Rbar^T (b_c - b_p), the discrete counterpart of tau.omega_rel dt); a free
    body's force acts at its centre of mass (work (x1 - x0).f, exact).
    """
    nb = ti.shape[0]
    held = 6 * nb  # where the held joint forces start in A (they are read in place: a view
    # passed along costs reference counts in every residual evaluation, measurable here)
    for b in range(nb):
        kind = ti[b, I_KIND]
        ov = ti[b, I_VOFF]
        p = ti[b, I_PARENT]
        if kind == REVOLUTE or kind == CYLINDRICAL or kind == PLANAR:
            tau = A[held + ov]
            if tau != 0.0:
                _revolute_pair(tf, ti, b, tau, mu[ov], R0, rot, u, Y)
        if kind == PRISMATIC or kind == CYLINDRICAL or kind == PLANAR:
            c = _first_slide(kind)
            f1 = A[held + ov + c]
            f2 = A[held + ov + 2] if kind == PLANAR else 0.0
            if f1 != 0.0 or f2 != 0.0:
                _slide_pair(tf, ti, b, f1, f2, R0, rot, u, x0, x1, fw, Y)
        elif kind == SPHERICAL or kind == FREE6:
            n = 6 if kind == FREE6 else 3
            idle = True
            for k in range(n):
                idle = idle and A[held + ov + k] == 0.0
            if idle:
                continue
            o = ov
            if kind == FREE6:
                for k in range(3):
                    fw[b, k] += A[held + ov + k]
                o = ov + 3
            T = rot_vec(rot[b], A[held + o], A[held + o + 1], A[held + o + 2])
            for k in range(3):
                Y[b, k] += T[k]
                if p >= 0:
                    Y[p, k] -= T[k]


@jit_inline
def _revolute_pair(tf, ti, b, tau, dtheta, R0, rot, u, Y):
    """The torque pair +-kappa mbar across revolute joint b (child b, its parent) that does
    the work tau dtheta over the step (see :func:`_joint_force_loads`), into Y."""
    p = ti[b, I_PARENT]
    m = rot_vec(rot[b], tf[b, T_UC], tf[b, T_UC + 1], tf[b, T_UC + 2])
    a0 = rot_vec(R0[b], tf[b, T_UC], tf[b, T_UC + 1], tf[b, T_UC + 2])
    beta = _parent_beta(ti, b, R0, u)
    half = 0.5 * dtheta
    t = np.tan(half)
    ratio = 1.0 if half == 0.0 else half / t
    mm = m[0] * m[0] + m[1] * m[1] + m[2] * m[2]
    bb = beta[0] * beta[0] + beta[1] * beta[1] + beta[2] * beta[2]
    ba = beta[0] * a0[0] + beta[1] * a0[1] + beta[2] * a0[2]
    kappa = tau * ratio * (1.0 - t * ba) / ((1.0 + bb) * mm)
    for k in range(3):
        Y[b, k] += kappa * m[k]
        if p >= 0:
            Y[p, k] -= kappa * m[k]


@jit_inline
def _servo_state(h, act, a, Q0, mu):
    """(joint, mean coordinate, mean rate) of actuator a over the step of increments mu."""
    o, ov = int(act[a, ACT_Q]), int(act[a, ACT_V])
    return ov, Q0[o] + 0.5 * mu[ov], mu[ov] / h


@jit_inline
def _actuator_loads(h, tf, ti, act, ctrl, Q0, mu, R0, rot, u, x0, x1, fw, Y):
    """Every actuator's force as a revolute torque pair (a prismatic joint's: the slide's
    force pair) doing exact discrete work (into fw, Y).

    The force is taken at the step's mean coordinate c = (c0 + c1)/2 and mean rate
    (c1 - c0)/h.  Its work over the step is then g f (c1 - c0) exactly; for a position servo
    kp g (u - g c)(c1 - c0) is minus the exact change of the spring energy
    kp (u - g c)²/2 (a discrete gradient), and the damper's -kv g² (c1 - c0)²/h is never
    positive: with a fixed target, energy plus servo spring energy never increases, at any
    gain and step.  A saturated force (force_range) is a constant force, whose work is exact
    too, but the spring energy is then no longer the servo's potential.  Inlined into
    :func:`_residual`, its one caller (a call copies its 13 arrays field by field).
    """
    for a in range(act.shape[0]):
        ov, c, cdot = _servo_state(h, act, a, Q0, mu)
        gf = act[a, ACT_GEAR] * actuator_force(act, a, ctrl, c, cdot)
        b = int(act[a, ACT_BODY])
        if gf == 0.0:
            continue
        if ti[b, I_KIND] == PRISMATIC:
            _slide_pair(tf, ti, b, gf, 0.0, R0, rot, u, x0, x1, fw, Y)
        else:
            _revolute_pair(tf, ti, b, gf, mu[ov], R0, rot, u, Y)


@jit
def _actuator_stiffness(h, tf, ti, act, ctrl, Q0, mu, R0, R1, u, kd, Cb):
    """The actuators' terms of the Newton matrix (h/2) dres/dmu: kd <- its joint-space
    diagonal, and the joint rows of E (Cb) get the rest.

    A joint's residual row holds -h g f(mu) G, G = ratio (1 - t beta.a0) / (1 + |beta|²)
    the factor of the torque pair (:func:`_revolute_pair`; ~1).  f varies by
    -g (kp/2 + kv/h) per unit of the joint's mu (0 once saturated), ratio and t with it too;
    beta = R0_p w_p varies with the parent's turn theta as 1/2 (1 - [beta]x + beta beta^T)
    dtheta (see :func:`_newton_matrix`).  That last term goes into the joint's E row, which
    multiplies the child's turn = the parent's + the joint's own (n1 dmu), so n1 times it
    is taken off the diagonal again.  Against finite differences: exact on planar chains,
    1e-2 relative off the diagonal on a skew 3-link chain with stiff servos (a term not
    found yet; Newton then converges linearly there, fast).
    """
    for j in range(kd.shape[0]):
        kd[j] = 0.0
    for a in range(act.shape[0]):
        kind = act[a, ACT_KIND]
        ov, c, cdot = _servo_state(h, act, a, Q0, mu)
        g = act[a, ACT_GEAR]
        f = actuator_force(act, a, ctrl, c, cdot)
        df = 0.0
        if kind != MOTOR and act[a, ACT_LO] < f < act[a, ACT_HI]:
            kp = act[a, ACT_KP] if kind == POSITION else 0.0
            df = -g * (0.5 * kp + act[a, ACT_KV] / h)
        b = int(act[a, ACT_BODY])
        if ti[b, I_KIND] == PRISMATIC:  # the slide's row holds -h g f exactly (_slide_pair)
            kd[ov] -= 0.5 * h * h * g * df
            continue
        p = ti[b, I_PARENT]
        a0 = rot_vec(R0[b], tf[b, T_UC], tf[b, T_UC + 1], tf[b, T_UC + 2])
        beta = _parent_beta(ti, b, R0, u)
        bb = beta[0] * beta[0] + beta[1] * beta[1] + beta[2] * beta[2]
        ba = beta[0] * a0[0] + beta[1] * a0[1] + beta[2] * a0[2]
        half = 0.5 * mu[ov]
        t = np.tan(half)
        if half == 0.0:
            ratio, dratio = 1.0, 0.0
        else:
            sn = np.sin(half)
            ratio = half / t
            dratio = 0.5 * (sn * np.cos(half) - half) / (sn * sn)
        G = ratio * (1.0 - t * ba) / (1.0 + bb)
        dG = (dratio * (1.0 - t * ba) - ratio * ba * 0.5 * (1.0 + t * t)) / (1.0 + bb)
        kd[ov] -= 0.5 * h * h * g * (df * G + f * dG)
        if p < 0 or f == 0.0:
            continue
        # dG/dbeta, then through dbeta = 1/2 (1 - [beta]x + beta beta^T) dtheta
        c = -0.5 * h * h * g * f * ratio / ((1.0 + bb) * (1.0 + bb))
        gb = (c * (-t * a0[0] * (1.0 + bb) - 2.0 * (1.0 - t * ba) * beta[0]),
              c * (-t * a0[1] * (1.0 + bb) - 2.0 * (1.0 - t * ba) * beta[1]),
              c * (-t * a0[2] * (1.0 + bb) - 2.0 * (1.0 - t * ba) * beta[2]))
        gx = cross3(beta[0], beta[1], beta[2], gb[0], gb[1], gb[2])  # (-[beta]x)^T gb
        gbb = gb[0] * beta[0] + gb[1] * beta[1] + gb[2] * beta[2]
        e = (0.5 * (gb[0] + gx[0] + gbb * beta[0]), 0.5 * (gb[1] + gx[1] + gbb * beta[1]),
             0.5 * (gb[2] + gx[2] + gbb * beta[2]))
        n1 = rot_vec(R1[b], tf[b, T_UC], tf[b, T_UC + 1], tf[b, T_UC + 2])
        for k in range(3):
            Cb[b, 0, k] += e[k]
        kd[ov] -= e[0] * n1[0] + e[1] * n1[1] + e[2] * n1[2]


@jit
def _spring_vec(pf, sp, a, bb, x, q):
    """d = (end b) - (end a), world, with R(q) for the given quaternions."""
    pa = _spring_end(pf, sp, P_A, a, x, q)
    pb = _spring_end(pf, sp, P_B, bb, x, q)
    return pb[0] - pa[0], pb[1] - pa[1], pb[2] - pa[2]


@jit
def _spring_end(pf, sp, col, b, x, q):
    if b < 0:
        return pf[sp, col], pf[sp, col + 1], pf[sp, col + 2]
    c = qmul_t(q[b, 0], q[b, 1], q[b, 2], q[b, 3], 0.0, pf[sp, col], pf[sp, col + 1],
               pf[sp, col + 2])
    c = qmul_t(c[0], c[1], c[2], c[3], q[b, 0], -q[b, 1], -q[b, 2], -q[b, 3])
    return x[b, 0] + c[1], x[b, 1] + c[2], x[b, 2] + c[3]


@jit
def _point_load(pf, sp, col, b, f, sign, rot, fw, Y):
    """A world force sign*f at body b's spring point: into fw, its moment at the mean arm
    Rbar a (Rbar = (R0 + R1)/2 in ``rot``) into Y."""
    a = rot_vec(rot[b], pf[sp, col], pf[sp, col + 1], pf[sp, col + 2])
    m = cross3(a[0], a[1], a[2], sign * f[0], sign * f[1], sign * f[2])
    for k in range(3):
        fw[b, k] += sign * f[k]
        Y[b, k] += m[k]


@jit
def _set_column(S, k, a, r):
    """S[:, k] <- the spatial column (a, r x a) of a turn about the world point r."""
    m = cross3(r[0], r[1], r[2], a[0], a[1], a[2])
    for i in range(3):
        S[i, k] = a[i]
        S[3 + i, k] = m[i]


@jit
def _turn_axes(q1, b, mu, mo, out):
    """out <- R(q1_b o conj(h)) / (1 + |a|²), h = (1 + a)/|1 + a|, a = mu[mo:mo+3] / 4: the
    world rotation of the body at t_{n+1} per unit of mu (the Cayley map's differential)."""
    a0, a1, a2 = 0.25 * mu[mo], 0.25 * mu[mo + 1], 0.25 * mu[mo + 2]
    aa = a0 * a0 + a1 * a1 + a2 * a2
    c = qmul_t(q1[b, 0], q1[b, 1], q1[b, 2], q1[b, 3], 1.0, -a0, -a1, -a2)
    n = 1.0 / np.sqrt(1.0 + aa)
    quat_to_rot(c[0] * n, c[1] * n, c[2] * n, c[3] * n, out)
    f = 1.0 / (1.0 + aa)
    for i in range(3):
        for j in range(3):
            out[i, j] *= f


@jit
def _newton_matrix(h, tf, ti, q0, mu, work, nq):
    """Blocks of the Newton matrix (h/2) dres/dmu at the last residual evaluation.

    dres/dmu = SL^T B SR + E SR over the tree: SL the joint columns of the residual (axes at
    the mean joint points), SR the motion of the t_{n+1} poses per unit of mu, B per body, E
    per joint row.  Written: B into IA, SL, SR, and E into Cb (a 6x6 block per joint, its
    rows the joint's residual rows).  ``work``: the flat scratch (see :func:`_residual`), the
    configuration's size ``nq``.
    """
    scr = carve(work, ti.shape[0], nq, mu.shape[0])
    em = _em_carve(work, ti.shape[0], nq, mu.shape[0])
    jx = _jac_carve(work, ti.shape[0], nq, mu.shape[0])
    R, rj = scr[0], scr[1]
    IA = scr[5]
    (x0, v0, L0, x1, v1, L1, u, fw, q0_, q1, rot, smid, Q1, mu_, dmu, res, rhs, Fs,
     Y) = em
    mt, Nm, dc, xt, R0, SL, SR, Cb, ucol, pred, M3, aug, kd = jx
    nb = ti.shape[0]
    c = 0.5 * h
    Md, Y3, Z = M3[1], M3[2], M3[3]
    for b in range(nb):
        kind = ti[b, I_KIND]
        ov = ti[b, I_VOFF]
        m = tf[b, T_MASS]
        wb = (u[b, 0], u[b, 1], u[b, 2])
        # c drho/dtheta = R1 J (1 - [w]x + w w^T) R0^T - c [R1 L1]x, theta the world turn of
        # the pose at t1
        for i in range(3):
            for j in range(3):
                Md[i, j] = wb[i] * wb[j]
            Md[i, i] += 1.0
        Md[0, 1] += wb[2]
        Md[0, 2] -= wb[1]
        Md[1, 0] -= wb[2]
        Md[1, 2] += wb[0]
        Md[2, 0] += wb[1]
        Md[2, 1] -= wb[0]
        for i in range(3):
            for j in range(3):
                Y3[i, j] = tf[b, T_J + i] * Md[i, j]
        R0b = R0[b]
        for i in range(3):
            for j in range(3):
                Z[i, j] = Y3[i, 0] * R0b[j, 0] + Y3[i, 1] * R0b[j, 1] + Y3[i, 2] * R0b[j, 2]
        Bb = IA[b]
        R1b = R[b]
        for i in range(3):
            for j in range(3):
                Bb[i, j] = R1b[i, 0] * Z[0, j] + R1b[i, 1] * Z[1, j] + R1b[i, 2] * Z[2, j]
        _add_cross(Bb, 0, 0, -c, (mt[b, 0], mt[b, 1], mt[b, 2]))
        # the centre: x_mid x phi with phi = m (v1 - v0) - h f the body's own force residual
        # gives, with y = x_mid - h phi / (4 m), [[- m [y]x [x1]x, m [y]x], [- m [x1]x, m 1]]
        xe = (x1[b, 0], x1[b, 1], x1[b, 2])
        ph = (m * (v1[b, 0] - v0[b, 0]) - h * fw[b, 0], m * (v1[b, 1] - v0[b, 1]) - h * fw[b, 1],
              m * (v1[b, 2] - v0[b, 2]) - h * fw[b, 2])
        y = (0.5 * (x0[b, 0] + xe[0]) - 0.25 * h * ph[0] / m,
             0.5 * (x0[b, 1] + xe[1]) - 0.25 * h * ph[1] / m,
             0.5 * (x0[b, 2] + xe[2]) - 0.25 * h * ph[2] / m)
        yx = y[0] * xe[0] + y[1] * xe[1] + y[2] * xe[2]
        # [y]x [x1]x = x1 y^T - (y.x1) 1
        for i in range(3):
            for j in range(3):
                Bb[i, j] -= m * xe[i] * y[j]
                Bb[3 + i, 3 + j] = 0.0
            Bb[i, i] += m * yx
            Bb[3 + i, 3 + i] = m
        Bb[0, 3], Bb[0, 4], Bb[0, 5] = 0.0, -m * y[2], m * y[1]
        Bb[1, 3], Bb[1, 4], Bb[1, 5] = m * y[2], 0.0, -m * y[0]
        Bb[2, 3], Bb[2, 4], Bb[2, 5] = -m * y[1], m * y[0], 0.0
        Bb[3, 0], Bb[3, 1], Bb[3, 2] = 0.0, m * xe[2], -m * xe[1]
        Bb[4, 0], Bb[4, 1], Bb[4, 2] = -m * xe[2], 0.0, m * xe[0]
        Bb[5, 0], Bb[5, 1], Bb[5, 2] = m * xe[1], -m * xe[0], 0.0
        # E: the mean joint point moves with half the motion of the joint point at t1, and the
        # subtree force F acts there: c/2 [F]x (v_O - [r1]x theta), i.e. the rows
        # c/2 [(F.r1) 1 - r1 F^T | [F]x] against the body's motion (theta, v_O)
        F = (Fs[b, 3], Fs[b, 4], Fs[b, 5])
        r1 = (rj[b, 0], rj[b, 1], rj[b, 2])
        E = Cb[b]
        for i in range(nv_of(kind)):  # (the factor reads a joint's rows only)
            for j in range(6):
                E[i, j] = 0.0
        e = 0.5 * c
        fr = F[0] * r1[0] + F[1] * r1[1] + F[2] * r1[2]
        o = 3 if kind == FREE6 else 0
        if kind == FREE6 or kind == SPHERICAL:
            for i in range(3):
                for j in range(3):
                    E[o + i, j] = -e * r1[i] * F[j]
                E[o + i, i] += e * fr
            E[o + 0, 4], E[o + 0, 5] = -e * F[2], e * F[1]
            E[o + 1, 3], E[o + 1, 5] = e * F[2], -e * F[0]
            E[o + 2, 3], E[o + 2, 4] = -e * F[1], e * F[0]
        # columns
        xm = (0.5 * (x0[b, 0] + xe[0]), 0.5 * (x0[b, 1] + xe[1]), 0.5 * (x0[b, 2] + xe[2]))
        ac = rot_vec(rot[b], tf[b, T_AC], tf[b, T_AC + 1], tf[b, T_AC + 2])
        rm = (xm[0] + ac[0], xm[1] + ac[1], xm[2] + ac[2])
        if kind == FREE6:
            for kk in range(3):
                for i in range(6):
                    SL[b, i, kk] = 0.0
                    SR[b, i, kk] = 0.0
                SL[b, 3 + kk, kk] = 1.0
                SR[b, 3 + kk, kk] = 1.0
            _turn_axes(q1, b, mu, ov + 3, Z)
            for kk in range(3):
                _set_column(SL[b], 3 + kk, (1.0 if kk == 0 else 0.0, 1.0 if kk == 1 else 0.0,
                                            1.0 if kk == 2 else 0.0), xm)
                _set_column(SR[b], 3 + kk, (Z[0, kk], Z[1, kk], Z[2, kk]), r1)
        elif kind == SPHERICAL:
            _turn_axes(q1, b, mu, ov, Z)
            for kk in range(3):
                _set_column(SL[b], kk, (1.0 if kk == 0 else 0.0, 1.0 if kk == 1 else 0.0,
                                        1.0 if kk == 2 else 0.0), rm)
                _set_column(SR[b], kk, (Z[0, kk], Z[1, kk], Z[2, kk]), r1)
        elif kind == REVOLUTE or kind == CYLINDRICAL or kind == PLANAR:
            wt = rot_vec(rot[b], tf[b, T_UC], tf[b, T_UC + 1], tf[b, T_UC + 2])
            n1 = rot_vec(R[b], tf[b, T_UC], tf[b, T_UC + 1], tf[b, T_UC + 2])
            _set_column(SL[b], 0, wt, rm)
            _set_column(SR[b], 0, n1, r1)
            # row w.N: the mean axis turns with half the child's turn, c/2 (n1 x N).theta, and the
            # joint point term of the spherical rows seen along w
            N = (Nm[b, 0], Nm[b, 1], Nm[b, 2])
            nN = cross3(n1[0], n1[1], n1[2], N[0], N[1], N[2])
            for j in range(3):
                E[0, j] = e * nN[j] + e * (fr * wt[j] - (wt[0] * r1[0] + wt[1] * r1[1]
                                                         + wt[2] * r1[2]) * F[j])
            fxw = cross3(F[0], F[1], F[2], wt[0], wt[1], wt[2])
            # w.(F x v) = (w x F).v = -(F x w).v
            for j in range(3):
                E[0, 3 + j] = -e * fxw[j]
        first = _first_slide(kind)
        if first < 6:
            _slide_columns(tf, ti, b, first, R0, R, u, F, e, SL, SR, E, dc)


@jit
def _slide_columns(tf, ti, b, first, R0, R1, u, F, e, SL, SR, E, dc):
    """The slide columns of joint b in SL (0, m), SR (0, n1: the slide at t_{n+1} moves the
    child along the parent's axis then) and their E rows, and dc[b] (see :func:`_tree_factor`).

    A slide's row m.F turns with the parent's turn: dm = dbeta x n0 with
    dbeta = 1/2 (1 - [beta]x + beta beta^T) dtheta_p, so the row's E part is
    c/2 (g + beta x g + beta (beta.g)).theta_p, g = n0 x F.  E multiplies the child's turn,
    which is the parent's for a prismatic joint, and the parent's plus n1 dmu_0 (the joint's
    own turn) for a cylindrical or planar one: that part, E_row.n1, goes into dc[b] to be taken
    off the matrix in the turn's column again.
    """
    p = ti[b, I_PARENT]
    kind = ti[b, I_KIND]
    beta = _parent_beta(ti, b, R0, u)
    nr = rot_vec(R1[b], tf[b, T_UC], tf[b, T_UC + 1], tf[b, T_UC + 2])
    for c in range(first, nv_of(kind)):
        col = _slide_axis(kind, c)
        n0, mv = _slide_row(tf, b, p, col, R0, beta)
        if p >= 0:
            n1 = rot_vec(R1[p], tf[b, col], tf[b, col + 1], tf[b, col + 2])
        else:
            n1 = (tf[b, col], tf[b, col + 1], tf[b, col + 2])
        for i in range(3):
            SL[b, i, c] = 0.0
            SR[b, i, c] = 0.0
            SL[b, 3 + i, c] = mv[i]
            SR[b, 3 + i, c] = n1[i]
        dc[b, c] = 0.0
        if p < 0:
            continue
        g = cross3(n0[0], n0[1], n0[2], F[0], F[1], F[2])
        gx = cross3(beta[0], beta[1], beta[2], g[0], g[1], g[2])
        gb = beta[0] * g[0] + beta[1] * g[1] + beta[2] * g[2]
        for j in range(3):
            E[c, j] = e * (g[j] + gx[j] + gb * beta[j])
        if kind != PRISMATIC:
            dc[b, c] = E[c, 0] * nr[0] + E[c, 1] * nr[1] + E[c, 2] * nr[2]


@jit
def _small_inverse(D, k, aug, out):
    """out[:k,:k] <- D[:k,:k]^-1 (Gauss-Jordan with partial pivoting); False if singular."""
    for i in range(k):
        for j in range(k):
            aug[i, j] = D[i, j]
            aug[i, k + j] = 1.0 if i == j else 0.0
    for col in range(k):
        piv = col
        for r in range(col + 1, k):
            if abs(aug[r, col]) > abs(aug[piv, col]):
                piv = r
        if not (abs(aug[piv, col]) > 0.0) or not np.isfinite(aug[piv, col]):
            return False
        if piv != col:
            for j in range(2 * k):
                aug[col, j], aug[piv, j] = aug[piv, j], aug[col, j]
        inv = 1.0 / aug[col, col]
        for j in range(2 * k):
            aug[col, j] *= inv
        for r in range(k):
            if r != col:
                f = aug[r, col]
                if f != 0.0:
                    for j in range(2 * k):
                        aug[r, j] -= f * aug[col, j]
    for i in range(k):
        for j in range(k):
            out[i, j] = aug[i, k + j]
    return True


@jit
def _inverse3(D, out):
    """out <- D^-1 for a 3x3 D by cofactors; False if singular."""
    c00 = D[1, 1] * D[2, 2] - D[1, 2] * D[2, 1]
    c01 = D[1, 2] * D[2, 0] - D[1, 0] * D[2, 2]
    c02 = D[1, 0] * D[2, 1] - D[1, 1] * D[2, 0]
    det = D[0, 0] * c00 + D[0, 1] * c01 + D[0, 2] * c02
    if not (abs(det) > 0.0) or not np.isfinite(det):
        return False
    inv = 1.0 / det
    out[0, 0] = c00 * inv
    out[1, 0] = c01 * inv
    out[2, 0] = c02 * inv
    out[0, 1] = (D[0, 2] * D[2, 1] - D[0, 1] * D[2, 2]) * inv
    out[1, 1] = (D[0, 0] * D[2, 2] - D[0, 2] * D[2, 0]) * inv
    out[2, 1] = (D[0, 1] * D[2, 0] - D[0, 0] * D[2, 1]) * inv
    out[0, 2] = (D[0, 1] * D[1, 2] - D[0, 2] * D[1, 1]) * inv
    out[1, 2] = (D[0, 2] * D[1, 0] - D[0, 0] * D[1, 2]) * inv
    out[2, 2] = (D[0, 0] * D[1, 1] - D[0, 1] * D[1, 0]) * inv
    return True


@jit_inline
def _spherical_w(Sl, Ib, col, Wb):
    """Wb[col] <- Sl[:, col]^T Ib for a spherical joint's column (e_col, rm x e_col) of SL
    (see :func:`_newton_matrix`): the sum of :func:`_tree_factor`'s dense product in the same
    order, its terms with the column's exact zeros (the unit's other two entries and the
    moment's entry col) left out and the unit's 1.0 * x taken as x -- the same value (up to
    the sign of an exact zero), 6 multiply-adds where the dense product takes 18."""
    for r in range(6):
        t = Ib[col, r]
        for m in range(3, 6):
            if m != 3 + col:
                t += Sl[m, col] * Ib[m, r]
        Wb[col, r] = t


@jit
def _tree_factor(ti, SL, SR, Cb, IA, U, W, Dinv, D, aug, kd, dc):
    """Factor SL^T B SR + E SR + diag(kd) - dc (B in IA on entry) leaves to root; False if a
    pivot is singular (dc: the cylindrical and planar slides' rows against their own turn's
    column, see :func:`_slide_columns`).

    The articulated-body recursion with different left and right columns: U = IA SR,
    W = SL^T IA + E, D = W SR + kd (a joint-space diagonal enters the pivot, as armature
    does), and each body passes IA - U D^-1 W on to its parent.
    """
    nb = ti.shape[0]
    for i in range(nb - 1, -1, -1):
        b = ti[i, I_ORDER]
        p = ti[b, I_PARENT]
        kind = ti[b, I_KIND]
        k = nv_of(kind)
        Ib = IA[b]
        Sr = SR[b]
        Sl = SL[b]
        Ub = U[b]
        Wb = W[b]
        Cbb = Cb[b]
        Db = Dinv[b]
        for col in range(k):
            for r in range(6):
                s = 0.0
                for m in range(6):
                    s += Ib[r, m] * Sr[m, col]
                Ub[r, col] = s
            if kind == SPHERICAL:
                _spherical_w(Sl, Ib, col, Wb)
            else:
                for r in range(6):
                    t = 0.0
                    for m in range(6):
                        t += Sl[m, col] * Ib[m, r]
                    Wb[col, r] = t
            for r in range(6):
                Wb[col, r] += Cbb[col, r]
        for r in range(k):
            for col in range(k):
                s = 0.0
                for m in range(6):
                    s += Wb[r, m] * Sr[m, col]
                D[r, col] = s
            D[r, r] += kd[ti[b, I_VOFF] + r]
        if kind == CYLINDRICAL or kind == PLANAR:
            for r in range(1, k):
                D[r, 0] -= dc[b, r]
        if k == 3:
            if not _inverse3(D, Db):
                return False
        elif k > 0 and not _small_inverse(D, k, aug, Db):
            return False
        if p < 0:
            continue
        # IA_p += IA_b - (U D^-1) W, with U D^-1 in aug as scratch
        for r in range(6):
            for col in range(k):
                s = 0.0
                for m in range(k):
                    s += Ub[r, m] * Db[m, col]
                aug[r, col] = s
        Ip = IA[p]
        for r in range(6):
            for col in range(6):
                s = Ib[r, col]
                for m in range(k):
                    s -= aug[r, m] * Wb[m, col]
                Ip[r, col] += s
    return True


@jit
def _tree_solve(ti, SL, SR, U, W, Dinv, tau, pA, acc, ucol, out):
    """out <- the solution for joint-space right-hand side tau of the factored matrix."""
    nb = ti.shape[0]
    for b in range(nb):
        for r in range(6):
            pA[b, r] = 0.0
    for i in range(nb - 1, -1, -1):
        b = ti[i, I_ORDER]
        p = ti[b, I_PARENT]
        k = nv_of(ti[b, I_KIND])
        o = ti[b, I_VOFF]
        spherical = ti[b, I_KIND] == SPHERICAL
        for col in range(k):
            s = tau[o + col]
            if spherical:  # SL's column (e_col, rm x e_col): its exact zeros and unit left out
                s -= pA[b, col]
                for m in range(3, 6):
                    if m != 3 + col:
                        s -= SL[b, m, col] * pA[b, m]
            else:
                for m in range(6):
                    s -= SL[b, m, col] * pA[b, m]
            ucol[b, col] = s
        if p < 0:
            continue
        # t = D^-1 ucol once, into acc[b] (free until the second pass sets it from acc[p])
        for col in range(k):
            t = 0.0
            for m in range(k):
                t += Dinv[b, col, m] * ucol[b, m]
            acc[b, col] = t
        for r in range(6):
            s = pA[b, r]
            for col in range(k):
                s += U[b, r, col] * acc[b, col]
            pA[p, r] += s
    for i in range(nb):
        b = ti[i, I_ORDER]
        p = ti[b, I_PARENT]
        k = nv_of(ti[b, I_KIND])
        o = ti[b, I_VOFF]
        for r in range(6):
            acc[b, r] = acc[p, r] if p >= 0 else 0.0
        for col in range(k):
            s = ucol[b, col]
            if p >= 0:
                for m in range(6):
                    s -= W[b, col, m] * acc[p, m]
            pA[b, col] = s  # scratch: pA[b] is not needed any more
        for col in range(k):
            s = 0.0
            for m in range(k):
                s += Dinv[b, col, m] * pA[b, m]
            out[o + col] = s
        for r in range(6):
            s = 0.0
            for col in range(k):
                s += SR[b, r, col] * out[o + col]
            acc[b, r] += s


@jit
def _predict(h, gravity, tf, ti, pf, pi, A, Qg, v, L, scr, em, act, ctrl, pred, change):
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
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = scr[:14]
    nu_t = scr[15]
    xs, vs, ws, qs, Q1 = em[3], em[4], em[6], em[9], em[12]  # (free until the solve starts)
    if not momentum_rates(tf, ti, Qg, v, L, xs, qs, R, rj, G, V, cb, IA, U, Dinv, W, pA, acc,
                          I6, tau, nu_t, vs, ws):
        return False
    # (the end rates go to pred, which the mean rates then overwrite)
    if not _rk4_step(h, True, gravity, tf, ti, pf, pi, A, Qg, nu_t, Q1, pred, scr, em, act,
                     ctrl, change):
        return False
    normalize_coordinates(ti, Q1)
    mean_rates(ti, Qg, Q1, h, pred)
    return all_finite(pred) and all_finite(change)


@jit
def _rk4_step(h, factored, gravity, tf, ti, pf, pi, A, Q0, nu0, Q1, nu1, scr, em, act, ctrl,
              change):
    """One RK4 step of size h of the explicit dynamics from (Q0, nu0), every load acting (as
    ``nullspace_rk4`` steps it, its stage inputs from ``nullspace_rk4.loads``): (Q1, nu1) <-
    its end (Q1 not yet normalised), change <- h nudot at the start; False if the inertia is
    singular.  ``factored``: the recursion is factored at Q0 already (by ``momentum_rates``).
    The actuators act at every stage; their work is not added here (the caller counts it by
    this scheme's rule)."""
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = scr[:14]
    kQ, Qs, nus = scr[16], scr[18], scr[19]
    dQ, sQ, dnu, snu = kQ[0], kQ[1], scr[20], scr[17][1]
    xs, qs = em[3], em[9]
    nb = ti.shape[0]
    nv = nu0.shape[0]
    nq = Q0.shape[0]
    for st in range(4):
        rk4_stage_input(st, h, Q0, nu0, dQ, dnu, Qs, nus)
        coordinate_rates(ti, Qs, nus, dQ)
        # nullspace_rk4's stage inputs; the actuators below, as their work is not wanted here
        rk4_loads(tf, ti, pf, pi, gravity, Qs, nus, xs, qs, R, rj, G, V, cb,
                  view(A, 0, (nb, 3)), view(A, 3 * nb, (nb, 3)), fext, pA,
                  A[6 * nb:6 * nb + nv], tau, act[:0], ctrl, ctrl, 0.0)
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
def _extrapolate(dt, ti, Qg, nu, Qg_prev, nu_prev, Qs, pred):
    """The cheap start of a step (tried first, see :func:`step`): the last two steps' mean
    rates extrapolated, 2 nu - nu_prev, when the state before the last step (Qg_prev,
    nu_prev) and the present one are linked by one step of size dt with the present rates
    (nothing was set in between); else the present rates.  Both states are in every
    snapshot, so the start is too."""
    for j in range(nu.shape[0]):
        pred[j] = dt * nu[j]
    _update_coordinates(ti, Qg_prev, pred, Qs)
    normalize_coordinates(ti, Qs)
    linked = True
    for i in range(Qg.shape[0]):
        if not (abs(Qs[i] - Qg[i]) <= 1e-12 * max(1.0, abs(Qg[i]))):
            linked = False
            break
    for j in range(nu.shape[0]):
        pred[j] = 2.0 * nu[j] - nu_prev[j] if linked else nu[j]


@jit
def _choose_start(h, gravity, tf, ti, pf, pi, A, forces, Qg, nu, x, q, v, L, scr, em, jx, act,
                  ctrl, pred, change):
    """Of three starts -- the RK4 prediction in ``pred``, the Taylor one nu_t + change/2
    (nu_t in scr[15], the rates at t_n) and the stored rates ``nu`` (the last step's mean
    rates) -- leave in ``pred`` the one whose residual is smallest.  The stored rates win
    where the explicit dynamics is unstable at this step (a stiff servo, kp h²/m = 1e4)."""
    x0, v0, L0, q0, mu, alt = em[0], em[1], em[2], em[8], em[13], em[16]
    nu_t = scr[15]
    nv = pred.shape[0]
    _load_start(x, v, L, q, x0, v0, L0, q0, jx[4])
    for j in range(nv):
        alt[j] = nu_t[j] + 0.5 * change[j]
    best = np.inf
    choice = 0
    for c in range(3):
        for j in range(nv):
            mu[j] = h * (pred[j] if c == 0 else (alt[j] if c == 1 else nu[j]))
        r = _residual(h, gravity, tf, ti, pf, pi, A, forces, Qg, mu, x, q, _work_of(scr), act,
                      ctrl)[0]
        if r < best:
            best = r
            choice = c
    if choice > 0:
        for j in range(nv):
            pred[j] = alt[j] if choice == 1 else nu[j]


@jit_inline
def _work_of(scr):
    """The flat scratch that the kinematics scratch ``scr`` (and the solver's tuples after it)
    was carved from: :func:`kinematics.carve` puts scr[0] at its start."""
    nb, nv, nq = scr[0].shape[0], scr[13].shape[0], scr[14].shape[0]
    return flat(scr[0], base_work_size(nb, nq, nv) + _em_size(nb, nq, nv)
                + _path_size(nb, nq, nv))


@jit
def mean_rates(ti, Q0, Q1, h, nu):
    """nu <- the increments from Q0 to Q1 over h: the inverse of ``_update_coordinates``
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


@jit
def _load_start(x, v, L, q, x0, v0, L0, q0, R0):
    """The state at t_n, copied where the residual and the Newton matrix read it."""
    for b in range(x.shape[0]):
        for k in range(3):
            x0[b, k] = x[b, k]
            v0[b, k] = v[b, k]
            L0[b, k] = L[b, k]
        for k in range(4):
            q0[b, k] = q[b, k]
        quat_to_rot(q[b, 0], q[b, 1], q[b, 2], q[b, 3], R0[b])


_tree_factor_inline = inline_copy(_tree_factor)
_tree_solve_inline = inline_copy(_tree_solve)


@jit
def _factor(ti, work, nq, nv):
    """:func:`_tree_factor` of the Newton matrix in the flat scratch ``work`` (carved here,
    see :func:`_residual`; the factorization inlined)."""
    scr = carve(work, ti.shape[0], nq, nv)
    mt, Nm, dc, xt, R0, SL, SR, Cb, ucol, pred, M3, aug, kd = _jac_carve(work, ti.shape[0], nq,
                                                                           nv)
    return _tree_factor_inline(ti, SL, SR, Cb, scr[5], scr[6], scr[8], scr[7], scr[12], aug,
                               kd, dc)


@jit
def _correction(h, ti, work, nq, nv, nlock):
    """dmu <- the Newton correction -(h/2) M^-1 res with the factored matrix (the locked
    joints kept, see :func:`_keep_locked`); False if that fails.  ``work``: the flat scratch
    (carved here, see :func:`_residual`; the solve inlined)."""
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = carve(work, ti.shape[0], nq,
                                                                    nv)[:14]
    lim = carve(work, ti.shape[0], nq, nv)[21:25]
    em = _em_carve(work, ti.shape[0], nq, nv)
    res, rhs, dmu = em[15], em[16], em[14]
    jx = _jac_carve(work, ti.shape[0], nq, nv)
    SL, SR, ucol = jx[5], jx[6], jx[8]
    for j in range(res.shape[0]):
        rhs[j] = -0.5 * h * res[j]
    _tree_solve_inline(ti, SL, SR, U, W, Dinv, rhs, pA, acc, ucol, dmu)
    return nlock == 0 or _keep_locked(ti, SL, SR, U, W, Dinv, pA, acc, ucol, tau, dmu, nlock,
                                      lim[0], lim[1], lim[2], lim[3])


@jit
def _solve_step(h, max_iter, gravity, tf, ti, pf, pi, A, forces, Qg, nu, x, q, v, w, L,
                scr, em, jx, rates, stats, act, ctrl, awork, nlock, add_work):
    """One EM step of size h from the state in (Qg, x, q, v, L), starting from mu = h rates;
    False on failure.  The first ``nlock`` joints of the limit scratch Lv are locked: their
    increments are Lv[2] and their equations are left out (see :func:`_solve_with_limits`).
    With ``add_work`` the actuators' work over the step is added to ``awork``."""
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = scr[:14]
    (x0, v0, L0, x1, v1, L1, u, fw, q0, q1, rot, smid, Q1, mu, dmu, res, rhs, Fs,
     Y) = em
    mt, Nm, dc, xt, R0, SL, SR, Cb, ucol, pred, M3, aug, kd = jx
    nb = ti.shape[0]
    nv = mu.shape[0]
    work = _work_of(scr)
    _load_start(x, v, L, q, x0, v0, L0, q0, R0)
    for j in range(nv):
        mu[j] = h * rates[j]
    if nlock > 0:  # (the limit scratch is touched only then: a view costs reference counts)
        _locked_increments(mu, scr[23], nlock)
    back = scr[15]  # the last update taken (free during the solve: the predictor's nu_t)
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
        rnorm, floor = _residual(h, gravity, tf, ti, pf, pi, A, forces, Qg, mu, x, q, work, act,
                                 ctrl)
        if nlock > 0:
            rnorm = _free_rows_norm(res, scr[23], nlock, rnorm)
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
            _newton_matrix(h, tf, ti, q0, mu, work, Qg.shape[0])
            _actuator_stiffness(h, tf, ti, act, ctrl, Qg, mu, R0, R, u, kd, Cb)
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
    _canonical_roots(ti, mu, Q1)
    if add_work:
        _add_actuator_work(h, act, ctrl, Qg, mu, awork)
    for i in range(Q1.shape[0]):
        Qg[i] = Q1[i]
    normalize_coordinates(ti, Qg)
    forward_kinematics(tf, ti, Qg, x, q, R, rj)
    for b in range(nb):
        for k in range(3):
            v[b, k] = v1[b, k]
            L[b, k] = L1[b, k]
            w[b, k] = L1[b, k] / tf[b, T_J + k]
    for j in range(nv):
        nu[j] = mu[j] / h
    return True


@jit_inline
def _add_cross(M, r, c, s, v):
    """M[r:r+3, c:c+3] += s [v]x, [v]x the cross-product matrix of v."""
    M[r, c + 1] -= s * v[2]
    M[r, c + 2] += s * v[1]
    M[r + 1, c] += s * v[2]
    M[r + 1, c + 2] -= s * v[0]
    M[r + 2, c] -= s * v[1]
    M[r + 2, c + 1] += s * v[0]


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
        _add_cross(Ib, 0, 3, m, xb)  # m [x]x against v_O
        _add_cross(Ib, 3, 0, -m, xb)  # and -m [x]x against theta in the force rows


@jit
def _add_actuator_work(h, act, ctrl, Q0, mu, awork):
    """Add each actuator's work over a step from Q0 with increments mu (exact: the force at
    the mean coordinate and rate times the increment)."""
    for a in range(act.shape[0]):
        ov, c, cdot = _servo_state(h, act, a, Q0, mu)
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
def _keep_locked(ti, SL, SR, U, W, Dinv, pA, acc, ucol, unit, dmu, nlock, Lc, La, Lv, rhs):
    """Make the Newton update ``dmu`` of the full system that of the system without the
    locked joints' rows and columns: dmu - Z c, Z the full inverse's columns of the locked
    joints, c such that the locked increments stay (dmu - Z c = 0 there)."""
    nv = dmu.shape[0]
    for a in range(nlock):
        for i in range(nv):
            unit[i] = 0.0
        unit[int(Lv[0, a])] = 1.0
        _tree_solve(ti, SL, SR, U, W, Dinv, unit, pA, acc, ucol, Lc[a])
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
def _solve_with_limits(h, max_iter, gravity, tf, ti, pf, pi, A, forces, Qg, nu, x, q, v, w,
                       L, scr, em, jx, rates, stats, act, ctrl, awork, add_work):
    """:func:`_solve_step` with the joint limits (revolute and prismatic joints; see the
    README); the actuators' work over the step taken is added to ``awork`` with ``add_work``.

    The step is solved as if there were no limits; a joint that ends it beyond a limit is
    locked -- its increment fixed so that it lands on the limit, its equation left out, which
    is the exact step with an extra torque lambda on that joint, whose discrete work is
    lambda (theta1 - theta0) (as a held torque's: :func:`_joint_force_loads`) -- and the step
    is solved again; a locked joint whose lambda would pull (the sign of its equation's
    residual times h) is released.  At most six rounds, which share the ``max_iter``
    iterations (so a solve's cap, and the step budget, hold with limits too).  Then the locked
    joints' rates at t_{n+1} (from the momenta) are set to 0 by a joint-space impulse, which
    only takes energy out (the limits are inelastic: the registry refuses a restitution for
    this scheme).  The actuators' work is added once, for the step finally taken.
    """
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = scr[:14]
    start, guess, at_t = scr[14], scr[19], scr[20]
    Lc, La, Lv, Ld = scr[21:25]
    x0, v0, L0, x1, u, q0, res = em[0], em[1], em[2], em[3], em[6], em[8], em[15]
    nb = ti.shape[0]
    nv = nu.shape[0]
    made = stats[STAT_ITERS]
    for i in range(Qg.shape[0]):
        start[i] = Qg[i]
    if not _solve_step(h, max_iter, gravity, tf, ti, pf, pi, A, forces, Qg, nu, x, q, v, w, L,
                       scr, em, jx, rates, stats, act, ctrl, awork, 0, False):
        return False
    nlock = 0
    for _ in range(6):
        changed = False
        a = 0
        while a < nlock:  # release a lock that pulls
            if Lv[1, a] * res[int(Lv[0, a])] * h < 0.0:
                nlock -= 1
                for r in range(4):
                    Lv[r, a] = Lv[r, nlock]
                changed = True
            else:
                a += 1
        for b in range(nb):
            kind = ti[b, I_KIND]
            if kind != REVOLUTE and kind != PRISMATIC:
                continue
            o = ti[b, I_QOFF]
            ov = ti[b, I_VOFF]
            sign = 1.0 if Qg[o] < tf[b, T_LO] else (-1.0 if Qg[o] > tf[b, T_HI] else 0.0)
            if sign == 0.0:
                continue
            known = False
            for a in range(nlock):
                known = known or int(Lv[0, a]) == ov
            if known:
                continue
            Lv[0, nlock] = ov
            Lv[1, nlock] = sign
            Lv[2, nlock] = (tf[b, T_LO] if sign > 0.0 else tf[b, T_HI]) - start[o]
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
                w[b, k] = L0[b, k] / tf[b, T_J + k]
            for k in range(4):
                q[b, k] = q0[b, k]
        left = max_iter - (stats[STAT_ITERS] - made)
        if left < 1 or not _solve_step(h, left, gravity, tf, ti, pf, pi, A, forces, Qg, nu, x,
                                       q, v, w, L, scr, em, jx, guess, stats, act, ctrl, awork,
                                       nlock, False):
            return False
    if add_work:
        _add_actuator_work(h, act, ctrl, start, em[13], awork)  # of the step taken, once
    if nlock == 0:
        return True
    for a in range(nlock):  # exactly on the limit (start + increment may miss it by an ulp)
        j = int(Lv[0, a])
        for b in range(nb):
            if ti[b, I_VOFF] == j and (ti[b, I_KIND] == REVOLUTE or ti[b, I_KIND] == PRISMATIC):
                Qg[ti[b, I_QOFF]] = tf[b, T_LO] if Lv[1, a] > 0.0 else tf[b, T_HI]
    # the rates at t_{n+1} of the momenta, then the impulse on the locked joints
    if not momentum_rates(tf, ti, Qg, v, L, x, q, R, rj, G, V, cb, IA, U, Dinv, W, pA, acc,
                          I6, tau, at_t, x1, u):
        return False
    for a in range(nlock):
        Lv[2, a] = 0.0
    if not limit_impulse(ti, G, IA, U, Dinv, W, tau, cb, pA, acc, nlock, Lc, La, Lv, at_t, Ld):
        return False
    joint_velocities(ti, G, Ld, V, cb)
    body_rates(ti, R, G, V, x1, u)
    for b in range(nb):
        for k in range(3):
            v[b, k] += x1[b, k]
            L[b, k] += tf[b, T_J + k] * u[b, k]
            w[b, k] = L[b, k] / tf[b, T_J + k]
    return True


@jit_inline
def _solve(h, max_iter, end, limited, gravity, tf, ti, pf, pi, A, forces, Qg, nu, x, q, v, w, L,
           scr, em, jx, pred, stats, act, ctrl, awork, add_work=True):
    """One step of size h from the start ``pred`` (with the limits if the tree has any); the
    actuators' work is added to ``awork`` with ``add_work``.

    At most ``max_iter`` iterations, and no more than the step budget leaves: the iterations
    handed out (stats[STAT_SPENT]) never pass ``end``.  A converged solve is charged the
    iterations it made, a failed one all it was handed (what it made, at most).  Inlined
    into its callers: a call would copy its ~60 arrays once more per solve."""
    cap = min(max_iter, end - stats[STAT_SPENT])
    if cap < 1:
        return False
    made = stats[STAT_ITERS]
    if limited:
        ok = _solve_with_limits(h, cap, gravity, tf, ti, pf, pi, A, forces, Qg, nu, x, q, v, w,
                                L, scr, em, jx, pred, stats, act, ctrl, awork, add_work)
    else:
        ok = _solve_step(h, cap, gravity, tf, ti, pf, pi, A, forces, Qg, nu, x, q, v, w, L, scr,
                         em, jx, pred, stats, act, ctrl, awork, 0, add_work)
    stats[STAT_SPENT] += stats[STAT_ITERS] - made if ok else cap
    return ok


@jit
def _explicit_start(h, end, gravity, tf, ti, pf, pi, A, forces, Qg, nu, x, q, v, L, scr, em, jx,
                    stats, act, ctrl, pred, change, path):
    """The explicit start of a step of size h (:func:`_predict`, :func:`_choose_start`) in
    ``pred``; path[0] <- the rates at t_n, path[3] <- nu_t - h nudot / 2, the point at s = -1
    of the tangent at t_n of the path of the step's mean rates in s = h / dt (see
    :func:`_follow`).  False if there is none or the step budget leaves too little; the start
    is charged PREDICT_CHARGE iterations, and made only if the budget leaves more."""
    if end - stats[STAT_SPENT] <= PREDICT_CHARGE:
        return False
    stats[STAT_SPENT] += PREDICT_CHARGE
    if not _predict(h, gravity, tf, ti, pf, pi, A, Qg, v, L, scr, em, act, ctrl, pred, change):
        return False
    nu_t, back = path[0], path[3]
    for j in range(nu_t.shape[0]):
        nu_t[j] = scr[15][j]
        back[j] = nu_t[j] - 0.5 * change[j]
    _choose_start(h, gravity, tf, ti, pf, pi, A, forces, Qg, nu, x, q, v, L, scr, em, jx, act,
                  ctrl, pred, change)
    return True


@jit
def _explicit_solve(h, max_iter, end, limited, gravity, tf, ti, pf, pi, A, forces, Qg, nu, x, q,
                    v, w, L, scr, em, jx, stats, act, ctrl, awork, pred, change, path):
    """One step of size h from the explicit start (:func:`_explicit_start`).  False (state
    unchanged) if there is none, the step budget is spent or the solve fails."""
    return _explicit_start(h, end, gravity, tf, ti, pf, pi, A, forces, Qg, nu, x, q, v, L, scr,
                           em, jx, stats, act, ctrl, pred, change, path) and _solve(
        h, max_iter, end, limited, gravity, tf, ti, pf, pi, A, forces, Qg, nu, x, q, v, w, L, scr,
        em, jx, pred, stats, act, ctrl, awork)


@jit
def _whole_step_work(dt, act, ctrl, S, S_prev, nq, mu, awork):
    """A whole step of size dt kept after tries that added no actuator work (:func:`_follow`):
    ``awork`` <- the work at the step's start plus the step's, as if the step had been taken
    directly (mu its increments)."""
    na = awork.shape[0]
    for a in range(na):
        awork[a] = S_prev[S.shape[0] - na + a]
    _add_actuator_work(dt, act, ctrl, S_prev[:nq], mu, awork)


@jit
def _follow(dt, max_iter, end, limited, gravity, tf, ti, pf, pi, A, forces, S, S_prev, Qg, nu,
            x, q, v, w, L, scr, em, jx, stats, act, ctrl, awork, path):
    """The whole step of size dt from S_prev by following the path of its solution in h from
    h = 0 (path-following continuation); True: it converged and is in S, False: it did not
    and S is S_prev.

    The path is that of the step's mean rates nubar(s) = mu(s dt) / (s dt), s in [0, 1], from
    nubar(0) = the rates at t_n with the tangent dt nudot / 2 there (both from the explicit
    start, :func:`_explicit_start`, in path[0] and path[3]).  Each point is a solve of size
    s dt from the line through the last two points, with at most min(FOLLOW_ITER,
    ``max_iter``) iterations; the step in s starts at FOLLOW_FIRST, doubles after a point that
    took at most FOLLOW_EASY iterations and halves after one that took more than FOLLOW_HARD
    or failed; at most FOLLOW_SOLVES solves, and none once the step in s is below FOLLOW_MIN
    or the budget is spent.  The kept step is one energy-momentum step of size dt, accepted by
    the same test as any other; the tries add no actuator work (the kept one adds the whole
    step's).
    """
    nu_t, start, lo, lo2 = path[0], path[1], path[2], path[3]
    nq = Qg.shape[0]
    nv = nu.shape[0]
    core = _core_size(ti.shape[0], nq, nv)
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
        ok = _solve(target * dt, min(FOLLOW_ITER, max_iter), end, limited, gravity, tf, ti, pf,
                    pi, A, forces, Qg, nu, x, q, v, w, L, scr, em, jx, start, stats, act, ctrl,
                    awork, False) and all_finite(S)
        if ok and target == 1.0:
            _whole_step_work(dt, act, ctrl, S, S_prev, nq, em[13], awork)
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


@jit
def step(n, dt, F, I):
    """Advance ``n`` steps of size ``dt`` (the kernel contract of rtrigid.backends.buffers)."""
    gravity, tf, pf, ti, pi, S, S_prev, A, solver, stats, work, sizes = open_buffers(F, I)
    nb, ns, nq, nv = sizes
    Qg, nu, x, q, v, w, L = state_views(S, nb, nq, nv)
    Qg_prev, nu_prev = state_views(S_prev, nb, nq, nv)[:2]
    scr = carve(work, nb, nq, nv)
    em = _em_carve(work, nb, nq, nv)
    jx = _jac_carve(work, nb, nq, nv)
    path = _path_carve(work, nb, nq, nv)
    pred, change = jx[9], scr[17][0]
    act, ctrl, awork = actuator_views(F, I)
    forces = False  # any joint force held (A after the body loads; constant over the call)
    for i in range(6 * nb, 6 * nb + nv):
        forces = forces or A[i] != 0.0
    max_iter = int(solver[SOLVER_MAX_ITER])
    most = 2 ** int(solver[SOLVER_HALVINGS])
    budget = int(solver[SOLVER_BUDGET])
    limited = has_limits(tf, ti)
    flags = OK
    for _ in range(n):
        # the step's solves may hand out iterations until stats[STAT_SPENT] reaches end
        end = stats[STAT_SPENT] + (budget if budget > 0 else UNBUDGETED)
        _extrapolate(dt, ti, Qg, nu, Qg_prev, nu_prev, em[12], pred)
        for i in range(S.shape[0]):
            S_prev[i] = S[i]
        m = 1
        # the cheap start first, with a few iterations; then the explicit start
        ok = _solve(dt, min(QUICK, max_iter), end, limited, gravity, tf, ti, pf, pi, A, forces,
                    Qg, nu, x, q, v, w, L, scr, em, jx, pred, stats, act, ctrl,
                    awork) and all_finite(S)
        if not ok:
            for i in range(S.shape[0]):  # (a failed solve changes no state; exact)
                S[i] = S_prev[i]
            started = _explicit_start(dt, end, gravity, tf, ti, pf, pi, A, forces, Qg, nu, x, q,
                                      v, L, scr, em, jx, stats, act, ctrl, pred, change, path)
            ok = started and _solve(dt, max_iter, end, limited, gravity, tf, ti, pf, pi, A,
                                    forces, Qg, nu, x, q, v, w, L, scr, em, jx, pred, stats, act,
                                    ctrl, awork) and all_finite(S)
            if not ok and started and FOLLOW:
                ok = _follow(dt, max_iter, end, limited, gravity, tf, ti, pf, pi, A, forces, S,
                             S_prev, Qg, nu, x, q, v, w, L, scr, em, jx, stats, act, ctrl, awork,
                             path)
                if ok:
                    stats[STAT_PATH] += 1
        while not ok and m < most and not _spent(stats, end):
            # m sub-steps, each predicted afresh
            for i in range(S.shape[0]):
                S[i] = S_prev[i]
            m *= 2
            ok = True
            for k in range(m):
                ok = _explicit_solve(dt / m, max_iter, end, limited, gravity, tf, ti, pf, pi, A,
                                     forces, Qg, nu, x, q, v, w, L, scr, em, jx, stats, act,
                                     ctrl, awork, pred, change, path) and all_finite(S)
                if not ok:
                    break
        if not ok and _spent(stats, end):
            out_of_budget(dt, gravity, tf, ti, pf, pi, A, forces, limited, S, S_prev, Qg_prev,
                          Qg, nu, x, q, v, w, L, scr, em, jx, stats, act, ctrl, awork)
            flags |= USED_BUDGET
            ok = True
            m = 1
        if not ok:
            for i in range(S.shape[0]):
                S[i] = S_prev[i]
            return FAILED | flags
        if m > 1:
            stats[STAT_FALLBACKS] += 1
            flags |= USED_FALLBACK
        stats[STAT_STEPS] += 1
    return flags


@jit_inline
def _spent(stats, end):
    """The step budget is spent: what it leaves pays for no explicit start and a solve."""
    return end - stats[STAT_SPENT] <= PREDICT_CHARGE


@jit
def out_of_budget(dt, gravity, tf, ti, pf, pi, A, forces, limited, S, S_prev, Q_start, Qg, nu, x,
                  q, v, w, L, scr, em, jx, stats, act, ctrl, awork):
    """A step that ran out of its budget (``step_budget``): from its start (S_prev, whose
    coordinates are Q_start) it takes the budget outcome (:func:`_budget_outcome`), or, if
    that has none, stops at its start: every rate and momentum zero, the configuration kept
    (the energy can only drop).  Counted in stats[STAT_BUDGET]."""
    for i in range(S.shape[0]):
        S[i] = S_prev[i]
    if not (_budget_outcome(dt, gravity, tf, ti, pf, pi, A, forces, limited, Q_start, Qg, nu, x,
                            q, v, w, L, scr, em, jx, act, ctrl, awork) and all_finite(S)):
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
def _budget_outcome(dt, gravity, tf, ti, pf, pi, A, forces, limited, Q_start, Qg, nu, x, q, v, w,
                    L, scr, em, jx, act, ctrl, awork):
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
    body as :func:`_residual` takes them at mu (gravity, springs, applied forces and torques,
    held joint forces and actuators, at their mean arms) and b = 2 R0 w the body's spatial
    Cayley vector: by the identity of the module docstring, the change of kinetic energy an
    energy-momentum step with these increments would have.  Gravity's and the springs' part
    is minus the change of their potential energy exactly (discrete gradients), so the cap
    T1 <= T0 + W is: energy(t_{n+1}) <= energy(t_n) + the work of the other loads over the
    step by this scheme's rule -- a constant force's F.(x1 - x0), a constant torque's M.b
    (b = 2 tan(phi/2) n for a turn phi about n: the exact work phi n.M to O(phi^3)), a
    revolute or slide joint's held force f (s1 - s0), a spherical joint's held torque
    tau.Rbar^T (b_c - b_p), an actuator's g f (c1 - c0) at the mean coordinate and rate,
    which is added to its work as a converged step adds it.  Joint damping and joint springs
    are refused by this scheme.  When T1 exceeds the cap, the momenta are scaled by
    sqrt(cap / T1); T0 + W < 0 (the explicit motion climbs higher than the energy allows) has
    no outcome.
    """
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = scr[:14]
    Q0, nu0, Lv = scr[14], scr[15], scr[23]
    x0, v0, L0, x1, v1, L1, u, fw, q0, q1 = em[:10]
    mu, Y = em[13], em[18]
    R0 = jx[4]
    nb = ti.shape[0]
    nv = nu.shape[0]
    nq = Qg.shape[0]
    _load_start(x, v, L, q, x0, v0, L0, q0, R0)
    t0 = _kinetic(tf, v0, L0)
    ok = momentum_rates(tf, ti, Qg, v, L, x1, q1, R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, I6,
                        tau, nu, v1, u)
    # the momenta's projection on the joints drops the part that the mean-rate state leaves
    # off them (O(h^2), up to ~6 % of the kinetic energy on the hard steps of the lively
    # chains): the rates are scaled back to the momenta's kinetic energy
    tp = 0.0
    for b in range(nb):
        for k in range(3):
            tp += tf[b, T_MASS] * v1[b, k] * v1[b, k] + tf[b, T_J + k] * u[b, k] * u[b, k]
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
        ok = _rk4_step(h, k == 0, gravity, tf, ti, pf, pi, A, Q0, nu0, Qg, nu, scr, em, act,
                       ctrl, scr[17][0])
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
    _residual(dt, gravity, tf, ti, pf, pi, A, forces, Q_start, mu, x, q, _work_of(scr), act,
              ctrl)
    work = 0.0
    for b in range(nb):
        bw = rot_vec(R0[b], u[b, 0], u[b, 1], u[b, 2])
        for k in range(3):
            work += (x1[b, k] - x0[b, k]) * fw[b, k] + 2.0 * bw[k] * Y[b, k]
    cap = t0 + work
    if not (cap >= 0.0 and np.isfinite(cap)):
        return False
    # the configuration of mu (the energy-momentum step's convention), the momenta of nu1
    for i in range(nq):
        Qg[i] = em[12][i]
    normalize_coordinates(ti, Qg)
    refresh_bodies(tf, ti, Qg, nu, x, q, v, w, L, R, rj, G, V, cb)
    t1 = _kinetic(tf, v, L)
    if t1 > cap:
        f = np.sqrt(cap / t1)
        for b in range(nb):
            for k in range(3):
                v[b, k] *= f
                w[b, k] *= f
                L[b, k] *= f
    for j in range(nv):
        nu[j] = mu[j] / dt
    _add_actuator_work(dt, act, ctrl, Q_start, mu, awork)
    return True


@jit_inline
def _kinetic(tf, v, L):
    """The kinetic energy of the momenta: m |v|²/2 + L.J^-1 L/2 per body (L in body axes)."""
    t = 0.0
    for b in range(v.shape[0]):
        for k in range(3):
            t += tf[b, T_MASS] * v[b, k] * v[b, k] + L[b, k] * L[b, k] / tf[b, T_J + k]
    return 0.5 * t


@jit
def newton_probe(dt, F, I, mu_in, g, res_out, sol_out):
    """Test hook: from the present state, the residual P^T r(mu_in) into ``res_out`` and the
    Newton matrix (h/2) dres/dmu at mu_in applied inversely to ``g`` into ``sol_out``.

    Returns False if the matrix could not be factored.  Overwrites the scratch only.
    """
    gravity, tf, pf, ti, pi, S, S_prev, A, solver, stats, work, sizes = open_buffers(F, I)
    nb, ns, nq, nv = sizes
    Qg, nu, x, q, v, w, L = state_views(S, nb, nq, nv)
    scr = carve(work, nb, nq, nv)
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = scr[:14]
    em = _em_carve(work, nb, nq, nv)
    jx = _jac_carve(work, nb, nq, nv)
    x0, v0, L0, q0, mu, res = em[0], em[1], em[2], em[8], em[13], em[15]
    mt, Nm, dc, xt, R0, SL, SR, Cb, ucol, pred, M3, aug, kd = jx
    _load_start(x, v, L, q, x0, v0, L0, q0, R0)
    for j in range(nv):
        mu[j] = mu_in[j]
    act, ctrl = actuator_views(F, I)[:2]
    _residual(dt, gravity, tf, ti, pf, pi, A, True, Qg, mu, x, q, work, act, ctrl)
    for j in range(nv):
        res_out[j] = res[j]
    _newton_matrix(dt, tf, ti, q0, mu, work, nq)
    _actuator_stiffness(dt, tf, ti, act, ctrl, Qg, mu, R0, scr[0], em[6], kd, Cb)
    if not _tree_factor(ti, SL, SR, Cb, IA, U, W, Dinv, I6, aug, kd, dc):
        return False
    _tree_solve(ti, SL, SR, U, W, Dinv, g, pA, acc, ucol, sol_out)
    return True


# -- the pieces of one step, public for the composed scheme of .energy_momentum4 -------------
solve_step = _solve
predict_rates = _predict


@jit
def scratch_views(work, nb, nq, nv):
    """(kinematics scratch, solver scratch, Newton-matrix scratch) as :func:`solve_step`
    takes them, and where this scheme's scratch ends in ``work``."""
    return (carve(work, nb, nq, nv), _em_carve(work, nb, nq, nv), _jac_carve(work, nb, nq, nv),
            base_work_size(nb, nq, nv) + _em_size(nb, nq, nv) + _path_size(nb, nq, nv))
