"""The bodies of a :class:`~rtrigid.simulation.Simulation`: handles, poses, velocities, and
writes of a body's state (each refused, and the state left as it was, if it would not be
finite).

:class:`BodiesMixin` holds these methods of ``Simulation``.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rtrigid.maths import quat
from rtrigid.simulation_helpers import Handle, SimulationBase, readonly, unit_quaternion
from rtrigid.validate import as_frame, as_vector


class BodiesMixin(SimulationBase):
    """Body handles, poses, velocities and state writes, for
    :class:`~rtrigid.simulation.Simulation`."""

    # -- bodies -----------------------------------------------------------------------------
    def body_index(self, body: Handle) -> int:
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

    def pose(self, body: Handle) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """World centre-of-mass position and unit quaternion, body -> world (copies)."""
        b = self.body_index(body)
        return self.backend.x[b].copy(), self.backend.q[b].copy()

    def link_pose(self, link: str) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
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
    def v(self) -> NDArray[np.float64]:
        """Centre-of-mass velocities at t, (nb, 3) world axes (read-only view)."""
        return readonly(self.backend.velocities()[0])

    @property
    def w(self) -> NDArray[np.float64]:
        """Angular velocities at t, (nb, 3) each in its body's axes (read-only view)."""
        return readonly(self.backend.velocities()[1])

    def velocity(
        self, body: Handle, frame: str = "world"
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
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

    def _write(self, field: str, write: Callable[[], object]) -> None:
        """Run a state write; if the state it leaves (or its energy or momentum) is not finite,
        put everything back and refuse the value, naming ``field``."""
        be = self.backend
        saved = be.S.copy(), be.S_prev.copy()
        with np.errstate(all="ignore"):
            try:
                write()
                ok = (
                    bool(np.all(np.isfinite(be.S)))
                    and np.isfinite(self.energy())
                    and _momentum_is_finite(be.mass, be.inertia, be.x, be.v, be.w)
                )
            except FloatingPointError:
                ok = False
            except ValueError:  # a write the backend refuses (a loop it cannot close)
                be.S[:], be.S_prev[:] = saved
                raise
        if not ok:
            be.S[:], be.S_prev[:] = saved
            raise ValueError(
                f"{field}: the state would not be finite with this value (its "
                "energy or momentum overflows); the simulation is unchanged"
            )

    def _to_world(self, b: int, vector: NDArray[np.float64], frame: str) -> NDArray[np.float64]:
        """A vector given in ``frame`` as world components."""
        if frame == "body":
            return quat.rotate(self.backend.q[b], vector, np.empty(3))
        return vector

    def set_orientation(self, body: Handle, q: ArrayLike) -> None:
        """Set the orientation (normalised); a pivoted body turns about its pivot."""
        b = self.body_index(body)
        q = unit_quaternion(as_vector(q, 4, "q"), "q")
        self._write("q", lambda: self.backend.set_body(b, q=q))

    def set_angular_velocity(self, body: Handle, omega: ArrayLike, frame: str = "world") -> None:
        """Set the angular velocity, given in world axes (default) or body axes."""
        b = self.body_index(body)
        omega = as_vector(omega, 3, "omega")
        frame = as_frame(frame)
        self._write("omega", lambda: self.backend.set_body(b, w=omega, w_frame=frame))

    def set_position(self, body: Handle, x: ArrayLike) -> None:
        """Set the centre-of-mass position (world) of a free body."""
        b = self.body_index(body)
        x = as_vector(x, 3, "x")
        self._write("x", lambda: self.backend.set_body(b, x=x))

    def set_velocity(self, body: Handle, v: ArrayLike, frame: str = "world") -> None:
        """Set the centre-of-mass velocity of a free body, in world (default) or body axes."""
        b = self.body_index(body)
        v = self._to_world(b, as_vector(v, 3, "v"), as_frame(frame))
        self._write("v", lambda: self.backend.set_body(b, v=v))

    def set_kinematic_target(self, body: Handle, x: ArrayLike, q: ArrayLike | None = None) -> None:
        """Move a kinematic body (``add_body(..., kinematic=True)``) so that it reaches the
        centre-of-mass position ``x`` and orientation ``q`` (unit quaternion; None: as it is)
        at the end of the next step: its velocity and angular velocity become those of a
        uniform screw motion from its pose now to that pose in ``dt``, and it keeps them
        through later steps until the next target.  Call it before each step to drive it
        along a path (a platform, a pusher); the bodies it touches are carried by friction.
        """
        b = self.body_index(body)
        if not self.model.bodies[b].kinematic:
            raise ValueError(
                f"body: {self.names[b]!r} is not kinematic (add_body(..., kinematic=True))"
            )
        x = as_vector(x, 3, "x")
        be = self.backend
        q0 = be.q[b].copy()
        q = q0 if q is None else unit_quaternion(as_vector(q, 4, "q"), "q")
        if float(q @ q0) < 0.0:
            q = -q  # the shorter way round
        turn = quat.quat_mul(quat.quat_conj(q0, np.empty(4)), q, np.empty(4))
        v = (x - be.x[b]) / self.dt
        w = quat.quat_to_rotvec(turn, np.empty(3)) / self.dt  # body axes
        self._write("x", lambda: be.set_body(b, v=v, w=w, w_frame="body"))


def _momentum_is_finite(
    mass: NDArray[np.float64],
    inertia: NDArray[np.float64],
    x: NDArray[np.float64],
    v: NDArray[np.float64],
    w: NDArray[np.float64],
) -> bool:
    """Whether the momenta of :meth:`Simulation.momentum` are finite (their sums included):
    by numpy's array operations, which compile nothing, for a state write's check.  The
    body-frame angular momenta J w are summed by size only (a rotation keeps the norm)."""
    mv = mass[:, None] * v
    parts = (mv.sum(axis=0), np.cross(x, mv).sum(axis=0), np.linalg.norm(inertia * w, axis=1).sum())
    return all(bool(np.all(np.isfinite(p))) for p in parts)
