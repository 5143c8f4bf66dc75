"""From a tree of links and joints (as robot files describe them) to an :class:`rtrigid.Model`.

A file describes *links*, each with its own frame, its mass, centre of mass and inertia tensor
in that frame, and *joints* between a parent and a child link.  rtrigid's bodies sit at their
centre of mass on principal axes, so the loader:

1. groups links welded together: through a fixed joint a link joins its parent's group when
   it is massless (frames, tool tips, sensor mounts: never given made-up inertia) or when
   ``merge_fixed`` is set (the default); the root group of a fixed-base robot is the world;
2. sums each group's mass, centre of mass and inertia tensor (parallel axes) and diagonalises
   the tensor (``numpy.linalg.eigh``: any orthonormal eigenbasis serves when moments repeat;
   a diagonal tensor keeps the link axes);
3. re-expresses every joint anchor, axis and the relative rotation at zero joint coordinates
   in the body frames, and records every link frame in its body's frame
   (:attr:`Model.links`, read by :meth:`Simulation.link_pose`).

Transforms are pairs ``(p, R)``: the frame's origin and axes in its reference frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rtrigid.maths import quat
from rtrigid.model import Model
from rtrigid.model_records import broken_triangle

WORLD = -1
KIND_OF = {
    "revolute": "revolute",
    "prismatic": "prismatic",
    "fixed": "fixed",
    "planar": "planar",
    "spherical": "spherical",
    "floating": "free",
}


@dataclass
class Link:
    """A link: mass, centre of mass and inertia tensor (about the centre, link axes)."""

    name: str
    mass: float
    com: np.ndarray
    inertia: np.ndarray
    where: str  # "file:line", for messages
    node: object = None
    virtual: bool = False  # a massless link between two joints of one file body
    visuals: list = field(default_factory=list)  # drawing parts, "pos"/"R" in the link frame
    collisions: list = field(default_factory=list)  # geom specs, "pos"/"R" in the link frame


@dataclass
class JointSpec:
    """A joint as the file gives it.

    ``origin``: the child link frame in the parent link frame at zero joint coordinates.
    ``anchor``, ``axis``: the joint point and axis in the child link frame.
    ``info``: what the model does not simulate yet (limits, effort, velocity), kept for the
    user in :attr:`Model.joint_info`.  ``position``: the initial coordinate (None: zero, or
    the nearer limit); ``armature``, ``friction``: the rotor inertia and Coulomb friction
    of :meth:`Model.add_joint`.
    """

    name: str
    kind: str
    parent: str
    child: str
    origin: tuple
    anchor: np.ndarray
    axis: np.ndarray
    node: object
    damping: float = 0.0
    stiffness: float = 0.0
    rest: float = 0.0
    info: dict = field(default_factory=dict)
    position: float | None = None
    armature: float = 0.0
    friction: float = 0.0


def rpy_matrix(rpy):
    """URDF roll-pitch-yaw: R = Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def quat_matrix(q):
    q = np.asarray(q, float)
    return quat.rotmat(q / np.linalg.norm(q), np.empty((3, 3)))


def matrix_quat(R):
    return quat.spurrier_klumpp(np.ascontiguousarray(R), np.empty(4))


def compose(a, b):
    return a[0] + a[1] @ b[0], a[1] @ b[1]


def inverse(a):
    return -a[1].T @ a[0], a[1].T


IDENTITY = (np.zeros(3), np.eye(3))


def principal_axes(inertia):
    """Principal moments and a right-handed rotation whose columns are the principal axes."""
    off = inertia - np.diag(np.diag(inertia))
    if not np.any(off):
        return np.diag(inertia).copy(), np.eye(3)
    moments, axes = np.linalg.eigh(0.5 * (inertia + inertia.T))
    if np.linalg.det(axes) < 0.0:
        axes[:, 2] = -axes[:, 2]
    return moments, axes


BOUND_INERTIA = 1e-6  # the least principal moment of a massive link, per kg (kg m^2 / kg)


