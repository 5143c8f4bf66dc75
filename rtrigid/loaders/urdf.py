"""URDF: links, inertials, collisions and joints to the tree of :mod:`rtrigid.loaders.assemble`.

Unknown elements are refused naming the element and its line.  What rtrigid does not simulate is
ignored with a warning and listed in the load report; ``strict=True`` refuses it.  ``<mimic
joint multiplier offset>`` becomes a joint coupling (:meth:`rtrigid.Model.add_coupling`).
``<dynamics damping friction>`` (or ROS's older ``<joint_properties>`` with the same attributes)
become the joint's damper and friction.  ``visual`` boxes, spheres, cylinders and meshes become
the bodies' drawing (:data:`rtrigid.model.PART_TYPES`; a mesh file that is not found is a
warning, and the viewer draws a placeholder).  ``collision`` boxes, spheres, cylinders, capsules
and meshes become geoms, pybullet's ``plane`` on the world a ground (:meth:`rtrigid.Model.add_geom`;
a mesh one convex hull per object in its file, as pybullet's VHACD files are made), with
pybullet's ``<contact>`` ``lateral_friction`` and ``restitution`` where the link has them
(pybullet's defaults, 0.5 and 0, otherwise).  As in pybullet, a robot's links do not collide
with each other unless ``self_collision`` is set (then, as in MuJoCo, all but the pairs a joint
joins).  What only configures other software (``material``, ``gazebo``, ``transmission``,
``calibration``, ``safety_controller``) is ignored, with a warning for the last four.
"""

from __future__ import annotations

import os

import numpy as np

from rtrigid.loaders.assemble import JointSpec, Link, build, resolve, rpy_matrix

JOINT_KINDS = {
    "revolute": "revolute",
    "continuous": "revolute",
    "prismatic": "prismatic",
    "fixed": "fixed",
    "floating": "floating",
    "planar": "planar",
    "spherical": "spherical",
}
SILENT = {"material"}
# ignored with a warning (and in the load report): other software's settings
WARN = {"gazebo", "transmission", "calibration", "safety_controller"}
ROBOT_TAGS, LINK_TAGS = {"link", "joint"}, {"inertial", "visual", "collision", "contact"}
# pybullet's <contact> entries mapped to the link's geoms (the rest are reported ignored)
CONTACT_KEYS = {"lateral_friction": "friction", "restitution": "restitution"}
JOINT_TAGS = {"origin", "parent", "child", "axis", "limit", "dynamics", "joint_properties", "mimic"}


def _children(src, node, known, ignore):
    """The children of ``node`` with a tag of ``known``; the rest ignored or refused."""
    out = []
    for c in node.children:
        if c.tag in known and not (c.tag == "mimic" and "mimic" in ignore):
            out.append(c)
        elif c.tag in SILENT:
            continue
        elif c.tag in WARN or c.tag in ignore:
            src.ignored.setdefault(f"<{c.tag}> ignored", []).append(c.line)
        else:
            raise src.error(c, f"unsupported element inside <{node.tag}>")
    return out


def _origin(src, node):
    """The (p, R) of an element's ``<origin>`` child (identity if there is none)."""
    o = node.find("origin")
    if o is None:
        return np.zeros(3), np.eye(3)
    return (src.floats(o, "xyz", 3, np.zeros(3)), rpy_matrix(src.floats(o, "rpy", 3, np.zeros(3))))


def _link(src, node, ignore, materials, collision, package_dirs):
    link = _link_inertia(src, node, ignore)
    link.visuals = [
        p for v in node.findall("visual") for p in _visual(src, v, materials, package_dirs)
    ]
    if collision:
        coefficients = _contact(src, node)
        link.collisions = [
            c
            for e in node.findall("collision")
            for c in _collision(src, e, package_dirs, coefficients)
        ]
    return link


def _contact(src, node):
    """The geoms' friction and restitution from pybullet's ``<contact>`` of a link."""
    out = {"friction": 0.5, "restitution": 0.0}
    for contact in node.findall("contact"):
        for c in contact.children:
            if c.tag in CONTACT_KEYS:
                value = src.floats(c, "value", 1)
                if value < 0.0:
                    raise src.error(c, f"negative {c.tag} {value}")
                out[CONTACT_KEYS[c.tag]] = value
            else:
                src.ignored.setdefault(f"<contact> <{c.tag}> ignored", []).append(c.line)
    return out


