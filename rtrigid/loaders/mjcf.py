"""An MJCF subset: ``worldbody``/``body`` trees to the tree of :mod:`rtrigid.loaders.assemble`.

Read: ``compiler`` (angle, eulerseq, inertiafromgeom), ``option`` gravity, ``default`` classes
(``class``/``childclass``), bodies with ``pos`` and any orientation (quat, axisangle, euler,
xyaxes, zaxis), ``inertial`` (diaginertia or fullinertia), joints hinge/slide/ball/free and
``freejoint`` with range, damping, stiffness and springref (hinge and slide), ``actuator``
motor/position/velocity on joints (:meth:`Model.add_actuator`, with MuJoCo's default gains:
a position servo's kp 1, a velocity servo's kv 1; ctrlrange and forcerange when given).  A body with several joints becomes a chain of massless bodies, one joint each, as
MuJoCo composes them.  Bodies without ``inertial`` take mass and inertia from their geoms as
MuJoCo computes them: the file is compiled with ``mujoco`` for those numbers only (so such
files need ``mujoco`` installed).

Refused, naming the element: ``armature`` (rtrigid has no rotor inertia; ``ignore=
("armature",)`` drops it with a warning), ``ref``, friction loss, springs and dampers on ball
joints, ``equality``, ``tendon``, ``include``, other actuators and unknown elements.  Drawing
and sensing only (``geom``, ``site``, ``camera``, ``light``, ``asset``, ``visual``,
``statistic``, ``size``) is skipped; ``contact``, ``sensor``, ``keyframe`` are ignored with a
warning.
"""
from __future__ import annotations

import os

import numpy as np

from rtrigid.loaders.assemble import IDENTITY, JointSpec, Link, build, quat_matrix, resolve

SILENT = {"asset", "visual", "statistic", "size", "extension", "custom"}
WARN = {"contact", "sensor", "keyframe"}
BODY_SILENT = {"geom", "site", "camera", "light"}  # geoms: inertia (via MuJoCo) and drawing
BODY_WARN = {"camera", "light"}
JOINT_TYPES = {"hinge": "revolute", "slide": "prismatic", "ball": "spherical",
               "free": "floating"}
ACTUATORS = {"motor", "position", "velocity"}
DEFAULTABLE = {"joint", "geom", "motor", "position", "velocity", "inertial", "site"}
WORLD_LINK = "world"


