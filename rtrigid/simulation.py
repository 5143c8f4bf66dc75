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
from collections import namedtuple
from typing import Any

import numpy as np
from numpy.typing import NDArray

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
)
from rtrigid._jit import query
from rtrigid.joints import KINDS, geometry, residual
from rtrigid.maths import quat
from rtrigid.maths.linalg import kinetic_energy, momenta
from rtrigid.model import Model
from rtrigid.simulation_actuators import (  # noqa: F401  (importable from here too)
    EULER_SERVO_MARGIN,
    RK4_SERVO_LIMIT,
    ActuatorsMixin,
)
from rtrigid.simulation_bodies import BodiesMixin
from rtrigid.simulation_helpers import Handle, entry_point, readonly
from rtrigid.simulation_joints import JointsMixin
from rtrigid.simulation_loads import LoadsMixin
from rtrigid.simulation_queries import QueriesMixin
from rtrigid.simulation_rays import (  # noqa: F401  (rtrigid.Hit, Closest, Overlap)
    Closest,
    Hit,
    Overlap,
    RaysMixin,
)
from rtrigid.validate import as_int, as_scalar


MAX_STEPS = 2**53
# Simulation's default step_budget: none (docs/guide/step-budget.md: a budget low enough for
# real time is reached by the random chains and stiff servos the scheme must keep exactly)
STEP_BUDGET = None
_TWO_THREADS = (
    "Simulation: entered from a second thread while another thread steps it; a "
    "Simulation belongs to one thread at a time (give each thread its own, or "
    "serialise the calls)"
)

BatchPlan = namedtuple("BatchPlan", "kernel contacts controls ctrl_lo ctrl_hi qidx vidx")
BatchPlan.__doc__ = """What :class:`rtrigid.Batch` steps and reads of a Simulation (see
:meth:`Simulation.batch_plan`)."""


class SimulationError(RuntimeError):
    """A step could not be completed; the state is left at the last completed step."""


class Snapshot:
    """Opaque, immutable copy of everything that determines the future of a Simulation."""

    __slots__ = ("_data",)

    def __init__(self, data: tuple) -> None:
        self._data = data


def _check_kinematic(model: Model, kind: str) -> None:
    """Refuse a kinematic body that takes a joint or a pivot, or a model with joints (its
    tree is stepped in joint coordinates, where no body is moved by the user yet)."""
    kinematic = [b.name for b in model.bodies if b.kinematic]
    if not kinematic:
        return
    pivoted = [b.name for b in model.bodies if b.kinematic and b.pivot_body is not None]
    if pivoted:
        raise ValueError(f"kinematic: body {pivoted[0]!r} is pivoted; a kinematic body moves alone")
    if kind != BODIES:
        raise ValueError(
            f"kinematic: bodies {kinematic} are kinematic in a model with "
            "joints (or springs between bodies); kinematic bodies are stepped "
            "in free-body models only so far"
        )


def _alternatives(model: Model, dt: float) -> str:
    """The end of a refusal: the schemes that step ``model`` as a whole at ``dt``.

    The registry says which schemes take the model's features; a scheme may still refuse it
    at this step (an explicit scheme, servo gains beyond its stable range), so each is tried:
    a refusal never names a scheme that refuses the model in turn."""
    ok = []
    for name in integrators.for_model(model):
        try:
            Simulation(model, name, dt)
        except ValueError:
            continue
        ok.append(name)
    return f"schemes that step this model: {ok}" if ok else "no scheme steps this model as a whole"


def _create_backend(kind: str, model: Model, module: Any) -> Any:
    if kind == BODIES:
        from rtrigid.backends.bodies.backend import BodiesBackend

        return BodiesBackend(model, module)
    from rtrigid.backends.tree.backend import TreeBackend

    return TreeBackend(model, module)


