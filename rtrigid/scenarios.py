"""Named, parametrized scenarios: the papers' test cases, ready to step.

    sim = rtrigid.scenarios.build("gyro_top", integrator="energy_momentum", dt=1e-3, omega_p=10)

Each builder returns a :class:`~rtrigid.simulation.Simulation`; :func:`info` gives what the
scenario conserves, its default duration and -- where the papers give one -- an analytic
reference.

Besides the registered names, :func:`build` takes a model factory as ``"module:function"``:
a function of the parameters that returns a :class:`~rtrigid.model.Model` (or a ready
``Simulation``), so ``rtrigid run/serve/view mypackage.robots:arm`` works on a user's own
model.  Its step is ``dt`` (default :data:`FACTORY_DT`), its duration :data:`FACTORY_T_END`.
And it takes the path of a URDF or MJCF robot file (:func:`rtrigid.load_model`).
"""
from __future__ import annotations

import importlib
import inspect
import os
import weakref

import numpy as np

from rtrigid import integrators
from rtrigid.maths import quat
from rtrigid.model import Model, check_inertia
from rtrigid.simulation import Simulation
from rtrigid.validate import as_int, as_scalar, as_vector

_BUILDERS = {}
_INFO = weakref.WeakKeyDictionary()  # simulation -> its scenario's metadata
FACTORY_DT = 1e-3    # the step of a model factory's simulation unless dt is given
FACTORY_T_END = 1.0  # and its default duration
ALL_AXES = [("linear", 0), ("linear", 1), ("linear", 2),
            ("angular", 0), ("angular", 1), ("angular", 2)]


def scenario(dt, t_end, integrator="energy_momentum"):
    """Register a builder under its function name with its default step, duration and
    integrator (what :func:`build` uses when none is given)."""
    def register(fn):
        _BUILDERS[fn.__name__] = (fn, dt, t_end)
        _DEFAULT_INTEGRATOR[fn.__name__] = integrator
        return fn
    return register


_DEFAULT_INTEGRATOR = {}


def default_integrator(name):
    """The integrator :func:`build` steps scenario ``name`` with when none is given."""
    return _DEFAULT_INTEGRATOR.get(name, "energy_momentum")


def names():
    """The scenario names, in registration order."""
    return list(_BUILDERS)


def defaults(name):
    """(default dt, default duration) of a scenario."""
    _, dt, t_end = _get(name)
    return dt, t_end


