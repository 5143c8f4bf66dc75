"""MuJoCo reference models for comparing rtrigid against MuJoCo.

This module builds, in MuJoCo, the same physical model that rtrigid
integrates for a single rigid body, either FREE (six degrees of freedom) or
PIVOTED (a ball joint holding one body point at a fixed world point), and
translates states between the two libraries.  It is meant for benchmarks
(time per step of MuJoCo's RK4 integrator) and for trajectory comparisons in
tests.

``mujoco`` is an optional dependency: it is imported only inside the
functions that need it, so importing this module never requires it.  Use
:func:`available` to find out whether it is installed.

rtrigid conventions (SI units, z up):

* a body frame sits at the centre of mass (CoM), its axes along the principal
  axes of inertia; ``inertia`` holds the principal moments about the CoM;
* ``p`` is a scalar-first Hamilton quaternion ``(w, x, y, z)`` that maps body
  axes to world axes (the same convention as MuJoCo's quaternions);
* ``x`` and ``v`` are the world position and world velocity of the CoM,
  ``omega_body`` is the angular velocity expressed in body axes;
* a pivoted body has its body point ``pivot_body`` (relative to the CoM, in
  body axes) fixed at the world point ``pivot_world``.

MuJoCo velocity conventions, checked numerically against MuJoCo 4.0.0 (one
explicit-Euler step of 1e-6 s without gravity from a random orientation, then
comparing finite differences of ``qpos`` with the candidate formulas; the
other candidate was off by O(1)):

* free joint: ``qpos = [origin of the body frame in world, quat]`` and
  ``qvel = [linear velocity of the body-frame origin in WORLD axes,
  angular velocity in BODY (local) axes]``; d(quat)/dt = q * (0, w) / 2;
* ball joint: ``qpos = quat`` relative to the parent (the world here, with an
  identity body ``quat``) and ``qvel`` = angular velocity in the joint's local
  frame, i.e. BODY axes; ``mj_objectVelocity`` in the local frame returns the
  same vector.

The tests in ``tests/references/test_mujoco_ref.py`` repeat these checks.
"""

from __future__ import annotations

import math
import time

import numpy as np

from rtrigid.references.mujoco_robots import servoed_on_floor  # noqa: F401

__all__ = [
    "available",
    "build_single_body",
    "set_state",
    "get_state",
    "energy",
    "step",
    "time_per_step",
    "gyro_top_state",
    "build_tree",
]

_INTEGRATORS = {
    "rk4": "RK4",
    "euler": "Euler",
    "implicit": "implicit",
    "implicitfast": "implicitfast",
}

_BODY = 1  # body 0 is the world; the single rigid body is body 1
_JOINT = 0  # its only joint


def available() -> bool:
    """Return True if the ``mujoco`` Python bindings can be imported."""
    try:
        import mujoco  # noqa: F401
    except ImportError:
        return False
    return True


def _mujoco():
    import mujoco

    return mujoco


def _num(value) -> str:
    """Format a float so that MuJoCo's parser reads back the identical double."""
    return repr(float(value))


def _vec(values) -> str:
    return " ".join(_num(v) for v in np.asarray(values, dtype=float).ravel())


def _as3(name, value) -> np.ndarray:
    arr = np.asarray(value, dtype=float).reshape(-1)
    if arr.shape != (3,):
        raise ValueError(f"{name} must have 3 components, got shape {np.shape(value)}")
    return arr


