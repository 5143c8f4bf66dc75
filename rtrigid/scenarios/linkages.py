"""Closed loops: planar linkages in the x-z plane, joint axes along -y, so a joint angle turns
the x axis towards +z (counter-clockwise seen from -y); Bennett's spatial linkage and the
delta robot."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rtrigid.maths import quat
from rtrigid.model import Model
from rtrigid.scenarios.registry import info, scenario
from rtrigid.simulation import Simulation
from rtrigid.validate import as_scalar


_PLANE_AXIS = (0.0, -1.0, 0.0)


def _link(m: Model, name: str, mass: float, length: float, radius: float = 0.01) -> int:
    """A slender rod along its body x axis (capsule), centre of mass at its middle."""
    return m.add_body(
        name,
        mass,
        (0.5 * mass * radius**2, *(mass * length**2 / 12.0,) * 2),
        shape=("capsule", {"radius": radius, "half_length": length / 2}),
    )


def four_bar_angles(
    theta: float, crank: float, coupler: float, rocker: float, ground: float
) -> tuple[float, float]:
    """(coupler angle, rocker angle), absolute, of the open four-bar at crank angle
    ``theta`` (ground pivots at (0, 0) and (ground, 0) of the x-z plane)."""
    ax, az = crank * np.cos(theta), crank * np.sin(theta)
    ex, ez = ground - ax, -az
    span = np.hypot(ex, ez)
    along = (coupler**2 - rocker**2 + span**2) / (2.0 * span)
    h = np.sqrt(max(coupler**2 - along**2, 0.0))
    bx = ax + (along * ex - h * ez) / span
    bz = az + (along * ez + h * ex) / span
    return np.arctan2(bz - az, bx - ax), np.arctan2(bz, bx - ground)


@scenario(dt=1.0 / 240.0, t_end=5.0, integrator="nullspace_rk4")
def four_bar(
    integrator: str = "nullspace_rk4",
    dt: float = 1.0 / 240.0,
    options: dict[str, Any] | None = None,
    crank: float = 0.1,
    coupler: float = 0.35,
    rocker: float = 0.3,
    ground: float = 0.4,
    flywheel_mass: float = 2.0,
    flywheel_radius: float = 0.08,
    theta0: float = 0.5,
    omega0: float = 8.0,
) -> Simulation:
    """Grashof crank-rocker four-bar with a flywheel on the crank, in a vertical plane.

    Link lengths (m) ``crank`` (the shortest: it turns fully), ``coupler``, ``rocker`` and
    ``ground`` (the pivots' distance) must satisfy Grashof's s + l < p + q; rods of 1 kg/m.
    The crank carries a disc (``flywheel_mass``, ``flywheel_radius``) centred on its pivot.
    Three revolute joints form the tree (crank and rocker to the world, coupler on the
    crank); the coupler-rocker pin is a loop joint, five spatial rows of rank two.  Starts
    at crank angle ``theta0`` turning at ``omega0`` rad/s.
    """
    lengths = {
        k: as_scalar(v, k, positive=True)
        for k, v in (("crank", crank), ("coupler", coupler), ("rocker", rocker), ("ground", ground))
    }
    s, l = min(lengths.values()), max(lengths.values())
    if lengths["crank"] != s or not s + l < sum(lengths.values()) - s - l:
        raise ValueError(
            f"crank: a crank-rocker needs the crank shortest and s + l < p + q "
            f"(Grashof); got {lengths}"
        )
    a, b, c, d = (lengths[k] for k in ("crank", "coupler", "rocker", "ground"))
    mf = as_scalar(flywheel_mass, "flywheel_mass", positive=True)
    rf = as_scalar(flywheel_radius, "flywheel_radius", positive=True)
    theta = as_scalar(theta0, "theta0")
    phi, psi = four_bar_angles(theta, a, b, c, d)
    m = Model()
    m.add_body(
        "crank",
        mf,
        (0.25 * mf * rf**2, 0.5 * mf * rf**2, 0.25 * mf * rf**2),
        shape=("cylinder", {"radius": rf, "half_length": 0.01}),
    )
    _link(m, "coupler", b, b)
    _link(m, "rocker", c, c)
    m.add_joint("revolute", None, "crank", axis_parent=_PLANE_AXIS, name="crank", position=theta)
    m.add_joint(
        "revolute",
        "crank",
        "coupler",
        anchor_parent=(a, 0.0, 0.0),
        anchor_child=(-b / 2, 0.0, 0.0),
        axis_parent=_PLANE_AXIS,
        name="coupler",
        position=phi - theta,
    )
    m.add_joint(
        "revolute",
        None,
        "rocker",
        anchor_parent=(d, 0.0, 0.0),
        anchor_child=(-c / 2, 0.0, 0.0),
        axis_parent=_PLANE_AXIS,
        name="rocker",
        position=psi,
    )
    m.add_loop_joint(
        "revolute",
        "coupler",
        "rocker",
        anchor_parent=(b / 2, 0.0, 0.0),
        anchor_child=(c / 2, 0.0, 0.0),
        axis_parent=_PLANE_AXIS,
        name="pin",
    )
    sim = Simulation(m, integrator, dt, options=options)
    sim.set_joint_velocity("crank", [as_scalar(omega0, "omega0")])
    info(sim)["conserved"] = []
    return sim


@scenario(dt=1.0 / 240.0, t_end=5.0, integrator="nullspace_rk4")
def slider_crank(
    integrator: str = "nullspace_rk4",
    dt: float = 1.0 / 240.0,
    options: dict[str, Any] | None = None,
    crank: float = 0.1,
    rod: float = 0.3,
    slider_mass: float = 0.5,
    flywheel_mass: float = 2.0,
    flywheel_radius: float = 0.08,
    theta0: float = 0.3,
    omega0: float = 10.0,
) -> Simulation:
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
    bx = a * np.cos(theta) + np.sqrt(r**2 - (a * np.sin(theta)) ** 2)
    phi = np.arctan2(-a * np.sin(theta), bx - a * np.cos(theta))
    m = Model()
    m.add_body(
        "crank",
        mf,
        (0.25 * mf * rf**2, 0.5 * mf * rf**2, 0.25 * mf * rf**2),
        shape=("cylinder", {"radius": rf, "half_length": 0.01}),
    )
    _link(m, "rod", r, r)
    m.add_body(
        "slider",
        ms,
        (ms * 0.002, ms * 0.002, ms * 0.002),
        shape=("box", {"half_extents": (0.04, 0.03, 0.025)}),
    )
    m.add_joint("revolute", None, "crank", axis_parent=_PLANE_AXIS, name="crank", position=theta)
    m.add_joint(
        "revolute",
        "crank",
        "rod",
        anchor_parent=(a, 0.0, 0.0),
        anchor_child=(-r / 2, 0.0, 0.0),
        axis_parent=_PLANE_AXIS,
        name="rod",
        position=phi - theta,
    )
    m.add_joint("prismatic", None, "slider", axis_parent=(1.0, 0.0, 0.0), name="slide", position=bx)
    m.add_loop_joint(
        "revolute",
        "rod",
        "slider",
        anchor_parent=(r / 2, 0.0, 0.0),
        axis_parent=_PLANE_AXIS,
        name="pin",
    )
    sim = Simulation(m, integrator, dt, options=options)
    sim.set_joint_velocity("crank", [as_scalar(omega0, "omega0")])
    info(sim)["conserved"] = []
    return sim


def bennett_theta2(theta1: float, alpha: float, beta: float) -> float:
    """The Bennett linkage's second joint angle at first angle ``theta1`` (the closure
    tan(theta1/2) tan(theta2/2) = sin((beta+alpha)/2) / sin((beta-alpha)/2); theta3 =
    -theta1, theta4 = -theta2 in the Denavit-Hartenberg angles of :func:`bennett`)."""
    k = np.sin((beta + alpha) / 2.0) / np.sin((beta - alpha) / 2.0)
    return 2.0 * np.arctan2(k, np.tan(theta1 / 2.0))


@scenario(dt=1.0 / 240.0, t_end=5.0, integrator="nullspace_rk4")
def bennett(
    integrator: str = "nullspace_rk4",
    dt: float = 1.0 / 240.0,
    options: dict[str, Any] | None = None,
    length: float = 0.3,
    alpha: float = 50.0,
    beta: float = 80.0,
    theta0: float = 1.0,
    omega0: float = 2.0,
    gravity: bool = True,
) -> Simulation:
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
        raise ValueError(
            f"alpha: the twists must lie in (0, 180) degrees and differ, got {alpha}, {beta}"
        )
    b = a * np.sin(be) / np.sin(al)
    th1 = as_scalar(theta0, "theta0")
    th2 = bennett_theta2(th1, al, be)
    m = Model() if gravity else Model(gravity=(0.0, 0.0, 0.0))
    links = ((a, al), (b, be), (a, al))
    for i, (ln, _) in enumerate(links):
        _link(m, f"link{i + 1}", ln, ln)
    axis = lambda tw: (0.0, -np.sin(tw), np.cos(tw))  # noqa: E731 (next joint's axis)
    m.add_joint(
        "revolute",
        None,
        "link1",
        anchor_child=(-a / 2, 0.0, 0.0),
        axis_parent=(0.0, 0.0, 1.0),
        name="joint1",
        position=th1,
    )
    for i, th in ((1, th2), (2, -th1)):
        ln, tw = links[i - 1]
        m.add_joint(
            "revolute",
            f"link{i}",
            f"link{i + 1}",
            anchor_parent=(ln / 2, 0.0, 0.0),
            anchor_child=(-links[i][0] / 2, 0.0, 0.0),
            axis_parent=axis(tw),
            axis_child=(0.0, 0.0, 1.0),
            name=f"joint{i + 1}",
            position=th,
        )
    m.add_loop_joint(
        "revolute",
        None,
        "link3",
        anchor_parent=(-b, 0.0, 0.0),
        anchor_child=(a / 2, 0.0, 0.0),
        axis_parent=(0.0, np.sin(be), np.cos(be)),
        axis_child=axis(al),
        name="joint4",
    )
    sim = Simulation(m, integrator, dt, options=options)
    sim.set_joint_velocity("joint1", [as_scalar(omega0, "omega0")])
    info(sim)["conserved"] = []
    return sim


def _turn(axis: ArrayLike, angle: float) -> NDArray[np.float64]:
    """Unit quaternion of a turn by ``angle`` about the unit vector ``axis``."""
    return np.array([np.cos(angle / 2), *(np.sin(angle / 2) * np.asarray(axis, float))])


def _arc(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
    """Unit quaternion of the smallest turn of unit vector a onto b."""
    q = np.array([1.0 + a @ b, *np.cross(a, b)])
    return q / np.linalg.norm(q)


@scenario(dt=1.0 / 240.0, t_end=3.0, integrator="nullspace_rk4")
def delta_robot(
    integrator: str = "nullspace_rk4",
    dt: float = 1.0 / 240.0,
    options: dict[str, Any] | None = None,
    base_radius: float = 0.2,
    platform_radius: float = 0.05,
    arm: float = 0.2,
    rod: float = 0.45,
    spacing: float = 0.06,
    height: float = 0.4,
    kp: float | None = None,
    kv: float | None = None,
) -> Simulation:
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
    rb, rp, la, lr, w, hz = (
        as_scalar(v, k, positive=True)
        for k, v in (
            ("base_radius", base_radius),
            ("platform_radius", platform_radius),
            ("arm", arm),
            ("rod", rod),
            ("spacing", spacing),
            ("height", height),
        )
    )
    if kp is None and kv is not None:
        raise ValueError("kv: the arms' servos need kp as well")
    centre = np.array([0.0, 0.0, -hz])
    thetas = delta_robot_arm_angles(centre, rb, rp, la, lr)
    z = np.array([0.0, 0.0, 1.0])
    m = Model()
    m.add_body(
        "platform",
        0.3,
        (0.25 * 0.3 * rp**2, 0.25 * 0.3 * rp**2, 0.5 * 0.3 * rp**2),
        shape=("cylinder", {"radius": rp, "half_length": 0.01}),
    )
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
        m.add_joint(
            "revolute",
            None,
            f"arm{i}",
            anchor_parent=rb * r,
            anchor_child=(-la / 2, 0.0, 0.0),
            axis_parent=t,
            axis_child=(0, 1, 0),
            name=f"arm{i}",
            position=theta,
        )
        for k, side in enumerate((1.0, -1.0)):
            name = f"rod{i}{'ab'[k]}"
            rods.append(_link(m, name, 0.05, lr, radius=0.005))
            m.add_joint(
                "spherical",
                f"arm{i}",
                name,
                anchor_parent=(la / 2, side * w / 2, 0.0),
                anchor_child=(-lr / 2, 0.0, 0.0),
                name=name,
                position=quat.mul(quat.conj(q_arm), q_rod),
            )
            at_platform = rp * r + side * w / 2 * t
            if i == 0 and k == 0:
                m.add_joint(
                    "spherical",
                    name,
                    "platform",
                    anchor_parent=(lr / 2, 0.0, 0.0),
                    anchor_child=at_platform,
                    name="platform",
                    position=quat.conj(q_rod),
                )
            else:
                m.add_loop_joint(
                    "spherical",
                    name,
                    "platform",
                    anchor_parent=(lr / 2, 0.0, 0.0),
                    anchor_child=at_platform,
                    name=f"ball{i}{'ab'[k]}",
                )
    if kp is not None:
        for i in range(3):
            m.add_actuator(
                f"arm{i}",
                "position",
                kp=as_scalar(kp, "kp", positive=True),
                kv=0.0 if kv is None else as_scalar(kv, "kv"),
                name=f"arm{i}",
            )
    sim = Simulation(m, integrator, dt, options=options)
    if kp is not None:
        sim.set_controls(thetas)
    info(sim)["conserved"] = []
    return sim


def delta_robot_arm_angles(
    centre: ArrayLike,
    base_radius: float = 0.2,
    platform_radius: float = 0.05,
    arm: float = 0.2,
    rod: float = 0.45,
) -> NDArray[np.float64]:
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
        A, B, C = 2 * la * (d @ r), -2 * la * (d @ z), lr**2 - d @ d - la**2
        if not abs(C) < np.hypot(A, B):
            raise ValueError(
                f"height: the platform cannot reach {centre} (base at the "
                f"origin) with arm {la} and rod {lr}"
            )
        out[i] = np.arctan2(B, A) - np.arccos(C / np.hypot(A, B))
    return out
