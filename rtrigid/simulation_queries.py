"""The dynamics queries of a :class:`~rtrigid.simulation.Simulation`, on its current state:
mass matrix, bias forces, inverse dynamics, an IMU's readings, joint reactions, jacobians,
and the joints as they are now.

:class:`QueriesMixin` holds these methods of ``Simulation``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rtrigid.joints import KINDS
from rtrigid.maths import quat
from rtrigid.simulation_helpers import Handle, SimulationBase
from rtrigid.validate import as_vector


class QueriesMixin(SimulationBase):
    """Dynamics queries and joint inspection, for :class:`~rtrigid.simulation.Simulation`."""

    # -- dynamics queries (on the current state; rates and forces in the layout of qvel) --------
    def _dynamics(self) -> Any:
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

    def mass_matrix(self) -> NDArray[np.float64]:
        """The joint-space mass matrix M(qpos), (nv, nv), symmetric positive definite: the
        kinetic energy is qvel^T M qvel / 2 (rates and their order as in :meth:`qpos`).
        The composite-rigid-body algorithm, O(nv * depth).

        With loop joints (:meth:`Model.add_loop_joint`) it is the spanning tree's matrix in
        the tree's rates (what MuJoCo's qM is beside its equality constraints): the energy
        formula holds, and the motion obeys M qacc + bias = tau + J^T lambda with the loops'
        rows J qvel = 0 and their multipliers lambda (see :meth:`joint_reaction`)."""
        Qg = self.backend.positions()
        return self._dynamics().mass_matrix(Qg)[np.ix_(self._vidx, self._vidx)]

    def bias_forces(self) -> NDArray[np.float64]:
        """(nv,) Coriolis, centrifugal and gravity forces at the current state: the
        equations of motion are M qacc + bias = tau, tau everything else acting on the rates
        (joint forces, springs, dampers, applied loads) -- MuJoCo's qfrc_bias.  With loop
        joints it is the spanning tree's, and the loops' reactions J^T lambda join tau (see
        :meth:`mass_matrix`)."""
        Qg, nu = self.backend.positions(), self.backend.rates()
        zero = np.zeros(self.nv)
        return self._dynamics().inverse_dynamics(Qg, nu, zero)[self._vidx]

    def inverse_dynamics(self, qacc: ArrayLike) -> NDArray[np.float64]:
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
        return self._dynamics().inverse_dynamics(
            be.positions(), be.rates(), nudot, self._joint_loads()
        )[self._vidx]

    def _joint_loads(self) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """(f_app, t_app, held) now: the applied loads, and the held joint forces with the
        actuators' forces at the present controls added (backend order)."""
        be = self.backend
        held = be.joint_forces if be.joint_forces is not None else np.zeros(self.nv)
        if self.na:  # the actuators act too
            held = held.copy()
            from rtrigid.backends.tree.kinematics import ACT_GEAR, ACT_V

            np.add.at(
                held, be.act[:, ACT_V].astype(np.intp), be.act[:, ACT_GEAR] * self.actuator_forces()
            )
        return self._f_app, self._t_app, held

    def _motion(self) -> tuple:
        """The query engine's :meth:`~rtrigid.backends.tree.dynamics.Queries.motion` now."""
        be = self.backend
        return self._dynamics().motion(
            be.positions(), be.rates(), self._joint_loads(), self._limits
        )

    def imu(
        self, body: Handle, point_body: ArrayLike = (0.0, 0.0, 0.0)
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
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

    def joint_reaction(self, joint: Handle) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
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

    def jacobian(
        self, body: Handle, point_body: ArrayLike = (0.0, 0.0, 0.0)
    ) -> NDArray[np.float64]:
        """(6, nv): rows [linear; angular] world velocity of a body point per unit rate, so
        ``jacobian(b, p) @ qvel()`` is (velocity of the point, angular velocity), world axes.
        ``point_body``: body axes, from the centre of mass.  With loop joints the same
        (qvel meets the loops; the columns are the spanning tree's rates)."""
        b = self.body_index(body)
        point = as_vector(point_body, 3, "point_body")
        Qg = self.backend.positions()
        return self._dynamics().jacobian(Qg, b, point)[:, self._vidx]

    def joints(self) -> list[dict[str, Any]]:
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
            out.append(
                {
                    "kind": j.kind,
                    "parent": j.parent,
                    "child": b,
                    "anchor": anchor,
                    "axis": axis,
                    "name": j.name,
                    "limits": j.limits,
                }
            )
        return out

    def loop_joints(self) -> list[dict[str, Any]]:
        """The loop (cut) joints (:meth:`Model.add_loop_joint`), for drawing and inspection: a
        list of dicts with ``name``, ``kind``, ``parent`` (body index, -1 for the world),
        ``child``, ``anchor_parent`` and ``anchor_child`` (the joint point in the parent's
        and the child's frame; the parent's is a world point for the world) and
        ``axis_child`` (the joint axis in the child's frame, ``None`` where the kind has
        none).  Constant: place them at any poses (the loop closes where the two anchors
        meet)."""
        return [
            {
                "name": j.name,
                "kind": j.kind,
                "parent": j.parent,
                "child": j.child,
                "anchor_parent": np.array(j.anchor_parent, dtype=np.float64),
                "anchor_child": np.array(j.anchor_child, dtype=np.float64),
                "axis_child": (
                    np.array(j.axis_child, dtype=np.float64) if KINDS[j.kind].axial else None
                ),
            }
            for j in getattr(self.model, "loop_joints", ())
        ]