def _rotation(q) -> np.ndarray:
    """Rotation matrix of a (w, x, y, z) quaternion, normalised first."""
    w, x, y, z = np.asarray(q, dtype=float) / np.linalg.norm(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def build_single_body(
    mass,
    inertia,
    *,
    pivot_world=None,
    pivot_body=None,
    gravity=(0.0, 0.0, -9.81),
    dt=1e-3,
    integrator="RK4",
):
    """Build the MuJoCo model of one rigid body and return ``(model, data)``.

    Parameters
    ----------
    mass, inertia:
        Mass and the three principal moments of inertia about the CoM.
    pivot_world, pivot_body:
        ``None`` for a free body.  Otherwise the body point ``pivot_body``
        (relative to the CoM, in body axes; default the CoM itself) is held
        at the world point ``pivot_world`` by a ball joint.
    gravity:
        World gravity vector.
    dt:
        MuJoCo time step.
    integrator:
        ``"RK4"``, ``"Euler"``, ``"implicit"`` or ``"implicitfast"``
        (case-insensitive).

    The MuJoCo body frame is placed at the CoM for a free body and at the
    pivot for a pivoted body, with its axes along the rtrigid body axes; the
    inertial element gives the CoM offset (``-pivot_body``), the mass and the
    principal moments explicitly, so nothing is derived from geometry.  The
    model has no geoms, contacts are disabled, joints carry no damping,
    stiffness, armature or friction loss, and the medium (density, viscosity,
    wind) is empty.  The compiled model is checked for these properties.
    MuJoCo's automatic reset after a divergence is switched off as well, so
    an unstable run shows up as huge or NaN values instead of silently
    restarting from the initial state.
    """
    mujoco = _mujoco()

    key = str(integrator).lower()
    if key not in _INTEGRATORS:
        raise ValueError(
            f"unknown integrator {integrator!r}; expected one of "
            f"{sorted(_INTEGRATORS.values())}"
        )
    mass = float(mass)
    inertia = _as3("inertia", inertia)
    gravity = _as3("gravity", gravity)
    if not mass > 0.0:
        raise ValueError("mass must be positive")
    if not np.all(inertia > 0.0):
        raise ValueError("principal moments of inertia must be positive")
    if not float(dt) > 0.0:
        raise ValueError("dt must be positive")

    if pivot_world is None:
        if pivot_body is not None:
            raise ValueError("pivot_body given without pivot_world")
        body_pos = np.zeros(3)
        com_offset = np.zeros(3)
        joint = "<freejoint/>"
    else:
        body_pos = _as3("pivot_world", pivot_world)
        pb = np.zeros(3) if pivot_body is None else _as3("pivot_body", pivot_body)
        com_offset = -pb
        joint = (
            '<joint name="pivot" type="ball" pos="0 0 0" damping="0" '
            'stiffness="0" armature="0" frictionloss="0"/>'
        )

    xml = f"""<mujoco model="rtrigid_single_body">
  <compiler inertiafromgeom="false" balanceinertia="false" boundmass="0"
            boundinertia="0" alignfree="false" angle="radian"/>
  <option timestep="{_num(dt)}" integrator="{_INTEGRATORS[key]}"
          gravity="{_vec(gravity)}" density="0" viscosity="0" wind="0 0 0">
    <flag contact="disable" autoreset="disable"/>
  </option>
  <worldbody>
    <body name="body" pos="{_vec(body_pos)}" quat="1 0 0 0">
      {joint}
      <inertial pos="{_vec(com_offset)}" quat="1 0 0 0" mass="{_num(mass)}"
                diaginertia="{_vec(inertia)}"/>
    </body>
  </worldbody>
</mujoco>
"""
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)

    checks = [
        model.body_mass[_BODY] == mass,
        np.array_equal(model.body_inertia[_BODY], inertia),
        np.array_equal(model.body_ipos[_BODY], com_offset),
        np.array_equal(model.body_iquat[_BODY], [1.0, 0.0, 0.0, 0.0]),
        np.array_equal(model.body_pos[_BODY], body_pos),
        np.array_equal(model.body_quat[_BODY], [1.0, 0.0, 0.0, 0.0]),
        not np.any(model.dof_armature),
        not np.any(model.dof_damping),
        not np.any(model.dof_frictionloss),
        not np.any(model.jnt_stiffness),
        model.ngeom == 0,
        bool(model.opt.disableflags & int(mujoco.mjtDisableBit.mjDSBL_CONTACT)),
        bool(model.opt.disableflags & int(mujoco.mjtDisableBit.mjDSBL_AUTORESET)),
    ]
    if not all(checks):
        raise RuntimeError("MuJoCo compiled a model that differs from the request")
    mujoco.mj_forward(model, data)
    return model, data


def _is_free(model) -> bool:
    mujoco = _mujoco()
    jtype = int(model.jnt_type[_JOINT])
    if jtype == int(mujoco.mjtJoint.mjJNT_FREE):
        return True
    if jtype == int(mujoco.mjtJoint.mjJNT_BALL):
        return False
    raise ValueError("model was not built by build_single_body")


def _pivot(model):
    """World pivot point and CoM offset from the pivot (body axes)."""
    return np.array(model.body_pos[_BODY]), np.array(model.body_ipos[_BODY])


