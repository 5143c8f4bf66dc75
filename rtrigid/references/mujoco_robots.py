"""MuJoCo's twins of robots from their files, as rtrigid simulates them with contacts.

``mujoco`` is an optional dependency, imported only inside the functions."""

import numpy as np


def servoed_on_floor(sim, path, *, dt, friction):
    """MuJoCo's model of the URDF ``path`` as ``sim`` simulates it standing on a ground: the
    file's collision geometry (inertias from its ``<inertial>`` only), a free root body, a
    floor plane with the ground's (sliding) ``friction`` and, on each joint, the position servo
    ``sim`` has (kp, kv, force range), at ``sim``'s state and controls; semi-implicit Euler at
    ``dt``.  Returns ``(model, data)``."""
    import mujoco

    spec = mujoco.MjSpec.from_file(str(path))
    spec.compiler.inertiafromgeom = mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_FALSE
    spec.compiler.discardvisual = True
    spec.option.timestep = dt
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_EULER
    spec.worldbody.first_body().add_freejoint()
    floor = spec.worldbody.add_geom()
    floor.type = mujoco.mjtGeom.mjGEOM_PLANE
    floor.size = [0.0, 0.0, 1.0]
    floor.friction = [friction, 0.0, 0.0]
    for a in sim.model.actuators:
        act = spec.add_actuator()
        act.name = a.name
        act.target = sim.model.joints[a.joint].name
        act.trntype = mujoco.mjtTrn.mjTRN_JOINT
        act.set_to_position(kp=a.kp, kv=a.kv)
        if a.force_range is not None:
            act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
            act.forcerange = list(a.force_range)
    model = spec.compile()
    data = mujoco.MjData(model)
    data.qpos[0:7] = np.concatenate(sim.link_pose(model.body(1).name))  # the root link's frame
    for name, u in zip(sim.actuator_names, sim.controls()):
        data.qpos[model.joint(name).qposadr[0]] = sim.joint_position(name)[0]
        data.ctrl[model.actuator(name).id] = u
    return model, data
