"""Jointed systems: the pendulum chain, the double pendulum, two bodies at a spherical joint
and the gimbal gyroscope."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rtrigid.maths import quat
from rtrigid.model import Model
from rtrigid.scenarios.registry import info, scenario
from rtrigid.simulation import Simulation
from rtrigid.validate import as_int, as_scalar, as_vector


def rod_inertia(mass: float, length: float, radius: float) -> NDArray[np.float64]:
    """Principal moments of a solid cylinder along its z axis, about its centre of mass."""
    t = mass * (3.0 * radius * radius + length * length) / 12.0
    return np.array([t, t, 0.5 * mass * radius * radius])


@scenario(dt=1.0 / 240.0, t_end=10.0)
def chain(
    integrator: str = "energy_momentum",
    dt: float = 1.0 / 240.0,
    options: dict[str, Any] | None = None,
    n: int = 5,
    link_length: float = 0.5,
    link_mass: float = 1.0,
    link_radius: float = 0.05,
    joint: str = "spherical",
    q0: Sequence[ArrayLike] | None = None,
    omega0: ArrayLike | None = None,
    seed: int = 0,
) -> Simulation:
    """A pendulum chain of ``n`` rods hanging from the world origin.

    Each link is a rod along its body z axis with its centre of mass mid-link; joint 0 holds
    the top of link 0 at the origin, joint i+1 the top of link i+1 at the lower end of link i.
    ``joint``: "spherical", or "revolute" about the body x axes (a planar chain).  ``q0``: n
    world orientations; ``omega0``: n world angular velocities (body positions and velocities
    follow; a revolute chain keeps only their x-axis parts).  Without them the links start
    slightly off the vertical, seeded by ``seed``, at rest.
    """
    n = as_int(n, "n", minimum=1)
    length = as_scalar(link_length, "link_length", positive=True)
    mass = as_scalar(link_mass, "link_mass", positive=True)
    radius = as_scalar(link_radius, "link_radius", positive=True)
    if joint not in ("spherical", "revolute"):
        raise ValueError(f"joint: expected 'spherical' or 'revolute', got {joint!r}")
    m = Model()
    axis = {"axis_parent": (1.0, 0.0, 0.0)} if joint == "revolute" else {}
    for i in range(n):
        m.add_body(
            f"link{i}",
            mass,
            rod_inertia(mass, length, radius),
            shape=("capsule", {"radius": radius, "half_length": 0.5 * length}),
        )
        m.add_joint(
            joint,
            None if i == 0 else i - 1,
            i,
            name=f"joint{i}",
            anchor_parent=(0.0, 0.0, 0.0) if i == 0 else (0.0, 0.0, -0.5 * length),
            anchor_child=(0.0, 0.0, 0.5 * length),
            **axis,
        )
    sim = Simulation(m, integrator, dt, options=options)
    rng = np.random.default_rng(seed)
    if q0 is None:
        q0 = [
            quat.from_rotvec(
                rng.normal(scale=0.05, size=3)
                if joint == "spherical"
                else np.array([rng.normal(scale=0.05), 0.0, 0.0])
            )
            for _ in range(n)
        ]
        q0 = [q0[0]] + [quat.mul(q0[i - 1], q0[i]) for i in range(1, n)]  # relative -> world
    if len(q0) != n:
        raise ValueError(f"q0: expected {n} orientations, got {len(q0)}")
    omega0 = np.zeros((n, 3)) if omega0 is None else np.asarray(omega0, dtype=float)
    if omega0.shape != (n, 3):
        raise ValueError(f"omega0: expected shape ({n}, 3), got {omega0.shape}")
    _set_world_chain(sim, [as_vector(q, 4, "q0") for q in q0], omega0, joint)
    # gravity along z and the pivot at the origin: a spherical chain keeps h_z (a planar
    # revolute chain about x does not: gravity has a moment about x).  Claimed only when the
    # chain starts moving: at rest h = 0 and a relative drift has no scale.
    spins = joint == "spherical" and bool(np.any(omega0 != 0.0))
    info(sim)["conserved"] = [("angular", 2)] if spins else []
    return sim


def _set_world_chain(
    sim: Simulation,
    q_world: Sequence[NDArray[np.float64]],
    omega_world: NDArray[np.float64],
    joint: str,
) -> None:
    """Joint coordinates and rates of a chain from world orientations and angular velocities."""
    prev_q, prev_w = np.array([1.0, 0.0, 0.0, 0.0]), np.zeros(3)
    for i, (q, w) in enumerate(zip(q_world, omega_world)):
        q = q / np.linalg.norm(q)
        rel = quat.mul(quat.conj(prev_q), q)
        w_rel = quat.rotate_inv(q, w - prev_w, np.empty(3))  # child body frame
        if joint == "spherical":
            sim.set_joint_position(i, rel)
            sim.set_joint_velocity(i, w_rel)
        else:
            sim.set_joint_position(i, [2.0 * np.arctan2(rel[1], rel[0])])
            sim.set_joint_velocity(i, [w_rel[0]])
        prev_q, prev_w = sim.q[i].copy(), quat.rotate(sim.q[i], sim.w[i], np.empty(3))


@scenario(dt=1.0 / 240.0, t_end=10.0)
def double_pendulum(
    integrator: str = "energy_momentum",
    dt: float = 1.0 / 240.0,
    options: dict[str, Any] | None = None,
    theta1: float = 2.0,
    theta2: float = 2.5,
    link_length: float = 0.5,
    link_mass: float = 1.0,
) -> Simulation:
    """Planar double pendulum (two revolute rods), released from large angles: chaotic."""
    sim = chain(
        integrator,
        dt,
        options,
        n=2,
        link_length=link_length,
        link_mass=link_mass,
        link_radius=0.03,
        joint="revolute",
    )
    sim.set_joint_position(0, [as_scalar(theta1, "theta1")])
    sim.set_joint_position(1, [as_scalar(theta2, "theta2") - theta1])
    sim.set_joint_velocity(0, [0.0])
    sim.set_joint_velocity(1, [0.0])
    return sim


@scenario(dt=0.002, t_end=4.0)
def two_body_spherical(
    integrator: str = "energy_momentum",
    dt: float = 0.002,
    options: dict[str, Any] | None = None,
    stiffness: float = 1.0e4,
) -> Simulation:
    """002 Example C: two bodies joined by a spherical joint, body 1 held by a bushing.

    Masses 10 and 20 kg, the racket inertia of Example B for both, joint at (1, 2, -3) from
    body 1's centre of mass and (5, -6, -7) from body 2's; Omega1 = (3, 2, 1), Omega2 =
    (24, 15, 12) (body frames), both frames start as the heavy top's of Example A; body 1's
    centre of mass is tied to the origin by a translatory bushing of stiffness 1e4 N/m.  No
    gravity.
    """
    inertia = (41.6, 11.6, 50.0)
    m = Model(gravity=(0.0, 0.0, 0.0))
    a = m.add_body("body1", 10.0, inertia, shape=("box", {"half_extents": (0.8, 1.6, 0.6)}))
    b = m.add_body("body2", 20.0, inertia, shape=("box", {"half_extents": (0.8, 1.6, 0.6)}))
    m.add_joint("spherical", a, b, anchor_parent=(1.0, 2.0, -3.0), anchor_child=(5.0, -6.0, -7.0))
    m.add_spring(
        a, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), as_scalar(stiffness, "stiffness", positive=True)
    )
    sim = Simulation(m, integrator, dt, options=options)
    t = np.pi / 3  # Example A's initial frame
    q = np.array([np.cos(t / 2), np.sin(t / 2), 0.0, 0.0])
    sim.set_orientation(a, q)
    sim.set_angular_velocity(a, (3.0, 2.0, 1.0), frame="body")
    # body 2 has the same world orientation: relative rotation identity, then its own rate
    sim.set_orientation(b, q)
    sim.set_angular_velocity(b, (24.0, 15.0, 12.0), frame="body")
    # the bushing pulls body 1's centre towards the origin: no moment about the origin
    info(sim)["conserved"] = [("angular", a) for a in range(3)]
    return sim


@scenario(dt=0.002, t_end=5.0)
def gimbal_gyroscope(
    integrator: str = "energy_momentum",
    dt: float = 0.002,
    options: dict[str, Any] | None = None,
    spin: float = 60.0,
    tilt: float = 0.4,
) -> Simulation:
    """A spinning rotor in two gimbal rings, pivoting about the world x axis.

    Outer ring: revolute about world x; inner ring: revolute about the outer ring's y axis;
    rotor: revolute about the inner ring's z axis, spinning at ``spin`` rad/s.  The rotor's
    centre of mass sits below the outer axis, so gravity makes the spinning rotor precess and
    nutate -- and the rings wobble.
    """
    m = Model()
    pin = (0.35, 0.35, 0.40)
    # drawn: the outer ring in its x-y plane with pins on x (to the world) and y (to the
    # inner ring); the inner ring about the outer's centre in its y-z plane, with the rotor's
    # axle along z; the rotor a disc with a white radial stripe
    outer = m.add_body(
        "outer_ring",
        0.4,
        (0.02, 0.01, 0.012),
        shape=[
            ("torus", {"radius": 0.24, "tube_radius": 0.012}),
            *[
                (
                    "cylinder",
                    {
                        "radius": 0.012,
                        "half_length": 0.035,
                        "offset": (s * 0.27, 0, 0),
                        "axis": (1, 0, 0),
                        "color": pin,
                    },
                )
                for s in (-1, 1)
            ],
            *[
                (
                    "cylinder",
                    {
                        "radius": 0.009,
                        "half_length": 0.035,
                        "offset": (0, s * 0.21, 0),
                        "axis": (0, 1, 0),
                        "color": pin,
                    },
                )
                for s in (-1, 1)
            ],
        ],
    )
    inner = m.add_body(
        "inner_ring",
        0.3,
        (0.008, 0.01, 0.006),
        shape=[
            (
                "torus",
                {"radius": 0.18, "tube_radius": 0.01, "offset": (0, 0, 0.05), "axis": (1, 0, 0)},
            ),
            (
                "cylinder",
                {"radius": 0.006, "half_length": 0.18, "offset": (0, 0, 0.05), "color": pin},
            ),
        ],
    )
    rotor = m.add_body(
        "rotor",
        1.0,
        rod_inertia(1.0, 0.04, 0.12),
        shape=[
            ("cylinder", {"radius": 0.12, "half_length": 0.02}),
            (
                "box",
                {
                    "half_extents": (0.05, 0.012, 0.0025),
                    "offset": (0.065, 0, 0.021),
                    "color": (0.97, 0.97, 0.97),
                },
            ),
        ],
    )
    m.add_joint(
        "revolute",
        None,
        outer,
        anchor_parent=(0.0, 0.0, 0.5),
        axis_parent=(1, 0, 0),
        anchor_child=(0.0, 0.0, 0.0),
        name="outer",
    )
    m.add_joint(
        "revolute",
        outer,
        inner,
        anchor_parent=(0.0, 0.0, 0.0),
        axis_parent=(0, 1, 0),
        anchor_child=(0.0, 0.0, 0.05),
        name="inner",
    )
    m.add_joint(
        "revolute",
        inner,
        rotor,
        anchor_parent=(0.0, 0.0, -0.05),
        axis_parent=(0, 0, 1),
        anchor_child=(0.0, 0.0, 0.0),
        name="spin",
    )
    sim = Simulation(m, integrator, dt, options=options)
    sim.set_joint_position("outer", [as_scalar(tilt, "tilt")])
    sim.set_joint_velocity("spin", [as_scalar(spin, "spin")])
    info(sim)["conserved"] = []
    return sim
