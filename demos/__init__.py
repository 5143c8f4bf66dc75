"""Runnable demos: ``python -m demos`` lists them, ``python -m demos NAME`` runs one.

Each demo is a scenario with its parameters and the viewer options that show it best; adding
one is a single :func:`demo` line below.  A driven demo also names a controller (see
:mod:`demos.controllers`) that the viewer calls before every step; a robot demo builds its
model from a robot file (:mod:`demos.robots`).  ``--headless`` renders without a window and
prints the conservation figures.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from rtrigid import scenarios


@dataclass
class Demo:
    name: str
    scenario: str
    description: str
    params: dict = field(default_factory=dict)
    viewer: dict = field(default_factory=dict)
    controller: Callable | None = None    # controller(sim) -> the viewer's controller
    builder: Callable | None = None       # builder(integrator, dt) -> sim, for robot files
    integrator: str = "energy_momentum"   # the default scheme of this demo

    def build(self, integrator=None, dt=None):
        integrator = integrator or self.integrator
        if self.builder is not None:
            return self.builder(integrator, dt)
        return scenarios.build(self.scenario, integrator=integrator, dt=dt, **self.params)

    def viewer_options(self, sim, show_contacts=False):
        """Options for :class:`viewer.Viewer` on ``sim`` (built by :meth:`build`);
        ``show_contacts`` (``--contacts``) turns contact drawing on where the demo has it off."""
        options = dict(self.viewer)
        if show_contacts:
            options["show_contacts"] = True
        if self.controller is not None:
            options["controller"] = self.controller(sim)
        return options

    @property
    def available(self):
        """The scenario exists in this build of rtrigid / the robot file is installed."""
        if self.builder is not None:
            from . import robots

            return robots.available(self.scenario)
        return self.scenario in scenarios.names()


DEMOS: dict[str, Demo] = {}


def demo(name, scenario, description, params=None, controller=None,
         integrator="energy_momentum", **viewer_options):
    """Register a demo: a scenario, its parameters, a controller factory ``controller(sim)``
    (optional), its default integrator and options for :class:`viewer.Viewer`."""
    DEMOS[name] = Demo(name, scenario, description, dict(params or {}), viewer_options,
                       controller, integrator=integrator)


def robot_demo(name, robot, description, builder, controller, integrator, **viewer_options):
    """Register a demo of a robot file (``robot``: its path in pybullet_data), built by
    ``builder(integrator, dt)`` and driven by ``controller(sim)``."""
    DEMOS[name] = Demo(name, robot, description, {}, viewer_options, controller, builder,
                       integrator)


def _servo_teleop(**kw):
    def make(sim):
        from .controllers import ServoTeleop
        return ServoTeleop(sim, **kw)
    return make


def _quadrotor_pilot(sim):
    from .controllers import QuadrotorController
    return QuadrotorController(sim)


demo("geradin_top_1", "geradin_top", "Geradin-Rixen top, case 1: released at 20 deg spinning "
     "at 50 rad/s (003 11.6)", {"case": 1}, show_omega=True)
demo("geradin_top_2", "geradin_top", "Geradin-Rixen top, case 2: also precessing at -10 rad/s "
     "(003 11.6)", {"case": 2}, show_omega=True)
demo("gyro_top", "gyro_top", "cone on its tip in steady precession (000 5.2); the trace is "
     "the crown's path", show_momentum=True)
demo("tennis_racket", "tennis_racket", "spin about the intermediate axis flips over and over "
     "(Dzhanibekov effect, 002 Example B); shown at 1/4 speed", speed=0.25, show_omega=True,
     traces={0: "+x"})
demo("free_body", "free_body", "torque-free tumbling body (000 5.1): angular momentum fixed "
     "in space, shown at 1/4 speed", speed=0.25, show_momentum=True)
demo("chain", "chain", "five links on spherical joints, released swinging; energy-momentum "
     "stepping at 240 Hz", {"n": 5, "omega0": [[1.0, 0.5, 0.0]] * 5})
demo("double_pendulum", "double_pendulum", "planar double pendulum from large angles: chaotic, "
     "energy kept")
demo("gimbal_gyroscope", "gimbal_gyroscope", "spinning rotor in two revolute gimbal rings "
     "precessing under gravity")
demo("top_on_table", "top_on_table", "cone top spinning on its tip on the table (contact "
     "and friction): it precesses, its tip sliding; c shows the contact, k kicks, u spins up",
     show_contacts=True, speed=0.25)
demo("tippe_top", "tippe_top", "tippe top: sliding friction turns it over onto its stem",
     show_contacts=True, speed=0.25)
demo("euler_disk", "euler_disk", "Euler's disk rolling round on its rim without slipping; "
     "rolling friction takes its energy, so it sinks and precesses faster and faster "
     "(Omega ~ alpha^-1/2) until it lies flat after ~6 s; shown at 1/2 speed", speed=0.5,
     show_contacts=True)
demo("box_stack", "box_stack", "a stack of five boxes on the ground: drag one to push it, k "
     "kicks the selected box up", {"n": 5}, show_contacts=True)
demo("crate_on_ramp", "crate_on_ramp", "a crate resting on a 16.7 deg ramp at a game's 60 Hz: "
     "static friction holds it where it was put; drag it to move it, k kicks it up",
     show_contacts=True)
demo("turntable", "turntable", "blocks on a kinematic turntable turning at 3 rad/s: within "
     "mu g / omega^2 = 0.55 m of the axis they ride round with it, beyond it they slide off",
     show_contacts=True)
demo("ball_on_incline", "ball_on_incline", "a solid ball rolling down a 20 deg slope "
     "(mu = 0.5) without slipping, at (5/7) g sin 20 deg; the camera follows it, drag it to "
     "push it, k kicks it up", follow="ball", lookahead=2.0, show_contacts=True)
demo("arm", "arm", "two-link arm on position servos: arrows move a servo's target, drag the "
     "red ball and the tip follows; the HUD keeps the energy balance", {"n_links": 2},
     controller=_servo_teleop(tip="link1", tip_point=(0.0, 0.0, -0.15)),
     traces={"link1": (0.0, 0.0, -0.15)})
demo("quadrotor", "quadrotor", "quadrotor on its attitude controller: released tilted, it "
     "levels and holds its place; arrows tilt it, page up/down set the thrust, q/e turn it",
     {"tilt": 0.6}, controller=_quadrotor_pilot,
     follow="frame", floor=0.0, traces={"frame": (0.0, 0.0, 0.0)})

demo("four_bar", "four_bar", "Grashof crank-rocker four-bar with a flywheel on the crank: the "
     "crank turns round, the rocker swings; the coupler-rocker pin closes the loop (drawn "
     "as the other pins)", traces={"coupler": (0.0, 0.0, 0.0)})
demo("slider_crank", "slider_crank", "slider-crank: the flywheel crank drives the rod and the "
     "slider on its guide; the rod-slider pin closes the loop")
demo("bennett", "bennett", "Bennett's spatial 4R linkage: four skew revolute joints, one "
     "degree of freedom; the fourth joint closes the loop", traces={"link2": "+x"})
demo("delta_robot", "delta_robot", "delta robot: three arms, each joined to the platform by a "
     "parallelogram (five loop joints); it swings under gravity; drag the platform and "
     "release: the push moves it through the loops, the platform staying level; "
     "nullspace_rk4 (the energy-momentum Newton solve fails on this mechanism)",
     integrator="nullspace_rk4", traces={"platform": (0.0, 0.0, 0.0)})


def _robots():
    from . import robots

    robot_demo("iiwa", robots.IIWA, "KUKA iiwa 7-DOF arm from its URDF on position servos: "
               "drag the red ball, the gripper flange follows", robots.iiwa,
               robots.iiwa_controller, "nullspace_rk4", traces={"lbr_iiwa_link_7": (0, 0, 0)})
    robot_demo("panda_grasp", robots.PANDA, "Franka Panda from its URDF picks a 4 cm cube up "
               "from a table: its two fingers are one servo, the second mimic-coupled to the "
               "first; the arm's targets follow a script, its gravity compensated",
               robots.panda_grasp, robots.panda_grasp_controller, "nullspace_rk4",
               show_contacts=True, traces=False)
    robot_demo("quadruped", robots.A1, "Unitree A1 quadruped from its URDF, base held in the "
               "air, trotting on 12 position servos", robots.a1, robots.a1_controller,
               "energy_momentum", floor=-0.5, traces=False)


_robots()


def names():
    """The demos whose scenario exists in this build of rtrigid."""
    return [n for n, d in DEMOS.items() if d.available]
