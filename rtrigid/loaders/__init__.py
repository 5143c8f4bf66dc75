"""Robot description files in: :func:`load_model` reads URDF and a subset of MJCF.

Parsing is the standard library's expat (see :mod:`._xml` for why), so the core install needs
nothing more; the frames and merging rules are in :mod:`.assemble`.
"""
from __future__ import annotations

from rtrigid.loaders._xml import Source


def load_model(path, floating_base=False, *, merge_fixed=True, allow_nonphysical_inertia=False,
               ignore=(), limits=True, actuators=None, kp=None, kv=None):
    """The :class:`rtrigid.Model` of a URDF or MJCF file (told apart by the root element).

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
    refusing (e.g. ``("mimic",)``).

    ``actuators``: ``"motor"``, ``"position"`` or ``"velocity"`` gives every revolute and
    prismatic joint that has no actuator from the file one actuator of that kind (named as
    its joint, gear 1, gains ``kp``/``kv`` as :meth:`Model.add_actuator` takes them), whose
    force range is the file's ``effort`` (+-effort; none where the file gives none or 0), as
    a URDF's ``<limit effort>`` means.

    A malformed or unsupported file raises ``ValueError`` naming the file, the element and
    its line; nothing is returned then.
    """
    src = Source(path)
    ignore = tuple(ignore)
    if src.root.tag == "robot":
        from rtrigid.loaders import urdf

        model = urdf.read(src, floating_base=floating_base, merge_fixed=merge_fixed,
                          allow_nonphysical_inertia=allow_nonphysical_inertia, ignore=ignore,
                          limits=bool(limits))
    elif src.root.tag == "mujoco":
        from rtrigid.loaders import mjcf

        model = mjcf.read(src, floating_base=floating_base, merge_fixed=merge_fixed,
                          allow_nonphysical_inertia=allow_nonphysical_inertia, ignore=ignore,
                          limits=bool(limits))
    else:
        raise src.error(src.root, "expected a URDF <robot> or an MJCF <mujoco> root element")
    if actuators is not None:
        _add_actuators(model, actuators, kp, kv)
    return model


def _add_actuators(model, kind, kp, kv):
    """One ``kind`` actuator on every revolute or prismatic joint without one (see
    :func:`load_model`).  A bad kind or gain raises from :meth:`Model.add_actuator`; the
    model is then not returned, so nothing half-built escapes."""
    from rtrigid.model import ACTUATOR_KINDS

    if kind not in ACTUATOR_KINDS:
        raise ValueError(f"actuators: expected one of {list(ACTUATOR_KINDS)}, got {kind!r}")
    driven = {a.joint for a in model.actuators}
    for j, joint in enumerate(model.joints):
        if joint.kind not in ("revolute", "prismatic") or j in driven:
            continue
        effort = model.joint_info.get(joint.name, {}).get("effort")
        model.add_actuator(j, kind, kp=kp, kv=kv, name=joint.name,
                           force_range=(-effort, effort) if effort else None)