class Simulation(BodiesMixin, JointsMixin, ActuatorsMixin, QueriesMixin, LoadsMixin, RaysMixin):
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
        following's 64 solves alone).  Other schemes and models ignore it.  See
        docs/guide/step-budget.md (40-60 keep the worst step of the bench's chains within 5x the
        median; the issue's random chains charge up to 340 on a step).
    max_steps_per_advance : int
        :meth:`advance` never runs more steps than this in one call; the rest of the elapsed
        time is dropped (and counted in ``dropped_time``) so a slow frame cannot snowball.
    """

    # the backend: the protocol of rtrigid.backends, which its two engines implement
    backend: Any

    def __init__(
        self,
        model: Model,
        integrator: str = "energy_momentum",
        dt: float = 0.01,
        *,
        options: dict[str, Any] | None = None,
        max_iter: int = 25,
        max_halvings: int = 6,
        step_budget: int | None = STEP_BUDGET,
        max_steps_per_advance: int = 64,
    ) -> None:
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
        self.max_steps_per_advance = as_int(
            max_steps_per_advance, "max_steps_per_advance", minimum=1
        )
        kind = select(model)
        _check_kinematic(model, kind)
        loop_joints = getattr(model, "loop_joints", [])
        couplings = getattr(model, "couplings", [])
        from rtrigid.contact import has_contacts

        why = entry.obstacle(
            kind,
            model.inbound_joints(),
            loop_joints,
            model.actuators,
            grounds=has_contacts(model),
            couplings=couplings,
        )
        if why:
            raise ValueError(f"integrator: {why}; {_alternatives(model, self.dt)}")
        module, self._kernel = entry.module(
            kind,
            self.options,
            springs=bool(model.springs),
            friction=any(j.friction for j in model.joints),
        )
        self.backend = _create_backend(kind, model, module)
        if loop_joints or couplings:
            from rtrigid.backends.tree.loops_em import stepper

            self._kernel = stepper(integrator, self.options, self.backend)
        self._contacts = self._contact_setup(model, kind, integrator)
        self.backend.solver[SOLVER_MAX_ITER] = max_iter
        self.backend.solver[SOLVER_HALVINGS] = max_halvings
        # (0: none; the kernels that keep a budget read it, see integrators.Integrator)
        self.backend.solver[SOLVER_BUDGET] = step_budget or 0
        self.step_budget = step_budget
        self._budgeted = entry.step_budget and kind != BODIES and not (loop_joints or couplings)
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
            b for b in range(self.nb) if b not in explicit
        ]
        self.joint_names = [inbound[b].name for b in self._joint_child]
        self._loop_names = [j.name for j in loop_joints]
        # qpos / qvel: joint by joint in handle order; where each entry sits in the backend's
        # own coordinates, and where the unit quaternions start (see qpos())
        qidx: list[int] = []
        vidx: list[int] = []
        self._quat_at: list[tuple[int, str]] = []
        for b in self._joint_child:
            qs, vs = self.backend.slots(b)
            k = KINDS[inbound[b].kind].quaternion
            if k >= 0:
                self._quat_at.append((len(qidx) + k, inbound[b].name))
            qidx.extend(range(qs.start, qs.stop))
            vidx.extend(range(vs.start, vs.stop))
        self._qidx, self._vidx = np.array(qidx, np.intp), np.array(vidx, np.intp)
        self.nq, self.nv = len(qidx), len(vidx)
        self._queries: Any = None  # see _dynamics()
        # every joint with its geometry, tree and loop joints: what constraint_error checks
        self._all_joints = list(zip(self.backend.joints, self.backend.geometry)) + [
            (j, geometry(j)) for j in loop_joints
        ]
        # set_joint_force's fast path: each handle's rate in the backend if it has one alone
        self._force_at = [
            self.backend.slots(b)[1].start
            if self.backend.slots(b)[1].stop - self.backend.slots(b)[1].start == 1
            else -1
            for b in self._joint_child
        ]
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
        self._limits: list[tuple[int, int, float, float]] = []
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
        self.x, self.q = readonly(b.x), readonly(b.q)
        self._F, self._I, self._stats = b.F, b.I, b.stats  # step() reads these on every call
        # qpos() / qvel(): one copy of the backend's own array where the layouts agree
        tree = b.name != BODIES
        self._qpos_src = (
            b.positions()
            if tree and np.array_equal(self._qidx, np.arange(len(b.positions())))
            else None
        )
        self._qvel_src = (
            b.nu
            if tree and not b.mean_rates and np.array_equal(self._vidx, np.arange(len(b.nu)))
            else None
        )
        self._fingerprint = self._make_fingerprint()

    def _make_fingerprint(self) -> str:
        """What a snapshot must match: the frozen model, the integrator with its options, the
        step and the solver settings."""
        b = self.backend
        loops = getattr(b, "loops", None)
        return hashlib.sha256(
            b"".join(
                (
                    b.model_digest,
                    b.solver.tobytes(),
                    self._contacts.digest if self._contacts is not None else b"",
                    b"" if loops is None else loops.lf.tobytes() + loops.li.tobytes(),
                    repr((self.integrator, sorted(self.options.items()), self.dt)).encode(),
                )
            )
        ).hexdigest()

    def set_step_budget(self, step_budget: int | None) -> None:
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

    def _contact_setup(self, model: Model, kind: str, integrator: str) -> Any:
        """The contact model (None without a ground or a geom of add_geom), and the step
        kernel that solves the contacts after each free-flight step."""
        from rtrigid.contact import SWEEPS, Contacts, has_contacts

        if not has_contacts(model):
            return None
        from rtrigid.backends.contact_step import ContactStepper
        from rtrigid.contact.solver import START_BUDGET

        contacts = Contacts(model)
        # an approach slower than two steps' fall is a resting contact: no rebound
        rest_speed = 2.0 * float(np.linalg.norm(model.gravity)) * self.dt
        # a flight that does not keep energy: the event's budget from the step's start
        budget = 0 if integrators.get(integrator).keeps_energy else START_BUDGET
        if kind != BODIES:
            spin = [
                model.bodies[g.body].name if g.body is not None else "the world"
                for g in model.geoms
                if g.torsional_friction > 0.0 or g.rolling_friction > 0.0
            ]
            if spin or any(
                g.torsional_friction > 0.0 or g.rolling_friction > 0.0 for g in model.grounds
            ):
                raise ValueError(
                    "torsional_friction: torsional and rolling friction are "
                    "stepped for free-body models only so far (bodies "
                    f"{spin}, or a ground)"
                )
        collide, after, extra = self.backend.contact_workspace(contacts, budget)
        loops = getattr(model, "loop_joints", None)
        if loops or getattr(model, "couplings", None):  # the loops' step, then the contacts'
            from rtrigid.backends.contact_step import StepThenContacts, no_flight

            solve = ContactStepper(
                no_flight, contacts, collide, SWEEPS, rest_speed, after=after, extra=extra
            )
            rows = self.backend.constraint_rows if loops else None
            self._kernel = StepThenContacts(self._kernel, solve, rows)
            return contacts
        self._kernel = ContactStepper(
            self._kernel, contacts, collide, SWEEPS, rest_speed, after=after, extra=extra
        )
        return contacts

    def contacts(self) -> list[dict[str, Any]]:
        """The contacts of the last step (a list of dicts; empty without contacts).

        Each: ``body`` (handle) and ``name``, ``other`` (None: a ground or the world's
        scenery), ``geom`` and ``other_geom`` (the two geoms' handles, indices into
        ``model.geoms``; ``other_geom`` None for a ground), ``point`` (world,
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
        """Steps taken since construction (or the restored snapshot's count)."""
        return self._steps

    def step(self, n: int = 1) -> None:
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

    def _checked_n(self, n: object) -> int:
        """step()'s n as an int, or ValueError naming it (the path a plain valid int skips)."""
        if type(n) is not int:
            if isinstance(n, bool) or not isinstance(n, np.integer):
                raise ValueError(f"n: expected a non-negative integer, got {n!r}")
            n = int(n)  # any integer type runs the one int64 kernel (no new compilation)
        if n < 0:
            raise ValueError(f"n: expected a non-negative integer, got {n!r}")
        if n > MAX_STEPS - self._steps:
            raise ValueError(
                f"n: {n} steps would take the step count past {MAX_STEPS} (2**53, "
                "where the clock t = steps * dt stops being exact)"
            )
        return n

    @property
    def _kernel(self) -> Any:
        """The step kernel (a numba dispatcher, or a stepper object); setting it makes the
        next step call it through :meth:`_first_call` again."""
        return self._kernel_fn

    @_kernel.setter
    def _kernel(self, kernel: Any) -> None:
        self._kernel_fn = kernel
        self._call = self._first_call

    def _first_call(self, n: int, dt: float, F: NDArray[np.float64], I: NDArray[np.int64]) -> int:
        """The kernel through numba's dispatcher (which compiles it or loads it from the
        cache), then :attr:`_call` becomes its compiled entry point: called directly it
        skips the dispatcher's type resolution (0.47 -> 0.37 us for an empty step on the
        2-link arm).  Kernels that are not numba dispatchers (the contact and loop
        steppers) stay as they are."""
        status = self._kernel(n, dt, F, I)
        self._call = entry_point(self._kernel, n, dt, F, I)
        return status

    def _step(self, n: int) -> None:
        """step(n) without the checks, for :meth:`advance` (which holds the lock)."""
        before = self._stats[STAT_STEPS]
        status = self._call(n, self.dt, self._F, self._I)
        if status == OK:
            self._steps += n
        else:
            self._failed(status, before)

    def _failed(self, status: int, before: int) -> None:
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
                "as sub-steps (counts in solver_stats())",
                RuntimeWarning,
                stacklevel=3,
            )
            status &= ~USED_FALLBACK
        if status & USED_BUDGET:
            if not self._budget_warned:  # once per simulation: a hard motion hits it often
                self._budget_warned = True
                warnings.warn(
                    f"{self.integrator}: some step(s) ran out of step_budget "
                    f"({self.step_budget} Newton iterations) and took the budget outcome, an "
                    "explicit step whose energy is capped: not an energy-momentum step "
                    "(counts in solver_stats()['budget_steps'])",
                    RuntimeWarning,
                    stacklevel=3,
                )
            status &= ~USED_BUDGET
        if status != OK:
            what = (
                "Newton failed even with 2**max_halvings sub-steps"
                if status == FAILED
                else "the state became non-finite"
            )
            hint = (
                "a smaller dt"
                if not self.implicit
                else "a smaller dt or a larger max_iter / max_halvings"
            )
            raise SimulationError(
                f"{self.integrator}: step {self._steps + 1} (t={self.t:.6g}) not taken: {what}; "
                f"the state is that of the last completed step; try {hint}"
            )

    def solver_stats(self) -> dict[str, int | float]:
        """Counters since construction: steps, Newton iterations (of converged solves),
        fallbacks; where a step budget is kept (see ``step_budget``), also
        ``charged_iterations`` (what the budgets counted: every converged solve's iterations,
        every failed one's cap, and 4 per explicit start), ``budget_steps`` (steps that took
        the budget outcome; not counted in ``fallback_steps``) and ``path_steps`` (steps taken
        whole along the path of their solution in h, the jointed ``energy_momentum``'s; not
        fallbacks either)."""
        s = self.backend.stats
        steps = int(s[STAT_STEPS])
        out: dict[str, int | float] = {"steps": steps}
        if self.implicit:
            out.update(
                newton_iterations=int(s[STAT_ITERS]),
                mean_iterations=float(s[STAT_ITERS]) / max(steps, 1),
                max_iterations=int(s[STAT_MAX_ITERS]),
                fallback_steps=int(s[STAT_FALLBACKS]),
            )
        if self.implicit and self._budgeted:
            out.update(
                charged_iterations=int(s[STAT_SPENT]),
                budget_steps=int(s[STAT_BUDGET]),
                path_steps=int(s[STAT_PATH]),
            )
        return out

    def batch_plan(self) -> BatchPlan:
        """What :class:`rtrigid.Batch` needs to step copies of this simulation in its rows:
        ``kernel`` (the step kernel: a numba dispatcher, or a stepper object whose ``rows``
        gives the same step on longer rows), ``contacts`` (the contact model, None without a
        ground), ``controls`` (the view of the controls in the applied loads),
        ``ctrl_lo``/``ctrl_hi`` (their ranges), ``qidx``/``vidx`` (where each entry of
        :meth:`qpos` and :meth:`qvel` sits in the backend's coordinates and rates).  The
        simulation's own objects, not copies: read them only."""
        return BatchPlan(
            self._kernel,
            self._contacts,
            self._ctrl,
            self._ctrl_lo,
            self._ctrl_hi,
            self._qidx,
            self._vidx,
        )

    # -- real-time stepping ----------------------------------------------------------------
    def advance(self, elapsed: float) -> int:
        """Consume ``elapsed`` wall-clock seconds in whole fixed steps; return the step count.

        The remainder stays in an accumulator for the next call; :attr:`alpha` tells how far
        the remainder reaches into the next step, for interpolated rendering
        (:meth:`interpolated_pose`).  At most ``max_steps_per_advance`` steps run per call.
        """
        elapsed = as_scalar(elapsed, "elapsed", nonnegative=True)
        steps = (self._accumulator + elapsed) / self.dt
        if not steps < MAX_STEPS - self._steps:  # also refuses an overflow to inf
            raise ValueError(
                f"elapsed: {elapsed:g} s is more than this simulation can count in "
                f"steps of {self.dt:g} s"
            )
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

    def interpolated_pose(
        self, body: Handle, alpha: float | None = None
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Pose between the previous and the current step (x lerp, q slerp) for rendering."""
        b = self.body_index(body)
        a = self.alpha if alpha is None else as_scalar(alpha, "alpha", nonnegative=True)
        if a > 1.0:
            raise ValueError(f"alpha: must be in [0, 1], got {a}")
        be = self.backend
        x = (1.0 - a) * be.x_prev[b] + a * be.x[b]
        q = quat.quat_slerp(be.q_prev[b].copy(), be.q[b].copy(), a, np.empty(4))
        return x, q

    # -- diagnostics ----------------------------------------------------------------------
    @property
    def body_mass(self) -> NDArray[np.float64]:
        """Body masses (a copy), kg."""
        return self.backend.mass.copy()

    @property
    def body_inertia(self) -> NDArray[np.float64]:
        """Principal moments of inertia about each centre of mass (nb, 3), a copy."""
        return self.backend.inertia.copy()

    @property
    def gravity(self) -> NDArray[np.float64]:
        """The gravity vector the simulation was built with (a copy)."""
        return self.backend.gravity.copy()

    def kinetic_energy(self) -> float:
        """Kinetic energy of the bodies' momenta: the integrator's own state (see
        :meth:`velocity` for the one integrator where they differ from the reported
        velocities, by O(dt^2) relative), plus the joints' armature energy 1/2 a c'^2."""
        be = self.backend
        return (
            query(kinetic_energy, be.mass.shape[0])(be.mass, be.inertia, be.v, be.w)
            + be.rotor_energy()
        )

    def potential_energy(self) -> float:
        """Gravity and springs (point springs, joint springs)."""
        return float(self.backend.potential_energy())

    def energy(self) -> float:
        """Kinetic plus potential energy."""
        return self.kinetic_energy() + self.potential_energy()

    def momentum(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(linear, angular about the world origin), world frame."""
        be = self.backend
        out = np.empty((2, 3))
        query(momenta, be.mass.shape[0])(be.mass, be.inertia, be.x, be.q, be.v, be.w, out)
        return out[0], out[1]

    def constraint_error(self) -> float:
        """Largest position-level residual: ||q| - 1| and every joint's residual
        (:func:`rtrigid.joints.residual`), loop joints and joint couplings included."""
        be = self.backend
        err = float(np.max(np.abs(np.linalg.norm(be.q, axis=1) - 1.0)))
        closure = getattr(be, "loops", None)
        if closure is not None:  # the couplings' rows (the loop joints' are among them)
            err = max(err, float(np.max(np.abs(closure.residual(be.Qg)))))
        world = np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0])
        for j, g in self._all_joints:
            xp, qp = (be.x[j.parent], be.q[j.parent]) if j.parent >= 0 else world
            r = residual(j.kind, g, xp, qp, be.x[j.child], be.q[j.child])
            if r.size:
                err = max(err, float(np.max(np.abs(r))))
        return err

    # -- snapshots --------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """Everything that determines the future: state, previous state, loads, clock,
        counters -- and the integrator with its options, which a restore checks."""
        be = self.backend
        c = self._contacts
        table = None if c is None else c.state()
        return Snapshot(
            (
                be.S.copy(),
                be.S_prev.copy(),
                be.A.copy(),
                self._steps,
                self._accumulator,
                self.dropped_time,
                be.stats.copy(),
                self._fingerprint,
                table,
            )
        )

    def restore(self, snap: Snapshot) -> None:
        """Return to a snapshot taken from this simulation, bit for bit."""
        be = self.backend
        if not isinstance(snap, Snapshot):
            raise ValueError(f"snap: expected a Snapshot, got {type(snap).__name__}")
        S, S_prev, A, steps, acc, dropped, stats, fingerprint, table = snap._data
        if fingerprint != self._fingerprint:
            raise ValueError(
                "snap: taken from a simulation of another model, integrator, "
                "option, step or solver setting (max_iter, max_halvings, "
                "step_budget); this one cannot continue it"
            )
        be.S[:] = S
        be.S_prev[:] = S_prev
        be.A[:] = A
        be.stats[:] = stats
        self._steps = steps
        self._accumulator = acc
        self.dropped_time = dropped
        if table is not None:
            self._contacts.set_state(table)