class _Reader:
    def __init__(self, src, ignore):
        self.src, self.ignore = src, ignore
        root = src.root
        comp = {}
        for c in root.findall("compiler"):
            comp.update(c.attrib)
        self.degree = comp.get("angle", "degree") == "degree"
        self.eulerseq = comp.get("eulerseq", "xyz")
        self.fromgeom = comp.get("inertiafromgeom", "auto")
        for key in ("coordinate",):
            if comp.get(key, "local") != "local":
                raise src.error(root.find("compiler"), f"{key}={comp[key]!r} is not supported")
        self.gravity = np.array([0.0, 0.0, -9.81])
        for o in root.findall("option"):
            if "gravity" in o.attrib:
                self.gravity = src.floats(o, "gravity", 3)
        self.classes = {}
        for d in root.findall("default"):
            self._defaults(d, {}, "main")
        # mesh assets, drawn by the viewer where a geom names them (the file's vertices in the
        # geom's frame, as MuJoCo shows them: its re-centring of a mesh moves the geom too)
        folder = os.path.join(os.path.dirname(src.path), comp.get("meshdir",
                                                                  comp.get("assetdir", "")))
        self.meshes = {}
        for a in root.findall("asset"):
            for m in a.findall("mesh"):
                if "file" not in m.attrib:  # vertices given inline: known, not drawn
                    self.meshes[m.attrib.get("name", "")] = None
                    continue
                name = m.attrib.get("name",
                                    os.path.splitext(os.path.basename(m.attrib["file"]))[0])
                path = resolve(folder, m.attrib["file"])
                if path is None:
                    self.warn(m, "mesh files not found (drawn as placeholders)")
                self.meshes[name] = dict(type="mesh", file=path or m.attrib["file"],
                                         missing=path is None,
                                         scale=src.floats(m, "scale", 3, np.ones(3)))

    def warn(self, node, what):
        self.src.ignored.setdefault(what, []).append(node.line)

    # -- defaults ------------------------------------------------------------------------
    def _defaults(self, node, inherited, name):
        name = node.attrib.get("class", name)
        mine = {tag: dict(attrs) for tag, attrs in inherited.items()}
        for c in node.children:
            if c.tag == "default":
                continue
            if c.tag not in DEFAULTABLE and c.tag not in {"mesh", "material", "camera", "light",
                                                          "tendon", "general", "equality",
                                                          "pair", "site"}:
                raise self.src.error(c, "unsupported element inside <default>")
            mine.setdefault(c.tag, {}).update(c.attrib)
        self.classes[name] = mine
        for c in node.findall("default"):
            if not c.attrib.get("class"):
                raise self.src.error(c, "a nested <default> needs a class")
            self._defaults(c, mine, c.attrib["class"])

    def attrs(self, node, cls):
        """The element's attributes over its class defaults (``class``, else ``cls``)."""
        name = node.attrib.get("class", cls)
        if name not in self.classes and name != "main":
            raise self.src.error(node, f"unknown class {name!r}")
        merged = dict(self.classes.get(name, {}).get(node.tag, {}))
        merged.update(node.attrib)
        return merged

    # -- numbers -------------------------------------------------------------------------
    def floats(self, node, attrs, key, n, default=None):
        text = attrs.get(key)
        if text is None:
            return default
        probe = type(node)(node.tag, {key: text}, node.line)
        return self.src.floats(probe, key, n)

    def angle(self, value):
        return np.deg2rad(value) if self.degree else value

    def rotation(self, node, attrs):
        """The rotation an element's orientation attributes give (identity if none)."""
        given = [k for k in ("quat", "axisangle", "euler", "xyaxes", "zaxis") if k in attrs]
        if len(given) > 1:
            raise self.src.error(node, f"more than one orientation: {given}")
        if not given:
            return np.eye(3)
        k = given[0]
        if k == "quat":
            q = self.floats(node, attrs, k, 4)
            if np.linalg.norm(q) == 0.0:
                raise self.src.error(node, "quat is zero")
            return quat_matrix(q)
        if k == "axisangle":
            v = self.floats(node, attrs, k, 4)
            return _axis_angle(self._unit(node, v[:3]), self.angle(v[3]))
        if k == "euler":
            v = self.angle(self.floats(node, attrs, k, 3))
            R = np.eye(3)
            seq = self.eulerseq
            axes = {"x": [1.0, 0, 0], "y": [0, 1.0, 0], "z": [0, 0, 1.0]}
            for ch, a in zip(seq, v):
                Ri = _axis_angle(np.array(axes[ch.lower()]), a)
                R = R @ Ri if ch.islower() else Ri @ R   # intrinsic / extrinsic
            return R
        if k == "zaxis":
            z = self._unit(node, self.floats(node, attrs, k, 3))
            c = np.array([0.0, 0.0, 1.0])
            axis = np.cross(c, z)
            s = np.linalg.norm(axis)
            if s < 1e-14:
                return np.eye(3) if z[2] > 0 else _axis_angle(np.array([1.0, 0, 0]), np.pi)
            return _axis_angle(axis / s, np.arctan2(s, z @ c))
        v = self.floats(node, attrs, k, 6)
        x = self._unit(node, v[:3])
        y = v[3:] - (v[3:] @ x) * x
        y = self._unit(node, y)
        return np.column_stack([x, y, np.cross(x, y)])

    def _unit(self, node, v):
        n = np.linalg.norm(v)
        if n < 1e-12:
            raise self.src.error(node, "a zero axis")
        return v / n


def _axis_angle(u, a):
    K = np.array([[0, -u[2], u[1]], [u[2], 0, -u[0]], [-u[1], u[0], 0]])
    return np.eye(3) + np.sin(a) * K + (1.0 - np.cos(a)) * K @ K


