"""``semi_implicit_euler`` for jointed systems: one articulated-body evaluation per step.

The scheme MuJoCo and Bullet users know (MuJoCo's default integrator): with the rates' time
derivative nu'(Qg_n, nu_n) of the articulated recursion (:mod:`.kinematics`),

    nu_{n+1} = nu_n + h nu',        Qg_{n+1} = Qg_n "+" h nu_{n+1},

plain coordinates by h times their rate, every quaternion (free body, spherical joint) turned
by the exact exponential map of its body or joint rate over h, q o exp((0, h Omega / 2)), then
normalised.  The dampers are taken implicitly in joint space, as MuJoCo's Euler takes its
joint damping: (M + h D) nu' = f(Qg_n, nu_n), with D the joint dampers plus every servo's
kv g^2 (position and velocity actuators not saturated at the step's start; MuJoCo's Euler
leaves actuator kv explicit, its ``implicitfast`` takes it as here).  D enters the
articulated factor as a diagonal joint-space term, so the step stays O(n).  Stiffnesses
(servo kp, joint springs) are explicit: the Simulation refuses servo gains outside the
scheme's stable range (``Simulation._check_servo_gains``).

First order, and it conserves neither energy nor angular momentum (the symplectic Euler of
a separable system keeps a modified energy; with velocity-dependent forces and Coriolis terms
taken at the start of the step, not even that): a choice for control loops that want the
cheapest step and match MuJoCo's default, not for long conservative runs.

Joint limits as under ``nullspace_rk4`` (its ``_hold_limits``: clamp, then the joint-space
impulse).  Actuator work over a step is the force the step applied (its damping implicit)
times the joint's increment, so a motor's work is exactly u g (theta_{n+1} - theta_n).
"""
from rtrigid._jit import inline_copy, jit, jit_inline, rebind
from rtrigid.backends.buffers import NONFINITE, OK
from rtrigid.backends.tree.layout import Drive, TreeState, TreeTables, pass_arrays
from rtrigid.backends.tree.kinematics import (
    ACT_GEAR,
    ACT_HI,
    ACT_KIND,
    ACT_KV,
    ACT_LO,
    ACT_Q,
    ACT_V,
    I_KIND,
    I_QOFF,
    I_VOFF,
    MOTOR,
    PRISMATIC,
    REVOLUTE,
    T_DAMP,
    actuator_force,
    actuator_views,
    applied_views,
    articulated_factor,
    articulated_solve,
    carve,
    coordinate_slots,
    keep_alive,
    open_buffers,
    state_views,
)
from rtrigid.backends.tree.kinematics import work_size as _mb_work_size
from rtrigid.backends.tree import friction
from rtrigid.backends.tree.limits import has_limits
from rtrigid.backends.tree.nullspace_rk4 import end_step, loads, start_step
from rtrigid.maths.quat import turn_t

# the passes inlined as nullspace_rk4 inlines its own (the factor with its armature argument)
_articulated_factor, _articulated_solve, _loads, _start_step, _end_step = (
    inline_copy(k) for k in (articulated_factor, articulated_solve, loads, start_step, end_step))


def work_size(nb, nq, nv):
    return _mb_work_size(nb, nq, nv)


@jit
def implicit_damping(tf, ti, act, ctrl, Qg, nu, h, arm):
    """arm <- h D: h times each rate's damping, the joint damper plus g^2 kv of every servo
    on it whose force is not saturated at (Qg, nu) (the derivative of a clipped force is 0)."""
    for i in range(arm.shape[0]):
        arm[i] = 0.0
    for b in range(ti.shape[0]):
        kind = ti[b, I_KIND]
        if kind == REVOLUTE or kind == PRISMATIC:
            arm[ti[b, I_VOFF]] += h * tf[b, T_DAMP]
    for a in range(act.shape[0]):
        if act[a, ACT_KIND] == MOTOR:
            continue
        ov = int(act[a, ACT_V])
        f = actuator_force(act, a, ctrl, Qg[int(act[a, ACT_Q])], nu[ov])
        if act[a, ACT_LO] < f < act[a, ACT_HI]:
            g = act[a, ACT_GEAR]
            arm[ov] += h * act[a, ACT_KV] * g * g


@jit
def turn_coordinates(ti, Q0, nu, h, Qg):
    """Qg <- Q0 advanced by the rates nu over h: plain coordinates by h nu, quaternions by the
    exact exponential map of their body (joint) rate, normalised."""
    for b in range(ti.shape[0]):
        n, qo, wo = coordinate_slots(ti, b)
        o = ti[b, I_QOFF]
        ov = ti[b, I_VOFF]
        for k in range(n):
            Qg[o + k] = Q0[o + k] + h * nu[ov + k]
        if qo < 0:
            continue
        r = turn_t(Q0[qo], Q0[qo + 1], Q0[qo + 2], Q0[qo + 3], nu[wo], nu[wo + 1], nu[wo + 2],
                   h)
        for k in range(4):
            Qg[qo + k] = r[k]