def set_state(model, data, *, x=None, p, v=None, omega_body):
    """Write an rtrigid state into ``data`` and call ``mj_forward``.

    ``x`` and ``v`` (CoM position and velocity in world axes) are required
    for a free body.  A pivoted body's state is fixed by ``p`` and
    ``omega_body`` alone; ``x`` and ``v`` may then be omitted, and if given
    they must agree with the pivot constraint (``ValueError`` otherwise).
    """
    mujoco = _mujoco()
    p = np.asarray(p, dtype=float).reshape(-1)
    if p.shape != (4,):
        raise ValueError("p must have 4 components (w, x, y, z)")
    omega_body = _as3("omega_body", omega_body)

    if _is_free(model):
        if x is None or v is None:
            raise ValueError("a free body needs x and v")
        data.qpos[0:3] = _as3("x", x)
        data.qpos[3:7] = p
        data.qvel[0:3] = _as3("v", v)
        data.qvel[3:6] = omega_body
    else:
        pivot_world, com_offset = _pivot(model)
        rot = _rotation(p)
        scale = max(1.0, float(np.linalg.norm(pivot_world)), float(np.linalg.norm(com_offset)))
        if x is not None:
            x_expected = pivot_world + rot @ com_offset
            if np.linalg.norm(_as3("x", x) - x_expected) > 1e-9 * scale:
                raise ValueError("x is inconsistent with the pivot constraint")
        if v is not None:
            v_expected = rot @ np.cross(omega_body, com_offset)
            vscale = max(1.0, float(np.linalg.norm(v_expected)))
            if np.linalg.norm(_as3("v", v) - v_expected) > 1e-9 * vscale * scale:
                raise ValueError("v is inconsistent with the pivot constraint")
        data.qpos[0:4] = p
        data.qvel[0:3] = omega_body
    mujoco.mj_forward(model, data)


def get_state(model, data) -> dict:
    """Read the rtrigid state from ``data`` (same conventions as set_state).

    The state is computed from ``qpos``/``qvel`` directly, so it is valid
    right after ``mj_step`` (whose derived quantities such as ``xipos`` refer
    to the start of the step).  Returns a dict with numpy arrays ``x``, ``p``,
    ``v`` and ``omega_body``.
    """
    if _is_free(model):
        return {
            "x": np.array(data.qpos[0:3]),
            "p": np.array(data.qpos[3:7]),
            "v": np.array(data.qvel[0:3]),
            "omega_body": np.array(data.qvel[3:6]),
        }
    pivot_world, com_offset = _pivot(model)
    p = np.array(data.qpos[0:4])
    omega_body = np.array(data.qvel[0:3])
    rot = _rotation(p)
    return {
        "x": pivot_world + rot @ com_offset,
        "p": p,
        "v": rot @ np.cross(omega_body, com_offset),
        "omega_body": omega_body,
    }


def energy(model, data) -> float:
    """Total energy ``m|v|^2/2 + Ω·IΩ/2 - m g·x`` evaluated from get_state.

    Computed here rather than by MuJoCo, so it does not depend on the
    ``energy`` enable flag.
    """
    state = get_state(model, data)
    mass = float(model.body_mass[_BODY])
    inertia = np.array(model.body_inertia[_BODY])
    gravity = np.array(model.opt.gravity)
    omega = state["omega_body"]
    kinetic = 0.5 * mass * float(state["v"] @ state["v"]) + 0.5 * float(
        omega @ (inertia * omega)
    )
    potential = -mass * float(gravity @ state["x"])
    return kinetic + potential


_NSTEP_SUPPORTED = None


def step(model, data, n) -> None:
    """Advance ``data`` by ``n`` MuJoCo steps."""
    global _NSTEP_SUPPORTED
    mujoco = _mujoco()
    n = int(n)
    if n < 0:
        raise ValueError("n must be non-negative")
    if n == 0:
        return
    if _NSTEP_SUPPORTED is None:
        doc = mujoco.mj_step.__doc__ or ""
        _NSTEP_SUPPORTED = "nstep" in doc
    if _NSTEP_SUPPORTED:
        mujoco.mj_step(model, data, nstep=n)
    else:
        for _ in range(n):
            mujoco.mj_step(model, data)


def time_per_step(model, data, n=10000, repeats=7) -> float:
    """Median wall-clock seconds per ``mj_step`` over ``repeats`` runs of n steps.

    Each run starts from the state ``data`` holds on entry (time, qpos, qvel
    and the rest of MuJoCo's integration state), and that state is restored
    again before returning.
    """
    mujoco = _mujoco()
    n = int(n)
    repeats = int(repeats)
    if n < 1 or repeats < 1:
        raise ValueError("n and repeats must be positive")
    sig = int(mujoco.mjtState.mjSTATE_INTEGRATION)
    saved = np.empty(mujoco.mj_stateSize(model, sig))
    mujoco.mj_getState(model, data, saved, sig)

    def restore():
        mujoco.mj_setState(model, data, saved, sig)
        mujoco.mj_forward(model, data)

    times = []
    try:
        for _ in range(repeats):
            restore()
            start = time.perf_counter()
            step(model, data, n)
            times.append((time.perf_counter() - start) / n)
    finally:
        restore()
    return float(np.median(times))


