"""MJCF as MuJoCo reads it: the file compiled by MuJoCo, the compiled model converted.

MuJoCo's own compiler (``mujoco.MjSpec``) reads the file -- includes, default classes,
``fromto``, global coordinates, joint ``ref``, inertias from geoms, mesh assets -- and the
compiled ``MjModel`` is what is converted, so there is one reading of the file, MuJoCo's:

- bodies: ``body_mass``, ``body_ipos``/``body_iquat``/``body_inertia`` (the inertia at the
  centre of mass on principal axes), the tree of ``body_parentid`` with each body's frame
  ``body_pos``/``body_quat`` in its parent's at ``qpos0``;
- joints (hinge, slide, ball, free): anchor and axis in the body frame, range where limited,
  damping, stiffness, springref, armature; several joints in one body become a chain of
  massless links, composed as MuJoCo composes them.  A joint's ``ref`` (MuJoCo's ``qpos0``)
  is kept by taking rtrigid's zero where MuJoCo's coordinate is zero: the coordinates are
  then MuJoCo's own (limits, springref and actuator targets unchanged) and start at ``ref``;
- actuators on joints whose gain and bias are those of a motor, a position or a velocity
  servo (``general`` ones too), with ctrlrange and forcerange;
- ``connect`` equality constraints between bodies: spherical loop joints, and ``joint``
  equalities with a linear polynomial: joint couplings (:meth:`rtrigid.Model.add_coupling`;
  both held exactly where MuJoCo's are soft: reported approximated);
- the file's gravity and, where ``<option timestep>`` is given, its time step;
- the sensors a simulation query reads (joint position and velocity, accelerometer and gyro
  through :meth:`Simulation.imu`, force and torque through :meth:`Simulation.joint_reaction`).

Geoms: :mod:`rtrigid.loaders.geoms`.  Everything else met is listed in ``model.load_report``
(:mod:`rtrigid.loaders.report`) as approximated or ignored with ``file:line`` (found by
:class:`rtrigid.loaders._xml.ElementIndex`), and warned about once per kind.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import numpy as np

from rtrigid.loaders import geoms as geom_loader
from rtrigid.loaders._xml import ElementIndex
from rtrigid.loaders.assemble import JointSpec, Link, build, compose, quat_matrix
from rtrigid.loaders.report import LoadReport

# MuJoCo's enumerations (mjtJoint, mjtTrn, mjtGain, mjtBias, mjtDyn, mjtEq)
FREE, BALL, SLIDE, HINGE = 0, 1, 2, 3
JOINT_KINDS = {FREE: "floating", BALL: "spherical", SLIDE: "prismatic", HINGE: "revolute"}
TRN_JOINT, GAIN_FIXED, BIAS_NONE, BIAS_AFFINE, DYN_NONE = 0, 0, 0, 1, 0
EQ_CONNECT, EQ_JOINT = 0, 2
EQ_NAMES = {0: "connect", 1: "weld", 2: "joint", 3: "tendon", 4: "flex"}
OBJ_BODY = 1
DSBL_LIMIT, DSBL_CONTACT, DSBL_GRAVITY = 8, 16, 128
WORLD_LINK = "world"
EXTRA = "pip install 'rtrigid[mjcf]' (the mujoco package)"


@dataclass
class Place:
    """An element of the compiled model, as :func:`~rtrigid.loaders.assemble.build` names
    it in its errors: its tag, name and ``file:line``."""

    tag: str
    attrib: dict
    where: str


class Places:
    """The error interface :func:`~rtrigid.loaders.assemble.build` takes, over
    :class:`Place` elements."""

    def __init__(self, path):
        self.path = path

    def error(self, node, message):
        name = node.attrib.get("name")
        what = f"<{node.tag} name={name!r}>" if name else f"<{node.tag}>"
        return ValueError(f"{node.where}: {what}: {message}")

    @staticmethod
    def where(node):
        return node.where


def compile_file(path):
    """(mujoco, its MjSpec, its MjModel) of the file; ``ValueError`` with MuJoCo's reason and
    the line it names if it cannot compile it, or naming the extra if mujoco is missing."""
    try:
        import mujoco
    except ImportError:
        raise ValueError(
            f"{path}: an MJCF file is read by MuJoCo's compiler, which is not installed: {EXTRA}"
        ) from None
    try:
        spec = mujoco.MjSpec.from_file(path)
        m = spec.compile()
    except Exception as e:  # MuJoCo raises ValueError; its message is the reason
        reason = " ".join(str(e).split())
        line = re.search(r"line (\d+)", reason)
        where = f"{path}:{line.group(1)}" if line else path
        raise ValueError(f"{where}: MuJoCo cannot compile the file: {reason}") from None
    return mujoco, spec, m


def read(
    path,
    *,
    floating_base,
    merge_fixed,
    allow_nonphysical_inertia,
    ignore=(),
    limits=True,
    collision=True,
    strict=False,
):
    """The :class:`rtrigid.Model` of the MJCF file at ``path`` (see :func:`load_model`)."""
    path = os.fspath(path)
    mujoco, spec, m = compile_file(path)
    lines = ElementIndex(path)
    report = LoadReport(path)
    places = Places(path)
    name_of = _names(m)
    gravity = _options(m, lines, report)
    limits = limits and not m.opt.disableflags & DSBL_LIMIT
    if m.opt.disableflags & DSBL_CONTACT and collision:
        report.add(
            "mapped",
            "option flag contact",
            "disabled: no collision geometry",
            lines.attribute("flag", "contact")[1],
        )
        collision = False

    links, joints = _tree(m, lines, report, name_of, floating_base, ignore, limits)
    model = build(
        places,
        links,
        joints,
        Place("worldbody", {}, lines.path),
        floating_base=False,
        merge_fixed=merge_fixed,
        allow_nonphysical_inertia=allow_nonphysical_inertia,
        gravity=gravity,
        limits=limits,
    )
    timestep, where = lines.attribute("option", "timestep")
    if timestep is not None:
        model.timestep = float(m.opt.timestep)
        report.add("mapped", "option timestep", f"model.timestep = {model.timestep:g}", where)
    _actuators(m, lines, report, name_of, model)
    _equalities(m, lines, report, name_of, model)
    _tendons(m, lines, report)
    _sensors(m, lines, report, name_of, model)
    for kind, what in (("keyframe", "keyframe"), ("contact", "contact pair/exclude")):
        for _, where, _ in lines.elements[kind]:
            report.add(
                "ignored",
                what,
                "not used by rtrigid (the initial state is qpos0)"
                if kind == "keyframe"
                else "contact filtering by pair is not simulated",
                where,
            )
    geom_loader.add_mjcf_geoms(m, spec, lines, report, name_of, model, collision)
    model.load_report = report
    if strict:
        report.refuse_ignored()
    return model


def _names(m):
    """name_of(kind, id): the element's name, or a made-up one for an unnamed element."""

    def name_of(kind, i):
        if kind == "body":
            return WORLD_LINK if i == 0 else (m.body(i).name or f"body{i}")
        if kind == "joint":
            return m.joint(i).name or f"joint{i}"
        if kind == "actuator":
            return m.actuator(i).name or f"actuator{i}"
        if kind == "geom":
            return m.geom(i).name
        if kind == "sensor":
            return m.sensor(i).name or f"sensor{i}"
        if kind == "site":
            return m.site(i).name
        raise KeyError(kind)

    return name_of


