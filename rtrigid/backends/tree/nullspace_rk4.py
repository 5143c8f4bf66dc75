"""``nullspace_rk4`` for jointed systems: classical RK4 on the null-space equations.

The unknowns are the generalized coordinates Qg (positions, with a unit quaternion per free
body and per spherical joint) and the independent rates nu of :mod:`rtrigid.backends.tree.kinematics`.  The
right-hand side is Qg' from nu (quaternions by 002 (42), qdot = 1/2 q o (0, Omega)) and nu'
from the articulated-body recursion, which solves the reduced equations
(T^T M T) nu' = T^T (f - M Tdot nu) in O(number of bodies) without forming T (002 §5 builds
the same T by pull-back; the recursion is its tree-structured form).  After each step every
quaternion is normalised (002 (63)); the joints hold at position level by construction and
at velocity level exactly, so ``constraint_error()`` stays at round-off.

Joint limits (:mod:`.limits`): after the step a coordinate beyond its limit is put on it and
the joints so put get the joint-space impulse that sets their rates to zero (or to the
restitution's rebound of the rate they arrived with).
"""
from rtrigid._jit import inline_copy, jit, jit_inline, rebind
from rtrigid.backends.buffers import NONFINITE, OK, STAT_STEPS, all_finite, view
from rtrigid.backends.tree.kinematics import (
    ACT_GEAR,
    ACT_Q,
    ACT_V,
    T_J,
    keep_alive,
    actuator_force,
    actuator_loads,
    actuator_views,
    articulated_factor,
    articulated_solve,
    bias_forces,
    body_rates,
    carve,
    coordinate_rates,
    geometry,
    joint_forces,
    joint_velocities,
    normalize_coordinates,
    open_buffers,
    rk4_stage_input,
    state_views,
    world_loads,
)
from rtrigid.backends.tree.layout import (
    Drive,
    TreeState,
    TreeTables,
    limit_arrays,
    pass_arrays,
)
from rtrigid.backends.tree.kinematics import work_size as _mb_work_size
from rtrigid.backends.tree import friction
from rtrigid.backends.tree.limits import clamp_limits, has_limits, limit_impulse

RK4_WEIGHTS = (1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0)

# the passes as the step loop calls them: inlined (see rtrigid._jit.inline_copy); the same
# arithmetic in the same order, so the results are bit for bit those of the called passes
(_coordinate_rates, _geometry, _joint_velocities, _world_loads, _bias_forces, _joint_forces,
 _actuator_loads, _articulated_factor, _articulated_solve, _normalize_coordinates,
 _body_rates) = (inline_copy(k) for k in (
    coordinate_rates, geometry, joint_velocities, world_loads, bias_forces, joint_forces,
    actuator_loads, articulated_factor, articulated_solve, normalize_coordinates, body_rates))


def work_size(nb, nq, nv):
    return _mb_work_size(nb, nq, nv)