def gyro_top_state(
    rho=2700.0, height=0.1, radius=0.05, theta0=np.pi / 3, omega_p=10.0, g=9.81
) -> dict:
    """Heavy symmetric top in steady precession (paper 000, section 5.2).

    A solid cone of density ``rho``, height ``height`` and base radius
    ``radius`` spins about its tip, which is fixed at the world origin.  The
    CoM lies on the body z axis at ``L = 3 height / 4`` from the tip, so
    ``pivot_body = (0, 0, -L)`` and ``pivot_world = (0, 0, 0)``.  The body is
    tilted about the world x axis by ``theta0`` and given the angular velocity
    ``omega_p e3 + omega_s d3`` that makes it precess at rate ``omega_p``
    without nutation.

    Returns a dict with ``mass``, ``inertia`` (centroidal principal moments),
    ``pivot_body``, ``pivot_world``, ``gravity``, the initial state ``x``,
    ``p``, ``v``, ``omega_body``, the scalars ``L``, ``omega_s``,
    ``omega_p``, ``theta0``, and ``com_ref``: a function of time giving the
    exact CoM position (accepts a scalar or an array of times; for an array
    it returns one row per time).
    """
    mass = rho * math.pi * radius**2 * height / 3.0
    J1 = 3.0 * mass / 80.0 * (4.0 * radius**2 + height**2)
    J3 = 3.0 * mass * radius**2 / 10.0
    L = 0.75 * height
    J1p = J1 + mass * L**2

    # Steady precession condition (balance of the gravity torque M g L e3 x d3
    # with the rate of change omega_p e3 x (angular momentum about the tip)).
    omega_s = mass * g * L / (J3 * omega_p) + (J1p - J3) / J3 * omega_p * math.cos(theta0)

    p = np.array([math.cos(theta0 / 2.0), math.sin(theta0 / 2.0), 0.0, 0.0])
    rot = _rotation(p)
    d3 = rot[:, 2]
    omega_world = omega_p * np.array([0.0, 0.0, 1.0]) + omega_s * d3
    x = L * d3
    v = np.cross(omega_world, x)

    # The rotation by theta0 about e1 takes e3 to d3 = (0, -sin θ0, cos θ0),
    # so at t = 0 the CoM is at L (0, -sin θ0, cos θ0).  Steady precession
    # turns d3 about e3 at the positive rate omega_p, which gives the paper's
    # formula  L sinθ0 sin(ωp t) e1 - L sinθ0 cos(ωp t) e2 + L cosθ0 e3;
    # it agrees with this initial state, so no sign change is needed.
    s0 = L * math.sin(theta0)
    z0 = L * math.cos(theta0)

    def com_ref(t):
        t_arr = np.asarray(t, dtype=float)
        out = np.stack(
            [
                s0 * np.sin(omega_p * t_arr),
                -s0 * np.cos(omega_p * t_arr),
                np.full_like(t_arr, z0),
            ],
            axis=-1,
        )
        return out

    return {
        "mass": mass,
        "inertia": np.array([J1, J1, J3]),
        "pivot_body": np.array([0.0, 0.0, -L]),
        "pivot_world": np.zeros(3),
        "gravity": np.array([0.0, 0.0, -g]),
        "x": x,
        "p": p,
        "v": v,
        "omega_body": rot.T @ omega_world,
        "L": L,
        "omega_s": omega_s,
        "omega_p": float(omega_p),
        "theta0": float(theta0),
        "com_ref": com_ref,
    }