def _repaired(moments, mass, allow_nonphysical, report, where):
    """A file link's principal moments, repaired as MuJoCo's compiler repairs them when told
    to, and as PyBullet takes them without a word: a moment <= 0 of a link with mass is
    raised to BOUND_INERTIA per kg (``boundinertia``; a point mass cannot turn about its
    joint otherwise), and moments that break the triangle inequality are all set to their
    mean (``balanceinertia``; unless ``allow_nonphysical``).  Each repair is reported as
    approximated."""
    if mass > 0.0 and np.any(moments <= 0.0):
        bound = BOUND_INERTIA * mass
        if report is not None:
            report.add(
                "approximated",
                "inertia",
                f"principal moments {np.round(moments, 12).tolist()} raised to at "
                f"least {bound:g} (MuJoCo's boundinertia)",
                where,
            )
        moments = np.maximum(moments, bound)
    if not allow_nonphysical and broken_triangle(moments) is not None:
        if report is not None:
            report.add(
                "approximated",
                "inertia",
                f"principal moments {moments.tolist()} break the triangle inequality: "
                "all set to their mean (MuJoCo's balanceinertia; "
                "allow_nonphysical_inertia=True keeps them)",
                where,
            )
        moments = np.full(3, moments.mean())
    return moments


def build(
    source,
    links,
    joints,
    root,
    *,
    floating_base,
    merge_fixed,
    allow_nonphysical_inertia,
    gravity=(0.0, 0.0, -9.81),
    limits=True,
    report=None,
    self_collision=True,
):
    """The :class:`Model` of a tree of ``links`` and ``joints``.

    ``root`` is the element errors about the tree as a whole name.  ``source`` is the
    :class:`rtrigid.loaders._xml.Source` the errors name.  ``limits``: give revolute and
    prismatic joints the file's limits (``lower``/``upper`` of their info).  The links'
    ``collisions`` become geoms on their bodies (listed in ``report``); without
    ``self_collision`` no two bodies of the tree touch each other.  Nothing is returned
    unless every body and joint was accepted.
    """
    by_child = {}
    children = {name: [] for name in links}
    for j in joints:
        for end in (j.parent, j.child):
            if end not in links:
                raise source.error(j.node, f"names link {end!r}, which the file does not define")
        if j.child in by_child:
            raise source.error(
                j.node,
                f"link {j.child!r} already has a parent joint "
                f"({by_child[j.child].name!r}); closed loops are not "
                "supported",
            )
        by_child[j.child] = j
        children[j.parent].append(j)
    roots = [name for name in links if name not in by_child]
    if len(roots) != 1:
        raise source.error(
            root,
            f"expected one root link (a link no joint has as child), "
            f"found {roots or 'none (a loop)'}",
        )
    root = roots[0]

    # 1. groups, walking from the root: group[link] = (group root link, link in root frame)
    group = {root: (root, IDENTITY)}
    order, moving = [root], []

    def visit(name):  # depth first in file order: bodies come out as the file lists them
        for j in children[name]:
            weld = j.kind == "fixed" and (merge_fixed or links[j.child].mass == 0.0)
            if weld:
                g, T = group[name]
                group[j.child] = (g, compose(T, j.origin))
            else:
                group[j.child] = (j.child, IDENTITY)
                order.append(j.child)
                moving.append(j)
            visit(j.child)

    visit(root)
    unreached = sorted(set(links) - set(group))
    if unreached:
        raise source.error(
            links[unreached[0]].node,
            f"not connected to the root link {root!r}; a file holds one tree",
        )

    # 2. each group's mass, centre of mass and inertia in its root link's frame
    model = Model(gravity=gravity)
    frames = {}  # group root -> (body index or WORLD, body frame in the root link frame)
    members = {g: [] for g in order}
    for name, (g, T) in group.items():
        members[g].append((name, T))
    fixed_world = not floating_base
    for g in order:
        if g == root and fixed_world:
            frames[g] = (WORLD, IDENTITY)
            continue
        mass, first = 0.0, np.zeros(3)
        for name, (p, R) in members[g]:
            link = links[name]
            mass += link.mass
            first += link.mass * (p + R @ link.com)
        if mass <= 0.0 and links[g].virtual:
            frames[g] = (model.add_body(g, 0.0, np.zeros(3), massless=True), IDENTITY)
            continue
        if mass <= 0.0:
            raise source.error(
                links[g].node,
                "has no mass (nor any link welded to it), but "
                "it moves; rtrigid gives no body made-up inertia",
            )
        com = first / mass
        inertia = np.zeros((3, 3))
        for name, (p, R) in members[g]:
            link = links[name]
            d = p + R @ link.com - com
            inertia += R @ link.inertia @ R.T + link.mass * (d @ d * np.eye(3) - np.outer(d, d))
        moments, axes = principal_axes(inertia)
        moments = _repaired(
            moments, mass, allow_nonphysical_inertia, report, source.where(links[g].node)
        )
        try:
            b = model.add_body(
                g, mass, moments, allow_nonphysical_inertia=allow_nonphysical_inertia
            )
        except ValueError as e:
            raise source.error(
                links[g].node,
                f"{e} (the inertia of the link"
                f"{'s ' + ', '.join(n for n, _ in members[g]) if len(members[g]) > 1 else ''}"
                " about their centre of mass)",
            ) from None
        frames[g] = (b, (com, axes))
    if floating_base:
        b, B = frames[root]
        model.bodies[b].pose0 = (B[0].copy(), matrix_quat(B[1]))

    # 3. link frames in body frames, then the joints
    parts = {}
    for name, (g, T) in group.items():
        b, B = frames[g]
        p, R = compose(inverse(B), T)
        model.links[name] = (b, p, matrix_quat(R))
        for part in links[name].visuals:
            pp, pR = compose((p, R), (part["pos"], part["R"]))
            parts.setdefault(b, []).append(
                {**{k: v for k, v in part.items() if k != "R"}, "pos": pp, "quat": matrix_quat(pR)}
            )
    # without self-collision, a fixed base's geoms (on the world) are in filter group 2: the
    # robot's links (group 1) pass through their own base; what has bit 2 touches it
    base_bits = 1 if self_collision else 2
    for name, (g, T) in group.items():
        _add_collisions(source, model, links[name], *frames[g], T, report, base_bits)
    if not self_collision:
        touching = sorted({g.body for g in model.geoms if g.body is not None})
        for i, a in enumerate(touching):
            for b in touching[i + 1 :]:
                model.exclude_contacts(a, b)
    for b, body_parts in parts.items():
        shape = model.check_shape(("visuals", {"parts": body_parts}))
        if b == WORLD:
            model.world_shape = shape
        else:
            model.bodies[b].shape = shape
    for j in moving:
        gp, Tp = group[j.parent]
        bp, Bp = frames[gp]
        bc, Bc = frames[j.child]
        parent_link = compose(inverse(Bp), Tp)  # parent link in parent body
        child_link = inverse(Bc)  # child link in child body
        at_zero = compose(parent_link, j.origin)  # child link in parent body, zero coords
        r0 = at_zero[1] @ child_link[1].T  # child body axes in parent body axes
        anchor_child = child_link[0] + child_link[1] @ j.anchor
        anchor_parent = at_zero[0] + at_zero[1] @ j.anchor
        kind = KIND_OF[j.kind]
        if kind == "free":
            if bp != WORLD:
                raise source.error(
                    j.node,
                    "a floating joint below the root is not supported "
                    "(rtrigid's free joints are tree roots)",
                )
            pose = compose(at_zero, Bc)
            model.bodies[bc].free_joint = j.name
            model.bodies[bc].pose0 = (pose[0], matrix_quat(pose[1]))
            model.joint_info[j.name] = dict(kind=kind, source=source.where(j.node), **j.info)
            continue
        axis = {}
        if kind in ("revolute", "prismatic", "planar"):
            axis = dict(axis_child=child_link[1] @ j.axis, axis_parent=at_zero[1] @ j.axis)
        coordinate = (
            dict(
                damping=j.damping,
                stiffness=j.stiffness,
                rest=j.rest,
                armature=j.armature,
                friction=j.friction,
            )
            if kind in ("revolute", "prismatic")
            else {}
        )
        lo, hi = j.info.get("lower", -np.inf), j.info.get("upper", np.inf)
        if (
            limits
            and kind in ("revolute", "prismatic")
            and lo < hi
            and (lo, hi) != (-np.inf, np.inf)
        ):
            coordinate["limits"] = (lo, hi)
        if j.position is not None and kind in ("revolute", "prismatic"):
            coordinate["position"] = j.position
        try:
            model.add_joint(
                kind,
                None if bp == WORLD else bp,
                bc,
                anchor_parent=anchor_parent,
                anchor_child=anchor_child,
                name=j.name,
                **axis,
                **coordinate,
                rotation=matrix_quat(r0),
            )
        except ValueError as e:
            raise source.error(j.node, str(e)) from None
        model.joint_info[j.name] = dict(kind=kind, source=source.where(j.node), **j.info)
    if floating_base:
        model.joint_info[f"free_{root}"] = dict(kind="free", source=source.where(links[root].node))
    return model