def parameters(name):
    """The keyword parameters of a scenario with their defaults."""
    fn = _get(name)[0]
    return {k: p.default for k, p in inspect.signature(fn).parameters.items()
            if k not in ("integrator", "dt", "options")
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def info(sim) -> dict:
    """The metadata of the scenario ``sim`` was built from (empty for other simulations).

    Kept here, beside the simulation rather than on it: ``scenario``, ``t_end``, ``params``,
    ``conserved`` (a list of (quantity, axis) pairs, quantity "linear" or "angular") and,
    where the papers give one, ``reference(t)`` for the quantity ``reference_name``.
    """
    return _INFO.setdefault(sim, {})


def describe(name):
    """One line on what the scenario is (the first line of its builder's docstring)."""
    return (_get(name)[0].__doc__ or "").strip().split("\n")[0].replace("``", "")


def integrators_for(name):
    """The integrators that can step scenario ``name`` (with its default parameters)."""
    fn, dt, _ = _get(name)
    out = []
    for integrator in integrators.names():
        try:
            fn(integrator=integrator, dt=dt)
        except ValueError as exc:
            if not str(exc).startswith("integrator:"):
                raise
        else:
            out.append(integrator)
    return out


def is_factory(name) -> bool:
    """Whether ``name`` names a model factory (``"module:function"``) rather than a scenario
    or a file."""
    return isinstance(name, str) and ":" in name and not os.path.isfile(name)


def factory(name):
    """The function a ``"module:function"`` name refers to (``ValueError`` if there is none)."""
    module, _, attr = name.partition(":")
    if not module or not attr:
        raise ValueError(f"name: {name!r} is not of the form module:function")
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise ValueError(f"name: cannot import module {module!r} of {name!r}: {exc}") from None
    fn = mod
    for part in attr.split("."):
        fn = getattr(fn, part, None)
    if not callable(fn):
        raise ValueError(f"name: module {module!r} has no function {attr!r}")
    return fn


def _get(name):
    if is_factory(name):
        return factory(name), FACTORY_DT, FACTORY_T_END
    if name not in _BUILDERS:
        raise ValueError(f"name: unknown scenario {name!r}; known: {names()} (or a model "
                         "factory as module:function)")
    return _BUILDERS[name]


def _from_factory(name, integrator, dt, options, params):
    """Build the simulation of a model factory: ``fn(**params)`` returns a Model (stepped
    here by ``integrator`` at ``dt``) or a Simulation (taken as it is)."""
    made = factory(name)(**params)
    if isinstance(made, Simulation):
        return made
    if not isinstance(made, Model):
        raise ValueError(f"name: {name} returned a {type(made).__name__}, not a Model or a "
                         "Simulation")
    return Simulation(made, integrator=integrator, dt=FACTORY_DT if dt is None else dt,
                      options=options)


FILE_PARAMETERS = {"floating_base": False, "merge_fixed": True, "ignore": (), "limits": True,
                   "actuators": None, "kp": None, "kv": None}
FILE_DT, FILE_T_END = 1e-3, 2.0


def is_file(name):
    """Whether ``name`` names a robot description file rather than a scenario."""
    return isinstance(name, str) and name not in _BUILDERS and os.path.isfile(name)


def build(name, integrator=None, dt=None, options=None, **params) -> Simulation:
    """Build scenario ``name`` stepped by ``integrator`` (with its ``options``); unknown
    parameters are refused with ``ValueError``.  ``integrator`` defaults to the scenario's
    (:func:`default_integrator`: ``energy_momentum``, ``nullspace_rk4`` for the closed
    loops), for a file to ``nullspace_rk4``.

    ``name`` may also be the path of a URDF or MJCF file (:func:`rtrigid.load_model`; its
    parameters are those of ``FILE_PARAMETERS``, dt 1 ms and 2 s by default).
    """
    if is_file(name):
        from rtrigid.loaders import load_model

        for key in params:
            if key not in FILE_PARAMETERS:
                raise ValueError(f"{key}: not a parameter of a robot file; known: "
                                 f"{sorted(FILE_PARAMETERS)}")
        sim = Simulation(load_model(name, **params), integrator=integrator or "nullspace_rk4",
                         dt=FILE_DT if dt is None else dt, options=options)
        info(sim).update(scenario=name, t_end=FILE_T_END, conserved=[],
                         params={**FILE_PARAMETERS, **params})
        return sim
    fn, default_dt, t_end = _get(name)
    integrator = integrator or default_integrator(name)
    known = parameters(name)
    takes_any = any(p.kind == p.VAR_KEYWORD for p in inspect.signature(fn).parameters.values())
    for key in params:
        if key not in known and not takes_any:
            raise ValueError(f"{key}: not a parameter of {name!r}; known: {sorted(known)}")
    if is_factory(name):
        sim = _from_factory(name, integrator, dt, options, params)
    else:
        sim = fn(integrator=integrator, dt=default_dt if dt is None else dt, options=options,
                 **params)
    info(sim).setdefault("scenario", name)
    info(sim).setdefault("t_end", t_end)
    info(sim)["params"] = {**known, **params}
    return sim


def _free_rotor(integrator, options, dt, inertia, omega0, q0, mass, allow_nonphysical=False,
                shape=None):
    model = Model(gravity=(0.0, 0.0, 0.0))
    j = as_vector(inertia, 3, "inertia")
    half = 0.5 * np.sqrt(np.maximum(2.5 * (j.sum() / 2 - j) / mass, 1e-12))
    model.add_body("body", mass, j, shape=shape or ("box", {"half_extents": half}),
                   allow_nonphysical_inertia=allow_nonphysical)
    sim = Simulation(model, integrator, dt, options=options)
    sim.set_orientation(0, as_vector(q0, 4, "q0"))
    sim.set_angular_velocity(0, as_vector(omega0, 3, "omega0"), frame="body")
    info(sim)["conserved"] = list(ALL_AXES)
    return sim


@scenario(dt=0.02, t_end=20.0)
def free_body(integrator="energy_momentum", dt=0.02, options=None, inertia=(6.0, 8.0, 3.0),
              omega0=(10.0, 20.0, 20.0), q0=(1.0, 0.0, 0.0, 0.0), mass=1.0):
    """Torque-free rigid body, 000 §5.1; ``omega0`` in the body frame.

    The render box has the principal moments of the given inertia (for a physical one).
    """
    return _free_rotor(integrator, options, dt, inertia, omega0, q0, mass)


@scenario(dt=0.005, t_end=5.0)
def tennis_racket(integrator="energy_momentum", dt=0.005, options=None, inertia=(41.6, 11.6, 50.0),
                  omega0=(50.0, 1e-3, 1e-3), euler313=(np.pi / 3, np.pi / 4, np.pi / 2),
                  mass=1.0):
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
        ("cylinder", {"radius": 0.95 * head, "half_length": 0.01 * head,
                      "offset": (0.0, 0.55 * ey, 0.0), "color": (0.92, 0.92, 0.85)}),
        ("capsule", {"radius": 0.09 * head, "half_length": 0.5 * (ey - 0.1 * head),
                     "offset": (0.0, 0.1 * ey - 0.5 * (ey + 0.1 * head), 0.0),
                     "axis": (0.0, 1.0, 0.0)}),
        ("sphere", {"radius": 0.22 * head, "offset": (head * 1.07, 0.55 * ey, 0.0),
                    "color": (0.85, 0.08, 0.08)}),
    ]
    return _free_rotor(integrator, options, dt, inertia, omega0, q0, mass,
                       shape=racket if min(ex, ey) > 0 else None)


def _pivoted_top(integrator, options, dt, mass, inertia_cm, length, gravity, shape,
                 allow_nonphysical=False):
    model = Model(gravity=(0.0, 0.0, -as_scalar(gravity, "g", positive=True)))
    model.add_body("top", mass, inertia_cm, shape=shape,
                   allow_nonphysical_inertia=allow_nonphysical)
    model.attach_to_world("top", point_body=(0.0, 0.0, -length))
    sim = Simulation(model, integrator, dt, options=options)
    info(sim)["conserved"] = [("angular", 2)]
    return sim


@scenario(dt=0.001, t_end=10.0)
def gyro_top(integrator="energy_momentum", dt=0.001, options=None, rho=2700.0, height=0.1, radius=0.05,
             theta0=np.pi / 3, omega_p=10.0, g=9.81):
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
    sim = _pivoted_top(integrator, options, dt, mass, (j1, j1, j3), length, gval,
                       ("cone", {"radius": r, "height": h}))
    j1_pivot = j1 + mass * length * length
    omega_s = mass * gval * length / (j3 * omega_p) + (j1_pivot - j3) / j3 * omega_p * np.cos(theta0)
    q0 = np.array([np.cos(theta0 / 2), np.sin(theta0 / 2), 0.0, 0.0])
    sim.set_orientation(0, q0)
    d3 = quat.rotate(q0, np.array([0.0, 0.0, 1.0]), np.empty(3))
    sim.set_angular_velocity(0, omega_p * np.array([0.0, 0.0, 1.0]) + omega_s * d3, frame="world")

    def com_reference(t):
        """Analytic centre of mass in steady precession, 000 §5.2.3."""
        s = length * np.sin(theta0)
        return np.array([s * np.sin(omega_p * t), -s * np.cos(omega_p * t),
                         length * np.cos(theta0)])

    info(sim).update(reference=com_reference, reference_name="centre of mass",
                    spin_rate=omega_s, length=length)
    return sim


