"""Simulation: the one façade over every backend -- clock, loads, impulses, snapshots, queries.

    sim = Simulation(model, integrator="energy_momentum", dt=0.01)
    sim.step(1000)                 # 1000 steps in one compiled call
    sim.energy(), sim.momentum(), sim.constraint_error()

The model picks its backend (:func:`rtrigid.backends.select`: single bodies, or trees in
joint coordinates); the integrator registry (:mod:`rtrigid.integrators`) gives the kernel.
Everything on this page is written once, for every backend, through the protocol of
:mod:`rtrigid.backends`.  Orientation ``q`` is the unit quaternion (scalar first) rotating body
axes into world axes.

Frames: every method that takes or returns a vector says its frame with ``frame=`` (default
``"world"``); points are world points, or body points measured from the centre of mass in
body axes with ``frame="body"``.  Every public method validates its input first and raises
``ValueError`` naming the offending field; a refused call leaves the simulation exactly as it
was.
"""
from __future__ import annotations

import copy
import hashlib
import math
import threading
import warnings

import numpy as np

from rtrigid import integrators
from rtrigid.backends import BODIES, select
from rtrigid.backends.buffers import (
    FAILED,
    SOLVER_BUDGET,
    SOLVER_HALVINGS,
    SOLVER_MAX_ITER,
    STAT_BUDGET,
    STAT_PATH,
    STAT_FALLBACKS,
    STAT_ITERS,
    STAT_MAX_ITERS,
    STAT_SPENT,
    STAT_STEPS,
    USED_BUDGET,
    USED_FALLBACK,
    OK,
    clamp_into,
)
from rtrigid.joints import KINDS, geometry, residual
from rtrigid.maths import quat
from rtrigid.maths.linalg import kinetic_energy, momenta
from rtrigid.model import Model
from rtrigid.validate import as_frame, as_int, as_scalar, as_vector


MAX_STEPS = 2 ** 53
# Simulation's default step_budget: none (README, "The step budget": a budget low enough for
# real time is reached by the random chains and stiff servos the scheme must keep exactly)
STEP_BUDGET = None
RK4_SERVO_LIMIT = 2.5  # |s| dt a servo may reach under nullspace_rk4 (_check_servo_gains)
EULER_SERVO_MARGIN = 0.8  # of semi_implicit_euler's stable kp range (_check_servo_gains)
_TWO_THREADS = ("Simulation: entered from a second thread while another thread steps it; a "
                "Simulation belongs to one thread at a time (give each thread its own, or "
                "serialise the calls)")


class SimulationError(RuntimeError):
    """A step could not be completed; the state is left at the last completed step."""


class Snapshot:
    """Opaque, immutable copy of everything that determines the future of a Simulation."""

    __slots__ = ("_data",)

    def __init__(self, data):
        self._data = data


def _readonly(a):
    view = a.view()
    view.flags.writeable = False
    return view


def _entry_point(kernel, *args):
    """The compiled entry point of the numba dispatcher ``kernel`` for the types of
    ``args``, or ``kernel`` itself when it is no dispatcher or has no such overload."""
    overloads = getattr(kernel, "overloads", None)
    if not overloads:
        return kernel
    import numba

    key = tuple(numba.typeof(a) for a in args)
    for sig, result in overloads.items():
        if tuple(sig) == key:
            return result.entry_point
    return kernel


def _create_backend(kind, model, module):
    if kind == BODIES:
        from rtrigid.backends.bodies.backend import BodiesBackend

        return BodiesBackend(model, module)
    from rtrigid.backends.tree.backend import TreeBackend

    return TreeBackend(model, module)