@jit
def step(n, dt, F, I):
    """Advance ``n`` steps of size ``dt`` (the kernel contract of rtrigid.backends.buffers).

    The stages call the recursion's passes directly, inlined (their ``inline_copy``: real
    calls left ~0.7 of the 2-link arm's 1.7 us step in reference counts), on arrays taken
    out of the buffers once per call: a view made or a tuple of arrays handed on inside the
    loop costs reference counts (atomic operations) on every stage.  The
    stage derivative goes to one pair of arrays (dQ, dnu) and is summed at once with its RK4
    weight, in the order of the textbook formula (so the result is bit for bit the same).
    Actuators act at every stage with the stage's coordinates and rates; their work over a
    step is RK4's quadrature of their power, dt sum_s w_s P_s.
    """
    gravity, tf, pf, ti, pi, S, S_prev, A, solver, stats, work, sizes = open_buffers(F, I)
    nb, ns, nq, nv = sizes
    Qg, nu, x, q, v, w, L = state_views(S, nb, nq, nv)
    f_app = view(A, 0, (nb, 3))
    t_app = view(A, 3 * nb, (nb, 3))
    held = A[6 * nb:6 * nb + nv]  # joint forces on the rates, constant over the call
    scratch = carve(work, nb, nq, nv)
    act, ctrl, awork = actuator_views(F, I)
    passes = pass_arrays(scratch)
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = passes
    tables = TreeTables(tf, ti, pf, pi, gravity)
    state = TreeState(Qg, nu, x, q, v, w, L)
    applied = (f_app, t_app, held)
    drive = Drive(act, ctrl, awork)
    Q0, nu0, kQ, knu = scratch.Q0, scratch.nu0, scratch.kQ, scratch.knu
    Qs, nus = scratch.Qs, scratch.nus
    dQ, dnu, sQ, snu = kQ[0], knu[0], kQ[1], knu[1]
    limits = (scratch.Lc, scratch.La, scratch.Lv, scratch.Ld)
    Ff, Fs = scratch.Ff, scratch.Fs
    limited = has_limits(tf, ti)
    status = OK
    for _ in range(n):
        _start_step(S, S_prev, Qg, nu, Q0, nu0)
        if not _friction_begin(tf, ti, Q0, x, q, passes, limits, nu0, Ff, Fs, dt):
            status = NONFINITE
        for st in range(4):
            if status != OK:
                break
            # stage input from the previous stage's derivative (dQ, dnu still hold it)
            rk4_stage_input(st, dt, Q0, nu0, dQ, dnu, Qs, nus)
            _coordinate_rates(ti, Qs, nus, dQ)
            _loads(tables, Qs, nus, x, q, passes, applied, drive, dt * RK4_WEIGHTS[st])
            _friction_load(Ff, tau)
            if not _stage_factor(tf, ti, R, G, IA, U, Dinv, W, I6, Fs):
                status = NONFINITE
                break
            _articulated_solve(ti, G, IA, U, Dinv, W, tau, cb, pA, acc, dnu)
            if not _friction_stage(st, tf, ti, passes, limits, nu0, dnu, Ff, Fs):
                status = NONFINITE
                break
            wt = RK4_WEIGHTS[st]
            for i in range(nq):
                sQ[i] = sQ[i] + wt * dQ[i] if st > 0 else wt * dQ[i]
            for i in range(nv):
                snu[i] = snu[i] + wt * dnu[i] if st > 0 else wt * dnu[i]
        if status == OK:
            for i in range(nq):
                Qg[i] = Q0[i] + dt * sQ[i]
            for i in range(nv):
                nu[i] = nu0[i] + dt * snu[i]
            _normalize_coordinates(ti, Qg)
            if not _friction_end(tf, ti, Qg, x, q, passes, limits, Ff, Fs, nu):
                status = NONFINITE
        status = _end_step(F, I, status, limited, tf, ti, S, S_prev, stats, state, passes)
        if status != OK:
            break
    # one exit, every array used up to it: see kinematics.keep_alive
    keep_alive(gravity, tf, pf, ti, pi, S, S_prev, A, solver, stats, work, Qg, nu, x, q, v, w, L, f_app,
          t_app, held, R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau, Q0, nu0, dQ, dnu, sQ,
          snu, Qs, nus, act, ctrl, awork)
    return status


@jit
def loads(tables, Qg, nu, x, q, passes, applied, drive, weight):
    """The recursion's inputs at (Qg, nu): poses and joint geometry, velocities, each body's
    bias force less its external load (pA), and the joint forces tau (held, springs, dampers,
    actuators; awork[a] += weight times actuator a's power).  ``tables``: a
    :data:`~.layout.TreeTables`; ``passes``: the recursion's arrays (``pass_arrays``);
    ``applied``: (f_app, t_app, held joint forces) as ``applied_views`` gives them;
    ``drive``: a :data:`~.layout.Drive`."""
    tf, ti, pf, pi, gravity = tables
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = passes
    f_app, t_app, held = applied
    act, ctrl, awork = drive
    _geometry(tf, ti, Qg, x, q, R, rj, G)
    _joint_velocities(ti, G, nu, V, cb)
    _world_loads(tf, ti, pf, pi, gravity, x, R, G, f_app, t_app, fext)
    _bias_forces(tf, ti, R, G, V, fext, pA)
    _joint_forces(tf, ti, Qg, nu, held, tau)
    if act.shape[0]:
        _actuator_loads(act, ctrl, Qg, nu, tau, awork, weight)


@jit
def start_step(S, S_prev, Qg, nu, Q0, nu0):
    """S_prev <- S (the state a failed step returns to), (Q0, nu0) <- the step's start."""
    for i in range(S.shape[0]):
        S_prev[i] = S[i]
    for i in range(Qg.shape[0]):
        Q0[i] = Qg[i]
    for i in range(nu.shape[0]):
        nu0[i] = nu[i]