def read(src, *, floating_base, merge_fixed, allow_nonphysical_inertia, ignore, limits=True):
    """The :class:`rtrigid.Model` of the MJCF in ``src`` (a parsed Source)."""
    r = _Reader(src, ignore)
    root = src.root
    world = None
    for c in root.children:
        if c.tag == "worldbody":
            if world is not None:
                raise src.error(c, "a second <worldbody>")
            world = c
        elif c.tag in SILENT or c.tag in ("compiler", "option", "default", "actuator"):
            continue
        elif c.tag in WARN:
            r.warn(c, f"<{c.tag}> ignored")
        else:
            raise src.error(c, "unsupported element inside <mujoco>")
    if world is None:
        raise src.error(root, "no <worldbody>")
    links = {WORLD_LINK: Link(WORLD_LINK, 0.0, np.zeros(3), np.zeros((3, 3)), src.where(world),
                              world)}
    joints, need_geom = [], []
    order = []  # MJCF bodies in document order (MuJoCo's body ids 1, 2, ...)

    def body(node, parent_link, cls):
        name = src.name(node)
        if name in links or name == WORLD_LINK:
            raise src.error(node, f"a second body named {name!r}")
        cls = node.attrib.get("childclass", cls)
        attrs = dict(node.attrib)
        origin = (r.floats(node, attrs, "pos", 3, np.zeros(3)), r.rotation(node, attrs))
        order.append(name)
        jnodes, inertial, kids, geoms = [], None, [], []
        for c in node.children:
            if c.tag in ("joint", "freejoint"):
                jnodes.append(c)
            elif c.tag == "inertial":
                inertial = c
            elif c.tag == "body":
                kids.append(c)
            elif c.tag == "geom":
                geoms.append(c)
            elif c.tag in BODY_SILENT:
                if c.tag in BODY_WARN:
                    r.warn(c, f"<{c.tag}> ignored")
            else:
                raise src.error(c, "unsupported element inside <body>")
        link = _inertial(r, node, name, inertial, cls)
        if link is None:
            need_geom.append(name)
            link = Link(name, 0.0, np.zeros(3), np.zeros((3, 3)), src.where(node), node)
        if not jnodes and floating_base and parent_link == WORLD_LINK:
            jnodes = [type(node)("freejoint", {"name": f"free_{name}"}, node.line)]
        # several joints: a chain of massless links, one joint each, composed as MuJoCo does
        prev, first = parent_link, True
        for k, jn in enumerate(jnodes):
            last = k == len(jnodes) - 1
            child = name if last else f"{name}:{jn.attrib.get('name', k)}"
            if not last:
                links[child] = Link(child, 0.0, np.zeros(3), np.zeros((3, 3)), src.where(jn),
                                    jn, virtual=True)
            joints.append(_joint(r, jn, prev, child, origin if first else IDENTITY, cls,
                                 parent_link == WORLD_LINK))
            prev, first = child, False
        if not jnodes:
            joints.append(JointSpec(f"{name}_weld", "fixed", parent_link, name, origin,
                                    np.zeros(3), np.array([0.0, 0.0, 1.0]), node))
        link.visuals = [p for g in geoms for p in _geom_part(r, g, cls)]
        links[name] = link
        for c in kids:
            body(c, name, cls)

    for c in world.children:
        if c.tag == "body":
            body(c, WORLD_LINK, "main")
        elif c.tag in BODY_SILENT:
            continue
        elif c.tag in ("joint", "freejoint", "inertial"):
            raise src.error(c, "the world body takes no joints or inertia")
        else:
            raise src.error(c, "unsupported element inside <worldbody>")
    actuators = _actuators(r, root)
    names = {j.name for j in joints if j.kind != "fixed"}
    for a in actuators:
        if a["joint"] not in names:
            raise src.error(a["node"], f"names joint {a['joint']!r}, which the file does not "
                            "define")
    if need_geom:
        _geom_inertias(src, r, links, need_geom, order)
    model = build(src, links, joints, root, floating_base=False, merge_fixed=merge_fixed,
                  allow_nonphysical_inertia=allow_nonphysical_inertia, limits=limits)
    for a in actuators:
        # MuJoCo's defaults: a position servo's kp is 1 and its kv 0, a velocity servo's kv 1
        gains = {"motor": {}, "position": {"kp": a.get("kp", 1.0), "kv": a.get("kv") or None},
                 "velocity": {"kv": a.get("kv", 1.0)}}[a["kind"]]
        try:
            model.add_actuator(a["joint"], a["kind"], gear=a["gear"], name=a["name"] or None,
                               force_range=a.get("forcerange"), ctrl_range=a.get("ctrlrange"),
                               **gains)
        except ValueError as e:
            raise src.error(a["node"], str(e)) from None
    src.warn_ignored()
    return model


