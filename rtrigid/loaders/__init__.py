"""Robot description files in: :func:`load_model` reads URDF, and MJCF through MuJoCo.

URDF parsing is the standard library's expat (see :mod:`._xml` for why), so the core install
needs nothing more; MJCF is compiled by MuJoCo (the optional extra ``rtrigid[mjcf]``) and the
compiled model converted (:mod:`.mjcf`).  The frames and merging rules are in :mod:`.assemble`,
the load report in :mod:`.report`.
"""

from __future__ import annotations

import os

from rtrigid.loaders._xml import Source


def load_model(
    path,
    floating_base=False,
    *,
    merge_fixed=True,
    allow_nonphysical_inertia=False,
    ignore=(),
    limits=True,
    actuators=None,
    kp=None,
    kv=None,
    collision=True,
    package_dirs=(),
    strict=False,
    self_collision=False,
):
    """The :class:`rtrigid.Model` of a URDF or MJCF file (told apart by the root element).

    MJCF files are compiled by MuJoCo (the optional extra ``rtrigid[mjcf]``) and the
    compiled model is converted (:mod:`rtrigid.loaders.mjcf`): everything MuJoCo's compiler
    accepts is read as MuJoCo reads it, and what rtrigid does not simulate is listed in
    ``model.load_report``.  URDF files are read by :mod:`rtrigid.loaders.urdf`.

    ``floating_base``: the root link moves freely (a free joint named ``free_<root>``)
    instead of being welded to the world.  ``merge_fixed``: links joined by fixed joints
    become one body (the default, for speed); with ``False`` a massive link keeps its own
    body and a fixed joint.  Massless links are always merged into their parent.  Joints keep
    their file names; every link frame is kept (:meth:`Simulation.link_pose`).  Revolute and
    prismatic joints get the file's limits (URDF ``<limit lower upper>``, MJCF ``range`` where
    it is limited) as hard joint limits (``limits=False``: none; a URDF limit with lower >=
    upper is taken as none), MJCF actuators become :meth:`Model.add_actuator` actuators.
    What the model does not simulate (URDF effort and velocity limits) is kept in
    ``model.joint_info``.  ``ignore``: element tags to ignore with a warning instead of
    refusing (e.g. ``("mimic",)``; ``("armature",)`` drops MJCF joint armature,
    ``("frictionloss",)`` its joint friction).  A URDF link's inertia that no body can have
    is repaired as MuJoCo's compiler repairs it and reported as approximated: a point mass
    gets a least moment (``boundinertia``), moments that break the triangle inequality their
    mean (``balanceinertia``; ``allow_nonphysical_inertia=True`` keeps those as given).

    ``actuators``: ``"motor"``, ``"position"`` or ``"velocity"`` gives every revolute and
    prismatic joint that has no actuator from the file and follows no coupling (a URDF
    ``<mimic>``: its source moves it) one actuator of that kind (named as
    its joint, gear 1, gains ``kp``/``kv`` as :meth:`Model.add_actuator` takes them), whose
    force range is the file's ``effort`` (+-effort; none where the file gives none or 0), as
    a URDF's ``<limit effort>`` means.

    ``collision``: load the file's collision geometry (MJCF: planes on the world become
    grounds, other colliding geoms collision geometry, :mod:`rtrigid.loaders.geoms`);
    ``False``: drawing only.  ``package_dirs``: folders where ``package://`` names are looked
    for (URDF).  ``strict``: refuse (``ValueError``) a file with anything the report lists
    as ignored.  ``self_collision`` (URDF): let the robot's links collide with each other
    (but not with the link a joint joins them to); by default they do not, as in pybullet.
    URDF collision geometry: boxes, spheres, cylinders, capsules, and meshes as one convex
    hull per object in the file (:mod:`rtrigid.loaders.urdf`).

    ``model.load_report`` (:class:`rtrigid.loaders.report.LoadReport`) lists what was
    mapped, approximated and ignored, each with its ``file:line``; what was ignored or
    approximated is also warned about once per kind.  ``model.timestep`` is the file's own
    time step (MJCF ``<option timestep>``) or None.

    A malformed or unsupported file raises one ``ValueError`` naming the file, the element
    and its line (for a file MuJoCo cannot compile: MuJoCo's reason and the line it names);
    nothing is returned then.
    """
    from rtrigid.loaders.report import LoadReport

    ignore = tuple(ignore)
    if _root_tag(path) == "mujoco":
        from rtrigid.loaders import mjcf

        model = mjcf.read(
            path,
            floating_base=floating_base,
            merge_fixed=merge_fixed,
            allow_nonphysical_inertia=allow_nonphysical_inertia,
            ignore=ignore,
            limits=bool(limits),
            collision=bool(collision),
            strict=bool(strict),
        )
        model.load_report.warn(stacklevel=3)
    else:
        src = Source(path)
        if src.root.tag != "robot":
            raise src.error(src.root, "expected a URDF <robot> or an MJCF <mujoco> root element")
        from rtrigid.loaders import urdf

        if isinstance(package_dirs, (str, os.PathLike)):
            package_dirs = (package_dirs,)
        report = LoadReport(src.path)
        model = urdf.read(
            src,
            floating_base=floating_base,
            merge_fixed=merge_fixed,
            allow_nonphysical_inertia=allow_nonphysical_inertia,
            ignore=ignore,
            limits=bool(limits),
            collision=bool(collision),
            package_dirs=tuple(package_dirs),
            self_collision=bool(self_collision),
            report=report,
        )
        for what, lines in src.ignored.items():
            for line in lines:
                report.add("ignored", what, "not simulated", f"{src.path}:{line}")
        model.load_report = report
        report.warn(stacklevel=3, kinds=("approximated",))  # (the reader warned the ignored)
        if strict:
            report.refuse_ignored()
    if actuators is not None:
        _add_actuators(model, actuators, kp, kv)
    return model