def _add_collisions(source, model, link, b, B, T, report, base_bits=1):
    """The link's collision specs as geoms of body b (body frame B, link frame T in the
    group's root link frame; on the world their contype and conaffinity are ``base_bits``).
    A mesh file that cannot be read is ignored with a warning (and in the report); other bad
    geometry is refused naming its line."""
    p, R = compose(inverse(B), T)
    for c in link.collisions:
        cp, cR = compose((p, R), (c["pos"], c["R"]))
        where = source.where(c["node"])
        if c["kind"] == "plane":
            if b != WORLD:
                source.ignored.setdefault("a plane on a moving link ignored", []).append(
                    c["node"].line
                )
                continue
            n = cR @ c["params"]["normal"]
            n = n / np.linalg.norm(n)
            model.add_ground(
                height=float(n @ cp), normal=n, friction=c["friction"], restitution=c["restitution"]
            )
            if report is not None:
                report.add("mapped", "plane collision", "a ground", where)
            continue
        try:
            bits = base_bits if b == WORLD else 1
            model.add_geom(
                None if b == WORLD else b,
                c["kind"],
                pos=cp,
                quat=matrix_quat(cR),
                friction=c["friction"],
                restitution=c["restitution"],
                contype=bits,
                conaffinity=bits,
                **c["params"],
            )
        except (ValueError, ImportError) as e:  # ImportError: trimesh or scipy missing
            if c["kind"] != "mesh":
                raise source.error(c["node"], f"<collision>: {e}") from None
            source.ignored.setdefault(f"collision mesh not read ({e})", []).append(c["node"].line)
            continue
        if report is not None:
            report.add("mapped", "collision geom", c["kind"], where)


def resolve(base_dir, name, package_dirs=()):
    """The path of a file a robot file names (relative, ``file://`` or ``package://``), or
    None if it is not found: ``package://pkg/rest`` is looked for as ``pkg/rest`` and
    ``rest`` in ``package_dirs``, then in the file's folder and the folders above it."""
    import os

    if name.startswith("file://"):
        name = name[len("file://") :]
    if not name.startswith("package://"):
        path = name if os.path.isabs(name) else os.path.join(base_dir, name)
        return path if os.path.isfile(path) else None
    rest = name[len("package://") :].lstrip("/")
    candidates = [rest] + ([rest.split("/", 1)[1]] if "/" in rest else [])
    for folder in package_dirs:
        for c in candidates:
            if os.path.isfile(os.path.join(os.fspath(folder), c)):
                return os.path.join(os.fspath(folder), c)
    folder = os.path.abspath(base_dir)
    for _ in range(4):
        for c in candidates:
            if os.path.isfile(os.path.join(folder, c)):
                return os.path.join(folder, c)
        folder = os.path.dirname(folder)
    return None
