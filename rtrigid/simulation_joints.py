"""The joints of a :class:`~rtrigid.simulation.Simulation`: handles, each joint's coordinates,
rates and held force, and the generalized coordinates (``qpos``, ``qvel``) of all of them.

:class:`JointsMixin` holds these methods of ``Simulation``.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rtrigid.joints import KINDS
from rtrigid.simulation_helpers import Handle, SimulationBase, unit_quaternion
from rtrigid.validate import as_vector


class JointsMixin(SimulationBase):
    """Joint and generalized-coordinate access, for :class:`~rtrigid.simulation.Simulation`."""

    # -- joints -----------------------------------------------------------------------------
    def joint_index(self, joint: Handle) -> int:
        """Resolve a joint handle (what ``Model.add_joint`` returned) or name to its handle."""
        if isinstance(joint, (int, np.integer)) and not isinstance(joint, bool):
            if 0 <= joint < len(self._joint_child):
                return int(joint)
            raise ValueError(
                f"joint: no joint with handle {joint}; handles are what "
                "Model.add_joint returned, names work too: "
                f"{self.joint_names}"
            )
        if isinstance(joint, str) and joint in self.joint_names:
            return self.joint_names.index(joint)
        raise ValueError(f"joint: no joint {joint!r}; known: {self.joint_names}")

    def _joint_body(self, joint: Handle) -> int:
        return self._joint_child[self.joint_index(joint)]

    def joint_position(self, joint: Handle) -> NDArray[np.float64]:
        """The joint's coordinates (a copy), see the table of :mod:`rtrigid.joints`."""
        return self.backend.joint_state(self._joint_body(joint))[0]

    def joint_velocity(self, joint: Handle) -> NDArray[np.float64]:
        """The joint's rates at t (a copy), see the table of :mod:`rtrigid.joints` and
        :meth:`qpos`."""
        return self.backend.joint_state(self._joint_body(joint))[1]

    def set_joint_position(self, joint: Handle, value: ArrayLike) -> None:
        """Set a joint's coordinates; the bodies beyond it move along (a teleport)."""
        b = self._joint_body(joint)
        j = self.backend.joints[b]
        n = len(self.backend.joint_state(b)[0])
        if n == 0:
            raise ValueError(f"joint: {j.name!r} ({j.kind}) has no coordinates")
        value = as_vector(value, n, "value")
        k = KINDS[j.kind].quaternion
        if k >= 0:
            value[k : k + 4] = unit_quaternion(value[k : k + 4], "value")
        lo, hi = j.limits
        if n == 1 and not lo <= value[0] <= hi:
            raise ValueError(
                f"value: {value[0]} is outside the limits [{lo}, {hi}] of joint {j.name!r}"
            )
        self._write("value", lambda: self.backend.set_joint_state(b, qpos=value))

    def set_joint_velocity(self, joint: Handle, value: ArrayLike) -> None:
        """Set a joint's rates (see the table of :mod:`rtrigid.joints`)."""
        b = self._joint_body(joint)
        n = len(self.backend.joint_state(b)[1])
        if n == 0:
            raise ValueError(f"joint: {self.backend.joints[b].name!r} has no rates")
        value = as_vector(value, n, "value")
        self._write("value", lambda: self.backend.set_joint_state(b, qvel=value))

    # -- generalized coordinates -----------------------------------------------------------
    def qpos(self) -> NDArray[np.float64]:
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

    def qvel(self) -> NDArray[np.float64]:
        """All generalized rates at the current time (a new array of length ``nv``), in the
        layout of :meth:`qpos`."""
        if self._qvel_src is not None:
            return self._qvel_src.copy()
        return self.backend.rates()[self._vidx]

    def set_qpos(self, qpos: ArrayLike) -> None:
        """Set all generalized coordinates (layout of :meth:`qpos`); the rates are kept.

        Each quaternion is normalised (one of norm below 1e-12 is refused).  A teleport:
        the bodies move to the new configuration at once.
        """
        qpos = as_vector(qpos, self.nq, "qpos")
        for k, name in self._quat_at:
            qpos[k : k + 4] = unit_quaternion(
                qpos[k : k + 4], f"qpos (joint {name!r}, entries {k}..{k + 3})"
            )
        full = np.empty(self.nq)
        full[self._qidx] = qpos
        for _, o, lo, hi in self._limits:
            if not lo <= full[o] <= hi:
                k = int(np.flatnonzero(self._qidx == o)[0])
                raise ValueError(
                    f"qpos: entry {k} = {full[o]} is outside its joint's limits [{lo}, {hi}]"
                )
        self._write("qpos", lambda: self.backend.set_coordinates(qpos=full))

    def set_qvel(self, qvel: ArrayLike) -> None:
        """Set all generalized rates (layout of :meth:`qvel`); the configuration is kept."""
        qvel = as_vector(qvel, self.nv, "qvel")
        full = np.empty(self.nv)
        full[self._vidx] = qvel
        self._write("qvel", lambda: self.backend.set_coordinates(qvel=full))

    def set_joint_force(self, joint: Handle, value: ArrayLike) -> None:
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
        if (
            type(value) is float
            and type(joint) is int
            and forces is not None
            and 0 <= joint < len(self._force_at)
            and self._force_at[joint] >= 0
            and math.isfinite(value)
        ):  # a control loop's call: one revolute/prismatic
            forces[self._force_at[joint]] = value
            return
        b = self._joint_body(joint)
        j = self.backend.joints[b]
        if forces is None:
            raise ValueError(
                f"joint: {j.name!r} is a {j.kind} joint of a single body, whose "
                "kernels take no joint force; use apply_force / apply_torque"
            )
        vs = self.backend.slots(b)[1]
        n = vs.stop - vs.start
        if n == 0:
            raise ValueError(f"joint: {j.name!r} ({j.kind}) has no rates to take a force")
        if n == 1 and np.ndim(value) == 0 and not isinstance(value, (str, bytes)):
            value = [value]
        forces[vs] = as_vector(value, n, "value")

    def joint_force(self, joint: Handle) -> NDArray[np.float64]:
        """The generalized force held on the joint's rates (a copy; zeros if none)."""
        b = self._joint_body(joint)
        vs = self.backend.slots(b)[1]
        forces = self.backend.joint_forces
        return np.zeros(vs.stop - vs.start) if forces is None else forces[vs].copy()

    def friction_work(self) -> float:
        """The work the joints' Coulomb friction has done since construction (J, never
        positive).

        Counted by ``energy_momentum``, exactly: each step's sliding joints' ``-c |c1 - c0|``
        and the kinetic energy taken out where a joint is stopped and held.  So
        ``energy() - actuator_work().sum() - friction_work()`` stays constant to round-off in
        a model without dampers.  Part of the state: snapshots keep it, a failed step rolls it
        back.  The other schemes do not count it: NaN.
        """
        work = getattr(self.backend, "friction_work", None)
        if work is None or self.integrator != "energy_momentum":
            return math.nan
        return float(work[0])
