"""Single bodies: the torque-free body, the tennis racket and the tops pivoted at a point."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rtrigid._jit import pure
from rtrigid.maths import quat
from rtrigid.model import Model, check_inertia
from rtrigid.scenarios.registry import ALL_AXES, info, scenario
from rtrigid.simulation import Simulation
from rtrigid.validate import as_scalar, as_vector


def _free_rotor(
    integrator: str,
    options: dict[str, Any] | None,
    dt: float,
    inertia: ArrayLike,
    omega0: ArrayLike,
    q0: ArrayLike,
    mass: float,
    allow_nonphysical: bool = False,
    shape: Any = None,
) -> Simulation:
    model = Model(gravity=(0.0, 0.0, 0.0))
    j = as_vector(inertia, 3, "inertia")
    half = 0.5 * np.sqrt(np.maximum(2.5 * (j.sum() / 2 - j) / mass, 1e-12))
    model.add_body(
        "body",
        mass,
        j,
        shape=shape or ("box", {"half_extents": half}),
        allow_nonphysical_inertia=allow_nonphysical,
    )
    sim = Simulation(model, integrator, dt, options=options)
    sim.set_orientation(0, as_vector(q0, 4, "q0"))
    sim.set_angular_velocity(0, as_vector(omega0, 3, "omega0"), frame="body")
    info(sim)["conserved"] = list(ALL_AXES)
    return sim


@scenario(dt=0.02, t_end=20.0)
def free_body(
    integrator: str = "energy_momentum",
    dt: float = 0.02,
    options: dict[str, Any] | None = None,
    inertia: ArrayLike = (6.0, 8.0, 3.0),
    omega0: ArrayLike = (10.0, 20.0, 20.0),
    q0: ArrayLike = (1.0, 0.0, 0.0, 0.0),
    mass: float = 1.0,
) -> Simulation:
    """Torque-free rigid body, 000 §5.1; ``omega0`` in the body frame.

    The render box has the principal moments of the given inertia (for a physical one).
    """
    return _free_rotor(integrator, options, dt, inertia, omega0, q0, mass)


@scenario(dt=0.005, t_end=5.0)
def tennis_racket(
    integrator: str = "energy_momentum",
    dt: float = 0.005,
    options: dict[str, Any] | None = None,
    inertia: ArrayLike = (41.6, 11.6, 50.0),
    omega0: ArrayLike = (50.0, 1e-3, 1e-3),
    euler313: ArrayLike = (np.pi / 3, np.pi / 4, np.pi / 2),
    mass: float = 1.0,
) -> Simulation:
    """Spin about the intermediate axis d1 (Dzhanibekov flips), 002 Example B.

    The initial orientation is given by 3-1-3 Euler angles as in the paper, away from the
    gimbal singularity of that parametrization.  Drawn as a racket with the box's extents
    (head ring in the body x-y plane, handle along -y) and a red knob on the +x rim: the
    spin axis, which flips over.
    """
    a = as_vector(euler313, 3, "euler313")
    q0 = quat.quat_from_euler313(a[0], a[1], a[2], np.empty(4))
    j = as_vector(inertia, 3, "inertia")
    ex, ey, _ = 0.5 * np.sqrt(np.maximum(2.5 * (j.sum() / 2 - j) / mass, 1e-12))
    head = 0.45 * ey
    racket = [
        ("torus", {"radius": head, "tube_radius": 0.07 * head, "offset": (0.0, 0.55 * ey, 0.0)}),
        (
            "cylinder",
            {
                "radius": 0.95 * head,
                "half_length": 0.01 * head,
                "offset": (0.0, 0.55 * ey, 0.0),
                "color": (0.92, 0.92, 0.85),
            },
        ),
        (
            "capsule",
            {
                "radius": 0.09 * head,
                "half_length": 0.5 * (ey - 0.1 * head),
                "offset": (0.0, 0.1 * ey - 0.5 * (ey + 0.1 * head), 0.0),
                "axis": (0.0, 1.0, 0.0),
            },
        ),
        (
            "sphere",
            {
                "radius": 0.22 * head,
                "offset": (head * 1.07, 0.55 * ey, 0.0),
                "color": (0.85, 0.08, 0.08),
            },
        ),
    ]
    return _free_rotor(
        integrator,
        options,
        dt,
        inertia,
        omega0,
        q0,
        mass,
        shape=racket if min(ex, ey) > 0 else None,
    )


def _pivoted_top(
    integrator: str,
    options: dict[str, Any] | None,
    dt: float,
    mass: float,
    inertia_cm: ArrayLike,
    length: float,
    gravity: float,
    shape: Any,
    allow_nonphysical: bool = False,
) -> Simulation:
    model = Model(gravity=(0.0, 0.0, -as_scalar(gravity, "g", positive=True)))
    model.add_body(
        "top", mass, inertia_cm, shape=shape, allow_nonphysical_inertia=allow_nonphysical
    )
    model.attach_to_world("top", point_body=(0.0, 0.0, -length))
    sim = Simulation(model, integrator, dt, options=options)
    info(sim)["conserved"] = [("angular", 2)]
    return sim


@scenario(dt=0.001, t_end=10.0)
def gyro_top(
    integrator: str = "energy_momentum",
    dt: float = 0.001,
    options: dict[str, Any] | None = None,
    rho: float = 2700.0,
    height: float = 0.1,
    radius: float = 0.05,
    theta0: float = np.pi / 3,
    omega_p: float = 10.0,
    g: float = 9.81,
) -> Simulation:
    """Solid cone spinning on its tip in steady precession, 000 §5.2.

    Centroidal moments J1 = J2 = 3M/80 (4R² + H²), J3 = 3M R²/10; the centre of mass sits
    L = 3H/4 from the tip.  The spin rate makes the precession steady (000 §5.2.1), so the
    centre of mass circles at constant height: ``info["reference"](t)``.
    """
    rho = as_scalar(rho, "rho", positive=True)
    h = as_scalar(height, "height", positive=True)
    r = as_scalar(radius, "radius", positive=True)
    theta0 = as_scalar(theta0, "theta0")
    omega_p = as_scalar(omega_p, "omega_p")
    if omega_p == 0.0:
        raise ValueError("omega_p: steady precession needs a non-zero precession rate")
    gval = as_scalar(g, "g", positive=True)
    mass = rho * np.pi * r * r * h / 3.0
    j1 = 3.0 * mass / 80.0 * (4.0 * r * r + h * h)
    j3 = 3.0 * mass * r * r / 10.0
    length = 0.75 * h
    sim = _pivoted_top(
        integrator,
        options,
        dt,
        mass,
        (j1, j1, j3),
        length,
        gval,
        ("cone", {"radius": r, "height": h}),
    )
    j1_pivot = j1 + mass * length * length
    omega_s = mass * gval * length / (j3 * omega_p) + (j1_pivot - j3) / j3 * omega_p * np.cos(
        theta0
    )
    q0 = np.array([np.cos(theta0 / 2), np.sin(theta0 / 2), 0.0, 0.0])
    sim.set_orientation(0, q0)
    d3 = pure(quat.rotate)(q0, np.array([0.0, 0.0, 1.0]), np.empty(3))  # (compiles nothing)
    sim.set_angular_velocity(0, omega_p * np.array([0.0, 0.0, 1.0]) + omega_s * d3, frame="world")

    def com_reference(t: float) -> NDArray[np.float64]:
        """Analytic centre of mass in steady precession, 000 §5.2.3."""
        s = length * np.sin(theta0)
        return np.array(
            [s * np.sin(omega_p * t), -s * np.cos(omega_p * t), length * np.cos(theta0)]
        )

    info(sim).update(
        reference=com_reference, reference_name="centre of mass", spin_rate=omega_s, length=length
    )
    return sim


@scenario(dt=0.01, t_end=10.0)
def heavy_top(
    integrator: str = "energy_momentum",
    dt: float = 0.01,
    options: dict[str, Any] | None = None,
    inertia_pivot: ArrayLike = (50.0, 42.0, 10.0),
    mass_times_length: float = 11.09,
    theta0: float = np.pi / 3,
    omega0: ArrayLike = (0.0, 0.0, 20.0),
    g: float = 9.81,
    length: float = 1.0,
) -> Simulation:
    """Slightly asymmetric heavy top with nutation and precession, 002 Example A.

    The paper gives only the inertia about the pivot and m L; the motion depends on nothing
    else.  ``length`` (the pivot-to-centre-of-mass distance) picks the mass m = mL / L and the
    centroidal inertia = inertia_pivot - m L² (transverse axes).  ``omega0``: body frame.
    """
    ip = as_vector(inertia_pivot, 3, "inertia_pivot")
    ml = as_scalar(mass_times_length, "mass_times_length", positive=True)
    length = as_scalar(length, "length", positive=True)
    mass = ml / length
    inertia_cm = ip - mass * length * length * np.array([1.0, 1.0, 0.0])
    try:
        check_inertia(inertia_cm, allow_nonphysical=False)
    except ValueError:
        raise ValueError(
            f"length: {length} gives the centroidal inertia {inertia_cm.tolist()} "
            "(inertia_pivot - m L^2 on the transverse axes, m L fixed), which no real body "
            "has; choose a shorter length"
        ) from None
    sim = _pivoted_top(
        integrator,
        options,
        dt,
        mass,
        inertia_cm,
        length,
        g,
        ("cylinder", {"radius": 0.15 * length, "half_length": 0.9 * length}),
    )
    t = as_scalar(theta0, "theta0")
    sim.set_orientation(0, (np.cos(t / 2), np.sin(t / 2), 0.0, 0.0))
    sim.set_angular_velocity(0, as_vector(omega0, 3, "omega0"), frame="body")
    return sim


@scenario(dt=0.002, t_end=2.0)
def geradin_top(
    integrator: str = "energy_momentum",
    dt: float = 0.002,
    options: dict[str, Any] | None = None,
    case: int = 1,
) -> Simulation:
    """Symmetrical top of 003 §11.6: m = 5 kg, J = (0.8, 0.8, 1.8) kg m², L = 1.3 m.

    Case 1 is dropped from theta = pi/9 spinning at 50 rad/s; case 2 also precesses at
    -10 rad/s.  The centroidal inertia violates the triangle inequality (only the inertia
    about the pivot is physical), hence the explicit opt-out.
    """
    if case not in (1, 2):
        raise ValueError(f"case: expected 1 or 2, got {case!r}")
    psi, theta, phi = 0.0, np.pi / 9, 0.0
    psi_dot, theta_dot, phi_dot = (0.0 if case == 1 else -10.0), 0.0, 50.0
    sim = _pivoted_top(
        integrator,
        options,
        dt,
        5.0,
        (0.8, 0.8, 1.8),
        1.3,
        9.81,
        ("cylinder", {"radius": 0.25, "half_length": 1.3}),
        allow_nonphysical=True,
    )
    sim.set_orientation(0, quat.quat_from_euler313(psi, theta, phi, np.empty(4)))
    # body angular velocity from Euler-angle rates, 003 (283)
    omega = np.array(
        [
            np.sin(phi) * np.sin(theta) * psi_dot + np.cos(phi) * theta_dot,
            np.cos(phi) * np.sin(theta) * psi_dot - np.sin(phi) * theta_dot,
            np.cos(theta) * psi_dot + phi_dot,
        ]
    )
    sim.set_angular_velocity(0, omega, frame="body")
    return sim
