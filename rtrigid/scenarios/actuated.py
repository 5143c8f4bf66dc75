"""Actuated systems: the servo-driven arm and the quadrotor with its rotor thrusts."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from rtrigid.model import Model
from rtrigid.scenarios.chains import rod_inertia
from rtrigid.scenarios.registry import info, scenario
from rtrigid.simulation import Simulation
from rtrigid.simulation_helpers import Handle
from rtrigid.validate import as_int, as_scalar, as_vector


@scenario(dt=0.001, t_end=3.0)
def arm(
    integrator: str = "energy_momentum",
    dt: float = 0.001,
    options: dict[str, Any] | None = None,
    n_links: int = 2,
    joint: str = "revolute",
    kp: float = 200.0,
    kv: float = 5.0,
    force_limit: float = 40.0,
) -> Simulation:
    """A robot arm hanging from the world origin, its joints driven by position servos.

    ``n_links`` rods of 0.3 m (1.0 kg, each next one 10 % lighter); ``joint`` the kind of
    every joint: "revolute" (pitch about the y axis, a planar arm) or "prismatic" (each link
    slides along x on the one above, gravity across the slides; for the explicit scheme).
    One position servo per joint, named ``joint0``, ``joint1``, ... like its joint (kp, kv, force range +-``force_limit``); the
    targets start at 0.5 rad (0.05 m) for the first joint and -0.8 (-0.08) for the others,
    so the arm swings up and settles under gravity.  ``sim.set_control("joint1", target)``
    moves a target.
    """
    n = as_int(n_links, "n_links", minimum=1)
    if joint not in ("revolute", "prismatic"):
        raise ValueError(f"joint: expected 'revolute' or 'prismatic', got {joint!r}")
    kp = as_scalar(kp, "kp", positive=True)
    kv = as_scalar(kv, "kv", nonnegative=True)
    limit = as_scalar(force_limit, "force_limit", positive=True)
    m = Model()
    length = 0.3
    axis = (0.0, 1.0, 0.0) if joint == "revolute" else (1.0, 0.0, 0.0)
    for i in range(n):
        mass = 0.9**i
        m.add_body(
            f"link{i}",
            mass,
            rod_inertia(mass, length, 0.03),
            shape=("capsule", {"radius": 0.03, "half_length": length / 2}),
        )
        j = m.add_joint(
            joint,
            None if i == 0 else i - 1,
            i,
            axis_parent=axis,
            anchor_parent=(0.0, 0.0, 0.0) if i == 0 else (0.0, 0.0, -length / 2),
            anchor_child=(0.0, 0.0, length / 2),
            name=f"joint{i}",
        )
        m.add_actuator(j, "position", kp=kp, kv=kv, force_range=(-limit, limit), name=f"joint{i}")
    sim = Simulation(m, integrator, dt, options=options)
    scale = 1.0 if joint == "revolute" else 0.1
    sim.set_controls(scale * np.array([0.5] + [-0.8] * (n - 1)))
    info(sim)["conserved"] = []
    return sim


QUADROTOR_ARM = 0.17  # m, centre of mass to each rotor
QUADROTOR_YAW_PER_THRUST = 0.016  # m: a rotor's drag torque about its axis per newton of thrust


@scenario(dt=0.001, t_end=5.0)
def quadrotor(
    integrator: str = "energy_momentum",
    dt: float = 0.001,
    options: dict[str, Any] | None = None,
    mass: float = 1.0,
    inertia: ArrayLike = (0.0082, 0.0082, 0.0149),
    height: float = 1.0,
    tilt: float = 0.0,
) -> Simulation:
    """A quadrotor (one free body, four rotors), hovering thrust off: it falls unless driven.

    Rotors sit at (+-arm, 0, 0) and (0, +-arm, 0) in body axes (``info(sim)["rotors"]``),
    each pushing along the body's +z and turning the body about -z (rotors 0, 2) or +z (1, 3)
    with ``QUADROTOR_YAW_PER_THRUST`` times its thrust: :func:`set_rotor_thrusts` applies them
    as body-frame forces at body points.  Starts at ``height`` m, tilted ``tilt`` rad about x.
    The demo flies it with an attitude and altitude controller (``demos.controllers``).
    """
    m = Model()
    # drawn: a hub, two crossed arms and four rotor discs, the front one (+x) red
    arm = QUADROTOR_ARM
    rotors = [
        ("cylinder", {"radius": 0.065, "half_length": 0.004, "offset": p + (0.016,), "color": c})
        for p, c in (
            ((arm, 0.0), (0.85, 0.2, 0.15)),
            ((0.0, arm), (0.8, 0.8, 0.8)),
            ((-arm, 0.0), (0.8, 0.8, 0.8)),
            ((0.0, -arm), (0.8, 0.8, 0.8)),
        )
    ]
    m.add_body(
        "frame",
        as_scalar(mass, "mass", positive=True),
        as_vector(inertia, 3, "inertia"),
        shape=[
            ("box", {"half_extents": (0.05, 0.05, 0.02)}),
            ("box", {"half_extents": (arm, 0.012, 0.008)}),
            ("box", {"half_extents": (0.012, arm, 0.008)}),
            *rotors,
        ],
    )
    sim = Simulation(m, integrator, dt, options=options)
    tilt = as_scalar(tilt, "tilt")
    sim.set_position("frame", (0.0, 0.0, as_scalar(height, "height")))
    sim.set_orientation("frame", (np.cos(tilt / 2), np.sin(tilt / 2), 0.0, 0.0))
    a = QUADROTOR_ARM
    info(sim)["rotors"] = [
        ((a, 0.0, 0.0), -1.0),
        ((0.0, a, 0.0), 1.0),
        ((-a, 0.0, 0.0), -1.0),
        ((0.0, -a, 0.0), 1.0),
    ]
    info(sim)["conserved"] = []
    return sim


def set_rotor_thrusts(sim: Simulation, thrusts: ArrayLike, body: Handle = "frame") -> None:
    """Replace the loads on ``body`` by its rotors' thrusts (N, one per rotor of
    ``info(sim)["rotors"]``): each a body-frame force along +z at its rotor's point, plus its
    drag torque about z.  Like every applied load, they are held in the world frame until set
    again, so a controller sets them every tick."""
    rotors = info(sim)["rotors"]
    thrusts = as_vector(thrusts, len(rotors), "thrusts")
    sim.clear_applied(body)
    for (point, spin), thrust in zip(rotors, thrusts):
        sim.apply_force(body, (0.0, 0.0, thrust), point=point, frame="body")
        sim.apply_torque(body, (0.0, 0.0, spin * QUADROTOR_YAW_PER_THRUST * thrust), frame="body")