def _options(m, lines, report):
    """The file's gravity (0 if the gravity flag is off); what of ``<option>`` rtrigid does
    not simulate, reported."""
    where = lines.attribute("option", "gravity")[1]
    gravity = np.array(m.opt.gravity, float)
    if m.opt.disableflags & DSBL_GRAVITY:
        gravity = np.zeros(3)
        report.add("mapped", "option flag gravity", "disabled: gravity 0", where)
    elif lines.attribute("option", "gravity")[0] is not None:
        report.add("mapped", "option gravity", f"gravity = {gravity.tolist()}", where)
    for key in ("viscosity", "density"):
        value = float(getattr(m.opt, key))
        if value:
            report.add(
                "ignored",
                f"option {key}",
                f"{key}={value:g}: fluid forces are not simulated",
                lines.attribute("option", key)[1],
            )
    if np.any(m.opt.wind):
        report.add(
            "ignored",
            "option wind",
            "fluid forces are not simulated",
            lines.attribute("option", "wind")[1],
        )
    integrator, where = lines.attribute("option", "integrator")
    if integrator is not None:
        report.add(
            "approximated",
            "option integrator",
            f"{integrator}: the scheme is Simulation(integrator=...)'s "
            "(nullspace_rk4 for RK4, semi_implicit_euler for Euler)",
            where,
        )
    return gravity


