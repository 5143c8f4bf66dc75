"""URDF: links, inertials and joints to the tree of :mod:`rtrigid.loaders.assemble`.

What the file says and rtrigid does not simulate is refused naming the element and its line
(``mimic``, joint friction, unknown tags).  ``visual`` boxes, spheres, cylinders and meshes
become the bodies' drawing (:data:`rtrigid.model.PART_TYPES`; a mesh file that is not found
is a warning, and the viewer draws a placeholder).  What only configures other software
(``collision``, ``material``, ``gazebo``, ``transmission``, ``calibration``,
``safety_controller``, pybullet's ``contact``) is ignored, with a warning for the last five.
"""
from __future__ import annotations

import os

import numpy as np

from rtrigid.loaders.assemble import JointSpec, Link, build, resolve, rpy_matrix

JOINT_KINDS = {"revolute": "revolute", "continuous": "revolute", "prismatic": "prismatic",
               "fixed": "fixed", "floating": "floating", "planar": "planar"}
SILENT = {"collision", "material"}          # collision shapes: rtrigid has no contacts
WARN = {"gazebo", "transmission", "calibration", "safety_controller", "contact"}
ROBOT_TAGS, LINK_TAGS = {"link", "joint"}, {"inertial", "visual"}
JOINT_TAGS = {"origin", "parent", "child", "axis", "limit", "dynamics"}


def _children(src, node, known, ignore):
    """The children of ``node`` with a tag of ``known``; the rest ignored or refused."""
    out = []
    for c in node.children:
        if c.tag in known:
            out.append(c)
        elif c.tag in SILENT:
            continue
        elif c.tag in WARN or c.tag in ignore:
            src.ignored.setdefault(f"<{c.tag}> ignored", []).append(c.line)
        else:
            raise src.error(c, f"unsupported element inside <{node.tag}>"
                            + (" (mimic joints are not supported; pass ignore=('mimic',) to "
                               "load the joint as an independent one)" if c.tag == "mimic"
                               else ""))
    return out


def _origin(src, node):
    """The (p, R) of an element's ``<origin>`` child (identity if there is none)."""
    o = node.find("origin")
    if o is None:
        return np.zeros(3), np.eye(3)
    return (src.floats(o, "xyz", 3, np.zeros(3)), rpy_matrix(src.floats(o, "rpy", 3, np.zeros(3))))


def _link(src, node, ignore, materials):
    link = _link_inertia(src, node, ignore)
    link.visuals = [p for v in node.findall("visual") for p in _visual(src, v, materials)]
    return link


def _color(src, material, materials):
    """The rgba of a ``<material>`` (inline colour, else the named top-level one)."""
    if material is None:
        return None
    c = material.find("color")
    if c is not None:
        return src.floats(c, "rgba", 4)
    return materials.get(material.attrib.get("name"))


def _visual(src, node, materials):
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
        part.update(type=g.tag, radius=src.floats(g, "radius", 1),
                    half_length=0.5 * src.floats(g, "length", 1))
    elif g.tag == "mesh":
        filename = g.attrib.get("filename")
        if not filename:
            raise src.error(g, "missing attribute 'filename'")
        path = resolve(os.path.dirname(src.path), filename)
        if path is None:
            src.ignored.setdefault("mesh files not found (drawn as placeholders)", []).append(
                g.line)
        part.update(type="mesh", file=path or filename, missing=path is None,
                    scale=src.floats(g, "scale", 3, np.ones(3)))
    else:
        raise src.error(g, "unsupported geometry")
    return [part]


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
    ixx, ixy, ixz, iyy, iyz, izz = (src.floats(ie, k, 1) for k in
                                    ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"))
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
            info["lower"], info["upper"] = (src.floats(lim, k, 1, 0.0) for k in ("lower", "upper"))
            if info["lower"] > info["upper"]:
                raise src.error(lim, f"lower {info['lower']} > upper {info['upper']}")
        for k in ("effort", "velocity"):
            if k in lim.attrib:
                info[k] = src.floats(lim, k, 1)
    damping = 0.0
    if "dynamics" in kids:
        dyn = kids["dynamics"]
        damping = src.floats(dyn, "damping", 1, 0.0)
        if damping < 0.0:
            raise src.error(dyn, f"negative damping {damping}")
        if src.floats(dyn, "friction", 1, 0.0) != 0.0:
            raise src.error(dyn, "joint friction (Coulomb) is not simulated; remove it or set 0")
        if damping and kind not in ("revolute", "continuous", "prismatic"):
            raise src.error(dyn, f"damping on a {kind} joint is not supported")
    return JointSpec(name, JOINT_KINDS[kind], ends[0], ends[1], _origin(src, node),
                     np.zeros(3), axis, node, damping=damping, info=info)


def read(src, *, floating_base, merge_fixed, allow_nonphysical_inertia, ignore, limits=True):
    """The :class:`rtrigid.Model` of the URDF in ``src`` (a parsed Source)."""
    robot = src.root
    if robot.tag != "robot":
        raise src.error(robot, "a URDF file's root element is <robot>")
    links, joints = {}, []
    materials = {}
    for m in robot.findall("material"):
        c = m.find("color")
        if c is not None and m.attrib.get("name"):
            materials[m.attrib["name"]] = src.floats(c, "rgba", 4)
    for node in _children(src, robot, ROBOT_TAGS, ignore):
        if node.tag == "link":
            link = _link(src, node, ignore, materials)
            if link.name in links:
                raise src.error(node, f"a second link named {link.name!r}")
            links[link.name] = link
        else:
            joints.append(_joint(src, node, ignore))
    if not links:
        raise src.error(robot, "no <link>")
    if len({j.name for j in joints}) < len(joints):
        seen = set()
        dup = next(j for j in joints if j.name in seen or seen.add(j.name))
        raise src.error(dup.node, f"a second joint named {dup.name!r}")
    model = build(src, links, joints, robot, floating_base=floating_base,
                  merge_fixed=merge_fixed, allow_nonphysical_inertia=allow_nonphysical_inertia,
                  limits=limits)
    src.warn_ignored()
    return model
