"""Robot demos built from the robot files the pybullet_data package ships (the files the
loader's tests read; nothing is fetched at run time).  A demo whose file is not installed is
left out of ``python -m demos``.

Each robot gets one position servo per joint (URDF has no actuators), force range from the
file's ``effort``, gains from the joint-space mass matrix at the starting pose so every joint
answers at about the same rate.
"""
from __future__ import annotations

import os
import warnings

import numpy as np

import rtrigid as rt

IIWA = "kuka_iiwa/model.urdf"
A1 = "a1/a1.urdf"
PANDA = "franka_panda/panda.urdf"
IIWA_POSE = (0.0, 0.6, 0.0, -1.2, 0.0, 0.9, 0.0)
PANDA_HOME = (0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.785)
CUBE_HALF = 0.02                      # the cube's half side (m); it weighs 0.1 kg
CUBE_AT = (0.5, 0.0, 0.2 + CUBE_HALF)  # its centre, resting on the table


def path(robot):
    """The robot file's path in pybullet_data, or None if that package is not installed."""
    try:
        import pybullet_data
    except ImportError:
        return None
    p = os.path.join(pybullet_data.getDataPath(), robot)
    return p if os.path.exists(p) else None


def available(robot):
    return path(robot) is not None


def _load(robot, **options):
    with warnings.catch_warnings():
        # the files' massless links carry an <inertia>: the loader says it ignores it
        warnings.simplefilter("ignore", UserWarning)
        return rt.load_model(path(robot), **options)


def _add_servos(model, probe, count, omega, zeta=1.0):
    """A position servo on each of the first ``count`` joints of ``model`` (kp = M_jj omega^2,
    kv = 2 zeta M_jj omega, M the mass matrix of ``probe``, a simulation of ``model`` at the
    pose the servos hold; force range +- the file's effort), named as its joint."""
    m = np.diag(probe.mass_matrix())
    for k, name in enumerate(probe.joint_names[:count]):
        effort = model.joint_info.get(name, {}).get("effort")
        model.add_actuator(name, "position", kp=m[k] * omega ** 2, kv=2 * zeta * m[k] * omega,
                           force_range=(-effort, effort) if effort else None, name=name)


def servoed(model, pose, integrator, dt, omega, zeta=1.0, base=()):
    """``model`` with a position servo on each joint (kp = M_jj omega^2, kv = 2 zeta M_jj
    omega at ``pose``, force range +- the file's effort), built, at ``pose`` and holding it.
    ``base``: a free base's coordinates (position, quaternion), which follow the joints' in
    qpos."""
    probe = rt.Simulation(model, "nullspace_rk4", dt)
    qpos = np.concatenate([pose, base])
    probe.set_qpos(qpos)
    _add_servos(model, probe, len(pose), omega, zeta)
    sim = rt.Simulation(model, integrator, dt)
    sim.set_qpos(qpos)
    sim.set_controls(np.asarray(pose, dtype=float))
    return sim


def iiwa(integrator="nullspace_rk4", dt=None):
    """KUKA LBR iiwa (7 revolute joints with dampers: ``nullspace_rk4``), fixed base."""
    return servoed(_load(IIWA), IIWA_POSE, integrator, dt or 1e-3, omega=25.0)


def iiwa_controller(sim):
    from .controllers import ServoTeleop

    return ServoTeleop(sim, tip="lbr_iiwa_link_7", reach=True)


LEGS = ("FR", "FL", "RR", "RL")
A1_STANCE = (0.0, 0.8, -1.6)   # hip, thigh (upper), knee (lower), rad


def a1(integrator="energy_momentum", dt=None):
    """Unitree A1, base welded to the world where the file puts it: held in the air."""
    return servoed(_load(A1), A1_STANCE * len(LEGS), integrator, dt or 1e-3, omega=30.0)


def a1_standing(integrator="nullspace_rk4", dt=None):
    """Unitree A1 on the floor: its base free, its collision geometry on a ground (friction
    0.8), standing on 12 position servos stiff enough to carry it (omega 100 rad/s)."""
    model = _load(A1, floating_base=True)
    model.add_ground(friction=0.8)
    return servoed(model, A1_STANCE * len(LEGS), integrator, dt or 1e-3, omega=100.0,
                   base=(0.0, 0.0, 0.31, 1.0, 0.0, 0.0, 0.0))


def a1_controller(sim):
    from .controllers import TrotInTheAir

    names = list(sim.actuator_names)
    # trot: diagonal legs (front right with rear left) in phase
    phase = {"FR": 0.0, "RL": 0.0, "FL": 0.5, "RR": 0.5}
    legs = [(names.index(f"{leg}_upper_joint"), names.index(f"{leg}_lower_joint"), phase[leg])
            for leg in LEGS]
    return TrotInTheAir(sim, A1_STANCE * len(LEGS), legs)


def panda_grasp(integrator="nullspace_rk4", dt=None, ignore=()):
    """Franka Panda from its URDF (its second finger mimic-coupled to the first) with a table
    (a static box, top 0.2 m high) on the floor and a 4 cm cube of 0.1 kg on it (friction 1,
    as the fingers' pads); position servos on the seven arm joints (omega 25 rad/s from the
    joint-space mass matrix at ``PANDA_HOME``), one gripper servo on the first finger
    (2000 N/m, the file's 20 N effort) and a motor on each arm joint for the controller's
    gravity compensation (so its work is the actuators'); the fingers open.  ``ignore``: as
    :func:`rtrigid.load_model` takes it (``("mimic",)`` drops the fingers' coupling)."""
    model = _load(PANDA, ignore=ignore)
    model.add_ground()
    model.add_geom(None, "box", half_extents=(0.15, 0.25, 0.1), pos=(0.5, 0.0, 0.1))
    side = 2.0 * CUBE_HALF
    model.add_body("cube", 0.1, (0.1 * side**2 / 6.0,) * 3)
    model.add_geom("cube", "box", half_extents=(CUBE_HALF,) * 3, friction=1.0)
    dt = dt or 1e-3
    probe = rt.Simulation(model, "nullspace_rk4", dt)
    qpos = probe.qpos()
    qpos[:9] = PANDA_HOME + (0.04, 0.04)
    probe.set_qpos(qpos)
    _add_servos(model, probe, 7, omega=25.0)
    effort = model.joint_info["panda_finger_joint1"]["effort"]
    model.add_actuator("panda_finger_joint1", "position", kp=2000.0, kv=20.0,
                       force_range=(-effort, effort), name="gripper")
    for name in probe.joint_names[:7]:  # gravity compensation: a motor beside each servo
        model.add_actuator(name, "motor", name=f"{name}_gravity")
    sim = rt.Simulation(model, integrator, dt)
    sim.set_qpos(qpos)
    sim.set_position("cube", CUBE_AT)
    sim.set_controls(PANDA_HOME + (0.04,) + (0.0,) * 7)
    return sim


def panda_grasp_controller(sim):
    from .controllers import GraspScript

    return GraspScript(sim, CUBE_AT)