def _ref_frame(kind, anchor, axis, ref):
    """The frame at MuJoCo's coordinate 0 in the frame at ``ref`` (= qpos0): a turn by -ref
    about the joint's axis through its anchor (hinge), a slide by -ref (slide)."""
    if not ref:
        return np.zeros(3), np.eye(3)
    if kind == HINGE:
        u = axis / np.linalg.norm(axis)
        K = np.array([[0, -u[2], u[1]], [u[2], 0, -u[0]], [-u[1], u[0], 0]])
        R = np.eye(3) - np.sin(ref) * K + (1.0 - np.cos(ref)) * K @ K
        return anchor - R @ anchor, R
    return -ref * axis, np.eye(3)


def _tree(m, lines, report, name_of, floating_base, ignore, limits):
    """Links and joint specs of the compiled bodies and joints (see the module docstring)."""
    links = {
        WORLD_LINK: Link(
            WORLD_LINK,
            0.0,
            np.zeros(3),
            np.zeros((3, 3)),
            lines.path,
            Place("worldbody", {}, lines.path),
        )
    }
    joints, approximated_limits = [], False
    for i in range(1, m.nbody):
        name = name_of("body", i)
        where = lines.where("body", i - 1, m.body(i).name)
        place = Place("body", {"name": name}, where)
        if name in links:
            raise ValueError(f"{where}: <body>: a second body named {name!r}")
        parent = name_of("body", int(m.body_parentid[i]))
        R = quat_matrix(m.body_iquat[i])
        mass = float(m.body_mass[i])
        inertia = R @ np.diag(m.body_inertia[i]) @ R.T
        njnt, adr = int(m.body_jntnum[i]), int(m.body_jntadr[i])
        link = Link(
            name,
            mass,
            m.body_ipos[i].copy(),
            inertia,
            where,
            place,
            virtual=mass == 0.0 and njnt > 0,
        )
        if m.body_gravcomp[i]:
            report.add("ignored", "body gravcomp", "gravity compensation is not simulated", where)
        if m.body_mocapid[i] >= 0:
            report.add("approximated", "mocap body", "welded where the file puts it", where)
        origin = (m.body_pos[i].copy(), quat_matrix(m.body_quat[i]))
        if njnt == 0 and floating_base and parent == WORLD_LINK:
            joints.append(
                JointSpec(
                    f"free_{name}",
                    "floating",
                    parent,
                    name,
                    origin,
                    np.zeros(3),
                    np.array([0.0, 0.0, 1.0]),
                    place,
                )
            )
        elif njnt == 0:
            joints.append(
                JointSpec(
                    f"{name}_weld",
                    "fixed",
                    parent,
                    name,
                    origin,
                    np.zeros(3),
                    np.array([0.0, 0.0, 1.0]),
                    place,
                )
            )
        prev = parent
        for k in range(njnt):
            j = adr + k
            spec = _joint(m, j, lines, report, name_of, ignore, limits)
            spec.parent = prev
            spec.child = name if k == njnt - 1 else f"{name}:{spec.name}"
            ref_frame = _ref_frame(
                int(m.jnt_type[j]),
                spec.anchor,
                spec.axis,
                float(m.qpos0[m.jnt_qposadr[j]]) if int(m.jnt_type[j]) in (HINGE, SLIDE) else 0.0,
            )
            spec.origin = compose(origin, ref_frame) if k == 0 else ref_frame
            if spec.child != name:
                links[spec.child] = Link(
                    spec.child,
                    0.0,
                    np.zeros(3),
                    np.zeros((3, 3)),
                    spec.node.where,
                    spec.node,
                    virtual=True,
                )
            approximated_limits |= limits and "lower" in spec.info
            joints.append(spec)
            prev = spec.child
        links[name] = link
    if approximated_limits:
        report.add(
            "approximated",
            "joint range",
            "hard joint limits (MuJoCo's are soft: solref/solimp)",
            lines.where("joint", 0),
        )
    return links, joints