@scenario(dt=0.01, t_end=10.0)
def heavy_top(integrator="energy_momentum", dt=0.01, options=None, inertia_pivot=(50.0, 42.0, 10.0),
              mass_times_length=11.09, theta0=np.pi / 3, omega0=(0.0, 0.0, 20.0), g=9.81,
              length=1.0):
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
            "has; choose a shorter length") from None
    sim = _pivoted_top(integrator, options, dt, mass, inertia_cm, length, g,
                       ("cylinder", {"radius": 0.15 * length, "half_length": 0.9 * length}))
    t = as_scalar(theta0, "theta0")
    sim.set_orientation(0, (np.cos(t / 2), np.sin(t / 2), 0.0, 0.0))
    sim.set_angular_velocity(0, as_vector(omega0, 3, "omega0"), frame="body")
    return sim


@scenario(dt=0.002, t_end=2.0)
def geradin_top(integrator="energy_momentum", dt=0.002, options=None, case=1):
    """Symmetrical top of 003 §11.6: m = 5 kg, J = (0.8, 0.8, 1.8) kg m², L = 1.3 m.

    Case 1 is dropped from theta = pi/9 spinning at 50 rad/s; case 2 also precesses at
    -10 rad/s.  The centroidal inertia violates the triangle inequality (only the inertia
    about the pivot is physical), hence the explicit opt-out.
    """
    if case not in (1, 2):
        raise ValueError(f"case: expected 1 or 2, got {case!r}")
    psi, theta, phi = 0.0, np.pi / 9, 0.0
    psi_dot, theta_dot, phi_dot = (0.0 if case == 1 else -10.0), 0.0, 50.0
    sim = _pivoted_top(integrator, options, dt, 5.0, (0.8, 0.8, 1.8), 1.3, 9.81,
                       ("cylinder", {"radius": 0.25, "half_length": 1.3}),
                       allow_nonphysical=True)
    sim.set_orientation(0, quat.quat_from_euler313(psi, theta, phi, np.empty(4)))
    # body angular velocity from Euler-angle rates, 003 (283)
    omega = np.array([
        np.sin(phi) * np.sin(theta) * psi_dot + np.cos(phi) * theta_dot,
        np.cos(phi) * np.sin(theta) * psi_dot - np.sin(phi) * theta_dot,
        np.cos(theta) * psi_dot + phi_dot,
    ])
    sim.set_angular_velocity(0, omega, frame="body")
    return sim


# -- jointed systems ------------------------------------------------------------------------------
def rod_inertia(mass, length, radius):
    """Principal moments of a solid cylinder along its z axis, about its centre of mass."""
    t = mass * (3.0 * radius * radius + length * length) / 12.0
    return np.array([t, t, 0.5 * mass * radius * radius])


@scenario(dt=1.0 / 240.0, t_end=10.0)
def chain(integrator="energy_momentum", dt=1.0 / 240.0, options=None, n=5, link_length=0.5, link_mass=1.0,
          link_radius=0.05, joint="spherical", q0=None, omega0=None, seed=0):
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
        m.add_body(f"link{i}", mass, rod_inertia(mass, length, radius),
                   shape=("capsule", {"radius": radius, "half_length": 0.5 * length}))
        m.add_joint(joint, None if i == 0 else i - 1, i, name=f"joint{i}",
                    anchor_parent=(0.0, 0.0, 0.0) if i == 0 else (0.0, 0.0, -0.5 * length),
                    anchor_child=(0.0, 0.0, 0.5 * length), **axis)
    sim = Simulation(m, integrator, dt, options=options)
    rng = np.random.default_rng(seed)
    if q0 is None:
        q0 = [quat.from_rotvec(rng.normal(scale=0.05, size=3) if joint == "spherical"
                               else np.array([rng.normal(scale=0.05), 0.0, 0.0]))
              for _ in range(n)]
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


def _set_world_chain(sim, q_world, omega_world, joint):
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
def double_pendulum(integrator="energy_momentum", dt=1.0 / 240.0, options=None, theta1=2.0,
                    theta2=2.5, link_length=0.5, link_mass=1.0):
    """Planar double pendulum (two revolute rods), released from large angles: chaotic."""
    sim = chain(integrator, dt, options, n=2, link_length=link_length, link_mass=link_mass,
                link_radius=0.03, joint="revolute")
    sim.set_joint_position(0, [as_scalar(theta1, "theta1")])
    sim.set_joint_position(1, [as_scalar(theta2, "theta2") - theta1])
    sim.set_joint_velocity(0, [0.0])
    sim.set_joint_velocity(1, [0.0])
    return sim


@scenario(dt=0.002, t_end=4.0)
def two_body_spherical(integrator="energy_momentum", dt=0.002, options=None, stiffness=1.0e4):
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
    m.add_spring(a, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), as_scalar(stiffness, "stiffness",
                                                               positive=True))
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
def gimbal_gyroscope(integrator="energy_momentum", dt=0.002, options=None, spin=60.0, tilt=0.4):
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
    outer = m.add_body("outer_ring", 0.4, (0.02, 0.01, 0.012), shape=[
        ("torus", {"radius": 0.24, "tube_radius": 0.012}),
        *[("cylinder", {"radius": 0.012, "half_length": 0.035, "offset": (s * 0.27, 0, 0),
                        "axis": (1, 0, 0), "color": pin}) for s in (-1, 1)],
        *[("cylinder", {"radius": 0.009, "half_length": 0.035, "offset": (0, s * 0.21, 0),
                        "axis": (0, 1, 0), "color": pin}) for s in (-1, 1)]])
    inner = m.add_body("inner_ring", 0.3, (0.008, 0.01, 0.006), shape=[
        ("torus", {"radius": 0.18, "tube_radius": 0.01, "offset": (0, 0, 0.05),
                   "axis": (1, 0, 0)}),
        ("cylinder", {"radius": 0.006, "half_length": 0.18, "offset": (0, 0, 0.05),
                      "color": pin})])
    rotor = m.add_body("rotor", 1.0, rod_inertia(1.0, 0.04, 0.12), shape=[
        ("cylinder", {"radius": 0.12, "half_length": 0.02}),
        ("box", {"half_extents": (0.05, 0.012, 0.0025), "offset": (0.065, 0, 0.021),
                 "color": (0.97, 0.97, 0.97)})])
    m.add_joint("revolute", None, outer, anchor_parent=(0.0, 0.0, 0.5), axis_parent=(1, 0, 0),
                anchor_child=(0.0, 0.0, 0.0), name="outer")
    m.add_joint("revolute", outer, inner, anchor_parent=(0.0, 0.0, 0.0), axis_parent=(0, 1, 0),
                anchor_child=(0.0, 0.0, 0.05), name="inner")
    m.add_joint("revolute", inner, rotor, anchor_parent=(0.0, 0.0, -0.05), axis_parent=(0, 0, 1),
                anchor_child=(0.0, 0.0, 0.0), name="spin")
    sim = Simulation(m, integrator, dt, options=options)
    sim.set_joint_position("outer", [as_scalar(tilt, "tilt")])
    sim.set_joint_velocity("spin", [as_scalar(spin, "spin")])
    info(sim)["conserved"] = []
    return sim