def _collision(src, node, package_dirs, coefficients):
    """The geom specs of a ``<collision>`` (a list of one, or none for a mesh file that is
    not found): kind, params, pos and R in the link frame, friction, restitution, node."""
    geometry = node.find("geometry")
    if geometry is None or not geometry.children:
        raise src.error(node, "missing <geometry>")
    g = geometry.children[0]
    pos, R = _origin(src, node)
    if g.tag == "box":
        kind, params = "box", {"half_extents": 0.5 * src.floats(g, "size", 3)}
    elif g.tag == "sphere":
        kind, params = "sphere", {"radius": src.floats(g, "radius", 1)}
    elif g.tag in ("cylinder", "capsule"):
        kind, params = (
            g.tag,
            {"radius": src.floats(g, "radius", 1), "half_length": 0.5 * src.floats(g, "length", 1)},
        )
    elif g.tag == "mesh":
        filename = g.attrib.get("filename")
        if not filename:
            raise src.error(g, "missing attribute 'filename'")
        path = resolve(os.path.dirname(src.path), filename, package_dirs)
        if path is None:
            src.ignored.setdefault("collision mesh files not found", []).append(g.line)
            return []
        kind, params = "mesh", {"file": path, "scale": _scale(src, g)}
    elif g.tag == "plane":  # pybullet's infinite plane
        kind, params = "plane", {"normal": src.floats(g, "normal", 3, np.array([0.0, 0.0, 1.0]))}
    else:
        src.ignored.setdefault(
            f"<collision> <{g.tag}> ignored: not a convex shape rtrigid reads", []
        ).append(g.line)
        return []
    return [{"kind": kind, "params": params, "pos": pos, "R": R, "node": g, **coefficients}]


def _color(src, material, materials):
    """The rgba of a ``<material>`` (inline colour, else the named top-level one)."""
    if material is None:
        return None
    c = material.find("color")
    if c is not None:
        return src.floats(c, "rgba", 4)
    return materials.get(material.attrib.get("name"))


def _visual(src, node, materials, package_dirs=()):
    """The drawing parts of a ``<visual>`` (a list of one, or none for unknown geometry)."""
    geometry = node.find("geometry")
    if geometry is None or not geometry.children:
        raise src.error(node, "missing <geometry>")
    g = geometry.children[0]
    pos, R = _origin(src, node)
    part = {"pos": pos, "R": R, "color": _color(src, node.find("material"), materials)}
    if g.tag == "box":
        part.update(type="box", half_extents=0.5 * src.floats(g, "size", 3))
    elif g.tag == "sphere":
        part.update(type="sphere", radius=src.floats(g, "radius", 1))
    elif g.tag in ("cylinder", "capsule"):
        part.update(
            type=g.tag,
            radius=src.floats(g, "radius", 1),
            half_length=0.5 * src.floats(g, "length", 1),
        )
    elif g.tag == "mesh":
        filename = g.attrib.get("filename")
        if not filename:
            raise src.error(g, "missing attribute 'filename'")
        path = resolve(os.path.dirname(src.path), filename, package_dirs)
        if path is None:
            src.ignored.setdefault("mesh files not found (drawn as placeholders)", []).append(
                g.line
            )
        part.update(type="mesh", file=path or filename, missing=path is None, scale=_scale(src, g))
    elif g.tag == "plane":
        return []  # pybullet's infinite plane: its collision is the ground; not drawn
    else:
        raise src.error(g, "unsupported geometry")
    return [part]


def _scale(src, g):
    """A mesh's ``scale``: three numbers, one (uniform), or four (the fourth ignored, as
    pybullet reads them)."""
    count = len(g.attrib.get("scale", "1 1 1").replace(",", " ").split())
    if count == 1:
        return np.full(3, src.floats(g, "scale", 1))
    if count == 4:
        src.ignored.setdefault("a mesh scale's fourth number ignored", []).append(g.line)
        return src.floats(g, "scale", 4)[:3]
    return src.floats(g, "scale", 3, np.ones(3))


def _link_inertia(src, node, ignore):
    name = src.name(node)
    inertial = [c for c in _children(src, node, LINK_TAGS, ignore) if c.tag == "inertial"]
    if len(inertial) > 1:
        raise src.error(inertial[1], "a link has at most one <inertial>")
    if not inertial:
        return Link(name, 0.0, np.zeros(3), np.zeros((3, 3)), src.where(node), node)
    el = inertial[0]
    _children(src, el, {"origin", "mass", "inertia"}, ignore)
    m = el.find("mass")
    if m is None:
        raise src.error(el, "missing <mass>")
    mass = src.floats(m, "value", 1)
    if mass < 0.0:
        raise src.error(m, f"negative mass {mass}")
    ie = el.find("inertia")
    if ie is None:
        raise src.error(el, "missing <inertia>")
    ixx, ixy, ixz, iyy, iyz, izz = (
        src.floats(ie, k, 1) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
    )
    tensor = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    com, R = _origin(src, el)
    if mass == 0.0:
        if np.any(tensor):  # as MuJoCo reads such a link
            src.ignored.setdefault("<inertia> of a massless link ignored", []).append(ie.line)
        return Link(name, 0.0, np.zeros(3), np.zeros((3, 3)), src.where(node), node)
    return Link(name, mass, com, R @ tensor @ R.T, src.where(node), node)


