"""Runnable demos: ``python -m demos`` lists them, ``python -m demos NAME`` runs one.

Each demo is a scenario with its parameters and the viewer options that show it best; adding
one is a single :func:`demo` line below.  ``--headless`` renders without a window and prints
the conservation figures.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from rtrigid import scenarios


@dataclass
class Demo:
    name: str
    scenario: str
    description: str
    params: dict = field(default_factory=dict)
    viewer: dict = field(default_factory=dict)

    def build(self, integrator="energy_momentum", dt=None):
        return scenarios.build(self.scenario, integrator=integrator, dt=dt, **self.params)


DEMOS: dict[str, Demo] = {}


def demo(name, scenario, description, params=None, **viewer_options):
    """Register a demo: a scenario, its parameters, and options for :class:`viewer.Viewer`."""
    DEMOS[name] = Demo(name, scenario, description, dict(params or {}), viewer_options)


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


def names():
    """The demos whose scenario exists in this build of rtrigid."""
    known = set(scenarios.names())
    return [n for n, d in DEMOS.items() if d.scenario in known]