@scenario(dt=0.001, t_end=3.0)
def arm(integrator="energy_momentum", dt=0.001, options=None, n_links=2, joint="revolute",
        kp=200.0, kv=5.0, force_limit=40.0):
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
        mass = 0.9 ** i
        m.add_body(f"link{i}", mass, rod_inertia(mass, length, 0.03),
                   shape=("capsule", {"radius": 0.03, "half_length": length / 2}))
        j = m.add_joint(joint, None if i == 0 else i - 1, i, axis_parent=axis,
                        anchor_parent=(0.0, 0.0, 0.0) if i == 0 else (0.0, 0.0, -length / 2),
                        anchor_child=(0.0, 0.0, length / 2), name=f"joint{i}")
        m.add_actuator(j, "position", kp=kp, kv=kv, force_range=(-limit, limit),
                       name=f"joint{i}")
    sim = Simulation(m, integrator, dt, options=options)
    scale = 1.0 if joint == "revolute" else 0.1
    sim.set_controls(scale * np.array([0.5] + [-0.8] * (n - 1)))
    info(sim)["conserved"] = []
    return sim


QUADROTOR_ARM = 0.17          # m, centre of mass to each rotor
QUADROTOR_YAW_PER_THRUST = 0.016   # m: a rotor's drag torque about its axis per newton of thrust


@scenario(dt=0.001, t_end=5.0)
def quadrotor(integrator="energy_momentum", dt=0.001, options=None, mass=1.0,
              inertia=(0.0082, 0.0082, 0.0149), height=1.0, tilt=0.0):
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
    rotors = [("cylinder", {"radius": 0.065, "half_length": 0.004, "offset": p + (0.016,),
                            "color": c})
              for p, c in (((arm, 0.0), (0.85, 0.2, 0.15)), ((0.0, arm), (0.8, 0.8, 0.8)),
                           ((-arm, 0.0), (0.8, 0.8, 0.8)), ((0.0, -arm), (0.8, 0.8, 0.8)))]
    m.add_body("frame", as_scalar(mass, "mass", positive=True), as_vector(inertia, 3, "inertia"),
               shape=[("box", {"half_extents": (0.05, 0.05, 0.02)}),
                      ("box", {"half_extents": (arm, 0.012, 0.008)}),
                      ("box", {"half_extents": (0.012, arm, 0.008)}), *rotors])
    sim = Simulation(m, integrator, dt, options=options)
    tilt = as_scalar(tilt, "tilt")
    sim.set_position("frame", (0.0, 0.0, as_scalar(height, "height")))
    sim.set_orientation("frame", (np.cos(tilt / 2), np.sin(tilt / 2), 0.0, 0.0))
    a = QUADROTOR_ARM
    info(sim)["rotors"] = [((a, 0.0, 0.0), -1.0), ((0.0, a, 0.0), 1.0),
                           ((-a, 0.0, 0.0), -1.0), ((0.0, -a, 0.0), 1.0)]
    info(sim)["conserved"] = []
    return sim


def set_rotor_thrusts(sim, thrusts, body="frame"):
    """Replace the loads on ``body`` by its rotors' thrusts (N, one per rotor of
    ``info(sim)["rotors"]``): each a body-frame force along +z at its rotor's point, plus its
    drag torque about z.  Like every applied load, they are held in the world frame until set
    again, so a controller sets them every tick."""
    rotors = info(sim)["rotors"]
    thrusts = as_vector(thrusts, len(rotors), "thrusts")
    sim.clear_applied(body)
    for (point, spin), thrust in zip(rotors, thrusts):
        sim.apply_force(body, (0.0, 0.0, thrust), point=point, frame="body")
        sim.apply_torque(body, (0.0, 0.0, spin * QUADROTOR_YAW_PER_THRUST * thrust),
                         frame="body")


# -- contact scenarios (issue 15): bodies on a ground ---------------------------------------------
def box_inertia(mass, half):
    """Principal moments of a solid box of half extents ``half`` about its centre."""
    a, b, c = (2.0 * np.asarray(half, float)) ** 2
    return mass / 12.0 * np.array([b + c, a + c, a + b])


@scenario(dt=1.0 / 240.0, t_end=2.0)
def ball_on_incline(integrator="energy_momentum", dt=1.0 / 240.0, options=None, angle=20.0,
                    friction=0.5, radius=0.1, mass=1.0):
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

    def centre(t):
        """Rolling without slipping from rest: s = (5/7) g sin(angle) t^2 / 2."""
        return start + 0.5 * accel * t * t * down

    info(sim).update(conserved=[], reference=centre, reference_name="centre of the ball")
    return sim


