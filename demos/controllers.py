"""Controllers the demos fly and drive their models with, through the public API only.

Each is a callable ``controller(sim)`` that reads the state and sets the inputs for the next
step; a loop calls it before every step (``Viewer(..., controller=...)`` does).  What the
viewer shows and passes on: ``on_key(name)`` (pyglet key names; True if used), ``key_help``,
``hud_lines(sim)`` (the control inputs) and a draggable ``target`` with ``move_target``.
Their changing state lives in the simulation (servo targets are ``sim.controls()``, a gait's
phase is ``sim.t``), so the viewer's reset and run-ahead put them back with it.
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

    key_help = ("arrows tilt (pitch, roll)   pgup/pgdn thrust   q/e yaw   "
                "p hold position here   drag the red ball: fly there")

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
        self.sim = sim        # the one the keys act on
        self.manual = None   # (roll, pitch, collective thrust): flown by hand, see on_key

    def __call__(self, sim):
        x, q = sim.pose(self.body)
        v, _ = sim.velocity(self.body)
        w_body = sim.velocity(self.body, frame="body")[1]
        rot = quat.rotmat(q, np.empty((3, 3)))          # body -> world, columns: body axes
        if self.manual is None:
            accel = self.kp * (self.target - x) - self.kd * v - self.gravity
            thrust = self.mass * float(accel @ rot[:, 2])
            z_want = accel / np.linalg.norm(accel)
        else:
            roll, pitch, thrust = self.manual
            z_want = self._tilted_axis(roll, pitch)
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

    def _tilted_axis(self, roll, pitch):
        """The body z axis wanted for ``roll`` about the heading and ``pitch`` about the
        axis across it (rad)."""
        c, s = np.cos(self.yaw), np.sin(self.yaw)
        forward, left = np.array([c, s, 0.0]), np.array([-s, c, 0.0])
        axis = np.array([0.0, 0.0, 1.0]) * np.cos(roll) * np.cos(pitch)
        return axis + forward * np.sin(pitch) * np.cos(roll) - left * np.sin(roll)

    TILT_STEP, THRUST_STEP, YAW_STEP, MAX_TILT = 0.05, 0.25, 0.3, 0.5

    def on_key(self, name):
        """Fly by hand: arrows tilt the wanted attitude (UP pitches forward), PAGEUP/PAGEDOWN
        change the collective thrust, Q/E turn the heading; P goes back to holding the
        position the quadrotor is at."""
        if name in ("Q", "E"):
            self.yaw += self.YAW_STEP if name == "Q" else -self.YAW_STEP
            return True
        if name == "P":
            self.manual = None
            self.target = self.sim.pose(self.body)[0].copy()
            return True
        steps = {"UP": (0, 1, 0), "DOWN": (0, -1, 0), "RIGHT": (1, 0, 0), "LEFT": (-1, 0, 0),
                 "PAGEUP": (0, 0, 1), "PAGEDOWN": (0, 0, -1)}
        if name not in steps:
            return False
        if self.manual is None:
            self.manual = (0.0, 0.0, self.mass * float(np.linalg.norm(self.gravity)))
        roll, pitch, thrust = self.manual
        d = steps[name]
        self.manual = (float(np.clip(roll + d[0] * self.TILT_STEP, -self.MAX_TILT, self.MAX_TILT)),
                       float(np.clip(pitch + d[1] * self.TILT_STEP, -self.MAX_TILT,
                                     self.MAX_TILT)),
                       float(np.clip(thrust + d[2] * self.THRUST_STEP, 0.0, 4 * self.max_thrust)))
        return True

    def move_target(self, point):
        """Hold this position (the viewer's drag of the red ball)."""
        self.target = np.asarray(point, dtype=float).copy()
        self.manual = None

    def hud_lines(self, sim):
        if self.manual is None:
            mode = (f"holding position ({self.target[0]:.2f}, {self.target[1]:.2f}, "
                    f"{self.target[2]:.2f}) m, heading {np.degrees(self.yaw):.0f} deg")
        else:
            roll, pitch, thrust = self.manual
            mode = (f"flown by hand: roll {np.degrees(roll):+.0f} deg, pitch "
                    f"{np.degrees(pitch):+.0f} deg, heading {np.degrees(self.yaw):.0f} deg, "
                    f"thrust {thrust:.2f} N (hover {self.mass * np.linalg.norm(self.gravity):.2f})")
        rotors = "  ".join(f"{t:.2f}" for t in self.thrusts)
        return [mode, f"rotor thrusts [N]: {rotors}   (work done by the rotors is not "
                      "counted: energy is not conserved)"]

    def mix(self, thrust, torque):
        """The four thrusts giving ``thrust`` along body z and ``torque`` (body axes); rotors
        as in :func:`rtrigid.scenarios.quadrotor`, clipped to [0, max_thrust]."""
        a, k = self.arm, scenarios.QUADROTOR_YAW_PER_THRUST
        tx, ty, tz = torque
        plus, minus = (thrust + tz / k) / 2.0, (thrust - tz / k) / 2.0   # rotors 1+3, 0+2
        t = np.array([(minus - ty / a) / 2.0, (plus + tx / a) / 2.0,
                      (minus + ty / a) / 2.0, (plus - tx / a) / 2.0])
        return np.clip(t, 0.0, self.max_thrust)


def _actuated_columns(sim):
    """For each actuator: the column of its joint's rate in ``sim.qvel()`` and its joint's
    limits (both backends lay qvel out joint by joint in ``sim.joint_names`` order)."""
    starts = np.cumsum([0] + [len(sim.joint_velocity(n)) for n in sim.joint_names])
    limits = {j["name"]: j["limits"] for j in sim.joints()}
    cols, lims = [], []
    for a in sim.model.actuators:
        name = sim.joint_names[a.joint]
        cols.append(int(starts[sim.joint_names.index(name)]))
        lims.append(limits.get(name, (-np.inf, np.inf)))
    return np.array(cols), np.array(lims, dtype=float)


class ServoTeleop:
    """Position servos moved by hand: keys move one servo's target, or the mouse drags a
    target point that the ``tip`` follows.

    Keys: LEFT/RIGHT choose the servo, UP/DOWN move its target by ``step`` (rad or m).
    Dragging ``target`` (a world point; the viewer draws and drags it) makes the servo
    targets follow it by damped least squares on the tip's Jacobian:
    u <- u + ``rate`` dt J^T (J J^T + ``damping``^2 I)^-1 (target - tip), an integral action
    that takes the sag under gravity out, each target kept within ``lead`` of its joint and
    inside the joint's limits.  ``reach``: follow the target from the start.
    """

    key_help = "left/right choose a servo   up/down move its target   drag the red ball: the tip follows"

    def __init__(self, sim, tip=None, tip_point=(0.0, 0.0, 0.0), step=0.1, rate=6.0,
                 damping=0.05, lead=0.6, reach=False):
        if sim.na == 0:
            raise ValueError("sim: ServoTeleop needs a model with actuators")
        self.cols, self.limits = _actuated_columns(sim)
        self.names = list(sim.actuator_names)
        self.sim = sim        # the one the keys act on
        self.selected = 0
        self.step, self.rate, self.damping, self.lead = float(step), float(rate), float(damping), float(lead)
        self.tip = None if tip is None else sim.body_index(tip)
        self.tip_point = np.asarray(tip_point, dtype=float)
        self.target = None if tip is None else self.tip_position(sim)
        self.reach = bool(reach) and self.tip is not None

    def tip_position(self, sim):
        x, q = sim.pose(self.tip)
        return x + quat.rotmat(q, np.empty((3, 3))) @ self.tip_point

    def move_target(self, point):
        self.target = np.asarray(point, dtype=float).copy()
        self.reach = True

    def on_key(self, name):
        if name in ("LEFT", "RIGHT"):
            self.selected = (self.selected + (1 if name == "RIGHT" else -1)) % len(self.names)
            return True
        if name in ("UP", "DOWN"):
            u = self.sim.controls()
            u[self.selected] += self.step if name == "UP" else -self.step
            lo, hi = self.limits[self.selected]
            u[self.selected] = np.clip(u[self.selected], lo, hi)
            self.sim.set_controls(u)
            self.reach = False
            return True
        return False

    def __call__(self, sim):
        if not self.reach:
            self.target = self.tip_position(sim)   # the ball rides on the tip until dragged
            return
        error = self.target - self.tip_position(sim)
        jac = sim.jacobian(self.tip, self.tip_point)[:3, self.cols]
        lam2 = self.damping ** 2
        dq = jac.T @ np.linalg.solve(jac @ jac.T + lam2 * np.eye(3), error)
        q = sim.qpos()[self.cols]
        u = sim.controls() + self.rate * sim.dt * dq
        u = np.clip(u, q - self.lead, q + self.lead)
        sim.set_controls(np.clip(u, self.limits[:, 0], self.limits[:, 1]))

    def hud_lines(self, sim):
        u, f, q = sim.controls(), sim.actuator_forces(), sim.qpos()[self.cols]
        shown = [k for k in range(len(u)) if abs(k - self.selected) <= 3][:7]
        targets = "  ".join(("[" if k == self.selected else "") + f"{self.names[k]} {u[k]:+.2f}"
                            + ("]" if k == self.selected else "") for k in shown)
        lines = [f"servo targets [rad]: {targets}" + ("  ..." if len(shown) < len(u) else ""),
                 "servo torques [N m]: " + "  ".join(f"{f[k]:+.1f}" for k in shown)
                 + f"   joint error max {np.abs(u - q).max():.3f} rad"]
        if self.tip is not None:
            if self.reach:
                miss = np.linalg.norm(self.target - self.tip_position(sim))
                lines.append(f"the tip follows the red ball: {1000 * miss:.0f} mm away")
            else:
                lines.append("drag the red ball on the tip: the tip will follow it")
        return lines


class TrotInTheAir:
    """A quadruped's 12 position servos swinging its legs in a trot while its base is held:
    each leg's thigh and knee targets are its stance plus sines of ``amplitude`` rad at
    ``frequency`` Hz, diagonal legs in phase, read from ``sim.t`` (so a reset restarts the
    gait).  Keys: UP/DOWN amplitude, LEFT/RIGHT frequency, G gait on or off."""

    key_help = "up/down stride   left/right frequency   g gait on/off"

    def __init__(self, sim, stance, legs, amplitude=0.4, frequency=1.5):
        self.stance = np.asarray(stance, dtype=float)
        self.legs = legs            # per leg: (thigh actuator, knee actuator, phase)
        self.amplitude, self.frequency = float(amplitude), float(frequency)
        self.on = True
        self.cols, self.limits = _actuated_columns(sim)

    def on_key(self, name):
        if name in ("UP", "DOWN"):
            self.amplitude = float(np.clip(self.amplitude + (0.05 if name == "UP" else -0.05),
                                           0.0, 0.8))
        elif name in ("LEFT", "RIGHT"):
            self.frequency = float(np.clip(self.frequency + (0.25 if name == "RIGHT" else -0.25),
                                           0.25, 4.0))
        elif name == "G":
            self.on = not self.on
        else:
            return False
        return True

    def __call__(self, sim):
        u = self.stance.copy()
        if self.on:
            t = sim.t
            for thigh, knee, phase in self.legs:
                a = 2.0 * np.pi * (self.frequency * t + phase)
                u[thigh] += self.amplitude * np.sin(a)
                u[knee] += 0.8 * self.amplitude * max(np.cos(a), 0.0)
        sim.set_controls(np.clip(u, self.limits[:, 0], self.limits[:, 1]))

    def hud_lines(self, sim):
        state = (f"trotting: stride {self.amplitude:.2f} rad at {self.frequency:.2f} Hz"
                 if self.on else "standing still")
        f = sim.actuator_forces()
        return [f"{state}; 12 servo targets set each step",
                f"largest servo torque {np.abs(f).max():.2f} N m, thigh targets "
                + " ".join(f"{sim.controls()[k]:+.2f}" for k, _, _ in self.legs)]


def _smoothstep(s):
    s = min(max(s, 0.0), 1.0)
    return s * s * (3.0 - 2.0 * s)


class GraspScript:
    """Picks up a cube by script, as a robot program does: the grasp frame ``tip`` (between
    the fingertips) moves above the cube, down around it, the gripper closes, the hand lifts
    the cube by ``lift`` and holds it there.

    The arm's joint targets at those poses come from damped least squares on the tip's
    Jacobian at construction (its z axis down, its y axis -- the fingers' -- along world y)
    and are interpolated in joint space (smoothstep); before every step the arm's bias forces
    (gravity and Coriolis, :meth:`rtrigid.Simulation.bias_forces`) are the controls of its
    motors, the gravity compensation of a robot's torque controller, so the servos track
    without sag.  The actuators: n position servos on the arm's joints (which come first in
    qpos), the gripper's servo (``open_width`` to 0: it closes until the cube stops it), then
    n motors on the arm's joints in the same order.  ``times``: when the hand is above the
    cube, at it, the gripper closed and the cube lifted (s from now).
    """

    PHASES = ("moving above the cube", "reaching down", "closing the gripper", "lifting",
              "holding the cube")

    def __init__(self, sim, cube_at, tip="panda_grasptarget", cube="cube", lift=0.10,
                 above=0.12, times=(1.0, 2.0, 2.6, 3.6), open_width=0.04):
        n = (sim.na - 1) // 2
        self.cols = _actuated_columns(sim)[0][n + 1:]  # the motors' rates
        self.tip, self.cube = tip, cube
        home = sim.controls()[:n].copy()
        at = np.asarray(cube_at, dtype=float)
        over = self.reach(sim, at + (0.0, 0.0, above), home)
        grasp = self.reach(sim, at, over)
        up = self.reach(sim, at + (0.0, 0.0, lift), grasp)
        t = sim.t + np.concatenate([[0.0], times])
        self.plan = list(zip(t, (home, over, grasp, grasp, up),
                             (open_width, open_width, open_width, 0.0, 0.0)))

    def reach(self, sim, target, start, iters=100):
        """The arm's joint angles that put the tip at ``target`` with its z axis down, from
        ``start``; ``sim``'s state is left as it was."""
        snap = sim.snapshot()
        b, point, _ = sim.model.links[self.tip]
        down = np.diag([1.0, -1.0, -1.0])  # the tip's axes in world axes
        q = np.array(start, dtype=float)
        n = len(q)
        try:
            for _ in range(iters):
                qpos = sim.qpos()
                qpos[:n] = q
                sim.set_qpos(qpos)
                x, r = sim.link_pose(self.tip)
                E = down @ quat.rotmat(r, np.empty((3, 3))).T
                e = np.concatenate([target - x,
                                    0.5 * np.array([E[2, 1] - E[1, 2], E[0, 2] - E[2, 0],
                                                    E[1, 0] - E[0, 1]])])
                if np.max(np.abs(e)) < 1e-10:
                    break
                J = sim.jacobian(b, point)[:, :n]
                q += J.T @ np.linalg.solve(J @ J.T + 1e-6 * np.eye(6), e)
        finally:
            sim.restore(snap)
        return q

    def phase(self, t):
        """(index of the script's phase at time t, the arm's targets, the gripper's)."""
        for k, ((t0, q0, g0), (t1, q1, g1)) in enumerate(zip(self.plan, self.plan[1:])):
            if t <= t1:
                s = _smoothstep((t - t0) / (t1 - t0))
                return k, q0 + s * (q1 - q0), g0 + s * (g1 - g0)
        return len(self.plan) - 1, self.plan[-1][1], self.plan[-1][2]

    def __call__(self, sim):
        _, q, g = self.phase(sim.t)
        sim.set_controls(np.concatenate([q, [g], sim.bias_forces()[self.cols]]))

    def cube_in_hand(self, sim):
        """The cube's centre in the tip's frame (m)."""
        x, r = sim.link_pose(self.tip)
        return quat.rotmat(r, np.empty((3, 3))).T @ (sim.pose(self.cube)[0] - x)

    def hud_lines(self, sim):
        k = self.phase(sim.t)[0]
        off = 1e3 * self.cube_in_hand(sim)
        return [f"{self.PHASES[k]}; the arm's gravity compensated by its motors",
                "cube in the hand at (" + ", ".join(f"{v:+.2f}" for v in off) + ") mm"]