def build_chain(n, link_length, link_mass, inertia, *, joint="ball", axis=(1.0, 0.0, 0.0),
                gravity=(0.0, 0.0, -9.81), dt=1e-4, integrator="RK4"):
    """MuJoCo model of the ``chain`` scenario: n rods hanging along -z from the world origin.

    Body i's frame sits at its upper joint (body i-1's lower end), axes along rtrigid's link
    axes; the inertial element puts the centre of mass at (0, 0, -L/2) with the principal
    moments ``inertia``.  ``joint``: "ball" or "hinge" (about ``axis``, body frame).  No
    geoms, no contacts, no damping or armature.  Returns ``(model, data)``.
    """
    mujoco = _mujoco()
    key = str(integrator).lower()
    if key not in _INTEGRATORS:
        raise ValueError(f"integrator: unknown {integrator!r}")
    if joint not in ("ball", "hinge"):
        raise ValueError(f"joint: expected 'ball' or 'hinge', got {joint!r}")
    length = float(link_length)
    extra = f'axis="{_vec(axis)}"' if joint == "hinge" else ""
    body = ""
    for i in range(int(n) - 1, -1, -1):
        pos = "0 0 0" if i == 0 else f"0 0 {_num(-length)}"
        body = f"""<body name="link{i}" pos="{pos}" quat="1 0 0 0">
      <joint name="j{i}" type="{joint}" pos="0 0 0" {extra} damping="0" stiffness="0"
             armature="0" frictionloss="0"/>
      <inertial pos="0 0 {_num(-length / 2)}" quat="1 0 0 0" mass="{_num(link_mass)}"
                diaginertia="{_vec(inertia)}"/>
      {body}
    </body>"""
    xml = f"""<mujoco model="rtrigid_chain">
  <compiler inertiafromgeom="false" balanceinertia="false" boundmass="0" boundinertia="0"
            angle="radian"/>
  <option timestep="{_num(dt)}" integrator="{_INTEGRATORS[key]}" gravity="{_vec(gravity)}"
          density="0" viscosity="0" wind="0 0 0">
    <flag contact="disable" autoreset="disable"/>
  </option>
  <worldbody>
    {body}
  </worldbody>
</mujoco>
"""
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    if model.nbody != int(n) + 1 or np.any(model.dof_damping) or np.any(model.dof_armature):
        raise RuntimeError("MuJoCo compiled a chain that differs from the request")
    mujoco.mj_forward(model, data)
    return model, data


def chain_link_tips(model, data, link_length):
    """World positions (n, 3) of every link's lower end."""
    mujoco = _mujoco()
    mujoco.mj_kinematics(model, data)
    tips = []
    for b in range(1, model.nbody):
        R = np.array(data.xmat[b]).reshape(3, 3)
        tips.append(np.array(data.xpos[b]) + R @ np.array([0.0, 0.0, -float(link_length)]))
    return np.array(tips)


def chain_energy(model, data):
    """Kinetic plus gravitational energy, from MuJoCo's body velocities (no energy flag)."""
    mujoco = _mujoco()
    mujoco.mj_forward(model, data)
    total = 0.0
    g = np.array(model.opt.gravity)
    vel = np.zeros(6)
    for b in range(1, model.nbody):
        m = float(model.body_mass[b])
        mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_BODY, b, vel, 0)
        R = np.array(data.xmat[b]).reshape(3, 3)
        com = np.array(data.xipos[b])
        # a body's object velocity is taken at its centre of mass (xipos), world axes
        w, v_com = vel[:3], vel[3:]
        wb = R.T @ w
        total += 0.5 * m * v_com @ v_com + 0.5 * wb @ (np.array(model.body_inertia[b]) * wb)
        total -= m * g @ com
    return float(total)


_TREE_JOINTS = {"revolute": "hinge", "prismatic": "slide", "spherical": "ball"}


def _actuator_xml(model, a):
    """One rtrigid actuator as a MuJoCo actuator element (the same force law)."""
    tag = {"motor": "motor", "position": "position", "velocity": "velocity"}[a.kind]
    gains = {"motor": "", "position": f' kp="{_num(a.kp)}" kv="{_num(a.kv)}"',
             "velocity": f' kv="{_num(a.kv)}"'}[a.kind]
    limits = ""
    if np.all(np.isfinite(a.force_range)):
        limits += f' forcelimited="true" forcerange="{_vec(a.force_range)}"'
    if np.all(np.isfinite(a.ctrl_range)):
        limits += f' ctrllimited="true" ctrlrange="{_vec(a.ctrl_range)}"'
    else:
        limits += ' ctrllimited="false"'
    return (f'    <{tag} name="{a.name}" joint="{model.joints[a.joint].name}" '
            f'gear="{_num(a.gear)}"{gains}{limits}/>\n')


LOOP_PIN_SPREAD = 0.05  # m: a revolute loop joint's two connect points sit this far each side