@scenario(dt=1.0 / 240.0, t_end=10.0)
def box_stack(integrator="energy_momentum", dt=1.0 / 240.0, options=None, n=10, size=0.1,
              mass=1.0, friction=0.5):
    """``n`` cubes of half size ``size`` stacked on the ground, at rest: the stack should stand."""
    n = as_int(n, "n", minimum=1)
    half = (as_scalar(size, "size", positive=True),) * 3
    mass = as_scalar(mass, "mass", positive=True)
    m = Model()
    m.add_ground(friction=friction)
    for k in range(n):
        m.add_body(f"box{k}", mass, box_inertia(mass, half), shape=("box", {"half_extents": half}),
                   friction=friction)
    sim = Simulation(m, integrator, dt, options=options)
    for k in range(n):
        sim.set_position(k, (0.0, 0.0, half[2] * (2 * k + 1)))
    info(sim)["conserved"] = []
    return sim


def quadruped_model(torso_mass=4.0, leg_mass=0.3, friction=0.8, kp=60.0, kv=1.0):
    """A simple quadruped on the ground: a box torso (0.4 x 0.2 x 0.1 m) on four capsule legs
    (0.2 m, 2 cm end caps) hinged about y at its bottom corners, each held upright by a
    position servo (kp, kv).  Standing, the torso's centre is 0.27 m over the ground.
    (Under nullspace_rk4 at dt = 1/240 a damper of kv = 2 on these light legs grows an
    oscillation through the contacts; kv = 1 stands still.)"""
    half = (0.2, 0.1, 0.05)
    m = Model()
    m.add_ground(friction=friction)
    m.add_body("torso", torso_mass, box_inertia(torso_mass, half),
               shape=("box", {"half_extents": half}), friction=friction)
    leg = ("capsule", {"radius": 0.02, "half_length": 0.1})
    j = leg_mass * 0.2 ** 2 / 12.0
    for i, (sx, sy) in enumerate(((1, 1), (1, -1), (-1, 1), (-1, -1))):
        name = f"leg{i}"
        m.add_body(name, leg_mass, (j, j, 1e-4), shape=leg, friction=friction)
        m.add_joint("revolute", "torso", name, anchor_parent=(0.15 * sx, 0.12 * sy, -0.05),
                    anchor_child=(0.0, 0.0, 0.1), axis_parent=(0.0, 1.0, 0.0), name=f"hip{i}")
        m.add_actuator(f"hip{i}", "position", kp=kp, kv=kv)
    return m


QUADRUPED_STAND = 0.27  # quadruped_model's torso centre over the ground, standing


@scenario(dt=1.0 / 240.0, t_end=3.0, integrator="nullspace_rk4")
def quadruped_on_ground(integrator="nullspace_rk4", dt=1.0 / 240.0, options=None, drop=0.02):
    """A simple quadruped (a box on four servo-held capsule legs) dropped ``drop`` m onto the
    ground: contacts through joints; it lands and stands on its feet."""
    m = quadruped_model()
    sim = Simulation(m, integrator, dt, options=options)
    sim.set_position("torso", (0.0, 0.0, QUADRUPED_STAND + as_scalar(drop, "drop")))
    info(sim)["conserved"] = []
    return sim


def _cone_top(integrator, options, dt, mass, radius, height, friction, tilt, spin, name):
    """A solid cone standing on its apex, tilted ``tilt`` about x, spinning ``spin`` about its
    axis, on a ground of ``friction``."""
    mass = as_scalar(mass, "mass", positive=True)
    r = as_scalar(radius, "radius", positive=True)
    h = as_scalar(height, "height", positive=True)
    tilt = as_scalar(tilt, "tilt")
    j1 = 3.0 * mass / 80.0 * (4.0 * r * r + h * h)
    m = Model()
    m.add_ground(friction=friction)
    m.add_body(name, mass, (j1, j1, 0.3 * mass * r * r), shape=("cone", {"radius": r,
                                                                          "height": h}),
               friction=friction)
    sim = Simulation(m, integrator, dt, options=options)
    q = np.array([np.cos(tilt / 2), np.sin(tilt / 2), 0.0, 0.0])
    axis = quat.rotate(q, np.array([0.0, 0.0, 1.0]), np.empty(3))
    sim.set_orientation(name, q)
    sim.set_position(name, 0.75 * h * axis)  # apex on the ground
    sim.set_angular_velocity(name, as_scalar(spin, "spin") * axis)
    return sim


@scenario(dt=1e-3, t_end=5.0)
def top_on_table(integrator="energy_momentum", dt=1e-3, options=None, mass=0.1, radius=0.03,
                 height=0.06, friction=0.3, tilt=0.1, spin=400.0):
    """A solid cone top spinning on its apex on a table: it precesses with its tip on the
    table; below about 240 rad/s (its critical spin 2 sqrt(I1 m g l) / I3 about the apex) it
    falls over."""
    sim = _cone_top(integrator, options, dt, mass, radius, height, friction, tilt, spin, "top")
    info(sim)["conserved"] = []
    return sim


@scenario(dt=5e-4, t_end=5.0)
def tippe_top(integrator="energy_momentum", dt=5e-4, options=None, mass=0.015, radius=0.02,
              offset=0.3, friction=0.3, tilt=0.1, spin=150.0):
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
    m.add_body("top", mass, (i1, i1, i3), shape=("sphere", {"radius": r, "offset": (0, 0, a)}),
               friction=friction)
    sim = Simulation(m, integrator, dt, options=options)
    tilt = as_scalar(tilt, "tilt")
    q = np.array([np.cos(tilt / 2), np.sin(tilt / 2), 0.0, 0.0])
    centre_from_com = quat.rotate(q, np.array([0.0, 0.0, a]), np.empty(3))
    sim.set_orientation("top", q)
    sim.set_position("top", (0.0, 0.0, r) - centre_from_com)  # ball resting on the ground
    sim.set_angular_velocity("top", (0.0, 0.0, as_scalar(spin, "spin")))
    info(sim).update(conserved=[], offset=a)
    return sim


