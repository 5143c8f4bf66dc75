"""The bodies backend's side of the protocol of :mod:`rtrigid.backends`."""
from __future__ import annotations

import numpy as np

from rtrigid.backends import BODIES
from rtrigid.backends.bodies.common import (
    STATE_WIDTH,
    body_momenta,
    pivot_kinematics,
    restore_body,
    state_view,
)
from rtrigid.backends.bodies.forces import potential_energy
from rtrigid.backends.bodies.layout import (
    FREE,
    PIVOTED,
    BodiesModel,
    flatten,
    freeze,
    kernel_arrays,
)
from rtrigid.backends.buffers import allocate, model_digest, sections
from rtrigid._jit import pure
from rtrigid.joints import geometry
from rtrigid.maths import quat


class BodiesBackend:
    """Free and pivoted bodies; state (x, q, v, w, P, pq, L) per body (see :mod:`.common`)."""

    name = BODIES

    def __init__(self, model, module):
        self.frozen = fm = freeze(model)
        self.nb = nb = len(fm.mass)
        self.names = [body.name for body in model.bodies]
        self.joints = model.inbound_joints()
        self.geometry = [geometry(j) for j in self.joints]
        self.mass, self.inertia, self.gravity = fm.mass, fm.inertia, fm.gravity
        mf, mi = flatten(fm)
        self.F, self.I = allocate(mf, mi, STATE_WIDTH * nb, 6 * nb, module.work_size(nb))
        self.model_digest = model_digest(mf, mi)
        self.S, self.S_prev, self.A, self.solver, self.stats, _ = sections.py_func(
            self.F, self.I, len(mf), len(mi), STATE_WIDTH * nb, 6 * nb)
        # the frozen model as the kernels take it (a BodiesModel)
        self.arrays = BodiesModel(*kernel_arrays.py_func(self.F[:len(mf)], self.I[:len(mi)]))
        self.x, self.q, self.v, self.w, self._P, self._pq, self._L = state_view.py_func(
            self.S, nb)
        self.x_prev, self.q_prev = state_view.py_func(self.S_prev, nb)[:2]
        self.q[:, 0] = 1.0
        for b, body in enumerate(model.bodies):
            if body.pose0 is not None and body.pivot_body is None:
                self.x[b], self.q[b] = body.pose0
        # each body's inbound joint in positions() / rates(): a pivot's 4 / 3, a free body's 7 / 6
        self._qoff, self._voff = [0], [0]
        for b in range(nb):
            pivoted = fm.kind[b] == PIVOTED
            self._qoff.append(self._qoff[-1] + (4 if pivoted else 7))
            self._voff.append(self._voff[-1] + (3 if pivoted else 6))
        self.joint_forces = None  # the single-body kernels take no joint forces
        # a scheme whose pivoted bodies' velocities meet the pivot only to O(h^2) (midpoint_em:
        # v_{n+1} = 2 (x_{n+1} - x_n)/h - v_n) declares MEAN_RATES; velocities() then reports
        # the rate of the body's momentum about its pivot, and the pivot velocity it gives
        self.mean_rates = bool(getattr(module, "MEAN_RATES", False))
        for b in range(nb):
            self._sync(b)
        self.S_prev[:] = self.S

    def _sync(self, b, teleport=True):
        """Make body b's state consistent with (x, q, v, w) after a write.

        A teleport also resets the previous-step pose used for render interpolation; an
        impulse changes only velocities and leaves it.
        """
        bodyf = self.arrays[1]
        if self.frozen.kind[b] == PIVOTED:
            pure(pivot_kinematics)(bodyf, b, self.x, self.q, self.v, self.w, self._P)
        pure(body_momenta)(bodyf, b, self.q, self.v, self.w, self._P, self._pq, self._L)
        if teleport:
            pure(restore_body)(self.S_prev, self.S, self.nb, b)

    def contact_workspace(self, contacts, budget):
        """What the contact step (:class:`~rtrigid.backends.contact_step.ContactStepper`)
        needs of this backend: ``(collide, after, extra)``: which bodies may collide (the free
        ones), the module whose ``after_step`` solves the contacts, and its (float, int)
        scratch (none, and the event's ``budget``)."""
        from rtrigid.backends.bodies import contact

        return (self.frozen.kind == FREE, contact.__name__,
                (np.zeros(0), np.array([budget], np.int64)))

    def potential_energy(self) -> float:
        return float(potential_energy(self.arrays, self.x, self.q))

    def rotor_energy(self) -> float:
        """Free bodies and pivots carry no joint armature."""
        return 0.0

    # -- joints: a pivot is a spherical joint to the world, otherwise a free joint ------------
    def slots(self, b):
        """(coordinate slice, rate slice) of body b's joint in :meth:`positions` and
        :meth:`rates`."""
        return (slice(self._qoff[b], self._qoff[b + 1]), slice(self._voff[b], self._voff[b + 1]))

    def positions(self):
        """Every body's joint coordinates, body by body (a new array)."""
        qpos = np.empty(self._qoff[-1])
        for b in range(self.nb):
            qpos[self.slots(b)[0]] = self.joint_state(b)[0]
        return qpos

    def rates(self):
        """Every body's joint rates at t, body by body (a new array)."""
        qvel = np.empty(self._voff[-1])
        for b in range(self.nb):
            qvel[self.slots(b)[1]] = self.joint_state(b)[1]
        return qvel

    def velocities(self):
        """(v, w) at t, consistent with the joint rates: the state's own (views), except for
        a pivoted body under a MEAN_RATES scheme: w = Jref^-1 (J Omega + m s x R^T v), the
        angular momentum about the pivot (s: centre of mass from it, body axes) carried by
        the scheme's velocities, and v = R (w x s) (new arrays)."""
        if not self.mean_rates:
            return self.v, self.w
        fm = self.frozen
        v, w = self.v.copy(), self.w.copy()
        for b in np.flatnonzero(fm.kind == PIVOTED):
            vb = quat.rotate_inv(self.q[b], self.v[b], np.empty(3))
            s = fm.com[b]
            w[b] = fm.jref_inv[b] @ (fm.inertia[b] * self.w[b] + fm.mass[b] * np.cross(s, vb))
            v[b] = quat.rotate(self.q[b], np.cross(w[b], s), np.empty(3))
        return v, w

    def _settle(self, b):
        """Before a write to body b: its angular velocity <- the one at t (velocities())."""
        if self.mean_rates and self.frozen.kind[b] == PIVOTED:
            self.w[b] = self.velocities()[1][b]

    def set_coordinates(self, qpos=None, qvel=None):
        """Write all coordinates and/or rates (the order of :meth:`positions`)."""
        for b in range(self.nb):
            qs, vs = self.slots(b)
            self.set_joint_state(b, None if qpos is None else qpos[qs],
                                 None if qvel is None else qvel[vs])

    def joint_state(self, b):
        if self.frozen.kind[b] == PIVOTED:
            return self.q[b].copy(), self.velocities()[1][b].copy()
        return np.r_[self.x[b], self.q[b]], np.r_[self.v[b], self.w[b]]

    def set_joint_state(self, b, qpos=None, qvel=None):
        pivoted = self.frozen.kind[b] == PIVOTED
        self._settle(b)
        if qpos is not None:
            if pivoted:
                self.q[b] = qpos
            else:
                self.x[b], self.q[b] = qpos[:3], qpos[3:]
        if qvel is not None:
            if pivoted:
                self.w[b] = qvel
            else:
                self.v[b], self.w[b] = qvel[:3], qvel[3:]
        self._sync(b)

    # -- bodies ------------------------------------------------------------------------------
    def set_body(self, b, x=None, q=None, v=None, w=None, w_frame="world"):
        if self.frozen.kind[b] == PIVOTED and (x is not None or v is not None):
            field = "x" if x is not None else "v"
            raise ValueError(f"{field}: body {self.names[b]!r} is pivoted; its "
                             "position and velocity follow from its orientation and angular "
                             "velocity")
        self._settle(b)
        if x is not None:
            self.x[b] = x
        if q is not None:
            self.q[b] = q
        if v is not None:
            self.v[b] = v
        if w is not None:
            self.w[b] = w if w_frame == "body" else pure(quat.rotate_inv)(self.q[b], w,
                                                                        np.empty(3))
        self._sync(b)

    def impulse(self, b, point, impulse):
        """A free body gains linear momentum J and angular momentum (r - x) x J about its
        centre of mass; a pivoted body angular momentum (r - pivot) x J about its pivot (the
        pivot supplies the reaction impulse)."""
        fm = self.frozen
        if fm.kind[b] == PIVOTED:
            arm = point - fm.pivot[b]
            dv = np.zeros(3)
        else:
            arm = point - self.x[b]
            dv = impulse / fm.mass[b]
        dh_body = quat.rotate_inv(self.q[b], np.cross(arm, impulse), np.empty(3))
        dw = fm.jref_inv[b] @ dh_body
        with np.errstate(over="ignore", invalid="ignore"):
            new_v = self.v[b] + dv
            new_w = self.w[b] + dw
            energy = 0.5 * fm.mass[b] * new_v @ new_v + 0.5 * new_w @ (fm.jref[b] @ new_w)
        if not (np.all(np.isfinite(new_v)) and np.all(np.isfinite(new_w))
                and np.isfinite(energy)):
            return None
        return b, new_v, new_w

    def write_velocities(self, jump):
        b, new_v, new_w = jump
        self.v[b] = new_v
        self.w[b] = new_w
        self._sync(b, teleport=False)