def _loop_equalities(model):
    """({body index (-1: the world): [site elements]}, equality elements) of the model's loop
    joints (see :func:`build_tree`)."""
    from rtrigid.joints import geometry

    sites, equality = {}, ""
    for j in getattr(model, "loop_joints", []):
        g = geometry(j)
        if j.kind == "spherical":
            offsets = [(np.zeros(3), np.zeros(3))]
        elif j.kind == "revolute":
            offsets = [(sign * LOOP_PIN_SPREAD * g.axis_parent,
                        sign * LOOP_PIN_SPREAD * g.axis_child) for sign in (1.0, -1.0)]
        else:
            raise ValueError(f"model: loop joint {j.name!r} is {j.kind}; build_tree closes "
                             "spherical and revolute loops")
        for k, (op, oc) in enumerate(offsets):
            for body, point, side in ((j.parent, g.anchor_parent + op, "p"),
                                      (j.child, g.anchor_child + oc, "c")):
                sites.setdefault(body, []).append(
                    f'<site name="{j.name}_{side}{k}" pos="{_vec(point)}"/>')
            equality += f'    <connect site1="{j.name}_p{k}" site2="{j.name}_c{k}"/>\n'
    return sites, equality


def build_tree(model, *, dt=1e-3, integrator="RK4", contacts=False):
    """MuJoCo model of an rtrigid :class:`~rtrigid.model.Model` whose joints are revolute,
    prismatic, spherical or fixed and whose other bodies are free or attached to the world.

    Each MuJoCo body frame is the rtrigid body frame (centre of mass, principal axes: the
    inertial element sits at its origin).  A jointed body is placed in its parent's frame at
    zero joint coordinates: orientation r0 (the joint's relative rotation there, see
    :mod:`rtrigid.joints`), origin a_P - R(r0) a_C; its hinge or slide is at a_C along u_C
    (child axes), its ball at a_C, so the joint point and axis are the same; joint springs
    (stiffness, springref = rest) and dampers carry over.  Joint coordinates and rates are
    then MuJoCo's qpos / qvel entries (a ball's and a free body's conventions are those of
    the module docstring).  Point-to-point springs have no counterpart here and are refused.

    Returns ``(model, data, qadr, vadr)``: for the rtrigid joint handles in order (the
    model's joints, then pivots and free bodies in body order, as ``Simulation.joint_names``)
    the MuJoCo qpos and qvel addresses of each joint's entries, so that
    ``data.qpos[qadr] = sim.qpos()`` and ``data.qvel[vadr] = sim.qvel()``.  The model's
    actuators become MuJoCo's motor, position and velocity actuators in the same order, so
    ``data.ctrl[:] = sim.controls()``.  Loop joints (``Model.add_loop_joint``) become
    MuJoCo equality constraints between sites at their anchors (soft, MuJoCo's default
    solref): a spherical one a ``connect``, a revolute one two ``connect`` a tenth of a
    metre apart along its axis.

    ``contacts``: also each colliding body's sphere, capsule or box (at its offset, friction
    ``mu 0.005 0.0001``) and each ground as a plane, with MuJoCo's contacts on (its default
    soft contacts; parent and child do not collide, as in rtrigid).  Other shapes and tilted
    grounds are refused.
    """
    from rtrigid.joints import geometry

    mujoco = _mujoco()
    key = str(integrator).lower()
    if key not in _INTEGRATORS:
        raise ValueError(f"integrator: unknown {integrator!r}")
    if model.springs:
        raise ValueError("model: point-to-point springs have no MuJoCo counterpart here")
    inbound = model.inbound_joints()
    for j in inbound:
        if j.kind not in _TREE_JOINTS and j.kind not in ("fixed", "free"):
            raise ValueError(f"model: joint {j.name!r} is {j.kind}; build_tree takes "
                             "revolute, prismatic, spherical, fixed and free ones")
    children = {}
    for b, j in enumerate(inbound):
        children.setdefault(j.parent, []).append(b)
    sites, equality = _loop_equalities(model)

    def body_xml(b, indent):
        j, g = inbound[b], geometry(inbound[b])
        body = model.bodies[b]
        r0 = g.r0
        origin = g.anchor_parent - _rotation(r0) @ g.anchor_child
        if j.kind == "free":
            origin, r0 = np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0])
            joint = f'<freejoint name="{j.name}"/>'
        elif j.kind == "fixed":
            joint = ""
        else:
            axis = f' axis="{_vec(g.axis_child)}"' if j.kind != "spherical" else ""
            joint = (f'<joint name="{j.name}" type="{_TREE_JOINTS[j.kind]}" '
                     f'pos="{_vec(g.anchor_child)}"{axis} stiffness="{_num(j.stiffness)}" '
                     f'springref="{_num(j.rest)}" damping="{_num(j.damping)}" armature="0" '
                     'frictionloss="0"/>')
        pad = " " * indent
        inner = "".join(body_xml(c, indent + 2) for c in children.get(b, []))
        if contacts:
            inner = _geom_xml(body, pad + "  ") + inner
        return (f'{pad}<body name="{body.name}" pos="{_vec(origin)}" quat="{_vec(r0)}">\n'
                f"{pad}  {joint}\n" + "".join(f"{pad}  {x}\n" for x in sites.get(b, [])) +
                f'{pad}  <inertial pos="0 0 0" quat="1 0 0 0" mass="{_num(body.mass)}" '
                f'diaginertia="{_vec(body.inertia)}"/>\n{inner}{pad}</body>\n')

    tree = "".join(f"    {x}\n" for x in sites.get(-1, []))
    if contacts:
        for g in model.grounds:
            if not np.allclose(g.normal, (0.0, 0.0, 1.0)):
                raise ValueError("model: only grounds facing up (+z) have a MuJoCo plane here")
            tree += (f'    <geom type="plane" pos="0 0 {_num(g.height)}" size="50 50 0.1" '
                     f'friction="{_num(g.friction)} 0.005 0.0001"/>\n')
    tree += "".join(body_xml(b, 4) for b in children.get(-1, []))
    actuators = "".join(_actuator_xml(model, a) for a in getattr(model, "actuators", []))
    xml = f"""<mujoco model="rtrigid_tree">
  <compiler inertiafromgeom="false" balanceinertia="false" boundmass="0" boundinertia="0"
            alignfree="false" angle="radian"/>
  <option timestep="{_num(dt)}" integrator="{_INTEGRATORS[key]}"
          gravity="{_vec(model.gravity)}" density="0" viscosity="0" wind="0 0 0">
    <flag contact="{'enable' if contacts else 'disable'}" autoreset="disable"/>
  </option>
  <worldbody>
{tree}  </worldbody>
  <equality>
{equality}  </equality>
  <actuator>
{actuators}  </actuator>
</mujoco>
"""
    mjm = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(mjm)
    if mjm.nbody != len(model.bodies) + 1 or np.any(mjm.dof_armature):
        raise RuntimeError("MuJoCo compiled a tree that differs from the request")
    explicit = {j.child for j in model.joints}
    handles = [j.child for j in model.joints] + [b for b in range(len(model.bodies))
                                                 if b not in explicit]
    qadr, vadr = [], []
    sizes = {"free": (7, 6), "spherical": (4, 3), "revolute": (1, 1), "prismatic": (1, 1),
             "fixed": (0, 0)}
    for b in handles:
        j = inbound[b]
        nq, nv = sizes[j.kind]
        if nq == 0:
            continue
        jid = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_JOINT, j.name)
        qadr.extend(range(mjm.jnt_qposadr[jid], mjm.jnt_qposadr[jid] + nq))
        vadr.extend(range(mjm.jnt_dofadr[jid], mjm.jnt_dofadr[jid] + nv))
    mujoco.mj_forward(mjm, data)
    return mjm, data, np.array(qadr, np.intp), np.array(vadr, np.intp)