def euler_disk_precession(alpha, radius=0.04, thickness=0.01, g=9.81):
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
def euler_disk(integrator="energy_momentum", dt=2.5e-4, options=None, mass=0.2, radius=0.04,
               thickness=0.01, friction=0.3, alpha=0.5, rolling_friction=3e-4, spin=None):
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
    m.add_body("disk", mass, (i1, i1, i3), shape=("cylinder", {"radius": r, "half_length": hl}),
               friction=friction, rolling_friction=rolling_friction)
    sim = Simulation(m, integrator, dt, options=options)
    # the axis alpha from the vertical, turned about x: the contact point lies along -y
    q = np.array([np.cos(alpha / 2), np.sin(alpha / 2), 0.0, 0.0])
    sim.set_orientation("disk", q)
    sim.set_position("disk", (0.0, 0.0, r * np.sin(alpha) + hl * np.cos(alpha)))
    g = -float(m.gravity[2])

    def precession(a):
        return euler_disk_precession(a, r, thickness, g)

    if spin is None:
        e3 = np.array([0.0, -np.sin(alpha), np.cos(alpha)])
        down = np.array([0.0, -np.cos(alpha), -np.sin(alpha)])
        sim.set_angular_velocity("disk", -precession(alpha) * np.sin(alpha) / r
                                 * (r * down - hl * e3))
    else:
        sim.set_angular_velocity("disk", (0.0, 0.0, as_scalar(spin, "spin")))
    info(sim).update(conserved=[], precession=precession)
    return sim


# -- closed loops (issue 16): planar linkages in the x-z plane, joint axes along -y, so a
# joint angle turns the x axis towards +z (counter-clockwise seen from -y) --------------------
_PLANE_AXIS = (0.0, -1.0, 0.0)


def _link(m, name, mass, length, radius=0.01):
    """A slender rod along its body x axis (capsule), centre of mass at its middle."""
    return m.add_body(name, mass, (0.5 * mass * radius ** 2, *(mass * length ** 2 / 12.0,) * 2),
                      shape=("capsule", {"radius": radius, "half_length": length / 2}))


def four_bar_angles(theta, crank, coupler, rocker, ground):
    """(coupler angle, rocker angle), absolute, of the open four-bar at crank angle
    ``theta`` (ground pivots at (0, 0) and (ground, 0) of the x-z plane)."""
    ax, az = crank * np.cos(theta), crank * np.sin(theta)
    ex, ez = ground - ax, -az
    span = np.hypot(ex, ez)
    along = (coupler ** 2 - rocker ** 2 + span ** 2) / (2.0 * span)
    h = np.sqrt(max(coupler ** 2 - along ** 2, 0.0))
    bx = ax + (along * ex - h * ez) / span
    bz = az + (along * ez + h * ex) / span
    return np.arctan2(bz - az, bx - ax), np.arctan2(bz, bx - ground)


@scenario(dt=1.0 / 240.0, t_end=5.0, integrator="nullspace_rk4")
def four_bar(integrator="nullspace_rk4", dt=1.0 / 240.0, options=None, crank=0.1,
             coupler=0.35, rocker=0.3, ground=0.4, flywheel_mass=2.0, flywheel_radius=0.08,
             theta0=0.5, omega0=8.0):
    """Grashof crank-rocker four-bar with a flywheel on the crank, in a vertical plane.

    Link lengths (m) ``crank`` (the shortest: it turns fully), ``coupler``, ``rocker`` and
    ``ground`` (the pivots' distance) must satisfy Grashof's s + l < p + q; rods of 1 kg/m.
    The crank carries a disc (``flywheel_mass``, ``flywheel_radius``) centred on its pivot.
    Three revolute joints form the tree (crank and rocker to the world, coupler on the
    crank); the coupler-rocker pin is a loop joint, five spatial rows of rank two.  Starts
    at crank angle ``theta0`` turning at ``omega0`` rad/s.
    """
    lengths = {k: as_scalar(v, k, positive=True) for k, v in
               (("crank", crank), ("coupler", coupler), ("rocker", rocker), ("ground", ground))}
    s, l = min(lengths.values()), max(lengths.values())
    if lengths["crank"] != s or not s + l < sum(lengths.values()) - s - l:
        raise ValueError(f"crank: a crank-rocker needs the crank shortest and s + l < p + q "
                         f"(Grashof); got {lengths}")
    a, b, c, d = (lengths[k] for k in ("crank", "coupler", "rocker", "ground"))
    mf = as_scalar(flywheel_mass, "flywheel_mass", positive=True)
    rf = as_scalar(flywheel_radius, "flywheel_radius", positive=True)
    theta = as_scalar(theta0, "theta0")
    phi, psi = four_bar_angles(theta, a, b, c, d)
    m = Model()
    m.add_body("crank", mf, (0.25 * mf * rf ** 2, 0.5 * mf * rf ** 2, 0.25 * mf * rf ** 2),
               shape=("cylinder", {"radius": rf, "half_length": 0.01}))
    _link(m, "coupler", b, b)
    _link(m, "rocker", c, c)
    m.add_joint("revolute", None, "crank", axis_parent=_PLANE_AXIS, name="crank",
                position=theta)
    m.add_joint("revolute", "crank", "coupler", anchor_parent=(a, 0.0, 0.0),
                anchor_child=(-b / 2, 0.0, 0.0), axis_parent=_PLANE_AXIS, name="coupler",
                position=phi - theta)
    m.add_joint("revolute", None, "rocker", anchor_parent=(d, 0.0, 0.0),
                anchor_child=(-c / 2, 0.0, 0.0), axis_parent=_PLANE_AXIS, name="rocker",
                position=psi)
    m.add_loop_joint("revolute", "coupler", "rocker", anchor_parent=(b / 2, 0.0, 0.0),
                     anchor_child=(c / 2, 0.0, 0.0), axis_parent=_PLANE_AXIS, name="pin")
    sim = Simulation(m, integrator, dt, options=options)
    sim.set_joint_velocity("crank", [as_scalar(omega0, "omega0")])
    info(sim)["conserved"] = []
    return sim