def _root_tag(path):
    """The tag of the file's root element (leading blanks before the XML allowed, as MuJoCo
    allows them); ``ValueError`` naming the file if it cannot be read or holds no element."""
    from xml.parsers import expat

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ValueError(f"path: cannot read {os.fspath(path)!r}: {e.strerror}") from None
    found = []

    def start(tag, attrib):
        found.append(tag)
        raise StopIteration

    parser = expat.ParserCreate()
    parser.StartElementHandler = start
    try:
        parser.Parse(data.lstrip(), True)
    except StopIteration:
        pass
    except expat.ExpatError as e:
        if not found:
            raise ValueError(
                f"{os.fspath(path)}:{e.lineno}: malformed XML: {expat.ErrorString(e.code)}"
            ) from None
    if not found:
        raise ValueError(f"{os.fspath(path)}: no XML element")
    return found[0]


def _add_actuators(model, kind, kp, kv):
    """One ``kind`` actuator on every revolute or prismatic joint without one, coupled
    followers aside (see
    :func:`load_model`).  A bad kind or gain raises from :meth:`Model.add_actuator`; the
    model is then not returned, so nothing half-built escapes."""
    from rtrigid.model import ACTUATOR_KINDS

    if kind not in ACTUATOR_KINDS:
        raise ValueError(f"actuators: expected one of {list(ACTUATOR_KINDS)}, got {kind!r}")
    driven = {a.joint for a in model.actuators}
    followers = {c.joint for c in model.couplings}  # moved by their couplings' sources
    for j, joint in enumerate(model.joints):
        if joint.kind not in ("revolute", "prismatic") or j in driven or joint.name in followers:
            continue
        effort = model.joint_info.get(joint.name, {}).get("effort")
        model.add_actuator(
            j,
            kind,
            kp=kp,
            kv=kv,
            name=joint.name,
            force_range=(-effort, effort) if effort else None,
        )
