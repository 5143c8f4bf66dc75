"""Robot description files in: :func:`load_model` reads URDF and a subset of MJCF.

Parsing is the standard library's expat (see :mod:`._xml` for why), so the core install needs
nothing more; the frames and merging rules are in :mod:`.assemble`.
"""
from __future__ import annotations

from rtrigid.loaders._xml import Source


def load_model(path, floating_base=False, *, merge_fixed=True, allow_nonphysical_inertia=False,
               ignore=(), limits=True):
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

    A malformed or unsupported file raises ``ValueError`` naming the file, the element and
    its line; nothing is returned then.
    """
    src = Source(path)
    ignore = tuple(ignore)
    if src.root.tag == "robot":
        from rtrigid.loaders import urdf

        return urdf.read(src, floating_base=floating_base, merge_fixed=merge_fixed,
                         allow_nonphysical_inertia=allow_nonphysical_inertia, ignore=ignore,
                         limits=bool(limits))
    if src.root.tag == "mujoco":
        from rtrigid.loaders import mjcf

        return mjcf.read(src, floating_base=floating_base, merge_fixed=merge_fixed,
                         allow_nonphysical_inertia=allow_nonphysical_inertia, ignore=ignore,
                         limits=bool(limits))
    raise src.error(src.root, "expected a URDF <robot> or an MJCF <mujoco> root element")