def _inertial(r, node, name, inertial, cls):
    """The link of an explicit ``<inertial>``, or None when the geoms give the inertia."""
    if r.fromgeom == "true" or inertial is None:
        if r.fromgeom == "false":
            return Link(name, 0.0, np.zeros(3), np.zeros((3, 3)), r.src.where(node), node)
        return None
    attrs = r.attrs(inertial, cls)
    mass = r.floats(inertial, attrs, "mass", 1)
    if mass is None or mass < 0.0:
        raise r.src.error(inertial, "needs a mass >= 0")
    com = r.floats(inertial, attrs, "pos", 3, np.zeros(3))
    R = r.rotation(inertial, attrs)
    if "fullinertia" in attrs:
        if any(k in attrs for k in ("quat", "axisangle", "euler", "xyaxes", "zaxis")):
            raise r.src.error(inertial, "fullinertia takes no orientation")
        a = r.floats(inertial, attrs, "fullinertia", 6)  # Ixx Iyy Izz Ixy Ixz Iyz
        tensor = np.array([[a[0], a[3], a[4]], [a[3], a[1], a[5]], [a[4], a[5], a[2]]])
    elif "diaginertia" in attrs:
        tensor = np.diag(r.floats(inertial, attrs, "diaginertia", 3))
    else:
        raise r.src.error(inertial, "needs diaginertia or fullinertia")
    return Link(name, mass, com, R @ tensor @ R.T, r.src.where(node), node)


def _geom_inertias(src, r, links, names, order):
    """Mass, centre and inertia of the bodies in ``names`` from their geoms, by MuJoCo."""
    try:
        import mujoco
    except ImportError:
        raise src.error(links[names[0]].node, "has no <inertial>; its inertia comes from its "
                        "geoms, which needs the mujoco package (pip install mujoco)") from None
    try:
        m = mujoco.MjModel.from_xml_path(src.path)
    except Exception as e:  # MuJoCo's own message says what it could not compile
        raise ValueError(f"{src.path}: mujoco could not compile the file for the geoms' "
                         f"inertias: {e}") from None
    for name in names:
        i = order.index(name) + 1
        link = links[name]
        R = quat_matrix(m.body_iquat[i])
        link.mass = float(m.body_mass[i])
        link.com = m.body_ipos[i].copy()
        link.inertia = R @ np.diag(m.body_inertia[i]) @ R.T


def _joint(r, node, parent, child, origin, cls, top):
    src = r.src
    attrs = r.attrs(node, cls) if node.tag == "joint" else dict(node.attrib)
    name = attrs.get("name")
    if not name:
        raise src.error(node, "rtrigid needs every joint named (joints keep their file names)")
    kind = "free" if node.tag == "freejoint" else attrs.get("type", "hinge")
    if kind not in JOINT_TYPES:
        raise src.error(node, f"joint type {kind!r} is not one of {sorted(JOINT_TYPES)}")
    if kind == "free" and not top:
        raise src.error(node, "a free joint below the top level is not supported")
    num = {k: r.floats(node, attrs, k, 1, 0.0) for k in
           ("damping", "stiffness", "springref", "armature", "ref", "frictionloss")}
    if num["armature"]:
        if "armature" not in r.ignore:
            raise src.error(node, "armature is not simulated (rtrigid has no rotor inertia); "
                            "pass ignore=('armature',) to drop it")
        r.warn(node, "joint armature ignored")
    if num["ref"]:
        raise src.error(node, "a nonzero ref (a shifted joint zero) is not supported")
    if num["frictionloss"]:
        raise src.error(node, "frictionloss (Coulomb joint friction) is not simulated")
    if kind in ("ball", "free") and (num["damping"] or num["stiffness"]):
        raise src.error(node, f"springs and dampers on {kind} joints are not simulated")
    angular = kind == "hinge"
    info = {}
    rng = r.floats(node, attrs, "range", 2)
    if rng is not None and kind in ("hinge", "slide"):
        lo, hi = (r.angle(rng) if angular else rng)
        limited = attrs.get("limited", "auto")
        if limited == "true" or (limited == "auto" and not (lo == 0.0 and hi == 0.0)):
            info["lower"], info["upper"] = float(lo), float(hi)
    axis = r.floats(node, attrs, "axis", 3, np.array([0.0, 0.0, 1.0]))
    rest = r.angle(num["springref"]) if angular else num["springref"]
    return JointSpec(name, JOINT_TYPES[kind], parent, child, origin,
                     r.floats(node, attrs, "pos", 3, np.zeros(3)), r._unit(node, axis), node,
                     damping=num["damping"], stiffness=num["stiffness"], rest=rest, info=info)