def _geom_xml(body, pad):
    """A body's collision shape as a MuJoCo geom ("" without one)."""
    shape = body.shape
    if shape is None or not body.collide:
        return ""
    p = shape.params
    sizes = {"sphere": lambda: [p["radius"]],
             "capsule": lambda: [p["radius"], p["half_length"]],
             "box": lambda: list(p["half_extents"])}
    if shape.kind not in sizes:
        raise ValueError(f"model: body {body.name!r}'s {shape.kind} has no MuJoCo geom here")
    return (f'{pad}<geom type="{shape.kind}" size="{_vec(sizes[shape.kind]())}" '
            f'pos="{_vec(shape.offset)}" friction="{_num(body.friction)} 0.005 0.0001"/>\n')


def load_file(path, *, dt=1e-4, floating_base=False, integrator="RK4", fusestatic=True):
    """MuJoCo's model of a URDF or MJCF file, set to compare with :func:`rtrigid.load_model`.

    Like with like: for URDF, geoms and meshes are deleted (rtrigid has no contacts, and the
    inertias come from the files' ``<inertial>`` only, as rtrigid reads them:
    ``inertiafromgeom`` is off; MJCF keeps its geoms, whose inertias rtrigid takes); contacts,
    joint limits, friction loss and equality constraints (URDF ``mimic``) are disabled and
    armature is zeroed.  Joint damping and stiffness and the actuators (at their controls,
    0 to begin with) stay: both libraries simulate them.  With ``floating_base`` the root body gets a free joint;
    ``fusestatic=False`` keeps every link a body (for their poses).
    Returns ``(model, data)``.
    """
    mujoco = _mujoco()
    key = str(integrator).lower()
    if key not in _INTEGRATORS:
        raise ValueError(f"integrator: unknown {integrator!r}")
    spec = mujoco.MjSpec.from_file(str(path))
    spec.compiler.fusestatic = fusestatic
    if str(path).endswith(".urdf"):
        spec.compiler.inertiafromgeom = mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_FALSE
        for g in list(spec.geoms) + list(spec.meshes):
            spec.delete(g)
    if floating_base:
        spec.worldbody.first_body().add_freejoint()
    model = spec.compile()
    model.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{_INTEGRATORS[key].upper()}")
    model.opt.timestep = dt
    off = mujoco.mjtDisableBit
    model.opt.disableflags |= (off.mjDSBL_CONTACT | off.mjDSBL_LIMIT | off.mjDSBL_FRICTIONLOSS
                               | off.mjDSBL_EQUALITY)
    model.dof_armature[:] = 0.0
    return model, mujoco.MjData(model)