class Simulation:
    """Fixed-step simulation of a :class:`~rtrigid.model.Model`.

    Parameters
    ----------
    model : Model
        The model; it is frozen here, later edits to it have no effect.
    integrator : str
        A name of :func:`rtrigid.integrators.names` that supports the model.
    dt : float
        The fixed step, seconds (> 0).
    options : dict
        The integrator's options (its variants), see its registry entry.
    max_iter : int
        Newton iteration cap per (sub)step of implicit schemes.
    max_halvings : int
        Fallback depth of implicit schemes: a step whose Newton solve fails is redone as
        2, 4, ..., 2**max_halvings sub-steps before the step is declared failed.
    step_budget : int or None
        The real-time contract of the jointed ``energy_momentum`` and ``energy_momentum4``
        (trees without loop joints; the registry's ``step_budget``): the Newton iterations
        one step may spend over all its solves (cheap start, explicit start, the path
        following, sub-steps; a failed solve counts all it was handed, an explicit start 4).
        A step that runs out takes the budget outcome: the explicit dynamics' motion over
        the step (RK4), its kinetic energy capped so that the energy does not grow by more
        than the loads' work -- never NaN, never an energy gain, but not an energy-momentum
        step (counted in ``solver_stats()["budget_steps"]``, warned about once).  None (the
        default): no budget (a step is bounded by ``max_iter``, ``max_halvings`` and the path
        following's 64 solves alone).  Other schemes and models ignore it.  See the README,
        "The step budget" (40-60 keep the worst step of the bench's chains within 5x the
        median; the issue's random chains charge up to 340 on a step).
    max_steps_per_advance : int
        :meth:`advance` never runs more steps than this in one call; the rest of the elapsed
        time is dropped (and counted in ``dropped_time``) so a slow frame cannot snowball.
    """

    def __init__(self, model: Model, integrator="energy_momentum", dt=0.01, *, options=None,
                 max_iter=25, max_halvings=6, step_budget=STEP_BUDGET,
                 max_steps_per_advance=64):
        if not isinstance(model, Model):
            raise ValueError(f"model: expected an rtrigid Model, got {type(model).__name__}")
        if not model.bodies:
            raise ValueError("bodies: the model has no bodies")
        entry = integrators.get(integrator)
        self.options = entry.check_options(options)
        self.dt = as_scalar(dt, "dt", positive=True)
        max_iter = as_int(max_iter, "max_iter", minimum=1)
        if max_iter < 3:
            # Newton stops only on a stalled residual: two updates and one more residual
            raise ValueError(f"max_iter: must be >= 3 to see a residual stall, got {max_iter}")
        max_halvings = as_int(max_halvings, "max_halvings", minimum=0)
        if step_budget is not None:
            step_budget = as_int(step_budget, "step_budget", minimum=1)
        self.max_steps_per_advance = as_int(max_steps_per_advance, "max_steps_per_advance",
                                            minimum=1)
        kind = select(model)
        loop_joints = getattr(model, "loop_joints", [])
        why = entry.refusal(kind, model.inbound_joints(), loop_joints, model.actuators,
                            grounds=model.grounds)
        massless = [b.name for b in model.bodies if b.mass == 0.0]
        if massless and entry.implicit and not why:
            why = (f"{integrator} cannot step massless bodies ({massless[0]!r}: a link between "
                   "two joints of one file body); use nullspace_rk4")
        if why:
            raise ValueError(f"integrator: {why}")
        module, self._kernel = entry.module(kind, self.options, springs=bool(model.springs))
        self.backend = _create_backend(kind, model, module)
        if loop_joints:
            from rtrigid.backends.tree.loops_em import stepper

            self._kernel = stepper(integrator, self.options, self.backend)
        self._contacts = self._contact_setup(model, kind, integrator)
        self.backend.solver[SOLVER_MAX_ITER] = max_iter
        self.backend.solver[SOLVER_HALVINGS] = max_halvings
        # (0: none; the kernels that keep a budget read it, see integrators.Integrator)
        self.backend.solver[SOLVER_BUDGET] = step_budget or 0
        self.step_budget = step_budget
        self._budgeted = entry.step_budget and kind != BODIES and not loop_joints
        self._budget_warned = False
        self.model = copy.deepcopy(model)  # what was simulated, whatever the caller edits later
        self.integrator = integrator
        self.implicit = entry.implicit
        self.names = [b.name for b in model.bodies]  # a copy: later model edits do not reach us
        self.nb = len(self.names)
        # joint handles: the model's joints in order (what add_joint returned), then the
        # implicit ones (pivots, free bodies), in body order
        inbound = self.backend.joints
        explicit = {j.child for j in model.joints}
        self._joint_child = [j.child for j in model.joints] + [
            b for b in range(self.nb) if b not in explicit]
        self.joint_names = [inbound[b].name for b in self._joint_child]
        self._loop_names = [j.name for j in loop_joints]
        # qpos / qvel: joint by joint in handle order; where each entry sits in the backend's
        # own coordinates, and where the unit quaternions start (see qpos())
        qidx, vidx, self._quat_at = [], [], []
        for b in self._joint_child:
            qs, vs = self.backend.slots(b)
            k = KINDS[inbound[b].kind].quaternion
            if k >= 0:
                self._quat_at.append((len(qidx) + k, inbound[b].name))
            qidx.extend(range(qs.start, qs.stop))
            vidx.extend(range(vs.start, vs.stop))
        self._qidx, self._vidx = np.array(qidx, np.intp), np.array(vidx, np.intp)
        self.nq, self.nv = len(qidx), len(vidx)
        self._queries = None  # see _dynamics()
        # every joint with its geometry, tree and loop joints: what constraint_error checks
        self._all_joints = (list(zip(self.backend.joints, self.backend.geometry))
                            + [(j, geometry(j)) for j in loop_joints])
        # set_joint_force's fast path: each handle's rate in the backend if it has one alone
        self._force_at = [self.backend.slots(b)[1].start
                          if self.backend.slots(b)[1].stop - self.backend.slots(b)[1].start == 1
                          else -1 for b in self._joint_child]
        # actuators: names in model order, their controls (in the applied loads) and
        # cumulative work (in the state); ctrl_range clamps what set_control(s) is given
        self.actuator_names = [a.name for a in model.actuators]
        self.na = len(self.actuator_names)
        self._ctrl = getattr(self.backend, "controls", np.zeros(0))
        self._awork = getattr(self.backend, "actuator_work", np.zeros(0))
        self._ctrl_lo = np.array([a.ctrl_range[0] for a in model.actuators], float)
        self._ctrl_hi = np.array([a.ctrl_range[1] for a in model.actuators], float)
        self._na_shape = (self.na,)
        if self.na and not self.implicit:
            self._check_servo_gains(model)
        # limited coordinates: (rate index, coordinate index) in the backend's order, limits
        self._limits = []
        for b in self._joint_child:
            j = inbound[b]
            if j.limits[0] > -np.inf or j.limits[1] < np.inf:
                qs, vs = self.backend.slots(b)
                self._limits.append((vs.start, qs.start, *j.limits))
        self._steps = 0
        self._accumulator = 0.0
        self.dropped_time = 0.0
        self._busy = threading.Lock()  # held while stepping: see the threading note above
        b = self.backend
        self.x, self.q = _readonly(b.x), _readonly(b.q)
        self._F, self._I, self._stats = b.F, b.I, b.stats  # step() reads these on every call
        # qpos() / qvel(): one copy of the backend's own array where the layouts agree
        tree = b.name != BODIES
        self._qpos_src = (b.positions() if tree and np.array_equal(
            self._qidx, np.arange(len(b.positions()))) else None)
        self._qvel_src = (b.nu if tree and not b._mean_rates and np.array_equal(
            self._vidx, np.arange(len(b.nu))) else None)
        self._fingerprint = self._make_fingerprint()

    def _make_fingerprint(self):
        """What a snapshot must match: the frozen model, the integrator with its options, the
        step and the solver settings."""
        b = self.backend
        loops = getattr(b, "loops", None)
        return hashlib.sha256(b"".join((
            b.model_digest, b.solver.tobytes(),
            self._contacts.digest if self._contacts is not None else b"",
            b"" if loops is None else loops.lf.tobytes() + loops.li.tobytes(),
            repr((self.integrator, sorted(self.options.items()), self.dt)).encode()))).hexdigest()

    def set_step_budget(self, step_budget):
        """Set ``step_budget`` (see the class docstring; None: no budget) from the next step on.

        The budget is one of the solver settings a snapshot records: a snapshot taken before
        the change is refused by :meth:`restore` after it (its steps would not repeat).
        ``ValueError`` naming ``step_budget`` for a bad value (the budget is then unchanged).
        """
        if step_budget is not None:
            step_budget = as_int(step_budget, "step_budget", minimum=1)
        self.backend.solver[SOLVER_BUDGET] = step_budget or 0
        self.step_budget = step_budget
        self._fingerprint = self._make_fingerprint()

    def _contact_setup(self, model, kind, integrator):
        """The contact model (None without a ground), and the step kernel that solves the
        contacts after each free-flight step."""
        from rtrigid.contact import SWEEPS, Contacts, has_contacts

        if not has_contacts(model):
            return None
        from rtrigid.backends.bodies.contact import ContactStepper
        from rtrigid.contact.solver import START_BUDGET

        contacts = Contacts(model)
        # an approach slower than two steps' fall is a resting contact: no rebound
        rest_speed = 2.0 * float(np.linalg.norm(model.gravity)) * self.dt
        # a flight that does not keep energy: the event's budget from the step's start
        budget = 0 if integrators.get(integrator).keeps_energy else START_BUDGET
        if kind == BODIES:
            self._kernel = ContactStepper(self._kernel, contacts, self.backend.frozen.kind,
                                          SWEEPS, rest_speed,
                                          extra=(np.zeros(0), np.array([budget], np.int64)))
            return contacts
        if getattr(model, "loop_joints", None):
            raise ValueError("grounds: contacts on a model with loop joints are not stepped "
                             "yet")
        spin = [b.name for b in model.bodies
                if b.torsional_friction > 0.0 or b.rolling_friction > 0.0]
        if spin or any(g.torsional_friction > 0.0 or g.rolling_friction > 0.0
                       for g in model.grounds):
            raise ValueError("torsional_friction: torsional and rolling friction are stepped "
                             f"for free-body models only so far (bodies {spin}, or a ground)")
        from rtrigid.backends.tree import contact as tree_contact

        tree = self.backend.tree
        order = contacts.ints[:, 0]
        ti, voff = tree.ti, tree_contact.I_VOFF
        perm = [i for b in order for i in range(
            ti[b, voff], ti[b, voff] + int(tree_contact.NV[ti[b, tree_contact.I_KIND]]))]
        xi = np.array([int(self.backend._mean_rates) or budget] + perm, np.int64)
        xf = np.zeros(tree_contact.scratch_size(len(contacts.table), tree.nb, tree.nq,
                                                tree.nv))
        self._kernel = ContactStepper(self._kernel, contacts, None, SWEEPS, rest_speed,
                                      after=tree_contact.__name__, extra=(xf, xi))
        return contacts

    def contacts(self):
        """The contacts of the last step (a list of dicts; empty without a ground).

        Each: ``body`` (handle) and ``name``, ``other`` (None: a ground), ``point`` (world,
        on the body's surface), ``normal`` (unit, world, from the other side into the
        body), ``depth`` (how far the point lay below the surface after the free flight,
        before the body was moved out), ``impulse`` (world, on the body at the point:
        normal and friction parts; N s).
        """
        if self._contacts is None:
            return []
        return self._contacts.report(self.names)

    # -- time and stepping ----------------------------------------------------------------
    @property
    def t(self) -> float:
        """Simulated time: steps taken times dt (no accumulated round-off)."""
        return self._steps * self.dt

    @property
    def steps_taken(self) -> int:
        return self._steps

    def step(self, n=1):
        """Advance ``n`` fixed steps in one compiled call.

        Raises :class:`SimulationError` if a step cannot be completed (an implicit solve that
        fails even after its fallback, or a non-finite state); the state is then the one
        after the last completed step, never NaN.
        """
        if type(n) is not int or n < 0 or n > MAX_STEPS - self._steps:
            n = self._checked_n(n)
        if not self._busy.acquire(False):
            raise RuntimeError(_TWO_THREADS)
        try:
            before = self._stats[STAT_STEPS] if n != 1 else -1  # see _failed
            status = self._call(n, self.dt, self._F, self._I)
            if status == OK:
                self._steps += n
            else:
                self._failed(status, before)
        finally:
            self._busy.release()

    def _checked_n(self, n):
        """step()'s n as an int, or ValueError naming it (the path a plain valid int skips)."""
        if type(n) is not int:
            if isinstance(n, bool) or not isinstance(n, np.integer):
                raise ValueError(f"n: expected a non-negative integer, got {n!r}")
            n = int(n)  # any integer type runs the one int64 kernel (no new compilation)
        if n < 0:
            raise ValueError(f"n: expected a non-negative integer, got {n!r}")
        if n > MAX_STEPS - self._steps:
            raise ValueError(f"n: {n} steps would take the step count past {MAX_STEPS} (2**53, "
                             "where the clock t = steps * dt stops being exact)")
        return n

    @property
    def _kernel(self):
        """The step kernel (a numba dispatcher, or a stepper object); setting it makes the
        next step call it through :meth:`_first_call` again."""
        return self._kernel_fn

    @_kernel.setter
    def _kernel(self, kernel):
        self._kernel_fn = kernel
        self._call = self._first_call

    def _first_call(self, n, dt, F, I):
        """The kernel through numba's dispatcher (which compiles it or loads it from the
        cache), then :attr:`_call` becomes its compiled entry point: called directly it
        skips the dispatcher's type resolution (0.47 -> 0.37 us for an empty step on the
        2-link arm).  Kernels that are not numba dispatchers (the contact and loop
        steppers) stay as they are."""
        status = self._kernel(n, dt, F, I)
        self._call = _entry_point(self._kernel, n, dt, F, I)
        return status

    def _step(self, n):
        """step(n) without the checks, for :meth:`advance` (which holds the lock)."""
        before = self._stats[STAT_STEPS]
        status = self._call(n, self.dt, self._F, self._I)
        if status == OK:
            self._steps += n
        else:
            self._failed(status, before)

    def _failed(self, status, before):
        """Count the completed steps of a call that did not complete; warn or raise.

        ``before``: the step counter before the call, or -1 for a call of one step (a
        control tick skips reading the counter: ~0.04 us), which completed unless its status
        is a failure (FAILED or NONFINITE; USED_FALLBACK and USED_BUDGET aside)."""
        if before < 0:
            self._steps += 0 if status & ~(USED_FALLBACK | USED_BUDGET) else 1
        else:
            self._steps += int(self._stats[STAT_STEPS] - before)
        if status & USED_FALLBACK:
            warnings.warn(
                f"{self.integrator}: Newton did not converge on some step(s); they were redone "
                "as sub-steps (counts in solver_stats())", RuntimeWarning, stacklevel=3)
            status &= ~USED_FALLBACK
        if status & USED_BUDGET:
            if not self._budget_warned:  # once per simulation: a hard motion hits it often
                self._budget_warned = True
                warnings.warn(
                    f"{self.integrator}: some step(s) ran out of step_budget "
                    f"({self.step_budget} Newton iterations) and took the budget outcome, an "
                    "explicit step whose energy is capped: not an energy-momentum step "
                    "(counts in solver_stats()['budget_steps'])", RuntimeWarning, stacklevel=3)
            status &= ~USED_BUDGET
        if status != OK:
            what = ("Newton failed even with 2**max_halvings sub-steps" if status == FAILED
                    else "the state became non-finite")
            hint = ("a smaller dt" if not self.implicit
                    else "a smaller dt or a larger max_iter / max_halvings")
            raise SimulationError(
                f"{self.integrator}: step {self._steps + 1} (t={self.t:.6g}) not taken: {what}; "
                f"the state is that of the last completed step; try {hint}")

    def solver_stats(self) -> dict:
        """Counters since construction: steps, Newton iterations (of converged solves),
        fallbacks; where a step budget is kept (see ``step_budget``), also
        ``charged_iterations`` (what the budgets counted: every converged solve's iterations,
        every failed one's cap, and 4 per explicit start), ``budget_steps`` (steps that took
        the budget outcome; not counted in ``fallback_steps``) and ``path_steps`` (steps taken
        whole along the path of their solution in h, the jointed ``energy_momentum``'s; not
        fallbacks either)."""
        s = self.backend.stats
        steps = int(s[STAT_STEPS])
        out = {"steps": steps}
        if self.implicit:
            out.update(
                newton_iterations=int(s[STAT_ITERS]),
                mean_iterations=float(s[STAT_ITERS]) / max(steps, 1),
                max_iterations=int(s[STAT_MAX_ITERS]),
                fallback_steps=int(s[STAT_FALLBACKS]),
            )
        if self.implicit and self._budgeted:
            out.update(charged_iterations=int(s[STAT_SPENT]), budget_steps=int(s[STAT_BUDGET]),
                       path_steps=int(s[STAT_PATH]))
        return out

    # -- real-time stepping ----------------------------------------------------------------
    def advance(self, elapsed):
        """Consume ``elapsed`` wall-clock seconds in whole fixed steps; return the step count.

        The remainder stays in an accumulator for the next call; :attr:`alpha` tells how far
        the remainder reaches into the next step, for interpolated rendering
        (:meth:`interpolated_pose`).  At most ``max_steps_per_advance`` steps run per call.
        """
        elapsed = as_scalar(elapsed, "elapsed", nonnegative=True)
        steps = (self._accumulator + elapsed) / self.dt
        if not steps < MAX_STEPS - self._steps:  # also refuses an overflow to inf
            raise ValueError(f"elapsed: {elapsed:g} s is more than this simulation can count in "
                             f"steps of {self.dt:g} s")
        if not self._busy.acquire(False):
            raise RuntimeError(_TWO_THREADS)
        try:
            self._accumulator += elapsed
            # the 1e-9 keeps 0.03 s at dt = 0.01 from giving 2 steps (0.03 / 0.01 = 2.99...96)
            n = int(math.floor(self._accumulator / self.dt + 1e-9))
            if n > self.max_steps_per_advance:
                dropped = (n - self.max_steps_per_advance) * self.dt
                self.dropped_time += dropped
                self._accumulator -= dropped
                n = self.max_steps_per_advance
            self._accumulator = max(self._accumulator - n * self.dt, 0.0)
            if n:
                self._step(n)
        finally:
            self._busy.release()
        return n

    @property
    def alpha(self) -> float:
        """Interpolation factor in [0, 1): accumulated time past the last step, over dt."""
        return min(self._accumulator / self.dt, 1.0)

    def interpolated_pose(self, body, alpha=None):
        """Pose between the previous and the current step (x lerp, q slerp) for rendering."""
        b = self.body_index(body)
        a = self.alpha if alpha is None else as_scalar(alpha, "alpha", nonnegative=True)
        if a > 1.0:
            raise ValueError(f"alpha: must be in [0, 1], got {a}")
        be = self.backend
        x = (1.0 - a) * be.x_prev[b] + a * be.x[b]
        q = quat.quat_slerp(be.q_prev[b].copy(), be.q[b].copy(), a, np.empty(4))
        return x, q

    # -- bodies -----------------------------------------------------------------------------
    def body_index(self, body) -> int:
        """Resolve a body handle (what ``Model.add_body`` returned) or name."""
        if isinstance(body, (int, np.integer)) and not isinstance(body, bool):
            if 0 <= body < self.nb:
                return int(body)
            raise ValueError(f"body: index {body} out of range (simulation has {self.nb})")
        if isinstance(body, str):
            if body in self.names:
                return self.names.index(body)
            raise ValueError(f"body: no body named {body!r}; known: {self.names}")
        raise ValueError(f"body: expected an index or a name, got {body!r}")

    def pose(self, body):
        """World centre-of-mass position and unit quaternion, body -> world (copies)."""
        b = self.body_index(body)
        return self.backend.x[b].copy(), self.backend.q[b].copy()

    def link_pose(self, link):
        """World origin and unit quaternion (link axes -> world axes) of a link frame as the
        file of :func:`rtrigid.load_model` defines it (copies), merged links included; a body
        name gives the body frame (its centre of mass on principal axes), as :meth:`pose`."""
        links = self.model.links
        if not isinstance(link, str) or (link not in links and link not in self.names):
            raise ValueError(f"link: no link {link!r}; known: {sorted(links) or self.names}")
        if link not in links:
            return self.pose(link)
        b, p, r = links[link]
        if b < 0:
            return p.copy(), r.copy()
        xb, qb = self.backend.x[b], self.backend.q[b]
        return xb + quat.rotate(qb, p, np.empty(3)), quat.quat_mul(qb, r, np.empty(4))

    @property
    def v(self):
        """Centre-of-mass velocities at t, (nb, 3) world axes (read-only view)."""
        return _readonly(self.backend.velocities()[0])

    @property
    def w(self):
        """Angular velocities at t, (nb, 3) each in its body's axes (read-only view)."""
        return _readonly(self.backend.velocities()[1])

    def velocity(self, body, frame="world"):
        """(centre-of-mass velocity, angular velocity) at t, in world axes or, with
        ``frame="body"``, in the body's axes (copies).

        These are the velocities of the joint rates at t (:meth:`qvel`,
        :meth:`joint_velocity`) under every integrator.  The jointed ``energy_momentum``
        steps the bodies' momenta, which meet the joints' velocity constraints only to
        O(dt^2); it reports the rates whose generalized momentum is the bodies', and their
        velocities, while :meth:`energy` and :meth:`momentum` are the scheme's own (the
        quantities it conserves), computed from the momenta.
        """
        b = self.body_index(body)
        as_frame(frame)
        q = self.backend.q
        v, w = self.backend.velocities()
        if frame == "body":
            return quat.rotate_inv(q[b], v[b], np.empty(3)), w[b].copy()
        return v[b].copy(), quat.rotate(q[b], w[b], np.empty(3))

    def _write(self, field, write):
        """Run a state write; if the state it leaves (or its energy or momentum) is not finite,
        put everything back and refuse the value, naming ``field``."""
        be = self.backend
        saved = be.S.copy(), be.S_prev.copy()
        with np.errstate(all="ignore"):
            try:
                write()
                linear, angular = self.momentum()
                ok = (bool(np.all(np.isfinite(be.S))) and np.isfinite(self.energy())
                      and bool(np.all(np.isfinite(linear)) and np.all(np.isfinite(angular))))
            except FloatingPointError:
                ok = False
            except ValueError:  # a write the backend refuses (a loop it cannot close)
                be.S[:], be.S_prev[:] = saved
                raise
        if not ok:
            be.S[:], be.S_prev[:] = saved
            raise ValueError(f"{field}: the state would not be finite with this value (its "
                             "energy or momentum overflows); the simulation is unchanged")

    def _to_world(self, b, vector, frame):
        """A vector given in ``frame`` as world components."""
        if frame == "body":
            return quat.rotate(self.backend.q[b], vector, np.empty(3))
        return vector

    def set_orientation(self, body, q):
        """Set the orientation (normalised); a pivoted body turns about its pivot."""
        b = self.body_index(body)
        q = _unit_quaternion(as_vector(q, 4, "q"), "q")
        self._write("q", lambda: self.backend.set_body(b, q=q))

    def set_angular_velocity(self, body, omega, frame="world"):
        """Set the angular velocity, given in world axes (default) or body axes."""
        b = self.body_index(body)
        omega = as_vector(omega, 3, "omega")
        frame = as_frame(frame)
        self._write("omega", lambda: self.backend.set_body(b, w=omega, w_frame=frame))

    def set_position(self, body, x):
        """Set the centre-of-mass position (world) of a free body."""
        b = self.body_index(body)
        x = as_vector(x, 3, "x")
        self._write("x", lambda: self.backend.set_body(b, x=x))

    def set_velocity(self, body, v, frame="world"):
        """Set the centre-of-mass velocity of a free body, in world (default) or body axes."""
        b = self.body_index(body)
        v = self._to_world(b, as_vector(v, 3, "v"), as_frame(frame))
        self._write("v", lambda: self.backend.set_body(b, v=v))

    # -- joints -----------------------------------------------------------------------------
    def joint_index(self, joint) -> int:
        """Resolve a joint handle (what ``Model.add_joint`` returned) or name to its handle."""
        if isinstance(joint, (int, np.integer)) and not isinstance(joint, bool):
            if 0 <= joint < len(self._joint_child):
                return int(joint)
            raise ValueError(f"joint: no joint with handle {joint}; handles are what "
                             "Model.add_joint returned, names work too: "
                             f"{self.joint_names}")
        if isinstance(joint, str) and joint in self.joint_names:
            return self.joint_names.index(joint)
        raise ValueError(f"joint: no joint {joint!r}; known: {self.joint_names}")

    def _joint_body(self, joint):
        return self._joint_child[self.joint_index(joint)]

    def joint_position(self, joint):
        """The joint's coordinates (a copy), see the table of :mod:`rtrigid.joints`."""
        return self.backend.joint_state(self._joint_body(joint))[0]

    def joint_velocity(self, joint):
        """The joint's rates at t (a copy), see the table of :mod:`rtrigid.joints` and
        :meth:`qpos`."""
        return self.backend.joint_state(self._joint_body(joint))[1]

    def set_joint_position(self, joint, value):
        """Set a joint's coordinates; the bodies beyond it move along (a teleport)."""
        b = self._joint_body(joint)
        j = self.backend.joints[b]
        n = len(self.backend.joint_state(b)[0])
        if n == 0:
            raise ValueError(f"joint: {j.name!r} ({j.kind}) has no coordinates")
        value = as_vector(value, n, "value")
        k = KINDS[j.kind].quaternion
        if k >= 0:
            value[k:k + 4] = _unit_quaternion(value[k:k + 4], "value")
        lo, hi = j.limits
        if n == 1 and not lo <= value[0] <= hi:
            raise ValueError(f"value: {value[0]} is outside the limits [{lo}, {hi}] of joint "
                             f"{j.name!r}")
        self._write("value", lambda: self.backend.set_joint_state(b, qpos=value))

    def set_joint_velocity(self, joint, value):
        """Set a joint's rates (see the table of :mod:`rtrigid.joints`)."""
        b = self._joint_body(joint)
        n = len(self.backend.joint_state(b)[1])
        if n == 0:
            raise ValueError(f"joint: {self.backend.joints[b].name!r} has no rates")
        value = as_vector(value, n, "value")
        self._write("value", lambda: self.backend.set_joint_state(b, qvel=value))

    # -- generalized coordinates -----------------------------------------------------------
    def qpos(self):
        """All generalized coordinates (a new array of length ``nq``).

        Joint by joint in handle order (``joint_names``: the model's joints as added, then
        pivots and free bodies in body order), each joint's coordinates as
        :meth:`joint_position` gives them:

        =========== ==== ==== ============================================================
        kind        nq   nv   qpos / qvel
        =========== ==== ==== ============================================================
        revolute    1    1    angle about the axis (rad) / its rate
        prismatic   1    1    slide along the axis (m) / its rate
        spherical   4    3    unit quaternion of the child relative to the parent
                              (scalar first) / relative angular velocity in the child's
                              body axes
        free        7    6    centre of mass (world), unit quaternion (body -> world) /
                              centre-of-mass velocity in world axes, angular velocity in
                              body axes
        cylindrical 2    2    angle, slide / their rates
        planar      3    3    angle, slide along e1, slide along e2 / their rates
        fixed       0    0    --
        =========== ==== ==== ============================================================

        A free body's rates are those of :meth:`joint_velocity`: linear velocity in world
        axes and angular velocity in body axes (MuJoCo's convention for free joints);
        :meth:`jacobian`, :meth:`mass_matrix`, :meth:`bias_forces`,
        :meth:`inverse_dynamics` and :meth:`set_joint_force` use the same rates.
        """
        if self._qpos_src is not None:
            return self._qpos_src.copy()
        return self.backend.positions()[self._qidx]

    def qvel(self):
        """All generalized rates at the current time (a new array of length ``nv``), in the
        layout of :meth:`qpos`."""
        if self._qvel_src is not None:
            return self._qvel_src.copy()
        return self.backend.rates()[self._vidx]

    def set_qpos(self, qpos):
        """Set all generalized coordinates (layout of :meth:`qpos`); the rates are kept.

        Each quaternion is normalised (one of norm below 1e-12 is refused).  A teleport:
        the bodies move to the new configuration at once.
        """
        qpos = as_vector(qpos, self.nq, "qpos")
        for k, name in self._quat_at:
            qpos[k:k + 4] = _unit_quaternion(qpos[k:k + 4], f"qpos (joint {name!r}, "
                                                            f"entries {k}..{k + 3})")
        full = np.empty(self.nq)
        full[self._qidx] = qpos
        for _, o, lo, hi in self._limits:
            if not lo <= full[o] <= hi:
                k = int(np.flatnonzero(self._qidx == o)[0])
                raise ValueError(f"qpos: entry {k} = {full[o]} is outside its joint's limits "
                                 f"[{lo}, {hi}]")
        self._write("qpos", lambda: self.backend.set_coordinates(qpos=full))

    def set_qvel(self, qvel):
        """Set all generalized rates (layout of :meth:`qvel`); the configuration is kept."""
        qvel = as_vector(qvel, self.nv, "qvel")
        full = np.empty(self.nv)
        full[self._vidx] = qvel
        self._write("qvel", lambda: self.backend.set_coordinates(qvel=full))

    def set_joint_force(self, joint, value):
        """Hold a generalized force on the joint's rates from now on, until set again.

        ``value``: one number per rate of the joint (a plain number for a revolute or
        prismatic joint): a torque (N m) about a revolute axis, a force (N) along a prismatic
        one; for a spherical joint a torque in the child's body axes, which the parent
        receives with the opposite sign; for a free body a force (world axes, at the centre
        of mass) and a torque (body axes) -- the duals of the rates of :meth:`qvel`.  Like
        applied loads, held forces are part of snapshots; ``clear_applied`` leaves them.
        Under ``energy_momentum`` a constant revolute torque does exactly the work
        tau (theta1 - theta0) over a step, so energy() changes by that amount.
        """
        forces = self.backend.joint_forces
        if (type(value) is float and type(joint) is int and forces is not None
                and 0 <= joint < len(self._force_at) and self._force_at[joint] >= 0
                and math.isfinite(value)):  # a control loop's call: one revolute/prismatic
            forces[self._force_at[joint]] = value
            return
        b = self._joint_body(joint)
        j = self.backend.joints[b]
        if forces is None:
            raise ValueError(f"joint: {j.name!r} is a {j.kind} joint of a single body, whose "
                             "kernels take no joint force; use apply_force / apply_torque")
        vs = self.backend.slots(b)[1]
        n = vs.stop - vs.start
        if n == 0:
            raise ValueError(f"joint: {j.name!r} ({j.kind}) has no rates to take a force")
        if n == 1 and np.ndim(value) == 0 and not isinstance(value, (str, bytes)):
            value = [value]
        forces[vs] = as_vector(value, n, "value")

    def joint_force(self, joint):
        """The generalized force held on the joint's rates (a copy; zeros if none)."""
        b = self._joint_body(joint)
        vs = self.backend.slots(b)[1]
        forces = self.backend.joint_forces
        return np.zeros(vs.stop - vs.start) if forces is None else forces[vs].copy()

    # -- actuators ----------------------------------------------------------------------------
    def actuator_index(self, actuator) -> int:
        """Resolve an actuator handle (what ``Model.add_actuator`` returned) or name."""
        if isinstance(actuator, (int, np.integer)) and not isinstance(actuator, bool):
            if 0 <= actuator < self.na:
                return int(actuator)
            raise ValueError(f"actuator: no actuator with handle {actuator}; the model has "
                             f"{self.na}: {self.actuator_names}")
        if isinstance(actuator, str) and actuator in self.actuator_names:
            return self.actuator_names.index(actuator)
        raise ValueError(f"actuator: no actuator {actuator!r}; known: {self.actuator_names}")

    def set_control(self, actuator, value):
        """Set one actuator's control, held until set again (part of snapshots).

        The control is a motor's force, a position servo's target coordinate or a velocity
        servo's target rate (see :meth:`Model.add_actuator`); ``ctrl_range`` clamps it.

        How the integrators treat actuators:

        - ``energy_momentum`` (and the stages of ``energy_momentum4``): the force is taken at
          the step's mean coordinate and mean rate and enters as a torque pair whose work
          over a step is exactly gear * f * (c1 - c0): a motor's constant force is exact
          discrete work; a position servo's spring is the discrete gradient of
          kp (u - gear c)²/2 and its damper only dissipates, so with a fixed target
          energy() plus the servo's spring energy never increases, at any gain and step
          (the servo sits in the implicit step, its stiffness in the Newton matrix).  A
          saturated servo (force_range) is a constant force over the step: its work is
          still exact, but the spring energy is then not its potential, and the balance
          above holds only for the unsaturated servo.  ``energy_momentum4``'s composition
          has a negative stage, which runs a damper backwards: its work stays exact, its
          unconditional stability is not claimed.
        - ``nullspace_rk4``: the force is evaluated at every stage.  Servo gains are checked
          when the Simulation is built (see ``Simulation.__init__``'s refusal message).

        :meth:`actuator_work` accounts for every joule the actuators put in.
        """
        a = self.actuator_index(actuator)
        if type(value) is not float or not math.isfinite(value):
            value = as_scalar(value, "value")
        self._ctrl[a] = min(max(value, self._ctrl_lo.item(a)), self._ctrl_hi.item(a))

    def set_controls(self, u):
        """Set every actuator's control, ``u`` of length ``na`` in model order
        (``actuator_names``); clamped to each ``ctrl_range`` (see :meth:`set_control`)."""
        if not (type(u) is np.ndarray and u.dtype is _F64 and u.shape == self._na_shape
                and u.strides == _STRIDE_F64
                and self._clamp(u, self._ctrl_lo, self._ctrl_hi, self._ctrl)):
            # the full checks (on a copy; a non-finite entry is refused here)
            clamp_into(as_vector(u, self.na, "u"), self._ctrl_lo, self._ctrl_hi, self._ctrl)

    def _clamp(self, u, lo, hi, out):
        """:func:`clamp_into` through numba's dispatcher; then the instance's ``_clamp``
        becomes its compiled entry point for these types (0.43 -> 0.26 us a set_controls on
        the 7-link arm), as :meth:`_first_call` does for the kernel.  Only contiguous float64
        vectors reach it (the entry point reads its arrays with the layout it was compiled
        for)."""
        ok = clamp_into(u, lo, hi, out)
        self._clamp = _entry_point(clamp_into, u, lo, hi, out)
        return ok

    def controls(self):
        """The controls held now (a copy, model order)."""
        return self._ctrl.copy()

    def actuator_forces(self):
        """Each actuator's force (before the gear) in the current state, at the rates of
        :meth:`qvel` (a new array, model order)."""
        out = np.empty(self.na)
        if self.na:
            from rtrigid.backends.tree.kinematics import ACT_Q, ACT_V, actuator_force

            act = self.backend.act
            Qg, nu = self.backend.positions(), self.backend.rates()
            for a in range(self.na):
                out[a] = actuator_force.py_func(act, a, self._ctrl, Qg[int(act[a, ACT_Q])],
                                                nu[int(act[a, ACT_V])])
        return out

    def actuator_work(self):
        """The work each actuator has done since construction (J; a new array, model order).

        Part of the state: snapshots keep it, a failed step rolls it back.  Under
        ``energy_momentum`` it is the exact discrete work, so ``energy() -
        actuator_work().sum()`` stays constant to round-off (a servo's work is minus the
        change of its spring energy plus its damper's loss).  Under ``nullspace_rk4`` it is
        RK4's quadrature of the power (fourth order in dt).
        """
        return self._awork.copy()

    def _check_servo_gains(self, model):
        """Refuse servo gains outside the stable range of the explicit scheme.

        Each servo alone on its joint, the other joints free, is the oscillator
        m s² + kv g² s + kp g² = 0 with m = 1 / (M^-1)_jj the joint's apparent inertia at the
        initial state (M the mass matrix); RK4 is stable for |s| dt <= 2.6 in the left half
        plane (the half disk lies in its stability region), and 2.5 is asked for.  Servos on
        several joints and large changes of the configuration change the frequencies, so
        keep a margin.  With loop joints M^-1 is the map from joint force to acceleration
        with the loops acting, N (N^T M N)^-1 N^T (N a basis of the rates the loops allow).
        """
        lc = getattr(self.backend, "loops", None)
        if lc is None:
            Minv = np.linalg.inv(self.mass_matrix())
        else:  # in the backend's order, then qvel's
            Qg = self.backend.Qg
            M = lc.mass_matrix(Qg).copy()
            N = np.linalg.svd(lc.jacobian(Qg))[2][lc.rank:].T
            Minv = (N @ np.linalg.solve(N.T @ M @ N, N.T))[np.ix_(self._vidx, self._vidx)]
        for k, a in enumerate(model.actuators):
            if a.kind == "motor":
                continue
            col = self._vidx_of_joint(a.joint)
            m = 1.0 / Minv[col, col]
            g2 = a.gear * a.gear
            c, w2 = a.kv * g2 / m, a.kp * g2 / m
            if self.integrator == "semi_implicit_euler":
                self._check_euler_servo(a, m, w2 * self.dt ** 2, c * self.dt)
                continue
            disc = 0.25 * c * c - w2
            lam = math.sqrt(w2) if disc < 0.0 else 0.5 * c + math.sqrt(disc)
            if lam * self.dt > RK4_SERVO_LIMIT:
                raise ValueError(
                    f"kp: actuator {a.name!r}'s gains (kp={a.kp:g}, kv={a.kv:g}, gear={a.gear:g}) "
                    f"are beyond nullspace_rk4's stable range at dt={self.dt:g}: with the joint's "
                    f"apparent inertia m_eff={m:.4g} at the initial state its fastest rate is "
                    f"|s|={lam:.4g}/s, |s| dt={lam * self.dt:.3g} > {RK4_SERVO_LIMIT} "
                    f"(kp g² dt²/m_eff must stay below {RK4_SERVO_LIMIT ** 2:g} and "
                    f"kv g² dt/m_eff below {RK4_SERVO_LIMIT:g}, here {w2 * self.dt ** 2:.3g} and "
                    f"{c * self.dt:.3g}); lower the gains or dt, or use energy_momentum, whose "
                    "servos are stable at any gain")

    def _check_euler_servo(self, a, m, stiff, damp):
        """semi_implicit_euler, its damping implicit: the servo alone on its joint,
        x'' = -w2 x - c x', steps as [[1 - a/(1+b), 1/(1+b)], [-a/(1+b), 1/(1+b)]] on
        (x, h x') with a = w2 h², b = c h: determinant 1/(1+b), stable iff a < 4 + 2b (the
        damping widens the range).  A margin is asked for, as the coupling of joints and
        the configuration move the apparent inertia."""
        bound = EULER_SERVO_MARGIN * (4.0 + 2.0 * damp)
        if stiff > bound:
            raise ValueError(
                f"kp: actuator {a.name!r}'s gains (kp={a.kp:g}, kv={a.kv:g}, gear={a.gear:g}) "
                f"are beyond semi_implicit_euler's stable range at dt={self.dt:g}: with the "
                f"joint's apparent inertia m_eff={m:.4g} at the initial state, "
                f"kp g² dt²/m_eff = {stiff:.3g} must stay below {EULER_SERVO_MARGIN:g} "
                f"(4 + 2 kv g² dt/m_eff) = {bound:.3g} (its damping is implicit, its stiffness "
                "explicit); lower kp or dt, raise kv, or use energy_momentum, whose servos are "
                "stable at any gain")

    def _vidx_of_joint(self, j):
        """Index in qvel of joint handle j's first rate."""
        b = self._joint_child[j]
        start = self.backend.slots(b)[1].start
        return int(np.nonzero(self._vidx == start)[0][0])

    # -- dynamics queries (on the current state; rates and forces in the layout of qvel) --------
    def _dynamics(self):
        """The query engine: the model's tree with its own scratch, made on first use (its
        kernels compile then).  Both backends keep their coordinates in that tree's order."""
        if self._queries is None:
            from rtrigid.backends.tree.dynamics import Queries
            from rtrigid.backends.tree.loops import LoopClosure

            queries = Queries(self.model, LoopClosure)
            if any(queries.slots(b) != self.backend.slots(b) for b in range(self.nb)):
                raise RuntimeError("the backend's coordinates are not in the tree's order")
            if queries.loops is not None:  # the mechanism's rank, as the stepper's
                queries.loops.rank = self.backend.loops.rank
            self._queries = queries
        return self._queries

    def mass_matrix(self):
        """The joint-space mass matrix M(qpos), (nv, nv), symmetric positive definite: the
        kinetic energy is qvel^T M qvel / 2 (rates and their order as in :meth:`qpos`).
        The composite-rigid-body algorithm, O(nv * depth).

        With loop joints (:meth:`Model.add_loop_joint`) it is the spanning tree's matrix in
        the tree's rates (what MuJoCo's qM is beside its equality constraints): the energy
        formula holds, and the motion obeys M qacc + bias = tau + J^T lambda with the loops'
        rows J qvel = 0 and their multipliers lambda (see :meth:`joint_reaction`)."""
        Qg = self.backend.positions()
        return self._dynamics().mass_matrix(Qg)[np.ix_(self._vidx, self._vidx)]

    def bias_forces(self):
        """(nv,) Coriolis, centrifugal and gravity forces at the current state: the
        equations of motion are M qacc + bias = tau, tau everything else acting on the rates
        (joint forces, springs, dampers, applied loads) -- MuJoCo's qfrc_bias.  With loop
        joints it is the spanning tree's, and the loops' reactions J^T lambda join tau (see
        :meth:`mass_matrix`)."""
        Qg, nu = self.backend.positions(), self.backend.rates()
        zero = np.zeros(self.nv)
        return self._dynamics().inverse_dynamics(Qg, nu, zero)[self._vidx]

    def inverse_dynamics(self, qacc):
        """(nv,) the generalized force to add on the rates for accelerations ``qacc`` now.

        Gravity, applied forces and torques, springs, joint springs and dampers, the
        joint forces already held (:meth:`set_joint_force`) and the actuators' forces at the
        present controls (:meth:`actuator_forces`) are accounted for: holding
        ``joint force + inverse_dynamics(qacc)`` gives qacc.  With none of those acting it
        is M qacc + bias.  The recursive Newton-Euler algorithm, O(nv).

        With loop joints the answer is one of many (adding the loops' reactions J^T lambda
        changes nothing): the one for which the loops carry no load.  Holding it gives qacc
        itself when qacc meets the loops' acceleration rows (J qacc = -gamma), and otherwise
        qacc's projection onto them in the mass metric, which is what the loops let through.
        """
        qacc = as_vector(qacc, self.nv, "qacc")
        nudot = np.empty(self.nv)
        nudot[self._vidx] = qacc
        be = self.backend
        return self._dynamics().inverse_dynamics(be.positions(), be.rates(), nudot,
                                                 self._joint_loads())[self._vidx]

    def _joint_loads(self):
        """(f_app, t_app, held) now: the applied loads, and the held joint forces with the
        actuators' forces at the present controls added (backend order)."""
        be = self.backend
        held = be.joint_forces if be.joint_forces is not None else np.zeros(self.nv)
        if self.na:  # the actuators act too
            held = held.copy()
            from rtrigid.backends.tree.kinematics import ACT_GEAR, ACT_V

            np.add.at(held, be.act[:, ACT_V].astype(np.intp),
                      be.act[:, ACT_GEAR] * self.actuator_forces())
        return self._f_app, self._t_app, held

    def _motion(self):
        """The query engine's :meth:`~rtrigid.backends.tree.dynamics.Queries.motion` now."""
        be = self.backend
        return self._dynamics().motion(be.positions(), be.rates(), self._joint_loads(),
                                       self._limits)

    def imu(self, body, point_body=(0.0, 0.0, 0.0)):
        """(gyro, accel) of an inertial measurement unit fixed at a body point, body axes.

        ``gyro``: the body's angular velocity at t (what ``velocity(body, frame="body")[1]``
        gives).  ``accel``: the specific force a - g of the point ``point_body`` (body axes,
        from the centre of mass) at t, what an accelerometer there reads: a by forward
        dynamics in the current state with everything that acts (gravity, applied loads,
        springs, joint springs, dampers and held joint forces, and the reaction of a joint
        limit the joint sits on).  At rest under gravity it reads -g in body axes.  With
        loop joints a is the motion the loops allow (their reactions act).
        """
        b = self.body_index(body)
        point = as_vector(point_body, 3, "point_body")
        from rtrigid.backends.tree.dynamics import specific_force

        nudot, acc, wrench, V, rj, R = self._motion()
        accel = np.empty(3)
        specific_force(acc, V, R, rj, self.backend.x, self.backend.gravity, b, point, accel)
        return self.backend.velocities()[1][b].copy(), accel

    def joint_reaction(self, joint):
        """(force, torque) the joint transmits from its parent (or the world) to its child,
        world axes, at t; the torque is about the joint point (the child's anchor, as
        ``joints()`` reports it).

        It is everything the parent side exerts on the child through the joint: the
        constraint reaction, the joint's own held force, spring and damper, and a limit's
        reaction while the joint sits on the limit -- by Newton-Euler on the child's
        subtree, the rate of change of its momentum less the external loads on it.  A free
        body's joint transmits nothing (zeros).

        With loop joints the loops' reactions act on the tree's bodies, and ``joint`` may
        also name a loop joint (:meth:`Model.add_loop_joint`): its reaction on its child,
        the torque about the child's anchor.  The loops' multipliers are the least-norm ones
        where their rows are redundant (a planar four-bar of spatial revolute joints): the
        reactions across a redundant direction are statically indeterminate, and any split
        gives the same motion.
        """
        if isinstance(joint, str) and joint in self._loop_names:
            queries = self._dynamics()
            self._motion()
            force, torque = queries.loop_wrenches[self._loop_names.index(joint)]
            return force.copy(), torque.copy()
        b = self._joint_body(joint)
        if self.backend.joints[b].kind == "free":
            return np.zeros(3), np.zeros(3)
        wrench = self._motion()[2]
        return wrench[b, 3:].copy(), wrench[b, :3].copy()

    def jacobian(self, body, point_body=(0.0, 0.0, 0.0)):
        """(6, nv): rows [linear; angular] world velocity of a body point per unit rate, so
        ``jacobian(b, p) @ qvel()`` is (velocity of the point, angular velocity), world axes.
        ``point_body``: body axes, from the centre of mass.  With loop joints the same
        (qvel meets the loops; the columns are the spanning tree's rates)."""
        b = self.body_index(body)
        point = as_vector(point_body, 3, "point_body")
        Qg = self.backend.positions()
        return self._dynamics().jacobian(Qg, b, point)[:, self._vidx]

    def joints(self):
        """The joints as they are now, for drawing and inspection (a list of dicts).

        Each dict has ``name``, ``kind``, ``parent`` (body index, -1 for the world),
        ``child`` (body index), ``anchor`` (world position of the joint point on the child)
        and ``axis`` (unit world vector of the joint axis, ``None`` where the kind has none),
        ``limits`` ((lower, upper) of the coordinate; (-inf, inf) where there are none).
        A body attached by :meth:`Model.attach_to_world` shows up as a spherical joint to the
        world; free bodies are left out.
        """
        out = []
        be = self.backend
        for b, (j, g) in enumerate(zip(be.joints, be.geometry)):
            if j.kind == "free":
                continue
            anchor = be.x[b] + quat.rotate(be.q[b], g.anchor_child, np.empty(3))
            axis = None
            if KINDS[j.kind].axial:
                axis = quat.rotate(be.q[b], g.axis_child, np.empty(3))
            out.append({"kind": j.kind, "parent": j.parent, "child": b, "anchor": anchor,
                        "axis": axis, "name": j.name, "limits": j.limits})
        return out

    def loop_joints(self):
        """The loop (cut) joints (:meth:`Model.add_loop_joint`), for drawing and inspection: a
        list of dicts with ``name``, ``kind``, ``parent`` (body index, -1 for the world),
        ``child``, ``anchor_parent`` and ``anchor_child`` (the joint point in the parent's
        and the child's frame; the parent's is a world point for the world) and
        ``axis_child`` (the joint axis in the child's frame, ``None`` where the kind has
        none).  Constant: place them at any poses (the loop closes where the two anchors
        meet)."""
        return [{"name": j.name, "kind": j.kind, "parent": j.parent, "child": j.child,
                 "anchor_parent": np.array(j.anchor_parent, dtype=np.float64),
                 "anchor_child": np.array(j.anchor_child, dtype=np.float64),
                 "axis_child": (np.array(j.axis_child, dtype=np.float64)
                                if KINDS[j.kind].axial else None)}
                for j in getattr(self.model, "loop_joints", ())]

    # -- diagnostics ----------------------------------------------------------------------
    @property
    def body_mass(self):
        """Body masses (a copy), kg."""
        return self.backend.mass.copy()

    @property
    def body_inertia(self):
        """Principal moments of inertia about each centre of mass (nb, 3), a copy."""
        return self.backend.inertia.copy()

    @property
    def gravity(self):
        """The gravity vector the simulation was built with (a copy)."""
        return self.backend.gravity.copy()

    def kinetic_energy(self) -> float:
        """Kinetic energy of the bodies' momenta: the integrator's own state (see
        :meth:`velocity` for the one integrator where they differ from the reported
        velocities, by O(dt^2) relative)."""
        be = self.backend
        return kinetic_energy(be.mass, be.inertia, be.v, be.w)

    def potential_energy(self) -> float:
        """Gravity and springs (point springs, joint springs)."""
        return float(self.backend.potential_energy())

    def energy(self) -> float:
        """Kinetic plus potential energy."""
        return self.kinetic_energy() + self.potential_energy()

    def momentum(self):
        """(linear, angular about the world origin), world frame."""
        be = self.backend
        out = np.empty((2, 3))
        momenta(be.mass, be.inertia, be.x, be.q, be.v, be.w, out)
        return out[0], out[1]

    def constraint_error(self) -> float:
        """Largest position-level residual: ||q| - 1| and every joint's residual
        (:func:`rtrigid.joints.residual`), loop joints included."""
        be = self.backend
        err = float(np.max(np.abs(np.linalg.norm(be.q, axis=1) - 1.0)))
        world = np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0])
        for j, g in self._all_joints:
            xp, qp = (be.x[j.parent], be.q[j.parent]) if j.parent >= 0 else world
            r = residual(j.kind, g, xp, qp, be.x[j.child], be.q[j.child])
            if r.size:
                err = max(err, float(np.max(np.abs(r))))
        return err

    # -- loads and impulses ----------------------------------------------------------------
    def _load_point(self, b, point, frame):
        """A point given in ``frame`` as a world point (None: the centre of mass)."""
        if point is None:
            return self.backend.x[b].copy()
        point = as_vector(point, 3, "point")
        if frame == "body":
            return self.backend.x[b] + quat.rotate(self.backend.q[b], point, np.empty(3))
        return point

    @property
    def _f_app(self):
        return self.backend.A[:3 * self.nb].reshape(self.nb, 3)

    @property
    def _t_app(self):
        return self.backend.A[3 * self.nb:6 * self.nb].reshape(self.nb, 3)

    def apply_force(self, body, force, point=None, frame="world"):
        """Add a constant force, acting from now on until :meth:`clear_applied`.

        ``force`` and ``point`` are in ``frame``: world components and a world point, or
        (``frame="body"``) body components and a body point from the centre of mass, both
        taken as they are now.  Without ``point`` the force acts at the centre of mass; with
        it, it is stored as the same force at the centre of mass plus the torque
        (point - x) x force, both then fixed in the world frame.  Loads add up over calls and
        persist across steps.
        """
        b = self.body_index(body)
        frame = as_frame(frame)
        f = _vec3(force, "force")
        q = self.q[b] if frame == "body" else None
        if q is not None:
            f = _rotate(q, f)
        A, i, j = self.backend.A, 3 * b, 3 * (self.nb + b)
        f0, f1, f2 = A.item(i) + f[0], A.item(i + 1) + f[1], A.item(i + 2) + f[2]
        t0, t1, t2 = A.item(j), A.item(j + 1), A.item(j + 2)
        if point is not None:
            p = _vec3(point, "point")
            if q is not None:
                r = _rotate(q, p)
            else:
                x = self.x
                r = p[0] - x.item(b, 0), p[1] - x.item(b, 1), p[2] - x.item(b, 2)
            t0 += r[1] * f[2] - r[2] * f[1]
            t1 += r[2] * f[0] - r[0] * f[2]
            t2 += r[0] * f[1] - r[1] * f[0]
        if not _finite(f0, f1, f2, t0, t1, t2):
            _refuse_nonfinite("force", [math.nan])
        A[i], A[i + 1], A[i + 2] = f0, f1, f2
        A[j], A[j + 1], A[j + 2] = t0, t1, t2

    def apply_torque(self, body, torque, frame="world"):
        """Add a constant torque (world components, or body components taken as the body
        is now), acting from now on until :meth:`clear_applied`."""
        b = self.body_index(body)
        t = _vec3(torque, "torque")
        if as_frame(frame) == "body":
            t = _rotate(self.q[b], t)
        A, j = self.backend.A, 3 * (self.nb + b)
        t0, t1, t2 = A.item(j) + t[0], A.item(j + 1) + t[1], A.item(j + 2) + t[2]
        if not _finite(t0, t1, t2):
            _refuse_nonfinite("torque", [math.nan])
        A[j], A[j + 1], A[j + 2] = t0, t1, t2

    def clear_applied(self, body=None):
        """Remove applied forces and torques (of one body, or of all); joint forces held by
        :meth:`set_joint_force` stay until set again."""
        if body is None:
            self.backend.A[:6 * self.nb] = 0.0
        else:
            b = self.body_index(body)
            self._f_app[b] = 0.0
            self._t_app[b] = 0.0

    def applied(self, body):
        """The (force, torque) currently applied to a body, world frame."""
        b = self.body_index(body)
        return self._f_app[b].copy(), self._t_app[b].copy()

    def apply_impulse(self, body, impulse=None, point=None, frame="world", *,
                      impulse_world=None, point_world=None):
        """Apply an instantaneous impulse; velocities jump at once.

        ``impulse`` and ``point`` are in ``frame`` like :meth:`apply_force`'s (default: at the
        centre of mass).  The joints (or the pivot) carry the reaction impulses, so the
        velocities stay consistent with them.  Raises ``ValueError`` (state unchanged) if the
        resulting velocities would not be finite.  ``impulse_world`` / ``point_world`` are
        the older names of ``impulse`` / ``point`` in the world frame.
        """
        b = self.body_index(body)
        frame = as_frame(frame)
        if impulse_world is not None or point_world is not None:
            if impulse is not None or frame != "world":
                raise ValueError("impulse: give impulse/point/frame or impulse_world/"
                                 "point_world, not both")
            impulse, point = impulse_world, point_world if point is None else point
        if impulse is None:
            raise ValueError("impulse: missing")
        impulse = self._to_world(b, as_vector(impulse, 3, "impulse"), frame)
        jump = self.backend.impulse(b, self._load_point(b, point, frame), impulse)
        if jump is None:
            raise ValueError(f"impulse: {impulse.tolist()} would give non-finite velocities")
        self._write("impulse", lambda: self.backend.write_velocities(jump))

    # -- snapshots --------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """Everything that determines the future: state, previous state, loads, clock,
        counters -- and the integrator with its options, which a restore checks."""
        be = self.backend
        c = self._contacts
        table = None if c is None else c.state()
        return Snapshot((be.S.copy(), be.S_prev.copy(), be.A.copy(), self._steps,
                         self._accumulator, self.dropped_time, be.stats.copy(),
                         self._fingerprint, table))

    def restore(self, snap: Snapshot):
        """Return to a snapshot taken from this simulation, bit for bit."""
        be = self.backend
        if not isinstance(snap, Snapshot):
            raise ValueError(f"snap: expected a Snapshot, got {type(snap).__name__}")
        S, S_prev, A, steps, acc, dropped, stats, fingerprint, table = snap._data
        if fingerprint != self._fingerprint:
            raise ValueError("snap: taken from a simulation of another model, integrator, "
                             "option, step or solver setting (max_iter, max_halvings, "
                             "step_budget); this one cannot continue it")
        be.S[:] = S
        be.S_prev[:] = S_prev
        be.A[:] = A
        be.stats[:] = stats
        self._steps = steps
        self._accumulator = acc
        self.dropped_time = dropped
        if table is not None:
            self._contacts.set_state(table)


_F64 = np.dtype(np.float64)
_STRIDE_F64 = (8,)  # a contiguous float64 vector's strides
_PLAIN_NUMBERS = frozenset((float, int, np.float64, np.float32, np.int64, np.int32))


def _vec3(value, name):
    """``as_vector(value, 3, name)`` as a tuple of floats: a fast path for a tuple, list or
    array of three plain finite numbers (what a control loop passes), the full checks and
    their messages for anything else."""
    if type(value) in (tuple, list, np.ndarray) and len(value) == 3:
        a, b, c = value
        if (type(a) in _PLAIN_NUMBERS and type(b) in _PLAIN_NUMBERS
                and type(c) in _PLAIN_NUMBERS):
            try:
                a, b, c = float(a), float(b), float(c)
            except OverflowError:  # a huge int: the slow path says so
                pass
            else:
                if _finite(a, b, c):
                    return a, b, c
    return tuple(as_vector(value, 3, name).tolist())


def _finite(*values):
    for v in values:
        if not math.isfinite(v):
            return False
    return True


def _rotate(q, v):
    """R(q) v for a unit quaternion (w, x, y, z) (an array) and a 3-tuple, as a tuple."""
    w, x, y, z = q.tolist()
    t0 = 2.0 * (y * v[2] - z * v[1])
    t1 = 2.0 * (z * v[0] - x * v[2])
    t2 = 2.0 * (x * v[1] - y * v[0])
    return (v[0] + w * t0 + y * t2 - z * t1, v[1] + w * t1 + z * t0 - x * t2,
            v[2] + w * t2 + x * t1 - y * t0)


def _refuse_nonfinite(field, *arrays):
    if not all(np.all(np.isfinite(a)) for a in arrays):
        raise ValueError(f"{field}: the applied loads would not be finite with this value; "
                         "the simulation is unchanged")


def _unit_quaternion(q, name):
    """q / |q|, computed without overflow (q may hold numbers up to 1e308)."""
    big = float(np.max(np.abs(q)))
    scaled = q / big if big > 0.0 else q
    norm = float(np.linalg.norm(scaled)) * big
    if norm < 1e-12:
        raise ValueError(f"{name}: quaternion of norm {norm:g} cannot be normalised")
    return scaled / np.linalg.norm(scaled)