def _joint(m, j, lines, report, name_of, ignore, limits):
    """The JointSpec of compiled joint j (parent, child and origin set by the caller).  It
    starts at MuJoCo's qpos0, unless that lies outside the limits rtrigid holds: then at the
    nearer limit (reported)."""
    name = name_of("joint", j)
    where = lines.where("joint", j, m.joint(j).name)
    place = Place("joint", {"name": name}, where)
    kind = int(m.jnt_type[j])
    dof, qadr = int(m.jnt_dofadr[j]), int(m.jnt_qposadr[j])
    damping = float(m.dof_damping[dof])
    stiffness = float(m.jnt_stiffness[j])
    armature = float(m.dof_armature[dof])
    if not m.joint(j).name:
        report.add("approximated", "unnamed joint", f"named {name!r}", where)
    friction = float(m.dof_frictionloss[dof])
    info, spec_kw = {}, {}
    if kind in (HINGE, SLIDE):
        if m.jnt_limited[j]:
            info["lower"], info["upper"] = (float(v) for v in m.jnt_range[j])
        if armature and "armature" in ignore:
            report.add("ignored", "joint armature", "ignore=('armature',)", where)
            armature = 0.0
        if friction and "frictionloss" in ignore:
            report.add("ignored", "joint frictionloss", "ignore=('frictionloss',)", where)
            friction = 0.0
        elif friction:
            report.add(
                "approximated",
                "joint frictionloss",
                "Coulomb joint friction held exactly (MuJoCo's is soft: solreffriction)",
                where,
            )
        start = float(m.qpos0[qadr])
        if limits and m.jnt_limited[j] and not info["lower"] <= start <= info["upper"]:
            report.add(
                "approximated",
                "joint start",
                f"qpos0 {start:g} lies outside the range: the joint starts at its nearer limit",
                where,
            )
            start = None
        spec_kw = dict(
            damping=damping,
            stiffness=stiffness,
            rest=float(m.qpos_spring[qadr]),
            armature=armature,
            friction=friction,
            position=start,
        )
    else:
        for what, value in (
            ("damping", damping),
            ("stiffness", stiffness),
            ("armature", armature),
            ("frictionloss", friction),
        ):
            if value:
                report.add(
                    "ignored",
                    f"{JOINT_KINDS[kind]} joint {what}",
                    f"{what} on ball and free joints is not simulated",
                    where,
                )
    return JointSpec(
        name,
        JOINT_KINDS[kind],
        "",
        "",
        None,
        m.jnt_pos[j].copy(),
        m.jnt_axis[j].copy(),
        place,
        info=info,
        **spec_kw,
    )


