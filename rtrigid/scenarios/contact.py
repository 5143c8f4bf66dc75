"""Contact scenes: bodies on a ground (a ball on an incline, a box stack, the quadruped, tops
on a table, the tippe top, Euler's disk), a crate on a static ramp, blocks on a kinematic
turntable."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rtrigid.maths import quat
from rtrigid.model import Model
from rtrigid.scenarios.registry import info, scenario
from rtrigid.simulation import Simulation
from rtrigid.validate import as_int, as_scalar


def box_inertia(mass: float, half: ArrayLike) -> NDArray[np.float64]:
    """Principal moments of a solid box of half extents ``half`` about its centre."""
    a, b, c = (2.0 * np.asarray(half, float)) ** 2
    return mass / 12.0 * np.array([b + c, a + c, a + b])


@scenario(dt=1.0 / 240.0, t_end=2.0)
def ball_on_incline(
    integrator: str = "energy_momentum",
    dt: float = 1.0 / 240.0,
    options: dict[str, Any] | None = None,
    angle: float = 20.0,
    friction: float = 0.5,
    radius: float = 0.1,
    mass: float = 1.0,
) -> Simulation:
    """A solid ball rolling down an incline of ``angle`` degrees from rest.

    It rolls without slipping while tan(angle) <= 7/2 mu, with acceleration (5/7) g sin(angle)
    down the slope: ``info["reference"](t)`` is that motion of its centre.
    """
    angle = np.radians(as_scalar(angle, "angle"))
    if not 0.0 <= angle < np.pi / 2:
        raise ValueError("angle: must be in [0, 90) degrees")
    r = as_scalar(radius, "radius", positive=True)
    mass = as_scalar(mass, "mass", positive=True)
    normal = np.array([-np.sin(angle), 0.0, np.cos(angle)])
    m = Model()
    m.add_ground(normal=normal, friction=friction)
    inertia = 0.4 * mass * r * r
    m.add_body("ball", mass, (inertia,) * 3, shape=("sphere", {"radius": r}), friction=friction)
    sim = Simulation(m, integrator, dt, options=options)
    start = r * normal
    sim.set_position("ball", start)
    down = np.array([-np.cos(angle), 0.0, -np.sin(angle)])
    accel = 5.0 / 7.0 * float(np.linalg.norm(m.gravity)) * np.sin(angle)

    def centre(t: float) -> NDArray[np.float64]:
        """Rolling without slipping from rest: s = (5/7) g sin(angle) t^2 / 2."""
        return start + 0.5 * accel * t * t * down

    info(sim).update(conserved=[], reference=centre, reference_name="centre of the ball")
    return sim


@scenario(dt=1.0 / 240.0, t_end=10.0)
def box_stack(
    integrator: str = "energy_momentum",
    dt: float = 1.0 / 240.0,
    options: dict[str, Any] | None = None,
    n: int = 10,
    size: float = 0.1,
    mass: float = 1.0,
    friction: float = 0.5,
) -> Simulation:
    """``n`` cubes of half size ``size`` stacked on the ground, at rest: the stack should stand."""
    n = as_int(n, "n", minimum=1)
    half = (as_scalar(size, "size", positive=True),) * 3
    mass = as_scalar(mass, "mass", positive=True)
    m = Model()
    m.add_ground(friction=friction)
    for k in range(n):
        m.add_body(
            f"box{k}",
            mass,
            box_inertia(mass, half),
            shape=("box", {"half_extents": half}),
            friction=friction,
        )
    sim = Simulation(m, integrator, dt, options=options)
    for k in range(n):
        sim.set_position(k, (0.0, 0.0, half[2] * (2 * k + 1)))
    info(sim)["conserved"] = []
    return sim


def quadruped_model(
    torso_mass: float = 4.0,
    leg_mass: float = 0.3,
    friction: float = 0.8,
    kp: float = 60.0,
    kv: float = 1.0,
) -> Model:
    """A simple quadruped on the ground: a box torso (0.4 x 0.2 x 0.1 m) on four capsule legs
    (0.2 m, 2 cm end caps) hinged about y at its bottom corners, each held upright by a
    position servo (kp, kv).  Standing, the torso's centre is 0.27 m over the ground.
    (Under nullspace_rk4 at dt = 1/240 a damper of kv = 2 on these light legs grows an
    oscillation through the contacts; kv = 1 stands still.)"""
    half = (0.2, 0.1, 0.05)
    m = Model()
    m.add_ground(friction=friction)
    m.add_body(
        "torso",
        torso_mass,
        box_inertia(torso_mass, half),
        shape=("box", {"half_extents": half}),
        friction=friction,
    )
    leg = ("capsule", {"radius": 0.02, "half_length": 0.1})
    j = leg_mass * 0.2**2 / 12.0
    for i, (sx, sy) in enumerate(((1, 1), (1, -1), (-1, 1), (-1, -1))):
        name = f"leg{i}"
        m.add_body(name, leg_mass, (j, j, 1e-4), shape=leg, friction=friction)
        m.add_joint(
            "revolute",
            "torso",
            name,
            anchor_parent=(0.15 * sx, 0.12 * sy, -0.05),
            anchor_child=(0.0, 0.0, 0.1),
            axis_parent=(0.0, 1.0, 0.0),
            name=f"hip{i}",
        )
        m.add_actuator(f"hip{i}", "position", kp=kp, kv=kv)
    return m


QUADRUPED_STAND = 0.27  # quadruped_model's torso centre over the ground, standing


@scenario(dt=1.0 / 240.0, t_end=3.0, integrator="nullspace_rk4")
def quadruped_on_ground(
    integrator: str = "nullspace_rk4",
    dt: float = 1.0 / 240.0,
    options: dict[str, Any] | None = None,
    drop: float = 0.02,
) -> Simulation:
    """A simple quadruped (a box on four servo-held capsule legs) dropped ``drop`` m onto the
    ground: contacts through joints; it lands and stands on its feet."""
    m = quadruped_model()
    sim = Simulation(m, integrator, dt, options=options)
    sim.set_position("torso", (0.0, 0.0, QUADRUPED_STAND + as_scalar(drop, "drop")))
    info(sim)["conserved"] = []
    return sim


def _cone_top(
    integrator: str,
    options: dict[str, Any] | None,
    dt: float,
    mass: float,
    radius: float,
    height: float,
    friction: float,
    tilt: float,
    spin: float,
    name: str,
) -> Simulation:
    """A solid cone standing on its apex, tilted ``tilt`` about x, spinning ``spin`` about its
    axis, on a ground of ``friction``."""
    mass = as_scalar(mass, "mass", positive=True)
    r = as_scalar(radius, "radius", positive=True)
    h = as_scalar(height, "height", positive=True)
    tilt = as_scalar(tilt, "tilt")
    j1 = 3.0 * mass / 80.0 * (4.0 * r * r + h * h)
    m = Model()
    m.add_ground(friction=friction)
    m.add_body(
        name,
        mass,
        (j1, j1, 0.3 * mass * r * r),
        shape=("cone", {"radius": r, "height": h}),
        friction=friction,
    )
    sim = Simulation(m, integrator, dt, options=options)
    q = np.array([np.cos(tilt / 2), np.sin(tilt / 2), 0.0, 0.0])
    axis = quat.rotate(q, np.array([0.0, 0.0, 1.0]), np.empty(3))
    sim.set_orientation(name, q)
    sim.set_position(name, 0.75 * h * axis)  # apex on the ground
    sim.set_angular_velocity(name, as_scalar(spin, "spin") * axis)
    return sim


@scenario(dt=1e-3, t_end=5.0)
def top_on_table(
    integrator: str = "energy_momentum",
    dt: float = 1e-3,
    options: dict[str, Any] | None = None,
    mass: float = 0.1,
    radius: float = 0.03,
    height: float = 0.06,
    friction: float = 0.3,
    tilt: float = 0.1,
    spin: float = 400.0,
) -> Simulation:
    """A solid cone top spinning on its apex on a table: it precesses with its tip on the
    table; below about 240 rad/s (its critical spin 2 sqrt(I1 m g l) / I3 about the apex) it
    falls over."""
    sim = _cone_top(integrator, options, dt, mass, radius, height, friction, tilt, spin, "top")
    info(sim)["conserved"] = []
    return sim


@scenario(dt=5e-4, t_end=5.0)
def tippe_top(
    integrator: str = "energy_momentum",
    dt: float = 5e-4,
    options: dict[str, Any] | None = None,
    mass: float = 0.015,
    radius: float = 0.02,
    offset: float = 0.3,
    friction: float = 0.3,
    tilt: float = 0.1,
    spin: float = 150.0,
) -> Simulation:
    """A tippe top: a ball whose centre of mass lies ``offset`` radii below its centre, spun
    fast about the vertical; sliding friction turns it over onto its top (its centre of mass
    rises above the ball's centre)."""
    mass = as_scalar(mass, "mass", positive=True)
    r = as_scalar(radius, "radius", positive=True)
    a = as_scalar(offset, "offset", positive=True) * r
    if a >= r:
        raise ValueError("offset: must be below 1 (the centre of mass inside the ball)")
    i3 = 0.4 * mass * r * r
    i1 = i3 / 1.1  # inversion needs 1 - offset < I3 / I1 < 1 + offset
    m = Model()
    m.add_ground(friction=friction)
    m.add_body(
        "top",
        mass,
        (i1, i1, i3),
        shape=("sphere", {"radius": r, "offset": (0, 0, a)}),
        friction=friction,
    )
    sim = Simulation(m, integrator, dt, options=options)
    tilt = as_scalar(tilt, "tilt")
    q = np.array([np.cos(tilt / 2), np.sin(tilt / 2), 0.0, 0.0])
    centre_from_com = quat.rotate(q, np.array([0.0, 0.0, a]), np.empty(3))
    sim.set_orientation("top", q)
    sim.set_position("top", (0.0, 0.0, r) - centre_from_com)  # ball resting on the ground
    sim.set_angular_velocity("top", (0.0, 0.0, as_scalar(spin, "spin")))
    info(sim).update(conserved=[], offset=a)
    return sim


def euler_disk_precession(
    alpha: float, radius: float = 0.04, thickness: float = 0.01, g: float = 9.81
) -> float:
    """The precession rate (rad/s) of a uniform disc (a cylinder of ``radius`` and
    ``thickness``) rolling without slipping on its rim round a fixed centre, its face at
    ``alpha`` (rad) to the table: the steady motion of Euler's disk.

    The centre at rest and the contact point at rest make the angular velocity lie along the
    line from the centre to the contact point, w = -(Omega sin(alpha) / a) r_c (a the radius,
    h half the thickness, r_c = a d - h e3, d the face's steepest downward direction, e3 the
    axis); the contact force is then m g upwards, and its torque turns the angular momentum
    round the vertical at Omega: Omega^2 = g a c / (sin(alpha) (i1 c - (i3 - i1) h
    sin(alpha))), c = a cos(alpha) - h sin(alpha), i1 = (3 a^2 + 4 h^2) / 12,
    i3 = a^2 / 2.  A thin disc (h = 0): Omega^2 = 4 g / (a sin(alpha)), Moffatt's
    (Nature 404, 2000) Omega^2 alpha = 4 g / a for small alpha."""
    a, h = radius, 0.5 * thickness
    i1, i3 = (3 * a * a + 4 * h * h) / 12.0, 0.5 * a * a
    c = a * np.cos(alpha) - h * np.sin(alpha)
    return np.sqrt(g * a * c / (np.sin(alpha) * (i1 * c - (i3 - i1) * h * np.sin(alpha))))


@scenario(dt=2.5e-4, t_end=7.0)
def euler_disk(
    integrator: str = "energy_momentum",
    dt: float = 2.5e-4,
    options: dict[str, Any] | None = None,
    mass: float = 0.2,
    radius: float = 0.04,
    thickness: float = 0.01,
    friction: float = 0.3,
    alpha: float = 0.5,
    rolling_friction: float = 3e-4,
    spin: float | None = None,
) -> Simulation:
    """Euler's disk: a thick coin rolling round on its rim, its face at ``alpha`` rad to the
    table, started in the steady rolling of that inclination (centre at rest, precessing at
    :func:`euler_disk_precession`); ``spin``: instead released spinning at that rate about
    the vertical through its centre (its rim slips until it rolls).  Rolling friction
    ``rolling_friction`` (m, on the disc) is what takes its energy: it sinks lower and
    precesses faster, Omega ~ alpha^-1/2, until it lies flat.  ``info["precession"](alpha)``
    is the steady rate."""
    mass = as_scalar(mass, "mass", positive=True)
    r = as_scalar(radius, "radius", positive=True)
    thickness = as_scalar(thickness, "thickness", positive=True)
    hl = 0.5 * thickness
    alpha = as_scalar(alpha, "alpha")
    if not 0.0 < alpha < np.pi / 2:
        raise ValueError("alpha: the face's inclination to the table must lie in (0, pi/2)")
    i3 = 0.5 * mass * r * r
    i1 = mass * (3 * r * r + 4 * hl * hl) / 12.0
    m = Model()
    m.add_ground(friction=friction)
    m.add_body(
        "disk",
        mass,
        (i1, i1, i3),
        shape=("cylinder", {"radius": r, "half_length": hl}),
        friction=friction,
        rolling_friction=rolling_friction,
    )
    sim = Simulation(m, integrator, dt, options=options)
    # the axis alpha from the vertical, turned about x: the contact point lies along -y
    q = np.array([np.cos(alpha / 2), np.sin(alpha / 2), 0.0, 0.0])
    sim.set_orientation("disk", q)
    sim.set_position("disk", (0.0, 0.0, r * np.sin(alpha) + hl * np.cos(alpha)))
    g = -float(m.gravity[2])

    def precession(a: float) -> float:
        return euler_disk_precession(a, r, thickness, g)

    if spin is None:
        e3 = np.array([0.0, -np.sin(alpha), np.cos(alpha)])
        down = np.array([0.0, -np.cos(alpha), -np.sin(alpha)])
        sim.set_angular_velocity(
            "disk", -precession(alpha) * np.sin(alpha) / r * (r * down - hl * e3)
        )
    else:
        sim.set_angular_velocity("disk", (0.0, 0.0, as_scalar(spin, "spin")))
    info(sim).update(conserved=[], precession=precession)
    return sim


@scenario(dt=1.0 / 60.0, t_end=10.0)
def crate_on_ramp(
    integrator: str = "energy_momentum",
    dt: float = 1.0 / 60.0,
    options: dict[str, Any] | None = None,
    angle: float = 16.7,
    friction: float = 0.5,
    mass: float = 10.0,
    size: float = 0.2,
) -> Simulation:
    """A crate of half size ``size`` at rest on a static ramp (a box on the world) tilted
    ``angle`` degrees, at a game's 60 Hz: inside its friction cone (tan(angle) < friction) it
    stays where it was put; ``info["reference"](t)`` is that place."""
    angle = np.radians(as_scalar(angle, "angle"))
    if not 0.0 <= angle < np.pi / 2:
        raise ValueError("angle: must be in [0, 90) degrees")
    half = as_scalar(size, "size", positive=True)
    mass = as_scalar(mass, "mass", positive=True)
    tilt = np.array([np.cos(angle / 2), 0.0, np.sin(angle / 2), 0.0])  # about y: down along +x
    normal = quat.rotate(tilt, np.array([0.0, 0.0, 1.0]), np.empty(3))
    m = Model()
    m.add_ground(friction=friction)
    ramp_centre = np.array([0.0, 0.0, 1.2 * np.sin(angle) + 0.05])
    m.add_geom(
        None, "box", half_extents=(1.2, 0.6, 0.05), pos=ramp_centre, quat=tilt, friction=friction
    )
    m.add_body(
        "crate",
        mass,
        box_inertia(mass, (half,) * 3),
        shape=("box", {"half_extents": (half,) * 3}),
        friction=friction,
    )
    sim = Simulation(m, integrator, dt, options=options)
    start = ramp_centre + (0.05 + half) * normal
    sim.set_position("crate", start)
    sim.set_orientation("crate", tilt)

    def place(t: float) -> NDArray[np.float64]:
        """Where it was put: static friction holds it there."""
        return start

    info(sim).update(conserved=[], reference=place, reference_name="centre of the crate")
    return sim


@scenario(dt=1.0 / 240.0, t_end=4.0)
def turntable(
    integrator: str = "energy_momentum",
    dt: float = 1.0 / 240.0,
    options: dict[str, Any] | None = None,
    spin: float = 3.0,
    friction: float = 0.5,
    radii: ArrayLike = (0.2, 0.35, 0.5, 0.65, 0.8),
) -> Simulation:
    """Blocks on a kinematic turntable (a square plate, ``add_body(kinematic=True)``) turning
    at ``spin`` rad/s, one at each of ``radii`` (m) from its axis, at rest on it: those within
    mu g / spin^2 (0.55 m by default) ride round with it, those beyond slide off onto the
    ground.  ``info["reach"]`` is that radius."""
    spin = as_scalar(spin, "spin", positive=True)
    radii = np.atleast_1d(np.asarray(radii, float))
    if radii.ndim != 1 or np.any(radii < 0.0) or np.any(radii > 0.9):
        raise ValueError("radii: expected distances in [0, 0.9] m from the axis")
    m = Model()
    m.add_ground(friction=friction)
    table = m.add_body("turntable", 50.0, box_inertia(50.0, (1.0, 1.0, 0.05)), kinematic=True)
    m.add_geom(table, "box", half_extents=(1.0, 1.0, 0.05), friction=friction)
    half = (0.05, 0.05, 0.05)
    for k in range(len(radii)):
        m.add_body(
            f"block{k}",
            1.0,
            box_inertia(1.0, half),
            shape=("box", {"half_extents": half}),
            friction=friction,
        )
    sim = Simulation(m, integrator, dt, options=options)
    sim.set_position("turntable", (0.0, 0.0, 0.3))
    sim.set_angular_velocity("turntable", (0.0, 0.0, spin))
    for k, r in enumerate(radii):
        a = 2.0 * np.pi * k / len(radii)
        sim.set_position(k + 1, (r * np.cos(a), r * np.sin(a), 0.4))
        sim.set_orientation(k + 1, (np.cos(a / 2), 0.0, 0.0, np.sin(a / 2)))
        sim.set_velocity(k + 1, spin * r * np.array([-np.sin(a), np.cos(a), 0.0]))
        sim.set_angular_velocity(k + 1, (0.0, 0.0, spin))
    g = float(np.linalg.norm(m.gravity))
    info(sim).update(conserved=[], reach=friction * g / spin**2)
    return sim