def _on_plane(dt, body_xml):
    """(model, data) of ``body_xml`` over a plane whose own friction is 0 (MuJoCo takes the
    larger per pair), condim 6, elliptic cones (the round cone, as rtrigid's), gravity 9.81
    down."""
    mujoco = _mujoco()
    xml = (f'<mujoco><option timestep="{_num(dt)}" cone="elliptic" gravity="0 0 -9.81"/>'
           f'<worldbody><geom type="plane" size="5 5 0.1" condim="6" friction="0 0 0"/>'
           f"{body_xml}</worldbody></mujoco>")
    model = mujoco.MjModel.from_xml_string(xml)
    return model, mujoco.MjData(model)


def rolling_ball(radius, mass, friction, torsional, rolling, *, dt=1e-3, settle=200):
    """A solid ball (I = 2/5 m r^2) resting on a plane, every contact condim 6 with the
    friction (sliding, torsional, rolling) given on the ball (the plane's are 0; MuJoCo takes
    the larger per pair), elliptic cones (the round cone, as rtrigid's), gravity 9.81 down.
    Returns (model, data) after ``settle`` steps at rest (its soft contact sinks in first);
    set ``data.qvel`` to roll or spin it."""
    ball = (f'<body pos="0 0 {_num(radius)}"><freejoint/><geom type="sphere" '
            f'size="{_num(radius)}" mass="{_num(mass)}" condim="6" '
            f'friction="{_num(friction)} {_num(torsional)} {_num(rolling)}"/></body>')
    model, data = _on_plane(dt, ball)
    step(model, data, settle)
    data.qvel[:] = 0.0
    return model, data


def euler_disk(sim, *, friction=0.3, rolling=3e-4, dt=None):
    """MuJoCo's twin of the ``euler_disk`` scenario's ``sim`` (its disc's mass, inertia and
    cylinder, its current pose and velocities): a free cylinder on a plane, MuJoCo's own
    cylinder-plane collision, condim 6 with ``friction`` sliding and ``rolling`` rolling
    friction (m) on the disc, elliptic cones, gravity 9.81 down, ``dt`` (default the sim's).
    Returns (model, data)."""
    mujoco = _mujoco()
    body = next(b for b in sim.model.bodies if b.name == "disk")
    r, hl = body.shape.params["radius"], body.shape.params["half_length"]
    inertia = np.asarray(body.inertia, float)
    dt = sim.dt if dt is None else dt
    disk = (f'<body><freejoint/><inertial pos="0 0 0" mass="{_num(body.mass)}" '
            f'diaginertia="{_vec(inertia)}"/><geom type="cylinder" size="{_num(r)} {_num(hl)}" '
            f'condim="6" friction="{_num(friction)} 0 {_num(rolling)}"/></body>')
    model, data = _on_plane(dt, disk)
    x, q = sim.pose("disk")
    v, w = sim.velocity("disk", frame="body")
    data.qpos[:3], data.qpos[3:7] = x, q
    data.qvel[:3], data.qvel[3:6] = v, w
    mujoco.mj_forward(model, data)
    return model, data