@scenario(dt=1.0 / 240.0, t_end=5.0, integrator="nullspace_rk4")
def slider_crank(integrator="nullspace_rk4", dt=1.0 / 240.0, options=None, crank=0.1,
                 rod=0.3, slider_mass=0.5, flywheel_mass=2.0, flywheel_radius=0.08,
                 theta0=0.3, omega0=10.0):
    """Slider-crank: a flywheel crank drives a rod pinned to a slider on a horizontal guide.

    A vertical plane; the guide is a prismatic joint along x, the rod-slider pin the loop
    joint.  ``rod`` must exceed ``crank``.
    """
    a = as_scalar(crank, "crank", positive=True)
    r = as_scalar(rod, "rod", positive=True)
    if not r > a:
        raise ValueError(f"rod: must be longer than the crank ({a}), got {r}")
    mf = as_scalar(flywheel_mass, "flywheel_mass", positive=True)
    rf = as_scalar(flywheel_radius, "flywheel_radius", positive=True)
    ms = as_scalar(slider_mass, "slider_mass", positive=True)
    theta = as_scalar(theta0, "theta0")
    bx = a * np.cos(theta) + np.sqrt(r ** 2 - (a * np.sin(theta)) ** 2)
    phi = np.arctan2(-a * np.sin(theta), bx - a * np.cos(theta))
    m = Model()
    m.add_body("crank", mf, (0.25 * mf * rf ** 2, 0.5 * mf * rf ** 2, 0.25 * mf * rf ** 2),
               shape=("cylinder", {"radius": rf, "half_length": 0.01}))
    _link(m, "rod", r, r)
    m.add_body("slider", ms, (ms * 0.002, ms * 0.002, ms * 0.002),
               shape=("box", {"half_extents": (0.04, 0.03, 0.025)}))
    m.add_joint("revolute", None, "crank", axis_parent=_PLANE_AXIS, name="crank",
                position=theta)
    m.add_joint("revolute", "crank", "rod", anchor_parent=(a, 0.0, 0.0),
                anchor_child=(-r / 2, 0.0, 0.0), axis_parent=_PLANE_AXIS, name="rod",
                position=phi - theta)
    m.add_joint("prismatic", None, "slider", axis_parent=(1.0, 0.0, 0.0), name="slide",
                position=bx)
    m.add_loop_joint("revolute", "rod", "slider", anchor_parent=(r / 2, 0.0, 0.0),
                     axis_parent=_PLANE_AXIS, name="pin")
    sim = Simulation(m, integrator, dt, options=options)
    sim.set_joint_velocity("crank", [as_scalar(omega0, "omega0")])
    info(sim)["conserved"] = []
    return sim


def bennett_theta2(theta1, alpha, beta):
    """The Bennett linkage's second joint angle at first angle ``theta1`` (the closure
    tan(theta1/2) tan(theta2/2) = sin((beta+alpha)/2) / sin((beta-alpha)/2); theta3 =
    -theta1, theta4 = -theta2 in the Denavit-Hartenberg angles of :func:`bennett`)."""
    k = np.sin((beta + alpha) / 2.0) / np.sin((beta - alpha) / 2.0)
    return 2.0 * np.arctan2(k, np.tan(theta1 / 2.0))


@scenario(dt=1.0 / 240.0, t_end=5.0, integrator="nullspace_rk4")
def bennett(integrator="nullspace_rk4", dt=1.0 / 240.0, options=None, length=0.3,
            alpha=50.0, beta=80.0, theta0=1.0, omega0=2.0, gravity=True):
    """Bennett's spatial 4R linkage: one degree of freedom from four skew revolute joints.

    Opposite links equal: lengths a = ``length`` and b = a sin(beta)/sin(alpha), twists
    ``alpha`` and ``beta`` (degrees); Denavit-Hartenberg frames, the world is the ground
    link's.  Three moving rods (1 kg/m) joined by revolute joints to the world and to each
    other; the fourth joint (rod 3 to the world) is a loop joint: five rows of rank two.
    Starts at first joint angle ``theta0`` turning at ``omega0`` rad/s.
    """
    a = as_scalar(length, "length", positive=True)
    al, be = (np.radians(as_scalar(v, k)) for k, v in (("alpha", alpha), ("beta", beta)))
    if not (0.0 < al < np.pi and 0.0 < be < np.pi and al != be):
        raise ValueError(f"alpha: the twists must lie in (0, 180) degrees and differ, got "
                         f"{alpha}, {beta}")
    b = a * np.sin(be) / np.sin(al)
    th1 = as_scalar(theta0, "theta0")
    th2 = bennett_theta2(th1, al, be)
    m = Model() if gravity else Model(gravity=(0.0, 0.0, 0.0))
    links = ((a, al), (b, be), (a, al))
    for i, (ln, _) in enumerate(links):
        _link(m, f"link{i + 1}", ln, ln)
    axis = lambda tw: (0.0, -np.sin(tw), np.cos(tw))  # noqa: E731 (next joint's axis)
    m.add_joint("revolute", None, "link1", anchor_child=(-a / 2, 0.0, 0.0),
                axis_parent=(0.0, 0.0, 1.0), name="joint1", position=th1)
    for i, th in ((1, th2), (2, -th1)):
        ln, tw = links[i - 1]
        m.add_joint("revolute", f"link{i}", f"link{i + 1}", anchor_parent=(ln / 2, 0.0, 0.0),
                    anchor_child=(-links[i][0] / 2, 0.0, 0.0), axis_parent=axis(tw),
                    axis_child=(0.0, 0.0, 1.0), name=f"joint{i + 1}", position=th)
    m.add_loop_joint("revolute", None, "link3", anchor_parent=(-b, 0.0, 0.0),
                     anchor_child=(a / 2, 0.0, 0.0), axis_parent=(0.0, np.sin(be), np.cos(be)),
                     axis_child=axis(al), name="joint4")
    sim = Simulation(m, integrator, dt, options=options)
    sim.set_joint_velocity("joint1", [as_scalar(omega0, "omega0")])
    info(sim)["conserved"] = []
    return sim


