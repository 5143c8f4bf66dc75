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
(exact discrete gradient through |d|², as for single bodies); joint springs and dampers at the
mean coordinate and rate (:func:`.em_residual.joint_spring_force`); joint armature as a rotor
with a rate of its own, advanced by the midpoint rule (the same function).
"""

from rtrigid._jit import jit
from rtrigid.backends.buffers import (
    FAILED,
    OK,
    SOLVER_BUDGET,
    SOLVER_HALVINGS,
    SOLVER_MAX_ITER,
    STAT_FALLBACKS,
    STAT_PATH,
    STAT_SPENT,
    STAT_STEPS,
    USED_BUDGET,
    USED_FALLBACK,
    all_finite,
)
from rtrigid.backends.tree.kinematics import actuator_views, carve, open_buffers, state_views
from rtrigid.backends.tree.friction import has_friction
from rtrigid.backends.tree.limits import has_limits
from rtrigid.backends.tree.layout import Drive, TreeModel, TreeState, work_accounts
from rtrigid.backends.tree.em_workspace import EmWork, em_carve, jac_carve, path_carve
from rtrigid.backends.tree.em_start import extrapolate, predict
from rtrigid.backends.tree.em_solve import QUICK, explicit_solve, explicit_start, solve
# what the composed scheme (.energy_momentum4), the backend and the studies take from here
from rtrigid.backends.tree.em_workspace import scratch_views, work_size  # noqa: F401
from rtrigid.backends.tree.em_newton import newton_probe  # noqa: F401
from rtrigid.backends.tree.em_start import mean_rates  # noqa: F401
from rtrigid.backends.tree.em_residual import keep_rotor_rates  # noqa: F401
from rtrigid.backends.tree.em_solve import PREDICT_CHARGE, TIGHT  # noqa: F401
from rtrigid.backends.tree.em_policy import follow, out_of_budget, spent

UNBUDGETED = 1 << 62  # the end of a step's iterations without a step budget (never reached)
# After a step nu holds the step's mean rates mu / h (the predictor's input) and the bodies'
# momenta meet the joints' velocity constraints only to O(h^2): the backend derives the rates
# at t_{n+1} from those momenta (tree.backend.TreeBackend.rates).  A joint with an armature is
# the exception: its nu is its rotor's rate at t_{n+1}, a state (em_residual.rotor_rates)
MEAN_RATES = True


@jit
def step(n, dt, F, I):
    """Advance ``n`` steps of size ``dt`` (the kernel contract of rtrigid.backends.buffers)."""
    gravity, tf, pf, ti, pi, S, S_prev, A, solver, stats, work, sizes = open_buffers(F, I)
    nb, ns, nq, nv = sizes
    Qg, nu, x, q, v, w, L = state_views(S, nb, nq, nv)
    Qg_prev, nu_prev = state_views(S_prev, nb, nq, nv)[:2]
    scr = carve(work, nb, nq, nv)
    em = em_carve(work, nb, nq, nv)
    jx = jac_carve(work, nb, nq, nv)
    path = path_carve(work, nb, nq, nv)
    pred, change = jx.pred, scr.knu[0]
    act, ctrl = actuator_views(F, I)[:2]
    awork = work_accounts(F, I)  # the actuators' work, then the joint friction's
    forces = False  # any joint force held (A after the body loads; constant over the call)
    for i in range(6 * nb, 6 * nb + nv):
        forces = forces or A[i] != 0.0
    max_iter = int(solver[SOLVER_MAX_ITER])
    most = 2 ** int(solver[SOLVER_HALVINGS])
    budget = int(solver[SOLVER_BUDGET])
    limited = has_limits(tf, ti) or has_friction(tf, ti)  # (both take locks: em_solve)
    model = TreeModel(gravity, tf, ti, pf, pi, A, forces)
    state = TreeState(Qg, nu, x, q, v, w, L)
    ws = EmWork(scr, em, jx)
    drive = Drive(act, ctrl, awork)
    flags = OK
    for _ in range(n):
        # the step's solves may hand out iterations until stats[STAT_SPENT] reaches end
        end = stats[STAT_SPENT] + (budget if budget > 0 else UNBUDGETED)
        extrapolate(dt, ti, Qg, nu, Qg_prev, nu_prev, em.Q1, pred)
        for i in range(S.shape[0]):
            S_prev[i] = S[i]
        m = 1
        # the cheap start first, with a few iterations; then the explicit start
        ok = solve(dt, min(QUICK, max_iter), end, limited, model, state, ws, pred, stats,
                   drive) and all_finite(S)
        if not ok:
            for i in range(S.shape[0]):  # (a failed solve changes no state; exact)
                S[i] = S_prev[i]
            started = explicit_start(dt, end, model, state, ws, stats, drive, pred, change, path)
            ok = started and solve(dt, max_iter, end, limited, model, state, ws, pred, stats,
                                   drive) and all_finite(S)
            if not ok and started:
                ok = follow(dt, max_iter, end, limited, model, S, S_prev, state, ws, stats, drive,
                            path)
                if ok:
                    stats[STAT_PATH] += 1
        while not ok and m < most and not spent(stats, end):
            # m sub-steps, each predicted afresh
            for i in range(S.shape[0]):
                S[i] = S_prev[i]
            m *= 2
            ok = True
            for k in range(m):
                ok = explicit_solve(dt / m, max_iter, end, limited, model, state, ws, stats, drive,
                                    pred, change, path) and all_finite(S)
                if not ok:
                    break
        if not ok and spent(stats, end):
            out_of_budget(dt, model, limited, S, S_prev, Qg_prev, state, ws, stats, drive)
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


# -- the pieces of one step, public for the composed scheme of .energy_momentum4 -------------
solve_step = solve
predict_rates = predict