@jit
def end_step(F, I, status, limited, tf, ti, S, S_prev, stats, state, passes):
    """A step's end, after the update of (Qg, nu) if ``status`` is OK: the joint limits, then
    the bodies' x, q, v, w, L, and the step counted; returns OK, or NONFINITE (a singular
    limit impulse, a non-finite state, or ``status`` already so) with S put back to S_prev.
    ``state``: a :data:`~.layout.TreeState`; ``passes``: the recursion's arrays.

    kinematics.refresh_bodies, its passes called here directly: through it they cost ~0.2 us
    more per step (reference counts it cannot prune, see keep_alive)."""
    Qg, nu, x, q, v, w, L = state
    R, rj, G, V, cb = passes[:5]
    if status == OK:
        if limited and not _hold_limits(F, I):
            status = NONFINITE
        _geometry(tf, ti, Qg, x, q, R, rj, G)
        _joint_velocities(ti, G, nu, V, cb)
        _body_rates(ti, R, G, V, v, w)
        for b in range(ti.shape[0]):
            for k in range(3):
                L[b, k] = tf[b, T_J + k] * w[b, k]
        if not all_finite(S):
            status = NONFINITE
    if status != OK:
        for i in range(S.shape[0]):  # S_prev holds the whole consistent state
            S[i] = S_prev[i]
    else:
        stats[STAT_STEPS] += 1
    return status


_loads, _start_step, _end_step = (inline_copy(k) for k in (loads, start_step, end_step))


# Joint friction's hooks in the step loop (:mod:`.friction`): nothing here, inlined away;
# ``step_friction`` below is the step with friction's own (a model without joint friction
# compiles and runs the loop without them, bit for bit as before)
@jit_inline
def _friction_begin(tf, ti, Qg, x, q, passes, limits, nu0, Ff, Fs, h):
    return True


@jit_inline
def _friction_load(Ff, tau):
    pass


@jit_inline
def _stage_factor(tf, ti, R, G, IA, U, Dinv, W, I6, Fs):
    return _articulated_factor(tf, ti, R, G, IA, U, Dinv, W, I6)


@jit_inline
def _friction_stage(st, tf, ti, passes, limits, nu0, dnu, Ff, Fs):
    return True


@jit_inline
def _friction_end(tf, ti, Qg, x, q, passes, limits, Ff, Fs, nu):
    return True


@jit
def _hold_limits(F, I):
    """Joints beyond a limit: on it, and their rates to the limit's target; False if
    singular.  It takes only the buffers: arrays handed to a call inside the step loop cost
    reference counts on every step, limits or not (1.98 against 1.53 us a step of one link, measured)."""
    gravity, tf, pf, ti, pi, S, S_prev, A, solver, stats, work, sizes = open_buffers(F, I)
    nb, ns, nq, nv = sizes
    Qg, nu, x, q = state_views(S, nb, nq, nv)[:4]
    scratch = carve(work, nb, nq, nv)
    passes, limits = pass_arrays(scratch), limit_arrays(scratch)
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = passes
    Lc, La, Lv, Ld = limits
    k = clamp_limits(tf, ti, Qg, nu, Lv)
    if k == 0:
        return True
    # the step's actuator work counted the motion beyond the limit, which the clamp takes
    # back: so take back the work of the actuators' forces (as they are at the end of the
    # step) over it -- exact for a constant force, so a motor's work stays its force times
    # the net turn of its joint
    act, ctrl, awork = actuator_views(F, I)
    for a in range(act.shape[0]):
        ov = int(act[a, ACT_V])
        for i in range(k):
            if int(Lv[0, i]) == ov:
                awork[a] -= act[a, ACT_GEAR] * actuator_force(
                    act, a, ctrl, Qg[int(act[a, ACT_Q])] + Lv[3, i], nu[ov]) * Lv[3, i]
    geometry(tf, ti, Qg, x, q, R, rj, G)
    if not (articulated_factor(tf, ti, R, G, IA, U, Dinv, W, I6)
            and limit_impulse(ti, passes, limits, k, nu)):
        return False
    for i in range(nv):
        nu[i] += Ld[i]
    return True


# the step with joint friction (the registry's ``friction`` kernel; see .friction), the
# passes called rather than inlined
step_friction = rebind(step, "friction", __name__, _friction_begin=friction.rk4_begin,
                       _friction_load=friction.rk4_load, _friction_stage=friction.rk4_stage,
                       _friction_end=friction.stop_turned,
                       _stage_factor=friction.locked_factor,
                       _coordinate_rates=coordinate_rates,
                       _normalize_coordinates=normalize_coordinates, _loads=loads,
                       _start_step=start_step, _end_step=end_step, **friction.CALLED)