def _servo(m, a):
    """(kind, gains, scale) of actuator a when its gain and bias are a motor's, a position
    servo's or a velocity servo's, else None.  ``scale``: its fixed gain, folded into the
    gear of a motor (force = scale * control)."""
    if m.actuator_gaintype[a] != GAIN_FIXED or m.actuator_dyntype[a] != DYN_NONE:
        return None
    g = float(m.actuator_gainprm[a, 0])
    b = m.actuator_biasprm[a, :3]
    if m.actuator_biastype[a] == BIAS_NONE or not np.any(b):
        return ("motor", {}, g) if g else None
    if m.actuator_biastype[a] != BIAS_AFFINE or b[0] != 0.0 or g <= 0.0:
        return None
    if b[1] == -g and b[2] <= 0.0:
        return "position", {"kp": g, "kv": -float(b[2]) or None}, 1.0
    if b[1] == 0.0 and b[2] == -g:
        return "velocity", {"kv": g}, 1.0
    return None


def _actuators(m, lines, report, name_of, model):
    known = {j.name for j in model.joints if j.kind in ("revolute", "prismatic")}
    for a in range(m.nu):
        name = name_of("actuator", a)
        where = lines.where("actuator", a, m.actuator(a).name)
        target = int(m.actuator_trnid[a, 0])
        servo = _servo(m, a)
        joint = name_of("joint", target) if m.actuator_trntype[a] == TRN_JOINT else None
        if joint is None or servo is None or joint not in known:
            why = (
                "its transmission is not a joint"
                if joint is None
                else "its gain, bias or dynamics are not a motor's or a servo's"
                if servo is None
                else f"drives {joint!r}, not a hinge or slide"
            )
            report.add("ignored", "actuator", f"{name!r} {why}", where)
            continue
        kind, gains, scale = servo
        gear = float(m.actuator_gear[a, 0]) * scale
        force = tuple(m.actuator_forcerange[a] / scale) if m.actuator_forcelimited[a] else None
        if force is not None and scale < 0:
            force = (force[1], force[0])
        ctrl = tuple(m.actuator_ctrlrange[a]) if m.actuator_ctrllimited[a] else None
        try:
            model.add_actuator(
                joint, kind, gear=gear, name=name, force_range=force, ctrl_range=ctrl, **gains
            )
        except ValueError as e:
            raise ValueError(f"{where}: actuator {name!r}: {e}") from None
        report.add("mapped", "actuator", f"{name!r}: {kind} on {joint!r}", where)


def _joint_equality(m, e, where, report, name_of, model):
    """MuJoCo's joint equality q1 - ref1 = c0 + c1 (q2 - ref2) (refs: qpos0) as the coupling
    q1 = offset + c1 q2; True if mapped, else reported ignored (one joint, a polynomial of
    higher degree, inactive)."""
    c = m.eq_data[e, 0:5]
    j1, j2 = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
    why = None
    if not m.eq_active0[e]:
        why = "inactive at the start (eq_active0 = 0)"
    elif j2 < 0:
        why = "a joint held at a constant (no second joint) is not simulated"
    elif np.any(c[2:]):
        why = f"a polynomial of degree > 1 (polycoef {c.tolist()}) is not simulated"
    if why is not None:
        report.add("ignored", "equality joint", why, where)
        return
    ref1, ref2 = (float(m.qpos0[m.jnt_qposadr[j]]) for j in (j1, j2))
    offset = ref1 + float(c[0]) - float(c[1]) * ref2
    args = (name_of("joint", j1), name_of("joint", j2), float(c[1]), offset)
    kw = dict(name=m.eq(e).name or None)
    _held(model.add_coupling, args, kw, where, report, "joint", "a joint coupling")


def _held(add, args, kw, where, report, kind, what):
    """``add(*args, **kw)`` for an equality constraint of ``kind``, held exactly: its error
    names ``where``; reported approximated as ``what``."""
    try:
        add(*args, **kw)
    except ValueError as err:
        raise ValueError(f"{where}: equality {kind}: {err}") from None
    report.add(
        "approximated",
        f"equality {kind}",
        f"{what}, held exactly (MuJoCo's is soft: solref/solimp)",
        where,
    )