def _joint(src, node, ignore):
    name = src.name(node)
    kind = node.attrib.get("type")
    if kind not in JOINT_KINDS:
        raise src.error(node, f"joint type {kind!r} is not one of {sorted(JOINT_KINDS)}")
    kids = {c.tag: c for c in _children(src, node, JOINT_TAGS, ignore)}
    ends = []
    for tag in ("parent", "child"):
        if tag not in kids or not kids[tag].attrib.get("link"):
            raise src.error(node, f"missing <{tag} link=...>")
        ends.append(kids[tag].attrib["link"])
    axis = np.array([1.0, 0.0, 0.0])
    if "axis" in kids and kind not in ("fixed", "floating"):
        axis = src.floats(kids["axis"], "xyz", 3)
        if np.linalg.norm(axis) < 1e-12:
            raise src.error(kids["axis"], "the axis is zero")
        axis = axis / np.linalg.norm(axis)
    info = {}
    if "limit" in kids:
        lim = kids["limit"]
        if kind in ("revolute", "prismatic"):
            lower, upper = (src.floats(lim, k, 1, 0.0) for k in ("lower", "upper"))
            if lower <= upper:  # lower > upper: no limit, as pybullet reads it
                info["lower"], info["upper"] = lower, upper
        for k in ("effort", "velocity"):
            if k in lim.attrib:
                info[k] = src.floats(lim, k, 1)
    damping = friction = 0.0
    # ROS's old <joint_properties> gives the same two numbers; <dynamics> has the last word
    for tag in ("joint_properties", "dynamics"):
        if tag not in kids:
            continue
        dyn = kids[tag]
        damping = src.floats(dyn, "damping", 1, damping)
        if damping < 0.0:
            raise src.error(dyn, f"negative damping {damping}")
        friction = src.floats(dyn, "friction", 1, friction)
        if friction < 0.0:
            raise src.error(dyn, f"negative friction {friction}")
        if damping and kind not in ("revolute", "continuous", "prismatic"):
            raise src.error(dyn, f"damping on a {kind} joint is not supported")
        if friction and (
            kind not in ("revolute", "continuous", "prismatic") or "friction" in ignore
        ):
            src.ignored.setdefault(
                f"joint friction (Coulomb) on a {kind} joint ignored"
                if "friction" not in ignore
                else "joint friction ignored: ignore=('friction',)",
                [],
            ).append(dyn.line)
            friction = 0.0
    return JointSpec(
        name,
        JOINT_KINDS[kind],
        ends[0],
        ends[1],
        _origin(src, node),
        np.zeros(3),
        axis,
        node,
        damping=damping,
        friction=friction,
        info=info,
    )


def read(
    src,
    *,
    floating_base,
    merge_fixed,
    allow_nonphysical_inertia,
    ignore,
    limits=True,
    collision=True,
    package_dirs=(),
    self_collision=False,
    report=None,
):
    """The :class:`rtrigid.Model` of the URDF in ``src`` (a parsed Source); the collision
    geoms added are listed as mapped in ``report`` (a LoadReport)."""
    robot = src.root
    if robot.tag != "robot":
        raise src.error(robot, "a URDF file's root element is <robot>")
    links, joints, mimics = {}, [], []
    materials = {}
    for m in robot.findall("material"):
        c = m.find("color")
        if c is not None and m.attrib.get("name"):
            materials[m.attrib["name"]] = src.floats(c, "rgba", 4)
    for node in _children(src, robot, ROBOT_TAGS, ignore):
        if node.tag == "link":
            link = _link(src, node, ignore, materials, collision, package_dirs)
            if link.name in links:
                raise src.error(node, f"a second link named {link.name!r}")
            links[link.name] = link
        else:
            joints.append(_joint(src, node, ignore))
            mimic = node.find("mimic")
            if mimic is not None and "mimic" not in ignore:
                mimics.append((joints[-1].name, mimic))
    if not links:
        raise src.error(robot, "no <link>")
    if len({j.name for j in joints}) < len(joints):
        seen = set()
        dup = next(j for j in joints if j.name in seen or seen.add(j.name))
        raise src.error(dup.node, f"a second joint named {dup.name!r}")
    model = build(
        src,
        links,
        joints,
        robot,
        floating_base=floating_base,
        merge_fixed=merge_fixed,
        allow_nonphysical_inertia=allow_nonphysical_inertia,
        limits=limits,
        report=report,
        self_collision=self_collision,
    )
    for name, node in mimics:  # q = offset + multiplier * q_joint, as a coupling
        ratio, offset = (
            src.floats(node, k, 1, d) for k, d in (("multiplier", 1.0), ("offset", 0.0))
        )
        try:
            model.add_coupling(name, node.attrib.get("joint"), ratio, offset)
        except ValueError as err:
            raise src.error(node, f"<mimic>: {err}") from None
        if report is not None:
            report.add("mapped", "mimic", "a joint coupling", f"{src.path}:{node.line}")
    src.warn_ignored()
    return model
