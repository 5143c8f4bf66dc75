"""The actuators of a :class:`~rtrigid.simulation.Simulation`: handles, controls (clamped to
their ranges), forces and work, and the check of servo gains against an explicit scheme's
stable range.

:class:`ActuatorsMixin` holds these methods of ``Simulation``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rtrigid import integrators
from rtrigid.backends.buffers import clamp_into
from rtrigid.simulation_helpers import Handle, SimulationBase, entry_point
from rtrigid.validate import as_scalar, as_vector


if TYPE_CHECKING:
    from rtrigid.model import Model

RK4_SERVO_LIMIT = 2.5  # |s| dt a servo may reach under nullspace_rk4 (_check_servo_gains)
EULER_SERVO_MARGIN = 0.8  # of semi_implicit_euler's stable kp range (_check_servo_gains)
_F64 = np.dtype(np.float64)
_STRIDE_F64 = (8,)  # a contiguous float64 vector's strides


class ActuatorsMixin(SimulationBase):
    """Actuator controls, forces and work, for :class:`~rtrigid.simulation.Simulation`."""

    # -- actuators ----------------------------------------------------------------------------
    def actuator_index(self, actuator: Handle) -> int:
        """Resolve an actuator handle (what ``Model.add_actuator`` returned) or name."""
        if isinstance(actuator, (int, np.integer)) and not isinstance(actuator, bool):
            if 0 <= actuator < self.na:
                return int(actuator)
            raise ValueError(
                f"actuator: no actuator with handle {actuator}; the model has "
                f"{self.na}: {self.actuator_names}"
            )
        if isinstance(actuator, str) and actuator in self.actuator_names:
            return self.actuator_names.index(actuator)
        raise ValueError(f"actuator: no actuator {actuator!r}; known: {self.actuator_names}")

    def set_control(self, actuator: Handle, value: float) -> None:
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

    def set_controls(self, u: ArrayLike) -> None:
        """Set every actuator's control, ``u`` of length ``na`` in model order
        (``actuator_names``); clamped to each ``ctrl_range`` (see :meth:`set_control`)."""
        if not (
            type(u) is np.ndarray
            and u.dtype is _F64
            and u.shape == self._na_shape
            and u.strides == _STRIDE_F64
            and self._clamp(u, self._ctrl_lo, self._ctrl_hi, self._ctrl)
        ):
            # the full checks (on a copy; a non-finite entry is refused here)
            clamp_into(as_vector(u, self.na, "u"), self._ctrl_lo, self._ctrl_hi, self._ctrl)

    def _clamp(
        self,
        u: NDArray[np.float64],
        lo: NDArray[np.float64],
        hi: NDArray[np.float64],
        out: NDArray[np.float64],
    ) -> bool:
        """:func:`clamp_into` through numba's dispatcher; then the instance's ``_clamp``
        becomes its compiled entry point for these types (0.43 -> 0.26 us a set_controls on
        the 7-link arm), as :meth:`_first_call` does for the kernel.  Only contiguous float64
        vectors reach it (the entry point reads its arrays with the layout it was compiled
        for)."""
        ok = clamp_into(u, lo, hi, out)
        self._clamp = entry_point(clamp_into, u, lo, hi, out)  # type: ignore[method-assign]
        return ok

    def controls(self) -> NDArray[np.float64]:
        """The controls held now (a copy, model order)."""
        return self._ctrl.copy()

    def actuator_forces(self) -> NDArray[np.float64]:
        """Each actuator's force (before the gear) in the current state, at the rates of
        :meth:`qvel` (a new array, model order)."""
        out = np.empty(self.na)
        if self.na:
            from rtrigid.backends.tree.kinematics import ACT_Q, ACT_V, actuator_force

            act = self.backend.act
            Qg, nu = self.backend.positions(), self.backend.rates()
            for a in range(self.na):
                out[a] = actuator_force.py_func(
                    act, a, self._ctrl, Qg[int(act[a, ACT_Q])], nu[int(act[a, ACT_V])]
                )
        return out

    def actuator_work(self) -> NDArray[np.float64]:
        """The work each actuator has done since construction (J; a new array, model order).

        Part of the state: snapshots keep it, a failed step rolls it back.  Under
        ``energy_momentum`` it is the exact discrete work, so ``energy() -
        actuator_work().sum()`` stays constant to round-off (a servo's work is minus the
        change of its spring energy plus its damper's loss).  Under ``nullspace_rk4`` it is
        RK4's quadrature of the power (fourth order in dt).
        """
        return self._awork.copy()

    def _check_servo_gains(self, model: Model) -> None:
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
            N = np.linalg.svd(lc.jacobian(Qg))[2][lc.rank :].T
            Minv = (N @ np.linalg.solve(N.T @ M @ N, N.T))[np.ix_(self._vidx, self._vidx)]
        for k, a in enumerate(model.actuators):
            if a.kind == "motor":
                continue
            col = self._vidx_of_joint(a.joint)
            m = 1.0 / Minv[col, col]
            g2 = a.gear * a.gear
            c, w2 = a.kv * g2 / m, a.kp * g2 / m
            if self.integrator == "semi_implicit_euler":
                self._check_euler_servo(a, m, w2 * self.dt**2, c * self.dt)
                continue
            disc = 0.25 * c * c - w2
            lam = math.sqrt(w2) if disc < 0.0 else 0.5 * c + math.sqrt(disc)
            if lam * self.dt > RK4_SERVO_LIMIT:
                raise ValueError(
                    f"kp: actuator {a.name!r}'s gains (kp={a.kp:g}, kv={a.kv:g}, gear={a.gear:g}) "
                    f"are beyond nullspace_rk4's stable range at dt={self.dt:g}: with the joint's "
                    f"apparent inertia m_eff={m:.4g} at the initial state its fastest rate is "
                    f"|s|={lam:.4g}/s, |s| dt={lam * self.dt:.3g} > {RK4_SERVO_LIMIT} "
                    f"(kp g² dt²/m_eff must stay below {RK4_SERVO_LIMIT**2:g} and "
                    f"kv g² dt/m_eff below {RK4_SERVO_LIMIT:g}, here {w2 * self.dt**2:.3g} and "
                    f"{c * self.dt:.3g}); lower the gains or dt{self._stable_servo_schemes()}"
                )

    def _stable_servo_schemes(self) -> str:
        """ ", or use X, whose servos are stable at any gain" for the schemes that step this
        model as a whole and whose servos are (implicit ones); "" when there is none."""
        ok = [n for n in integrators.for_model(self.model) if integrators.get(n).implicit]
        return f", or use {' or '.join(ok)}, whose servos are stable at any gain" if ok else ""

    def _check_euler_servo(self, a: Any, m: float, stiff: float, damp: float) -> None:
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
                "explicit); lower kp or dt, raise kv" + self._stable_servo_schemes()
            )

    def _vidx_of_joint(self, j: int) -> int:
        """Index in qvel of joint handle j's first rate."""
        b = self._joint_child[j]
        start = self.backend.slots(b)[1].start
        return int(np.nonzero(self._vidx == start)[0][0])