def _equalities(m, lines, report, name_of, model):
    """``connect`` between two bodies: a spherical loop joint; ``joint`` between two joints
    with a linear polynomial: a joint coupling; others reported ignored."""
    for e in range(m.neq):
        where = lines.where("equality", e, m.eq(e).name)
        kind = EQ_NAMES.get(int(m.eq_type[e]), str(int(m.eq_type[e])))
        if int(m.eq_type[e]) == EQ_JOINT:
            _joint_equality(m, e, where, report, name_of, model)
            continue
        if int(m.eq_type[e]) != EQ_CONNECT or m.eq_objtype[e] != OBJ_BODY:
            report.add(
                "ignored",
                f"equality {kind}",
                "only connect between bodies is simulated (as a loop joint)",
                where,
            )
            continue
        ends = []
        for side, data in (
            (m.eq_obj1id[e], m.eq_data[e, 0:3]),
            (m.eq_obj2id[e], m.eq_data[e, 3:6]),
        ):
            b, p, q = model.links[name_of("body", int(side))]
            ends.append((None if b < 0 else b, p + quat_matrix(q) @ data))
        if ends[1][0] is None:  # the world is the parent side of a loop joint
            ends.reverse()
        args = ("spherical", ends[0][0], ends[1][0])
        kw = dict(anchor_parent=ends[0][1], anchor_child=ends[1][1], name=m.eq(e).name or None)
        _held(model.add_loop_joint, args, kw, where, report, "connect", "a spherical loop joint")


def _tendons(m, lines, report):
    for t in range(m.ntendon):
        where = lines.where("tendon", t, m.tendon(t).name)
        acts = any(
            m.actuator_trntype[a] != TRN_JOINT and m.actuator_trnid[a, 0] == t for a in range(m.nu)
        )
        if (
            m.tendon_limited[t]
            or m.tendon_stiffness[t]
            or m.tendon_damping[t]
            or m.tendon_frictionloss[t]
            or acts
        ):
            report.add(
                "ignored",
                "tendon",
                "tendons (limits, springs, dampers, actuation) are not simulated",
                where,
            )
        else:
            report.add(
                "mapped",
                "tendon",
                "exerts no force (no limit, spring, damper or actuator): nothing to simulate",
                where,
            )


SENSORS = {
    "jointpos": ("joint_position", "joint"),
    "jointvel": ("joint_velocity", "joint"),
    "accelerometer": ("imu", "site"),
    "gyro": ("imu", "site"),
    "force": ("joint_reaction", "site"),
    "torque": ("joint_reaction", "site"),
}


def _sensors(m, lines, report, name_of, model):
    """The sensors a query reads, with its arguments: a joint's name, or for a site's
    sensor (IMU: accelerometer, gyro) its body and point in the body frame, or (force,
    torque) the inbound joint of the site's body, whose reaction it measures."""
    import mujoco

    for s in range(m.nsensor):
        where = lines.where("sensor", s, m.sensor(s).name)
        kind = mujoco.mjtSensor(int(m.sensor_type[s])).name[len("mjSENS_") :].lower()
        name = name_of("sensor", s)
        if kind not in SENSORS:
            report.add("ignored", f"sensor {kind}", "rtrigid has no query for it", where)
            continue
        query, obj = SENSORS[kind]
        target = int(m.sensor_objid[s])
        if obj == "joint":
            args = (name_of("joint", target),)
        else:
            b, p, q = model.links[name_of("body", int(m.site_bodyid[target]))]
            inbound = [j.name for j in model.joints if j.child == b]
            if b < 0 or (query == "joint_reaction" and not inbound):
                report.add(
                    "ignored",
                    f"sensor {kind}",
                    "its site is on a body without a joint to its parent",
                    where,
                )
                continue
            args = (
                (inbound[0],)
                if query == "joint_reaction"
                else (model.bodies[b].name, p + quat_matrix(q) @ m.site_pos[target])
            )
        report.sensors.append(dict(name=name, kind=kind, query=query, args=args, where=where))
        report.add("mapped", f"sensor {kind}", f"{name!r}: Simulation.{query}", where)
