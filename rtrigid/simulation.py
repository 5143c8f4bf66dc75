"""Simulation: the fixed-step API around a frozen model, a flat state and one step kernel.

    sim = Simulation(model, integrator="energy_momentum", dt=0.01)
    sim.step(1000)                 # 1000 steps in one compiled call
    sim.energy(), sim.momentum(), sim.constraint_error()

Each step is ``kernel(n, dt, model arrays, state, previous state, applied loads, ...)``, see
:mod:`rtrigid.integrators.common`.  The state lives in one flat float64 array; ``x``, ``q``,
``v``, ``w`` below are views into it.  Orientation ``q`` is the unit quaternion (scalar first)
rotating body axes into world axes -- DESIGN.md calls it p; we keep p for the quaternion
momentum of paper 000.

Every public method validates its input first and raises ``ValueError`` naming the offending
field; a refused call leaves the simulation exactly as it was.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from rtrigid import quat
from rtrigid.forces import potential_energy
from rtrigid.integrators import IMPLICIT, INTEGRATORS
from rtrigid.integrators.common import (
    FAILED,
    N_STATS,
    OK,
    STAT_FALLBACKS,
    STAT_ITERS,
    STAT_MAX_ITERS,
    STAT_STEPS,
    USED_FALLBACK,
    body_momenta,
    buffer_layout,
    restore_body,
    pivot_kinematics,
)
from rtrigid.model import PIVOTED, Model, as_scalar, as_vector, flatten, kernel_arrays


class SimulationError(RuntimeError):
    """A step could not be completed; the state is left at the last completed step."""


class Snapshot:
    """Opaque, immutable copy of everything that determines the future of a Simulation."""

    __slots__ = ("_data",)

    def __init__(self, data):
        self._data = data


def _state_views(S, nb):
    o = 0
    views = []
    for width in (3, 4, 3, 3, 3, 4, 3):
        views.append(S[o:o + width * nb].reshape(nb, width))
        o += width * nb
    return views


class Simulation:
    """Fixed-step simulation of a :class:`~rtrigid.model.Model`.

    Parameters
    ----------
    model : Model
        The model; it is frozen here, later edits to it have no effect.
    integrator : str
        One of :func:`rtrigid.integrators.names`.
    dt : float
        The fixed step, seconds (> 0).
    max_iter : int
        Newton iteration cap per (sub)step of implicit schemes.
    max_halvings : int
        Fallback depth of implicit schemes: a step whose Newton solve fails is redone as
        2, 4, ..., 2**max_halvings sub-steps before the step is declared failed.
    max_steps_per_advance : int
        :meth:`advance` never runs more steps than this in one call; the rest of the elapsed
        time is dropped (and counted in ``dropped_time``) so a slow frame cannot snowball.
    """

    def __new__(cls, model=None, *args, **kwargs):
        # a model with joints (or springs between bodies) is stepped by the tree kernels
        if cls is Simulation and isinstance(model, Model) and model.is_multibody():
            from rtrigid.multibody_sim import MultibodySimulation

            return super().__new__(MultibodySimulation)
        return super().__new__(cls)

    def _settings(self, model, integrator, known, dt, max_iter, max_halvings,
                  max_steps_per_advance):
        """Validate the constructor arguments both kinds of simulation share."""
        if not isinstance(model, Model):
            raise ValueError(f"model: expected an rtrigid Model, got {type(model).__name__}")
        if integrator not in known:
            raise ValueError(f"integrator: unknown {integrator!r} for this model; known: "
                             f"{list(known)}")
        self.dt = as_scalar(dt, "dt", positive=True)
        max_iter = int(as_scalar(max_iter, "max_iter", positive=True))
        if max_iter < 3:
            # Newton stops only on a stalled residual: two updates and one more residual
            raise ValueError(f"max_iter: must be >= 3 to see a residual stall, got {max_iter}")
        max_halvings = int(as_scalar(max_halvings, "max_halvings", nonnegative=True))
        self.max_steps_per_advance = int(as_scalar(max_steps_per_advance,
                                                   "max_steps_per_advance", positive=True))
        self.model = model
        self.integrator = integrator
        self.names = [b.name for b in model.bodies]  # a copy: later model edits do not reach us
        self.nb = len(self.names)
        self._steps = 0
        self._accumulator = 0.0
        self.dropped_time = 0.0
        self.info: dict = {}
        return max_iter, max_halvings

    def __init__(self, model: Model, integrator="energy_momentum", dt=0.01, *, max_iter=25,
                 max_halvings=6, max_steps_per_advance=64):
        max_iter, max_halvings = self._settings(model, integrator, INTEGRATORS, dt, max_iter,
                                                max_halvings, max_steps_per_advance)
        self.frozen = model.freeze()
        self.model_mass, self.model_inertia = self.frozen.mass, self.frozen.inertia
        self.model_gravity = self.frozen.gravity
        nb = self.nb
        mf, mi = flatten(self.frozen)
        module = INTEGRATORS[integrator]
        self._kernel = module.step
        o_state, o_prev, o_applied, o_solver, o_work, total = buffer_layout(
            nb, len(self.frozen.spring_k), len(mf), module.work_size(nb))
        # the kernel's two buffers (see integrators/common); everything below is a view
        self._F = np.zeros(total)
        self._I = np.zeros(len(mi) + N_STATS, dtype=np.int64)
        self._F[:len(mf)] = mf
        self._I[:len(mi)] = mi
        self._mf, self._mi = self._F[:len(mf)], self._I[:len(mi)]
        self._arrays = kernel_arrays.py_func(self._mf, self._mi)
        self._S = self._F[o_state:o_prev]
        self._S_prev = self._F[o_prev:o_applied]
        self._A = self._F[o_applied:o_solver]
        self._solver = self._F[o_solver:o_work]
        self._solver[:] = (max_iter, max_halvings)
        self._stats = self._I[len(mi):]
        self.x, self.q, self.v, self.w, self._P, self._pq, self._L = _state_views(self._S, nb)
        self._x_prev, self._q_prev = _state_views(self._S_prev, nb)[:2]
        self._f_app = self._A[:3 * nb].reshape(nb, 3)
        self._t_app = self._A[3 * nb:].reshape(nb, 3)
        self.q[:, 0] = 1.0
        for b in range(nb):
            self._sync(b)
        self._S_prev[:] = self._S

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
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"n: expected a non-negative integer, got {n!r}")
        before = int(self._stats[STAT_STEPS])
        status = self._kernel(n, self.dt, self._F, self._I)
        if status == OK:
            self._steps += n
            return
        self._steps += int(self._stats[STAT_STEPS]) - before
        if status & USED_FALLBACK:
            warnings.warn(
                f"{self.integrator}: Newton did not converge on some step(s); they were redone "
                "as sub-steps (counts in solver_stats())", RuntimeWarning, stacklevel=2)
            status &= ~USED_FALLBACK
        if status != OK:
            what = ("Newton failed even with 2**max_halvings sub-steps" if status == FAILED
                    else "the state became non-finite")
            raise SimulationError(
                f"{self.integrator}: step {self._steps + 1} (t={self.t:.6g}) not taken: {what}; "
                "the state is that of the last completed step")

    def solver_stats(self) -> dict:
        """Counters since construction: steps, Newton iterations, fallbacks."""
        s = self._stats
        steps = int(s[STAT_STEPS])
        out = {"steps": steps}
        if self.integrator in IMPLICIT:
            out.update(
                newton_iterations=int(s[STAT_ITERS]),
                mean_iterations=float(s[STAT_ITERS]) / max(steps, 1),
                max_iterations=int(s[STAT_MAX_ITERS]),
                fallback_steps=int(s[STAT_FALLBACKS]),
            )
        return out

    # -- real-time stepping ----------------------------------------------------------------
    def advance(self, elapsed):
        """Consume ``elapsed`` wall-clock seconds in whole fixed steps; return the step count.

        The remainder stays in an accumulator for the next call; :attr:`alpha` tells how far
        the remainder reaches into the next step, for interpolated rendering
        (:meth:`interpolated_pose`).  At most ``max_steps_per_advance`` steps run per call.
        """
        elapsed = as_scalar(elapsed, "elapsed", nonnegative=True)
        self._accumulator += elapsed
        # the 1e-9 keeps 0.03 s at dt = 0.01 from giving 2 steps (0.03 / 0.01 = 2.9999999999999996)
        n = int(math.floor(self._accumulator / self.dt + 1e-9))
        if n > self.max_steps_per_advance:
            dropped = (n - self.max_steps_per_advance) * self.dt
            self.dropped_time += dropped
            self._accumulator -= dropped
            n = self.max_steps_per_advance
        self._accumulator = max(self._accumulator - n * self.dt, 0.0)
        if n:
            self.step(n)
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
        x = (1.0 - a) * self._x_prev[b] + a * self.x[b]
        q = quat.quat_slerp(self._q_prev[b].copy(), self.q[b].copy(), a, np.empty(4))
        return x, q

    # -- diagnostics ----------------------------------------------------------------------
    def body_index(self, body) -> int:
        """Resolve a body index or name of this simulation (its model as frozen)."""
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
        """World centre-of-mass position and unit quaternion (copies)."""
        b = self.body_index(body)
        return self.x[b].copy(), self.q[b].copy()

    def velocity(self, body):
        """World centre-of-mass velocity and world angular velocity (copies)."""
        b = self.body_index(body)
        return self.v[b].copy(), quat.rotate(self.q[b], self.w[b], np.empty(3))

    def kinetic_energy(self) -> float:
        fm = self.frozen
        t = 0.5 * np.sum(fm.mass * np.sum(self.v * self.v, axis=1))
        t += 0.5 * np.sum(self.w * (fm.inertia * self.w))
        return float(t)

    def potential_energy(self) -> float:
        return float(potential_energy(*self._arrays, self.x, self.q))

    def energy(self) -> float:
        """Kinetic plus potential energy (gravity, springs)."""
        return self.kinetic_energy() + self.potential_energy()

    def momentum(self):
        """(linear, angular about the world origin), world frame."""
        fm = self.frozen
        linear = (fm.mass[:, None] * self.v).sum(axis=0)
        angular = np.cross(self.x, fm.mass[:, None] * self.v).sum(axis=0)
        for b in range(self.nb):
            angular += quat.rotate(self.q[b], fm.inertia[b] * self.w[b], np.empty(3))
        return linear, angular

    def constraint_error(self) -> float:
        """Largest position-level residual: ||q| - 1| and pivot attachment drift."""
        err = float(np.max(np.abs(np.linalg.norm(self.q, axis=1) - 1.0)))
        fm = self.frozen
        for b in range(self.nb):
            if fm.kind[b] == PIVOTED:
                tip = self.x[b] - quat.rotate(self.q[b], fm.com[b], np.empty(3))
                err = max(err, float(np.max(np.abs(tip - fm.pivot[b]))))
        return err

    @property
    def body_mass(self):
        """Body masses (a copy), kg."""
        return self.model_mass.copy()

    @property
    def body_inertia(self):
        """Principal moments of inertia about each centre of mass (nb, 3), a copy."""
        return self.model_inertia.copy()

    @property
    def gravity(self):
        """The gravity vector the simulation was built with (a copy)."""
        return self.model_gravity.copy()

    def joints(self):
        """The joints as they are now, for drawing and inspection (a list of dicts).

        Each dict has ``kind`` (``"spherical"``, ``"revolute"``, ``"prismatic"``,
        ``"cylindrical"``, ``"planar"``, ``"fixed"``), ``parent`` (body index, -1 for the
        world), ``child`` (body index), ``anchor`` (world position of the joint point on the
        child) and ``axis`` (unit world vector of the joint axis, ``None`` where the kind has
        none).  A body attached to the world by :meth:`Model.attach_to_world` shows up as a
        spherical joint to the world.
        """
        out = []
        fm = self.frozen
        for b in range(self.nb):
            if fm.kind[b] == PIVOTED:
                out.append({"kind": "spherical", "parent": -1, "child": b,
                            "anchor": fm.pivot[b].copy(), "axis": None})
        return out

    # -- setters -------------------------------------------------------------------------
    def _sync(self, b, teleport=True):
        """Make body b's state consistent with (x, q, v, w) after a setter or an impulse.

        A setter is a teleport, so the previous-step pose used for render interpolation is
        reset too; an impulse (``teleport=False``) changes only velocities and leaves it.
        """
        bodyf = self._arrays[1]
        if self.frozen.kind[b] == PIVOTED:
            pivot_kinematics.py_func(bodyf, b, self.x, self.q, self.v, self.w, self._P)
        body_momenta.py_func(bodyf, b, self.q, self.v, self.w, self._P, self._pq, self._L)
        if teleport:
            restore_body.py_func(self._S_prev, self._S, self.nb, b)

    def _refuse_if_pivoted(self, b, field):
        if self.frozen.kind[b] == PIVOTED:
            raise ValueError(f"{field}: body {self.names[b]!r} is pivoted; its position and "
                             "velocity follow from its orientation and angular velocity")

    def set_orientation(self, body, q):
        """Set the orientation (normalised); a pivoted body turns about its pivot."""
        b = self.body_index(body)
        q = as_vector(q, 4, "q")
        norm = np.linalg.norm(q)
        if norm < 1e-12:
            raise ValueError(f"q: quaternion of norm {norm:g} cannot be normalised")
        self.q[b] = q / norm
        self._sync(b)

    def set_angular_velocity(self, body, omega, frame="body"):
        """Set the angular velocity, given in the body frame or the world frame."""
        b = self.body_index(body)
        omega = as_vector(omega, 3, "omega")
        if frame == "world":
            omega = quat.rotate_inv(self.q[b], omega, np.empty(3))
        elif frame != "body":
            raise ValueError(f"frame: expected 'body' or 'world', got {frame!r}")
        self.w[b] = omega
        self._sync(b)

    def set_position(self, body, x):
        """Set the centre-of-mass position of a free body."""
        b = self.body_index(body)
        x = as_vector(x, 3, "x")
        self._refuse_if_pivoted(b, "x")
        self.x[b] = x
        self._sync(b)

    def set_velocity(self, body, v):
        """Set the centre-of-mass velocity of a free body (world frame)."""
        b = self.body_index(body)
        v = as_vector(v, 3, "v")
        self._refuse_if_pivoted(b, "v")
        self.v[b] = v
        self._sync(b)

    # -- loads and impulses ----------------------------------------------------------------
    def apply_force(self, body, force, point=None):
        """Add a constant world force, acting from now on until :meth:`clear_applied`.

        With ``point`` (world), the force acts there: it is stored as the same force at the
        centre of mass plus the torque (point - x) x force, both fixed in the world frame and
        evaluated now.  Loads add up over calls and persist across steps.
        """
        b = self.body_index(body)
        force = as_vector(force, 3, "force")
        torque = np.zeros(3)
        if point is not None:
            point = as_vector(point, 3, "point")
            torque = np.cross(point - self.x[b], force)
        self._f_app[b] += force
        self._t_app[b] += torque

    def apply_torque(self, body, torque):
        """Add a constant world torque, acting from now on until :meth:`clear_applied`."""
        b = self.body_index(body)
        self._t_app[b] += as_vector(torque, 3, "torque")

    def clear_applied(self, body=None):
        """Remove applied forces and torques (of one body, or of all)."""
        if body is None:
            self._A[:] = 0.0
        else:
            b = self.body_index(body)
            self._f_app[b] = 0.0
            self._t_app[b] = 0.0

    def applied(self, body):
        """The (force, torque) currently applied to a body, world frame."""
        b = self.body_index(body)
        return self._f_app[b].copy(), self._t_app[b].copy()

    def apply_impulse(self, body, impulse_world, point_world):
        """Apply an instantaneous impulse at a world point; velocities jump at once.

        A free body gains linear momentum J and angular momentum (r - x) x J about its centre
        of mass; a pivoted body gains angular momentum (r - pivot) x J about its pivot (the
        pivot supplies the reaction impulse).  Raises ``ValueError`` (state unchanged) if the
        resulting velocities would not be finite.
        """
        b = self.body_index(body)
        impulse = as_vector(impulse_world, 3, "impulse_world")
        point = as_vector(point_world, 3, "point_world")
        fm = self.frozen
        q = self.q[b]
        if fm.kind[b] == PIVOTED:
            arm = point - fm.pivot[b]
            dv = np.zeros(3)
        else:
            arm = point - self.x[b]
            dv = impulse / fm.mass[b]
        dh_body = quat.rotate_inv(q, np.cross(arm, impulse), np.empty(3))
        dw = fm.jref_inv[b] @ dh_body
        with np.errstate(over="ignore", invalid="ignore"):
            new_v = self.v[b] + dv
            new_w = self.w[b] + dw
            ok = np.all(np.isfinite(new_v)) and np.all(np.isfinite(new_w))
            ok = ok and np.isfinite(0.5 * fm.mass[b] * new_v @ new_v + 0.5 * new_w @ (fm.jref[b] @ new_w))
        if not ok:
            raise ValueError(f"impulse_world: {impulse.tolist()} would give non-finite velocities")
        self.v[b] = new_v
        self.w[b] = new_w
        self._sync(b, teleport=False)

    # -- snapshots --------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """Everything that determines the future: state, previous state, loads, clock."""
        return Snapshot((self._S.copy(), self._S_prev.copy(), self._A.copy(), self._steps,
                         self._accumulator, self.dropped_time, self._stats.copy()))

    def restore(self, snap: Snapshot):
        """Return to a snapshot taken from this simulation, bit for bit."""
        if not isinstance(snap, Snapshot) or snap._data[0].shape != self._S.shape:
            raise ValueError("snap: not a snapshot of this simulation")
        S, S_prev, A, steps, acc, dropped, stats = snap._data
        self._S[:] = S
        self._S_prev[:] = S_prev
        self._A[:] = A
        self._stats[:] = stats
        self._steps = steps
        self._accumulator = acc
        self.dropped_time = dropped
