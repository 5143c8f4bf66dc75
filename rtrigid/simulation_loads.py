"""The loads of a :class:`~rtrigid.simulation.Simulation`: forces and torques applied until
cleared, and impulses; with the fast checks a control loop's calls take.

:class:`LoadsMixin` holds these methods of ``Simulation``.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rtrigid.maths import quat
from rtrigid.simulation_helpers import Handle, SimulationBase
from rtrigid.validate import as_frame, as_vector


_PLAIN_NUMBERS = frozenset((float, int, np.float64, np.float32, np.int64, np.int32))


class LoadsMixin(SimulationBase):
    """Applied loads and impulses, for :class:`~rtrigid.simulation.Simulation`."""

    # -- loads and impulses ----------------------------------------------------------------
    def _load_point(self, b: int, point: ArrayLike | None, frame: str) -> NDArray[np.float64]:
        """A point given in ``frame`` as a world point (None: the centre of mass)."""
        if point is None:
            return self.backend.x[b].copy()
        point = as_vector(point, 3, "point")
        if frame == "body":
            return self.backend.x[b] + quat.rotate(self.backend.q[b], point, np.empty(3))
        return point

    @property
    def _f_app(self) -> NDArray[np.float64]:
        return self.backend.A[: 3 * self.nb].reshape(self.nb, 3)

    @property
    def _t_app(self) -> NDArray[np.float64]:
        return self.backend.A[3 * self.nb : 6 * self.nb].reshape(self.nb, 3)

    def apply_force(
        self, body: Handle, force: ArrayLike, point: ArrayLike | None = None, frame: str = "world"
    ) -> None:
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

    def apply_torque(self, body: Handle, torque: ArrayLike, frame: str = "world") -> None:
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

    def clear_applied(self, body: Handle | None = None) -> None:
        """Remove applied forces and torques (of one body, or of all); joint forces held by
        :meth:`set_joint_force` stay until set again."""
        if body is None:
            self.backend.A[: 6 * self.nb] = 0.0
        else:
            b = self.body_index(body)
            self._f_app[b] = 0.0
            self._t_app[b] = 0.0

    def applied(self, body: Handle) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The (force, torque) currently applied to a body, world frame."""
        b = self.body_index(body)
        return self._f_app[b].copy(), self._t_app[b].copy()

    def apply_impulse(
        self,
        body: Handle,
        impulse: ArrayLike | None = None,
        point: ArrayLike | None = None,
        frame: str = "world",
        *,
        impulse_world: ArrayLike | None = None,
        point_world: ArrayLike | None = None,
    ) -> None:
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
                raise ValueError(
                    "impulse: give impulse/point/frame or impulse_world/point_world, not both"
                )
            impulse, point = impulse_world, point_world if point is None else point
        if impulse is None:
            raise ValueError("impulse: missing")
        impulse = self._to_world(b, as_vector(impulse, 3, "impulse"), frame)
        where = self._load_point(b, point, frame)
        if self.model.bodies[b].kinematic:
            return  # an infinite mass: its motion is the user's (set_kinematic_target)
        jump = self.backend.impulse(b, where, impulse)
        if jump is None:
            raise ValueError(f"impulse: {impulse.tolist()} would give non-finite velocities")
        self._write("impulse", lambda: self.backend.write_velocities(jump))


def _vec3(value: Any, name: str) -> tuple[float, ...]:
    """``as_vector(value, 3, name)`` as a tuple of floats: a fast path for a tuple, list or
    array of three plain finite numbers (what a control loop passes), the full checks and
    their messages for anything else."""
    if type(value) in (tuple, list, np.ndarray) and len(value) == 3:
        a, b, c = value
        if type(a) in _PLAIN_NUMBERS and type(b) in _PLAIN_NUMBERS and type(c) in _PLAIN_NUMBERS:
            try:
                a, b, c = float(a), float(b), float(c)
            except OverflowError:  # a huge int: the slow path says so
                pass
            else:
                if _finite(a, b, c):
                    return a, b, c
    return tuple(as_vector(value, 3, name).tolist())


def _finite(*values: float) -> bool:
    for v in values:
        if not math.isfinite(v):
            return False
    return True


def _rotate(q: NDArray[np.float64], v: Sequence[float]) -> tuple[float, float, float]:
    """R(q) v for a unit quaternion (w, x, y, z) (an array) and a 3-tuple, as a tuple."""
    w, x, y, z = q.tolist()
    t0 = 2.0 * (y * v[2] - z * v[1])
    t1 = 2.0 * (z * v[0] - x * v[2])
    t2 = 2.0 * (x * v[1] - y * v[0])
    return (
        v[0] + w * t0 + y * t2 - z * t1,
        v[1] + w * t1 + z * t0 - x * t2,
        v[2] + w * t2 + x * t1 - y * t0,
    )


def _refuse_nonfinite(field: str, *arrays: ArrayLike) -> None:
    if not all(np.all(np.isfinite(a)) for a in arrays):
        raise ValueError(
            f"{field}: the applied loads would not be finite with this value; "
            "the simulation is unchanged"
        )