@jit
def actuator_step_work(act, ctrl, Q0, nu0, Qg, nu, work):
    """work[a] += the force actuator a applied over the step times its joint's increment: its
    force at (Q0, nu0), its damping taken at the new rate as the step took it."""
    for a in range(act.shape[0]):
        o, ov = int(act[a, ACT_Q]), int(act[a, ACT_V])
        g = act[a, ACT_GEAR]
        f = actuator_force(act, a, ctrl, Q0[o], nu0[ov])
        if act[a, ACT_KIND] != MOTOR and act[a, ACT_LO] < f < act[a, ACT_HI]:
            f -= act[a, ACT_KV] * g * (nu[ov] - nu0[ov])
        work[a] += g * f * (Qg[o] - Q0[o])


_implicit_damping, _turn_coordinates, _actuator_step_work = (
    inline_copy(k) for k in (implicit_damping, turn_coordinates, actuator_step_work))


@jit_inline
def _friction_velocity(tf, ti, passes, limits, nu, h):
    """Joint friction's hook (:mod:`.friction`): nothing here, inlined away; ``step_friction``
    below is the step with :func:`.friction.velocity_friction` in its place."""
    return True


@jit
def step(n, dt, F, I):
    """Advance ``n`` steps of size ``dt`` (the kernel contract of rtrigid.backends.buffers).

    One pass of the recursion per step, the passes inlined as in ``nullspace_rk4``'s step
    (see its docstring for why), on arrays taken out of the buffers once per call.
    """
    gravity, tf, pf, ti, pi, S, S_prev, A, solver, stats, work, sizes = open_buffers(F, I)
    nb, ns, nq, nv = sizes
    Qg, nu, x, q, v, w, L = state_views(S, nb, nq, nv)
    act, ctrl, awork = actuator_views(F, I)
    f_app, t_app, held = applied_views(A, nb, nv)  # held: joint forces, constant over the call
    scratch = carve(work, nb, nq, nv)
    na = act.shape[0]
    passes = pass_arrays(scratch)
    R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau = passes
    tables = TreeTables(tf, ti, pf, pi, gravity)
    state = TreeState(Qg, nu, x, q, v, w, L)
    applied = (f_app, t_app, held)
    drive = Drive(act, ctrl, awork)
    Q0, nu0 = scratch.Q0, scratch.nu0
    arm, nudot = scratch.nus, scratch.nudot
    limits = (scratch.Lc, scratch.La, scratch.Lv, scratch.Ld)
    limited = has_limits(tf, ti)
    status = OK
    for _ in range(n):
        _start_step(S, S_prev, Qg, nu, Q0, nu0)
        # the actuators' work is counted after the step (_actuator_step_work): weight 0
        _loads(tables, Qg, nu, x, q, passes, applied, drive, 0.0)
        _implicit_damping(tf, ti, act, ctrl, Qg, nu, dt, arm)
        if not _articulated_factor(tf, ti, R, G, IA, U, Dinv, W, I6, arm):
            status = NONFINITE
        else:
            _articulated_solve(ti, G, IA, U, Dinv, W, tau, cb, pA, acc, nudot)
            for i in range(nv):
                nu[i] = nu0[i] + dt * nudot[i]
            if not _friction_velocity(tf, ti, passes, limits, nu, dt):
                status = NONFINITE
            _turn_coordinates(ti, Q0, nu, dt, Qg)
            if na:
                _actuator_step_work(act, ctrl, Q0, nu0, Qg, nu, awork)
        status = _end_step(F, I, status, limited, tf, ti, S, S_prev, stats, state, passes)
        if status != OK:
            break
    # one exit, every array used up to it: see kinematics.keep_alive
    keep_alive(gravity, tf, pf, ti, pi, S, S_prev, A, solver, stats, work, Qg, nu, x, q, v, w, L,
               f_app, t_app, held, R, rj, G, V, cb, IA, U, Dinv, W, pA, acc, fext, I6, tau, Q0,
               nu0, arm, nudot, act, ctrl, awork)
    return status


# the step with joint friction (the registry's ``friction`` kernel; see .friction), the
# passes called rather than inlined
step_friction = rebind(step, "friction", __name__,
                       _friction_velocity=friction.velocity_friction, _loads=loads,
                       _start_step=start_step, _end_step=end_step, **friction.CALLED)
