"""Controllers the demos fly and drive their models with, through the public API only.

Each is a callable ``controller(sim)`` that reads the state and sets the inputs for the next
step; a loop calls it before every step (``Viewer(..., controller=...)`` does).
"""
from __future__ import annotations

import numpy as np

from rtrigid import scenarios
from rtrigid.maths import quat


class QuadrotorController:
    """Position and attitude control of the ``quadrotor`` scenario by its four rotor thrusts.

    An outer loop turns the position error into a wanted acceleration (a critically damped
    spring of natural frequency ``omega_position``, plus gravity); the thrust is that
    acceleration's component along the body's z axis times the mass, and the wanted body z
    axis is its direction.  An inner loop turns the attitude error (body z towards the wanted
    axis, body x towards the heading ``yaw``) into a body torque, a critically damped spring
    of frequency ``omega_attitude`` scaled by the inertia.  The mixer solves the four thrusts
    for that thrust and torque, never below 0 nor above ``max_thrust``.  ``target``: the
    position to hold (settable at any time, e.g. from the keyboard).
    """

    def __init__(self, sim, target=(0.0, 0.0, 1.0), yaw=0.0, omega_position=2.0,
                 omega_attitude=20.0, max_thrust=8.0, body="frame"):
        self.body = sim.body_index(body)
        self.mass = float(sim.body_mass[self.body])
        self.inertia = sim.body_inertia[self.body].copy()
        self.gravity = np.asarray(sim.gravity, dtype=float)
        rotors = scenarios.info(sim)["rotors"]
        self.arm = float(np.linalg.norm(rotors[0][0]))
        self.target = np.asarray(target, dtype=float)
        self.yaw = float(yaw)
        self.kp, self.kd = omega_position ** 2, 2.0 * omega_position
        self.ka, self.kw = omega_attitude ** 2, 2.0 * omega_attitude
        self.max_thrust = float(max_thrust)
        self.thrusts = np.zeros(4)

    def __call__(self, sim):
        x, q = sim.pose(self.body)
        v, _ = sim.velocity(self.body)
        w_body = sim.velocity(self.body, frame="body")[1]
        rot = quat.rotmat(q, np.empty((3, 3)))          # body -> world, columns: body axes
        accel = self.kp * (self.target - x) - self.kd * v - self.gravity
        thrust = self.mass * float(accel @ rot[:, 2])
        z_want = accel / np.linalg.norm(accel)
        heading = np.array([np.cos(self.yaw), np.sin(self.yaw), 0.0])
        # attitude error as a rotation vector in body axes: tilt body z onto z_want, and
        # turn body x towards the heading about body z
        tilt = rot.T @ np.cross(rot[:, 2], z_want)
        x_flat = heading - (heading @ rot[:, 2]) * rot[:, 2]
        yaw_err = float(np.cross(rot[:, 0], x_flat) @ rot[:, 2])
        err = tilt + np.array([0.0, 0.0, yaw_err])
        torque = self.inertia * (self.ka * err - self.kw * w_body)
        self.thrusts = self.mix(thrust, torque)
        scenarios.set_rotor_thrusts(sim, self.thrusts, self.body)
        return self.thrusts

    def mix(self, thrust, torque):
        """The four thrusts giving ``thrust`` along body z and ``torque`` (body axes); rotors
        as in :func:`rtrigid.scenarios.quadrotor`, clipped to [0, max_thrust]."""
        a, k = self.arm, scenarios.QUADROTOR_YAW_PER_THRUST
        tx, ty, tz = torque
        plus, minus = (thrust + tz / k) / 2.0, (thrust - tz / k) / 2.0   # rotors 1+3, 0+2
        t = np.array([(minus - ty / a) / 2.0, (plus + tx / a) / 2.0,
                      (minus + ty / a) / 2.0, (plus - tx / a) / 2.0])
        return np.clip(t, 0.0, self.max_thrust)