def _turn(axis, angle):
    """Unit quaternion of a turn by ``angle`` about the unit vector ``axis``."""
    return np.array([np.cos(angle / 2), *(np.sin(angle / 2) * np.asarray(axis, float))])


def _arc(a, b):
    """Unit quaternion of the smallest turn of unit vector a onto b."""
    q = np.array([1.0 + a @ b, *np.cross(a, b)])
    return q / np.linalg.norm(q)


@scenario(dt=1.0 / 240.0, t_end=3.0, integrator="nullspace_rk4")
def delta_robot(integrator="nullspace_rk4", dt=1.0 / 240.0, options=None, base_radius=0.2,
                platform_radius=0.05, arm=0.2, rod=0.45, spacing=0.06, height=0.4, kp=None,
                kv=None):
    """A delta robot: three hinged arms, each joined to the platform by a parallelogram.

    The arms are hinged to a fixed base at 120 degrees; each parallelogram is two rods with
    ball joints at both ends.  The platform hangs ``height`` m below the base (the arms'
    angles from the inverse kinematics, elbows out).  Tree: the arms on revolute joints,
    every rod on a ball at its elbow, the platform on a ball at the end of one rod; the
    other five rod ends are loop joints (15 rows).  Mobility 9: the platform's three translations (the parallelograms keep
    it level) and each rod's spin about its own axis.  Without ``kp`` no motors: it swings
    under gravity; drive it with ``set_joint_force("arm0", tau)``.  With ``kp`` (N m/rad; and
    ``kv``, N m s/rad, default 0) each arm has a position servo named as its joint, its
    target the arm's starting angle (:func:`delta_robot_arm_angles` gives the angles that
    put the platform at another point).  Arms 0.3 kg, rods 0.05 kg, platform 0.3 kg.
    """
    rb, rp, la, lr, w, hz = (as_scalar(v, k, positive=True) for k, v in (
        ("base_radius", base_radius), ("platform_radius", platform_radius), ("arm", arm),
        ("rod", rod), ("spacing", spacing), ("height", height)))
    if kp is None and kv is not None:
        raise ValueError("kv: the arms' servos need kp as well")
    centre = np.array([0.0, 0.0, -hz])
    thetas = delta_robot_arm_angles(centre, rb, rp, la, lr)
    z = np.array([0.0, 0.0, 1.0])
    m = Model()
    m.add_body("platform", 0.3, (0.25 * 0.3 * rp ** 2, 0.25 * 0.3 * rp ** 2, 0.5 * 0.3 * rp ** 2),
               shape=("cylinder", {"radius": rp, "half_length": 0.01}))
    arms, rods = [], []
    for i in range(3):
        phi = 2.0 * np.pi * i / 3.0
        r = np.array([np.cos(phi), np.sin(phi), 0.0])
        t = np.array([-np.sin(phi), np.cos(phi), 0.0])
        theta = thetas[i]
        q_arm = quat.mul(_turn(t, theta), _turn(z, phi))
        elbow = rb * r + la * (np.cos(theta) * r - np.sin(theta) * z)
        u = (centre + rp * r - elbow) / lr
        q_rod = _arc(np.array([1.0, 0.0, 0.0]), u)
        arms.append(_link(m, f"arm{i}", 0.3, la))
        m.add_joint("revolute", None, f"arm{i}", anchor_parent=rb * r,
                    anchor_child=(-la / 2, 0.0, 0.0), axis_parent=t, axis_child=(0, 1, 0),
                    name=f"arm{i}", position=theta)
        for k, side in enumerate((1.0, -1.0)):
            name = f"rod{i}{'ab'[k]}"
            rods.append(_link(m, name, 0.05, lr, radius=0.005))
            m.add_joint("spherical", f"arm{i}", name, anchor_parent=(la / 2, side * w / 2, 0.0),
                        anchor_child=(-lr / 2, 0.0, 0.0), name=name,
                        position=quat.mul(quat.conj(q_arm), q_rod))
            at_platform = rp * r + side * w / 2 * t
            if i == 0 and k == 0:
                m.add_joint("spherical", name, "platform", anchor_parent=(lr / 2, 0.0, 0.0),
                            anchor_child=at_platform, name="platform",
                            position=quat.conj(q_rod))
            else:
                m.add_loop_joint("spherical", name, "platform",
                                 anchor_parent=(lr / 2, 0.0, 0.0), anchor_child=at_platform,
                                 name=f"ball{i}{'ab'[k]}")
    if kp is not None:
        for i in range(3):
            m.add_actuator(f"arm{i}", "position", kp=as_scalar(kp, "kp", positive=True),
                           kv=0.0 if kv is None else as_scalar(kv, "kv"), name=f"arm{i}")
    sim = Simulation(m, integrator, dt, options=options)
    if kp is not None:
        sim.set_controls(thetas)
    info(sim)["conserved"] = []
    return sim


def delta_robot_arm_angles(centre, base_radius=0.2, platform_radius=0.05, arm=0.2, rod=0.45):
    """The three arm angles (rad, elbows out) of :func:`delta_robot` that put the platform's
    centre at ``centre`` (world, m; the base at the origin); ``ValueError`` naming
    ``centre`` (``height`` from the scenario) if it is out of reach."""
    rb, rp, la, lr = base_radius, platform_radius, arm, rod
    centre = np.asarray(centre, float)
    z = np.array([0.0, 0.0, 1.0])
    out = np.empty(3)
    for i in range(3):
        phi = 2.0 * np.pi * i / 3.0
        r = np.array([np.cos(phi), np.sin(phi), 0.0])
        d = (rb - rp) * r - centre
        A, B, C = 2 * la * (d @ r), -2 * la * (d @ z), lr ** 2 - d @ d - la ** 2
        if not abs(C) < np.hypot(A, B):
            raise ValueError(f"height: the platform cannot reach {centre} (base at the "
                             f"origin) with arm {la} and rod {lr}")
        out[i] = np.arctan2(B, A) - np.arccos(C / np.hypot(A, B))
    return out
