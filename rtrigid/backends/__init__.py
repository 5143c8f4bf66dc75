"""Backends: the engines behind :class:`rtrigid.Simulation`.

A backend freezes a :class:`~rtrigid.model.Model` into the two kernel buffers of
:mod:`.buffers` and owns what differs between engines: the state layout, the step kernels and
the kinematics that map its state to the bodies' poses.  The façade (:mod:`rtrigid.simulation`)
owns everything else -- the clock, advance and interpolation, loads, impulses, snapshots,
validation and diagnostics -- and reaches a backend only through this protocol:

=============================== ============================================================
``name``                        ``"bodies"`` or ``"tree"``: the registry's key for kernels
``nb``, ``joints``, ``geometry`` body count; each body's inbound :class:`~rtrigid.model.Joint`
                                and its :class:`~rtrigid.joints.Geometry`
``mass``, ``inertia``, ``gravity`` (nb,), (nb, 3) principal moments, (3,)
``F``, ``I``                    the kernel buffers; ``S``, ``S_prev``, ``A``, ``solver``,
                                ``stats`` their sections; ``model_digest`` of the frozen model
``x, q, v, w``                  (nb, 3/4/3/3) views of S: centre of mass, unit quaternion
                                (body -> world), centre-of-mass velocity (world), angular
                                velocity (body frame); ``x_prev``, ``q_prev`` of S_prev.
                                v, w are the scheme's own (its momenta: energy, momentum)
``velocities()``                (v, w) at t, consistent with the joint rates; the views above
                                except under a scheme that declares ``MEAN_RATES`` (its
                                velocities meet the joints only to O(h^2))
``mean_rates``                  whether the scheme declares ``MEAN_RATES`` (see ``velocities()``)
``potential_energy()``          gravity and springs
``joint_state(b)``              (coordinates, rates at t) of body b's inbound joint, copies
``set_joint_state(b, qpos, qvel)`` write them (either may be None), then re-derive the state
``slots(b)``                    (coordinate slice, rate slice) of body b's inbound joint in
                                ``positions()`` and ``rates()``
``positions()``, ``rates()``    every joint's coordinates, and rates at t, in the backend's
                                order (the tree's; body by body for single bodies)
``set_coordinates(qpos, qvel)`` write all of them (either may be None), re-derive the state
``joint_forces``                (nv,) view of the held joint forces in A (rate order), or
                                None where the kernels take none
``set_body(b, x=, q=, v=, w=,``  teleport a body (w in world or body axes); refuses what
``w_frame=)``                   its joint forbids
``impulse(b, point, J)``        velocity jumps of an impulse J at a world point, or None if
                                they would not be finite (nothing is written)
``write_velocities(jump)``      apply what :meth:`impulse` returned
``contact_workspace(contacts,`` what the contact step (:class:`.bodies.contact.ContactStepper`)
``budget)``                     needs of the backend: (bodyi, after, extra)
=============================== ============================================================

:func:`select` picks the backend a model needs.  Backends never import the façade, the
registry or each other; what both need lives in :mod:`.buffers` and :mod:`rtrigid.maths`.
"""
from __future__ import annotations

BODIES = "bodies"
TREE = "tree"


def select(model) -> str:
    """``"bodies"`` when every body is free or attached to the world and no spring joins two
    bodies; ``"tree"`` otherwise (joints between bodies or to the world, loop joints, springs
    between bodies)."""
    if (model.joints or getattr(model, "loop_joints", None)
            or any(s.other >= 0 for s in model.springs)):
        return TREE
    return BODIES