def _actuators(r, root):
    out = []
    for block in root.findall("actuator"):
        for a in block.children:
            if a.tag not in ACTUATORS:
                raise r.src.error(a, "unsupported actuator (motor, position and velocity are)")
            attrs = r.attrs(a, "main")
            if "joint" not in attrs:
                raise r.src.error(a, "only joint actuators are supported")
            entry = {"kind": a.tag, "name": attrs.get("name", ""), "joint": attrs["joint"],
                     "gear": r.floats(a, attrs, "gear", 1, 1.0), "source": r.src.where(a),
                     "node": a}
            for key in ("ctrlrange", "forcerange"):
                v = r.floats(a, attrs, key, 2)
                if v is not None:
                    entry[key] = tuple(float(x) for x in v)
            for key in ("kp", "kv"):
                v = r.floats(a, attrs, key, 1)
                if v is not None:
                    entry[key] = v
            out.append(entry)
    return out


def _geom_part(r, node, cls):
    """The drawing part of a geom (a list of one): a primitive, or a mesh file of <asset>;
    plane, hfield: none."""
    attrs = r.attrs(node, cls)
    kind = attrs.get("type", "sphere")
    size = [float(t) for t in attrs.get("size", "0").split()]
    rgba = r.floats(node, attrs, "rgba", 4)
    pos, R = r.floats(node, attrs, "pos", 3, np.zeros(3)), r.rotation(node, attrs)
    part = {"color": rgba}
    if "fromto" in attrs and kind in ("capsule", "cylinder", "box", "ellipsoid"):
        a, b = np.split(r.floats(node, attrs, "fromto", 6), 2)
        axis = b - a
        length = np.linalg.norm(axis)
        if length < 1e-12:
            raise r.src.error(node, "fromto with two equal points")
        pos = 0.5 * (a + b)
        z = axis / length
        helper = np.array([1.0, 0.0, 0.0]) if abs(z[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
        x = np.cross(helper, z)
        x /= np.linalg.norm(x)
        R = np.column_stack([x, np.cross(z, x), z])
        size = size[:1] + [0.5 * length] + size[1:2]
    try:
        if kind == "sphere":
            part.update(type="sphere", radius=size[0])
        elif kind in ("capsule", "cylinder"):
            part.update(type=kind, radius=size[0], half_length=size[1])
        elif kind == "box":
            part.update(type="box", half_extents=np.array(size[:3]) if len(size) >= 3
                        else np.array([size[0], size[0], size[1]]))
        elif kind == "ellipsoid":
            part.update(type="box", half_extents=np.array(size[:3]))  # drawn as its box
        elif kind == "mesh":
            name = attrs.get("mesh")
            if name not in r.meshes:
                raise r.src.error(node, f"mesh {name!r} is not a mesh file of <asset>")
            if r.meshes[name] is None:
                r.warn(node, "MJCF meshes with inline vertices not drawn")
                return []
            part.update(r.meshes[name])
        else:
            return []
    except IndexError:
        raise r.src.error(node, f"size {attrs.get('size')!r} is too short for a {kind}") from None
    part.update(pos=pos, R=R)
    return [part]
